// Multi-process engine tests: real processes started by nmad-run, talking
// over the tcp driver on loopback. Each scenario (tests/workers/
// engine_*.cpp) checks contents, order and errors itself; here we check
// exit statuses and what the processes and the launcher report.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/test_paths.hpp"

namespace {

using nmad_test::contains;
using nmad_test::count;

struct job {
  int nprocs;
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;
  double timeout_s = 240;
};

nmad_test::run_result run_at(const job& j, const char* level) {
  std::vector<std::string> argv = {nmad_test::runfile("tools/nmad-run"), "-n", std::to_string(j.nprocs),
                                   "--timeout", std::to_string(static_cast<int>(j.timeout_s)),
                                   nmad_test::runfile("tests/workers/engine_worker")};
  argv.insert(argv.end(), j.args.begin(), j.args.end());
  nmad_test::run_options o;
  o.timeout_s = j.timeout_s + 30;
  o.env = j.env;
  o.env.emplace_back("ENGINE_WORKER_THREADS", level);
  auto r = nmad_test::run(argv, o);
  if (r.status != 0) MESSAGE("thread level " << std::string(level) << ": stdout:\n" << r.out << "\nstderr:\n" << r.err);
  return r;
}

// Every job runs twice: with sessions at thread level single (the engine
// takes no lock) and multiple. Both must end the same way; the checks of
// each test case look at the second run.
nmad_test::run_result run_job(const job& j) {
  // Under the sanitizers (slow) each job runs once, at thread level multiple.
  if (std::getenv("NMAD_TEST_ONE_LEVEL")) return run_at(j, "multiple");
  const auto single = run_at(j, "single");
  auto multiple = run_at(j, "multiple");
  CHECK_MESSAGE(single.status == multiple.status, "thread level single ended with status " << single.status
                                                  << ", multiple with " << multiple.status);
  return multiple;
}

}  // namespace

TEST_CASE("2 processes exchange 10,000 messages of random sizes and tags (default strategy)") {
  auto r = run_job({2, {"stress", "5000", "1"}, {{"NMAD_DRIVER", "tcp"}, {"NMAD_STRATEGY", "default"}}});
  CHECK(r.status == 0);
  CHECK(count(r.out, "in order") == 2);
}

TEST_CASE("3 processes exchange 10,200 messages with any-source receives (aggreg strategy)") {
  auto r = run_job({3, {"stress", "1700", "2"}, {{"NMAD_DRIVER", "tcp"}, {"NMAD_STRATEGY", "aggreg"}}});
  CHECK(r.status == 0);
  CHECK(count(r.out, "in order") == 3);
}

TEST_CASE("4 processes, small rendezvous threshold: 10,200 messages, mostly rendezvous") {
  auto r = run_job({4, {"stress", "850", "3"}, {{"NMAD_DRIVER", "tcp"}, {"NMAD_RDV_THRESHOLD", "512"}, {"NMAD_STRATEGY", "aggreg"}}});
  CHECK(r.status == 0);
  CHECK(count(r.out, "in order") == 4);
}

TEST_CASE("2 processes ping-pong 2000 times") {
  auto r = run_job({2, {"pingpong", "2000"}, {{"NMAD_DRIVER", "tcp"}}});
  CHECK(r.status == 0);
  CHECK(count(r.out, "round trips ok") == 2);
}

TEST_CASE("aggregation: sends queued behind a busy track leave in N packets with default") {
  // No progress thread: it would drain the track between the sends.
  auto r = run_job({2, {"aggregation", "200"}, {{"NMAD_DRIVER", "tcp"}, {"NMAD_STRATEGY", "default"}, {"NMAD_PROGRESS", "none"}}});
  CHECK(r.status == 0);
  CHECK(contains(r.out, "strategy default sent 200 messages in 200 packets"));
}

