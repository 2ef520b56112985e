// Background progress scenarios (progress threads, NMAD_PROGRESS), started
// by nmad-run from tests/progress_thread_test.cpp. Two ranks; one of them
// starts a rendezvous-size transfer and then sleeps without calling the
// library. Whether the transfer completed *during* that sleep is seen from
// the request's completion callback (it records when it ran) and from the
// peer (how long its blocking call took). Each rank checks the bytes.
//
//   progress_worker isend SIZE SLEEP_MS   rank 0 isends, then sleeps;
//                                         rank 1 receives at once
//   progress_worker irecv SIZE SLEEP_MS   rank 1 irecvs, then sleeps;
//                                         rank 0 sends at once
//   progress_worker offload 0 SLEEP_MS    rank 0 isends a mix of small,
//                                         eager and rendezvous messages on
//                                         one tag, then sleeps; rank 1
//                                         receives them in order and checks
//                                         every length and byte. Rank 0
//                                         prints its copy offload counters.
// Prints per rank "rank R: ... completed during the sleep after X ms" or
// "... completed after the sleep", and the peer's "rank R: blocking call
// took X ms". PROGRESS_WORKER_THREADS=single opens the session at thread
// level single (the progress thread must still be safe).
//
// On a loaded machine (sanitizers, more threads than cores) a transfer
// that does progress in the background may need longer than SLEEP_MS.
// With PROGRESS_WORKER_MARK=PATH the peer creates PATH when its blocking
// calls are over, and the sleeper sleeps on (still without a library
// call) until that file exists or PROGRESS_WORKER_WAIT_MS more have passed
// (default 0). Both sides print when they ended on the host's monotonic
// clock ("sleep ended at N ns", "blocking calls ended at N ns"): the peer
// was served during the sleep when its time is the earlier one.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "api/nmad/layer.hpp"
#include "api/nmad/nmad.hpp"
#include "tests/workers/worker_util.hpp"

using namespace nmad;
using namespace nmad_test::worker;
using clock_type = std::chrono::steady_clock;

namespace {

unsigned char pattern(std::size_t i) { return static_cast<unsigned char>((i * 131 + (i >> 12) * 7 + 3) & 0xff); }

void fill(std::vector<unsigned char>& b) {
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = pattern(i);
}

void check(const std::vector<unsigned char>& b) {
  for (std::size_t i = 0; i < b.size(); ++i)
    if (b[i] != pattern(i)) fail("byte " + std::to_string(i) + " differs");
}

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now().time_since_epoch()).count();
}

void record(request&, void* arg) { static_cast<std::atomic<std::int64_t>*>(arg)->store(now_ns()); }

const char* mark_path() {
  const char* m = std::getenv("PROGRESS_WORKER_MARK");
  return m && *m ? m : nullptr;
}

bool peer_done() {
  const char* m = mark_path();
  if (m == nullptr) return false;
  std::FILE* f = std::fopen(m, "r");
  if (f == nullptr) return false;
  std::fclose(f);
  return true;
}

// The sleeper's sleep: `sleep_ms`, then on in slices of 10 ms while
// `more()` holds, the peer has not marked its end, and the extension
// (PROGRESS_WORKER_WAIT_MS) lasts. No library call.
template <typename More>
void sleep_outside(int rank, int sleep_ms, More more) {
  std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
  const char* w = std::getenv("PROGRESS_WORKER_WAIT_MS");
  const long extra_ms = w ? std::atol(w) : 0;
  for (long waited = 0; waited < extra_ms && more() && !peer_done(); waited += 10)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::printf("rank %d: sleep ended at %lld ns\n", rank, static_cast<long long>(now_ns()));
}

// The peer's end: when its blocking calls were over, then the mark.
void report_end(session& s) {
  std::printf("rank %d: blocking calls ended at %lld ns\n", s.rank(), static_cast<long long>(now_ns()));
  std::fflush(stdout);
  if (const char* m = mark_path())
    if (std::FILE* f = std::fopen(m, "w")) std::fclose(f);
}

// The sleeping side: starts `start` (with a completion callback), sleeps
// without calling the library, then says when the request completed.
template <typename Start>
void start_and_sleep(session& s, request& r, int sleep_ms, const char* what, Start start) {
  std::atomic<std::int64_t> done_at{0};
  r.on_complete(record, &done_at);
  const std::int64_t t0 = now_ns();
  start();
  sleep_outside(s.rank(), sleep_ms, [&] { return done_at.load() == 0; });  // no library call
  const std::int64_t t1 = now_ns();
  const std::int64_t at = done_at.load();
  if (at != 0 && at <= t1)
    std::printf("rank %d: %s completed during the sleep after %.1f ms\n", s.rank(), what, (at - t0) / 1e6);
  else
    std::printf("rank %d: %s completed after the sleep\n", s.rank(), what);
  if (errc e = s.wait(r); e != errc::ok) fail(std::string(what) + ": " + std::string(to_string(e)) + " " + r.error_message());
}

void report_blocking(session& s, std::int64_t t0) {
  std::printf("rank %d: blocking call took %.1f ms\n", s.rank(), (now_ns() - t0) / 1e6);
  report_end(s);
}

// The offload scenario's messages: small (inline), eager of several
// sizes, rendezvous, in a fixed cycle; message i's bytes depend on i.
constexpr int kOffloadMessages = 48;
std::size_t offload_size(int i) {
  static const std::size_t sizes[] = {64, 16 * 1024, 40 * 1024, 5000, 300 * 1024, 24 * 1024};
  return sizes[i % 6];
}
unsigned char offload_byte(int i, std::size_t j) { return pattern(j + static_cast<std::size_t>(i) * 7919); }

