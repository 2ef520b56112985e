// A singleton session (rank 0 of 1) talking to itself through the `self`
// driver: the whole protocol (eager, rendezvous, matching, unexpected
// queue, truncation, pack/unpack) without a second process.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <numeric>
#include <thread>
#include <stdexcept>
#include <vector>

#include "api/nmad/layer.hpp"
#include "api/nmad/nmad.hpp"

using namespace nmad;

namespace {

std::unique_ptr<session> make(std::string strategy = "default") {
  session_options o;
  o.strategy = strategy;
  return session::create(o);
}

std::vector<unsigned char> pattern(std::size_t n, unsigned seed) {
  std::vector<unsigned char> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<unsigned char>((i * 131 + seed * 7) >> 1);
  return v;
}

}  // namespace

TEST_CASE("self: eager message arrives intact") {
  auto s = make();
  CHECK(s->rank() == 0);
  CHECK(s->size() == 1);
  auto out = pattern(1000, 1);
  std::vector<unsigned char> in(1000);
  request rs, rr;
  CHECK(s->irecv(0, 5, in.data(), in.size(), rr) == errc::ok);
  CHECK(s->isend(0, 5, out.data(), out.size(), rs) == errc::ok);
  CHECK(s->wait(rs) == errc::ok);
  CHECK(s->wait(rr) == errc::ok);
  CHECK(in == out);
  CHECK(rr.status().source == 0);
  CHECK(rr.status().tag == 5);
  CHECK(rr.status().length == 1000);
}

TEST_CASE("self: rendezvous message (4 MiB) arrives intact, posted before or after") {
  auto s = make();
  for (bool recv_first : {true, false}) {
    auto out = pattern(4 << 20, recv_first ? 2 : 3);
    std::vector<unsigned char> in(out.size());
    request rs, rr;
    if (recv_first) CHECK(s->irecv(0, 1, in.data(), in.size(), rr) == errc::ok);
    CHECK(s->isend(0, 1, out.data(), out.size(), rs) == errc::ok);
    if (!recv_first) {
      for (int i = 0; i < 10; ++i) s->progress();
      CHECK(s->irecv(0, 1, in.data(), in.size(), rr) == errc::ok);
    }
    CHECK(s->wait(rr) == errc::ok);
    CHECK(s->wait(rs) == errc::ok);
    CHECK(in == out);
  }
}

TEST_CASE("self: messages on one tag are received in send order (unexpected queue)") {
  auto s = make();
  constexpr int n = 200;
  std::vector<int> vals(n);
  std::vector<request> reqs(n);
  for (int i = 0; i < n; ++i) {
    vals[i] = i;
    CHECK(s->isend(0, 42, &vals[i], sizeof(int), reqs[i]) == errc::ok);
  }
  for (int i = 0; i < n; ++i) {
    int got = -1;
    request rr;
    CHECK(s->irecv(0, 42, &got, sizeof got, rr) == errc::ok);
    CHECK(s->wait(rr) == errc::ok);
    CHECK(got == i);
  }
  for (auto& r : reqs) CHECK(s->wait(r) == errc::ok);
}

TEST_CASE("self: tag masks select, any_source matches") {
  auto s = make();
  int a = 1, b = 2, got = 0;
  request r1, r2, rr;
  CHECK(s->isend(0, 0x100, &a, sizeof a, r1) == errc::ok);
  CHECK(s->isend(0, 0x201, &b, sizeof b, r2) == errc::ok);
  // Upper byte 0x2, any low byte.
  CHECK(s->irecv(any_source, 0x200, &got, sizeof got, rr, 0xff00) == errc::ok);
  CHECK(s->wait(rr) == errc::ok);
  CHECK(got == 2);
  CHECK(rr.status().tag == 0x201);
  // Mask 0: any tag.
  CHECK(s->irecv(any_source, 0, &got, sizeof got, rr, 0) == errc::ok);
  CHECK(s->wait(rr) == errc::ok);
  CHECK(got == 1);
  s->wait(r1);
  s->wait(r2);
}

