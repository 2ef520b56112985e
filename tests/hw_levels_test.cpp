// api/nmad/services/hw_levels.hpp: which processes share which hardware level,
// on synthetic machines with made-up bindings (the logic behind
// MPI_COMM_TYPE_HW_GUIDED / HW_UNGUIDED and the MPIX hsplit calls).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include "api/nmad/services/hw_levels.hpp"
#include "api/nmad/services/placement.hpp"

using namespace nmad::topology;

namespace {

int at(const hw_location& w, hw_level l) { return w[static_cast<std::size_t>(l)]; }

// The groups of a split at level l, as lists of member indexes, in order of
// their first member; members in no group are left out.
std::vector<std::vector<int>> groups_at(const std::vector<hw_member>& m, hw_level l) {
  std::map<int, std::vector<int>> by_color;
  for (int r = 0; r < static_cast<int>(m.size()); ++r)
    if (int c = hw_color(m, r, l); c >= 0) by_color[c].push_back(r);
  std::vector<std::vector<int>> out;
  for (auto& [c, g] : by_color) out.push_back(g);
  return out;
}

std::vector<hw_member> subset(const std::vector<hw_member>& m, const std::vector<int>& who) {
  std::vector<hw_member> out;
  for (int w : who) out.push_back(m[w]);
  return out;
}

// Two nodes of `spec`, n ranks on each, bound as nmad-run's placement
// (scatter by NUMA) would bind them: world rank r on node r / n.
std::vector<hw_member> two_nodes(const machine_topology& t, int n) {
  const auto placed = place_ranks(t, n);
  std::vector<hw_member> m;
  for (int node = 0; node < 2; ++node)
    for (int i = 0; i < n; ++i) m.push_back({"node" + std::to_string(node), locate(t, placed[i].cpus), true});
  return m;
}

}  // namespace

TEST_CASE("resource type names: hwloc's, any case, hwloc:// prefix, aliases") {
  CHECK(parse_hw_level("Machine") == hw_level::machine);
  CHECK(parse_hw_level("package") == hw_level::package);
  CHECK(parse_hw_level("SOCKET") == hw_level::package);
  CHECK(parse_hw_level("NUMANode") == hw_level::numa);
  CHECK(parse_hw_level("hwloc://NUMANode") == hw_level::numa);
  CHECK(parse_hw_level("L3Cache") == hw_level::l3);
  CHECK(parse_hw_level("l2cache") == hw_level::l2);
  CHECK(parse_hw_level("L1d") == hw_level::l1);
  CHECK(parse_hw_level("Core") == hw_level::core);
  CHECK(parse_hw_level("PU") == hw_level::pu);
  CHECK(parse_hw_level("hwthread") == hw_level::pu);
  CHECK_FALSE(parse_hw_level("mpi_shared_memory"));
  CHECK_FALSE(parse_hw_level("L4Cache"));
  CHECK_FALSE(parse_hw_level(""));
  for (hw_level l : all_hw_levels()) CHECK(parse_hw_level(hw_level_name(l)) == l);
  CHECK(hw_level_name(hw_level::numa) == "NUMANode");
}

TEST_CASE("caches come from hwloc; a synthetic machine without them has none") {
  const auto t = load_synthetic("pack:2 l3:1 numa:2 core:4 l2:1 l1d:1 pu:2");
  REQUIRE(t.pu_count() == 32);
  CHECK(t.pus()[0].l3 == 0);
  CHECK(t.pus()[31].l3 == 1);
  CHECK(t.pus()[0].l2 == 0);
  CHECK(t.pus()[1].l2 == 0);  // SMT siblings share their core's L2
  CHECK(t.pus()[2].l2 == 1);
  CHECK(t.pus()[2].l1 == 1);
  const auto bare = load_synthetic("pack:2 numa:2 core:8 pu:1");
  for (const auto& p : bare.pus()) {
    CHECK(p.l3 == -1);
    CHECK(p.l2 == -1);
    CHECK(p.l1 == -1);
  }
}

