// Flow-control scenarios (bounded unexpected memory), started by nmad-run
// from tests/flowctl_test.cpp with 2 ranks. Rank 0 sends, rank 1 first
// progresses without receiving (its unexpected queue fills up to what
// credits allow), then receives everything and checks contents and order.
// Each scenario checks its own results and exits non-zero with a message
// on the first discrepancy; rank 1 prints one "rss" line that the test
// (and docs/BENCHMARKS.md) reads:
//   rss <scenario> baseline_kib B peak_kib P after_kib A unexpected U bound_kib L
//
//   flowctl_worker burst N SIZE    N messages of SIZE bytes, tag 7 (the
//                                  sender keeps 256 sends posted)
//   flowctl_worker flood N SIZE    the same, the sender posting all N sends
//                                  at once (one request and buffer each)
//   flowctl_worker wants N         with a full window (run with a small
//                                  NMAD_UNEXPECTED_MAX): rank 0 posts N
//                                  messages of tag A, then others; rank 1
//                                  receives the others first (any-source,
//                                  synchronous, packed, probed), then the
//                                  A's in order; a send destroyed or
//                                  cancelled while it waited never arrives
//   flowctl_worker tags N          N messages, each with its own tag; rank 1
//                                  receives them in another order. Both
//                                  ranks check that memory does not grow
//                                  with the number of tags.
//   flowctl_worker rate REPS SIZE  message rate (benchmark): REPS windows of
//                                  64 sends of SIZE bytes to pre-posted
//                                  receives, then an 8-byte ack; prints
//                                  "rate <msgs/s>"
//   flowctl_worker crosstag        a message of tag B never waits for a
//                                  receive of tag A, even when A and B share
//                                  a sequence counter (and while a packed
//                                  message of tag A is under way)
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "api/nmad/nmad.hpp"
#include "tests/workers/worker_util.hpp"

using namespace nmad;
using namespace nmad_test::worker;

namespace {

std::uint64_t rss_kib() {
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return static_cast<std::uint64_t>(resident) * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE)) / 1024;
}

// NMAD_UNEXPECTED_MAX as the engine reads it (default 64 MiB; 0: none).
std::uint64_t bound_kib() {
  const char* v = std::getenv("NMAD_UNEXPECTED_MAX");
  if (!v || !*v) return 64 * 1024;
  char* end = nullptr;
  std::uint64_t n = std::strtoull(v, &end, 10);
  if (*end == 'K' || *end == 'k') n <<= 10;
  else if (*end == 'M' || *end == 'm') n <<= 20;
  else if (*end == 'G' || *end == 'g') n <<= 30;
  return n / 1024;
}

// Content of message i, byte k: distinct per message and position.
unsigned char byte_of(std::uint64_t i, std::size_t k) {
  return static_cast<unsigned char>((i * 131 + k * 7 + (i >> 8)) & 0xff);
}

void fill(std::vector<unsigned char>& b, std::uint64_t i) {
  for (std::size_t k = 0; k < b.size(); ++k) b[k] = byte_of(i, k);
  if (b.size() >= 8) std::memcpy(b.data(), &i, 8);  // the index itself first
}

void check(const std::vector<unsigned char>& b, std::uint64_t i, const char* what) {
  if (b.size() >= 8) {
    std::uint64_t got;
    std::memcpy(&got, b.data(), 8);
    if (got != i) fail(std::string(what) + ": message " + std::to_string(i) + " arrived as message " + std::to_string(got) + " (order broken)");
  }
  for (std::size_t k = b.size() >= 8 ? 8 : 0; k < b.size(); ++k)
    if (b[k] != byte_of(i, k)) fail(std::string(what) + ": message " + std::to_string(i) + " byte " + std::to_string(k) + " corrupted");
}