TEST_CASE("self: a receive buffer too small reports truncation and the session goes on") {
  auto s = make();
  for (std::size_t size : {std::size_t{100}, std::size_t{1} << 20}) {
    auto out = pattern(size, 4);
    std::vector<unsigned char> small(size / 2);
    request rs, rr;
    CHECK(s->isend(0, 9, out.data(), out.size(), rs) == errc::ok);
    CHECK(s->irecv(0, 9, small.data(), small.size(), rr) == errc::ok);
    CHECK(s->wait(rr) == errc::truncated);
    CHECK(rr.error_message().find("truncated") != std::string::npos);
    CHECK(std::memcmp(small.data(), out.data(), small.size()) == 0);
    CHECK(s->wait(rs) == errc::ok);  // the sender is not affected
    // The next message on the same tag is fine.
    int v = 77, got = 0;
    request rs2, rr2;
    CHECK(s->isend(0, 9, &v, sizeof v, rs2) == errc::ok);
    CHECK(s->irecv(0, 9, &got, sizeof got, rr2) == errc::ok);
    CHECK(s->wait(rr2) == errc::ok);
    CHECK(got == 77);
    s->wait(rs2);
  }
}

TEST_CASE("self: probe reports source, tag and length before the receive") {
  auto s = make();
  recv_status st;
  CHECK_FALSE(s->iprobe(any_source, 3, st));
  auto out = pattern(70000, 5);
  request rs;
  CHECK(s->isend(0, 3, out.data(), out.size(), rs) == errc::ok);
  st = s->probe(any_source, 3);
  CHECK(st.source == 0);
  CHECK(st.tag == 3);
  CHECK(st.length == 70000);
  std::vector<unsigned char> in(st.length);
  request rr;
  CHECK(s->irecv(st.source, st.tag, in.data(), in.size(), rr) == errc::ok);
  CHECK(s->wait(rr) == errc::ok);
  CHECK(in == out);
  s->wait(rs);
}

TEST_CASE("self: cancelling sends: an unmatched rendezvous is withdrawn, eager and matched ones are not") {
  auto s = make();
  std::vector<char> big(1 << 20, 'x');
  request rs;
  CHECK(s->isend(0, 21, big.data(), big.size(), rs) == errc::ok);
  CHECK(s->cancel(rs));          // asked
  CHECK_FALSE(s->cancel(rs));    // once
  CHECK(s->wait(rs) == errc::cancelled);
  // Withdrawn: nothing to probe; the next message on the tag comes through.
  recv_status st;
  CHECK_FALSE(s->iprobe(0, 21, st));
  int v = 9, got = 0;
  request r2, rr;
  CHECK(s->isend(0, 21, &v, sizeof v, r2) == errc::ok);
  CHECK(s->irecv(0, 21, &got, sizeof got, rr) == errc::ok);
  CHECK(s->wait(rr) == errc::ok);
  CHECK(got == 9);
  CHECK(s->wait(r2) == errc::ok);
  // A synchronous empty send, unmatched: withdrawn as well.
  request sy;
  CHECK(s->isend(0, 22, nullptr, 0, sy, send_flags::synchronous) == errc::ok);
  CHECK(s->cancel(sy));
  CHECK(s->wait(sy) == errc::cancelled);
  // Matched before the cancel: the cancel is refused and the data arrives.
  std::vector<char> in(big.size());
  request rb, sb;
  CHECK(s->irecv(0, 23, in.data(), in.size(), rb) == errc::ok);
  CHECK(s->isend(0, 23, big.data(), big.size(), sb) == errc::ok);
  CHECK(s->wait(rb) == errc::ok);
  CHECK_FALSE(s->cancel(sb));
  CHECK(s->wait(sb) == errc::ok);
  CHECK(in == big);
}