TEST_CASE("aggregation: the same sends leave in fewer packets with aggreg") {
  // No progress thread: it would drain the track between the sends.
  auto r = run_job({2, {"aggregation", "200"}, {{"NMAD_DRIVER", "tcp"}, {"NMAD_STRATEGY", "aggreg"}, {"NMAD_PROGRESS", "none"}}});
  CHECK(r.status == 0);
  CHECK(contains(r.out, "strategy aggreg sent 200 messages in"));
  CHECK_FALSE(contains(r.out, "in 200 packets"));
}

TEST_CASE("pack/unpack request/answer exchange: express readable at once, cheaper after end") {
  auto r = run_job({2, {"pack", "30"}, {{"NMAD_DRIVER", "tcp"}}});
  CHECK(r.status == 0);
  CHECK(contains(r.out, "30 calls answered correctly"));
}

TEST_CASE("pack/unpack with aggregation and a small rendezvous threshold") {
  auto r = run_job({2, {"pack", "20"}, {{"NMAD_DRIVER", "tcp"}, {"NMAD_STRATEGY", "aggreg"}, {"NMAD_RDV_THRESHOLD", "64"}}});
  CHECK(r.status == 0);
  CHECK(contains(r.out, "20 calls answered correctly"));
}

TEST_CASE("a receive buffer too small: error on that request, sender unaffected, process goes on") {
  auto r = run_job({2, {"truncate"}, {{"NMAD_DRIVER", "tcp"}}});
  CHECK(r.status == 0);
  CHECK(count(r.out, "truncated to the") == 2);
  CHECK(contains(r.out, "the process went on"));
  CHECK(contains(r.out, "all sends completed normally"));
}

TEST_CASE("a rank killed mid-run: the others' requests fail naming it, nmad-run names the rank") {
  auto r = run_job({3, {"killed"}, {{"NMAD_DRIVER", "tcp"}, {"NMAD_RUN_KILL_GRACE", "20"}}, 60});
  CHECK(r.status != 0);
  CHECK(contains(r.err, "rank 1"));
  CHECK(contains(r.err, "signal 9"));
  CHECK(count(r.out, "saw: rank 1 failed") == 2);
  CHECK(count(r.out, "survivors still exchange messages") == 2);
}

// Receives matched to a rendezvous of a rank that then dies, unexpected
// rendezvous of a dead rank, any-source receives and probes once nobody is
// left: each fails with peer_failed, within a bounded time (the launcher's
// kill grace is far longer than the test allows).
// (shm without cross-memory attach, where the sender pushes: with it, rank 0
// pulls the data itself and the receive succeeds, see the next test.)
TEST_CASE("a rank dies with a matched rendezvous: receives and probes fail, naming it (shm and tcp)") {
  for (const char* drv : {"shm", "tcp"}) {
    CAPTURE(drv);
    const auto t0 = std::chrono::steady_clock::now();
    auto r = run_job({2, {"killed_rdv"}, {{"NMAD_DRIVER", drv}, {"NMAD_SHM_CMA", "0"}, {"NMAD_RUN_KILL_GRACE", "60"},
                                     {"NMAD_PROGRESS", "none"}},  // rank 1 must not progress before dying
                       60});
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(r.status != 0);  // rank 1 was killed
    CHECK(contains(r.err, "rank 1"));
    CHECK(count(r.out, "rank 0 saw every failure") == 1);
    CHECK(contains(r.out, "rank 1"));
    CHECK(secs < 30);  // not the launcher's kill grace: the engine noticed
  }
}

TEST_CASE("a rank dies between two unpacks of its packed message: the unpack and end() fail (shm and tcp)") {
  for (const char* drv : {"shm", "tcp"}) {
    CAPTURE(drv);
    const auto t0 = std::chrono::steady_clock::now();
    auto r = run_job({2, {"killed_unpack"}, {{"NMAD_DRIVER", drv}, {"NMAD_RUN_KILL_GRACE", "60"},
                                        {"NMAD_PROGRESS", "none"}},  // rank 1 must not progress before dying
                       60});
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(r.status != 0);  // rank 1 was killed
    CHECK(count(r.out, "rank 0: unpack from the dead rank failed") == 1);
    CHECK(secs < 30);  // not the launcher's kill grace
  }
}