// Both ranks reach this point (rank 0 sends, rank 1 answers).
void sync(session& s, tag_t tag) {
  char c = 0;
  request r;
  if (s.rank() == 0) {
    expect_ok(s.isend(1, tag, &c, 1, r), r, "sync send");
    expect_ok(s.wait(r), r, "sync send");
    expect_ok(s.irecv(1, tag, &c, 1, r), r, "sync recv");
    expect_ok(s.wait(r), r, "sync recv");
  } else {
    expect_ok(s.irecv(0, tag, &c, 1, r), r, "sync recv");
    expect_ok(s.wait(r), r, "sync recv");
    expect_ok(s.isend(0, tag, &c, 1, r), r, "sync send");
    expect_ok(s.wait(r), r, "sync send");
  }
}

constexpr tag_t kDataTag = 7, kSyncTag = 99;
constexpr std::size_t kWindow = 256;  // requests in flight per side

// Rank 1: progresses without receiving until nothing more arrives for
// quiet_ms (the sender is out of credit, or done); returns the peak RSS.
std::uint64_t fill_unexpected(session& s, std::uint64_t& unexpected, int quiet_ms) {
  std::uint64_t peak = rss_kib();
  auto last_change = std::chrono::steady_clock::now();
  std::uint64_t seen = s.stats().unexpected_messages;
  for (std::uint64_t n = 0;; ++n) {
    s.progress();
    if ((n & 255) == 0) {
      peak = std::max(peak, rss_kib());
      const std::uint64_t now_seen = s.stats().unexpected_messages;
      const auto now = std::chrono::steady_clock::now();
      if (now_seen != seen) {
        seen = now_seen;
        last_change = now;
      } else if (now - last_change > std::chrono::milliseconds(quiet_ms)) {
        break;
      }
    }
  }
  unexpected = seen;
  return peak;
}

// The sender keeps `window` sends posted (n: all of them at once).
int burst(session& s, std::uint64_t n, std::size_t size, std::uint64_t window = kWindow) {
  std::vector<std::vector<unsigned char>> bufs;
  std::vector<std::unique_ptr<request>> reqs;
  if (s.rank() == 0) {  // (before the sync: rank 1 waits for the burst from then on)
    bufs.assign(window, std::vector<unsigned char>(size));
    reqs.resize(window);
    for (auto& r : reqs) r = std::make_unique<request>();
  }
  sync(s, kSyncTag);  // connected both ways before the baseline
  if (s.rank() == 0) {
    const auto t0 = std::chrono::steady_clock::now();
    for (std::uint64_t i = 0; i < n; ++i) {
      const std::size_t slot = i % window;
      if (i >= window) expect_ok(s.wait(*reqs[slot]), *reqs[slot], "send " + std::to_string(i - window));
      fill(bufs[slot], i);
      expect_ok(s.isend(1, kDataTag, bufs[slot].data(), size, *reqs[slot]), *reqs[slot], "isend");
    }
    for (auto& r : reqs) expect_ok(s.wait(*r), *r, "last sends");
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    sync(s, kSyncTag);
    std::printf("burst rank 0: %llu messages of %zu bytes sent in %.2f s\n", static_cast<unsigned long long>(n), size, secs);
    return 0;
  }
  const std::uint64_t baseline = rss_kib();
  std::uint64_t unexpected = 0;
  const std::uint64_t peak = fill_unexpected(s, unexpected, 300);
  // Drain: every message in order with its content, kWindow receives posted.
  bufs.assign(kWindow, std::vector<unsigned char>(size));
  reqs.resize(kWindow);
  for (auto& r : reqs) r = std::make_unique<request>();
  std::uint64_t drain_peak = 0;
  for (std::uint64_t i = 0; i < n + kWindow; ++i) {
    const std::size_t slot = i % kWindow;
    if (i >= kWindow) {
      request& r = *reqs[slot];
      expect_ok(s.wait(r), r, "receive " + std::to_string(i - kWindow));
      expect(r.status().length == size, "message " + std::to_string(i - kWindow) + " has length " + std::to_string(r.status().length));
      check(bufs[slot], i - kWindow, "burst");
    }
    if (i < n) expect_ok(s.irecv(0, kDataTag, bufs[slot].data(), size, *reqs[slot]), *reqs[slot], "irecv");
    if ((i & 4095) == 0) drain_peak = std::max(drain_peak, rss_kib());
  }
  sync(s, kSyncTag);
  const std::uint64_t after = rss_kib();
  std::printf("rss burst baseline_kib %llu peak_kib %llu after_kib %llu unexpected %llu bound_kib %llu drain_peak_kib %llu\n",
              static_cast<unsigned long long>(baseline), static_cast<unsigned long long>(peak),
              static_cast<unsigned long long>(after), static_cast<unsigned long long>(unexpected),
              static_cast<unsigned long long>(bound_kib()), static_cast<unsigned long long>(drain_peak));
  std::printf("burst rank 1: %llu messages of %zu bytes received in order\n", static_cast<unsigned long long>(n), size);
  return 0;
}

