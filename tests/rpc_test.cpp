// nmad::rpc and the per-gate/per-track statistics, in real processes
// started by nmad-run (tests/workers/rpc_worker.cpp checks contents,
// order and errors; here: exit statuses and what the processes report).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "tests/test_paths.hpp"

namespace {

using nmad_test::contains;
using nmad_test::count;

nmad_test::run_result run_job(int n, std::vector<std::string> args, std::vector<std::pair<std::string, std::string>> env,
                              int timeout_s = 120) {
  std::vector<std::string> argv = {nmad_test::runfile("tools/nmad-run"), "-n", std::to_string(n), "--timeout",
                                   std::to_string(timeout_s), nmad_test::runfile("tests/workers/rpc_worker")};
  argv.insert(argv.end(), args.begin(), args.end());
  nmad_test::run_options o;
  o.timeout_s = timeout_s + 30;
  o.env = env;
  auto r = nmad_test::run(argv, o);
  if (r.status != 0) MESSAGE("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  return r;
}

}  // namespace

TEST_CASE("statistics: aggreg aggregates a burst (chunks per packet > 1), rendezvous count = large sends") {
  for (const char* driver : {"tcp", "shm"}) {
    CAPTURE(driver);
    auto r = run_job(2, {"stats"}, {{"NMAD_DRIVER", driver}, {"NMAD_STRATEGY", "aggreg"}, {"NMAD_STATS", "1"}});
    CHECK(r.status == 0);
    CHECK(contains(r.out, "stats rank 0: ok"));
    CHECK(contains(r.out, "stats rank 1: ok"));
    // NMAD_STATS=1: one block per process, per gate and track.
    CHECK(count(r.err, "nmad stats: rank ") == 2);
    CHECK(contains(r.err, "rank 0 -> rank 1: rendezvous sends 5"));
    CHECK(contains(r.err, std::string("track 0 (") + driver + "): packets "));
    CHECK(contains(r.err, "chunks per packet: 1: "));
  }
}

TEST_CASE("statistics: default sends one chunk per packet, at thread level single too") {
  auto r = run_job(2, {"stats"}, {{"NMAD_DRIVER", "tcp"}, {"NMAD_STRATEGY", "default"}, {"RPC_WORKER_THREADS", "single"}});
  CHECK(r.status == 0);
  CHECK(contains(r.out, "stats rank 0: ok"));
  CHECK(!contains(r.err, "nmad stats"));  // not asked for
}

TEST_CASE("NMAD_STATS with a bad value stops start-up naming it") {
  auto r = run_job(1, {"stats"}, {{"NMAD_STATS", "yes"}}, 30);
  CHECK(r.status != 0);
  CHECK(contains(r.err, "NMAD_STATS=\"yes\": expected 0 or 1"));
}

TEST_CASE("rpc: many concurrent calls from 3 clients, answers checked, calls back to the clients") {
  for (const char* strategy : {"default", "aggreg"}) {
    CAPTURE(strategy);
    auto r = run_job(4, {"many", "40"}, {{"NMAD_DRIVER", "tcp"}, {"NMAD_STRATEGY", strategy}});
    CHECK(r.status == 0);
    CHECK(contains(r.out, "rpc server: served 240 calls"));
    CHECK(count(r.out, "40 async and 40 sync calls checked") == 3);
  }
}

TEST_CASE("rpc over shm with rendezvous bodies") {
  auto r = run_job(3, {"many", "30"}, {{"NMAD_DRIVER", "shm"}, {"NMAD_STRATEGY", "aggreg"}});
  CHECK(r.status == 0);
  CHECK(count(r.out, "30 async and 30 sync calls checked") == 2);
}

TEST_CASE("rpc: an unknown service and a throwing handler give clear errors; the server goes on") {
  auto r = run_job(2, {"unknown"}, {{"NMAD_DRIVER", "tcp"}});
  CHECK(r.status == 0);
  CHECK(contains(r.out, "unknown service: rpc call of service 99 at rank 0: rank 0 has no service 99"));
  CHECK(contains(r.out, "handler failed:"));
  CHECK(contains(r.out, "rpc unknown: ok"));
}

TEST_CASE("rpc: the server killed with calls under way: they fail naming it, no hang") {
  for (const char* driver : {"tcp", "shm"}) {
    CAPTURE(driver);
    auto r = run_job(2, {"killed"}, {{"NMAD_DRIVER", driver}, {"NMAD_RUN_KILL_GRACE", "20"}}, 60);
    CHECK(r.status != 0);  // rank 1 was killed
    CHECK(!r.timed_out);
    CHECK(contains(r.err, "signal 9"));
    CHECK(contains(r.out, "rpc killed: "));
    CHECK(contains(r.out, "rank 1 failed"));
  }
}

TEST_CASE("examples/dsm_page_server: 2 clients write, read back and read pages (3 per request), checked") {
  for (const char* driver : {"tcp", "shm"}) {
    CAPTURE(driver);
    nmad_test::run_options o;
    o.timeout_s = 150;
    o.env = {{"NMAD_DRIVER", driver}};
    auto r = nmad_test::run({nmad_test::runfile("tools/nmad-run"), "-n", "3", "--timeout", "120",
                             nmad_test::runfile("examples/dsm_page_server"), "--requests", "200"},
                            o);
    if (r.status != 0) MESSAGE("stdout:\n" << r.out << "\nstderr:\n" << r.err);
    CHECK(r.status == 0);
    CHECK(count(r.out, "200 requests of 3 pages") == 2);
    CHECK(contains(r.out, "server: 448 requests served"));  // 2 x (3 checks + 21 warm-up + 200)
  }
}