TEST_CASE("self: cancelling a posted receive; a matched one cannot be cancelled") {
  auto s = make();
  int got = 0;
  request rr;
  CHECK(s->irecv(0, 11, &got, sizeof got, rr) == errc::ok);
  CHECK(s->cancel(rr));
  CHECK(rr.completed());
  CHECK(rr.error() == errc::cancelled);
  CHECK_FALSE(s->cancel(rr));
  // The tag still works afterwards.
  int v = 5;
  request rs;
  CHECK(s->isend(0, 11, &v, sizeof v, rs) == errc::ok);
  CHECK(s->irecv(0, 11, &got, sizeof got, rr) == errc::ok);
  CHECK(s->wait(rr) == errc::ok);
  CHECK(got == 5);
  s->wait(rs);
}

TEST_CASE("self: completion callbacks run exactly once") {
  auto s = make();
  int calls = 0;
  int v = 3, got = 0;
  request rs, rr;
  rr.on_complete([](request& r, void* arg) { ++*static_cast<int*>(arg); CHECK(r.error() == errc::ok); }, &calls);
  CHECK(s->irecv(0, 1, &got, sizeof got, rr) == errc::ok);
  CHECK(s->isend(0, 1, &v, sizeof v, rs) == errc::ok);
  s->wait(rr);
  s->wait(rs);
  for (int i = 0; i < 5; ++i) s->progress();
  CHECK(calls == 1);
}

TEST_CASE("self: wait_any returns the request that completed") {
  auto s = make();
  int a = 0, b = 0, v = 9;
  request ra, rb, rs;
  CHECK(s->irecv(0, 100, &a, sizeof a, ra) == errc::ok);
  CHECK(s->irecv(0, 200, &b, sizeof b, rb) == errc::ok);
  CHECK(s->isend(0, 200, &v, sizeof v, rs) == errc::ok);
  request* reqs[] = {&ra, &rb};
  CHECK(s->wait_any(reqs) == 1);
  CHECK(b == 9);
  CHECK(s->cancel(ra));
  s->wait(rs);
}

TEST_CASE("self: invalid arguments are refused with a message") {
  auto s = make();
  int v = 0;
  request r;
  CHECK(s->isend(1, 0, &v, sizeof v, r) == errc::invalid_argument);
  CHECK(r.error_message().find("out of range") != std::string::npos);
  request r2;
  CHECK(s->isend(0, 0, nullptr, 4, r2) == errc::invalid_argument);
  request r3;
  CHECK(s->irecv(5, 0, &v, sizeof v, r3) == errc::invalid_argument);
  // A request still pending cannot be started again.
  request rr;
  CHECK(s->irecv(0, 1, &v, sizeof v, rr) == errc::ok);
  CHECK(s->irecv(0, 1, &v, sizeof v, rr) == errc::invalid_argument);
  CHECK(s->cancel(rr));
}

TEST_CASE("self: unknown strategy or driver names fail with the list of known ones") {
  session_options o;
  o.strategy = "nosuch";
  try {
    session::create(o);
    FAIL("expected an exception");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()).find("aggreg") != std::string::npos);
  }
  session_options d;
  d.driver = "nosuchdriver";
  CHECK_THROWS_WITH_AS(session::create(d), doctest::Contains("tcp"), std::runtime_error);
}

TEST_CASE("self: zero-length messages match and complete") {
  auto s = make();
  request rs, rr;
  CHECK(s->isend(0, 4, nullptr, 0, rs) == errc::ok);
  CHECK(s->irecv(0, 4, nullptr, 0, rr) == errc::ok);
  CHECK(s->wait(rr) == errc::ok);
  CHECK(rr.status().length == 0);
  s->wait(rs);
}

