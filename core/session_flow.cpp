// Flow control (see "Credits" in core/protocol/wire.hpp): what a peer can
// make this process hold, and what this process holds back for a peer.
//
// Send side: the gate's send_side (core/collect/send_side.hpp) keeps the
// held messages, wants and offers; the session applies the peer's control
// chunks to it, completes what it withdraws and fails a gate that breaks
// the protocol.
// Receive side (matching lock held): charging what a peer's chunks cost,
// releasing it as receives take what was held, granting credit back, and
// the wants of receives posted while half the peer's window is held here.
#include <malloc.h>

#include <algorithm>

#include "core/common/log.hpp"
#include "core/session_impl.hpp"

namespace nmad {

// ---- send side (the gate's send_side, core/collect/send_side.hpp) -----------

bool session_impl::withdraw_held(gate& g, request_state& r) {
  if (!g.withdraw_held(r)) return false;
  complete(r);
  return true;
}

void session_impl::handle_credit(gate& g, const wire::chunk_header& h) {
  {
    std::lock_guard gl(g.lock);
    if (const auto v = g.on_credit(h.offset); v.found) {
      protocol_violation(g, v.why);
      return;
    }
  }
  schedule(g);
}

void session_impl::handle_want(gate& g, const wire::chunk_header& h) {
  {
    std::lock_guard gl(g.lock);
    const auto v = g.on_want(h.cookie2, h.tag, h.cookie, (h.flags & chunk_flag::probe) != 0,
                             (h.flags & chunk_flag::withdrawn) != 0);
    if (v.found) {
      protocol_violation(g, v.why);
      return;
    }
  }
  schedule(g);
}

void session_impl::handle_offer_ack(gate& g, const wire::chunk_header& h) {
  {
    std::lock_guard gl(g.lock);
    request_state* withdrawn = nullptr;
    const auto v = g.on_offer_answer(h.cookie, (h.flags & chunk_flag::accepted) != 0,
                                     (h.flags & chunk_flag::withdrawn) != 0, &withdrawn);
    if (v.found) {
      protocol_violation(g, v.why);
      return;
    }
    if (withdrawn) complete(*withdrawn);
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
