// api/nmad/services/placement.hpp and scheduling.hpp on synthetic machines:
// the paper's 8-core 2-NUMA node, a KNL-like 64-core node, a 2 x 2 x 12 x 2
// node, and this machine's shape (2 cores, 1 NUMA node).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "api/nmad/services/placement.hpp"
#include "core/topology/scheduling.hpp"
#include "tests/test_paths.hpp"

using namespace nmad::topology;

namespace {

// Taboada et al.'s node: 2 NUMA nodes of 4 cores, no SMT.
const machine_topology& paper8() {
  static const machine_topology t = load_synthetic("numa:2 core:4 pu:1");
  return t;
}
// A KNL (Xeon Phi 7210-like) in SNC-4 mode: 64 cores as 4 NUMA quadrants of
// 16, cores paired in tiles sharing an L2, 4 hardware threads per core.
const machine_topology& knl() {
  static const machine_topology t = load_synthetic("pack:1 numa:4 l2:8 core:2 pu:4");
  return t;
}
const machine_topology& big() {
  static const machine_topology t = load_synthetic("pack:2 numa:2 core:12 pu:2");
  return t;
}
const machine_topology& two_cores() {
  static const machine_topology t = load_synthetic("core:2 pu:1");
  return t;
}

std::vector<int> cores_of(const std::vector<rank_place>& r) {
  std::vector<int> v;
  for (const auto& p : r) v.push_back(p.core);
  return v;
}
std::vector<int> thread_cores(const std::vector<progress_place>& p) {
  std::vector<int> v;
  for (const auto& t : p) v.push_back(t.core);
  return v;
}

using v = std::vector<int>;

}  // namespace

TEST_CASE("scatter by NUMA reproduces the paper's placements on an 8-core 2-NUMA node, 1 to 8 ranks") {
  // Rank i on NUMA node i mod 2; the k ranks of a node on its cores floor(j*4/k).
  const std::vector<v> expected = {
      {0},
      {0, 4},
      {0, 4, 2},
      {0, 4, 2, 6},
      {0, 4, 1, 6, 2},
      {0, 4, 1, 5, 2, 6},
      {0, 4, 1, 5, 2, 6, 3},
      {0, 4, 1, 5, 2, 6, 3, 7},
  };
  for (int n = 1; n <= 8; ++n) {
    CAPTURE(n);
    auto r = place_ranks(paper8(), n);
    REQUIRE(r.size() == static_cast<std::size_t>(n));
    CHECK(cores_of(r) == expected[n - 1]);
    for (const auto& p : r) {
      CHECK(p.rank == &p - r.data());
      CHECK(p.numa == p.rank % 2);
      CHECK(p.whole_core);
      CHECK(p.cpus == v{p.core});  // one PU per core: CPU number = core
      CHECK_FALSE(p.reason.empty());
    }
  }
  CHECK_THROWS_AS(place_ranks(paper8(), 0), std::invalid_argument);
}

TEST_CASE("this machine's shape: rank i on CPU i; more ranks than CPUs share them in turn") {
  auto r = place_ranks(two_cores(), 2);
  CHECK(r[0].cpus == v{0});
  CHECK(r[1].cpus == v{1});
  auto over = place_ranks(two_cores(), 3);
  CHECK(over[0].cpus == v{0});
  CHECK(over[1].cpus == v{1});
  CHECK(over[2].cpus == v{0});
  CHECK(over[2].reason.find("oversubscribed") != std::string::npos);
}

