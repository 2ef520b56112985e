// Every built-in strategy (and a plugin) carrying real traffic between
// processes started by nmad-run: random flows of eager and rendezvous
// messages with random priorities and packed messages with express and
// cheaper pieces, over shm and tcp and over two tracks per gate (tcp+tcp,
// shm+tcp). tests/workers/strategy_worker.cpp checks every byte and the
// order inside each (peer, tag) flow; here we check exit statuses and
// what the workers report.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/test_paths.hpp"

namespace {

using env_list = std::vector<std::pair<std::string, std::string>>;

nmad_test::run_result run_worker(int nprocs, std::vector<std::string> args, env_list env, double timeout_s = 120) {
  std::vector<std::string> argv = {nmad_test::runfile("tools/nmad-run"), "-n", std::to_string(nprocs), "--timeout",
                                   std::to_string(static_cast<int>(timeout_s)),
                                   nmad_test::runfile("tests/workers/strategy_worker")};
  argv.insert(argv.end(), args.begin(), args.end());
  nmad_test::run_options o;
  o.timeout_s = timeout_s + 30;
  o.env = std::move(env);
  auto r = nmad_test::run(argv, o);
  if (r.status != 0) MESSAGE("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  return r;
}

int count(const std::string& hay, const std::string& needle) {
  int n = 0;
  for (auto p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

const char* const kStrategies[] = {"default", "aggreg", "aggreg_autoextended", "prio", "split_balance"};

// Sanitized builds are slow: fewer messages.
int messages() { return std::getenv("NMAD_TEST_ONE_LEVEL") ? 120 : 400; }

void flows_over(const char* drivers_var, const char* drivers, int nprocs) {
  for (const char* strat : kStrategies) {
    for (int seed : {1, 2}) {
      CAPTURE(strat);
      CAPTURE(drivers);
      CAPTURE(seed);
      auto r = run_worker(nprocs, {"flows", std::to_string(seed), std::to_string(messages())},
                          {{drivers_var, drivers}, {"NMAD_STRATEGY", strat}, {"NMAD_RDV_THRESHOLD", "16384"}});
      CHECK(r.status == 0);
      CHECK(count(r.out, std::string("flows ok with strategy ") + strat) == nprocs);
    }
  }
}

}  // namespace

TEST_CASE("random flows, every strategy, over shm (3 processes)") { flows_over("NMAD_DRIVER", "shm", 3); }
TEST_CASE("random flows, every strategy, over tcp (2 processes)") { flows_over("NMAD_DRIVER", "tcp", 2); }
TEST_CASE("random flows, every strategy, two tracks per gate: tcp+tcp") { flows_over("NMAD_DRIVERS", "tcp+tcp", 2); }
TEST_CASE("random flows, every strategy, two tracks per gate: shm+tcp") { flows_over("NMAD_DRIVERS", "shm+tcp", 2); }

TEST_CASE("two threads per process, every strategy, two tracks (tcp+tcp)") {
  for (const char* strat : kStrategies) {
    CAPTURE(strat);
    auto r = run_worker(2, {"threads", "7", std::to_string(messages() / 2)},
                        {{"NMAD_DRIVERS", "tcp+tcp"}, {"NMAD_STRATEGY", strat}});
    CHECK(r.status == 0);
    CHECK(count(r.out, std::string("threads ok with strategy ") + strat) == 2);
  }
}

TEST_CASE("prio: a priority message overtakes queued bulk of another tag; aggreg keeps submission order") {
  // More eager bulk than the driver holds (tcp: socket buffers; shm: the
  // 256 KiB ring) while the receiver sleeps: the rest waits in the queue.
  struct setup {
    const char* driver;
    int count;
    const char* size;
  };
  for (const setup& su : {setup{"tcp", 2000, "16384"}, setup{"shm", 1000, "4096"}}) {
    CAPTURE(su.driver);
    const env_list base = {{"NMAD_DRIVER", su.driver}, {"NMAD_PROGRESS", "none"}, {"NMAD_RDV_THRESHOLD", "32768"}};
    const std::string count = std::to_string(su.count);
    env_list e = base;
    e.emplace_back("NMAD_STRATEGY", "prio");
    auto r = run_worker(2, {"overtake", count, su.size}, e);
    REQUIRE(r.status == 0);
    int pos = -1;
    REQUIRE(r.out.find("arrived at ") != std::string::npos);
    REQUIRE(std::sscanf(r.out.c_str() + r.out.find("arrived at "), "arrived at %d", &pos) == 1);
    MESSAGE(su.driver << ": with prio the priority message arrived at " << pos << " of " << su.count + 1);
    CHECK(pos < su.count * 3 / 4);  // ahead of a quarter of the queued bulk at least
    e = base;
    e.emplace_back("NMAD_STRATEGY", "aggreg");
    r = run_worker(2, {"overtake", count, su.size}, e);
    REQUIRE(r.status == 0);
    CHECK(r.out.find("arrived at " + count + " of") != std::string::npos);  // last: submission order
  }
}

TEST_CASE("a plugin strategy (by path) carries the traffic, and its hooks ran") {
  const std::string plugin = nmad_test::runfile("tests/strategy_plugins/libnmad_strategy_test_v2.so");
  auto r = run_worker(2, {"flows", "3", std::to_string(messages())},
                      {{"NMAD_DRIVERS", "tcp+tcp"}, {"NMAD_STRATEGY", plugin}, {"NMAD_TEST_PLUGIN_REPORT", "1"}});
  CHECK(r.status == 0);
  CHECK(count(r.out, "flows ok with strategy test_v2") == 2);
  // Each process: a report with packets built and submits seen.
  CHECK(count(r.err, "test_v2 plugin:") == 2);
  CHECK(r.err.find(" 0 packets") == std::string::npos);
  CHECK(r.err.find(" 0 submits") == std::string::npos);
}

TEST_CASE("a bad plugin stops start-up with the reason, on every rank") {
  const std::string plugin = nmad_test::runfile("tests/strategy_plugins/libnmad_strategy_bad_version.so");
  auto r = run_worker(2, {"flows", "1", "10"}, {{"NMAD_DRIVER", "tcp"}, {"NMAD_STRATEGY", plugin}}, 60);
  CHECK(r.status != 0);
  CHECK(r.err.find("interface version 99") != std::string::npos);
  auto u = run_worker(2, {"flows", "1", "10"}, {{"NMAD_DRIVER", "tcp"}, {"NMAD_STRATEGY", "nosuch"}}, 60);
  CHECK(u.status != 0);
  CHECK(u.err.find("unknown strategy 'nosuch'") != std::string::npos);
}
