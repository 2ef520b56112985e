// Traffic for tests/trace_test.cpp, between ranks 0 and 1 (nmad-run -n 2):
//   trace_worker pingpong N   N round trips of 8 bytes (tag 7), then one of
//                             256 KiB (a rendezvous)
//   trace_worker burst N      rank 0 posts N isends of 16 bytes (tag 9) at
//                             once, rank 1 receives them; then a round trip
//   trace_worker threads N    two threads per rank, each N round trips of 8
//                             bytes on a tag of its own (20, 21) at once
// Checks every byte; prints "<mode> ok" on success.
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "api/nmad/nmad.hpp"

namespace {
int run(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: trace_worker pingpong|burst N\n");
    return 2;
  }
  const std::string mode = argv[1];
  const int n = std::atoi(argv[2]);
  auto s = nmad::session::create();
  const int me = s->rank(), peer = 1 - me;
  if (s->size() != 2) {
    std::fprintf(stderr, "needs 2 ranks\n");
    return 2;
  }
  auto fail = [&](const std::string& what) {
    std::fprintf(stderr, "rank %d: %s\n", me, what.c_str());
    return 1;
  };
  if (mode == "pingpong") {
    for (int i = 0; i < n; ++i) {
      std::uint64_t out = 1000u * static_cast<unsigned>(me) + static_cast<unsigned>(i), in = 0;
      nmad::request rs, rr;
      if (me == 0) {
        s->isend(peer, 7, &out, sizeof out, rs);
        s->wait(rs);
        s->irecv(peer, 7, &in, sizeof in, rr);
        if (s->wait(rr) != nmad::errc::ok || in != 1000u + static_cast<unsigned>(i)) return fail("bad reply");
      } else {
        s->irecv(peer, 7, &in, sizeof in, rr);
        if (s->wait(rr) != nmad::errc::ok || in != static_cast<unsigned>(i)) return fail("bad ping");
        s->isend(peer, 7, &out, sizeof out, rs);
        s->wait(rs);
      }
    }
    std::vector<unsigned char> big(256 * 1024);
    nmad::request r;
    if (me == 0) {
      for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<unsigned char>(i * 7);
      s->isend(peer, 8, big.data(), big.size(), r);
      if (s->wait(r) != nmad::errc::ok) return fail("big send");
    } else {
      s->irecv(peer, 8, big.data(), big.size(), r);
      if (s->wait(r) != nmad::errc::ok) return fail("big recv");
      for (std::size_t i = 0; i < big.size(); ++i)
        if (big[i] != static_cast<unsigned char>(i * 7)) return fail("big: bad byte");
    }
  } else if (mode == "burst") {
    std::vector<std::array<std::uint64_t, 2>> bufs(static_cast<std::size_t>(n));
    std::vector<nmad::request> reqs(static_cast<std::size_t>(n));
    if (me == 0) {
      for (int i = 0; i < n; ++i) {
        bufs[i] = {static_cast<std::uint64_t>(i), ~static_cast<std::uint64_t>(i)};
        s->isend(peer, 9, bufs[i].data(), sizeof bufs[i], reqs[i]);
      }
      for (auto& r : reqs)
        if (s->wait(r) != nmad::errc::ok) return fail("burst send");
    } else {
      for (int i = 0; i < n; ++i) s->irecv(peer, 9, bufs[i].data(), sizeof bufs[i], reqs[i]);
      for (int i = 0; i < n; ++i) {
        if (s->wait(reqs[i]) != nmad::errc::ok) return fail("burst recv");
        if (bufs[i][0] != static_cast<std::uint64_t>(i) || bufs[i][1] != ~static_cast<std::uint64_t>(i))
          return fail("burst: message " + std::to_string(i) + " out of order or damaged");
      }
    }
    std::uint64_t x = 5;
    nmad::request r;
    if (me == 0) {
      s->irecv(peer, 10, &x, sizeof x, r);
      if (s->wait(r) != nmad::errc::ok || x != 42) return fail("burst: no reply");
    } else {
      x = 42;
      s->isend(peer, 10, &x, sizeof x, r);
      s->wait(r);
    }
  } else if (mode == "threads") {
    bool ok[2] = {true, true};
    auto body = [&](int k) {
      const nmad::tag_t tag = 20 + static_cast<nmad::tag_t>(k);
      for (int i = 0; i < n && ok[k]; ++i) {
        std::uint64_t out = static_cast<std::uint64_t>(i) * 10 + static_cast<std::uint64_t>(k), in = 0;
        nmad::request rs, rr;
        s->irecv(peer, tag, &in, sizeof in, rr);
        s->isend(peer, tag, &out, sizeof out, rs);
        s->wait(rs);
        if (s->wait(rr) != nmad::errc::ok || in != out) ok[k] = false;
      }
    };
    std::thread t1(body, 1);
    body(0);
    t1.join();
    if (!ok[0] || !ok[1]) return fail("threads: bad message");
  } else {
    return fail("unknown mode " + mode);
  }
  std::printf("%s ok\n", mode.c_str());
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {  // a session that cannot start: its reason
    std::fprintf(stderr, "trace_worker: %s\n", e.what());
    return 1;
  }
}
