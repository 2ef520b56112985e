// Fuzz target: the engine's receive path (core/receive/) fed with
// packets a hostile peer could send. A singleton session runs with a
// loopback driver that wraps the real `self` driver and, from inside its
// poll() (where drivers deliver), hands the engine extra packets taken from
// the input: short-form and general packets, with any chunks, tags,
// sequence numbers, offsets and lengths. Receives posted by the input
// (posted before, between or after the packets) meet them in the real
// matching, placement, unexpected-queue and rendezvous code.
//
// Input: a sequence of operations, each introduced by one byte:
//   op % 4 == 0: packet  u16 length, then that many bytes (the packet)
//   op % 4 == 1: receive tag (1 byte, small tags collide on purpose),
//                capacity (u16), source/mask choice (1 byte)
//   op % 4 == 2: progress (a few rounds)
//   op % 4 == 3: cancel the oldest incomplete receive
// At the end the harness injects one foreign packet: the peer is then
// "broken": every receive still waiting must complete with an error (or,
// for an unmatched any_source receive, be cancellable).
// Checked: no crash, no sanitizer report, every receive completes (a
// receive still pending then is a hang and aborts), a completed receive
// never reports more bytes than its buffer holds. The session runs
// without a progress thread (NMAD_PROGRESS=none): everything happens on
// the calling thread, in the order the input gives.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <vector>

#include "api/nmad/nmad.hpp"
#include "tests/support/inject_driver.hpp"

namespace {
using namespace nmad;

nmad_test::packet_injector& g_inj = nmad_test::injected();

struct reader {
  const std::uint8_t* p;
  std::size_t left;
  bool take(void* out, std::size_t n) {
    if (left < n) return false;
    if (n == 0) return true;
    std::memcpy(out, p, n);
    p += n;
    left -= n;
    return true;
  }
};

struct posted {
  request req;
  std::vector<unsigned char> buf;
};

void progress_until_quiet(session& s) {
  for (int i = 0; i < 4; ++i) s.progress();
}

void init_once() {
  static bool done = false;
  if (done) return;
  done = true;
  ::setenv("NMAD_LOG", "error", 0);             // protocol errors are expected here
  ::setenv("NMAD_FINALIZE_TIMEOUT_MS", "2000", 0);
  // No progress thread: the injection above is single-threaded, and the
  // checks below count progress rounds. With one (NMAD_PROGRESS=auto starts
  // one when a CPU is spare), that thread may hold the self driver or a
  // failed gate's clean-up while the rounds run, so a receive that fails a
  // moment later (~1 ms) counted as a hang, and it raced the injection.
  ::setenv("NMAD_PROGRESS", "none", 1);
  ::unsetenv("PMI_FD");
  ::unsetenv("PMI_PORT");
  ::unsetenv("PMI_SIZE");
  nmad_test::register_inject_driver("fuzz-self");
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  init_once();
  g_inj = nmad_test::packet_injector{};
  session_options opts;
  opts.threads = thread_level::single;
  opts.wait = "busy";
  opts.driver = "tcp";  // a session needs a network driver; a singleton never uses it
  auto s = session::create(opts);
  if (s->progress_description().rfind("none", 0) != 0) {
    std::fprintf(stderr, "fuzz_session_recv: a progress thread runs (%s); the harness needs none\n",
                 s->progress_description().c_str());
    std::abort();
  }
  std::deque<posted> recvs;
  reader in{data, size};
  std::uint8_t op;
  while (in.take(&op, 1)) {
    switch (op % 4) {
      case 0: {
        std::uint16_t len = 0;
        if (!in.take(&len, 2)) break;
        len = static_cast<std::uint16_t>(std::min<std::size_t>(len, in.left));
        std::vector<std::byte> p(len);
        in.take(p.data(), len);
        g_inj.queue.push_back(std::move(p));
        break;
      }
      case 1: {
        std::uint8_t tag = 0, how = 0;
        std::uint16_t cap = 0;
        if (!in.take(&tag, 1) || !in.take(&cap, 2) || !in.take(&how, 1)) break;
        if (recvs.size() >= 64) break;
        posted& r = recvs.emplace_back();
        r.buf.resize(cap % 4096);
        const int source = how & 1 ? any_source : 0;
        const tag_t mask = how & 2 ? tag_t{0} : full_mask;
        if (s->irecv(source, tag % 8, r.buf.data(), r.buf.size(), r.req, mask) != errc::ok) recvs.pop_back();
        break;
      }
      case 2:
        progress_until_quiet(*s);
        break;
      case 3:
        for (auto& r : recvs)
          if (!r.req.completed()) {
            s->cancel(r.req);
            break;
          }
        break;
    }
  }
  progress_until_quiet(*s);
  // A foreign packet breaks the connection: what still waits must end now.
  const std::uint32_t foreign[4] = {0x21212121, 0, 0, 0};
  g_inj.queue.emplace_back(reinterpret_cast<const std::byte*>(foreign),
                           reinterpret_cast<const std::byte*>(foreign) + sizeof foreign);
  for (int i = 0; i < 8; ++i) s->progress();
  for (auto& r : recvs) {
    // Receives from rank 0 fail with its connection. An any_source receive
    // that has not matched waits for other ranks (none in a singleton): it
    // is cancelled. One that matched a message of the broken peer failed.
    if (!r.req.completed()) s->cancel(r.req);
    for (int i = 0; i < 1000 && !r.req.completed(); ++i) s->progress();
    if (!r.req.completed()) {
      std::fprintf(stderr, "fuzz_session_recv: a receive never completed after its peer failed\n");
      std::abort();
    }
    if (r.req.error() == errc::ok && r.req.status().length > r.buf.size()) {
      std::fprintf(stderr, "fuzz_session_recv: a receive of %zu bytes completed with a %zu-byte message\n",
                   r.buf.size(), r.req.status().length);
      std::abort();
    }
  }
  recvs.clear();
  s.reset();
  return 0;
}