TEST_CASE("locate: the one object of each level a binding lies in") {
  const auto t = load_synthetic("pack:2 l3:1 numa:2 core:4 l2:1 l1d:1 pu:2");
  // PUs 0..7 are package 0 / NUMA 0 (cores 0-3), 8..15 NUMA 1, 16..31 package 1.
  SUBCASE("one PU") {
    const auto w = locate(t, {5});
    CHECK(at(w, hw_level::machine) == 0);
    CHECK(at(w, hw_level::package) == 0);
    CHECK(at(w, hw_level::numa) == 0);
    CHECK(at(w, hw_level::l3) == 0);
    CHECK(at(w, hw_level::l2) == 2);
    CHECK(at(w, hw_level::l1) == 2);
    CHECK(at(w, hw_level::core) == 2);
    CHECK(at(w, hw_level::pu) == 5);
  }
  SUBCASE("a whole core: every level down to the core, not the PU") {
    const auto w = locate(t, {18, 19});
    CHECK(at(w, hw_level::package) == 1);
    CHECK(at(w, hw_level::numa) == 2);
    CHECK(at(w, hw_level::core) == 9);
    CHECK(at(w, hw_level::pu) == hw_spans);
  }
  SUBCASE("two cores of a NUMA node") {
    const auto w = locate(t, {8, 10});
    CHECK(at(w, hw_level::numa) == 1);
    CHECK(at(w, hw_level::l3) == 0);
    CHECK(at(w, hw_level::l2) == hw_spans);
    CHECK(at(w, hw_level::core) == hw_spans);
  }
  SUBCASE("across packages, and unbound: only the machine") {
    for (const auto& cpus : {std::vector<int>{0, 16}, std::vector<int>{}, std::vector<int>{900}}) {
      const auto w = locate(t, cpus);
      CHECK(at(w, hw_level::machine) == 0);
      for (hw_level l : all_hw_levels())
        if (l != hw_level::machine) CHECK(at(w, l) == hw_spans);
    }
  }
  SUBCASE("levels the machine does not have are absent") {
    const auto bare = load_synthetic("pack:2 numa:2 core:8 pu:1");
    const auto w = locate(bare, {3});
    CHECK(at(w, hw_level::l3) == hw_absent);
    CHECK(at(w, hw_level::l2) == hw_absent);
    CHECK(at(w, hw_level::l1) == hw_absent);
    CHECK(at(w, hw_level::core) == 3);
    CHECK(at(w, hw_level::pu) == 3);
  }
}

