// Flow control: bounded unexpected memory (tests/workers/flowctl_worker.cpp
// under nmad-run, 2 processes, over shm and tcp). The receiver first
// progresses without receiving while the sender pushes as much as it can;
// its RSS (read by the worker itself from /proc/self/statm: a memory bound
// is a correctness property) must stay under NMAD_UNEXPECTED_MAX plus a
// fixed overhead, drop back after draining, and every message must arrive
// in order with its content. The sender is slowed (what its credit does
// not cover waits in its own memory), never failed; a receive for a
// message waiting behind others still completes.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "tests/test_paths.hpp"

namespace {

// What the burst may add to the receiver's RSS besides the bound: the
// allocator's slack and the receive buffers of the drain (every entry the
// sender can make the receiver keep is charged to the bound itself; stated
// in docs/ARCHITECTURE.md, "Flow control").
constexpr long kOverheadKiB = 8 * 1024;
// Under AddressSanitizer or ThreadSanitizer the allocator keeps freed
// memory in quarantine and adds shadow memory: RSS says nothing about the
// engine there, so only contents, order and statuses are checked.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

// What may stay resident after draining, besides the drain's own receive
// buffers (kWindow of them in the worker).
constexpr long kAfterKiB = 4 * 1024;
constexpr long kWindow = 256;

// Under a sanitizer the engine runs several times slower: the long bursts
// send at most this many messages (still crossing the bound several times)
// and get more time.
constexpr long kSanitizedMessages = 200000;
constexpr int kJobTimeoutS = kSanitized ? 400 : 120;

nmad_test::run_result run_worker(const std::vector<std::string>& args,
                                 std::vector<std::pair<std::string, std::string>> env) {
  std::vector<std::string> argv = {nmad_test::runfile("tools/nmad-run"), "-n", "2", "--timeout",
                                   std::to_string(kJobTimeoutS), nmad_test::runfile("tests/workers/flowctl_worker")};
  argv.insert(argv.end(), args.begin(), args.end());
  nmad_test::run_options o;
  o.timeout_s = kJobTimeoutS + 30;
  o.env = std::move(env);
  auto r = nmad_test::run(argv, o);
  if (r.status != 0) MESSAGE("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  return r;
}

// The value after `key` on the line starting with `prefix`.
long field(const std::string& out, const std::string& prefix, const std::string& key) {
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) != 0) continue;
    std::istringstream words(line);
    std::string w;
    while (words >> w)
      if (w == key && (words >> w)) return std::atol(w.c_str());
  }
  return -1;
}

// bound_mib 0: the default bound (64 MiB), which the growth itself must
// not exceed (the overhead included).
void check_burst(const std::string& driver, long n, long size, long bound_mib,
                 std::vector<std::pair<std::string, std::string>> extra = {}, const std::string& scenario = "burst") {
  extra.emplace_back("NMAD_DRIVER", driver);
  if (kSanitized && size < 1024) n = std::min(n, kSanitizedMessages);
  const bool by_default = bound_mib == 0;
  if (by_default) bound_mib = 64;
  else extra.emplace_back("NMAD_UNEXPECTED_MAX", std::to_string(bound_mib) + "M");
  auto r = run_worker({scenario, std::to_string(n), std::to_string(size)}, extra);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("received in order") != std::string::npos);
  const long base = field(r.out, "rss burst", "baseline_kib");
  const long peak = field(r.out, "rss burst", "peak_kib");
  const long after = field(r.out, "rss burst", "after_kib");
  const long unexpected = field(r.out, "rss burst", "unexpected");
  MESSAGE(driver << ": " << n << " x " << size << " B, bound " << bound_mib << " MiB: baseline " << base
                 << " KiB, peak +" << (peak - base) << " KiB, after +" << (after - base) << " KiB, "
                 << unexpected << " unexpected");
  REQUIRE(base > 0);
  // The sender could not push everything while nobody received, when the
  // messages' credit exceeds the bound (at the default bound 1,000,000 small
  // messages fit: 64 B of credit each; so do the fewer messages of a
  // sanitized run at 16 MiB).
  constexpr long kSmallCredit = 64;  // wire::small_message_credit
  if (!by_default && n * (size <= 8 ? kSmallCredit : static_cast<long>(size)) > (bound_mib << 20))
    CHECK(unexpected < n);
  CHECK(unexpected > 0);
  if (kSanitized) return;
  CHECK(peak - base <= bound_mib * 1024 + (by_default ? 0 : kOverheadKiB));
  CHECK(after - base <= kAfterKiB + kWindow * size / 1024);
}

}  // namespace