TEST_CASE("self: pack/unpack round trip, express piece readable at once") {
  auto s = make();
  std::uint32_t n = 3000;
  auto body = pattern(n, 8);
  auto tail = pattern(10, 9);
  {
    pack_connection p(*s, 0, 77);
    CHECK(p.pack(&n, sizeof n, pack_mode::express) == errc::ok);
    CHECK(p.pack(body.data(), n, pack_mode::cheaper) == errc::ok);
    CHECK(p.pack(tail.data(), tail.size(), pack_mode::cheaper) == errc::ok);
    CHECK(p.end() == errc::ok);
  }
  unpack_connection u(*s, any_source, 77);
  std::uint32_t got_n = 0;
  CHECK(u.unpack(&got_n, sizeof got_n, pack_mode::express) == errc::ok);
  CHECK(got_n == n);  // express: in memory now
  std::vector<unsigned char> got(got_n), got_tail(10);
  CHECK(u.unpack(got.data(), got_n, pack_mode::cheaper) == errc::ok);
  CHECK(u.unpack(got_tail.data(), got_tail.size(), pack_mode::cheaper) == errc::ok);
  CHECK(u.end() == errc::ok);
  CHECK(got == body);
  CHECK(got_tail == tail);
  CHECK(u.source() == 0);
}

TEST_CASE("self: isendv sends one message of several pieces without waiting; errors as isend") {
  auto s = make("aggreg");
  std::uint32_t n = 100000;  // the body goes by rendezvous
  auto body = pattern(n, 4);
  auto tail = pattern(5, 6);
  const send_piece pieces[] = {{&n, sizeof n, pack_mode::express},
                               {nullptr, 0, pack_mode::express},  // empty: nothing
                               {body.data(), n, pack_mode::cheaper},
                               {tail.data(), tail.size(), pack_mode::cheaper}};
  request sent;
  REQUIRE(s->isendv(0, 78, pieces, sent) == errc::ok);
  // Received as one message, piece by piece...
  {
    unpack_connection u(*s, 0, 78);
    std::uint32_t got_n = 0;
    CHECK(u.unpack(&got_n, sizeof got_n, pack_mode::express) == errc::ok);
    CHECK(got_n == n);
    std::vector<unsigned char> got(got_n), got_tail(5);
    CHECK(u.unpack(got.data(), got_n, pack_mode::cheaper) == errc::ok);
    CHECK(u.unpack(got_tail.data(), got_tail.size(), pack_mode::cheaper) == errc::ok);
    CHECK(u.end() == errc::ok);
    CHECK(got == body);
    CHECK(got_tail == tail);
  }
  s->wait(sent);
  CHECK(sent.error() == errc::ok);
  // ... or whole, by irecv of the total length.
  request again, in;
  REQUIRE(s->isendv(0, 79, pieces, again) == errc::ok);
  std::vector<unsigned char> whole(sizeof n + n + 5);
  REQUIRE(s->irecv(0, 79, whole.data(), whole.size(), in) == errc::ok);
  s->wait(in);
  s->wait(again);
  CHECK(in.error() == errc::ok);
  CHECK(in.status().length == whole.size());
  CHECK(std::memcmp(whole.data(), &n, sizeof n) == 0);
  CHECK(std::equal(body.begin(), body.end(), whole.begin() + sizeof n));
  CHECK(std::equal(tail.begin(), tail.end(), whole.begin() + sizeof n + n));
  // A rank out of range: refused with a message, the request completed.
  request bad;
  CHECK(s->isendv(5, 80, pieces, bad) == errc::invalid_argument);
  CHECK(bad.completed());
  CHECK(bad.error_message().find("out of range") != std::string::npos);
}

