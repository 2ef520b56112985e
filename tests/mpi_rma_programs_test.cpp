// One-sided communication (MPI 4.1 chapter 12) end to end: each program of
// tests/mpi/rma_*.c runs under nmad-run at 1 to 4 processes, checks the
// data and the error classes itself, and every rank must print its PASS
// line. The programs were checked against Open MPI 4.1.4 and MPICH 4.0.2
// (their known deviations are relaxed in the programs, for them only).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include "tests/mpi_run.hpp"

using namespace nmad_mpi_test;

TEST_CASE("mpi rma_windows: create/allocate/allocate_shared/dynamic, shared_query, attach/detach, attributes, "
          "group, name, info, keyvals, error handlers, zero-size windows") {
  expect_pass("rma_windows", {1, 2, 3, 4});
}

TEST_CASE("mpi rma_fence: Put/Get/Accumulate under fences between non-contiguous datatypes on both sides, "
          "assertions, per-rank disp_unit, PROC_NULL, zero counts, self target") {
  expect_pass("rma_fence", {1, 2, 3, 4});
  expect_pass_all_drivers("rma_fence", {2});
}

TEST_CASE("mpi rma_accumulate: every predefined op on every basic type, Get_accumulate, Fetch_and_op, "
          "Compare_and_swap, against a local reference") {
  expect_pass("rma_accumulate", {1, 2, 3, 4});
  expect_pass_all_drivers("rma_accumulate", {2});
}

TEST_CASE("mpi rma_atomicity: concurrent Accumulate/Fetch_and_op on one counter, a CAS spin lock, default "
          "accumulate ordering") {
  expect_pass("rma_atomicity", {1, 2, 3, 4});
  expect_pass_all_drivers("rma_atomicity", {3});
}

TEST_CASE("mpi rma_pscw: post/start/complete/wait and Win_test over subset groups, several epochs, NOCHECK") {
  expect_pass("rma_pscw", {1, 2, 3, 4});
  expect_pass_all_drivers("rma_pscw", {3});
}

TEST_CASE("mpi rma_symmetric: neighbours work on each other's windows at once with two-message operations") {
  // Operations whose data follows the request on the operation's tag, in
  // both directions at once: an answer receive must never take the
  // peer's follow-up (their tags are distinct).
  expect_pass("rma_symmetric", {2, 3, 4});
  expect_pass("rma_symmetric", {2}, {{"NMAD_RMA_SHM", "off"}});
  expect_pass_all_drivers("rma_symmetric", {2});
}

TEST_CASE("mpi rma_passive: exclusive and shared locks, lock_all, flushes, request-based operations, Win_sync, "
          "a target computing without MPI calls") {
  expect_pass("rma_passive", {1, 2, 3, 4});
  expect_pass_all_drivers("rma_passive", {2});
  // A progress thread serves the target while it computes.
  expect_pass("rma_passive", {2, 4}, {{"NMAD_PROGRESS", "thread"}});
}

TEST_CASE("mpi rma_shared: contiguous shared-memory windows, load/store between ranks, RMA mixed with loads") {
  expect_pass("rma_shared", {1, 2, 3, 4});
}

TEST_CASE("mpi rma_errors: the MPI error class of every erroneous one-sided call, window usable afterwards") {
  expect_pass("rma_errors", {1, 2, 3, 4});
}

namespace {
// A job in which rank 1 dies once the window exists (see
// mpi_programs_test's proc_failed_* suites for the bounds): the launcher
// gives the survivors 30 s, a survivor that fails at once ends in seconds,
// so 25 s tells a wait for the dead from a failure; 150 s is the launcher's
// timeout for a real hang.
void expect_survivors_fail_fast(int nprocs, std::vector<std::pair<std::string, std::string>> env, bool killed) {
  env.emplace_back("NMAD_RUN_KILL_GRACE", "30");
  auto r = run_mpi("rma_dead_target", nprocs, env);
  const int survivors = nprocs - 1;
  if (r.timed_out || r.seconds >= 25 || count(r.out, "PASS rma_dead_target rank") != survivors)
    MESSAGE("rma_dead_target took " << r.seconds << " s\nstdout:\n" << r.out << "\nstderr:\n" << r.err);
  CHECK_FALSE(r.timed_out);
  CHECK(r.seconds < 25);
  if (killed)
    CHECK(r.status != 0);
  else
    CHECK(r.status == 3);  // the dead rank's status
  CHECK(contains(r.err, "rank 1 (pid"));
  CHECK(count(r.out, "PASS rma_dead_target rank") == survivors);
  CHECK_FALSE(contains(r.out, "FAIL rma_dead_target:"));
  CHECK(count(r.out, "lock/put/unlock: ") == survivors);
  CHECK(count(r.out, "lock_all/put/flush: ") == survivors);
  CHECK(count(r.out, "MPI_ERR_PROC_FAILED") >= 2 * survivors);
}
}  // namespace

TEST_CASE("mpi rma_dead_target: RMA towards a dead target fails with MPI_ERR_PROC_FAILED, never hangs") {
  for (const char* driver : {"", "tcp"}) {
    CAPTURE(driver);
    std::vector<std::pair<std::string, std::string>> env;
    if (*driver) env.emplace_back("NMAD_DRIVER", driver);
    expect_survivors_fail_fast(2, env, false);
    expect_survivors_fail_fast(3, env, false);
  }
  expect_survivors_fail_fast(3, {{"MPITEST_DEATH", "kill"}}, true);
  expect_survivors_fail_fast(3, {{"NMAD_PROGRESS", "thread"}}, false);
}
