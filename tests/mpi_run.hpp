#pragma once
// Running the MPI test programs of tests/mpi/ under nmad-run (shared by the
// mpi_*_programs_test suites).
#include <doctest/doctest.h>

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "tests/test_paths.hpp"

namespace nmad_mpi_test {

using nmad_test::contains;
using nmad_test::count;

inline nmad_test::run_result run_mpi(const std::string& prog, int nprocs,
                                     std::vector<std::pair<std::string, std::string>> env = {}) {
  std::vector<std::string> argv = {nmad_test::runfile("tools/nmad-run"), "-n", std::to_string(nprocs), "--timeout",
                                   "150", nmad_test::runfile("tests/mpi/" + prog)};
  nmad_test::run_options o;
  o.timeout_s = 180;
  o.env = std::move(env);
  return nmad_test::run(argv, o);
}

// Runs prog at each process count; every rank must print its PASS line and
// the job must exit 0.
inline void expect_pass(const std::string& prog, std::initializer_list<int> counts,
                        std::vector<std::pair<std::string, std::string>> env = {}) {
  for (int n : counts) {
    CAPTURE(n);
    auto r = run_mpi(prog, n, env);
    if (r.status != 0 || count(r.out, "PASS " + prog + " rank") != n) {
      std::string with;
      for (const auto& [k, v] : env) with += " " + k + "=" + v;
      MESSAGE(prog << " with " << n << " process(es)" << (with.empty() ? "" : ", environment" + with)
                   << ":\nstdout:\n" << r.out << "\nstderr:\n" << r.err);
    }
    CHECK(r.status == 0);
    CHECK(count(r.out, "PASS " + prog + " rank") == n);
    CHECK_FALSE(contains(r.out, "FAIL"));
  }
}

// The same at each count, once per driver (shm, tcp).
inline void expect_pass_all_drivers(const std::string& prog, std::initializer_list<int> counts) {
  for (const char* d : {"shm", "tcp"}) {
    CAPTURE(d);
    expect_pass(prog, counts, {{"NMAD_DRIVER", d}});
  }
}

}  // namespace nmad_mpi_test
