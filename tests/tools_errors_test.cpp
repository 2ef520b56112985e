// The installed tools given bad settings or arguments: one message naming
// the problem and a non-zero exit status, never an uncaught exception
// ("terminate called" and a backtrace). nmad-pingpong (//bench:nmad_pingpong)
// with a strategy or driver that does not exist and alone; nmad-run and
// nmad-info with bad arguments and settings. (nmad-trace's bad inputs are
// in trace_test.)
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "tests/test_paths.hpp"

namespace {

using nmad_test::contains;

// No sign of an exception nobody caught, nor of a crash.
void check_clean_failure(const nmad_test::run_result& r) {
  CHECK(r.status != 0);
  CHECK_FALSE(r.timed_out);
  CHECK_FALSE(contains(r.err, "terminate called"));
  CHECK_FALSE(contains(r.err, "what()"));
  CHECK_FALSE(contains(r.err, "Backtrace"));
  CHECK_FALSE(contains(r.err, "terminated with signal"));
}

nmad_test::run_result pingpong_job(std::vector<std::pair<std::string, std::string>> env) {
  nmad_test::run_options o;
  o.timeout_s = 60;
  o.env = std::move(env);
  return nmad_test::run({nmad_test::runfile("tools/nmad-run"), "-n", "2", "--timeout", "40",
                         nmad_test::runfile("bench/nmad_pingpong"), "--sizes", "8", "--reps", "10"},
                        o);
}

}  // namespace

TEST_CASE("nmad-pingpong: an unknown NMAD_STRATEGY or NMAD_DRIVER is named, the job fails cleanly") {
  auto good = pingpong_job({});
  CHECK(good.status == 0);
  CHECK(contains(good.out, "nmad native ping-pong"));
  auto strategy = pingpong_job({{"NMAD_STRATEGY", "no_such_strategy"}});
  INFO(strategy.err);
  check_clean_failure(strategy);
  CHECK(contains(strategy.err, "nmad_pingpong: "));
  CHECK(contains(strategy.err, "unknown strategy 'no_such_strategy'"));
  auto driver = pingpong_job({{"NMAD_DRIVER", "no_such_driver"}});
  INFO(driver.err);
  check_clean_failure(driver);
  CHECK(contains(driver.err, "nmad_pingpong: "));
  CHECK(contains(driver.err, "no_such_driver"));
  // Alone (a singleton): says it needs 2 processes.
  auto alone = nmad_test::run({nmad_test::runfile("bench/nmad_pingpong")}, nmad_test::run_options().timeout(30));
  CHECK(alone.status == 2);
  CHECK(contains(alone.err, "needs 2 processes"));
}

TEST_CASE("nmad-run and nmad-info: bad arguments and settings are named, never an uncaught exception") {
  const std::string run = nmad_test::runfile("tools/nmad-run");
  const std::string info = nmad_test::runfile("tools/nmad-info");
  const std::vector<std::vector<std::string>> bad_runs = {
      {run, "-n", "2", "--bind", "bogus", "/bin/true"},
      {run, "-n", "2", "--timeout", "abc", "/bin/true"},
      {run, "-n", "99999999999", "/bin/true"},
      {run, "-n", "2", "--hostfile", "/nonexistent", "/bin/true"},
      {run, "-n", "2", "/nonexistent/program"},
      {info, "--topology", "bogus"},
      {info, "--placement", "-n", "4", "--progress", "bogus"},
      {info, "-n", "x"},
  };
  for (const auto& argv : bad_runs) {
    std::string line;
    for (const auto& a : argv) line += a + " ";
    CAPTURE(line);
    auto r = nmad_test::run(argv, nmad_test::run_options().timeout(30));
    INFO(r.err);
    check_clean_failure(r);
    CHECK_FALSE(r.err.empty());
  }
}