TEST_CASE("KNL-like node: quadrants in turn, spread inside; beyond 64 ranks one hardware thread each") {
  auto r4 = place_ranks(knl(), 4);
  CHECK(cores_of(r4) == v{0, 16, 32, 48});
  CHECK(r4[1].cpus == v{64, 65, 66, 67});  // the whole core
  auto r8 = place_ranks(knl(), 8);
  CHECK(cores_of(r8) == v{0, 16, 32, 48, 8, 24, 40, 56});
  auto r64 = place_ranks(knl(), 64);
  const auto r64_cores = cores_of(r64);
  std::set<int> distinct(r64_cores.begin(), r64_cores.end());
  CHECK(distinct.size() == 64);
  for (const auto& p : r64) CHECK(p.numa == p.rank % 4);
  auto r128 = place_ranks(knl(), 128);
  std::set<int> cpus;
  std::vector<int> per_core(64);
  for (const auto& p : r128) {
    CHECK_FALSE(p.whole_core);
    REQUIRE(p.cpus.size() == 1);
    cpus.insert(p.cpus[0]);
    ++per_core[p.core];
    CHECK(p.numa == p.rank % 4);
  }
  CHECK(cpus.size() == 128);
  CHECK(std::all_of(per_core.begin(), per_core.end(), [](int k) { return k == 2; }));
  auto r300 = place_ranks(knl(), 300);  // more ranks than PUs
  std::vector<int> per_numa(4);
  for (const auto& p : r300) ++per_numa[p.numa];
  CHECK(per_numa == v{75, 75, 75, 75});
}

TEST_CASE("2 x 2 x 12 x 2 node: four NUMA nodes in turn, a rank owns both PUs of its core") {
  auto r = place_ranks(big(), 6);
  CHECK(cores_of(r) == v{0, 12, 24, 36, 6, 18});
  CHECK(r[0].cpus == v{0, 1});
  CHECK(r[5].cpus == v{36, 37});
  auto r48 = place_ranks(big(), 48);
  const auto r48_cores = cores_of(r48);
  std::set<int> distinct(r48_cores.begin(), r48_cores.end());
  CHECK(distinct.size() == 48);
  auto r96 = place_ranks(big(), 96);
  std::set<int> cpus;
  for (const auto& p : r96) cpus.insert(p.cpus.at(0));
  CHECK(cpus.size() == 96);
}

TEST_CASE("NUMA nodes of unequal size get balanced counts: a full node is skipped") {
  auto t = restrict_to(paper8(), {0, 1, 2, 4});  // node 0: cores 0-2, node 1: core 4
  auto r = place_ranks(t, 4);
  CHECK(r[0].numa == 0);
  CHECK(r[1].numa == 1);
  CHECK(r[2].numa == 0);
  CHECK(r[3].numa == 0);
  std::set<int> cpus;
  for (const auto& p : r) cpus.insert(p.cpus.at(0));
  CHECK(cpus == std::set<int>{0, 1, 2, 4});
}

TEST_CASE("free cores are those without a rank") {
  CHECK(free_cores(paper8(), place_ranks(paper8(), 4)) == v{1, 3, 5, 7});
  CHECK(free_cores(paper8(), place_ranks(paper8(), 8)).empty());
  CHECK(free_cores(knl(), place_ranks(knl(), 128)).empty());
}

TEST_CASE("policy names") {
  for (auto p : all_progress_policies()) CHECK(parse_progress_policy(name_of(p)) == p);
  CHECK(parse_progress_policy("odd_even") == progress_policy::odd_even);
  CHECK(parse_progress_policy("split_tree") == progress_policy::split_tree);
  CHECK_FALSE(parse_progress_policy("nearby").has_value());
  CHECK(all_progress_policies().size() == 9);
}

TEST_CASE("bind: the thread shares its rank's core") {
  auto r = place_ranks(big(), 4);
  auto p = place_progress(big(), r, {progress_policy::bind});
  for (std::size_t i = 0; i < r.size(); ++i) {
    CHECK(p[i].cpus == r[i].cpus);
    CHECK(p[i].on_rank_core);
  }
}

