// The transfer layer's NIC-driven scheduler (core/transfer/scheduler.hpp)
// on its own: one gate, tracks on a fake driver that records what it is
// given and answers as the test says. An idle track asks the strategy and
// posts; a full window waits for send_done; a driver that says retry keeps
// the packet for the next pass (and the host hears the gate must be
// scheduled again); one that refuses for good fails the gate; a strategy
// that holds chunks is overruled once every track is idle; negotiated bulk
// data goes before the collect list; the inline fast case takes sequence
// numbers and credit from the send side and yields to anything queued.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "core/strategy/builtin.hpp"
#include "core/transfer/scheduler.hpp"

using namespace nmad;

namespace {

class fake_driver final : public driver {
 public:
  driver_caps c;
  std::deque<post_result> answers;  // what the next posts answer (then posted)
  std::vector<void*> tokens;        // posted, in order
  std::vector<std::size_t> lengths;
  std::vector<bool> data_posts;
  std::vector<std::vector<std::byte>> inline_sends;  // bytes taken by send_inline
  post_result inline_answer = post_result::posted;
  fake_driver() {
    c.name = "fake";
    c.max_packet_size = 4096;
    c.max_iov = 8;
    c.gather_scatter = true;
  }
  void open(const driver_config&) override {}
  const driver_caps& caps() const override { return c; }
  std::string local_address() const override { return "fake"; }
  connection_id connect(int, std::string_view) override { return 0; }
  post_result answer(std::span<const iovec> iov, void* token, bool data) {
    if (!answers.empty()) {
      const post_result r = answers.front();
      answers.pop_front();
      if (r != post_result::posted) return r;
    }
    std::size_t n = 0;
    for (const iovec& v : iov) n += v.iov_len;
    tokens.push_back(token);
    lengths.push_back(n);
    data_posts.push_back(data);
    return post_result::posted;
  }
  post_result post_send_packet(connection_id, std::span<const iovec> iov, void* token) override {
    return answer(iov, token, false);
  }
  post_result post_send_data(connection_id, std::uint64_t, std::span<const iovec> iov, void* token) override {
    return answer(iov, token, true);
  }
  post_result post_recv_data(connection_id, std::uint64_t, std::span<const iovec>, void*) override {
    return post_result::posted;
  }
  post_result send_inline(connection_id, std::span<const iovec> iov) override {
    if (inline_answer != post_result::posted) return inline_answer;
    std::vector<std::byte> b;
    for (const iovec& v : iov)
      b.insert(b.end(), static_cast<const std::byte*>(v.iov_base), static_cast<const std::byte*>(v.iov_base) + v.iov_len);
    inline_sends.push_back(std::move(b));
    return post_result::posted;
  }
  std::string failure_reason(connection_id) const override { return broken; }
  int poll() override { return 0; }
  void close_connection(connection_id) override {}
  std::string broken;
};

struct test_host final : scheduler::host {
  int busy = 0, posts = 0;
  std::vector<std::string> refused;
  std::vector<chunk_entry*> sent;
  void driver_busy(gate&) override { ++busy; }
  void posted() override { ++posts; }
  void send_refused(gate& g, std::string reason) override {
    refused.push_back(reason);
    g.failed.store(true);
  }
  void entry_sent(gate&, chunk_entry& e) override { sent.push_back(&e); }
};

// A strategy that holds everything until told otherwise (the engine must
// overrule it once every track is idle).
class holding_strategy final : public strategy {
 public:
  std::unique_ptr<strategy> inner = make_strategy_default();
  bool hold = true;
  int asked = 0;
  std::string_view name() const override { return "holding"; }
  bool build_packet(collect_list& q, packet_builder& out) override {
    ++asked;
    return hold ? false : inner->build_packet(q, out);
  }
};

struct message {
  request_state r;
  chunk_entry e;
  std::vector<std::byte> bytes;
  message(std::uint64_t tag, std::size_t len) : bytes(len, std::byte{0x5a}) {
    r.type = request_state::kind::send;
    r.done.store(false);
    r.sealed = true;
    r.seq_pending = true;
    r.first_piece.tag = tag;
    e.tag = tag;
    e.len = e.msg_len = len;
    e.ptr = bytes.data();
  }
};

// Declared after the messages of a test (destroyed first: the lists unlink).
struct rig {
  std::atomic<std::uint32_t> rounds{1};
  test_host host;
  scheduler sched{host, rounds};
  driver_slot slot;
  fake_driver* drv;
  gate g;
  explicit rig(std::unique_ptr<strategy> strat = make_strategy_default(), std::uint32_t window = 2) {
    auto d = std::make_unique<fake_driver>();
    drv = d.get();
    slot.drv = std::move(d);
    slot.caps = drv->c;
    g.rounds = &rounds;
    g.tx_limit = ~std::uint64_t{0};
    g.strat = std::move(strat);
    g.tracks.resize(1);
    track& t = g.tracks[0];
    t.slot = &slot;
    t.conn = 0;
    t.caps = &slot.caps;
    t.window = window;
    t.connected.store(true);
  }
  ~rig() {
    // Wrappers still posted go back to the pool; entries leave the lists.
    for (track& t : g.tracks) {
      while (!t.in_flight.empty()) {
        packet_wrapper& pw = t.in_flight.front();
        t.in_flight.pop_front();
        scheduler::put_wrapper(&pw);
      }
      if (t.retry) scheduler::put_wrapper(t.retry);
    }
    g.collect.clear();
    g.held.clear();
  }
  void complete_first() {  // the driver finished its oldest post
    void* tok = drv->tokens.front();
    drv->tokens.erase(drv->tokens.begin());
    sched.send_done(static_cast<packet_wrapper*>(tok));
  }
};

}  // namespace

