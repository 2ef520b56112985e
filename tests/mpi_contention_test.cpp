// The MPI layer on a contended machine: more ranks than CPUs and other busy
// processes beside them (started and ended here, by PID). The graph-code
// polling loop (persistent receives, MPI_Testany, an MPI_Ibarrier polled
// with MPI_Test) and the collectives suite must give the right results
// there too. Only results are checked: how fast they run on a loaded
// machine is the business of bench/compare --only contention --load K.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include "tests/mpi_run.hpp"

using namespace nmad_mpi_test;

namespace {

// K busy processes for the scope's life: children that spin until killed.
struct busy_processes {
  std::vector<pid_t> pids;
  explicit busy_processes(int k) {
    for (int i = 0; i < k; ++i) {
      const pid_t p = ::fork();
      REQUIRE(p >= 0);
      if (p == 0) {
        volatile unsigned long x = 0;
        for (;;) x = x + 1;
      }
      pids.push_back(p);
    }
  }
  ~busy_processes() {
    for (pid_t p : pids) ::kill(p, SIGKILL);
    for (pid_t p : pids) ::waitpid(p, nullptr, 0);
  }
};

const int kBusy = 2;  // beside 4 ranks on this machine's CPUs

}  // namespace

TEST_CASE("contended: the polling loop (Testany over restarted persistent receives, Ibarrier polled with Test)") {
  busy_processes load(kBusy);
  expect_pass("polling_loop", {4, 5});
  expect_pass("polling_loop", {4}, {{"NMAD_DRIVER", "tcp"}});
  // With the progress thread forced, and with the other wait policies (the
  // discipline only changes who runs when, never what arrives).
  expect_pass("polling_loop", {4}, {{"NMAD_PROGRESS", "thread"}});
  expect_pass("polling_loop", {4}, {{"NMAD_WAIT", "block"}});
  expect_pass("polling_loop", {4}, {{"NMAD_WAIT", "busy"}, {"NMAD_WAIT_YIELD", "1"}});
}

TEST_CASE("contended: the collectives suite at 4 ranks with busy processes beside them") {
  busy_processes load(kBusy);
  for (const char* prog : {"coll_basic", "coll_scatter", "coll_gather", "coll_alltoall", "coll_allgather",
                           "coll_reduce_scatter", "coll_scan_exscan", "coll_nonblocking", "coll_nbc_progress",
                           "coll_sequence", "coll_inplace"}) {
    CAPTURE(prog);
    expect_pass(prog, {4});
  }
  expect_pass("coll_basic", {4}, {{"NMAD_DRIVER", "tcp"}});
  expect_pass("coll_nonblocking", {4}, {{"NMAD_WAIT", "block"}});
}

TEST_CASE("contended: point to point with polling completion calls") {
  busy_processes load(kBusy);
  for (const char* prog : {"completion", "completion_progress", "probe", "persistent", "ordering"}) {
    CAPTURE(prog);
    expect_pass(prog, {4});
  }
}