TEST_CASE("numa: a free core of the rank's NUMA node, else the rank's core, never another node") {
  auto r = place_ranks(paper8(), 4);  // cores 0 4 2 6
  auto p = place_progress(paper8(), r, {progress_policy::numa});
  CHECK(thread_cores(p) == v{1, 5, 3, 7});
  for (std::size_t i = 0; i < r.size(); ++i) {
    CHECK(p[i].numa == r[i].numa);
    CHECK_FALSE(p[i].on_rank_core);
  }
  // 6 ranks: one free core per node, shared by that node's threads.
  auto p6 = place_progress(paper8(), place_ranks(paper8(), 6), {progress_policy::numa});
  CHECK(thread_cores(p6) == v{3, 7, 3, 7, 3, 7});
  // Full: every thread on its rank's core.
  auto r8 = place_ranks(paper8(), 8);
  auto p8 = place_progress(paper8(), r8, {progress_policy::numa});
  for (std::size_t i = 0; i < r8.size(); ++i) {
    CHECK(p8[i].cpus == r8[i].cpus);
    CHECK(p8[i].reason.find("no free core") != std::string::npos);
  }
  // Node 1 full while node 0 has room: node 1's thread stays home.
  auto t = restrict_to(paper8(), {0, 1, 2, 4});
  auto r2 = place_ranks(t, 2);
  auto p2 = place_progress(t, r2, {progress_policy::numa});
  CHECK(p2[0].cpus == v{1});
  CHECK(p2[1].cpus == v{4});
  CHECK(p2[1].on_rank_core);
  // KNL, 32 ranks: each quadrant's 8 ranks and 8 free cores pair up.
  auto rk = place_ranks(knl(), 32);
  auto pk = place_progress(knl(), rk, {progress_policy::numa});
  std::set<int> used;
  for (std::size_t i = 0; i < rk.size(); ++i) {
    CHECK(pk[i].numa == rk[i].numa);
    CHECK_FALSE(pk[i].on_rank_core);
    used.insert(pk[i].core);
  }
  CHECK(used.size() == 32);
}

TEST_CASE("dedicated: a pool of free cores spread over the NUMA nodes, near the rank when possible") {
  auto r = place_ranks(paper8(), 4);
  auto all = place_progress(paper8(), r, {progress_policy::dedicated, 0});
  CHECK(thread_cores(all) == v{3, 7, 1, 5});
  auto one = place_progress(paper8(), r, {progress_policy::dedicated, 1});
  CHECK(thread_cores(one) == v{3, 3, 3, 3});
  auto two = place_progress(paper8(), r, {progress_policy::dedicated, 2});
  CHECK(thread_cores(two) == v{3, 7, 3, 7});
  auto full = place_progress(paper8(), place_ranks(paper8(), 8), {progress_policy::dedicated, 2});
  for (const auto& p : full) CHECK(p.on_rank_core);
}

TEST_CASE("smt: the sibling hardware thread; the rank keeps its core's first PU") {
  auto j = place_job(big(), 4, {progress_policy::smt});
  CHECK(j.ranks[0].cpus == v{0});
  CHECK(j.progress[0].cpus == v{1});
  CHECK(j.ranks[1].cpus == v{24});
  CHECK(j.progress[1].cpus == v{25});
  CHECK(j.progress[1].core == j.ranks[1].core);
  auto k = place_job(knl(), 2, {progress_policy::smt});
  CHECK(k.ranks[1].cpus == v{64});
  CHECK(k.progress[1].cpus == v{65, 66, 67});
  auto none = place_job(paper8(), 2, {progress_policy::smt});
  CHECK(none.progress[0].cpus == none.ranks[0].cpus);
  CHECK(none.progress[0].reason.find("no SMT sibling") != std::string::npos);
  // Other policies leave the rank its whole core.
  CHECK(place_job(big(), 4, {progress_policy::numa}).ranks[0].cpus == v{0, 1});
}

TEST_CASE("odd-even: even ranks' threads on one dedicated core, odd ranks' on another") {
  auto r = place_ranks(paper8(), 4);  // evens on node 0, odds on node 1
  auto p = place_progress(paper8(), r, {progress_policy::odd_even});
  CHECK(thread_cores(p) == v{3, 7, 3, 7});
  auto big24 = place_progress(big(), place_ranks(big(), 24), {progress_policy::odd_even});
  std::set<int> even, odd;
  for (const auto& t : big24) (t.rank % 2 ? odd : even).insert(t.core);
  CHECK(even.size() == 1);
  CHECK(odd.size() == 1);
  CHECK(*even.begin() != *odd.begin());
  // One free core: both groups share it; none: each on its rank's core.
  auto p7 = place_progress(paper8(), place_ranks(paper8(), 7), {progress_policy::odd_even});
  CHECK(thread_cores(p7) == v{7, 7, 7, 7, 7, 7, 7});
  auto r8 = place_ranks(paper8(), 8);
  auto p8 = place_progress(paper8(), r8, {progress_policy::odd_even});
  for (std::size_t i = 0; i < r8.size(); ++i) CHECK(p8[i].cpus == r8[i].cpus);
}

