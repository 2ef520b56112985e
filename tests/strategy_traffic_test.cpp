// Every built-in strategy (and a plugin) carrying real traffic between
// processes started by nmad-run: random flows of eager and rendezvous
// messages with random priorities and packed messages with express and
// cheaper pieces, over shm and tcp and over two tracks per gate (tcp+tcp,
// shm+tcp). tests/workers/strategy_worker.cpp checks every byte and the
// order inside each (peer, tag) flow; here we check exit statuses and
// what the workers report.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "tests/test_paths.hpp"

namespace {

using nmad_test::count;

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

// split_balance with arbitrary rail bandwidths (NMAD_RAIL_BANDWIDTH, random
// ratios from 1:20 to 20:1): every byte and the order of random flows and of
// concurrent rendezvous messages cut into pieces of every proportion; then
// one message at a time, the rendezvous bytes each rail carried follow the
// given ratio. shm+tcp without cross-memory attach: with it, shm pulls a
// rendezvous whole (single copy) and nothing is split.
void ratios_over(const char* drivers, env_list extra, unsigned seed) {
  std::mt19937 rng(seed);
  for (int round = 0; round < 3; ++round) {
    const double b0 = 10.0 + static_cast<double>(rng() % 1990), f = std::pow(20.0, (rng() % 2001) / 1000.0 - 1.0);
    const double b1 = std::max(5.0, b0 / f);
    char bw[64];
    std::snprintf(bw, sizeof bw, "%.1f,%.1f", b0, b1);
    const int wseed = static_cast<int>(rng() % 1000) + 1;
    CAPTURE(drivers);
    CAPTURE(bw);
    CAPTURE(wseed);
    env_list env = {{"NMAD_DRIVERS", drivers},           {"NMAD_STRATEGY", "split_balance"},
                    {"NMAD_RAIL_BANDWIDTH", bw},         {"NMAD_RDV_THRESHOLD", "16384"},
                    {"NMAD_PROFILE", "off"}};
    env.insert(env.end(), extra.begin(), extra.end());
    auto r = run_worker(2, {"ratio", std::to_string(wseed), std::to_string(messages() / 2)}, env);
    REQUIRE(r.status == 0);
    CHECK(count(r.out, "ratio ok with strategy split_balance") == 2);
    unsigned long long x0 = 0, x1 = 0;
    const auto at = r.out.find("rail bytes ");
    REQUIRE(at != std::string::npos);
    REQUIRE(std::sscanf(r.out.c_str() + at, "rail bytes %llu %llu", &x0, &x1) == 2);
    const double got = static_cast<double>(x0) / static_cast<double>(x0 + x1), want = b0 / (b0 + b1);
    MESSAGE(std::string(drivers) << " rails " << bw << ": rail 0 carried " << got << " of the bytes, expected " << want);
    CHECK(x0 + x1 > 0);
    CHECK(std::fabs(got - want) < 0.05);
  }
}

TEST_CASE("split_balance, random rail ratios: every byte, the order, and the split (tcp+tcp)") {
  ratios_over("tcp+tcp", {}, 11);
}
TEST_CASE("split_balance, random rail ratios: every byte, the order, and the split (shm+tcp)") {
  ratios_over("shm+tcp", {{"NMAD_SHM_CMA", "0"}}, 12);
}

TEST_CASE("bad multirail knobs stop start-up, naming what is wrong") {
  struct bad {
    env_list env;
    const char* says;
  };
  const bad cases[] = {
      {{{"NMAD_DRIVERS", "tcp+tcp"}, {"NMAD_RAIL_BANDWIDTH", "100,fast"}}, "entry 2 ('fast') is not a bandwidth"},
      {{{"NMAD_DRIVERS", "tcp+tcp"}, {"NMAD_RAIL_BANDWIDTH", "100,0"}}, "entry 2 ('0') is not a bandwidth"},
      {{{"NMAD_DRIVERS", "tcp+tcp"}, {"NMAD_RAIL_BANDWIDTH", "100"}}, "gives 1 bandwidth(s) but this job has 2 rails"},
      {{{"NMAD_DRIVER", "tcp"}, {"NMAD_RAIL_BANDWIDTH", "100"}}, "but this job has no rails"},
      {{{"NMAD_DRIVERS", "tcp+tcp"}, {"NMAD_TCP_HOSTS", "127.0.0.1"}},
       "names 1 address(es), but this process opens tcp rail 2"},
      {{{"NMAD_DRIVERS", "tcp+tcp"}, {"NMAD_TCP_HOSTS", "127.0.0.1,localhost"}},
       "NMAD_TCP_HOSTS=\"127.0.0.1,localhost\": entry 2 'localhost' is not an IPv4 address"},
      {{{"NMAD_DRIVERS", "tcp+tcp"}, {"NMAD_TCP_HOSTS", ",127.0.0.1"}}, "entry 1 is empty"},
  };
  for (const bad& b : cases) {
    CAPTURE(b.says);
    env_list env = b.env;
    env.emplace_back("NMAD_PROFILE", "off");
    auto r = run_worker(2, {"flows", "1", "10"}, env, 60);
    CHECK(r.status != 0);
    CHECK(r.err.find(b.says) != std::string::npos);
  }
  // Two addresses of this host, one per tcp rail: the job runs.
  auto ok = run_worker(2, {"flows", "1", "50"},
                       {{"NMAD_DRIVERS", "tcp+tcp"}, {"NMAD_TCP_HOSTS", "127.0.0.1,127.0.0.2"},
                        {"NMAD_STRATEGY", "split_balance"}, {"NMAD_PROFILE", "off"}});
  CHECK(ok.status == 0);
  CHECK(count(ok.out, "flows ok") == 2);
}

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
