#include "api/nmad/services/topology.hpp"

#include <hwloc.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "api/nmad/services/config.hpp"

namespace nmad::topology {

machine_topology::machine_topology(std::vector<pu_info> pus, std::string source, bool this_system)
    : _pus(std::move(pus)), _source(std::move(source)), _this_system(this_system) {
  if (_pus.empty()) throw topology_error("topology '" + _source + "' has no processing unit");
  std::set<int> seen;
  for (const auto& p : _pus)
    if (!seen.insert(p.os_index).second)
      throw topology_error("topology '" + _source + "' lists CPU " + std::to_string(p.os_index) + " twice");
  // Dense indexes in order of first appearance.
  std::map<int, int> core_of, numa_of, package_of;
  for (int i = 0; i < static_cast<int>(_pus.size()); ++i) {
    const pu_info& p = _pus[i];
    auto [n, new_numa] = numa_of.try_emplace(p.numa, static_cast<int>(_numa.size()));
    if (new_numa) _numa.push_back({p.numa, {}});
    auto [k, new_package] = package_of.try_emplace(p.package, _packages);
    if (new_package) ++_packages;
    auto [c, new_core] = core_of.try_emplace(p.core, static_cast<int>(_cores.size()));
    if (new_core) {
      _cores.push_back({p.core, n->second, k->second, {}});
      _numa[n->second].cores.push_back(c->second);
    }
    _cores[c->second].pus.push_back(i);
  }
}

std::vector<int> machine_topology::cpus_of_core(int core) const {
  std::vector<int> cpus;
  for (int i : _cores.at(core).pus) cpus.push_back(_pus[i].os_index);
  return cpus;
}

std::string machine_topology::summary() const {
  return std::to_string(_packages) + " package(s), " + std::to_string(numa_count()) + " NUMA node(s), " +
         std::to_string(core_count()) + " core(s), " + std::to_string(pu_count()) + " PU(s)";
}

machine_topology restrict_to(const machine_topology& topo, const std::vector<int>& cpus) {
  const std::set<int> keep(cpus.begin(), cpus.end());
  std::vector<pu_info> pus;
  for (const auto& p : topo.pus())
    if (keep.count(p.os_index)) pus.push_back(p);
  if (pus.empty())
    throw topology_error("none of CPUs " + cpu_list(cpus) + " is in topology '" + topo.source() + "'");
  return machine_topology(std::move(pus), topo.source(), topo.this_system());
}

machine_topology flat_topology(const std::vector<int>& cpus) {
  std::vector<int> sorted(cpus);
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  std::vector<pu_info> pus;
  for (std::size_t i = 0; i < sorted.size(); ++i) pus.push_back({sorted[i], static_cast<int>(i), 0, 0});
  return machine_topology(std::move(pus), "cpus:" + cpu_list(sorted), true);
}

namespace {

using topology_ptr = std::unique_ptr<hwloc_topology, decltype(&hwloc_topology_destroy)>;

topology_ptr new_topology(const std::string& what) {
  hwloc_topology_t t = nullptr;
  if (hwloc_topology_init(&t) != 0) throw topology_error("hwloc cannot initialise a topology for " + what);
  return topology_ptr(t, &hwloc_topology_destroy);
}

// Copies what the policy needs out of a loaded hwloc topology.
machine_topology extract(hwloc_topology_t t, std::string source) {
  const int npu = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU);
  const int nnuma = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
  std::vector<pu_info> pus;
  pus.reserve(static_cast<std::size_t>(std::max(npu, 0)));
  for (int i = 0; i < npu; ++i) {
    hwloc_obj_t pu = hwloc_get_obj_by_type(t, HWLOC_OBJ_PU, static_cast<unsigned>(i));
    pu_info p;
    p.os_index = static_cast<int>(pu->os_index);
    hwloc_obj_t core = hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_CORE, pu);
    // No core level: each PU is a core; keep labels apart from real cores'.
    p.core = core ? static_cast<int>(core->logical_index) : 1000000 + i;
    hwloc_obj_t package = hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_PACKAGE, pu);
    p.package = package ? static_cast<int>(package->logical_index) : 0;
    auto cache = [&](hwloc_obj_type_t type) {
      hwloc_obj_t c = hwloc_get_ancestor_obj_by_type(t, type, pu);
      return c ? static_cast<int>(c->logical_index) : -1;
    };
    p.l3 = cache(HWLOC_OBJ_L3CACHE);
    p.l2 = cache(HWLOC_OBJ_L2CACHE);
    p.l1 = cache(HWLOC_OBJ_L1CACHE);
    // NUMA nodes are memory children in hwloc 2, not ancestors: the first
    // whose CPUs include this PU (on a KNL in flat mode, DDR before MCDRAM).
    for (int n = 0; n < nnuma; ++n) {
      hwloc_obj_t node = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(n));
      if (node->cpuset && hwloc_bitmap_isset(node->cpuset, pu->os_index)) {
        p.numa = n;
        break;
      }
    }
    pus.push_back(p);
  }
  return machine_topology(std::move(pus), std::move(source), hwloc_topology_is_thissystem(t) != 0);
}

}  // namespace

