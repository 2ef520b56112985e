// Flow control (see "Credits" in core/protocol/wire.hpp): what a peer can
// make this process hold, and what this process holds back for a peer.
//
// Send side (gate lock held): a message whose first entry the peer's credit
// does not cover waits on the gate's `held` queue, unnumbered, and is
// admitted in queue order as credit comes back; the peer may ask for a held
// message a receive of its waits for (a want), which goes out as an offer.
// Receive side (matching lock held): charging what a peer's chunks cost,
// releasing it as receives take what was held, granting credit back, and
// the wants of receives posted while half the peer's window is held here.
#include <malloc.h>

#include <algorithm>

#include "core/common/log.hpp"
#include "core/session_impl.hpp"

namespace nmad {
namespace {

bool matches(const gate::want& w, std::uint64_t tag) { return ((tag ^ w.tag) & w.mask) == 0; }

// The first of the held messages offered and not answered yet (nothing
// behind it in queue order is admitted meanwhile).
std::uint64_t offer_barrier(const gate& g) {
  std::uint64_t b = ~std::uint64_t{0};
  for (const chunk_entry* e : g.offered) b = std::min(b, e->queue_order);
  return b;
}

// More wants than this from one peer is not a receiver posting receives.
constexpr std::size_t kMaxWants = std::size_t{1} << 22;

}  // namespace

// ---- send side --------------------------------------------------------------

bool session_impl::take_credit(gate& g, chunk_entry& e) {
  if (!g.flow_control) return true;
  const bool opens = (e.flags & chunk_flag::opens) != 0;
  const std::uint64_t own = opens ? wire::own_credit(e.kind, e.msg_len) : 0;
  const std::uint64_t left = g.tx_limit - g.tx_spent;
  if (e.kind == chunk_kind::data) {
    if (e.len + own <= left) {
      g.tx_spent += e.len + own;
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
    g.tx_spent += rdv_own;
    return true;
  }
  if (e.kind != chunk_kind::rdv_req) return true;
  if (own > left) return false;
  g.tx_spent += own;
  return true;
}

void session_impl::hold(gate& g, chunk_entry& e) {
  g.held.push_back(e);
  if (&e == e.req->opening) {
    g.held_by_tag[e.tag].push_back(&e);
    if (!g.wants.empty()) serve_wants(g, &e);
  } else {
    ++g.held_pieces;
  }
}

void session_impl::unhold(gate& g, chunk_entry& e) {
  g.held.erase(g.held.iterator_to(e));
  if (&e != e.req->opening) {
    --g.held_pieces;
    return;
  }
  auto it = g.held_by_tag.find(e.tag);
  if (it == g.held_by_tag.end()) return;
  std::deque<chunk_entry*>& q = it->second;
  if (!q.empty() && q.front() == &e) q.pop_front();  // the usual case: the oldest of its tag
  else q.erase(std::find(q.begin(), q.end(), &e));
  if (q.empty()) g.held_by_tag.erase(it);
}

// Back to its place in queue order (an offer declined).
void session_impl::rehold(gate& g, chunk_entry& e) {
  auto it = g.held.begin();
  while (it != g.held.end() && it->queue_order < e.queue_order) ++it;
  g.held.insert(it, e);
  std::deque<chunk_entry*>& q = g.held_by_tag[e.tag];
  auto qi = q.begin();
  while (qi != q.end() && (*qi)->queue_order < e.queue_order) ++qi;
  q.insert(qi, &e);
}

// Admits, in queue order, what the credit covers now: first entries until
// the first that does not fit (no message overtakes an earlier one), and
// the later pieces of every message already admitted. Nothing behind an
// offer still unanswered: if declined it goes back to its place.
void session_impl::admit_held(gate& g) {
  if (g.held.empty()) return;
  const std::uint64_t barrier = offer_barrier(g);
  bool blocked = false;
  for (auto it = g.held.begin(); it != g.held.end();) {
    chunk_entry& e = *it;
    request_state& r = *e.req;
    if (&e == r.opening) {
      if (blocked || e.queue_order > barrier || !take_credit(g, e)) {
        blocked = true;
        if (g.held_pieces == 0) return;  // only first entries behind: none can go
        ++it;
        continue;
      }
    } else if (r.seq_pending || r.offer_pending) {
      ++it;
      continue;
    } else {
      take_credit(g, e);  // a later piece always goes (eager, or as a free rendezvous piece)
    }
    ++it;
    unhold(g, e);
    admit_entry(g, r, e);
  }
}

// The first held message a want matches (queue order), or null.
chunk_entry* session_impl::first_held_match(gate& g, const gate::want& w) {
  if (w.mask == ~std::uint64_t{0}) {
    auto it = g.held_by_tag.find(w.tag);
    return it == g.held_by_tag.end() || it->second.empty() ? nullptr : it->second.front();
  }
  for (chunk_entry& e : g.held)
    if (&e == e.req->opening && matches(w, e.tag)) return &e;
  return nullptr;
}

// Serves the peer's wants in the order it posted the receives (stamps):
// each with the first held message it matches, unless an offered message
// it matches comes before that one (its answer decides: declined, it is
// this want's). `fresh`: only that newly held message is new since the
// last call (an unserved want matched nothing held before it).
void session_impl::serve_wants(gate& g, chunk_entry* fresh) {
  for (std::size_t i = 0; i < g.wants.size();) {
    gate::want& w = g.wants[i];
    if (w.offered) {
      ++i;
      continue;
    }
    chunk_entry* first = fresh ? (matches(w, fresh->tag) ? fresh : nullptr) : first_held_match(g, w);
    bool waits = first == nullptr;
    for (const chunk_entry* o : g.offered)
      if (!waits && matches(w, o->tag) && o->queue_order < first->queue_order) waits = true;
    if (!waits && w.probe && first->queue_order > offer_barrier(g)) waits = true;
    if (waits) {
      ++i;
      continue;
    }
    if (w.probe) {
      release_through(g, *first);
      g.wants.erase(g.wants.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      offer(g, *first, w);
      ++i;
    }
    if (fresh) return;  // it is taken
  }
}

// A held message goes out for a want: numbered now, as an uncharged
// rendezvous request naming the receive (it never becomes an unexpected
// message: the receiver declines it unless that receive takes it).
void session_impl::offer(gate& g, chunk_entry& e, gate::want& w) {
  request_state& r = *e.req;
  unhold(g, e);
  w.offered = true;
  e.held_kind = e.kind;
  e.kind = chunk_kind::rdv_req;
  e.flags = static_cast<std::uint8_t>((e.flags & ~chunk_flag::opens) | chunk_flag::offer);
  e.awaiting_ack = e.len == 0;  // an empty one is done once matched (its empty rtr)
  r.first_piece.seq = next_send_seq(g, r.first_piece.tag);
  r.seq_pending = false;
  r.offer_pending = true;
  e.seq = r.first_piece.seq;
  e.cookie = g.next_cookie++;
  e.cookie2 = w.stamp;
  e.rdv_left = e.len;
  g.rdv_out[e.cookie] = &e;
  g.rdv_requests.add();
  g.offered.push_back(&e);
  e.queued_round = _rounds.load(std::memory_order_relaxed);
  g.collect.push_back(e);
  g.strat->on_submit(g.collect, e);
}

// A probe must see the first held message it matches, and the messages
// queued before that one may not be overtaken: all of them go now, in
// order, those the credit does not cover as uncharged rendezvous requests
// (the receiver then holds more than its window, by these).
void session_impl::release_through(gate& g, chunk_entry& last) {
  for (auto it = g.held.begin(); it != g.held.end();) {
    chunk_entry& e = *it;
    ++it;
    request_state& r = *e.req;
    const bool opening = &e == r.opening;
    if (!opening && (r.seq_pending || r.offer_pending)) continue;
    if (!take_credit(g, e)) {
      e.kind = chunk_kind::rdv_req;
      e.flags = static_cast<std::uint8_t>(e.flags & ~chunk_flag::opens);
      e.awaiting_ack = e.len == 0;
    }
    unhold(g, e);
    admit_entry(g, r, e);
    if (&e == &last) return;
  }
}

bool session_impl::withdraw_held(gate& g, request_state& r) {
  if (r.finished() || !r.sealed || !r.seq_pending || r.offer_pending || !r.opening ||
      !r.opening->hook.is_linked())
    return false;
  // Unnumbered: every entry of it is still on `held`.
  for (auto it = g.held.begin(); it != g.held.end();) {
    chunk_entry& e = *it;
    ++it;
    if (e.req != &r) continue;
    unhold(g, e);
    r.pending_chunks--;
    if (e.pooled) g.entry_pool.put(&e);
  }
  r.opening = nullptr;
  r.error = errc::cancelled;
  r.error_message = "send withdrawn while it waited for credit (the receiver never saw it)";
  complete(r);
  admit_held(g);  // it may have been the one that did not fit
  return true;
}

void session_impl::handle_credit(gate& g, const wire::chunk_header& h) {
  {
    std::lock_guard gl(g.lock);
    if (h.offset > ~std::uint64_t{0} - wire::initial_credit) {
      protocol_violation(g, "credit beyond any window");
      return;
    }
    g.tx_limit = std::max(g.tx_limit, wire::initial_credit + h.offset);
    admit_held(g);
  }
  schedule(g);
}

void session_impl::handle_want(gate& g, const wire::chunk_header& h) {
  {
    std::lock_guard gl(g.lock);
    const std::uint64_t stamp = h.cookie2;
    auto it = std::find_if(g.wants.begin(), g.wants.end(), [&](const gate::want& w) { return w.stamp == stamp; });
    if (h.flags & chunk_flag::withdrawn) {
      if (it != g.wants.end()) g.wants.erase(it);  // (an offer out for it is declined by the receiver)
      return;
    }
    const bool probe = (h.flags & chunk_flag::probe) != 0;
    if (it != g.wants.end()) return;  // said again (the peer's window filled up again)
    if (probe)
      for (const gate::want& w : g.wants)
        if (w.probe && w.tag == h.tag && w.mask == h.cookie) return;
    if (g.wants.size() >= kMaxWants) {
      protocol_violation(g, "more than " + std::to_string(kMaxWants) + " receives waiting at once");
      return;
    }
    auto at = std::upper_bound(g.wants.begin(), g.wants.end(), stamp,
                               [](std::uint64_t s, const gate::want& w) { return s < w.stamp; });
    g.wants.insert(at, gate::want{stamp, h.tag, h.cookie, false, probe});
    serve_wants(g, nullptr);
  }
  schedule(g);
}

// An offer was taken by the receive it was made for: an ordinary
// rendezvous from now on. Its answer, or the receiver's first rtr for it
// (control chunks may overtake each other), says so. Gate lock held.
void session_impl::offer_taken(gate& g, chunk_entry& e) {
  std::erase(g.offered, &e);
  const std::uint64_t stamp = e.cookie2;
  std::erase_if(g.wants, [&](const gate::want& x) { return x.stamp == stamp; });
  e.flags = static_cast<std::uint8_t>(e.flags & ~chunk_flag::offer);
  e.cookie2 = 0;
  e.req->offer_pending = false;
  admit_held(g);  // its later pieces; and what waited behind it
  serve_wants(g, nullptr);
}

void session_impl::handle_offer_ack(gate& g, const wire::chunk_header& h) {
  {
    std::lock_guard gl(g.lock);
    auto it = g.rdv_out.find(h.cookie);
    const bool offered = it != g.rdv_out.end() && (it->second->flags & chunk_flag::offer);
    if (h.flags & chunk_flag::accepted) {
      // (Unknown or no longer an offer: its rtr came first and said it.)
      if (offered) offer_taken(g, *it->second);
    } else if (!offered) {
      protocol_violation(g, "offer declined that was never made (cookie " + std::to_string(h.cookie) + ")");
      return;
    } else {
      // Declined: unnumbered again, back in its place.
      chunk_entry& e = *it->second;
      request_state& r = *e.req;
      std::erase(g.offered, &e);
      const std::uint64_t stamp = e.cookie2;
      auto w = std::find_if(g.wants.begin(), g.wants.end(), [&](const gate::want& x) { return x.stamp == stamp; });
      if (w != g.wants.end()) {
        if (h.flags & chunk_flag::withdrawn) g.wants.erase(w);  // that receive waits no more
        else w->offered = false;
      }
      g.rdv_out.erase(it);
      e.kind = e.held_kind;
      e.flags = static_cast<std::uint8_t>((e.flags & ~chunk_flag::offer) | chunk_flag::opens);
      e.awaiting_ack = e.kind == chunk_kind::rdv_req && e.len == 0;  // an empty synchronous send
      e.cookie = e.cookie2 = 0;
      e.rdv_left = 0;
      r.seq_pending = true;
      r.offer_pending = false;
      rehold(g, e);
      if (r.cancel_requested) withdraw_held(g, r);  // a cancel asked meanwhile: never seen, withdrawn
      admit_held(g);
      serve_wants(g, nullptr);
    }
  }
  schedule(g);
}

// ---- receive side -----------------------------------------------------------

bool session_impl::charge(gate& g, std::uint64_t cost) {
  g.rx_charged += cost;
  _fc_held += cost;
  if (_fc_held > _fc_peak) _fc_peak = _fc_held;
  if (g.rx_charged > wire::initial_credit + g.rx_granted) {
    protocol_violation(g, "more than the credit granted (" + std::to_string(g.rx_charged) + " charged, " +
                              std::to_string(wire::initial_credit + g.rx_granted) + " allowed)");
    return false;
  }
  if (g.rx_granted == 0) grant_if_due(g);  // the window beyond the initial credit
  if (!g.rx_starved && g.rx_charged - g.rx_released >= g.rx_window / 2) starve(g);
  return true;
}

void session_impl::release(gate& g, std::uint64_t n) {
  g.rx_released += n;
  _fc_held -= n;
  grant_if_due(g);
  if (g.rx_starved && g.rx_charged - g.rx_released < g.rx_window / 4) {
    g.rx_starved = false;
    --_starved_gates;
    g.probe_wants.clear();
  }
  // Most of what was buffered is gone: give the memory back (trim_if_due,
  // when the thread leaves the engine). Again at each quarter of the way
  // down, so what is left after draining is under 1 MiB.
  constexpr std::uint64_t kTrimFrom = 1 << 20;
  if (_fc_peak >= kTrimFrom && _fc_held < _fc_peak / 4) {
    _fc_peak = _fc_held;
    _trim_due.store(true, std::memory_order_relaxed);
  }
}

// Announces credit in batches of a quarter window: no message per message,
// and a sender out of credit is never left waiting for a batch (it is out
// only once 3/4 of the window is held here unreleased, and the batch is due
// before that much is released).
void session_impl::grant_if_due(gate& g) {
  const std::uint64_t target = g.rx_window - wire::initial_credit + g.rx_released;
  if (target - g.rx_granted < g.rx_window / 4) return;
  g.rx_granted = target;
  {
    std::lock_guard gl(g.lock);
    chunk_entry* e = g.entry_pool.get();
    *e = chunk_entry{};
    e->pooled = true;
    e->kind = chunk_kind::credit;
    e->priority = 2;
    e->offset = target;
    e->msg_len = chunk_entry::unknown_length;
    g.collect.push_front(*e);
  }
  schedule(g);
}

void session_impl::trim_if_due() {
  if (!_trim_due.load(std::memory_order_relaxed) || !_trim_due.exchange(false)) return;
  malloc_trim(0);
}

// Half the window is held here: the peer may soon hold messages back.
// Every receive posted for it (or any source) says what it waits for.
void session_impl::starve(gate& g) {
  g.rx_starved = true;
  ++_starved_gates;
  _match.for_each_posted(g.rank, [&](request_state& r) { send_want(g, r.post_stamp, r.tag_filter, r.tag_mask, 0, &r); });
  _match.for_each_posted(any_source, [&](request_state& r) { send_want(g, r.post_stamp, r.tag_filter, r.tag_mask, 0, &r); });
}

void session_impl::send_want(gate& g, std::uint64_t stamp, tag_t tag, tag_t mask, std::uint8_t flags,
                             request_state* r) {
  if (g.failed.load(std::memory_order_acquire)) return;
  if (r) r->wanted = true;
  {
    std::lock_guard gl(g.lock);
    chunk_entry* e = g.entry_pool.get();
    *e = chunk_entry{};
    e->pooled = true;
    e->kind = chunk_kind::want;
    e->flags = flags;
    e->priority = 2;
    e->tag = tag;
    e->cookie = mask;
    e->cookie2 = stamp;
    e->msg_len = chunk_entry::unknown_length;
    g.collect.push_front(*e);
  }
  schedule(g);
}

void session_impl::want_posted(request_state& r) {
  if (r.source_filter != any_source) {
    gate& g = *_gates[r.source_filter];
    if (g.rx_starved) send_want(g, r.post_stamp, r.tag_filter, r.tag_mask, 0, &r);
    return;
  }
  for (auto& g : _gates)
    if (g->rx_starved) send_want(*g, r.post_stamp, r.tag_filter, r.tag_mask, 0, &r);
}

// r left the posted list (matched, cancelled): its wants are withdrawn
// (from every flow-controlled peer for an any-source receive; `except`
// knows already).
void session_impl::unwant(request_state& r, const gate* except) {
  r.wanted = false;
  auto withdraw = [&](gate& g) {
    if (&g != except && g.flow_control) send_want(g, r.post_stamp, 0, 0, chunk_flag::withdrawn, nullptr);
  };
  if (r.source_filter != any_source) withdraw(*_gates[r.source_filter]);
  else
    for (auto& g : _gates) withdraw(*g);
}

void session_impl::want_for_probe(int source, tag_t tag, tag_t mask) {
  auto ask = [&](gate& g) {
    if (!g.rx_starved) return;
    for (const auto& p : g.probe_wants)
      if (p.first == tag && p.second == mask) return;  // asked already, nothing matching came yet
    g.probe_wants.emplace_back(tag, mask);
    send_want(g, _match.take_stamp(), tag, mask, chunk_flag::probe, nullptr);
  };
  if (source != any_source) {
    if (source >= 0 && source < _size) ask(*_gates[source]);
    return;
  }
  for (auto& g : _gates) ask(*g);
}

// A message arrived that a probe's want may have released: that want is
// gone at the peer.
void session_impl::note_probe_answered(gate& g, tag_t tag) {
  std::erase_if(g.probe_wants, [tag](const auto& p) { return ((tag ^ p.first) & p.second) == 0; });
}

void session_impl::answer_offer(gate& g, std::uint64_t cookie, std::uint8_t flags) {
  {
    std::lock_guard gl(g.lock);
    chunk_entry* e = g.entry_pool.get();
    *e = chunk_entry{};
    e->pooled = true;
    e->kind = chunk_kind::offer_ack;
    e->flags = flags;
    e->priority = 2;
    e->cookie = cookie;
    e->msg_len = chunk_entry::unknown_length;
    g.collect.push_front(*e);
  }
  schedule(g);
}

}  // namespace nmad