// The engine's sequence-counter table (core/gate.hpp, seq_table::bucket).
std::size_t bucket_of(tag_t domain) { return static_cast<std::size_t>((domain * 0x9e3779b97f4a7c15ULL) >> 56); }

tag_t nth_tag(std::uint64_t i) { return (i + 1) * 0x10001ULL + 12345; }

int tags(session& s, std::uint64_t n) {
  sync(s, kSyncTag);
  const std::uint64_t baseline = rss_kib();
  constexpr std::size_t kSize = 8;
  std::vector<std::vector<unsigned char>> bufs(kWindow, std::vector<unsigned char>(kSize));
  std::vector<std::unique_ptr<request>> reqs(kWindow);
  for (auto& r : reqs) r = std::make_unique<request>();
  if (s.rank() == 0) {
    for (std::uint64_t i = 0; i < n + kWindow; ++i) {
      const std::size_t slot = i % kWindow;
      if (i >= kWindow) expect_ok(s.wait(*reqs[slot]), *reqs[slot], "send");
      if (i < n) {
        fill(bufs[slot], i);
        expect_ok(s.isend(1, nth_tag(i), bufs[slot].data(), kSize, *reqs[slot]), *reqs[slot], "isend");
      }
    }
  } else {
    // Receives by tag, each window of kWindow tags in reverse order.
    for (std::uint64_t base = 0; base < n; base += kWindow) {
      const std::uint64_t end = std::min<std::uint64_t>(n, base + kWindow);
      for (std::uint64_t i = end; i-- > base;)
        expect_ok(s.irecv(0, nth_tag(i), bufs[i - base].data(), kSize, *reqs[i - base]), *reqs[i - base], "irecv");
      for (std::uint64_t i = base; i < end; ++i) {
        expect_ok(s.wait(*reqs[i - base]), *reqs[i - base], "receive tag " + std::to_string(nth_tag(i)));
        check(bufs[i - base], i, "tags");
      }
    }
  }
  sync(s, kSyncTag);
  const std::uint64_t after = rss_kib();
  std::printf("rss tags rank %d baseline_kib %llu after_kib %llu tags %llu\n", s.rank(),
              static_cast<unsigned long long>(baseline), static_cast<unsigned long long>(after),
              static_cast<unsigned long long>(n));
  // Per-tag state would cost tens of bytes per tag on each side.
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)  // (quarantine, shadow memory)
  expect(after < baseline + 4096, "memory grew with the number of tags: " + std::to_string(after - baseline) + " KiB for " + std::to_string(n) + " tags");
#endif
  return 0;
}