// shm pulls rendezvous data from the receiver's side: a sender that does
// not call the library after isend still has its message delivered, and its
// first test() afterwards finds the send complete. Without cross-memory
// attach the sender has to push (its first test() usually finds the send
// pending, but one progress round can be enough, so that is not asserted).
TEST_CASE("shm: the receiver pulls rendezvous data while the sender stays out of the library") {
  auto r = run_job({2, {"pull", "1"}, {{"NMAD_DRIVER", "shm"}}});
  CHECK(r.status == 0);
  CHECK(contains(r.out, "pull: 4194304 bytes verified"));
  CHECK(contains(r.out, "pull: first test after the sender's pause: complete"));
  auto push = run_job({2, {"pull", "0"}, {{"NMAD_DRIVER", "shm"}, {"NMAD_SHM_CMA", "0"}}});
  CHECK(push.status == 0);
  CHECK(contains(push.out, "pull: 4194304 bytes verified"));
}

// With the block policy a waiting process sleeps: over 600 ms of waiting it
// uses a small fraction of a core (busy polling would use all of it).
TEST_CASE("wait policy block: a receiver waiting 600 ms sleeps instead of spinning (shm and tcp)") {
  for (const char* drv : {"shm", "tcp"}) {
    CAPTURE(drv);
    auto r = run_job({2, {"sleeper", "600"}, {{"NMAD_DRIVER", drv}, {"NMAD_WAIT", "block"}}});
    CHECK(r.status == 0);
    const auto at = r.out.find("sleeper: waited ");
    REQUIRE(at != std::string::npos);
    double wall = 0, cpu = 0;
    REQUIRE(std::sscanf(r.out.c_str() + at, "sleeper: waited %lf s using %lf s of CPU", &wall, &cpu) == 2);
    CHECK(wall >= 0.5);
    CHECK(cpu < 0.25 * wall);
    CHECK(contains(r.out, "(block)"));
  }
}

TEST_CASE("foreign connections (wrong key, random bytes, duplicate rank) are refused; the job finishes") {
  auto r = run_job({2, {"intruder"}, {{"NMAD_DRIVER", "tcp"}}});
  CHECK(r.status == 0);
  CHECK(contains(r.out, "three foreign connections were refused"));
  CHECK(count(r.out, "job unaffected") == 2);
  CHECK(contains(r.err, "refused"));
}

TEST_CASE("a rank with the wrong job key is refused at start-up, fails fast and is named") {
  const auto t0 = std::chrono::steady_clock::now();
  auto r = run_job({2, {"wrongkey"}, {{"NMAD_DRIVER", "tcp"}}, 60});
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(r.status != 0);
  CHECK(contains(r.err, "refused"));
  CHECK(contains(r.err, "rank 1"));
  CHECK(s < 20);  // not the 30 s connect timeout
}

TEST_CASE("two threads per process exchange concurrently through one session") {
  auto r = run_job({2, {"threads", "300"}, {{"NMAD_DRIVER", "tcp"}}});
  CHECK(r.status == 0);
  CHECK(count(r.out, "exchanges ok") == 2);
}

// The same scenarios over the shm driver.
TEST_CASE("shm: 4 processes exchange 10,200 messages of random sizes and tags (aggreg)") {
  auto r = run_job({4, {"stress", "850", "4"}, {{"NMAD_DRIVER", "shm"}, {"NMAD_STRATEGY", "aggreg"}}});
  CHECK(r.status == 0);
  CHECK(count(r.out, "in order") == 4);
}

TEST_CASE("shm: 2 processes, 10,000 messages, data through the ring (no cross-memory attach)") {
  auto r = run_job({2, {"stress", "5000", "5"}, {{"NMAD_DRIVER", "shm"}, {"NMAD_SHM_CMA", "0"}}});
  CHECK(r.status == 0);
  CHECK(count(r.out, "in order") == 2);
}

