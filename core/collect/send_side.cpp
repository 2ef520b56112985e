// The collect layer's part of a gate (see send_side.hpp): queueing,
// numbering, credit, held messages, wants and offers.
#include "core/collect/send_side.hpp"

#include <algorithm>

namespace nmad {
namespace {

bool matches(const send_side::want& w, std::uint64_t tag) { return ((tag ^ w.tag) & w.mask) == 0; }

// More wants than this from one peer is not a receiver posting receives.
constexpr std::size_t kMaxWants = std::size_t{1} << 22;

}  // namespace

// ---- queueing -----------------------------------------------------------------

void send_side::queue_piece(request_state& r, chunk_entry& e) {
  e.req = &r;
  if (!r.opened) {
    r.opened = true;
    r.opening = &e;
    e.flags |= chunk_flag::opens;
  }
  r.pending_chunks++;
  e.queue_order = next_queue_order++;
  if (flow_control) {
    const bool waits = &e == r.opening ? !held.empty() || !offered.empty() || !take_credit(e)
                                       : r.seq_pending || r.offer_pending || !take_credit(e);
    if (waits) {
      hold(e);
      return;
    }
  }
  admit_entry(r, e);
}

// Numbers an admitted entry (the message takes its sequence number with
// its first entry) and hands it to the strategy.
void send_side::admit_entry(request_state& r, chunk_entry& e) {
  if (&e == r.opening) {
    r.first_piece.seq = next_seq(r.first_piece.tag);
    r.seq_pending = false;
  }
  e.seq = r.first_piece.seq;
  if (e.kind == chunk_kind::rdv_req) {
    e.cookie = next_cookie++;
    rdv_requests.add();
    e.rdv_left = e.len;
    rdv_out[e.cookie] = &e;
    if (e.len > 0 && expose_pull && expose_pull(*this, e)) e.flags |= chunk_flag::pullable;
  }
  e.queued_round = round();
  collect.push_back(e);
  strat->on_submit(collect, e);
}

// ---- credit and held messages ---------------------------------------------------

bool send_side::take_credit(chunk_entry& e) {
  if (!flow_control) return true;
  const bool opens = (e.flags & chunk_flag::opens) != 0;
  const std::uint64_t own = opens ? wire::own_credit(e.kind, e.msg_len) : 0;
  const std::uint64_t left = tx_limit - tx_spent;
  if (e.kind == chunk_kind::data) {
    if (e.len + own <= left) {
      tx_spent += e.len + own;
      return true;
    }
    // (A small message would cost more as a rendezvous request.)
    if (e.len == 0 || (opens && wire::is_small_message(e.kind, e.msg_len))) return false;
    const std::uint64_t rdv_own = opens ? wire::message_credit : 0;
    if (rdv_own > left) return false;
    // The bytes do not fit, the message's own credit does: a rendezvous
    // request (its bytes wait in the sender's buffer until a receive asks).
    e.kind = chunk_kind::rdv_req;
    e.awaiting_ack = false;
    tx_spent += rdv_own;
    return true;
  }
  if (e.kind != chunk_kind::rdv_req) return true;
  if (own > left) return false;
  tx_spent += own;
  return true;
}

void send_side::hold(chunk_entry& e) {
  held.push_back(e);
  if (&e == e.req->opening) {
    held_by_tag[e.tag].push_back(&e);
    if (!wants.empty()) serve_wants(&e);
  } else {
    ++held_pieces;
  }
}

void send_side::unhold(chunk_entry& e) {
  held.erase(held.iterator_to(e));
  if (&e != e.req->opening) {
    --held_pieces;
    return;
  }
  auto it = held_by_tag.find(e.tag);
  if (it == held_by_tag.end()) return;
  std::deque<chunk_entry*>& q = it->second;
  if (!q.empty() && q.front() == &e) q.pop_front();  // the usual case: the oldest of its tag
  else q.erase(std::find(q.begin(), q.end(), &e));
  if (q.empty()) held_by_tag.erase(it);
}

// Back to its place in queue order (an offer declined).
void send_side::rehold(chunk_entry& e) {
  auto it = held.begin();
  while (it != held.end() && it->queue_order < e.queue_order) ++it;
  held.insert(it, e);
  std::deque<chunk_entry*>& q = held_by_tag[e.tag];
  auto qi = q.begin();
  while (qi != q.end() && (*qi)->queue_order < e.queue_order) ++qi;
  q.insert(qi, &e);
}

// The first of the held messages offered and not answered yet (nothing
// behind it in queue order is admitted meanwhile).
std::uint64_t send_side::offer_barrier() const {
  std::uint64_t b = ~std::uint64_t{0};
  for (const chunk_entry* e : offered) b = std::min(b, e->queue_order);
  return b;
}

// Admits, in queue order, what the credit covers now: first entries until
// the first that does not fit (no message overtakes an earlier one), and
// the later pieces of every message already admitted. Nothing behind an
// offer still unanswered: if declined it goes back to its place.
void send_side::admit_held() {
  if (held.empty()) return;
  const std::uint64_t barrier = offer_barrier();
  bool blocked = false;
  for (auto it = held.begin(); it != held.end();) {
    chunk_entry& e = *it;
    request_state& r = *e.req;
    if (&e == r.opening) {
      if (blocked || e.queue_order > barrier || !take_credit(e)) {
        blocked = true;
        if (held_pieces == 0) return;  // only first entries behind: none can go
        ++it;
        continue;
      }
    } else if (r.seq_pending || r.offer_pending) {
      ++it;
      continue;
    } else {
      take_credit(e);  // a later piece always goes (eager, or as a free rendezvous piece)
    }
    ++it;
    unhold(e);
    admit_entry(r, e);
  }
}

bool send_side::withdraw_held(request_state& r) {
  if (r.finished() || !r.sealed || !r.seq_pending || r.offer_pending || !r.opening ||
      !r.opening->hook.is_linked())
    return false;
  // Unnumbered: every entry of it is still on `held`.
  for (auto it = held.begin(); it != held.end();) {
    chunk_entry& e = *it;
    ++it;
    if (e.req != &r) continue;
    unhold(e);
    r.pending_chunks--;
    if (e.pooled) entry_pool.put(&e);
  }
  r.opening = nullptr;
  r.error = errc::cancelled;
  r.error_message = "send withdrawn while it waited for credit (the receiver never saw it)";
  admit_held();  // it may have been the one that did not fit
  return true;
}

// ---- wants and offers -------------------------------------------------------------

// The first held message a want matches (queue order), or null.
chunk_entry* send_side::first_held_match(const want& w) {
  if (w.mask == ~std::uint64_t{0}) {
    auto it = held_by_tag.find(w.tag);
    return it == held_by_tag.end() || it->second.empty() ? nullptr : it->second.front();
  }
  for (chunk_entry& e : held)
    if (&e == e.req->opening && matches(w, e.tag)) return &e;
  return nullptr;
}

// Serves the peer's wants in the order it posted the receives (stamps):
// each with the first held message it matches, unless an offered message
// it matches comes before that one (its answer decides: declined, it is
// this want's). `fresh`: only that newly held message is new since the
// last call (an unserved want matched nothing held before it).
void send_side::serve_wants(chunk_entry* fresh) {
  for (std::size_t i = 0; i < wants.size();) {
    want& w = wants[i];
    if (w.offered) {
      ++i;
      continue;
    }
    chunk_entry* first = fresh ? (matches(w, fresh->tag) ? fresh : nullptr) : first_held_match(w);
    bool waits = first == nullptr;
    for (const chunk_entry* o : offered)
      if (!waits && matches(w, o->tag) && o->queue_order < first->queue_order) waits = true;
    if (!waits && w.probe && first->queue_order > offer_barrier()) waits = true;
    if (waits) {
      ++i;
      continue;
    }
    if (w.probe) {
      release_through(*first);
      wants.erase(wants.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      offer(*first, w);
      ++i;
    }
    if (fresh) return;  // it is taken
  }
}

// A held message goes out for a want: numbered now, as an uncharged
// rendezvous request naming the receive (it never becomes an unexpected
// message: the receiver declines it unless that receive takes it).
void send_side::offer(chunk_entry& e, want& w) {
  request_state& r = *e.req;
  unhold(e);
  w.offered = true;
  e.held_kind = e.kind;
  e.kind = chunk_kind::rdv_req;
  e.flags = static_cast<std::uint8_t>((e.flags & ~chunk_flag::opens) | chunk_flag::offer);
  e.awaiting_ack = e.len == 0;  // an empty one is done once matched (its empty rtr)
  r.first_piece.seq = next_seq(r.first_piece.tag);
  r.seq_pending = false;
  r.offer_pending = true;
  e.seq = r.first_piece.seq;
  e.cookie = next_cookie++;
  e.cookie2 = w.stamp;
  e.rdv_left = e.len;
  rdv_out[e.cookie] = &e;
  rdv_requests.add();
  offered.push_back(&e);
  e.queued_round = round();
  collect.push_back(e);
  strat->on_submit(collect, e);
}

// A probe must see the first held message it matches, and the messages
// queued before that one may not be overtaken: all of them go now, in
// order, those the credit does not cover as uncharged rendezvous requests
// (the receiver then holds more than its window, by these).
void send_side::release_through(chunk_entry& last) {
  for (auto it = held.begin(); it != held.end();) {
    chunk_entry& e = *it;
    ++it;
    request_state& r = *e.req;
    const bool opening = &e == r.opening;
    if (!opening && (r.seq_pending || r.offer_pending)) continue;
    if (!take_credit(e)) {
      e.kind = chunk_kind::rdv_req;
      e.flags = static_cast<std::uint8_t>(e.flags & ~chunk_flag::opens);
      e.awaiting_ack = e.len == 0;
    }
    unhold(e);
    admit_entry(r, e);
    if (&e == &last) return;
  }
}

// ---- the peer's control chunks ------------------------------------------------------

send_side::violation send_side::on_credit(std::uint64_t granted) {
  if (granted > ~std::uint64_t{0} - wire::initial_credit) return {true, "credit beyond any window"};
  tx_limit = std::max(tx_limit, wire::initial_credit + granted);
  admit_held();
  return {};
}

send_side::violation send_side::on_want(std::uint64_t stamp, std::uint64_t tag, std::uint64_t mask, bool probe,
                                        bool withdrawn) {
  auto it = std::find_if(wants.begin(), wants.end(), [&](const want& w) { return w.stamp == stamp; });
  if (withdrawn) {
    if (it != wants.end()) wants.erase(it);  // (an offer out for it is declined by the receiver)
    return {};
  }
  if (it != wants.end()) return {};  // said again (the peer's window filled up again)
  if (probe)
    for (const want& w : wants)
      if (w.probe && w.tag == tag && w.mask == mask) return {};
  if (wants.size() >= kMaxWants)
    return {true, "more than " + std::to_string(kMaxWants) + " receives waiting at once"};
  auto at = std::upper_bound(wants.begin(), wants.end(), stamp,
                             [](std::uint64_t s, const want& w) { return s < w.stamp; });
  wants.insert(at, want{stamp, tag, mask, false, probe});
  serve_wants(nullptr);
  return {};
}

void send_side::on_offer_taken(chunk_entry& e) {
  std::erase(offered, &e);
  const std::uint64_t stamp = e.cookie2;
  std::erase_if(wants, [&](const want& x) { return x.stamp == stamp; });
  e.flags = static_cast<std::uint8_t>(e.flags & ~chunk_flag::offer);
  e.cookie2 = 0;
  e.req->offer_pending = false;
  admit_held();  // its later pieces; and what waited behind it
  serve_wants(nullptr);
}

send_side::violation send_side::on_offer_answer(std::uint64_t cookie, bool accepted, bool receive_gone,
                                                request_state** withdrawn) {
  *withdrawn = nullptr;
  auto it = rdv_out.find(cookie);
  const bool is_offer = it != rdv_out.end() && (it->second->flags & chunk_flag::offer);
  if (accepted) {
    // (Unknown or no longer an offer: its rtr came first and said it.)
    if (is_offer) on_offer_taken(*it->second);
    return {};
  }
  if (!is_offer) return {true, "offer declined that was never made (cookie " + std::to_string(cookie) + ")"};
  // Declined: unnumbered again, back in its place.
  chunk_entry& e = *it->second;
  request_state& r = *e.req;
  std::erase(offered, &e);
  const std::uint64_t stamp = e.cookie2;
  auto w = std::find_if(wants.begin(), wants.end(), [&](const want& x) { return x.stamp == stamp; });
  if (w != wants.end()) {
    if (receive_gone) wants.erase(w);  // that receive waits no more
    else w->offered = false;
  }
  rdv_out.erase(it);
  e.kind = e.held_kind;
  e.flags = static_cast<std::uint8_t>((e.flags & ~chunk_flag::offer) | chunk_flag::opens);
  e.awaiting_ack = e.kind == chunk_kind::rdv_req && e.len == 0;  // an empty synchronous send
  e.cookie = e.cookie2 = 0;
  e.rdv_left = 0;
  r.seq_pending = true;
  r.offer_pending = false;
  rehold(e);
  if (r.cancel_requested && withdraw_held(r)) *withdrawn = &r;  // a cancel asked meanwhile: never seen
  admit_held();
  serve_wants(nullptr);
  return {};
}

}  // namespace nmad