int crosstag(session& s) {
  // Tags A and B share a sequence counter of the gate.
  const tag_t a = 1000;
  tag_t b = a + 1;
  while (bucket_of(b) != bucket_of(a)) ++b;
  sync(s, kSyncTag);
  constexpr int kMany = 2000;
  std::uint64_t v = 0;
  if (s.rank() == 0) {
    // 1. Many eager messages of tag A, then one of tag B that the receiver
    //    takes first.
    std::vector<std::uint64_t> vals(kMany);
    std::vector<std::unique_ptr<request>> reqs(kMany);
    for (int i = 0; i < kMany; ++i) {
      vals[i] = static_cast<std::uint64_t>(i);
      reqs[i] = std::make_unique<request>();
      expect_ok(s.isend(1, a, &vals[i], 8, *reqs[i]), *reqs[i], "isend A");
    }
    request rb;
    v = 424242;
    expect_ok(s.isend(1, b, &v, 8, rb, send_flags::synchronous), rb, "issend B");
    expect_ok(s.wait(rb), rb, "issend B (matched before any A is received)");
    for (auto& r : reqs) expect_ok(s.wait(*r), *r, "send A");
    // 2. A packed message of tag A under way (its first piece not sent yet)
    //    while a synchronous message of tag B must be matched.
    pack_connection p(s, 1, a);
    std::uint64_t head = 77;
    expect_ok(p.pack(&head, 8), rb, "pack");
    request rb2;
    std::uint64_t v2 = 434343;
    expect_ok(s.isend(1, b, &v2, 8, rb2, send_flags::synchronous), rb2, "issend B during a pack");
    expect_ok(s.wait(rb2), rb2, "issend B during a pack of tag A");
    std::uint64_t tail = 88;
    expect_ok(p.pack(&tail, 8), rb, "pack");
    expect(p.end() == errc::ok, "pack end");
    std::printf("crosstag rank 0: tag B (counter shared with A) never waited for A\n");
  } else {
    request rb;
    expect_ok(s.irecv(0, b, &v, 8, rb), rb, "irecv B");
    expect_ok(s.wait(rb), rb, "receive B");
    expect(v == 424242, "B content");
    for (int i = 0; i < kMany; ++i) {
      request ra;
      std::uint64_t x = 0;
      expect_ok(s.irecv(0, a, &x, 8, ra), ra, "irecv A");
      expect_ok(s.wait(ra), ra, "receive A");
      expect(x == static_cast<std::uint64_t>(i), "A out of order: " + std::to_string(x) + " at " + std::to_string(i));
    }
    request rb2;
    std::uint64_t v2 = 0;
    expect_ok(s.irecv(0, b, &v2, 8, rb2), rb2, "irecv B2");
    expect_ok(s.wait(rb2), rb2, "receive B2");
    expect(v2 == 434343, "B2 content");
    unpack_connection u(s, 0, a);
    std::uint64_t head = 0, tail = 0;
    expect(u.unpack(&head, 8) == errc::ok && u.unpack(&tail, 8) == errc::ok && u.end() == errc::ok, "unpack");
    expect(head == 77 && tail == 88, "packed content");
    std::printf("crosstag rank 1: B received before %d A's, packed A after B\n", kMany);
  }
  sync(s, kSyncTag);
  return 0;
}