TEST_CASE("shm: pack/unpack, truncation and threads") {
  for (const char* scenario : {"pack", "truncate", "threads"}) {
    INFO(scenario);
    auto r = run_job({2, {scenario}, {{"NMAD_DRIVER", "shm"}}});
    CHECK(r.status == 0);
  }
}

TEST_CASE("shm: a rank killed mid-run is detected and named") {
  auto r = run_job({3, {"killed"}, {{"NMAD_DRIVER", "shm"}, {"NMAD_RUN_KILL_GRACE", "20"}}, 60});
  CHECK(r.status != 0);
  CHECK(contains(r.err, "rank 1"));
  // nmad-run removes the shared-memory segments the killed rank left.
  const auto at = r.err.find("rank 1 (pid ");
  REQUIRE(at != std::string::npos);
  const std::string pid = r.err.substr(at + 12, r.err.find(')', at) - at - 12);
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm"))
    CHECK(e.path().filename().string().find("-" + pid + "-") == std::string::npos);
  CHECK(count(r.out, "saw: rank 1 failed") == 2);
  CHECK(count(r.out, "survivors still exchange messages") == 2);
}

// 8 threads per process share one session (thread level multiple): random
// sizes 0 B - 8 MiB, random tags, any-source receives mixed in; every
// byte, size, source, tag and each (peer, tag) stream's order checked.
TEST_CASE("8 threads per process, 2 processes over shm and 4 over tcp: random traffic checked byte by byte") {
  auto a = run_job({2, {"mt_stress", "8", "40", "11"}, {{"NMAD_DRIVER", "shm"}}});
  CHECK(a.status == 0);
  CHECK(count(a.out, "in order") == 2);
  auto b = run_job({4, {"mt_stress", "8", "20", "12"}, {{"NMAD_DRIVER", "tcp"}, {"NMAD_STRATEGY", "aggreg"}}});
  CHECK(b.status == 0);
  CHECK(count(b.out, "in order") == 4);
}

TEST_CASE("completion callbacks start requests: a peer answered entirely from callbacks (shm and tcp)") {
  for (const char* drv : {"shm", "tcp"}) {
    INFO("driver ", drv);
    auto r = run_job({2, {"callbacks", "300"}, {{"NMAD_DRIVER", drv}}});
    CHECK(r.status == 0);
    CHECK(contains(r.out, "callbacks rank 1: 300 receives answered from callbacks"));
    CHECK(contains(r.out, "callbacks rank 0: 300 echoes from callbacks"));
  }
}

// Two tracks per gate: random traffic (eager, aggregated, and rendezvous
// cut across both rails) with every byte and the per-(peer, tag) order
// checked by the workers; both rails must have carried sends.
TEST_CASE("two-track gates (shm+tcp, tcp+tcp): random traffic, every byte and the order checked") {
  for (const char* drivers : {"shm+tcp", "tcp+tcp"}) {
    INFO("NMAD_DRIVERS=", drivers);
    auto r = run_job({3, {"stress", "400", "7"},
                      {{"NMAD_DRIVERS", drivers}, {"NMAD_RDV_THRESHOLD", "4096"}, {"NMAD_STRATEGY", "aggreg"}}});
    CHECK(r.status == 0);
    CHECK(count(r.out, "in order") == 3);
    CHECK(count(r.out, std::string("drivers ") + drivers + ",") == 3);
    // Every rank sent on rail 0 and rail 1.
    for (std::size_t p = r.out.find("rail sends "); p != std::string::npos; p = r.out.find("rail sends ", p + 1)) {
      unsigned long long r0 = 0, r1 = 0;
      CHECK(std::sscanf(r.out.c_str() + p, "rail sends %llu %llu", &r0, &r1) == 2);
      CHECK(r0 > 0);
      CHECK(r1 > 0);
    }
  }
}

