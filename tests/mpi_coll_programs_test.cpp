// The MPI layer end to end: collectives and reduction ops. Each program of tests/mpi/
// runs under nmad-run at the process counts it supports (see mpi_run.hpp).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include "tests/mpi_run.hpp"

using namespace nmad_mpi_test;

// Data-moving programs also run on each driver (shm, tcp) at 3 processes.
#define COLL_PROGRAM(name, what)                          \
  TEST_CASE("mpi " name ": " what) {                      \
    expect_pass(name, {1, 2, 3, 4});                      \
    expect_pass_all_drivers(name, {3});                   \
  }

COLL_PROGRAM("coll_gather", "Gather, every root, sizes to > 64 KiB, mixed types, errors")
COLL_PROGRAM("coll_gatherv", "Gatherv with uneven counts and gaps")
COLL_PROGRAM("coll_scatter", "Scatter, every root, sizes to > 64 KiB")
COLL_PROGRAM("coll_scatterv", "Scatterv with uneven counts")
COLL_PROGRAM("coll_allgather", "Allgather on WORLD and an odd-sized sub-communicator")
COLL_PROGRAM("coll_allgatherv", "Allgatherv with uneven counts and gaps")
COLL_PROGRAM("coll_alltoall", "Alltoall, block sizes to 80 KB")
COLL_PROGRAM("coll_alltoallv", "Alltoallv with uneven counts and gaps")
COLL_PROGRAM("coll_alltoallw", "Alltoallw with per-peer (non-contiguous) datatypes")
COLL_PROGRAM("coll_reduce_scatter", "Reduce_scatter(_block), in place, non-commutative op")
COLL_PROGRAM("coll_scan_exscan", "Scan and Exscan, in place, non-commutative op")
COLL_PROGRAM("coll_inplace", "every MPI_IN_PLACE form, blocking and non-blocking")
COLL_PROGRAM("coll_derived", "collectives on non-contiguous and derived datatypes")
COLL_PROGRAM("op_user", "user ops: commutative and not, rank order, handles")
COLL_PROGRAM("op_minmaxloc", "MAXLOC/MINLOC on every pair type, ties")
COLL_PROGRAM("op_predefined", "every predefined op x type, MPI_ERR_OP for the rest")
COLL_PROGRAM("coll_nonblocking", "every I-collective, several pending, Waitall/Testany/Waitsome, p2p overlap")
COLL_PROGRAM("coll_nbc_progress", "Iallreduce completes while the rank computes and tests")
COLL_PROGRAM("coll_sequence", "mixed blocking/non-blocking on two communicators, Comm_free and Finalize pending")
COLL_PROGRAM("coll_neighbor", "Neighbor_* and Ineighbor_* on Cartesian, graph and distributed-graph topologies")
COLL_PROGRAM("coll_persistent", "every MPI_<Coll>_init started 3 times against the blocking form, Startall, neighbourhood, derived type")
COLL_PROGRAM("coll_large_count", "every _c collective (3 forms) against its int form; at 2 ranks 2^31 + 13 chars")
COLL_PROGRAM("coll_bottom", "MPI_BOTTOM with absolute addresses: (I)Neighbor_alltoallw, Alltoallw, null blocks refused")

// The large transfers of coll_large_count (2 ranks) once more through
// engine messages: no shared segment, no single copy.
TEST_CASE("mpi coll_large_count: Bcast_c of more than 2^31 chars and Gatherv_c above INT_MAX through the engine") {
  expect_pass("coll_large_count", {2}, {{"NMAD_COLL_SHM", "off"}, {"NMAD_SHM_CMA", "0"}});
}

// The shared-memory collectives (mpi_layer/coll/shm.hpp): on by default on
// one host (8 ranks on the 2 cores: oversubscribed), off, and across
// emulated hosts and over tcp, where the engine paths run the same checks.
TEST_CASE("mpi coll_shm: barrier/bcast/gather/scatter/allreduce through the communicator's shared segment") {
  expect_pass("coll_shm", {1, 2, 3, 4, 8});
  expect_pass("coll_shm", {4}, {{"NMAD_COLL_SHM", "off"}});
  expect_pass("coll_shm", {4}, {{"NMAD_SHM_CMA", "0"}});  // large alltoall blocks: engine messages
  expect_pass("coll_shm", {4}, {{"NMAD_EMULATED_HOSTS", "a*2,b*2"}});
  expect_pass("coll_shm", {3}, {{"NMAD_DRIVER", "tcp"}});
}

// MPI_Ibarrier through the shared segment (a communicator that has one) and
// through its schedule (a fresh one, the segment off, over tcp).
TEST_CASE("mpi coll_ibarrier: nobody leaves before the last arrives, 300 pending, across rings, freed pending") {
  expect_pass("coll_ibarrier", {1, 2, 3, 4, 8});
  expect_pass("coll_ibarrier", {4}, {{"NMAD_COLL_SHM", "off"}});
  expect_pass("coll_ibarrier", {3}, {{"NMAD_DRIVER", "tcp"}});
}