// Rank 0 posts n eager messages of tag A that rank 1 does not receive yet
// (the window fills, the rest wait at rank 0), then: F (destroyed while it
// waits), X (cancelled while it waits), B, synchronous C, G (tag F again),
// a packed message D, and E. Rank 1 receives B (any source), C, G and D
// while the A's still wait, then probes for E (the A's before it come as
// well, in order), receives the first A with an any-tag receive, then
// every other A in order. F and X never arrive.
int wants(session& s, std::uint64_t n) {
  constexpr tag_t kA = 50, kF = 60, kX = 61, kB = 62, kC = 63, kD = 64, kE = 65;
  sync(s, kSyncTag);
  std::vector<unsigned char> body(64 * 1024);
  for (std::size_t k = 0; k < body.size(); ++k) body[k] = static_cast<unsigned char>(k * 13 + 5);
  if (s.rank() == 0) {
    std::vector<std::uint64_t> vals(n);
    std::vector<request> reqs(n);
    for (std::uint64_t i = 0; i < n; ++i) {
      vals[i] = i;
      expect_ok(s.isend(1, kA, &vals[i], 8, reqs[i]), reqs[i], "isend A");
    }
    // Both wait for credit behind the A's: the receiver never sees them.
    std::uint64_t f = 0xf, x = 0x1;
    {
      request rf;
      expect_ok(s.isend(1, kF, &f, 8, rf), rf, "isend F");
      expect(!rf.completed(), "F should wait for credit");
    }  // destroyed: withdrawn
    request rx;
    expect_ok(s.isend(1, kX, &x, 8, rx), rx, "isend X");
    expect(s.cancel(rx), "a send that waits for credit can be cancelled");
    expect(s.wait(rx) == errc::cancelled, "X cancelled");
    std::uint64_t b = 0xb, c = 0xc, g = 0x6, e = 0xe;
    request rb, rc, rg, re;
    expect_ok(s.isend(1, kB, &b, 8, rb), rb, "isend B");
    expect_ok(s.isend(1, kC, &c, 8, rc, send_flags::synchronous), rc, "issend C");
    expect_ok(s.isend(1, kF, &g, 8, rg), rg, "isend G");
    expect_ok(s.wait(rb), rb, "send B");
    expect_ok(s.wait(rc), rc, "synchronous send C (matched while the A's wait)");
    expect_ok(s.wait(rg), rg, "send G");
    {
      pack_connection p(s, 1, kD);
      std::uint64_t len = body.size();
      expect(p.pack(&len, 8, pack_mode::express) == errc::ok, "pack D head");
      expect(p.pack(body.data(), body.size()) == errc::ok, "pack D body");
      expect(p.end() == errc::ok, "packed D");
    }
    expect_ok(s.isend(1, kE, &e, 8, re), re, "isend E");
    expect_ok(s.wait(re), re, "send E");
    for (auto& r : reqs) expect_ok(s.wait(r), r, "send A");
    std::printf("wants rank 0: B, C, G, D and E sent past %llu waiting messages\n", static_cast<unsigned long long>(n));
  } else {
    std::uint64_t held_before = 0;
    fill_unexpected(s, held_before, 300);
    auto recv8 = [&](int src, tag_t tag, tag_t mask, const char* what) {
      std::uint64_t v = 0;
      request r;
      expect_ok(s.irecv(src, tag, &v, 8, r, mask), r, what);
      expect_ok(s.wait(r), r, what);
      expect(r.status().length == 8, std::string(what) + ": length");
      return std::pair<std::uint64_t, tag_t>(v, r.status().tag);
    };
    expect(recv8(any_source, kB, full_mask, "receive B (any source)").first == 0xb, "B's content");
    expect(recv8(0, kC, full_mask, "receive C (synchronous)").first == 0xc, "C's content");
    expect(recv8(0, kF, full_mask, "receive tag F").first == 0x6, "the destroyed F arrived instead of G");
    {
      unpack_connection u(s, 0, kD);
      std::uint64_t len = 0;
      expect(u.unpack(&len, 8, pack_mode::express) == errc::ok && len == body.size(), "unpack D head");
      std::vector<unsigned char> got(body.size());
      expect(u.unpack(got.data(), got.size()) == errc::ok && u.end() == errc::ok, "unpack D body");
      expect(got == body, "D's body");
    }
    // Only what the window holds came (64 KiB: 1024 small messages of 64
    // bytes of credit each, wire::small_message_credit; it may have filled
    // only now, the sender being slow): the A's behind it were not let
    // through for B, C, G or D.
    const std::uint64_t held_after = s.stats().unexpected_messages;
    expect(held_after < 1100, std::to_string(held_after) + " messages unexpected after receiving B, C, G and D: "
                             "the waiting A's were let through");
    expect(s.probe(0, kE).length == 8, "probe E");
    expect(recv8(0, kE, full_mask, "receive E").first == 0xe, "E's content");
    const auto first = recv8(0, 0, 0, "any-tag receive");
    expect(first.second == kA && first.first == 0, "an any-tag receive took tag " + std::to_string(first.second) +
                                                          " value " + std::to_string(first.first) + ", not the first A");
    for (std::uint64_t i = 1; i < n; ++i)
      expect(recv8(0, kA, full_mask, "receive A").first == i, "A " + std::to_string(i) + " out of order");
    recv_status st;
    expect(!s.iprobe(0, kF, st) && !s.iprobe(0, kX, st), "a withdrawn send arrived");
    std::printf("wants rank 1: B, C, G, D received while %llu A's waited (%llu held here), E probed, then every A in order\n",
                static_cast<unsigned long long>(n - held_after), static_cast<unsigned long long>(held_after));
  }
  sync(s, kSyncTag);
  return 0;
}