TEST_CASE("an idle track asks the strategy and posts until its window is full; send_done makes room") {
  message a(1, 100), b(2, 100), c(3, 100);
  rig k;
  k.g.queue_piece(a.r, a.e);
  k.g.queue_piece(b.r, b.e);
  k.g.queue_piece(c.r, c.e);
  k.sched.schedule(k.g);
  // The default strategy: one chunk per packet; window 2.
  CHECK(k.drv->tokens.size() == 2);
  CHECK(k.g.tracks[0].outstanding == 2);
  CHECK(k.g.collect.size() == 1);
  CHECK(k.host.posts == 2);
  k.complete_first();  // room again: c goes
  CHECK(k.host.sent.size() == 1);
  CHECK(k.host.sent[0] == &a.e);
  CHECK(k.drv->tokens.size() == 2);
  CHECK(k.g.collect.empty());
  CHECK(k.g.tracks[0].stats.packets.get() == 3);
}

TEST_CASE("a driver that says retry keeps the packet on the track, posted first on the next pass") {
  message a(1, 64), b(2, 64);
  rig k;
  k.drv->answers = {post_result::retry};
  k.g.queue_piece(a.r, a.e);
  k.g.queue_piece(b.r, b.e);
  k.sched.schedule(k.g);
  CHECK(k.drv->tokens.empty());
  REQUIRE(k.g.tracks[0].retry != nullptr);
  CHECK(k.host.busy == 1);  // the gate is scheduled again later
  packet_wrapper* kept = k.g.tracks[0].retry;
  k.sched.schedule(k.g);
  REQUIRE(k.drv->tokens.size() == 2);
  CHECK(k.drv->tokens[0] == kept);  // the refused packet first
  CHECK(k.g.tracks[0].retry == nullptr);
}

TEST_CASE("a driver that refuses for good fails the gate with the connection's reason") {
  message a(1, 64);
  rig k;
  k.drv->answers = {post_result::failed};
  k.drv->broken = "peer process died";
  k.g.queue_piece(a.r, a.e);
  k.sched.schedule(k.g);
  REQUIRE(k.host.refused.size() == 1);
  CHECK(k.host.refused[0] == "peer process died");
  CHECK(k.g.failed.load());
  k.sched.schedule(k.g);  // a failed gate is not scheduled
  CHECK(k.drv->tokens.empty());
}

TEST_CASE("a strategy that holds chunks is overruled once every track is idle") {
  message a(1, 64), b(2, 64), c(3, 64);
  auto s = std::make_unique<holding_strategy>();
  holding_strategy* hs = s.get();
  rig k(std::move(s));
  k.g.queue_piece(a.r, a.e);
  k.g.queue_piece(b.r, b.e);
  k.g.queue_piece(c.r, c.e);
  k.sched.schedule(k.g);
  // Nothing was outstanding after the strategy's pass: the second pass
  // sends the oldest chunks anyway, as the window allows.
  CHECK(hs->asked >= 1);
  REQUIRE(k.drv->tokens.size() == 2);
  REQUIRE(k.g.collect.size() == 1);
  CHECK(&k.g.collect.front() == &c.e);
  // One completes: a packet is still out, so the strategy's hold stands.
  const int asked = hs->asked;
  k.complete_first();
  CHECK(hs->asked > asked);
  CHECK(k.drv->tokens.size() == 1);
  CHECK(k.g.collect.size() == 1);
  // The strategy lets it go.
  hs->hold = false;
  k.complete_first();
  CHECK(k.drv->tokens.size() == 1);
  CHECK(k.g.collect.empty());
}

