#pragma once
// The machine as the placement policy sees it: processing units (PUs, the
// kernel's CPUs) grouped into cores, NUMA nodes and packages.
//
// How this layer works. hwloc is asked once; what the policy needs is copied
// into a plain value type, `machine_topology`, and hwloc is closed again.
// Everything downstream (api/nmad/services/placement.hpp, nmad-info, nmad-run)
// works on that value only, so placements are pure functions that tests run
// on synthetic machines much larger than the one they run on. A topology
// comes from
//   * this machine (`load_host`), shared read-only through `shared_host()`;
//   * a synthetic description (`load_synthetic("pack:2 numa:2 core:12 pu:2")`,
//     hwloc's syntax; the last level must be `pu:N`);
//   * an hwloc XML export (`load_xml(path)`, e.g. `lstopo --of xml`);
//   * the environment (`from_env`): NMAD_TOPOLOGY (a synthetic description or
//     an XML path), else HWLOC_XMLFILE, else HWLOC_SYNTHETIC, else this machine.
// Only a topology that describes this machine (`this_system`) may be used to
// bind: the CPU numbers of a synthetic one need not exist here.
//
// Thread safety: values are immutable once built; `shared_host()` and
// `shared_from_env()` load at most once (first caller) and may be called from
// any thread. Loaders throw `topology_error` with a message naming the input.
#include <stdexcept>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace nmad::topology {

struct topology_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One processing unit as hwloc reports it. Labels are hwloc logical indexes
// (stable for a given machine, 0-based per type); a machine without a core
// level gives each PU a core of its own, one without NUMA information puts
// every PU on NUMA node 0, one without packages on package 0.
struct pu_info {
  int os_index = 0;  // the kernel's CPU number (what sched_setaffinity takes)
  int core = 0;      // label of its core
  int numa = 0;      // label of the first NUMA node whose CPUs include it
  int package = 0;   // label of its package
  // Labels of the caches above it (data or unified), -1 when the machine
  // reports none at that level (synthetic topologies without `l3:`...).
  int l3 = -1;
  int l2 = -1;
  int l1 = -1;
};

// Dense views built from the PUs (indexes 0..n-1, in hwloc logical order,
// so a NUMA node's cores are consecutive on ordinary machines).
struct core_desc {
  int label = 0;
  int numa = 0;              // dense NUMA index
  int package = 0;           // dense package index
  std::vector<int> pus;      // indexes into machine_topology::pus, hwloc order (SMT siblings)
};

struct numa_desc {
  int label = 0;
  std::vector<int> cores;    // dense core indexes, in order
};

class machine_topology {
 public:
  machine_topology() = default;
  // Builds the dense views. Throws topology_error on an empty list or a
  // repeated os_index. `source` says where it came from ("host",
  // "synthetic:SPEC", "xml:PATH", "cpus:LIST").
  machine_topology(std::vector<pu_info> pus, std::string source, bool this_system);

  const std::vector<pu_info>& pus() const { return _pus; }
  const std::vector<core_desc>& cores() const { return _cores; }
  const std::vector<numa_desc>& numa_nodes() const { return _numa; }
  int package_count() const { return _packages; }
  int pu_count() const { return static_cast<int>(_pus.size()); }
  int core_count() const { return static_cast<int>(_cores.size()); }
  int numa_count() const { return static_cast<int>(_numa.size()); }
  // Kernel CPU numbers of a core's PUs.
  std::vector<int> cpus_of_core(int core) const;
  const std::string& source() const { return _source; }
  // True when the os indexes are this machine's CPUs (so binding to them works).
  bool this_system() const { return _this_system; }
  // "2 package(s), 4 NUMA node(s), 48 core(s), 96 PU(s)".
  std::string summary() const;

 private:
  std::vector<pu_info> _pus;
  std::vector<core_desc> _cores;
  std::vector<numa_desc> _numa;
  int _packages = 0;
  std::string _source;
  bool _this_system = false;
};

// The PUs whose os_index is in `cpus` (e.g. the launcher's affinity mask);
// cores and NUMA nodes left without a PU disappear. Throws topology_error when
// nothing is left.
machine_topology restrict_to(const machine_topology& topo, const std::vector<int>& cpus);

// A machine of these CPUs, one core each, one NUMA node, one package: the
// fallback when hwloc cannot describe this machine. Marked this_system.
machine_topology flat_topology(const std::vector<int>& cpus);

// Loaders (hwloc). Each throws topology_error naming its input on failure.
machine_topology load_host();
machine_topology load_synthetic(std::string_view spec);
machine_topology load_xml(const std::string& path);
// A synthetic description or an XML file: SPEC is taken as a file when it
// names an existing file or ends in ".xml".
machine_topology load_spec(std::string_view spec);
// NMAD_TOPOLOGY (load_spec), else HWLOC_XMLFILE, else HWLOC_SYNTHETIC, else
// load_host(). Read at each call; prefer shared_from_env().
machine_topology from_env();

// Loaded on first use and shared for the life of the process. A failure is
// remembered and thrown again to later callers.
const machine_topology& shared_host();
const machine_topology& shared_from_env();

// The CPUs this process may run on (sched_getaffinity), ascending.
std::vector<int> allowed_cpus();

// "0-3,8,10-11" (ascending, duplicates ignored); "" for none.
std::string cpu_list(std::vector<int> cpus);
// The inverse: "0-3,8" -> {0,1,2,3,8} (ascending, no duplicates); nullopt
// for an empty or malformed list or a CPU number outside 0..65535.
std::optional<std::vector<int>> parse_cpu_list(std::string_view text);

}  // namespace nmad::topology