// Persistent collectives replayed from the schedule built at init: through
// the shared segment (on by default) and without it, over shm and tcp.
TEST_CASE("mpi coll_persistent_replay: new data each start, 1000 starts, derived types, interleaved, freed active, inter") {
  expect_pass("coll_persistent_replay", {1, 2, 3, 4});
  expect_pass_all_drivers("coll_persistent_replay", {2, 3});
  expect_pass("coll_persistent_replay", {2, 4}, {{"NMAD_COLL_SHM", "off"}});
  expect_pass("coll_persistent", {4}, {{"NMAD_COLL_SHM", "off"}});
  expect_pass("coll_persistent", {2}, {{"NMAD_DRIVER", "tcp"}});
}

TEST_CASE("mpi coll_finalize_pending: Finalize completes started collectives, abandons lonely ones, no hang") {
  expect_pass("coll_finalize_pending", {1, 2, 3, 4}, {{"NMAD_COLL_FINALIZE_TIMEOUT_MS", "300"}});
}

// Tiny thresholds (NMAD_COLL_*): the large-message algorithms (scatter +
// allgather and chain bcast, Rabenseifner, linear gather, ring allgather,
// pairwise alltoall and reduce_scatter, chain scan) and Bruck alltoall run
// on small data, non-contiguous types and user ops included; without the
// shared-memory collectives, so the engine's small algorithms run too.
TEST_CASE("mpi coll programs with thresholds forcing the other algorithms") {
  const std::vector<std::pair<std::string, std::string>> env = {
      {"NMAD_COLL_BCAST_SMALL", "64"},         {"NMAD_COLL_BCAST_LARGE", "4096"},
      {"NMAD_COLL_CHAIN_SEGMENT", "1000"},     {"NMAD_COLL_ALLREDUCE_SMALL", "16"},
      {"NMAD_COLL_GATHER_LARGE", "256"},       {"NMAD_COLL_ALLGATHER_SMALL", "64"},
      {"NMAD_COLL_ALLTOALL_SMALL", "64"},      {"NMAD_COLL_ALLTOALL_BRUCK", "1024"},
      {"NMAD_COLL_ALLTOALL_BRUCK_PROCS", "2"}, {"NMAD_COLL_REDUCE_SCATTER_LARGE", "64"},
      {"NMAD_COLL_SCAN_LARGE", "64"},          {"NMAD_COLL_SHM", "off"}};
  for (const char* prog : {"coll_derived", "coll_inplace", "op_user", "op_minmaxloc", "coll_alltoall",
                           "coll_nonblocking", "coll_reduce_scatter", "coll_scan_exscan", "coll_allgather",
                           "coll_large_count"}) {
    CAPTURE(prog);
    expect_pass(prog, {3, 4}, env);
  }
}

TEST_CASE("mpi inter_coll: collectives on an intercommunicator (roots, both directions, non-blocking, errors)") {
  expect_pass("inter_coll", {2, 3, 4});
  expect_pass_all_drivers("inter_coll", {3});
}

TEST_CASE("mpi inter_coll_uneven: intercommunicator Alltoall and Reduce_scatter(_block), blocking and not, unequal groups") {
  expect_pass("inter_coll_uneven", {2, 3, 4, 5});
  expect_pass_all_drivers("inter_coll_uneven", {4});
}

TEST_CASE("mpi coll_threads: THREAD_MULTIPLE, concurrent collectives on per-thread communicators with p2p") {
  expect_pass("coll_threads", {1, 2, 3, 4});
  expect_pass_all_drivers("coll_threads", {3});
}

// Progress threads: MPI_Iallreduce, MPI_Ibcast and MPI_Ialltoall complete
// while rank 0 sleeps outside MPI (and cannot without the thread), over
// shm and tcp.
TEST_CASE("mpi progress_background: non-blocking collectives advance while a rank sleeps (NMAD_PROGRESS)") {
  for (const char* d : {"shm", "tcp"}) {
    const std::string driver_name = d;
    CAPTURE(driver_name);
    expect_pass("progress_background", {2, 3},
                {{"NMAD_DRIVER", d}, {"NMAD_PROGRESS", "thread"}, {"PROGRESS_EXPECT", "background"}});
  }
  expect_pass("progress_background", {2}, {{"NMAD_PROGRESS", "none"}, {"PROGRESS_EXPECT", "none"}});
}

