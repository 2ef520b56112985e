#pragma once
// Hardware levels for communicators split along the machine's hierarchy
// (MPI-4.0 7.4.2 MPI_COMM_TYPE_HW_GUIDED / MPI_COMM_TYPE_HW_UNGUIDED, and
// the hsplit extensions of Goglin, Jeannot, Mansouri and Mercier, 2018).
//
// How this layer works. A process is described, at each level of the
// hierarchy (machine, package, NUMA node, L3, L2, L1, core, PU), by the one
// object of that level its binding lies in, or by "spans several" when its
// PUs belong to more than one (an unbound process spans every package of a
// two-package machine). `locate` computes that from a machine_topology and
// a set of CPUs; everything else is a pure function of the processes'
// (host identity, location) pairs, so the MPI layer only gathers them and
// every process computes the same colors, and tests run the logic on
// synthetic machines and made-up bindings without MPI.
//
// Rules (MPI-4.0 7.4.2):
//   * two processes are in the same group at level L when they are on the
//     same host (equal host identities) and their bindings lie in the same
//     object of level L; a process spanning several objects of L, or on a
//     machine without level L, is in no group (MPI_COMM_NULL);
//   * the guided split at L is exactly that;
//   * the unguided split takes the first level, from the machine down, that
//     really divides the group: some process is in a group, and no group
//     holds every process. None: every process gets MPI_COMM_NULL.
// Levels are tried in the machine's own order (`hw_level_order`): from the
// level with the fewest objects to the one with the most, ties in the order
// of `hw_level`. So an L3 shared by a package's two NUMA nodes comes before
// them (as in hwloc's tree), an L3 per NUMA node after it, and a level that
// does not divide a group is skipped. Caches are data or unified caches
// (hwloc's L1d, not L1i).
//
// Thread safety: pure functions on values.
#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/nmad/services/topology.hpp"

namespace nmad::topology {

enum class hw_level { machine, package, numa, l3, l2, l1, core, pu };
constexpr int hw_level_count = 8;

// Every level, in the usual nesting from the machine down.
const std::array<hw_level, hw_level_count>& all_hw_levels();

// The levels `topo` has (absent ones left out), from the fewest objects to
// the most, ties in the order of all_hw_levels(). Starts with the machine.
std::vector<hw_level> hw_level_order(const machine_topology& topo);

// hwloc's type names: "Machine", "Package", "NUMANode", "L3Cache",
// "L2Cache", "L1Cache", "Core", "PU".
std::string_view hw_level_name(hw_level l);

// A resource type name as a user writes it: hwloc's type names, any case,
// optionally after "hwloc://" (MPI-4.1's URI form), plus the aliases
// "Node"/"Host" (machine), "Socket" (package), "NUMA", "L3"/"L2"/"L1"/"L1d",
// "HWThread"/"Thread" (PU). nullopt for anything else (including
// "mpi_shared_memory", which the MPI layer handles itself).
std::optional<hw_level> parse_hw_level(std::string_view name);

// Object of each level that a process lies in, indexed by hw_level:
// an object label (>= 0), hw_spans or hw_absent. The machine level is
// always 0 (every PU is in the machine), so its groups are the hosts.
constexpr int hw_spans = -1;   // its PUs belong to several objects of the level
constexpr int hw_absent = -2;  // the machine has no object of that level
using hw_location = std::array<int, hw_level_count>;

// Where a process bound to `cpus` (kernel CPU numbers of `topo`) lies.
// CPUs outside the topology are ignored; none left (or `cpus` empty): the
// process is unbound, it spans every level that has more than one object.
hw_location locate(const machine_topology& topo, const std::vector<int>& cpus);

// One process of a group being split.
struct hw_member {
  std::string host;    // host identity: equal strings are the same machine
  hw_location where{};
  bool takes_part = true;  // false: it passed MPI_UNDEFINED
};

// Color of member `me` at level l: the index of the first member of its
// group (same host, same object), or -1 when it is in no group (spans the
// level, the level is absent, or it does not take part).
int hw_color(const std::vector<hw_member>& members, int me, hw_level l);

// True when the split at l divides the group of the members taking part:
// some member is in a group and no group holds all of them.
bool hw_level_divides(const std::vector<hw_member>& members, hw_level l);

// The unguided level: the first level of `order` (hw_level_order of the
// members' machine) that divides the group; nullopt when none does.
std::optional<hw_level> hw_unguided_level(const std::vector<hw_member>& members, const std::vector<hw_level>& order);

// Groups of a split at level l: how many there are and, for member me, the
// index of its group among them (groups in order of their first member);
// index -1 when me is in none.
struct hw_siblings {
  int count = 0;
  int index = -1;
};
hw_siblings hw_group_siblings(const std::vector<hw_member>& members, int me, hw_level l);

// The deepest level (last in `order`) whose one object holds all of `who`
// (indexes into members), each bound inside it, all on one host; nullopt
// when they are on different hosts or `who` is empty.
std::optional<hw_level> hw_common_level(const std::vector<hw_member>& members, const std::vector<int>& who,
                                        const std::vector<hw_level>& order);

}  // namespace nmad::topology
