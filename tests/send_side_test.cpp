// The collect layer's send side (core/collect/send_side.hpp) on its own,
// without a session: numbering per ordering domain, credit charged once
// per message (queued or inline), messages held in queue order while the
// credit is short and admitted as it comes back, a data entry turned into
// a rendezvous request when only its own credit fits, wants served by
// offers (accepted, declined, cancelled meanwhile), withdrawal, and the
// protocol violations it reports.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <deque>
#include <memory>
#include <vector>

#include "core/collect/send_side.hpp"

using namespace nmad;

namespace {

// Records what reaches the strategy.
class recording_strategy final : public strategy {
 public:
  std::vector<chunk_entry*>* submitted;
  explicit recording_strategy(std::vector<chunk_entry*>* s) : submitted(s) {}
  std::string_view name() const override { return "recording"; }
  bool build_packet(collect_list&, packet_builder&) override { return false; }
  void on_submit(collect_list&, chunk_entry& e) override { submitted->push_back(&e); }
};

// One whole message (a single entry) of a send request.
struct message {
  request_state r;
  chunk_entry e;
  message(std::uint64_t tag, std::uint64_t len, chunk_kind kind = chunk_kind::data) {
    r.type = request_state::kind::send;
    r.done.store(false);
    r.sealed = true;
    r.seq_pending = true;  // numbered when admitted
    r.first_piece.tag = tag;
    e.kind = kind;
    e.tag = tag;
    e.len = len;
    e.msg_len = len;
  }
  bool queued_on(const collect_list& l) const {
    for (const chunk_entry& x : l)
      if (&x == &e) return true;
    return false;
  }
};

// Declared after the messages of a test (so destroyed before them: the
// lists unlink them).
struct side_fixture {
  std::vector<chunk_entry*> submitted;
  std::atomic<std::uint32_t> rounds{7};
  send_side s;
  explicit side_fixture(bool flow, std::uint64_t mask = ~std::uint64_t{0}) {
    s.flow_control = flow;
    if (!flow) s.tx_limit = ~std::uint64_t{0};
    s.ordering_mask = mask;
    s.rounds = &rounds;
    s.strat = std::make_unique<recording_strategy>(&submitted);
  }
  ~side_fixture() {
    s.collect.clear();
    s.held.clear();
  }
};

}  // namespace

TEST_CASE("numbers each message once, per ordering domain, and hands it to the strategy in order") {
  message a(0x101, 16), b(0x201, 16), c(0x102, 16);
  side_fixture f(false, 0xff);  // domains: the low byte of the tag
  f.s.queue_piece(a.r, a.e);
  f.s.queue_piece(b.r, b.e);
  f.s.queue_piece(c.r, c.e);
  // 0x101 and 0x201 share domain 1: 0 then 1; 0x102 is domain 2: 0.
  CHECK(a.e.seq == 0);
  CHECK(b.e.seq == 1);
  CHECK(c.e.seq == 0);
  CHECK(!a.r.seq_pending);
  CHECK((a.e.flags & chunk_flag::opens) != 0);
  CHECK(a.e.queued_round == 7);
  REQUIRE(f.submitted.size() == 3);
  CHECK(f.submitted[0] == &a.e);
  CHECK(f.submitted[2] == &c.e);
  CHECK(f.s.collect.size() == 3);
  // The small-message path takes its number from the same counter.
  CHECK(f.s.seq_counter(0x301) == 2);
}

TEST_CASE("credit: what it does not cover waits unnumbered, in queue order, and goes as credit comes back") {
  const std::uint64_t big = wire::initial_credit - wire::message_credit - 100;  // leaves 100
  message a(1, big), b(1, 200), c(1, 8);
  side_fixture f(true);
  f.s.queue_piece(a.r, a.e);
  CHECK(a.queued_on(f.s.collect));
  CHECK(f.s.tx_spent == big + wire::message_credit);
  // b's bytes do not fit, its own credit does not either: it waits.
  f.s.queue_piece(b.r, b.e);
  CHECK(b.queued_on(f.s.held));
  CHECK(b.r.seq_pending);
  // c would fit (8 B cost 64) but may not overtake b.
  f.s.queue_piece(c.r, c.e);
  CHECK(c.queued_on(f.s.held));
  CHECK(!f.s.inline_admits(0));  // nothing skips what is held
  // Credit back: both go, in order, numbered in order.
  CHECK(!f.s.on_credit(wire::initial_credit).found);
  CHECK(b.queued_on(f.s.collect));
  CHECK(c.queued_on(f.s.collect));
  CHECK(b.e.seq == 1);
  CHECK(c.e.seq == 2);
  CHECK(f.s.held.empty());
  CHECK(f.s.inline_admits(8));
  const std::uint64_t before = f.s.tx_spent;
  f.s.charge_inline(8);
  CHECK(f.s.tx_spent == before + send_side::inline_cost(8));
  CHECK(send_side::inline_cost(8) == wire::small_message_credit);
}

TEST_CASE("a data entry whose bytes do not fit but whose own credit does becomes a rendezvous request") {
  message a(5, 2 * wire::initial_credit);
  side_fixture f(true);
  f.s.queue_piece(a.r, a.e);
  CHECK(a.e.kind == chunk_kind::rdv_req);
  CHECK(a.queued_on(f.s.collect));
  CHECK(f.s.tx_spent == wire::message_credit);
  REQUIRE(f.s.rdv_out.count(a.e.cookie) == 1);
  CHECK(f.s.rdv_out[a.e.cookie] == &a.e);
  CHECK(a.e.rdv_left == a.e.len);
  CHECK(f.s.rdv_requests.get() == 1);
}