TEST_CASE("1,000,000 unexpected 8-byte messages over shm stay under the bound, then drain in order") {
  check_burst("shm", 1000000, 8, 16);
}

TEST_CASE("1,000,000 unexpected 8-byte messages over tcp stay under the bound, then drain in order") {
  check_burst("tcp", 1000000, 8, 16);
}

TEST_CASE("default bound: 1,000,000 unexpected 8-byte messages grow the receiver by at most 64 MiB (shm)") {
  check_burst("shm", 1000000, 8, 0);
}

// Every send posted at once: what the credit does not cover waits at the
// sender, unnumbered (before, it went as rendezvous requests that cost the
// receiver ~265 B each and no credit: +53 MiB for a 16 MiB bound). 200,000
// small messages are 12.8 MB of credit (64 B each, wire::small_message_credit):
// a 4 MiB bound is crossed three times.
TEST_CASE("200,000 unexpected 8-byte messages posted at once over shm: bounded, in order, returned after draining") {
  check_burst("shm", 200000, 8, 4, {}, "flood");
}

TEST_CASE("200,000 unexpected 8-byte messages posted at once over tcp: bounded, in order, returned after draining") {
  check_burst("tcp", 200000, 8, 4, {}, "flood");
}

// Just above the small-message size every unexpected message is a full
// record again (its own credit wire::message_credit): the same bound.
TEST_CASE("200,000 unexpected 9-byte messages posted at once over shm: bounded, in order, returned after draining") {
  check_burst("shm", 200000, 9, 16, {}, "flood");
}

// Shorter than its index: every byte is the message's own pattern.
TEST_CASE("200,000 unexpected 3-byte messages posted at once over tcp: bounded, contents kept, returned after draining") {
  check_burst("tcp", 200000, 3, 4, {}, "flood");
}

TEST_CASE("a receive for a message waiting behind a full window completes; waiting sends can be withdrawn (shm, tcp, two rails)") {
  for (const char* d : {"shm", "tcp", "tcp+tcp"}) {
    const std::string driver_name = d;
    CAPTURE(driver_name);
    auto r = run_worker({"wants", "5000"}, {{"NMAD_DRIVER", d}, {"NMAD_UNEXPECTED_MAX", "64K"}});
    CHECK(r.status == 0);
    CHECK(r.out.find("then every A in order") != std::string::npos);
    CHECK(r.out.find("sent past 5000 waiting messages") != std::string::npos);
  }
}

TEST_CASE("a long stream of 16 KiB eager sends to a receiver that does not receive (shm): bounded, slowed, complete") {
  check_burst("shm", 20000, 16384, 16, {{"NMAD_RDV_THRESHOLD", "32768"}});
}

TEST_CASE("a long stream of 16 KiB eager sends to a receiver that does not receive (tcp): bounded, slowed, complete") {
  check_burst("tcp", 20000, 16384, 16, {{"NMAD_RDV_THRESHOLD", "32768"}});
}

TEST_CASE("two rails (tcp+tcp): overtaking chunks are bounded by the same credit") {
  check_burst("tcp+tcp", 200000, 8, 8, {{"NMAD_STRATEGY", "aggreg"}});
}

TEST_CASE("100,000 distinct tags: no per-tag memory on either side (shm and tcp)") {
  for (const char* d : {"shm", "tcp"}) {
    const std::string driver_name = d;
    CAPTURE(driver_name);
    auto r = run_worker({"tags", "100000"}, {{"NMAD_DRIVER", d}});
    CHECK(r.status == 0);
  }
}

TEST_CASE("a message never waits for a receive of another tag sharing its sequence counter") {
  for (const char* d : {"shm", "tcp"}) {
    const std::string driver_name = d;
    CAPTURE(driver_name);
    auto r = run_worker({"crosstag"}, {{"NMAD_DRIVER", d}});
    CHECK(r.status == 0);
    CHECK(r.out.find("never waited") != std::string::npos);
  }
}

TEST_CASE("a bad NMAD_UNEXPECTED_MAX is a clear start-up error") {
  auto r = run_worker({"crosstag"}, {{"NMAD_UNEXPECTED_MAX", "lots"}});
  CHECK(r.status != 0);
  CHECK(r.err.find("NMAD_UNEXPECTED_MAX=\"lots\": expected a size in bytes") != std::string::npos);
}
