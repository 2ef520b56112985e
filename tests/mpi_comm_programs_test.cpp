// The MPI layer end to end: groups, communicators, attributes, info, intercommunicators. Each program of tests/mpi/
// runs under nmad-run at the process counts it supports (see mpi_run.hpp).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <cstdio>
#include <cstdlib>

#include "tests/mpi_run.hpp"

using namespace nmad_mpi_test;

TEST_CASE("group_ops") { expect_pass("group_ops", {1, 2, 3, 4}); }
TEST_CASE("group_empty") { expect_pass("group_empty", {1, 2}); }
TEST_CASE("comm_create") {
  expect_pass("comm_create", {1, 2, 3});
  expect_pass_all_drivers("comm_create", {4});
}
TEST_CASE("comm_create_group") {
  expect_pass("comm_create_group", {1, 2, 3});
  expect_pass_all_drivers("comm_create_group", {4});
}
TEST_CASE("comm_split_type") { expect_pass("comm_split_type", {1, 2, 4}); }
TEST_CASE("comm_idup") {
  expect_pass("comm_idup", {1, 2});
  expect_pass_all_drivers("comm_idup", {4});
}
TEST_CASE("comm_idup_pending") {
  expect_pass("comm_idup_pending", {1, 2, 3});
  expect_pass("comm_idup_pending", {2}, {{"NMAD_PROGRESS", "none"}});
}
TEST_CASE("comm_name") { expect_pass("comm_name", {1, 2}); }
TEST_CASE("comm_errors") { expect_pass("comm_errors", {1, 2, 4}); }
TEST_CASE("attr_keyval") { expect_pass("attr_keyval", {1, 2, 4}); }
TEST_CASE("attr_keyval_free") { expect_pass("attr_keyval_free", {1, 2}); }
TEST_CASE("attr_predefined") { expect_pass("attr_predefined", {1, 2}); }
TEST_CASE("attr_deprecated") { expect_pass("attr_deprecated", {1, 2}); }
TEST_CASE("info_basic") { expect_pass("info_basic", {1, 2}); }
TEST_CASE("inter_create") {
  expect_pass("inter_create", {2, 3});
  expect_pass_all_drivers("inter_create", {4});
}
TEST_CASE("inter_merge") {
  expect_pass("inter_merge", {2, 3});
  expect_pass_all_drivers("inter_merge", {4});
}
TEST_CASE("inter_remote") { expect_pass("inter_remote", {2, 3, 4}); }
TEST_CASE("inter_from_groups") {
  expect_pass("inter_from_groups", {2, 3});
  expect_pass_all_drivers("inter_from_groups", {4});
  expect_pass("inter_from_groups", {2, 3}, {{"INTER_FROM_GROUPS_MIXED", "1"}});
  expect_pass("inter_from_groups", {2}, {{"INTER_FROM_GROUPS_MIXED", "1"}, {"NMAD_DRIVER", "tcp"}});
}
TEST_CASE("comm_threads") {
  expect_pass("comm_threads", {1, 2, 3});
  expect_pass_all_drivers("comm_threads", {4});
}

// Hardware-topology communicators (hwsplit.cpp) on emulated machines: the
// synthetic topology and the emulated hosts and bindings come through the
// environment (docs/CONFIGURATION.md, testing knobs).
TEST_CASE("comm_hw_split") {
  // 2 nodes x 2 packages x 2 NUMA nodes x 8 cores, 4 and 8 ranks per node.
  for (int per_node : {4, 8}) {
    const std::string k = std::to_string(per_node);
    expect_pass("comm_hw_split", {2 * per_node},
                {{"NMAD_TOPOLOGY", "pack:2 numa:2 core:8 pu:1"}, {"NMAD_EMULATED_HOSTS", "n0*" + k + ",n1*" + k}});
  }
}
TEST_CASE("comm_hw_bind") {
  expect_pass("comm_hw_bind", {4}, {{"NMAD_TOPOLOGY", "pack:2 numa:2 core:8 pu:1"}, {"NMAD_HW_BINDING", "0;1;none;8,16"}});
}
TEST_CASE("comm_hw_knob") { expect_pass("comm_hw_knob", {1, 2}, {{"NMAD_HW_BINDING", "0-1;garbage"}}); }
TEST_CASE("comm_hw_unguided") {
  expect_pass("comm_hw_unguided", {1, 2, 4});  // this machine, bound by nmad-run
  expect_pass("comm_hw_unguided", {4}, {{"NMAD_TOPOLOGY", "pack:2 l3:1 numa:2 core:4 l2:1 l1d:1 pu:2"}});
}
TEST_CASE("topo_graph: Graph_create/get/neighbors/map, self-loops and repeated edges, errors") {
  expect_pass("topo_graph", {1, 2, 3, 4});
}
TEST_CASE("topo_dist_graph: Dist_graph_create(_adjacent), weights, edges given by other processes, agreed errors") {
  expect_pass("topo_dist_graph", {1, 2, 3});
  expect_pass_all_drivers("topo_dist_graph", {4});
}
TEST_CASE("comm_priority: the nmad_priority hint, its errors, and the prio strategy letting a hinted send overtake") {
  expect_pass("comm_priority", {1, 2, 3});
  // More eager bulk than the driver holds while the receiver sleeps (as in
  // strategy_traffic_test): the rest waits in the sender's queue, where
  // only a priority can move a later message ahead (no flow-control bound:
  // the bulk stays eager, nothing turns into a rendezvous).
  struct setup {
    const char* driver;
    const char* count;
    const char* size;
  };
  for (const setup& su : {setup{"tcp", "2000", "16384"}, setup{"shm", "1000", "4096"}}) {
    CAPTURE(su.driver);
    auto run = [&](const char* hint) {
      nmad_test::run_options o;
      o.timeout_s = 180;
      o.env = {{"NMAD_DRIVER", su.driver}, {"NMAD_PROGRESS", "none"}, {"NMAD_RDV_THRESHOLD", "32768"},
               {"NMAD_STRATEGY", "prio"}, {"NMAD_UNEXPECTED_MAX", "unlimited"}};
      auto r = nmad_test::run({nmad_test::runfile("tools/nmad-run"), "-n", "2", "--timeout", "150",
                               nmad_test::runfile("tests/mpi/comm_priority"), "overtake", su.count, su.size, hint},
                              o);
      CAPTURE(r.out);
      CAPTURE(r.err);
      REQUIRE(r.status == 0);
      REQUIRE(count(r.out, "PASS comm_priority rank") == 2);
      int pos = -1;
      const auto at = r.out.find("urgent sent with ");
      REQUIRE(at != std::string::npos);
      REQUIRE(std::sscanf(r.out.c_str() + at, "urgent sent with %d", &pos) == 1);
      MESSAGE(su.driver << " " << hint << ": urgent sent with " << pos << " of " << su.count << " bulk messages");
      return pos;
    };
    const int bulk = std::atoi(su.count);
    CHECK(run("hint") < bulk * 3 / 4);  // ahead of a quarter of the queued bulk at least
    CHECK(run("nohint") == bulk);       // without the hint: behind all of it
  }
}