// The message's first entry is sent and recycled between two pack() calls:
// a later piece that gets the same pooled entry must not open the message
// again (it once took a new sequence number, and the receiver waited for
// bytes of a message that never came).
TEST_CASE("self: a packed message whose first piece left before the later pieces were packed") {
  auto s = make();
  auto a = pattern(100, 1), b = pattern(200, 2), c = pattern(300, 3), d = pattern(50, 4);
  for (int round = 0; round < 3; ++round) {
    {
      pack_connection p(*s, 0, 40);
      CHECK(p.pack(a.data(), a.size()) == errc::ok);
      CHECK(p.pack(b.data(), b.size()) == errc::ok);  // queues a
      for (int i = 0; i < 8; ++i) s->progress();        // a leaves; its entry is recycled
      CHECK(p.pack(c.data(), c.size()) == errc::ok);  // queues b
      for (int i = 0; i < 8; ++i) s->progress();
      CHECK(p.pack(d.data(), d.size()) == errc::ok);
      CHECK(p.end() == errc::ok);
    }
    unpack_connection u(*s, 0, 40);
    std::vector<unsigned char> ga(a.size()), gb(b.size()), gc(c.size()), gd(d.size());
    CHECK(u.unpack(ga.data(), ga.size()) == errc::ok);
    CHECK(u.unpack(gb.data(), gb.size()) == errc::ok);
    CHECK(u.unpack(gc.data(), gc.size()) == errc::ok);
    CHECK(u.unpack(gd.data(), gd.size()) == errc::ok);
    CHECK(u.end() == errc::ok);
    CHECK(ga == a);
    CHECK(gb == b);
    CHECK(gc == c);
    CHECK(gd == d);
  }
}

TEST_CASE("self: unpack sequences that do not cover the packed bytes are reported") {
  auto s = make();
  int a = 1, b = 2;
  {
    pack_connection p(*s, 0, 5);
    p.pack(&a, sizeof a);
    p.pack(&b, sizeof b);
    CHECK(p.end() == errc::ok);
  }
  {
    unpack_connection u(*s, 0, 5);
    int x = 0;
    u.unpack(&x, sizeof x);
    CHECK(u.end() == errc::truncated);  // one int left unread
    CHECK(x == 1);
  }
  {
    pack_connection p(*s, 0, 6);
    p.pack(&a, sizeof a);
    CHECK(p.end() == errc::ok);
  }
  {
    unpack_connection u(*s, 0, 6);
    int x = 0, y = 0;
    u.unpack(&x, sizeof x);
    u.unpack(&y, sizeof y);
    CHECK(u.end() == errc::size_mismatch);
  }
}

TEST_CASE("self: with a busy track, aggreg sends fewer packets than default") {
  for (const char* strat : {"default", "aggreg"}) {
    auto s = make(strat);
    constexpr int n = 50;
    std::vector<int> vals(n), got(n);
    std::vector<request> rs(n), rr(n);
    for (int i = 0; i < n; ++i) CHECK(s->irecv(0, 1, &got[i], sizeof(int), rr[i]) == errc::ok);
    const auto before = s->stats().packets_sent;
    // No progress between the sends: the track stays busy after the first
    // two packets and the rest accumulate in the collect list.
    for (int i = 0; i < n; ++i) {
      vals[i] = i;
      CHECK(s->isend(0, 1, &vals[i], sizeof(int), rs[i]) == errc::ok);
    }
    for (int i = 0; i < n; ++i) CHECK(s->wait(rr[i]) == errc::ok);
    for (int i = 0; i < n; ++i) CHECK(s->wait(rs[i]) == errc::ok);
    for (int i = 0; i < n; ++i) CHECK(got[i] == i);
    const auto packets = s->stats().packets_sent - before;
    MESSAGE(std::string(strat) << ": " << n << " sends left in " << packets << " packets");
    if (std::string(strat) == "default") CHECK(packets == n);
    else CHECK(packets < n);
  }
}

TEST_CASE("self: a synchronous send completes only once a receive matched it") {
  auto s = make();
  for (std::size_t len : {std::size_t{0}, std::size_t{8}, std::size_t{100000}}) {
    auto out = pattern(len, 9);
    std::vector<unsigned char> in(len);
    request rs, rr;
    CHECK(s->isend(0, 21, out.data(), out.size(), rs, send_flags::synchronous) == errc::ok);
    for (int i = 0; i < 50; ++i) s->progress();
    CHECK_FALSE(rs.completed());  // no receive yet: even an empty one waits
    CHECK(s->irecv(0, 21, in.data(), in.size(), rr) == errc::ok);
    CHECK(s->wait(rs) == errc::ok);
    CHECK(s->wait(rr) == errc::ok);
    CHECK(in == out);
    CHECK(rr.status().length == len);
  }
}