TEST_CASE("auto driver choice: peers on this host use shm, the job runs and a stranger on tcp is still refused") {
  auto r = run_job({3, {"stress", "400", "6"}});
  CHECK(r.status == 0);
  CHECK(count(r.out, "in order") == 3);
  auto i = run_job({2, {"intruder"}});
  CHECK(i.status == 0);
  CHECK(count(i.out, "job unaffected") == 2);
}

// Destroying a pending request cancels it (destroy_pending, tests/workers/
// engine_request_lifetime.cpp): a destroyed receive never takes a message,
// a destroyed unanswered rendezvous is withdrawn, a destroyed matched
// receive has its bytes before the destructor returns; then, with the peer
// killed and nobody having noticed yet, destroying its pending requests
// (matched rendezvous receive, posted and any-source receives, rendezvous
// and eager sends) and progressing neither crashes nor writes to their
// buffers.
TEST_CASE("destroying pending requests cancels them, also after their peer died unnoticed (shm and tcp)") {
  for (const char* drv : {"shm", "tcp"}) {
    CAPTURE(drv);
    auto r = run_job({2, {"destroy_pending"}, {{"NMAD_DRIVER", drv}, {"NMAD_SHM_CMA", "0"}, {"NMAD_RUN_KILL_GRACE", "60"},
                                           {"NMAD_PROGRESS", "none"}},  // nobody notices the death before the destructors
                      60});
    CHECK(r.status != 0);  // rank 0 was killed
    CHECK(count(r.out, "destroyed live requests cancelled, withdrawn or completed") == 2);
    CHECK(count(r.out, "rank 1: pending requests destroyed after rank 0 failed; the session went on") == 1);
    CHECK_FALSE(contains(r.err, "FAILED"));
  }
}

TEST_CASE("partitioned messages: 1-64 pieces from 4 threads in random order, other part sizes, checked part by part") {
  // shm and tcp; each strategy; a small rendezvous threshold makes pieces rendezvous.
  const std::vector<std::vector<std::pair<std::string, std::string>>> envs = {
      {{"NMAD_DRIVER", "tcp"}, {"NMAD_STRATEGY", "default"}},
      {{"NMAD_DRIVER", "shm"}, {"NMAD_STRATEGY", "aggreg"}},
      {{"NMAD_DRIVER", "tcp"}, {"NMAD_STRATEGY", "aggreg"}, {"NMAD_RDV_THRESHOLD", "256"}},
      {{"NMAD_DRIVER", "shm"}, {"NMAD_STRATEGY", "split_balance"}, {"NMAD_RDV_THRESHOLD", "4096"}},
      {{"NMAD_DRIVER", "shm"}, {"NMAD_STRATEGY", "prio"}},
  };
  for (const auto& env : envs) {
    auto r = run_job({2, {"partitioned", "40", "4"}, env});
    CHECK_MESSAGE(r.status == 0, "with " << env[0].second << "/" << env[1].second);
    CHECK(contains(r.out, "partitioned: 40 messages checked part by part"));
  }
}

TEST_CASE("partitioned pieces ready together: one packet each with default, grouped with aggreg") {
  // No progress thread: it would drain the track between the pieces.
  auto d = run_job({2, {"partitioned_packets", "64"}, {{"NMAD_DRIVER", "tcp"}, {"NMAD_STRATEGY", "default"}, {"NMAD_PROGRESS", "none"}}});
  CHECK(d.status == 0);
  CHECK(contains(d.out, "strategy default sent 64 pieces in 64 packets"));
  auto a = run_job({2, {"partitioned_packets", "64"}, {{"NMAD_DRIVER", "tcp"}, {"NMAD_STRATEGY", "aggreg"}, {"NMAD_PROGRESS", "none"}}});
  CHECK(a.status == 0);
  CHECK(contains(a.out, "strategy aggreg sent 64 pieces in"));
}