TEST_CASE("split-tree: F, T and S by hand for small N") {
  // N = 6: L = 2, R = 2, H = 3; F(6,1) = 3, F(6,2) = 2, F(6,3) = 1/2.
  CHECK(split_tree_level_ops_scaled(6, 1) == 6);
  CHECK(split_tree_level_ops_scaled(6, 2) == 8);
  CHECK(split_tree_level_ops_scaled(6, 3) == 4);
  // P = 1: T(0) = 3 + 2 + 1, T(1) = 1 + 2 + 1, T(2) = 2 + 1, T(3) = 3.
  CHECK(split_tree_cost(0, 6, 1) == 6);
  CHECK(split_tree_cost(1, 6, 1) == 4);
  CHECK(split_tree_cost(2, 6, 1) == 3);
  CHECK(split_tree_cost(3, 6, 1) == 3);
  CHECK(choose_split(6, 1).split == 2);  // ties: the smallest S
  CHECK(choose_split(6, 3).split == 0);  // T = 1 + 1 + 1 for every S
  CHECK(choose_split(6, 0).split == 3);  // no free core
  CHECK(choose_split(6, -2).split == 3);
  CHECK(split_tree_cost(1, 6, 0) == -1);
  CHECK(choose_split(1, 63).split == 0);
  CHECK(choose_split(1, 63).height == 0);
  auto c = choose_split(63, 1);
  CHECK(c.height == 6);
  CHECK(c.split == 5);
  CHECK(c.cost == std::vector<long>{63, 32, 17, 10, 7, 6, 6});
}

TEST_CASE("split-tree: S for N = 1 to 64 on 64 cores is the minimum of the cost model") {
  // The model evaluated here independently, in floating point.
  auto model = [](int s, int n, int p) {
    const int l = static_cast<int>(std::floor(std::log2(n)));
    const int h = static_cast<int>(std::ceil(std::log2(n)));
    const int r = n - (1 << l);
    double t = std::min(s, h);
    for (int i = s + 1; i <= h; ++i) {
      const double f = std::pow(2.0, l - i) + std::floor((r + std::pow(2.0, i - 1)) / std::pow(2.0, i));
      t += std::ceil(f / p);
    }
    return t;
  };
  for (int n = 1; n <= 64; ++n) {
    CAPTURE(n);
    const int p = 64 - n;
    auto c = choose_split(n, p);
    const int h = static_cast<int>(std::ceil(std::log2(n)));
    CHECK(c.height == h);
    CHECK(c.progress_cores == p);
    if (p <= 0) {
      CHECK(c.split == h);
      continue;
    }
    REQUIRE(c.cost.size() == static_cast<std::size_t>(h + 1));
    int best = 0;
    for (int s = 0; s <= h; ++s) {
      CHECK(c.cost[s] == static_cast<long>(model(s, n, p)));
      if (model(s, n, p) < model(best, n, p)) best = s;
    }
    CHECK(c.split == best);
  }
}

TEST_CASE("split-tree placement: the first S levels on the ranks' cores, the rest on free cores") {
  // 8 cores, 6 ranks: P = 2, H = 3; F = 3, 2, 1/2; T = 2+1+1, 1+1+1, 2+1, 3: S = 1.
  auto j = place_job(paper8(), 6, {progress_policy::split_tree});
  REQUIRE(j.split.has_value());
  CHECK(j.split->cost == std::vector<long>{4, 3, 3, 3});
  CHECK(j.split->split == 1);
  for (const auto& p : j.progress) {
    CHECK(p.on_rank_core);
    CHECK(p.cpus == j.ranks[p.rank].cpus);
    if (p.rank % 2 == 0) {  // ranks with levels above S = 1
      CHECK(p.deep_core >= 0);
      for (const auto& r : j.ranks) CHECK(r.core != p.deep_core);
      CHECK(p.deep_cpus == std::vector<int>{p.deep_core});
    } else {
      CHECK(p.deep_core == -1);
    }
  }
  auto full = place_job(paper8(), 8, {progress_policy::split_tree});
  CHECK(full.split->split == full.split->height);
  for (const auto& p : full.progress) CHECK(p.deep_core == -1);
}