TEST_CASE("self: matched probe detaches a message that only imrecv can receive") {
  auto s = make();
  for (std::size_t len : {std::size_t{16}, std::size_t{200000}}) {
    auto out = pattern(len, 4);
    request rs;
    CHECK(s->isend(0, 31, out.data(), out.size(), rs) == errc::ok);
    recv_status st;
    message_handle m;
    while (!s->improbe(any_source, 31, st, m)) {
    }
    CHECK(m.valid());
    CHECK(st.length == len);
    CHECK(st.tag == 31);
    // Invisible to probes and receives now.
    recv_status st2;
    CHECK_FALSE(s->iprobe(any_source, 31, st2));
    int other = 0;
    request rother;
    CHECK(s->irecv(0, 31, &other, sizeof other, rother) == errc::ok);
    std::vector<unsigned char> in(len);
    request rr;
    CHECK(s->imrecv(m, in.data(), in.size(), rr) == errc::ok);
    CHECK_FALSE(m.valid());
    CHECK(s->wait(rr) == errc::ok);
    CHECK(in == out);
    CHECK_FALSE(rother.completed());
    CHECK(s->cancel(rother));
    s->wait(rs);
    request again;
    CHECK(s->imrecv(m, in.data(), in.size(), again) == errc::invalid_argument);
  }
}

TEST_CASE("self: progress tasks run on every progress round until removed") {
  auto s = make();
  int runs = 0;
  layer::progress_task task(*s, [](void* a) { ++*static_cast<int*>(a); return 0; }, &runs);
  CHECK(static_cast<bool>(task));
  for (int i = 0; i < 10; ++i) s->progress();
  CHECK(runs == 10);
  // Also from inside blocking calls.
  int v = 1, got = 0;
  request rs, rr;
  CHECK(s->isend(0, 41, &v, sizeof v, rs) == errc::ok);
  CHECK(s->irecv(0, 41, &got, sizeof got, rr) == errc::ok);
  s->wait(rr);
  s->wait(rs);
  task.reset();
  CHECK_FALSE(static_cast<bool>(task));
  const int before = runs;
  for (int i = 0; i < 10; ++i) s->progress();
  CHECK(runs == before);
}

TEST_CASE("self: a progress task handle moves its task and removes it when it goes") {
  auto s = make();
  int runs = 0, kept = 0;
  auto count = [](void* a) { ++*static_cast<int*>(a); return 0; };
  {
    layer::progress_task outer;
    CHECK_FALSE(static_cast<bool>(outer));
    {
      layer::progress_task inner(*s, count, &runs);
      outer = std::move(inner);
      CHECK_FALSE(static_cast<bool>(inner));  // NOLINT(bugprone-use-after-move): the moved-from state is specified
    }  // inner's end removes nothing: the task moved out
    s->progress();
    CHECK(runs == 1);
    layer::progress_task other(*s, count, &kept);
    outer = std::move(other);  // the task counting `runs` goes, the other stays
    s->progress();
    CHECK(runs == 1);
    CHECK(kept == 1);
  }
  s->progress();
  CHECK(kept == 1);
  // A session task runs until the session ends; the work it reports is progress.
  int forever = 0;
  layer::add_session_task(*s, [](void* a) { ++*static_cast<int*>(a); return 1; }, &forever);
  CHECK(s->progress_quiet() >= 1);
  CHECK(layer::progress_all_drivers(*s) >= 1);
  CHECK(forever == 2);
  // Blocking sections nest on one thread and leave the session usable.
  {
    layer::blocking_section a(*s);
    layer::blocking_section b(*s);
    int v = 5, got = 0;
    request rs, rr;
    CHECK(s->irecv(0, 43, &got, sizeof got, rr) == errc::ok);
    CHECK(s->isend(0, 43, &v, sizeof v, rs) == errc::ok);
    CHECK(s->wait(rr) == errc::ok);
    CHECK(s->wait(rs) == errc::ok);
    CHECK(got == 5);
  }
  CHECK(layer::copy_offload_min(*s) == 0);  // no progress thread here: nothing offloaded
}

