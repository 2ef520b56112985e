// MPI-IO end to end: each program of tests/mpi/io_*.c runs under nmad-run
// at 1, 2 and 4 processes, checks the file contents byte by byte, and every
// rank must print its PASS line.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <string>

#include "tests/mpi_run.hpp"

using namespace nmad_mpi_test;

TEST_CASE("mpi io_files: open/close/delete, sizes, hints, access modes, every error class, file error handlers") {
  expect_pass("io_files", {1, 2, 4});
}

TEST_CASE("mpi io_files fatal: MPI_ERRORS_ARE_FATAL on MPI_FILE_NULL ends the job with the message") {
  nmad_test::run_options o;
  o.timeout_s = 120;
  auto r = nmad_test::run({nmad_test::runfile("tools/nmad-run"), "-n", "2", "--timeout", "90",
                           nmad_test::runfile("tests/mpi/io_files"), "fatal"},
                          o);
  if (!contains(r.err, "MPI_File_open")) MESSAGE("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  CHECK(r.status != 0);
  CHECK_FALSE(r.timed_out);
  CHECK(contains(r.err, "MPI_File_open: MPI_ERR_NO_SUCH_FILE"));
  CHECK_FALSE(contains(r.out, "FAIL"));
}

TEST_CASE("mpi io_views: vector/indexed/struct/subarray/darray filetypes, get_view, external32") {
  expect_pass("io_views", {1, 2, 4});
}

TEST_CASE("mpi io_pointers: individual and shared file pointers, ordered access, seek") {
  expect_pass("io_pointers", {1, 2, 4});
}

TEST_CASE("mpi io_nonblocking: non-blocking and split collective access, overlap with computation") {
  expect_pass("io_nonblocking", {1, 2, 4});
  expect_pass("io_nonblocking", {2}, {{"NMAD_PROGRESS", "thread"}});
}

TEST_CASE("mpi io_nb_collective: non-blocking and split two-phase access progressed by the layer, errors agreed") {
  expect_pass("io_nb_collective", {1, 2, 3, 4});
  // With a progress thread the data reaches the file while no rank calls MPI.
  expect_pass("io_nb_collective", {2, 4}, {{"NMAD_PROGRESS", "thread"}});
}

TEST_CASE("mpi io_atomic: atomic mode keeps conflicting non-contiguous writes whole") {
  expect_pass("io_atomic", {1, 2, 4});
}

TEST_CASE("mpi io_windows: non-contiguous memory and external32 staged in small windows, independent and collective") {
  expect_pass("io_windows", {1, 2, 3});
}

TEST_CASE("mpi io_aggregators: one aggregator per NUMA node on every host by default, chosen from the topology") {
  // Synthetic topologies and emulated hosts (placement scatters ranks by
  // NUMA node), so the expectation does not depend on this machine.
  expect_pass("io_aggregators", {3}, {{"NMAD_TOPOLOGY", "pack:1 numa:1 core:4 pu:1"}, {"IO_EXPECT_AGGREGATORS", "0"}});
  expect_pass("io_aggregators", {4}, {{"NMAD_TOPOLOGY", "pack:2 numa:1 core:2 pu:1"}, {"IO_EXPECT_AGGREGATORS", "0,1"}});
  expect_pass("io_aggregators", {4},
              {{"NMAD_TOPOLOGY", "pack:2 numa:1 core:2 pu:1"}, {"NMAD_EMULATED_HOSTS", "a*2,b*2"},
               {"IO_EXPECT_AGGREGATORS", "0,2,1,3"}});
  expect_pass("io_aggregators", {4},
              {{"NMAD_TOPOLOGY", "pack:1 numa:1 core:4 pu:1"}, {"NMAD_EMULATED_HOSTS", "a*2,b*2"},
               {"IO_EXPECT_AGGREGATORS", "0,2"}});
}

TEST_CASE("mpi io_collective: two-phase aggregation under cb_nodes/cb_buffer_size/romio_cb_* hints") {
  expect_pass("io_collective", {1, 2, 3, 4});
}
