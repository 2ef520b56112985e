// Progress threads (NMAD_PROGRESS, core/progress/progress_thread.hpp): a
// rendezvous-size transfer completes while the application sleeps outside
// the library, over shm and over tcp, in both directions — seen from the
// sleeping side's completion callback and from the peer's blocking call.
// Without a progress thread (NMAD_PROGRESS=none) it does not, which shows
// the check can fail. The scenarios are tests/workers/progress_worker.cpp.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <string>
#include <vector>

#include "tests/test_paths.hpp"

namespace {

using nmad_test::contains;

constexpr int kSleepMs = 1500;
const char* const kSize = "4194304";  // rendezvous on every driver

nmad_test::run_result run_worker(const std::string& scenario, const std::string& driver,
                                 const std::string& progress, const std::string& level = "multiple",
                                 std::vector<std::pair<std::string, std::string>> extra = {}) {
  std::vector<std::string> argv = {nmad_test::runfile("tools/nmad-run"), "-n", "2", "--timeout", "120",
                                   nmad_test::runfile("tests/workers/progress_worker"), scenario, kSize,
                                   std::to_string(kSleepMs)};
  nmad_test::run_options o;
  o.timeout_s = 150;
  o.env = {{"NMAD_DRIVER", driver}, {"NMAD_PROGRESS", progress}, {"PROGRESS_WORKER_THREADS", level}};
  // The sleeper sleeps on until the peer is done (at most 60 s more, with
  // a progress thread): a loaded machine makes the background transfer
  // slower, not the check wrong. See progress_worker.cpp.
  static int runs = 0;
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string mark = std::string(tmp && *tmp ? tmp : "/tmp") + "/progress_mark." +
                           std::to_string(::getpid()) + "." + std::to_string(++runs);
  std::remove(mark.c_str());
  o.env.push_back({"PROGRESS_WORKER_MARK", mark});
  if (progress == "thread") o.env.push_back({"PROGRESS_WORKER_WAIT_MS", "60000"});
  for (auto& e : extra) o.env.push_back(e);
  auto r = nmad_test::run(argv, o);
  if (r.status != 0) MESSAGE("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  return r;
}

// The peer's "blocking call took X ms".
double peer_ms(const std::string& out) {
  std::smatch m;
  static const std::regex re("blocking call took ([0-9.]+) ms");
  if (!std::regex_search(out, m, re)) return -1;
  return std::stod(m[1]);
}

// The number after `prefix` (a "... at N ns" line), or -1.
long long ns_after(const std::string& out, const std::string& prefix) {
  const std::size_t at = out.find(prefix);
  if (at == std::string::npos) return -1;
  return std::atoll(out.c_str() + at + prefix.size());
}

// The peer's blocking calls ended while the sleeper still slept (both
// times from the host's monotonic clock).
void check_served_during_sleep(const std::string& out, int sleeper, int peer) {
  const long long slept_until = ns_after(out, "rank " + std::to_string(sleeper) + ": sleep ended at ");
  const long long served_at = ns_after(out, "rank " + std::to_string(peer) + ": blocking calls ended at ");
  REQUIRE_MESSAGE((slept_until > 0 && served_at > 0), out);
  CHECK_MESSAGE(served_at < slept_until, "the peer waited " << peer_ms(out) << " ms, "
                                             << (served_at - slept_until) / 1e6 << " ms past the sleep");
}

void check_background(const std::string& scenario, const std::string& driver, const std::string& level) {
  auto r = run_worker(scenario, driver, "thread", level);
  REQUIRE(r.status == 0);
  CHECK(contains(r.out, "progress thread (NMAD_PROGRESS=thread)"));
  // Over shm the receiver pulls a rendezvous send's bytes itself: the
  // sender's progress thread is not woken for it (that would only take
  // CPU from the computing sender); the peer's side shows the transfer
  // done, the sender sees its completion at its next call.
  if (!(scenario == "isend" && driver == "shm"))
    CHECK_MESSAGE(contains(r.out, scenario + " completed during the sleep"), r.out);
  // The peer did not wait for the sleeper to come back.
  CHECK(peer_ms(r.out) >= 0);
  const int sleeper = scenario == "isend" ? 0 : 1;
  check_served_during_sleep(r.out, sleeper, 1 - sleeper);
}

}  // namespace

TEST_CASE("progress thread: a rendezvous isend completes while the sender sleeps (shm, tcp)") {
  for (const char* d : {"shm", "tcp"}) {
    const std::string driver_name = d;
    CAPTURE(driver_name);
    check_background("isend", d, "multiple");
  }
}

TEST_CASE("progress thread: a rendezvous irecv completes while the receiver sleeps (shm, tcp)") {
  for (const char* d : {"shm", "tcp"}) {
    const std::string driver_name = d;
    CAPTURE(driver_name);
    check_background("irecv", d, "multiple");
  }
}

TEST_CASE("progress thread at thread level single: the engine turns its locks on for it") {
  check_background("irecv", "shm", "single");
  check_background("isend", "tcp", "single");
}

TEST_CASE("without a progress thread nothing advances while the application sleeps") {
  for (const char* d : {"shm", "tcp"}) {
    const std::string driver_name = d;
    CAPTURE(driver_name);
    auto r = run_worker("irecv", d, "none");
    REQUIRE(r.status == 0);
    CHECK(contains(r.out, "progress none (NMAD_PROGRESS=none"));
    CHECK(contains(r.out, "irecv completed after the sleep"));
    CHECK(peer_ms(r.out) >= kSleepMs / 2.0);  // (the peer may start later than the sleeper)
  }
}

TEST_CASE("NMAD_PROGRESS=auto decides from the CPUs and says why") {
  auto r = run_worker("isend", "shm", "auto");
  REQUIRE(r.status == 0);
  CHECK((contains(r.out, "progress none (auto: 2 local process(es) on") ||
         contains(r.out, "progress thread (auto: 2 local process(es) on")));
}

TEST_CASE("NMAD_PROGRESS=auto counts the processes of this host over tcp too (no node-local driver)") {
  // Only tcp joins the two ranks: they still share this host's CPUs (with
  // as many CPUs as ranks there is no core to spare for a thread, which
  // would run on the peer's core and take it from the peer).
  auto r = run_worker("isend", "tcp", "auto");
  REQUIRE(r.status == 0);
  CHECK_MESSAGE(contains(r.out, "(auto: 2 local process(es) on"), r.out);
}

TEST_CASE("a bad NMAD_PROGRESS or NMAD_PROGRESS_CPUS stops start-up with a clear message") {
  auto r = run_worker("isend", "shm", "sometimes");
  CHECK(r.status != 0);
  CHECK(contains(r.err, "NMAD_PROGRESS=\"sometimes\": expected one of none, thread, auto"));
  auto c = run_worker("isend", "shm", "thread", "multiple", {{"NMAD_PROGRESS_CPUS", "0-x"}});
  CHECK(c.status != 0);
  CHECK(contains(c.err, "NMAD_PROGRESS_CPUS=\"0-x\": expected a CPU list such as 0-3,8"));
}

// Copy offload (NMAD_COPY_OFFLOAD, session::isend): eager isends from 4 KiB
// are left to the progress thread. A mix of inline, eager and rendezvous
// messages on one tag must arrive whole and in order; the counters show
// who sent them.
namespace {
std::uint64_t counter(const std::string& out, const std::string& name) {
  std::smatch m;
  const std::regex re(name + "=([0-9]+)");
  if (!std::regex_search(out, m, re)) return ~std::uint64_t{0};
  return std::stoull(m[1]);
}
}  // namespace

TEST_CASE("copy offload: the progress thread sends eager messages while the sender sleeps, order kept (shm, tcp)") {
  for (const char* d : {"shm", "tcp"}) {
    const std::string driver_name = d;
    CAPTURE(driver_name);
    auto r = run_worker("offload", d, "thread", "multiple", {{"NMAD_COPY_OFFLOAD", "4K"}});
    REQUIRE(r.status == 0);
    CHECK(contains(r.out, "copy offload from 4096 B"));
    CHECK(contains(r.out, "48 messages received in order, every byte checked"));
    // Over shm the receiver pulls rendezvous bytes itself and the sleeping
    // sender's progress thread is not woken for that (see
    // check_background): when the last rendezvous (#46) is pulled after
    // the thread went to sleep, it and the eager send behind it (#47) may
    // complete at the sender's next call. Everything else completes during
    // the sleep.
    if (driver_name == "shm" && !contains(r.out, "48 of 48 sends completed during the sleep")) {
      CHECK_MESSAGE(contains(r.out, "46 of 48 sends completed during the sleep"), r.out);
      CHECK_MESSAGE(contains(r.out, "still incomplete after the sleep: #46 (307200 B) #47 (24576 B)\n"), r.out);
    } else {
      CHECK_MESSAGE(contains(r.out, "48 of 48 sends completed during the sleep"), r.out);
    }
    CHECK(counter(r.out, "offloaded_sends") > 0);
    CHECK(counter(r.out, "offloaded_sends") < 48);  // small and rendezvous ones are not
    CHECK(counter(r.out, "offload_tasks_by_thread") > 0);
    // The receiver had everything while the sender still slept.
    CHECK_MESSAGE(peer_ms(r.out) >= 0, r.out);
    check_served_during_sleep(r.out, 0, 1);
  }
}

TEST_CASE("copy offload off, or without a progress thread: nothing is offloaded") {
  auto off = run_worker("offload", "tcp", "thread", "multiple", {{"NMAD_COPY_OFFLOAD", "off"}});
  REQUIRE(off.status == 0);
  CHECK(contains(off.out, "copy offload off"));
  CHECK(counter(off.out, "offloaded_sends") == 0);
  CHECK(contains(off.out, "48 messages received in order, every byte checked"));
  auto none = run_worker("offload", "shm", "none", "multiple", {{"NMAD_COPY_OFFLOAD", "on"}});
  REQUIRE(none.status == 0);
  CHECK(contains(none.out, "copy offload min 0,"));
  CHECK(counter(none.out, "offloaded_sends") == 0);
  CHECK(contains(none.out, "48 messages received in order, every byte checked"));
}

TEST_CASE("a bad NMAD_COPY_OFFLOAD stops start-up with a clear message") {
  auto r = run_worker("offload", "shm", "thread", "multiple", {{"NMAD_COPY_OFFLOAD", "sometimes"}});
  CHECK(r.status != 0);
  CHECK(contains(r.err, "NMAD_COPY_OFFLOAD=\"sometimes\": expected a size in bytes (digits, optional K, M, G or T), "
                        "0..1G, or off, none, on"));
}