machine_topology load_host() {
  auto t = new_topology("this machine");
  if (hwloc_topology_load(t.get()) != 0) throw topology_error("hwloc cannot read this machine's topology");
  return extract(t.get(), "host");
}

namespace {

// hwloc builds a synthetic topology in time that grows much faster than
// its size (measured here: 1024 PUs 0.4 s, 4096 PUs 1-6 s, 16384 PUs
// 3-28 s, pu:10000 over a minute); larger than any machine placement is
// computed for, refused before hwloc sees it.
constexpr long long kMaxSyntheticPus = 4096;
constexpr long long kMaxSyntheticArity = 1024;

// Each level is TYPE:N (attributes in parentheses, memory children in
// brackets); what is not understood is left to hwloc.
void check_synthetic_size(const std::string& s) {
  long long pus = 1, widest = 0;
  std::string widest_level;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && s[i] == ' ') ++i;
    std::size_t j = i;
    int depth = 0;
    while (j < s.size() && (depth > 0 || s[j] != ' ')) {
      if (s[j] == '(' || s[j] == '[') ++depth;
      if ((s[j] == ')' || s[j] == ']') && depth > 0) --depth;
      ++j;
    }
    std::string token = s.substr(i, j - i);
    i = j;
    if (token.empty() || token[0] == '[') continue;
    token = token.substr(0, token.find('('));
    const std::size_t colon = token.find(':');
    if (colon == std::string::npos) continue;
    const std::string n = token.substr(colon + 1);
    if (n.empty() || n.size() > 9 || n.find_first_not_of("0123456789") != std::string::npos) continue;
    const long long arity = std::stoll(n);
    if (arity > widest) widest = arity, widest_level = token;
    pus = std::min(pus * std::max(arity, 1LL), kMaxSyntheticPus * kMaxSyntheticArity);
  }
  const std::string bounds = "nmad loads at most " + std::to_string(kMaxSyntheticPus) + " PUs and " +
                             std::to_string(kMaxSyntheticArity) + " children per object (hwloc takes minutes beyond)";
  if (pus > kMaxSyntheticPus)
    throw topology_error("the synthetic topology '" + s + "' has " + std::to_string(pus) + " PUs; " + bounds);
  if (widest > kMaxSyntheticArity)
    throw topology_error("the synthetic topology '" + s + "' gives objects " + std::to_string(widest) +
                         " children (" + widest_level + "); " + bounds);
}

}  // namespace

machine_topology load_synthetic(std::string_view spec) {
  const std::string s(spec);
  check_synthetic_size(s);
  auto t = new_topology("'" + s + "'");
  if (hwloc_topology_set_synthetic(t.get(), s.c_str()) != 0)
    throw topology_error("hwloc refuses the synthetic topology '" + s +
                         "' (levels like 'pack:2 numa:2 core:12 pu:2', the last one pu:N)");
  if (hwloc_topology_load(t.get()) != 0) throw topology_error("hwloc cannot load the synthetic topology '" + s + "'");
  return extract(t.get(), "synthetic:" + s);
}

machine_topology load_xml(const std::string& path) {
  auto t = new_topology("'" + path + "'");
  if (hwloc_topology_set_xml(t.get(), path.c_str()) != 0 || hwloc_topology_load(t.get()) != 0)
    throw topology_error("hwloc cannot load the XML topology '" + path + "'");
  return extract(t.get(), "xml:" + path);
}

machine_topology load_spec(std::string_view spec) {
  if (spec.empty()) throw topology_error("empty topology description");
  std::error_code ec;
  const std::string s(spec);
  if (s.ends_with(".xml") || std::filesystem::is_regular_file(s, ec)) return load_xml(s);
  return load_synthetic(s);
}

machine_topology from_env() {
  if (const std::string v = config::text("NMAD_TOPOLOGY"); !v.empty()) {
    try {
      return load_spec(v);
    } catch (const topology_error& e) {
      throw topology_error(config::message("NMAD_TOPOLOGY", v, e.what()));
    }
  }
  if (const char* v = std::getenv("HWLOC_XMLFILE"); v && *v) return load_xml(v);
  if (const char* v = std::getenv("HWLOC_SYNTHETIC"); v && *v) return load_synthetic(v);
  return load_host();
}

namespace {

// Loads once; a failure is kept and thrown to every caller.
struct shared_slot {
  std::once_flag once;
  std::unique_ptr<machine_topology> value;
  std::string error;

  const machine_topology& get(machine_topology (*load)()) {
    std::call_once(once, [&] {
      try {
        value = std::make_unique<machine_topology>(load());
      } catch (const std::exception& e) {
        error = e.what();
      }
    });
    if (!value) throw topology_error(error);
    return *value;
  }
};

}  // namespace

const machine_topology& shared_host() {
  static shared_slot slot;
  return slot.get(&load_host);
}

const machine_topology& shared_from_env() {
  static shared_slot slot;
  return slot.get(&from_env);
}

std::vector<int> allowed_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

std::string cpu_list(std::vector<int> cpus) {
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

std::optional<std::vector<int>> parse_cpu_list(std::string_view text) { return config::parse_cpu_list(text); }

}  // namespace nmad::topology