int rate(session& s, int reps, std::size_t size) {
  constexpr int kBatch = 64;
  std::vector<unsigned char> buf(size * kBatch, 1);
  std::vector<std::unique_ptr<request>> reqs(kBatch);
  for (auto& r : reqs) r = std::make_unique<request>();
  std::uint64_t ack = 0;
  request ra;
  sync(s, kSyncTag);
  auto round = [&] {
    if (s.rank() == 0) {
      for (int k = 0; k < kBatch; ++k) expect_ok(s.isend(1, kDataTag, &buf[k * size], size, *reqs[k]), *reqs[k], "isend");
      for (auto& r : reqs) expect_ok(s.wait(*r), *r, "send");
      expect_ok(s.irecv(1, kSyncTag, &ack, 8, ra), ra, "ack");
      expect_ok(s.wait(ra), ra, "ack");
    } else {
      for (int k = 0; k < kBatch; ++k) expect_ok(s.irecv(0, kDataTag, &buf[k * size], size, *reqs[k]), *reqs[k], "irecv");
      for (auto& r : reqs) expect_ok(s.wait(*r), *r, "recv");
      expect_ok(s.isend(0, kSyncTag, &ack, 8, ra), ra, "ack");
      expect_ok(s.wait(ra), ra, "ack");
    }
  };
  for (int i = 0; i < reps / 10 + 1; ++i) round();  // warm-up
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) round();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (s.rank() == 0) std::printf("rate %.0f msgs/s (%d x %d messages of %zu bytes)\n", reps * kBatch / secs, reps, kBatch, size);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: flowctl_worker burst N SIZE | flood N SIZE | wants N | tags N | crosstag | rate REPS SIZE\n");
    return 2;
  }
  const std::string scenario = argv[1];
  auto arg = [&](int i, long def) { return argc > i ? std::atol(argv[i]) : def; };
  try {
    session_options o;
    const char* level = std::getenv("ENGINE_WORKER_THREADS");
    if (level && std::string(level) == "single") o.threads = thread_level::single;
    auto s = session::create(o);
    g_rank = s->rank();
    expect(s->size() == 2, "run with 2 ranks");
    int rc = 2;
    if (scenario == "burst") rc = burst(*s, static_cast<std::uint64_t>(arg(2, 1000000)), static_cast<std::size_t>(arg(3, 8)));
    else if (scenario == "flood") {
      const auto n = static_cast<std::uint64_t>(arg(2, 200000));
      rc = burst(*s, n, static_cast<std::size_t>(arg(3, 8)), n);
    } else if (scenario == "wants") rc = wants(*s, static_cast<std::uint64_t>(arg(2, 5000)));
    else if (scenario == "tags") rc = tags(*s, static_cast<std::uint64_t>(arg(2, 100000)));
    else if (scenario == "crosstag") rc = crosstag(*s);
    else if (scenario == "rate") rc = rate(*s, static_cast<int>(arg(2, 2000)), static_cast<std::size_t>(arg(3, 8)));
    else std::fprintf(stderr, "flowctl_worker: unknown scenario '%s'\n", scenario.c_str());
    std::fflush(stdout);
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flowctl_worker: %s\n", e.what());
    return 1;
  }
}