TEST_CASE("negotiated bulk data goes before the collect list, on the track it was asked for") {
  message big(1, 3000), small(2, 16);
  rig k(make_strategy_default(), 1);
  big.e.kind = chunk_kind::rdv_req;  // (what the strategy path would have sent)
  k.g.queue_piece(small.r, small.e);
  k.g.data_out.push_back({&big.e, /*cookie*/ 77, /*offset*/ 0, /*len*/ 3000, /*rail*/ 0});
  big.e.wrappers = 1;
  k.sched.schedule(k.g);
  REQUIRE(k.drv->tokens.size() == 1);
  CHECK(k.drv->data_posts[0]);
  CHECK(k.drv->lengths[0] == 3000);
  CHECK(k.g.data_out.empty());
  CHECK(k.g.collect.size() == 1);  // the window (1) is full
  k.complete_first();
  REQUIRE(k.drv->tokens.size() == 1);
  CHECK_FALSE(k.drv->data_posts[1]);
  CHECK(k.g.collect.empty());
}

TEST_CASE("what the strategy is told about the track") {
  rig k;
  track& t = k.g.tracks[0];
  t.outstanding = 1;
  t.bytes_in_flight = 512;
  t.inline_round = 1;
  const track_view v = k.sched.view_of(t);
  CHECK(v.outstanding == 1);
  CHECK(v.bytes_in_flight == 512);
  CHECK(v.just_sent);  // an inline send in this very round
  CHECK(v.drv == k.drv);
  t.outstanding = 0;
  t.bytes_in_flight = 0;
}

TEST_CASE("the inline fast case: compact form with the send side's numbers and credit; anything queued goes first") {
  rig r(make_strategy_aggreg());
  r.slot.caps.max_inline = 64;
  track& t = r.g.tracks[0];
  t.max_inline = 64;
  const char hello[5] = {'h', 'e', 'l', 'l', 'o'};
  // Taken at once, in the compact form, numbered 0 then 1 on its tag.
  REQUIRE(r.sched.send_inline(r.g, 7, hello, sizeof hello));
  REQUIRE(r.drv->inline_sends.size() == 1);
  wire::short_header h{};
  REQUIRE(wire::is_short(r.drv->inline_sends[0], h));
  CHECK(h.tag == 7);
  CHECK(h.seq == 0);
  CHECK(r.drv->inline_sends[0].size() == sizeof h + sizeof hello);
  CHECK(std::memcmp(r.drv->inline_sends[0].data() + sizeof h, hello, sizeof hello) == 0);
  CHECK(t.stats.inline_sends.get() == 1);
  // The aggregating strategy refuses a second one in the same round (the
  // track is not quiet: it just sent); a new round allows it, numbered 1.
  CHECK_FALSE(r.sched.send_inline(r.g, 7, hello, sizeof hello));
  r.rounds.fetch_add(1);
  REQUIRE(r.sched.send_inline(r.g, 7, hello, sizeof hello));
  REQUIRE(wire::is_short(r.drv->inline_sends[1], h));
  CHECK(h.seq == 1);
  // Too long for the driver's inline size: refused (the general path).
  std::vector<char> big(64, 'x');
  r.rounds.fetch_add(1);
  CHECK_FALSE(r.sched.send_inline(r.g, 7, big.data(), big.size()));
  // Anything in the collect list keeps the order: refused.
  message m(9, 16);
  r.g.collect.push_back(m.e);
  CHECK_FALSE(r.sched.send_inline(r.g, 7, hello, sizeof hello));
  r.g.collect.clear();
  // Credit short: refused, the message waits on the general path.
  r.g.tx_limit = r.g.tx_spent;
  CHECK_FALSE(r.sched.send_inline(r.g, 7, hello, sizeof hello));
  r.g.tx_limit = ~std::uint64_t{0};
  // A driver that cannot take it now: refused, and the number is not used.
  r.drv->inline_answer = post_result::retry;
  CHECK_FALSE(r.sched.send_inline(r.g, 7, hello, sizeof hello));
  r.drv->inline_answer = post_result::posted;
  REQUIRE(r.sched.send_inline(r.g, 7, hello, sizeof hello));
  REQUIRE(wire::is_short(r.drv->inline_sends.back(), h));
  CHECK(h.seq == 2);
  CHECK(r.drv->inline_sends.size() == 3);
}
