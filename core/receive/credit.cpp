// The receiver's flow control (see "Credits" in core/protocol/wire.hpp and
// receive_path.hpp), matching lock held: charging what a peer's chunks
// cost, releasing it as receives take what was kept, granting credit back,
// and the wants of receives posted while half the peer's window is held
// here. (The sender's side is the gate's send_side,
// core/collect/send_side.hpp.)
#include <malloc.h>

#include <algorithm>
#include <mutex>

#include "core/receive/receive_path.hpp"

namespace nmad {

bool receive_path::charge(gate& g, std::uint64_t cost) {
  g.rx_charged += cost;
  _fc_held += cost;
  if (_fc_held > _fc_peak) _fc_peak = _fc_held;
  if (g.rx_charged > wire::initial_credit + g.rx_granted) {
    _host.protocol_violation(g, "more than the credit granted (" + std::to_string(g.rx_charged) + " charged, " +
                                    std::to_string(wire::initial_credit + g.rx_granted) + " allowed)");
    return false;
  }
  if (g.rx_granted == 0) grant_if_due(g);  // the window beyond the initial credit
  if (!g.rx_starved && g.rx_charged - g.rx_released >= g.rx_window / 2) starve(g);
  return true;
}

void receive_path::release(gate& g, std::uint64_t n) {
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
void receive_path::grant_if_due(gate& g) {
  const std::uint64_t target = g.rx_window - wire::initial_credit + g.rx_released;
  if (target - g.rx_granted < g.rx_window / 4) return;
  g.rx_granted = target;
  {
    std::lock_guard gl(g.lock);
    chunk_entry& e = g.new_control(chunk_kind::credit);
    e.offset = target;
    g.queue_control(e);
  }
  _sched.schedule(g);
}

void receive_path::trim_if_due() {
  if (!_trim_due.load(std::memory_order_relaxed) || !_trim_due.exchange(false)) return;
  malloc_trim(0);
}

// Half the window is held here: the peer may soon hold messages back.
// Every receive posted for it (or any source) says what it waits for.
void receive_path::starve(gate& g) {
  g.rx_starved = true;
  ++_starved_gates;
  _match.for_each_posted(g.rank, [&](request_state& r) { send_want(g, r.post_stamp, r.tag_filter, r.tag_mask, 0, &r); });
  _match.for_each_posted(any_source, [&](request_state& r) { send_want(g, r.post_stamp, r.tag_filter, r.tag_mask, 0, &r); });
}

void receive_path::send_want(gate& g, std::uint64_t stamp, tag_t tag, tag_t mask, std::uint8_t flags,
                             request_state* r) {
  if (g.failed.load(std::memory_order_acquire)) return;
  if (r) r->wanted = true;
  {
    std::lock_guard gl(g.lock);
    chunk_entry& e = g.new_control(chunk_kind::want, flags);
    e.tag = tag;
    e.cookie = mask;
    e.cookie2 = stamp;
    g.queue_control(e);
  }
  _sched.schedule(g);
}

void receive_path::want_posted(request_state& r) {
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
void receive_path::unwant(request_state& r, const gate* except) {
  r.wanted = false;
  auto withdraw = [&](gate& g) {
    if (&g != except && g.flow_control) send_want(g, r.post_stamp, 0, 0, chunk_flag::withdrawn, nullptr);
  };
  if (r.source_filter != any_source) withdraw(*_gates[r.source_filter]);
  else
    for (auto& g : _gates) withdraw(*g);
}

void receive_path::want_for_probe(int source, tag_t tag, tag_t mask) {
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
void receive_path::note_probe_answered(gate& g, tag_t tag) {
  std::erase_if(g.probe_wants, [tag](const auto& p) { return ((tag ^ p.first) & p.second) == 0; });
}

void receive_path::answer_offer(gate& g, std::uint64_t cookie, std::uint8_t flags) {
  {
    std::lock_guard gl(g.lock);
    chunk_entry& e = g.new_control(chunk_kind::offer_ack, flags);
    e.cookie = cookie;
    g.queue_control(e);
  }
  _sched.schedule(g);
}

}  // namespace nmad
