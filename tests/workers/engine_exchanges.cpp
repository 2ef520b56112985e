// engine_worker's exchanges between ranks 0 and 1: ping-pong, sends while
// the track is busy (aggregation), request/answer with pack/unpack,
// truncation, a large send the receiver pulls while the sender computes, a
// receiver that sleeps in a blocking wait, two threads per process, and
// answers sent from completion callbacks.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <sys/resource.h>

#include "api/nmad/nmad.hpp"
#include "tests/workers/engine_scenarios.hpp"
#include "tests/workers/worker_util.hpp"

using namespace nmad;
using namespace nmad_test::worker;

namespace nmad_test::engine {

int pingpong(session& s, int iters) {
  if (s.size() < 2) fail("pingpong needs 2 ranks");
  if (s.rank() > 1) return 0;
  const int peer = 1 - s.rank();
  for (int i = 0; i < iters; ++i) {
    int v = i, got = -1;
    request r;
    if (s.rank() == 0) {
      expect_ok(s.isend(peer, 1, &v, sizeof v, r), r, "isend");
      expect_ok(s.wait(r), r, "send");
      expect_ok(s.irecv(peer, 1, &got, sizeof got, r), r, "irecv");
      expect_ok(s.wait(r), r, "recv");
    } else {
      expect_ok(s.irecv(peer, 1, &got, sizeof got, r), r, "irecv");
      expect_ok(s.wait(r), r, "recv");
      expect_ok(s.isend(peer, 1, &got, sizeof got, r), r, "isend");
      expect_ok(s.wait(r), r, "send");
      got = i;
    }
    expect(got == i, "pingpong value");
  }
  std::printf("pingpong rank %d: %d round trips ok\n", s.rank(), iters);
  return 0;
}

int aggregation(session& s, int n) {
  if (s.rank() > 1) return 0;
  int token = 0;
  request r;
  if (s.rank() == 1) {
    std::vector<int> got(n, -1);
    std::vector<request> rr(n);
    for (int i = 0; i < n; ++i) expect_ok(s.irecv(0, 7, &got[i], sizeof(int), rr[i]), rr[i], "irecv");
    expect_ok(s.isend(0, 8, &token, sizeof token, r), r, "ready");
    expect_ok(s.wait(r), r, "ready");
    for (int i = 0; i < n; ++i) {
      expect_ok(s.wait(rr[i]), rr[i], "recv");
      expect(got[i] == i, "aggregated message order/content");
    }
    std::printf("aggregation rank 1: %d messages in order\n", n);
    return 0;
  }
  expect_ok(s.irecv(1, 8, &token, sizeof token, r), r, "ready");
  expect_ok(s.wait(r), r, "ready");
  std::vector<int> vals(n);
  std::vector<request> rs(n);
  const auto before = s.stats().packets_sent;
  for (int i = 0; i < n; ++i) {  // no progress in between: the track is busy
    vals[i] = i;
    expect_ok(s.isend(1, 7, &vals[i], sizeof(int), rs[i]), rs[i], "isend");
  }
  for (int i = 0; i < n; ++i) expect_ok(s.wait(rs[i]), rs[i], "send");
  const auto packets = s.stats().packets_sent - before;
  std::printf("aggregation: strategy %s sent %d messages in %llu packets\n", std::string(s.strategy_name()).c_str(),
              n, static_cast<unsigned long long>(packets));
  if (s.strategy_name() == "default") expect(packets == static_cast<unsigned>(n), "default must not aggregate");
  if (s.strategy_name() == "aggreg") expect(packets < static_cast<unsigned>(n), "aggreg must aggregate");
  return 0;
}

int pack_rpc(session& s, int rounds) {
  if (s.rank() > 1) return 0;
  std::mt19937 rng(42);
  const std::uint32_t service = 0xCAFE;
  if (s.rank() == 0) {  // client
    for (int i = 0; i < rounds; ++i) {
      std::uint64_t len = (i % 5 == 4) ? (1u << 20) + i : rng() % 5000;
      std::vector<unsigned char> body(len);
      fill(body, 1000 + i);
      {
        pack_connection p(s, 1, 50);
        expect(p.pack(&service, sizeof service, pack_mode::express) == errc::ok, "pack service");
        expect(p.pack(&len, sizeof len, pack_mode::express) == errc::ok, "pack len");
        expect(p.pack(body.data(), len, pack_mode::cheaper) == errc::ok, "pack body");
        expect(p.end() == errc::ok, "pack end");
      }
      unpack_connection u(s, 1, 51);
      std::uint64_t rlen = 0;
      expect(u.unpack(&rlen, sizeof rlen, pack_mode::express) == errc::ok, "unpack answer length");
      expect(rlen == len, "answer length (express piece readable after unpack)");
      std::vector<unsigned char> answer(rlen);
      expect(u.unpack(answer.data(), rlen, pack_mode::cheaper) == errc::ok, "unpack answer");
      expect(u.end() == errc::ok, "unpack end");
      for (std::size_t k = 0; k < len; ++k) expect(answer[k] == static_cast<unsigned char>(~body[k]), "answer bytes");
    }
    std::printf("pack client: %d calls answered correctly\n", rounds);
  } else {  // server
    for (int i = 0; i < rounds; ++i) {
      unpack_connection u(s, any_source, 50);
      std::uint32_t svc = 0;
      std::uint64_t len = 0;
      expect(u.unpack(&svc, sizeof svc, pack_mode::express) == errc::ok, "unpack service");
      expect(svc == service, "service id readable right after an express unpack");
      expect(u.unpack(&len, sizeof len, pack_mode::express) == errc::ok, "unpack len");
      expect(len <= (2u << 20), "length readable right after an express unpack");
      std::vector<unsigned char> body(len);
      expect(u.unpack(body.data(), len, pack_mode::cheaper) == errc::ok, "unpack body");
      expect(u.end() == errc::ok, "unpack end");
      std::vector<unsigned char> ref(len);
      fill(ref, 1000 + i);
      expect(body == ref, "cheaper piece complete after unpack_end");
      expect(u.source() == 0, "source of the request");
      for (auto& b : body) b = static_cast<unsigned char>(~b);
      pack_connection p(s, 0, 51);
      p.pack(&len, sizeof len, pack_mode::express);
      p.pack(body.data(), len, pack_mode::cheaper);
      expect(p.end() == errc::ok, "answer end");
    }
    std::printf("pack server: %d calls served\n", rounds);
  }
  return 0;
}

int truncate(session& s) {
  if (s.rank() > 1) return 0;
  if (s.rank() == 0) {
    std::vector<unsigned char> a(100), b(1 << 20);
    fill(a, 1);
    fill(b, 2);
    int ok = 1234;
    request r1, r2, r3;
    expect_ok(s.isend(1, 1, a.data(), a.size(), r1), r1, "isend");
    expect_ok(s.isend(1, 1, b.data(), b.size(), r2), r2, "isend");
    expect_ok(s.isend(1, 2, &ok, sizeof ok, r3), r3, "isend");
    expect_ok(s.wait(r1), r1, "send small (receiver truncates)");
    expect_ok(s.wait(r2), r2, "send large (receiver truncates)");
    expect_ok(s.wait(r3), r3, "send");
    std::printf("truncate sender: all sends completed normally\n");
    return 0;
  }
  std::vector<unsigned char> a(50), b(100 * 1024);
  request r;
  expect_ok(s.irecv(0, 1, a.data(), a.size(), r), r, "irecv");
  expect(s.wait(r) == errc::truncated, "small message into a smaller buffer must be truncated");
  std::printf("truncate receiver: %s\n", r.error_message().c_str());
  std::vector<unsigned char> ref(100);
  fill(ref, 1);
  expect(std::memcmp(a.data(), ref.data(), 50) == 0, "truncated prefix content");
  expect_ok(s.irecv(0, 1, b.data(), b.size(), r), r, "irecv");
  expect(s.wait(r) == errc::truncated, "rendezvous into a smaller buffer must be truncated");
  std::printf("truncate receiver: %s\n", r.error_message().c_str());
  std::vector<unsigned char> ref2(1 << 20);
  fill(ref2, 2);
  expect(std::memcmp(b.data(), ref2.data(), b.size()) == 0, "truncated rendezvous prefix content");
  int ok = 0;
  expect_ok(s.irecv(0, 2, &ok, sizeof ok, r), r, "irecv");
  expect_ok(s.wait(r), r, "message after truncations");
  expect(ok == 1234, "message after truncations");
  std::printf("truncate receiver: the process went on\n");
  return 0;
}

int pull(session& s, bool expect_pulled) {
  if (s.size() < 2 || s.rank() > 1) return 0;
  std::vector<unsigned char> buf(4 << 20);
  request r;
  if (s.rank() == 1) {
    fill(buf, 99);
    expect_ok(s.isend(0, 4, buf.data(), buf.size(), r), r, "isend");
    std::this_thread::sleep_for(std::chrono::milliseconds(400));  // "computing"
    const bool done = s.test(r);
    std::printf("pull: first test after the sender's pause: %s\n", done ? "complete" : "pending");
    // Pushing, one progress round may still move everything (the receiver
    // drains the ring meanwhile), so only the pulled case is asserted.
    if (expect_pulled) expect(done, "the receiver should have pulled the data");
    expect_ok(s.wait(r), r, "send");
    return 0;
  }
  expect_ok(s.irecv(1, 4, buf.data(), buf.size(), r), r, "irecv");
  expect_ok(s.wait(r), r, "recv");
  std::vector<unsigned char> want(buf.size());
  fill(want, 99);
  expect(buf == want, "pulled bytes differ");
  std::printf("pull: %zu bytes verified\n", buf.size());
  return 0;
}

// Rank 0 waits for a message rank 1 sends after `ms` milliseconds; with a
// blocking wait policy it must sleep, not spin: its CPU time is printed.
int sleeper(session& s, int ms) {
  if (s.size() < 2 || s.rank() > 1) return 0;
  int v = 0;
  request r;
  if (s.rank() == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    v = 4242;
    expect_ok(s.isend(0, 3, &v, sizeof v, r), r, "isend");
    expect_ok(s.wait(r), r, "send");
    return 0;
  }
  rusage before{}, after{};
  ::getrusage(RUSAGE_SELF, &before);
  const auto t0 = std::chrono::steady_clock::now();
  expect_ok(s.irecv(1, 3, &v, sizeof v, r), r, "irecv");
  expect_ok(s.wait(r), r, "recv");
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ::getrusage(RUSAGE_SELF, &after);
  auto secs = [](const timeval& a, const timeval& b) { return (b.tv_sec - a.tv_sec) + (b.tv_usec - a.tv_usec) / 1e6; };
  const double cpu = secs(before.ru_utime, after.ru_utime) + secs(before.ru_stime, after.ru_stime);
  expect(v == 4242, "received value");
  const wait_policy wp = s.get_wait_policy();
  std::printf("sleeper: waited %.3f s using %.3f s of CPU (%s)\n", wall, cpu,
              wp == wait_policy::busy ? "busy" : wp == wait_policy::block ? "block" : "fixed-spin");
  std::fflush(stdout);
  return 0;
}

int threads(session& s, int iters) {
  if (s.rank() > 1) return 0;
  const int peer = 1 - s.rank();
  auto body = [&](int t) {
    std::vector<unsigned char> buf(t == 0 ? 8 : 100000), in(buf.size());
    for (int i = 0; i < iters; ++i) {
      fill(buf, static_cast<std::uint64_t>(i * 2 + t));
      request a, b;
      expect_ok(s.irecv(peer, 100 + t, in.data(), in.size(), b), b, "thread irecv");
      expect_ok(s.isend(peer, 100 + t, buf.data(), buf.size(), a), a, "thread isend");
      expect_ok(s.wait(a), a, "thread send");
      expect_ok(s.wait(b), b, "thread recv");
      expect(in == buf, "thread message content");
    }
  };
  std::thread t1(body, 0), t2(body, 1);
  t1.join();
  t2.join();
  std::printf("threads rank %d: 2 threads x %d exchanges ok\n", s.rank(), iters);
  return 0;
}

// `callbacks N`: rank 1 answers N pings from completion callbacks: each
// receive's callback sends the echo and posts the next receive (requests
// started from callbacks, outside the engine's locks); its main thread only
// waits for the count.
int callbacks(session& s, int n) {
  if (s.rank() > 1) return 0;
  if (s.rank() == 0) {
    for (int i = 0; i < n; ++i) {
      int v = i, back = -1;
      request sr, rr;
      expect(s.irecv(1, 2, &back, sizeof back, rr) == errc::ok, "cb irecv");
      expect(s.isend(1, 1, &v, sizeof v, sr) == errc::ok, "cb isend");
      expect_ok(s.wait(sr), sr, "cb send");
      expect_ok(s.wait(rr), rr, "cb recv");
      expect(back == i + 1000, "cb: wrong echo");
    }
    std::printf("callbacks rank 0: %d echoes from callbacks\n", n);
    return 0;
  }
  struct state {
    session* s;
    int n;
    std::atomic<int> answered{0};
    int got[2] = {-1, -1};
    int reply[2] = {0, 0};
    request rr[2], sr[2];
    static void on_recv(request& r, void* arg) {
      auto* st = static_cast<state*>(arg);
      const int k = &r == &st->rr[0] ? 0 : 1;
      expect(r.error() == errc::ok, "cb: receive failed in callback");
      const int i = st->got[k];
      // Answer from the callback (the previous send on this slot is done:
      // the peer waited for its echo before sending again).
      if (!st->sr[k].completed()) expect_ok(st->s->wait(st->sr[k]), st->sr[k], "cb previous send");
      st->reply[k] = i + 1000;
      expect(st->s->isend(0, 2, &st->reply[k], sizeof(int), st->sr[k]) == errc::ok, "cb: isend from callback");
      const int seen = st->answered.fetch_add(1) + 1;
      if (seen < st->n) {
        // The next ping lands in the other slot (this one is still completing).
        const int o = 1 - k;
        st->rr[o].on_complete(&state::on_recv, st);
        expect(st->s->irecv(0, 1, &st->got[o], sizeof(int), st->rr[o]) == errc::ok, "cb: irecv from callback");
      }
    }
  };
  auto st = std::make_unique<state>();
  st->s = &s;
  st->n = n;
  st->rr[0].on_complete(&state::on_recv, st.get());
  expect(s.irecv(0, 1, &st->got[0], sizeof(int), st->rr[0]) == errc::ok, "cb first irecv");
  s.wait_until([&] { return st->answered.load() == n; });
  for (auto& r : st->sr) expect_ok(s.wait(r), r, "cb last sends");
  for (auto& r : st->rr) s.wait(r);
  std::printf("callbacks rank 1: %d receives answered from callbacks\n", n);
  return 0;
}

}  // namespace nmad_test::engine
