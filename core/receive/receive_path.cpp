// The receive path (see receive_path.hpp): arrival, in-order matching per
// ordering domain, unexpected messages, placement into receive segments.
// The functions called per packet and per chunk live in this file, so the
// compiler sees them together.
#include "core/receive/receive_path.hpp"

#include <algorithm>
#include <cstring>
#include <mutex>

#include "core/common/events.hpp"
#include "core/common/small_copy.hpp"
#include "api/nmad/services/trace.hpp"

namespace nmad {
namespace {
// Serial-number comparison (sequence numbers wrap around).
bool seq_before(std::uint32_t a, std::uint32_t b) { return static_cast<std::int32_t>(a - b) < 0; }
}  // namespace

receive_path::receive_path(host& h, scheduler& sched, std::vector<std::unique_ptr<gate>>& gates, bool threaded)
    : _host(h), _sched(sched), _gates(gates), _lock(threaded), _threaded(threaded) {}

receive_path::~receive_path() { free_messages(); }

void receive_path::set_up(int rank, int size, tag_t ordering_mask) {
  _rank = rank;
  _size = size;
  _ordering_mask = ordering_mask;
  _match.resize(size);
}

void receive_path::enable_threads() {
  _threaded = true;
  _lock.enable(true);
}

void receive_path::free_messages() {
  _match.free_unexpected();
  while (!_detached.empty()) {
    unexpected_message& u = _detached.front();
    _detached.pop_front();
    unexpected_message::destroy(&u);
  }
}

// ---- arrival ---------------------------------------------------------------

// From poll (the driver's lock held): the whole packet under the matching lock.
void receive_path::packet_arrived(gate& g, std::span<const std::byte> bytes) {
  count(_packets_received);
  std::lock_guard ml(_lock);
  wire::short_header sh;
  if (wire::is_short(bytes, sh)) {
    if (trace::enabled()) trace::emit(trace::event::packet_arrive, g.rank, 0, sh.tag, sh.seq, bytes.size(), 1);
    handle_short(g, sh, bytes.subspan(sizeof sh));
    return;
  }
  wire::packet_reader reader(bytes);
  std::string error;
  if (!reader.begin(error)) {
    _host.protocol_violation(g, error);
    return;
  }
  if (trace::enabled()) trace::emit(trace::event::packet_arrive, g.rank, 0, 0, 0, bytes.size(), 0);
  wire::chunk_view cv;
  while (reader.next(cv, error)) {
    const wire::chunk_header& h = cv.header;
    if (trace::enabled()) trace::emit(trace::event::chunk_arrive, g.rank, 0, h.tag, h.seq, h.len, h.offset << 8 | h.kind);
    if (g.flow_control) {
      const std::uint64_t cost = wire::chunk_credit(static_cast<chunk_kind>(h.kind), h.payload, h.flags, h.msg_len);
      if (cost && !charge(g, cost)) return;
    }
    handle_chunk(g, h, cv.payload);
    if (g.failed.load(std::memory_order_relaxed)) return;
  }
  if (!error.empty()) _host.protocol_violation(g, error);
}

// A whole small message in the compact form. In the common case (next in
// its ordering domain, a posted receive of one segment matches) it is
// decoded and placed in place, without message state; anything else goes
// through the general chunk path as the equivalent data chunk.
void receive_path::handle_short(gate& g, const wire::short_header& sh, std::span<const std::byte> payload) {
  const std::uint64_t cost = payload.size() + wire::own_credit(chunk_kind::data, payload.size());  // chunk_credit of a whole message (it opens it)
  if (g.flow_control && !charge(g, cost)) return;
  std::uint32_t& expected = g.recv_seq.get(sh.tag & _ordering_mask);
  if (sh.seq == expected) {
    request_state* r = _match.first_posted(g.rank, sh.tag);
    if (r && r->recv_sealed && r->segments.size() == 1) {
      expected++;
      if (g.flow_control) release(g, cost);  // nothing of it stays buffered
      _match.unpost(*r);
      if (r->wanted) unwant(*r, nullptr);
      r->matched = true;
      message_state& m = r->msg;
      m.req = r;
      m.source = g.rank;
      m.tag = sh.tag;
      m.seq = sh.seq;
      m.total = m.accounted = m.arrived = payload.size();
      segment& s = r->segments[0];
      const std::size_t n = std::min<std::uint64_t>(payload.size(), s.len);
      copy_small(s.ptr, payload.data(), n);
      s.received = n;
      if (n < payload.size()) {
        m.truncated = true;
        finish_recv_if_done(*r);  // names the truncation
      } else {
        _host.complete(*r);
      }
      if (!g.early.empty()) drain_early(g);
      return;
    }
  }
  wire::chunk_header h{};
  h.kind = static_cast<std::uint8_t>(chunk_kind::data);
  h.flags = chunk_flag::last | chunk_flag::opens;  // (charged as a whole message above)
  h.payload = static_cast<std::uint32_t>(payload.size());
  h.tag = sh.tag;
  h.seq = sh.seq;
  h.len = payload.size();
  h.msg_len = payload.size();
  handle_chunk(g, h, payload);
}

void receive_path::handle_chunk(gate& g, const wire::chunk_header& h, std::span<const std::byte> payload) {
  switch (static_cast<chunk_kind>(h.kind)) {
    case chunk_kind::rtr:
    case chunk_kind::cancel_ack:
    case chunk_kind::credit:
    case chunk_kind::want:
    case chunk_kind::offer_ack:
      _host.send_side_chunk(g, h);  // answers to what this process sent
      return;
    case chunk_kind::cancel_req:
      handle_cancel_req(g, h);
      return;
    case chunk_kind::failure_notice:
      if (h.tag >= static_cast<std::uint64_t>(_size) || static_cast<int>(h.tag) == g.rank ||
          static_cast<int>(h.tag) == _rank) {
        _host.protocol_violation(g, "failure notice names rank " + std::to_string(h.tag));
        return;
      }
      g.cause_reported.store(static_cast<int>(h.tag), std::memory_order_release);
      return;
    case chunk_kind::data:
    case chunk_kind::rdv_req:
      break;
  }
  bool created = false;
  message_state* m = find_message(g, h, payload, created);
  if (!m) {  // parked (early), the gate failed, or an offer declined
    if (created) drain_early(g);
    return;
  }
  // The message's total length: announced, or implied by its last piece.
  std::uint64_t total = message_state::unknown;
  if (h.msg_len != chunk_entry::unknown_length) total = h.msg_len;
  if (h.flags & chunk_flag::last) {
    if (total != message_state::unknown && total != h.offset + h.len) {
      _host.protocol_violation(g, "last chunk does not end at the message length");
      return;
    }
    total = h.offset + h.len;
  }
  if (total != message_state::unknown) {
    if (m->total != message_state::unknown && m->total != total) {
      _host.protocol_violation(g, "inconsistent message length");
      return;
    }
    m->total = total;
  }
  if (m->total != message_state::unknown && h.offset + h.len > m->total) {
    _host.protocol_violation(g, "chunk beyond the end of its message");
    return;
  }
  m->arrived += h.len;
  if (m->total != message_state::unknown && m->arrived > m->total) {
    _host.protocol_violation(g, "more bytes than the message holds");
    return;
  }
  request_state* r = m->req;
  // The message's own credit: returned once a receive holds it.
  if (g.flow_control && (h.flags & chunk_flag::opens)) {
    const std::uint64_t own = wire::own_credit(static_cast<chunk_kind>(h.kind), h.msg_len);
    if (r) release(g, own);
    else m->held_credit = static_cast<std::uint32_t>(own);
  }
  if (static_cast<chunk_kind>(h.kind) == chunk_kind::data) {
    if (r) {
      place(*r, h.offset, payload);
    } else {
      m->buffered.push_back({h.offset, kept_bytes(payload)});
      m->accounted += payload.size();
    }
  } else {
    pending_rdv p{h.cookie, h.offset, h.len};
    if (h.flags & chunk_flag::pullable) {
      p.pullable = true;
      p.pull_base = h.cookie2 - h.offset;  // wraps modulo 2^64, like the address arithmetic
      p.pull_key = h.rail;
    }
    m->rdvs.push_back(p);
    if (r) ask_rdvs(g, *r);
  }
  note_arrivals(g, *m);
  if (r) finish_recv_if_done(*r);
  if (created) drain_early(g);
}

message_state* receive_path::find_message(gate& g, const wire::chunk_header& h,
                                          std::span<const std::byte> payload, bool& created) {
  auto it = g.active.find({h.tag, h.seq});
  if (it != g.active.end()) return it->second;
  std::uint32_t& expected = g.recv_seq.get(h.tag & _ordering_mask);
  if (h.seq == expected) {
    expected++;
    created = true;
    return new_message(g, h, payload);
  }
  if (seq_before(expected, h.seq)) {
    // A later message of this domain overtook an earlier one (another
    // rail, a higher priority): keep the chunk until the earlier ones
    // arrived. Every earlier one is already on its way (a sequence number
    // is taken when its first piece is queued), and the eager bytes kept
    // here were charged to the peer's credit (packet_arrived), so this
    // store is bounded by the window; chunks without payload are
    // rendezvous requests, bounded by the sender's own requests.
    g.early.push_back({h, std::vector<std::byte>(payload.begin(), payload.end())});
    return nullptr;
  }
  _host.protocol_violation(g, "chunk for a message already received (tag " + std::to_string(h.tag) +
                                  ", seq " + std::to_string(h.seq) + ")");
  return nullptr;
}

message_state* receive_path::new_message(gate& g, const wire::chunk_header& h, std::span<const std::byte> payload) {
  request_state* r = _match.first_posted(g.rank, h.tag);
  if (h.flags & chunk_flag::offer) {
    // Sent for one receive's want: taken only by that receive, and only if
    // it is the first posted receive the message matches; else declined
    // (the sender keeps it, unnumbered again, in its place).
    const bool take = r && r->post_stamp == h.cookie2;
    answer_offer(g, h.cookie,
                 take ? chunk_flag::accepted
                      : _match.posted_with_stamp(g.rank, h.cookie2) ? std::uint8_t{0} : chunk_flag::withdrawn);
    if (!take) return nullptr;
  }
  message_state m;
  m.source = g.rank;
  m.tag = h.tag;
  m.seq = h.seq;
  // A message announced whole by its first chunk (eager data or one
  // rendezvous request: the usual case) needs no entry in `active`.
  const bool whole = (h.flags & chunk_flag::last) && h.offset == 0 &&
                     (h.msg_len == chunk_entry::unknown_length || h.msg_len == h.len);
  m.in_active = !whole;
  if (r) {
    _match.unpost(*r);
    if (r->wanted) unwant(*r, (h.flags & chunk_flag::offer) ? &g : nullptr);
    bind(*r, std::move(m));
    if (!whole) g.active[{h.tag, h.seq}] = &r->msg;
    return &r->msg;
  }
  if (!g.probe_wants.empty()) note_probe_answered(g, h.tag);
  count(_unexpected_messages);
  if (events::wanted(layer::event_kind::unexpected_queued))
    events::emit_message(layer::event_kind::unexpected_queued, g.rank, h.tag,
                         h.msg_len == chunk_entry::unknown_length ? h.len : h.msg_len);
  // A small message, charged as one (wire::chunk_credit): kept in a
  // compact record, payload inside. Nothing more of it will come.
  if (whole && (h.flags & chunk_flag::opens) && wire::is_small_message(static_cast<chunk_kind>(h.kind), h.msg_len) &&
      payload.size() == h.msg_len && h.len == h.msg_len) {
    _match.add_unexpected(*_match.new_small(g.rank, h.tag, h.seq, payload));
    return nullptr;
  }
  unexpected_full* u = match_queues::make_full(std::move(m));
  _match.add_unexpected(*u);
  if (!whole) g.active[{h.tag, h.seq}] = &u->msg;
  return &u->msg;
}

void receive_path::drain_early(gate& g) {
  if (g.draining_early) return;
  g.draining_early = true;
  bool again = true;
  while (again && !g.failed.load(std::memory_order_relaxed)) {
    again = false;
    for (std::size_t i = 0; i < g.early.size(); ++i) {
      const wire::chunk_header& h = g.early[i].header;
      const std::uint32_t expected = g.recv_seq.get(h.tag & _ordering_mask);
      if (seq_before(expected, h.seq)) continue;  // still too early
      early_chunk c = std::move(g.early[i]);
      g.early.erase(g.early.begin() + static_cast<std::ptrdiff_t>(i));
      handle_chunk(g, c.header, c.payload);
      again = true;
      break;
    }
  }
  g.draining_early = false;
}

// A message is whole once every chunk arrived: stop looking it up.
void receive_path::note_arrivals(gate& g, message_state& m) {
  if (m.in_active && m.total != message_state::unknown && m.arrived == m.total) {
    g.active.erase({m.tag, m.seq});
    m.in_active = false;
  }
}

// A sender asks to withdraw its rendezvous message (see
// session_impl::cancel_send): it is withdrawn only while it waits,
// unmatched, in the unexpected queue.
void receive_path::handle_cancel_req(gate& g, const wire::chunk_header& h) {
  bool withdrawn = false;
  unexpected_message* found = nullptr;
  // (A small message is eager: never a rendezvous to withdraw.)
  _match.for_each_unexpected(g.rank, [&](unexpected_message& u) {
    if (!found && !u.small && u.tag == h.tag && u.seq == h.seq) found = &u;
  });
  if (found) {
    message_state& m = found->state();
    bool ours = m.buffered.empty() && !m.rdvs.empty();
    for (const auto& p : m.rdvs) ours = ours && p.sender_cookie == h.cookie;
    if (ours) {
      if (m.held_credit) release(g, m.held_credit);
      _match.remove_unexpected(*found);
      if (m.in_active) g.active.erase({m.tag, m.seq});
      unexpected_message::destroy(found);
      withdrawn = true;
    }
  }
  std::unique_lock gl(g.lock);
  chunk_entry& a = g.new_control(chunk_kind::cancel_ack, withdrawn ? chunk_flag::cancel_ok : 0);
  a.tag = h.tag;
  a.seq = h.seq;
  a.cookie = h.cookie;
  g.queue_control(a);
  gl.unlock();
  _sched.schedule(g);
}

// ---- binding a receive to a message -----------------------------------------------

void receive_path::bind(request_state& r, message_state&& m) {
  r.matched = true;
  r.msg = std::move(m);
  if (trace::enabled()) trace::emit(trace::event::match, r.msg.source, 0, r.msg.tag, r.msg.seq, r.msg.total);
  r.msg.req = &r;
  r.msg.unexpected = nullptr;
  if (r.msg.held_credit) {
    release(*_gates[r.msg.source], r.msg.held_credit);
    r.msg.held_credit = 0;
  }
}

std::uint64_t receive_path::copy_into_segments(request_state& r, std::uint64_t offset,
                                               std::span<const std::byte> bytes) {
  std::uint64_t base = 0, placed = 0;
  for (std::size_t i = segment_at(r, offset, base); i < r.segments.size() && placed < bytes.size(); ++i) {
    segment& s = r.segments[i];
    const std::uint64_t lo = std::max(base, offset);
    const std::uint64_t hi = std::min(base + s.len, offset + bytes.size());
    if (lo < hi) {
      std::memcpy(s.ptr + (lo - base), bytes.data() + (lo - offset), hi - lo);
      s.received += hi - lo;
      placed += hi - lo;
    }
    base += s.len;
  }
  return placed;
}

// Places eager bytes: inside the receive's capacity they are copied; beyond
// it they are dropped (sealed receive: truncation) or kept for a later unpack.
void receive_path::place(request_state& r, std::uint64_t offset, std::span<const std::byte> bytes) {
  message_state& m = r.msg;
  m.accounted += bytes.size();
  const std::uint64_t fit = offset >= r.capacity ? 0 : std::min<std::uint64_t>(bytes.size(), r.capacity - offset);
  if (fit > 0) copy_into_segments(r, offset, bytes.first(fit));
  std::uint64_t kept = 0;  // buffered again for a later unpack
  if (fit < bytes.size()) {
    if (r.recv_sealed) {
      m.truncated = true;
    } else {
      auto rest = bytes.subspan(fit);
      m.buffered.push_back({offset + fit, kept_bytes(rest)});
      kept = rest.size();
    }
  }
  gate& g = *_gates[m.source];
  if (g.flow_control) release(g, bytes.size() - kept);
}

void receive_path::drain_buffered(request_state& r) {
  message_state& m = r.msg;
  if (m.buffered.empty()) return;
  if (m.buffered.size() == 1) {  // the usual case: one eager piece
    buffered_bytes b = std::move(m.buffered.front());
    m.buffered.clear();
    m.accounted -= b.bytes.size();  // place() counts them again
    place(r, b.offset, b.bytes);
    return;
  }
  buffered_list pending;
  pending.swap(m.buffered);
  for (auto& b : pending) {
    m.accounted -= b.bytes.size();  // place() counts them again
    place(r, b.offset, b.bytes);
  }
}

void receive_path::finish_recv_if_done(request_state& r) {
  if (r.finished() || !r.matched || !r.recv_sealed) return;
  message_state& m = r.msg;
  if (m.failed) {
    _host.fail_request(r, errc::peer_failed, m.fail_reason);
    return;
  }
  if (m.total == message_state::unknown || m.accounted != m.total || m.rdv_in_flight > 0 ||
      !m.rdvs.empty() || !m.buffered.empty())
    return;
  if (m.truncated) {
    r.error = errc::truncated;
    r.error_message = "message of " + std::to_string(m.total) + " bytes from rank " +
                      std::to_string(m.source) + " (tag " + std::to_string(m.tag) +
                      ") truncated to the " + std::to_string(r.capacity) + "-byte receive buffer";
  }
  _host.complete(r);
}

// ---- taking what arrived unexpectedly ---------------------------------------------

// Binds r to an unexpected message already off the unexpected list, and
// frees the entry.
void receive_path::take_unexpected(request_state& r, unexpected_message& u) {
  gate& g = *_gates[u.source];
  if (u.small) {
    take_small(g, r, static_cast<unexpected_small&>(u));
    return;
  }
  const bool still_arriving = u.state().in_active;
  bind(r, std::move(u.state()));
  unexpected_message::destroy(&u);
  // (A failed gate's clean-up marked it failed already; it must not be
  // entered in a table nobody clears again.)
  if (still_arriving && !g.cleaned_up) g.active[{r.msg.tag, r.msg.seq}] = &r.msg;
  drain_buffered(r);
  ask_rdvs(g, r);
  finish_recv_if_done(r);
}

// A small one: its bytes placed, its whole credit returned (it cost
// wire::small_message_credit, payload included), the record freed.
void receive_path::take_small(gate& g, request_state& r, unexpected_small& u) {
  const std::size_t len = u.small_len;
  r.matched = true;
  message_state& m = r.msg;
  m.req = &r;
  m.source = g.rank;
  m.tag = u.tag;
  m.seq = u.seq;
  m.total = m.arrived = len;
  if (trace::enabled()) trace::emit(trace::event::match, m.source, 0, m.tag, m.seq, m.total);
  if (g.flow_control) release(g, wire::small_message_credit - len);
  place(r, 0, std::span<const std::byte>(u.bytes, len));  // (returns the payload's credit)
  _match.free_small(&u);
  finish_recv_if_done(r);
}

unexpected_message* receive_path::find_unexpected(int source, tag_t tag, tag_t mask, recv_status& st) {
  unexpected_message* u = _match.first_unexpected(source, tag, mask);
  if (!u || u->length() == message_state::unknown) return nullptr;  // length not known yet
  st.source = static_cast<int>(u->source);
  st.tag = u->tag;
  st.length = u->length();
  st.error = errc::ok;
  return u;
}

// ---- a failed gate ---------------------------------------------------------------

void receive_path::gate_failed(gate& g, const std::string& msg, bool none_alive) {
  // Matched receives whose bytes are still to come fail: messages still
  // arriving (active), rendezvous data asked for, and rendezvous waiting
  // to be asked for.
  std::vector<request_state*> receives;
  for (auto& [cookie, rr] : g.rdv_in) {
    receives.push_back(rr->req);
    delete rr;
  }
  g.rdv_in.clear();
  g.early.clear();
  for (auto& [key, m] : g.active) {
    m->failed = true;
    m->fail_reason = msg;
    if (m->req) receives.push_back(m->req);
  }
  g.active.clear();
  for (request_state* r : g.ask_again) {
    r->ask_deferred = false;
    receives.push_back(r);
  }
  g.ask_again.clear();
  // (Failing them takes them off the list: a copy.)
  const std::vector<request_state*> waiting = g.unpack_waiting;
  receives.insert(receives.end(), waiting.begin(), waiting.end());
  // Each once: a failed request may be gone at once (its owner saw it done).
  std::sort(receives.begin(), receives.end());
  receives.erase(std::unique(receives.begin(), receives.end()), receives.end());
  g.cleaned_up = true;
  if (g.rx_starved) {
    g.rx_starved = false;
    --_starved_gates;
  }
  for (request_state* r : receives) {
    r->msg.failed = true;
    r->msg.fail_reason = msg;
    _host.fail_request(*r, errc::peer_failed, msg);
  }
  // Unmatched messages that are not whole (rendezvous not asked for yet):
  // a receive that takes one later fails instead of waiting for its data.
  auto mark = [&](unexpected_message& u) {
    if (u.small || static_cast<int>(u.source) != g.rank) return;  // (a small one is whole)
    message_state& m = u.state();
    if (!m.rdvs.empty()) {
      m.failed = true;
      m.fail_reason = msg;
    }
  };
  _match.for_each_unexpected(g.rank, mark);
  for (unexpected_message& u : _detached) mark(u);
  // Receives posted for this peer, and any-source receives once no other
  // peer is alive to match them.
  _match.drain_posted(g.rank, [&](request_state& r) { _host.fail_request(r, errc::peer_failed, msg); });
  if (none_alive)
    _match.drain_posted(any_source, [&](request_state& r) {
      _host.fail_request(r, errc::peer_failed, "any-source receive: every other rank failed (last: " + msg + ")");
    });
}

}  // namespace nmad
