// api/nmad/services/topology.hpp: what hwloc's synthetic, XML and host
// topologies become, and the pure helpers over the value.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
#include <hwloc.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "api/nmad/services/topology.hpp"

using namespace nmad::topology;

namespace {

// An XML export of a synthetic machine, written with hwloc itself.
std::string export_xml(const char* spec) {
  hwloc_topology_t t;
  REQUIRE(hwloc_topology_init(&t) == 0);
  REQUIRE(hwloc_topology_set_synthetic(t, spec) == 0);
  REQUIRE(hwloc_topology_load(t) == 0);
  const char* dir = std::getenv("TEST_TMPDIR");
  std::string path = std::string(dir ? dir : "/tmp") + "/topology_test_" + std::to_string(::getpid()) + ".xml";
  REQUIRE(hwloc_topology_export_xml(t, path.c_str(), 0) == 0);
  hwloc_topology_destroy(t);
  return path;
}

struct env_guard {
  std::string name;
  env_guard(const char* n, const char* v) : name(n) { ::setenv(n, v, 1); }
  ~env_guard() { ::unsetenv(name.c_str()); }
};

}  // namespace

TEST_CASE("a 2-package x 2-NUMA x 12-core x 2-PU node: counts, siblings and NUMA membership") {
  auto t = load_synthetic("pack:2 numa:2 core:12 pu:2");
  CHECK(t.pu_count() == 96);
  CHECK(t.core_count() == 48);
  CHECK(t.numa_count() == 4);
  CHECK(t.package_count() == 2);
  CHECK_FALSE(t.this_system());
  CHECK(t.source() == "synthetic:pack:2 numa:2 core:12 pu:2");
  CHECK(t.summary() == "2 package(s), 4 NUMA node(s), 48 core(s), 96 PU(s)");
  CHECK(t.cpus_of_core(0) == std::vector<int>{0, 1});
  CHECK(t.cpus_of_core(47) == std::vector<int>{94, 95});
  for (int n = 0; n < 4; ++n) {
    const auto& node = t.numa_nodes()[n];
    CHECK(node.label == n);
    REQUIRE(node.cores.size() == 12);
    CHECK(node.cores.front() == 12 * n);
    CHECK(node.cores.back() == 12 * n + 11);
  }
  CHECK(t.cores()[13].numa == 1);
  CHECK(t.cores()[13].package == 0);
  CHECK(t.cores()[24].package == 1);
}

TEST_CASE("a KNL-like node in SNC-4 mode: 4 quadrants of 8 two-core tiles, 4 PUs a core") {
  auto t = load_synthetic("pack:1 numa:4 l2:8 core:2 pu:4");
  CHECK(t.pu_count() == 256);
  CHECK(t.core_count() == 64);
  CHECK(t.numa_count() == 4);
  CHECK(t.cpus_of_core(1) == std::vector<int>{4, 5, 6, 7});
  CHECK(t.cores()[16].numa == 1);
  CHECK(t.numa_nodes()[3].cores.size() == 16);
}

TEST_CASE("bad synthetic descriptions and missing files are refused with their name") {
  CHECK_THROWS_WITH_AS(load_synthetic("numa:2 core:2"), doctest::Contains("numa:2 core:2"), topology_error);
  CHECK_THROWS_WITH_AS(load_synthetic("banana:3"), doctest::Contains("banana:3"), topology_error);
  CHECK_THROWS_WITH_AS(load_xml("/nonexistent/t.xml"), doctest::Contains("/nonexistent/t.xml"), topology_error);
  CHECK_THROWS_AS(load_spec(""), topology_error);
}

TEST_CASE("XML exports load like the machine they describe; load_spec tells files from descriptions") {
  const std::string path = export_xml("numa:2 core:4 pu:2");
  auto x = load_xml(path);
  CHECK(x.core_count() == 8);
  CHECK(x.numa_count() == 2);
  CHECK(x.pu_count() == 16);
  CHECK(x.source() == "xml:" + path);
  CHECK_FALSE(x.this_system());
  CHECK(load_spec(path).source() == "xml:" + path);
  CHECK(load_spec("core:3 pu:1").core_count() == 3);
  std::filesystem::remove(path);
}

TEST_CASE("from_env: NMAD_TOPOLOGY, then HWLOC_XMLFILE, then HWLOC_SYNTHETIC, then this machine") {
  {
    env_guard a("HWLOC_SYNTHETIC", "core:5 pu:1");
    CHECK(from_env().core_count() == 5);
    env_guard b("NMAD_TOPOLOGY", "numa:3 core:2 pu:1");
    CHECK(from_env().core_count() == 6);
  }
  const std::string path = export_xml("core:7 pu:1");
  {
    env_guard a("HWLOC_XMLFILE", path.c_str());
    env_guard b("HWLOC_SYNTHETIC", "core:5 pu:1");
    CHECK(from_env().core_count() == 7);
  }
  std::filesystem::remove(path);
  auto host = from_env();
  CHECK(host.this_system());
  CHECK(host.source() == "host");
}

TEST_CASE("this machine: every CPU we may run on is a PU of the host topology, loaded once") {
  const auto& h = shared_host();
  CHECK(&h == &shared_host());
  CHECK(h.this_system());
  CHECK(h.pu_count() >= 1);
  std::vector<int> os;
  for (const auto& p : h.pus()) os.push_back(p.os_index);
  for (int c : allowed_cpus()) CHECK(std::find(os.begin(), os.end(), c) != os.end());
  auto mine = restrict_to(h, allowed_cpus());
  CHECK(mine.pu_count() == static_cast<int>(allowed_cpus().size()));
}

TEST_CASE("restrict_to drops the PUs, cores and NUMA nodes outside a CPU set") {
  auto t = load_synthetic("numa:2 core:4 pu:2");
  auto r = restrict_to(t, {0, 1, 2, 9});
  CHECK(r.pu_count() == 4);
  CHECK(r.core_count() == 3);  // cores 0 (0,1), 1 (2), 4 (9)
  CHECK(r.numa_count() == 2);
  CHECK(r.cores()[2].label == 4);
  CHECK(r.numa_nodes()[1].label == 1);
  CHECK(r.cpus_of_core(1) == std::vector<int>{2});
  auto one = restrict_to(t, {8, 9});
  CHECK(one.numa_count() == 1);
  CHECK(one.numa_nodes()[0].label == 1);
  CHECK_THROWS_AS(restrict_to(t, {100}), topology_error);
}

TEST_CASE("flat topology and CPU lists") {
  auto f = flat_topology({3, 1, 2});
  CHECK(f.core_count() == 3);
  CHECK(f.numa_count() == 1);
  CHECK(f.this_system());
  CHECK(f.cpus_of_core(0) == std::vector<int>{1});
  CHECK(cpu_list({}) == "");
  CHECK(cpu_list({5}) == "5");
  CHECK(cpu_list({3, 0, 1, 2, 8, 10, 11, 2}) == "0-3,8,10-11");
  CHECK_THROWS_AS(machine_topology({}, "empty", false), topology_error);
  CHECK_THROWS_AS(machine_topology({{1, 0, 0, 0}, {1, 1, 0, 0}}, "dup", false), topology_error);
}