TEST_CASE("a want gets the held message it matches as an offer; declined, it goes back unnumbered") {
  message a(9, 1000), b(10, 1000);
  side_fixture f(true);
  f.s.tx_spent = f.s.tx_limit;  // no credit at all
  f.s.queue_piece(a.r, a.e);
  f.s.queue_piece(b.r, b.e);
  REQUIRE(a.queued_on(f.s.held));
  // The peer's receive for tag 10 waits: b is offered (a stays held).
  CHECK(!f.s.on_want(/*stamp*/ 4, /*tag*/ 10, ~std::uint64_t{0}, false, false).found);
  CHECK(b.queued_on(f.s.collect));
  CHECK(b.e.kind == chunk_kind::rdv_req);
  CHECK((b.e.flags & chunk_flag::offer) != 0);
  CHECK(b.e.cookie2 == 4);
  CHECK(b.r.offer_pending);
  CHECK(a.queued_on(f.s.held));
  // Declined while that receive still waits: offered to it again.
  f.s.collect.erase(f.s.collect.iterator_to(b.e));  // (the transfer layer sent it)
  const std::uint64_t first_cookie = b.e.cookie;
  request_state* withdrawn = nullptr;
  CHECK(!f.s.on_offer_answer(first_cookie, false, false, &withdrawn).found);
  CHECK(withdrawn == nullptr);
  CHECK(b.queued_on(f.s.collect));
  CHECK((b.e.flags & chunk_flag::offer) != 0);
  CHECK(b.e.cookie != first_cookie);
  // Declined by a receive that waits no more: back in its place, unnumbered.
  f.s.collect.erase(f.s.collect.iterator_to(b.e));
  CHECK(!f.s.on_offer_answer(b.e.cookie, false, true, &withdrawn).found);
  CHECK(withdrawn == nullptr);
  CHECK(b.queued_on(f.s.held));
  CHECK(b.e.kind == chunk_kind::data);
  CHECK(b.r.seq_pending);
  CHECK(!b.r.offer_pending);
  CHECK(f.s.held.front().tag == 9);  // queue order kept
  CHECK(f.s.offered.empty());
  CHECK(f.s.wants.empty());
  // A declined offer's cookie is unknown from then on.
  CHECK(f.s.on_offer_answer(first_cookie, false, false, &withdrawn).found);
}

TEST_CASE("an accepted offer is an ordinary rendezvous; a cancel asked while it was out withdraws it when declined") {
  message a(3, 500), b(3, 500);
  side_fixture f(true);
  f.s.tx_spent = f.s.tx_limit;
  f.s.queue_piece(a.r, a.e);
  f.s.queue_piece(b.r, b.e);
  CHECK(!f.s.on_want(1, 3, ~std::uint64_t{0}, false, false).found);
  REQUIRE((a.e.flags & chunk_flag::offer) != 0);
  request_state* withdrawn = nullptr;
  CHECK(!f.s.on_offer_answer(a.e.cookie, true, false, &withdrawn).found);
  CHECK((a.e.flags & chunk_flag::offer) == 0);
  CHECK(!a.r.offer_pending);
  CHECK(f.s.wants.empty());
  // A second want for the same tag: b goes out as an offer, then its
  // request asks to be cancelled; declined, it is withdrawn.
  CHECK(!f.s.on_want(2, 3, ~std::uint64_t{0}, false, false).found);
  REQUIRE((b.e.flags & chunk_flag::offer) != 0);
  f.s.collect.erase(f.s.collect.iterator_to(b.e));
  b.r.cancel_requested = true;
  b.r.pending_chunks = 1;
  CHECK(!f.s.on_offer_answer(b.e.cookie, false, true, &withdrawn).found);
  CHECK(withdrawn == &b.r);
  CHECK(b.r.error == errc::cancelled);
  CHECK(f.s.held.empty());
  CHECK(f.s.wants.empty());  // that receive waits no more
}

TEST_CASE("withdrawing a message that waits for credit; what the peer may not ask for") {
  message a(1, 100);
  side_fixture f(true);
  f.s.tx_spent = f.s.tx_limit;
  f.s.queue_piece(a.r, a.e);
  REQUIRE(a.queued_on(f.s.held));
  CHECK(f.s.withdraw_held(a.r));
  CHECK(a.r.error == errc::cancelled);
  CHECK(a.r.pending_chunks == 0);
  CHECK(f.s.held.empty());
  CHECK(f.s.held_by_tag.empty());
  CHECK(!f.s.withdraw_held(a.r));  // nothing of it is held any more
  // Credit beyond any window is refused, and changes nothing.
  const std::uint64_t limit = f.s.tx_limit;
  CHECK(f.s.on_credit(~std::uint64_t{0}).found);
  CHECK(f.s.tx_limit == limit);
  // A want said twice is one want; withdrawn, it is gone.
  CHECK(!f.s.on_want(8, 77, ~std::uint64_t{0}, false, false).found);
  CHECK(!f.s.on_want(8, 77, ~std::uint64_t{0}, false, false).found);
  CHECK(f.s.wants.size() == 1);
  CHECK(!f.s.on_want(8, 0, 0, false, true).found);
  CHECK(f.s.wants.empty());
}