void offload_scenario(session& s, int sleep_ms) {
  std::vector<std::vector<unsigned char>> bufs(kOffloadMessages);
  if (s.rank() == 0) {
    std::vector<request> reqs(kOffloadMessages);
    std::atomic<int> done{0};
    auto counted = [](request&, void* arg) { static_cast<std::atomic<int>*>(arg)->fetch_add(1); };
    for (int i = 0; i < kOffloadMessages; ++i) {
      bufs[i].resize(offload_size(i));
      for (std::size_t j = 0; j < bufs[i].size(); ++j) bufs[i][j] = offload_byte(i, j);
      reqs[i].on_complete(counted, &done);
      if (errc e = s.isend(1, 9, bufs[i].data(), bufs[i].size(), reqs[i]); e != errc::ok)
        fail("isend " + std::to_string(i) + ": " + reqs[i].error_message());
    }
    // No library call until the receiver has everything (or the time
    // runs out); then a moment for the last completions to land.
    sleep_outside(s.rank(), sleep_ms, [&] { return done.load() < kOffloadMessages; });
    for (int slice = 0; slice < 50 && done.load() < kOffloadMessages; ++slice)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const int during = done.load();
    std::printf("rank 0: %d of %d sends completed during the sleep\n", during, kOffloadMessages);
    if (during != kOffloadMessages) {  // which ones, by size (inline, eager, rendezvous)
      std::printf("rank 0: still incomplete after the sleep:");
      for (int i = 0; i < kOffloadMessages; ++i)
        if (!reqs[i].completed()) std::printf(" #%d (%zu B)", i, offload_size(i));
      std::printf("\n");
    }
    for (int i = 0; i < kOffloadMessages; ++i)
      if (errc e = s.wait(reqs[i]); e != errc::ok) fail("send " + std::to_string(i) + ": " + reqs[i].error_message());
    const session_stats st = s.stats();
    std::printf("rank 0: copy offload min %zu, offloaded_sends=%llu offload_tasks_by_thread=%llu\n",
                nmad::layer::copy_offload_min(s), static_cast<unsigned long long>(st.offloaded_sends),
                static_cast<unsigned long long>(st.offload_tasks_by_thread));
  } else {
    const std::int64_t t0 = now_ns();
    for (int i = 0; i < kOffloadMessages; ++i) {
      bufs[i].assign(400 * 1024, 0);
      request r;
      s.irecv(0, 9, bufs[i].data(), bufs[i].size(), r);
      if (errc e = s.wait(r); e != errc::ok) fail("recv " + std::to_string(i) + ": " + r.error_message());
      if (r.status().length != offload_size(i))
        fail("message " + std::to_string(i) + " has " + std::to_string(r.status().length) + " bytes, expected " +
             std::to_string(offload_size(i)) + " (order lost?)");
      for (std::size_t j = 0; j < offload_size(i); ++j)
        if (bufs[i][j] != offload_byte(i, j))
          fail("message " + std::to_string(i) + ": byte " + std::to_string(j) + " differs");
    }
    report_blocking(s, t0);
    std::printf("rank 1: %d messages received in order, every byte checked\n", kOffloadMessages);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: progress_worker isend|irecv|offload SIZE SLEEP_MS\n");
    return 2;
  }
  const std::string scenario = argv[1];
  const std::size_t size = std::strtoull(argv[2], nullptr, 10);
  const int sleep_ms = std::atoi(argv[3]);
  try {
    session_options o;
    if (const char* l = std::getenv("PROGRESS_WORKER_THREADS"); l && std::string(l) == "single")
      o.threads = thread_level::single;
    auto s = session::create(o);
    g_rank = s->rank();
    if (s->size() != 2) fail("needs 2 ranks");
    std::printf("rank %d: progress %s\n", s->rank(), s->progress_description().c_str());
    if (scenario == "offload") {
      offload_scenario(*s, sleep_ms);
      std::fflush(stdout);
      return 0;
    }
    std::vector<unsigned char> buf(size);
    request r;
    const bool sleeper = (scenario == "isend") == (s->rank() == 0);
    if (scenario != "isend" && scenario != "irecv") fail("unknown scenario " + scenario);
    if (scenario == "isend") {
      if (sleeper) {
        fill(buf);
        start_and_sleep(*s, r, sleep_ms, "isend", [&] { s->isend(1, 7, buf.data(), buf.size(), r); });
      } else {
        const std::int64_t t0 = now_ns();
        s->irecv(0, 7, buf.data(), buf.size(), r);
        if (errc e = s->wait(r); e != errc::ok) fail("recv: " + r.error_message());
        report_blocking(*s, t0);
        check(buf);
      }
    } else {
      if (sleeper) {
        start_and_sleep(*s, r, sleep_ms, "irecv", [&] { s->irecv(0, 7, buf.data(), buf.size(), r); });
        check(buf);
      } else {
        fill(buf);
        const std::int64_t t0 = now_ns();
        s->isend(1, 7, buf.data(), buf.size(), r);
        if (errc e = s->wait(r); e != errc::ok) fail("send: " + r.error_message());
        report_blocking(*s, t0);
      }
    }
    std::fflush(stdout);
  } catch (const std::exception& e) {
    fail(e.what());
  }
  return 0;
}