TEST_CASE("coll_hier: hierarchical collectives over emulated hosts") {
  // Uneven hosts, hosts whose ranks are not contiguous, and one rank alone.
  // NMAD_COLL_HIER=on: the barrier too.
  expect_pass("coll_hier", {4}, {{"NMAD_EMULATED_HOSTS", "a*2,b*2"}, {"NMAD_COLL_HIER", "on"}});
  expect_pass("coll_hier", {5}, {{"NMAD_EMULATED_HOSTS", "a,b,a,b,c"}, {"NMAD_COLL_HIER", "on"}});
  expect_pass("coll_hier", {6}, {{"NMAD_EMULATED_HOSTS", "a*3,b*2,c"}, {"NMAD_COLL_HIER", "on"}});
  // The log names the communicators that went hierarchical and their
  // levels; auto keeps the barrier flat; off keeps every collective flat
  // (same results).
  auto r = run_mpi("coll_hier", 4, {{"NMAD_EMULATED_HOSTS", "a*2,b*2"}, {"NMAD_LOG", "info"}});
  CHECK(r.status == 0);
  CHECK(contains(r.err, "hierarchical bcast, reduce and allreduce over levels host\n"));
  r = run_mpi("coll_hier", 4, {{"NMAD_EMULATED_HOSTS", "a*2,b*2"}, {"NMAD_LOG", "info"}, {"NMAD_COLL_HIER", "on"}});
  CHECK(r.status == 0);
  CHECK(contains(r.err, "hierarchical barrier, bcast, reduce and allreduce over levels host\n"));
  r = run_mpi("coll_hier", 4, {{"NMAD_EMULATED_HOSTS", "a*2,b*2"}, {"NMAD_LOG", "info"}, {"NMAD_COLL_HIER", "off"}});
  CHECK(r.status == 0);
  CHECK_FALSE(contains(r.err, "hierarchical"));
  r = run_mpi("coll_hier", 3, {{"NMAD_LOG", "info"}});  // one host: flat
  CHECK(r.status == 0);
  CHECK_FALSE(contains(r.err, "hierarchical"));
  // The other collective programs, with their hierarchical forms.
  for (const char* p : {"coll_basic", "coll_nonblocking", "coll_sequence", "coll_inplace", "coll_nbc_progress"})
    expect_pass(p, {4}, {{"NMAD_EMULATED_HOSTS", "a,b,a,b"}});
  // A bad value stops the job before it starts (it once ran flat).
  r = run_mpi("coll_hier", 2, {{"NMAD_COLL_HIER", "sometimes"}});
  CHECK(r.status == 2);
  CHECK(contains(r.err, "NMAD_COLL_HIER=\"sometimes\": expected one of auto, on, off"));
}

TEST_CASE("coll_hier: levels inside a node (packages, NUMA nodes) from the ranks' bindings") {
  // A synthetic node of 2 packages x 2 NUMA nodes x 2 cores (CPUs 0-1 NUMA
  // node 0, 2-3 node 1 in package 0; 4-5, 6-7 in package 1), bindings
  // emulated per rank. Results are checked by the program; the log gives
  // the levels each communicator got.
  const std::string topo = "pack:2 numa:2 core:2 pu:1";
  auto levels = [&](int np, const std::string& binding, const std::string& hosts) {
    std::vector<std::pair<std::string, std::string>> env = {
        {"NMAD_TOPOLOGY", topo}, {"NMAD_HW_BINDING", binding}, {"NMAD_LOG", "info"}, {"NMAD_COLL_HIER", "on"}};
    if (!hosts.empty()) env.push_back({"NMAD_EMULATED_HOSTS", hosts});
    auto r = run_mpi("coll_hier", np, env);
    CHECK_MESSAGE(r.status == 0, r.err);
    CHECK(count(r.out, "PASS coll_hier rank") == np);
    return r.err;
  };
  // 2 ranks per NUMA node: both levels divide.
  auto err = levels(8, "0;1;2;3;4;5;6;7", "");
  CHECK(contains(err, "(8 ranks): hierarchical barrier, bcast, reduce and allreduce over levels package, numa\n"));
  // Bindings out of rank order (parts that are not rank ranges).
  err = levels(8, "0;4;2;6;1;5;3;7", "");
  CHECK(contains(err, "(8 ranks): hierarchical barrier, bcast, reduce and allreduce over levels package, numa\n"));
  // One rank per NUMA node: the NUMA level separates single ranks only.
  err = levels(4, "0;2;4;6", "");
  CHECK(contains(err, "over levels package\n"));
  // Two emulated hosts of that node, 2 ranks per package: host, package.
  err = levels(8, "0;1;4;5;0;1;4;5", "a*4,b*4");
  CHECK(contains(err, "(8 ranks): hierarchical barrier, bcast, reduce and allreduce over levels host, package\n"));
  // A rank bound across both packages: no package or NUMA level, and with
  // one host nothing divides the group (flat).
  err = levels(4, "0;1;4;0-7", "");
  CHECK_FALSE(contains(err, "hierarchical"));
  // The other collective programs over the intra-node levels.
  for (const char* p : {"coll_basic", "coll_nonblocking", "coll_inplace"})
    expect_pass(p, {8}, {{"NMAD_TOPOLOGY", topo}, {"NMAD_HW_BINDING", "0;2;4;6;1;3;5;7"}});
}