TEST_CASE("the split-tree table in docs/PLACEMENT.md is the one the model gives") {
  std::ifstream in(nmad_test::runfile("docs/PLACEMENT.md"));
  REQUIRE(in);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  const std::string begin = "<!-- split-tree table: nmad-info --split-tree-table 64 64 -->\n";
  const std::string end = "<!-- end of split-tree table -->";
  auto b = doc.find(begin);
  REQUIRE(b != std::string::npos);
  auto e = doc.find(end, b);
  REQUIRE(e != std::string::npos);
  CHECK(doc.substr(b + begin.size(), e - b - begin.size()) == split_tree_table(64, 64));
}

TEST_CASE("nmad-info --placement prints these placements for any topology; --split-tree-table the model's") {
  const std::string info = nmad_test::runfile("tools/nmad-info");
  auto r = nmad_test::run({info, "--placement", "--topology", "numa:2 core:4 pu:1", "-n", "4", "--progress", "odd-even"});
  REQUIRE(r.status == 0);
  CHECK(r.out.find("Topology (synthetic:numa:2 core:4 pu:1): 1 package(s), 2 NUMA node(s), 8 core(s), 8 PU(s)") !=
        std::string::npos);
  CHECK(r.out.find("  rank 2: CPUs 2 (NUMA node 0): scatter by NUMA") != std::string::npos);
  CHECK(r.out.find("  rank 1: CPUs 7 (NUMA node 1): odd-even: the odd ranks' dedicated core 7") != std::string::npos);
  auto all = nmad_test::run({info, "--placement", "--topology", "pack:2 numa:2 core:12 pu:2", "-n", "48",
                             "--progress", "all"});
  REQUIRE(all.status == 0);
  for (auto p : all_progress_policies())
    CHECK(all.out.find("Progress threads (" + std::string(name_of(p)) + "):") != std::string::npos);
  auto table = nmad_test::run({info, "--split-tree-table", "64", "64"});
  REQUIRE(table.status == 0);
  CHECK(table.out == split_tree_table(64, 64));
  CHECK(nmad_test::run({info, "--placement", "--topology", "numa:2 core:4 pu:1"}).status == 2);  // no -n
  auto bad = nmad_test::run({info, "--placement", "--topology", "banana:2", "-n", "2"});
  CHECK(bad.status == 2);
  CHECK(bad.err.find("banana:2") != std::string::npos);
}

TEST_CASE("thread priorities per kind, suspension of idle progress threads") {
  thread_priorities d;
  CHECK(d.of(thread_kind::progress) > d.of(thread_kind::application));
  CHECK(d.of(thread_kind::application) > d.of(thread_kind::internal));
  CHECK(d.to_string() == "application=10,progress=15,internal=5");
  auto p = parse_thread_priorities("progress=20, internal=0");
  REQUIRE(p.has_value());
  CHECK(p->progress == 20);
  CHECK(p->internal == 0);
  CHECK(p->application == 10);
  CHECK(parse_thread_priorities("")->to_string() == d.to_string());
  CHECK_FALSE(parse_thread_priorities("progress=21").has_value());
  CHECK_FALSE(parse_thread_priorities("progress=-1").has_value());
  CHECK_FALSE(parse_thread_priorities("gpu=3").has_value());
  CHECK_FALSE(parse_thread_priorities("progress").has_value());
  CHECK_FALSE(parse_thread_priorities("progress=1x").has_value());
  CHECK(nice_of(10) == 0);
  CHECK(nice_of(0) == 10);
  CHECK(nice_of(20) == -10);
  CHECK(when_idle(thread_kind::progress, false) == idle_action::suspend);
  CHECK(when_idle(thread_kind::progress, true) == idle_action::keep_running);
  CHECK(when_idle(thread_kind::internal, false) == idle_action::suspend);
  CHECK(when_idle(thread_kind::application, false) == idle_action::keep_running);
  CHECK(name_of(thread_kind::progress) == "progress");
  ::setenv("NMAD_THREAD_PRIORITIES", "application=3", 1);
  CHECK(priorities_from_env().application == 3);
  ::setenv("NMAD_THREAD_PRIORITIES", "application=30", 1);
  CHECK_THROWS_WITH_AS(priorities_from_env(), doctest::Contains("NMAD_THREAD_PRIORITIES"), std::invalid_argument);
  ::unsetenv("NMAD_THREAD_PRIORITIES");
  CHECK(priorities_from_env().to_string() == d.to_string());
}