// No session-wide lock: while one thread is inside the engine (here a
// progress task that does not return until the other thread is done),
// another thread sends, receives and waits on the same session. With one
// engine lock around progress this would stop until the task gave up.
TEST_CASE("self: a blocked progress task does not stop another thread's sends and receives") {
  auto s = make();
  for (std::size_t size : {std::size_t{64}, std::size_t{4} << 20}) {
    CAPTURE(size);
    struct shared {
      std::atomic<bool> entered{false}, other_done{false}, gave_up{false};
    } sh;
    layer::progress_task task(
        *s,
        [](void* a) {
          auto& x = *static_cast<shared*>(a);
          if (x.entered.exchange(true)) return 0;  // blocks on its first run only
          const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
          while (!x.other_done.load() && std::chrono::steady_clock::now() < until)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
          x.gave_up = !x.other_done.load();
          return 0;
        },
        &sh);
    auto out = pattern(size, 9);
    std::vector<unsigned char> in(size);
    errc send_result = errc::no_resource, recv_result = errc::no_resource;
    std::thread other([&] {
      while (!sh.entered.load()) std::this_thread::yield();
      request rs, rr;
      if (s->irecv(0, 77, in.data(), in.size(), rr) == errc::ok &&
          s->isend(0, 77, out.data(), out.size(), rs) == errc::ok) {
        send_result = s->wait(rs);
        recv_result = s->wait(rr);
      }
      sh.other_done = true;
    });
    s->progress();  // runs the task, which waits for the other thread
    other.join();
    task.reset();
    CHECK_FALSE(sh.gave_up.load());
    CHECK(send_result == errc::ok);
    CHECK(recv_result == errc::ok);
    CHECK(in == out);
  }
}

TEST_CASE("self: a detached message never received is freed with the session") {
  auto s = make();
  std::vector<unsigned char> out(1000, 7);
  request rs;
  CHECK(s->isend(0, 51, out.data(), out.size(), rs) == errc::ok);
  recv_status st;
  message_handle m;
  while (!s->improbe(0, 51, st, m)) {
  }
  CHECK(m.valid());
  CHECK(s->wait(rs) == errc::ok);
  s.reset();  // ASan's leak check fails this case if the message leaks
}

// ---- request lifetime: destroying a pending request cancels it ----------------

namespace {

// Takes the memory a destroyed request left (the allocator hands the same
// block out again), filled with a pattern, as an application would reuse it.
std::vector<std::unique_ptr<unsigned char[]>> reuse_freed_requests(std::size_t n = 8) {
  std::vector<std::unique_ptr<unsigned char[]>> blocks;
  for (std::size_t i = 0; i < n; ++i) {
    blocks.emplace_back(new unsigned char[sizeof(request)]);
    std::memset(blocks.back().get(), 0xa5, sizeof(request));
  }
  return blocks;
}

// Progresses until r completes or 5 s have passed (a test must fail, not hang).
bool finishes(session& s, request& r) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!s.test(r))
    if (std::chrono::steady_clock::now() > deadline) return false;
  return true;
}

}  // namespace

