#pragma once
// Where the ranks of one machine and their progress threads run.
//
// How this layer works. Every function here is pure: (machine_topology,
// number of local ranks, options) in, placements out, each with the reason it
// was chosen, in words. Nothing calls hwloc or the kernel, so tests compute
// placements for a 64-core node on a 2-core one; nmad-info --placement prints
// them, nmad-run applies the rank placement (binding) and will hand the
// progress placement to the ranks' progress engines.
//
// Ranks: scatter by NUMA (Taboada et al.). Rank i goes to NUMA node i mod M
// (skipping nodes already full, so nodes of unequal size get balanced counts);
// the k ranks of a node spread over its c cores, the j-th of them on the
// node's core floor(j*c/k). With more ranks than cores a rank gets one PU
// instead of a core (first PUs of every core, then the SMT siblings); with
// more ranks than PUs, PUs are shared round robin (oversubscribed).
//
// Progress threads (one per rank), by policy:
//   bind        on the rank's own core;
//   numa        on a free core (no rank on it) of the rank's NUMA node, free
//               cores shared round robin among the node's ranks; none free:
//               the rank's core. Never on another NUMA node;
//   dedicated   on a pool of free cores (all, or `dedicated_cores` of them,
//               taken round robin over the NUMA nodes); a thread uses the pool
//               cores of its own node when there are any;
//   smt         on an SMT sibling of the rank's PU (the rank keeps its core's
//               first PU); no sibling: the rank's core;
//   odd-even    chain collectives (scan, exscan): even ranks' threads on one
//               dedicated core, odd ranks' on another, each on the NUMA node
//               holding most of its ranks;
//   split-tree  tree collectives: the first S levels of the tree on the ranks'
//               cores, the rest folded onto the P free cores, S chosen by the
//               cost model below.
//   float       anywhere on the rank's NUMA node (all its CPUs): the kernel
//               runs it on whichever core is idle;
//   pair        on the core of its rank's partner: the ranks of a NUMA node,
//               in rank order, go in pairs (1st with 2nd, 3rd with 4th...),
//               each thread on the other rank's core; a node's last rank
//               without a partner shares the previous pair's second core,
//               a rank alone on its node keeps its own core. When partners
//               exchange, one computes while the other waits in the library:
//               the computing rank's thread then runs on the waiting rank's
//               core, the one core of a full node with time to spare. What
//               hides a transfer on both sides of a two-rank exchange on two
//               cores, where float leaves the kernel to guess (it often
//               wakes the thread on the computing rank's core);
//   auto        numa where the rank's node has a free core, pair otherwise
//               (the default of NMAD_PROGRESS_PLACEMENT).
//
// Split-tree cost model, N ranks, H = ceil(log2 N), P = cores - N:
//   T(S,N) = min(S,H) + sum_{i=S+1..H} ceil(F(N,i) / P)
//   F(N,i) = 2^(floor(log2 N) - i) + floor((R + 2^(i-1)) / 2^i),  R = N - 2^floor(log2 N)
// 2^(floor(log2 N) - i) is a real number: when N is not a power of two the
// last level (i = H = floor(log2 N) + 1) has F = 1/2 and costs one step, the
// tree's final message; read as an integer division it would cost nothing.
// P <= 0 (no free core) gives S = H. Among the S of least cost the smallest
// wins: more of the tree leaves the application cores.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/nmad/services/topology.hpp"

namespace nmad::topology {

struct rank_place {
  int rank = 0;
  int core = 0;            // dense core index (machine_topology::cores())
  int numa = 0;            // dense NUMA index
  std::vector<int> cpus;   // kernel CPU numbers it is bound to
  bool whole_core = true;  // bound to all PUs of its core (false: one PU)
  std::string reason;
};

// Scatter by NUMA, as above. n >= 1; throws std::invalid_argument otherwise.
std::vector<rank_place> place_ranks(const machine_topology& topo, int n);

// Cores no rank is on, in dense order (none when ranks were given single PUs).
std::vector<int> free_cores(const machine_topology& topo, const std::vector<rank_place>& ranks);

enum class progress_policy { bind, numa, dedicated, smt, odd_even, split_tree, float_node, pair, automatic };

// "bind", "numa", "dedicated", "smt", "odd-even", "split-tree", "float",
// "pair", "auto" (also with '_').
std::optional<progress_policy> parse_progress_policy(std::string_view name);
std::string_view name_of(progress_policy p);
// Every policy, in the order above.
const std::vector<progress_policy>& all_progress_policies();

struct progress_options {
  progress_policy policy = progress_policy::automatic;
  int dedicated_cores = 0;  // dedicated: size of the pool, 0 = every free core
};

struct progress_place {
  int rank = 0;
  int core = 0;             // dense core index of the thread
  int numa = 0;
  std::vector<int> cpus;    // kernel CPU numbers
  bool on_rank_core = false;
  // split-tree: where this rank's levels above S run (-1 and empty: it has
  // none, or S = H).
  int deep_core = -1;
  std::vector<int> deep_cpus;
  std::string reason;
};

struct split_tree_choice {
  int n = 0;
  int height = 0;           // H
  int progress_cores = 0;   // P (may be <= 0)
  int split = 0;            // S
  std::vector<long> cost;   // T(S,N) for S = 0..H
};

// F(N,i) * 2^i, exact (F itself may be 1/2). n >= 1, 1 <= i.
long split_tree_level_ops_scaled(int n, int i);
// T(S,N) with P progress cores; for P <= 0 the levels above S cannot run
// anywhere: returns -1 for S < H.
long split_tree_cost(int s, int n, int progress_cores);
split_tree_choice choose_split(int n, int progress_cores);
// The Markdown table of S for N = 1..max_n on a machine of `cores` cores
// (P = cores - N): columns N, H, P, S, T(S,N), T(0,N), T(H,N).
std::string split_tree_table(int cores, int max_n);

// One progress thread per rank, in rank order. `ranks` comes from place_ranks
// on the same topology.
std::vector<progress_place> place_progress(const machine_topology& topo, const std::vector<rank_place>& ranks,
                                           const progress_options& opts);

// Ranks and their progress threads together; under smt a rank whose core has
// a sibling keeps only the core's first PU, so its thread has one of its own.
struct job_placement {
  std::vector<rank_place> ranks;
  std::vector<progress_place> progress;
  std::optional<split_tree_choice> split;  // split-tree only
};
job_placement place_job(const machine_topology& topo, int n, const progress_options& opts);

}  // namespace nmad::topology