TEST_CASE("float: the whole NUMA node of its rank") {
  auto r8 = place_ranks(paper8(), 8);  // full
  auto f = place_progress(paper8(), r8, {progress_policy::float_node});
  for (std::size_t i = 0; i < r8.size(); ++i) {
    CHECK(f[i].numa == r8[i].numa);
    CHECK(f[i].cpus == (r8[i].numa == 0 ? v{0, 1, 2, 3} : v{4, 5, 6, 7}));
    CHECK_FALSE(f[i].on_rank_core);
  }
}

TEST_CASE("pair: each thread on its partner rank's core, partners taken in rank order inside a NUMA node") {
  // Paper node, full: node 0 holds ranks 0 2 4 6, node 1 ranks 1 3 5 7
  // (scatter); pairs (0,2) (4,6) and (1,3) (5,7).
  auto r8 = place_ranks(paper8(), 8);
  auto p = place_progress(paper8(), r8, {progress_policy::pair});
  const int mate8[] = {2, 3, 0, 1, 6, 7, 4, 5};
  for (std::size_t i = 0; i < r8.size(); ++i) {
    INFO("rank " << i);
    CHECK(p[i].core == r8[mate8[i]].core);
    CHECK(p[i].cpus == r8[mate8[i]].cpus);
    CHECK(p[i].numa == r8[i].numa);  // never another node
    CHECK_FALSE(p[i].on_rank_core);
    CHECK(p[i].reason.find("partner, rank " + std::to_string(mate8[i])) != std::string::npos);
  }
  // Odd counts: 5 ranks, node 0 holds 0 2 4: rank 4 goes with rank 2 (the
  // previous pair's second), node 1 holds 1 3.
  auto r5 = place_ranks(paper8(), 5);
  auto p5 = place_progress(paper8(), r5, {progress_policy::pair});
  const int mate5[] = {2, 3, 0, 1, 2};
  for (std::size_t i = 0; i < r5.size(); ++i) CHECK(p5[i].core == r5[mate5[i]].core);
  // A rank alone on its node keeps its core.
  auto lone = load_synthetic("numa:2 core:1 pu:1");
  auto pl = place_progress(lone, place_ranks(lone, 2), {progress_policy::pair});
  for (int i = 0; i < 2; ++i) {
    CHECK(pl[i].on_rank_core);
    CHECK(pl[i].reason.find("alone") != std::string::npos);
  }
  // Two ranks on a two-core machine: each thread on the other rank's core.
  auto two = load_synthetic("numa:1 core:2 pu:1");
  auto r2 = place_ranks(two, 2);
  auto p2 = place_progress(two, r2, {progress_policy::pair});
  CHECK(p2[0].cpus == r2[1].cpus);
  CHECK(p2[1].cpus == r2[0].cpus);
  CHECK(p2[0].cpus != p2[1].cpus);
}

TEST_CASE("auto: numa with a free core, pair without") {
  auto r8 = place_ranks(paper8(), 8);  // full
  auto a8 = place_progress(paper8(), r8, {progress_policy::automatic});
  auto p8 = place_progress(paper8(), r8, {progress_policy::pair});
  for (std::size_t i = 0; i < r8.size(); ++i) {
    CHECK(a8[i].cpus == p8[i].cpus);
    CHECK(a8[i].reason.find("auto: no free core") != std::string::npos);
  }
  // Room on every node: auto is numa (a free core of its own).
  auto r4 = place_ranks(paper8(), 4);
  auto a4 = place_progress(paper8(), r4, {progress_policy::automatic});
  auto n4 = place_progress(paper8(), r4, {progress_policy::numa});
  for (std::size_t i = 0; i < r4.size(); ++i) CHECK(a4[i].cpus == n4[i].cpus);
  // Two ranks on a two-core, one-node machine: crossed.
  auto two = load_synthetic("numa:1 core:2 pu:1");
  auto p2 = place_progress(two, place_ranks(two, 2), {progress_policy::automatic});
  CHECK(p2[0].cpus == v{1});
  CHECK(p2[1].cpus == v{0});
}