TEST_CASE("self: a destroyed pending receive never takes a message; the next receive does") {
  auto s = make();
  std::vector<unsigned char> stale(64, 0xee);
  auto r = std::make_unique<request>();
  CHECK(s->irecv(0, 41, stale.data(), stale.size(), *r) == errc::ok);
  r.reset();
  auto reused = reuse_freed_requests();
  const auto out = pattern(64, 9);
  std::vector<unsigned char> in(64);
  request rs, rr;
  CHECK(s->isend(0, 41, out.data(), out.size(), rs) == errc::ok);
  CHECK(s->irecv(0, 41, in.data(), in.size(), rr) == errc::ok);
  REQUIRE(finishes(*s, rr));
  CHECK(rr.error() == errc::ok);
  CHECK(in == out);
  CHECK(std::all_of(stale.begin(), stale.end(), [](unsigned char c) { return c == 0xee; }));
  CHECK(s->wait(rs) == errc::ok);
  // The same with an any-source receive, a masked tag and a 1 MiB
  // (rendezvous) message.
  std::vector<unsigned char> big_stale(1 << 20, 0xee);
  r = std::make_unique<request>();
  CHECK(s->irecv(any_source, 0x400, big_stale.data(), big_stale.size(), *r, 0xf00) == errc::ok);
  r.reset();
  reused = reuse_freed_requests();
  const auto big = pattern(1 << 20, 10);
  std::vector<unsigned char> big_in(big.size());
  CHECK(s->isend(0, 0x4ab, big.data(), big.size(), rs) == errc::ok);
  CHECK(s->irecv(0, 0x4ab, big_in.data(), big_in.size(), rr) == errc::ok);
  REQUIRE(finishes(*s, rr));
  CHECK(rr.error() == errc::ok);
  CHECK(big_in == big);
  CHECK(std::all_of(big_stale.begin(), big_stale.end(), [](unsigned char c) { return c == 0xee; }));
  CHECK(s->wait(rs) == errc::ok);
}

TEST_CASE("self: a destroyed pending rendezvous send is withdrawn; the next message on its tag arrives instead") {
  auto s = make();
  std::vector<char> big(1 << 20, 'x');
  auto r = std::make_unique<request>();
  int calls = 0;
  r->on_complete([](request&, void* arg) { ++*static_cast<int*>(arg); }, &calls);
  CHECK(s->isend(0, 42, big.data(), big.size(), *r) == errc::ok);
  r.reset();  // the receiver never matched it
  auto reused = reuse_freed_requests();
  std::fill(big.begin(), big.end(), 'y');  // the buffer is the application's again
  int v = 17, got = 0;
  request rs, rr;
  CHECK(s->isend(0, 42, &v, sizeof v, rs) == errc::ok);
  CHECK(s->irecv(0, 42, &got, sizeof got, rr) == errc::ok);
  REQUIRE(finishes(*s, rr));
  CHECK(rr.error() == errc::ok);
  CHECK(rr.status().length == sizeof v);
  CHECK(got == 17);
  CHECK(s->wait(rs) == errc::ok);
  recv_status st;
  CHECK_FALSE(s->iprobe(0, 42, st));
  CHECK(calls == 0);  // a destroyed request's callback never runs
}

TEST_CASE("self: a destroyed receive matched to a rendezvous takes its bytes before the destructor returns") {
  auto s = make();
  const auto out = pattern(1 << 20, 11);
  auto in = std::make_unique<std::vector<unsigned char>>(out.size());
  request rs;
  auto r = std::make_unique<request>();
  CHECK(s->isend(0, 43, out.data(), out.size(), rs) == errc::ok);
  CHECK(s->probe(0, 43).length == out.size());  // here: the receive matches it at once
  CHECK(s->irecv(0, 43, in->data(), in->size(), *r) == errc::ok);
  r.reset();
  CHECK(*in == out);
  in.reset();  // the buffer may go now: nothing writes to it any more
  CHECK(s->wait(rs) == errc::ok);
  int v = 5, got = 0;
  request rs2, rr;
  CHECK(s->isend(0, 43, &v, sizeof v, rs2) == errc::ok);
  CHECK(s->irecv(0, 43, &got, sizeof got, rr) == errc::ok);
  REQUIRE(finishes(*s, rr));
  CHECK(got == 5);
  s->wait(rs2);
}
