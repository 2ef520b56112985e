// MPI programs built against our mpi.h, started by MPICH's hydra launcher
// (mpiexec.hydra, Debian package mpich): the ranks find each other through
// hydra's PMI-1 server (PMI_FD), not through nmad-run.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "tests/mpi_run.hpp"
#include "tests/test_paths.hpp"

using namespace nmad_mpi_test;

namespace {

std::string hydra() {
  for (const char* p : {"/usr/bin/mpiexec.hydra", "/usr/local/bin/mpiexec.hydra"})
    if (access(p, X_OK) == 0) return p;
  return {};
}

nmad_test::run_result run_hydra(const std::string& prog, int n, std::vector<std::string> extra = {}) {
  const std::string h = hydra();
  REQUIRE_MESSAGE(!h.empty(), "mpiexec.hydra not found: tools/test installs it (Debian package mpich)");
  std::vector<std::string> argv = {h, "-launcher", "fork", "-n", std::to_string(n)};
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.push_back(nmad_test::runfile("tests/mpi/" + prog));
  nmad_test::run_options o;
  o.timeout_s = 120;
  // Whatever nmad-run or a test harness left in the environment must not
  // be what connects the ranks.
  o.unset_env = {"PMI_FD", "PMI_PORT", "PMI_RANK", "PMI_SIZE", "NMAD_JOB_KEY"};
  return nmad_test::run(argv, o);
}

void expect_hydra_pass(const std::string& prog, int n, std::vector<std::string> extra = {}) {
  auto r = run_hydra(prog, n, extra);
  if (r.status != 0 || count(r.out, "PASS " + prog + " rank") != n)
    MESSAGE(prog << " under hydra with " << n << " processes:\nstdout:\n" << r.out << "\nstderr:\n" << r.err);
  CHECK(r.status == 0);
  CHECK(count(r.out, "PASS " + prog + " rank") == n);
}

}  // namespace

TEST_CASE("hydra: ranks get rank and size from hydra's PMI") {
  auto r = run_hydra("hello", 4);
  CHECK(r.status == 0);
  for (int i = 0; i < 4; ++i) CHECK(contains(r.out, "Hello from rank " + std::to_string(i) + " of 4"));
  CHECK(count(r.out, "PASS hello rank") == 4);
}

TEST_CASE("hydra: point-to-point and collectives move data (shm and tcp)") {
  expect_hydra_pass("sendrecv", 4);
  expect_hydra_pass("ordering", 4);
  expect_hydra_pass("coll_basic", 3);
  expect_hydra_pass("sendrecv", 4, {"-genv", "NMAD_DRIVER", "tcp"});
  expect_hydra_pass("coll_basic", 3, {"-genv", "NMAD_DRIVER", "tcp"});
}

TEST_CASE("hydra: MPI_Abort ends the job with a failure status") {
  auto r = run_hydra("abort", 2);
  CHECK(r.status == 7);  // the code given to MPI_Abort
  CHECK_FALSE(contains(r.out, "PASS abort rank 0"));
}