TEST_CASE("2 nodes x 2 packages x 2 NUMA x 8 cores, 8 ranks per node: the unguided hierarchy") {
  const auto t = load_synthetic("pack:2 numa:2 core:8 pu:1");
  const auto m = two_nodes(t, 8);
  const auto order = hw_level_order(t);
  CHECK(order == std::vector<hw_level>{hw_level::machine, hw_level::package, hw_level::numa, hw_level::core,
                                       hw_level::pu});
  // Scatter by NUMA: local rank i on NUMA node i mod 4, so NUMA nodes 0 and
  // 1 (package 0) hold local ranks {0,4} and {1,5}, package 1 {2,6}, {3,7}.
  REQUIRE(hw_unguided_level(m, order) == hw_level::machine);
  const auto nodes = groups_at(m, hw_level::machine);
  REQUIRE(nodes.size() == 2);
  CHECK(nodes[0] == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(nodes[1] == std::vector<int>{8, 9, 10, 11, 12, 13, 14, 15});
  CHECK(hw_group_siblings(m, 9, hw_level::machine).count == 2);
  CHECK(hw_group_siblings(m, 9, hw_level::machine).index == 1);

  const auto node1 = subset(m, nodes[1]);
  REQUIRE(hw_unguided_level(node1, order) == hw_level::package);
  const auto packages = groups_at(node1, hw_level::package);
  REQUIRE(packages.size() == 2);
  CHECK(packages[0] == std::vector<int>{0, 1, 4, 5});
  CHECK(packages[1] == std::vector<int>{2, 3, 6, 7});

  const auto pack = subset(node1, packages[1]);
  REQUIRE(hw_unguided_level(pack, order) == hw_level::numa);
  const auto numas = groups_at(pack, hw_level::numa);
  REQUIRE(numas.size() == 2);
  CHECK(numas[0] == std::vector<int>{0, 2});  // local ranks 2 and 6
  CHECK(numas[1] == std::vector<int>{1, 3});

  // No caches in this description: from a NUMA node the next level that
  // divides is the core, then nothing (one rank per core).
  const auto numa = subset(pack, numas[0]);
  REQUIRE(hw_unguided_level(numa, order) == hw_level::core);
  const auto cores = groups_at(numa, hw_level::core);
  CHECK(cores.size() == 2);
  CHECK_FALSE(hw_unguided_level(subset(numa, cores[0]), order));

  // Guided on the whole job: NUMA nodes never mix the two hosts.
  const auto numa_groups = groups_at(m, hw_level::numa);
  CHECK(numa_groups.size() == 8);
  for (const auto& g : numa_groups) {
    CHECK(g.size() == 2);
    CHECK(m[g[0]].host == m[g[1]].host);
  }
  CHECK(hw_group_siblings(m, 15, hw_level::numa).count == 8);
  CHECK(hw_group_siblings(m, 15, hw_level::numa).index == 7);  // local rank 7: NUMA 3 of node 1
  // Guided at an absent level: no group anywhere.
  for (int r = 0; r < 16; ++r) CHECK(hw_color(m, r, hw_level::l3) == -1);
}

TEST_CASE("levels that do not divide are skipped; caches take their place in the order") {
  const auto t = load_synthetic("pack:2 l3:1 numa:2 core:4 l2:1 l1d:1 pu:2");
  const auto order = hw_level_order(t);
  // hwloc's order: the package's L3 holds its two NUMA nodes.
  CHECK(order == std::vector<hw_level>{hw_level::machine, hw_level::package, hw_level::l3, hw_level::numa,
                                       hw_level::l2, hw_level::l1, hw_level::core, hw_level::pu});
  // An L3 per NUMA node: same count, the usual order (NUMA first).
  CHECK(hw_level_order(load_synthetic("pack:2 numa:2 l3:1 core:4 pu:1")) ==
        std::vector<hw_level>{hw_level::machine, hw_level::package, hw_level::numa, hw_level::l3, hw_level::core,
                              hw_level::pu});
  // Four ranks on one host: two on the two PUs of core 0, one on core 1,
  // one on core 4 (NUMA 1). All in package 0 and L3 0.
  std::vector<hw_member> m = {{"h", locate(t, {0}), true},
                              {"h", locate(t, {1}), true},
                              {"h", locate(t, {2, 3}), true},
                              {"h", locate(t, {8, 9}), true}};
  CHECK(hw_unguided_level(m, order) == hw_level::numa);  // machine, package, L3: one group
  CHECK_FALSE(hw_level_divides(m, hw_level::l3));
  const auto numa0 = subset(m, {0, 1, 2});
  CHECK_FALSE(hw_level_divides(numa0, hw_level::l3));
  CHECK(hw_unguided_level(numa0, order) == hw_level::l2);  // per core here, listed before Core
  const auto core0 = subset(m, {0, 1});
  CHECK(hw_unguided_level(core0, order) == hw_level::pu);
  CHECK(groups_at(core0, hw_level::pu).size() == 2);
}

TEST_CASE("bindings across objects and unbound processes get no group at that level") {
  const auto t = load_synthetic("pack:2 numa:2 core:8 pu:1");
  const auto order = hw_level_order(t);
  std::vector<hw_member> m = {{"h", locate(t, {0}), true},
                              {"h", locate(t, {1}), true},
                              {"h", locate(t, {}), true},          // unbound
                              {"h", locate(t, {8, 16}), true}};   // NUMA 1 and package 1
  CHECK(hw_color(m, 0, hw_level::package) == 0);
  CHECK(hw_color(m, 1, hw_level::package) == 0);
  CHECK(hw_color(m, 2, hw_level::package) == -1);
  CHECK(hw_color(m, 3, hw_level::package) == -1);
  CHECK(hw_color(m, 2, hw_level::machine) == 0);
  // The package split divides the group: ranks 0 and 1 form a strict
  // subset, the others get MPI_COMM_NULL.
  CHECK(hw_unguided_level(m, order) == hw_level::package);
  const auto s = hw_group_siblings(m, 2, hw_level::package);
  CHECK(s.count == 1);
  CHECK(s.index == -1);
  // All unbound: nothing divides.
  std::vector<hw_member> loose = {{"h", locate(t, {}), true}, {"h", locate(t, {}), true}};
  CHECK_FALSE(hw_unguided_level(loose, order));
}

TEST_CASE("processes passing MPI_UNDEFINED take no part") {
  const auto t = load_synthetic("pack:2 numa:2 core:8 pu:1");
  const auto order = hw_level_order(t);
  std::vector<hw_member> m = {{"h", locate(t, {0}), true}, {"h", locate(t, {16}), false}, {"h", locate(t, {1}), true}};
  // Without member 1 everyone is in package 0: the package does not divide.
  CHECK_FALSE(hw_level_divides(m, hw_level::package));
  CHECK(hw_color(m, 1, hw_level::package) == -1);
  CHECK(hw_unguided_level(m, order) == hw_level::core);
  CHECK(hw_color(m, 2, hw_level::core) == 2);
}

TEST_CASE("the deepest level shared by a set of processes") {
  const auto t = load_synthetic("pack:2 l3:1 numa:2 core:4 l2:1 l1d:1 pu:2");
  const auto order = hw_level_order(t);
  std::vector<hw_member> m = {{"a", locate(t, {0}), true},  {"a", locate(t, {1}), true},
                              {"a", locate(t, {4}), true},  {"a", locate(t, {16}), true},
                              {"b", locate(t, {0}), true},  {"a", locate(t, {}), true}};
  CHECK(hw_common_level(m, {0}, order) == hw_level::pu);
  CHECK(hw_common_level(m, {0, 1}, order) == hw_level::core);  // two PUs of core 0
  CHECK(hw_common_level(m, {0, 2}, order) == hw_level::numa);  // inside the package's L3
  CHECK(hw_common_level(m, {0, 3}, order) == hw_level::machine);
  CHECK(hw_common_level(m, {1, 2}, order) == hw_level::numa);
  CHECK(hw_common_level(m, {5}, order) == hw_level::machine);
  CHECK_FALSE(hw_common_level(m, {0, 4}, order));  // two hosts
  CHECK_FALSE(hw_common_level(m, {}, order));
}
