// Receive side: packet parsing, in-order matching per ordering domain,
// unexpected messages, placement into receive segments, rendezvous answers.
#include <algorithm>
#include <array>
#include <cstring>

#include "core/common/log.hpp"
#include "core/common/small_copy.hpp"
#include "core/session_impl.hpp"

namespace nmad {
namespace {
// Serial-number comparison (sequence numbers wrap around).
bool seq_before(std::uint32_t a, std::uint32_t b) { return static_cast<std::int32_t>(a - b) < 0; }
}  // namespace

// ---- arrival ---------------------------------------------------------------

// From poll (the driver's lock held): the whole packet under the matching lock.
void session_impl::packet_arrived(driver_slot& slot, connection_id conn, std::span<const std::byte> bytes) {
  gate* found = slot.gates.find(conn);
  if (!found) return;
  gate& g = *found;
  if (g.failed.load(std::memory_order_acquire)) return;
  count(_stats.packets_received);
  std::lock_guard ml(_match_lock);
  wire::short_header sh;
  if (wire::is_short(bytes, sh)) {
    if (trace::enabled()) trace::emit(trace::event::packet_arrive, g.rank, 0, sh.tag, sh.seq, bytes.size(), 1);
    handle_short(g, sh, bytes.subspan(sizeof sh));
    return;
  }
  wire::packet_reader reader(bytes);
  std::string error;
  if (!reader.begin(error)) {
    protocol_violation(g, error);
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
  if (!error.empty()) protocol_violation(g, error);
}

// A whole small message in the compact form. In the common case (next in
// its ordering domain, a posted receive of one segment matches) it is
// decoded and placed in place, without message state; anything else goes
// through the general chunk path as the equivalent data chunk.
void session_impl::handle_short(gate& g, const wire::short_header& sh, std::span<const std::byte> payload) {
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
        complete(*r);
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

void session_impl::handle_chunk(gate& g, const wire::chunk_header& h, std::span<const std::byte> payload) {
  if (static_cast<chunk_kind>(h.kind) == chunk_kind::rtr) {
    handle_rtr(g, h);
    return;
  }
  if (static_cast<chunk_kind>(h.kind) == chunk_kind::cancel_req) {
    handle_cancel_req(g, h);
    return;
  }
  if (static_cast<chunk_kind>(h.kind) == chunk_kind::cancel_ack) {
    handle_cancel_ack(g, h);
    return;
  }
  if (static_cast<chunk_kind>(h.kind) == chunk_kind::credit) {
    handle_credit(g, h);
    return;
  }
  if (static_cast<chunk_kind>(h.kind) == chunk_kind::want) {
    handle_want(g, h);
    return;
  }
  if (static_cast<chunk_kind>(h.kind) == chunk_kind::offer_ack) {
    handle_offer_ack(g, h);
    return;
  }
  if (static_cast<chunk_kind>(h.kind) == chunk_kind::failure_notice) {
    if (h.tag >= static_cast<std::uint64_t>(_size) || static_cast<int>(h.tag) == g.rank || static_cast<int>(h.tag) == _rank) {
      protocol_violation(g, "failure notice names rank " + std::to_string(h.tag));
      return;
    }
    g.cause_reported.store(static_cast<int>(h.tag), std::memory_order_release);
    return;
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
      protocol_violation(g, "last chunk does not end at the message length");
      return;
    }
    total = h.offset + h.len;
  }
  if (total != message_state::unknown) {
    if (m->total != message_state::unknown && m->total != total) {
      protocol_violation(g, "inconsistent message length");
      return;
    }
    m->total = total;
  }
  if (m->total != message_state::unknown && h.offset + h.len > m->total) {
    protocol_violation(g, "chunk beyond the end of its message");
    return;
  }
  m->arrived += h.len;
  if (m->total != message_state::unknown && m->arrived > m->total) {
    protocol_violation(g, "more bytes than the message holds");
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

message_state* session_impl::find_message(gate& g, const wire::chunk_header& h,
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
  protocol_violation(g, "chunk for a message already received (tag " + std::to_string(h.tag) +
                            ", seq " + std::to_string(h.seq) + ")");
  return nullptr;
}

message_state* session_impl::new_message(gate& g, const wire::chunk_header& h, std::span<const std::byte> payload) {
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
  count(_stats.unexpected_messages);
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

void session_impl::drain_early(gate& g) {
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
void session_impl::note_arrivals(gate& g, message_state& m) {
  if (m.in_active && m.total != message_state::unknown && m.arrived == m.total) {
    g.active.erase({m.tag, m.seq});
    m.in_active = false;
  }
}

// ---- binding a receive to a message -----------------------------------------------

void session_impl::bind(request_state& r, message_state&& m) {
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

// The first segment that can hold `offset`, and in `base` the message
// offset where it starts: by division for a precv's equal parts, else the
// first one (a walk from the start).
static std::size_t segment_at(const request_state& r, std::uint64_t offset, std::uint64_t& base) {
  if (r.uniform_len == 0 || r.segments.size() == 0) {
    base = 0;
    return 0;
  }
  const std::uint64_t i = std::min<std::uint64_t>(offset / r.uniform_len, r.segments.size() - 1);
  base = i * r.uniform_len;
  return static_cast<std::size_t>(i);
}

std::uint64_t session_impl::copy_into_segments(request_state& r, std::uint64_t offset,
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
void session_impl::place(request_state& r, std::uint64_t offset, std::span<const std::byte> bytes) {
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

void session_impl::drain_buffered(request_state& r) {
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

// The rail choice for a rendezvous range is the gate's strategy's
// (strategy::choose_rdv_track: by default equal pieces over the connected
// tracks for ranges of 256 KiB and up, in turn). Shrinks n to the piece.
// Matching lock held; takes the gate lock (the strategy's), then each
// track's to read its figures.
track& session_impl::pick_rail(gate& g, std::uint64_t& n, const message_state& m, std::uint64_t offset) {
  if (g.tracks.size() == 1) return g.tracks[0];
  constexpr std::size_t kViews = 8;
  std::array<track_view, kViews> views;
  const std::size_t nviews = std::min(g.tracks.size(), kViews);
  std::lock_guard gl(g.lock);
  for (std::size_t i = 0; i < nviews; ++i) {
    track& t = g.tracks[i];
    std::lock_guard tl(t.lock);
    views[i] = view_of(t);
    views[i].drv = nullptr;  // (no driver question from here: its lock is not held)
    views[i].connected = t.connected.load(std::memory_order_acquire);
  }
  const rdv_range range{m.tag, m.seq, offset, n};
  std::uint64_t len = n;
  std::uint32_t rail = g.strat->choose_rdv_track(range, std::span<const track_view>(views.data(), nviews), len);
  if (len > 0 && len <= n) n = len;
  if (rail < nviews && views[rail].connected) return g.tracks[rail];
  for (std::size_t i = 0; i < nviews; ++i)
    if (views[i].connected) return g.tracks[i];
  return g.tracks[0];  // none connected: the gate is failing
}

// Queues a control chunk (rtr) at the head of g's collect list: control
// overtakes queued data. The gate lock is taken here.
void session_impl::queue_rtr(gate& g, std::uint8_t flags, std::uint32_t rail, std::uint64_t offset,
                             std::uint64_t len, std::uint64_t sender_cookie, std::uint64_t recv_cookie) {
  if (trace::enabled()) trace::emit(trace::event::rdv_ready_sent, g.rank, rail, 0, 0, len, offset);
  std::lock_guard gl(g.lock);
  chunk_entry* e = g.entry_pool.get();
  *e = chunk_entry{};
  e->pooled = true;
  e->kind = chunk_kind::rtr;
  e->flags = flags;
  e->priority = 2;
  e->rail = rail;
  e->offset = offset;
  e->len = len;
  e->cookie = sender_cookie;
  e->cookie2 = recv_cookie;
  g.collect.push_front(*e);
}

// Answers rendezvous requests whose range has a destination now. Matching
// lock held. A driver another thread holds is not waited for: the rest is
// asked again from the pending work (defer_ask), in order.
void session_impl::ask_rdvs(gate& g, request_state& r) {
  message_state& m = r.msg;
  if (g.failed.load(std::memory_order_acquire) || r.ask_deferred) return;
  bool deferred = false;
  for (auto& p : m.rdvs) {
    if (deferred) break;
    if (p.len == 0) {
      // An empty synchronous send: it only waits to hear it was matched.
      queue_rtr(g, chunk_flag::discard, 0, p.offset, 0, p.sender_cookie, 0);
      continue;
    }
    while (p.len > 0) {
      if (p.offset < r.capacity) {
        std::uint64_t n = std::min(p.len, r.capacity - p.offset);
        // Pulled through track 0 where its driver reads the sender's
        // memory (both sides list their tracks in the same order), else
        // pushed on the track the rail choice gives (it may cut n).
        const bool pull = p.pullable && g.tracks[0].connected.load(std::memory_order_acquire) &&
                          g.tracks[0].caps->rdma_get;
        track& t = pull ? g.tracks[0] : pick_rail(g, n, m, p.offset);
        driver_slot& slot = *t.slot;
        if (!slot.lock.try_lock()) {
          defer_ask(g, r);
          deferred = true;
          break;
        }
        auto* rr = new rdv_recv{&g, &r, g.next_recv_cookie++, p.offset, n, {}};
        std::uint64_t base = 0;
        for (std::size_t i = segment_at(r, p.offset, base); i < r.segments.size() && base < p.offset + n; ++i) {
          segment& s = r.segments[i];
          const std::uint64_t lo = std::max(base, p.offset), hi = std::min(base + s.len, p.offset + n);
          if (lo < hi) {
            std::byte* at = s.ptr + (lo - base);
            // (Segments adjacent in memory, as a precv's parts: one entry.)
            if (!rr->iov.empty() && static_cast<std::byte*>(rr->iov.back().iov_base) + rr->iov.back().iov_len == at)
              rr->iov.back().iov_len += hi - lo;
            else rr->iov.push_back({at, hi - lo});
          }
          base += s.len;
        }
        // Pull it ourselves where the driver can read the sender's memory;
        // the sender hears of it when the bytes are in (recv_data_done).
        if (pull) {
          rr->pulled = true;
          rr->sender_cookie = p.sender_cookie;
          g.rdv_in[rr->cookie] = rr;
          m.rdv_in_flight++;
          // (A driver reports a peer it found gone from poll(), never from here.)
          const post_result got = slot.drv->post_get(t.conn, p.pull_base + p.offset, p.pull_key, rr->iov, rr);
          if (got == post_result::posted) {
            slot.lock.unlock();
            if (trace::enabled()) trace::emit(trace::event::rdv_pull, g.rank, t.rail, m.tag, m.seq, n, p.offset);
            p.offset += n;
            p.len -= n;
            continue;
          }
          g.rdv_in.erase(rr->cookie);  // not readable after all: the sender pushes it
          m.rdv_in_flight--;
          rr->pulled = false;
        }
        // Counted before posting (its completion subtracts it): the
        // strategies' view of the bytes still to come on each track.
        rr->rail = t.rail;
        t.incoming.fetch_add(n, std::memory_order_relaxed);
        const post_result res = slot.drv->post_recv_data(t.conn, rr->cookie, rr->iov, rr);
        // (Refused: the driver names the cause if it knows the connection
        // broken, e.g. the peer died.)
        const std::string broken = res == post_result::posted ? std::string() : slot.drv->failure_reason(t.conn);
        slot.lock.unlock();
        if (res == post_result::retry) {
          // No room in the driver now (e.g. its provider's receive queue
          // is full): asked again from the pending work, and the sender
          // hears of the range only once its receive is posted.
          t.incoming.fetch_sub(n, std::memory_order_relaxed);
          delete rr;
          defer_ask(g, r);
          deferred = true;
          break;
        }
        if (res != post_result::posted) {
          t.incoming.fetch_sub(n, std::memory_order_relaxed);
          // (A connection the driver already knows broken: its failure is
          // reported from poll; this receive is not on any list the gate's
          // clean-up walks, so it fails here.)
          delete rr;
          fail_gate(g, broken.empty() ? "the driver refused a rendezvous receive" : broken);
          m.failed = true;
          m.fail_reason = failure_text(g);
          // Still referred to (pieces asked for before, chunks to come): the
          // gate's clean-up finds it there and fails it; else nothing will.
          if (m.rdv_in_flight == 0 && !m.in_active) fail_request(r, errc::peer_failed, m.fail_reason);
          return;
        }
        g.rdv_in[rr->cookie] = rr;
        m.rdv_in_flight++;
        queue_rtr(g, 0, t.rail, p.offset, n, p.sender_cookie, rr->cookie);
        p.offset += n;
        p.len -= n;
      } else if (r.recv_sealed) {
        // No room will ever come: tell the sender to drop the rest.
        queue_rtr(g, chunk_flag::discard, 0, p.offset, p.len, p.sender_cookie, 0);
        m.accounted += p.len;
        m.truncated = true;
        p.len = 0;
      } else {
        break;  // wait for the next unpack
      }
    }
  }
  m.rdvs.erase(std::remove_if(m.rdvs.begin(), m.rdvs.end(), [](const pending_rdv& p) { return p.len == 0; }),
               m.rdvs.end());
  note_unpack_waiting(g, r, !deferred && !m.rdvs.empty());
  schedule(g);
}

// Keeps g.unpack_waiting exact: r is on it while rendezvous pieces of its
// message wait for the next unpack. Matching lock held.
void session_impl::note_unpack_waiting(gate& g, request_state& r, bool waiting) {
  if (waiting == r.unpack_waiting) return;
  r.unpack_waiting = waiting;
  if (waiting) g.unpack_waiting.push_back(&r);
  else std::erase(g.unpack_waiting, &r);
}

// From poll (the driver's lock held).
void session_impl::recv_data_done(rdv_recv* rr, std::size_t received) {
  gate& g = *rr->owner;
  std::lock_guard ml(_match_lock);
  request_state& r = *rr->req;
  g.rdv_in.erase(rr->cookie);
  if (!rr->pulled && rr->rail < g.tracks.size()) g.tracks[rr->rail].incoming.fetch_sub(rr->len, std::memory_order_relaxed);
  message_state& m = r.msg;
  m.rdv_in_flight--;
  m.accounted += rr->len;
  // Credit the segments the data landed in.
  std::uint64_t base = 0;
  for (std::size_t i = segment_at(r, rr->offset, base); i < r.segments.size() && base < rr->offset + rr->len; ++i) {
    segment& s = r.segments[i];
    const std::uint64_t lo = std::max(base, rr->offset), hi = std::min(base + s.len, rr->offset + rr->len);
    if (lo < hi) s.received += hi - lo;
    base += s.len;
  }
  const bool short_data = received != rr->len;
  const bool pulled = rr->pulled;
  const std::uint64_t sender_cookie = rr->sender_cookie, offset = rr->offset, len = rr->len;
  if (trace::enabled()) trace::emit(trace::event::rdv_data_done, g.rank, rr->rail, r.msg.tag, r.msg.seq, len, offset);
  delete rr;
  if (short_data) {
    protocol_violation(g, "rendezvous data shorter than announced");
    return;
  }
  if (pulled) {
    // Tell the sender its bytes were taken: its send completes.
    queue_rtr(g, chunk_flag::pulled, 0, offset, len, sender_cookie, 0);
    schedule(g);
  }
  finish_recv_if_done(r);
}

void session_impl::finish_recv_if_done(request_state& r) {
  if (r.finished() || !r.matched || !r.recv_sealed) return;
  message_state& m = r.msg;
  if (m.failed) {
    fail_request(r, errc::peer_failed, m.fail_reason);
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
  complete(r);
}

// ---- posting receives ------------------------------------------------------------------

void session_impl::setup_recv(request_state& r, int source, tag_t tag, tag_t mask, void* buf,
                              std::size_t len, bool sealed) {
  r.type = request_state::kind::recv;
  r.engine = this;
  r.engine_id = _serial;
  r.error = errc::ok;
  r.error_message.clear();
  r.finishing = false;
  r.wake_fd.store(-1, std::memory_order_relaxed);
  r.done.store(false, std::memory_order_relaxed);
  if (_waiter.counts_work()) {  // the progress thread may have work from now on
    r.bg_counted = true;
    _waiter.work_started();
  }
  r.source_filter = source;
  r.tag_filter = tag;
  r.tag_mask = mask;
  r.matched = false;
  r.segments.clear();
  r.capacity = 0;
  r.uniform_len = 0;
  if (len > 0 || sealed) {
    r.segments.push_back({static_cast<std::byte*>(buf), len, 0});
    r.capacity = len;
  }
  r.recv_sealed = sealed;
  r.ask_deferred = false;
  r.unpack_waiting = false;
  r.wanted = false;
  r.msg.reset();
}

// Binds r to an unexpected message already off the unexpected list, and
// frees the entry.
void session_impl::take_unexpected(request_state& r, unexpected_message& u) {
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
void session_impl::take_small(gate& g, request_state& r, unexpected_small& u) {
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

errc session_impl::irecv(int source, tag_t tag, tag_t mask, void* buf, std::size_t len,
                         request_state& r, bool sealed) {
  engine_scope scope(*this);
  if (!r.is_complete()) return errc::invalid_argument;
  if ((source != any_source && (source < 0 || source >= _size)) || (!buf && len > 0)) {
    r.error = errc::invalid_argument;
    r.error_message = (!buf && len > 0) ? "irecv: null buffer with length " + std::to_string(len)
                                        : "irecv: source rank " + std::to_string(source) + " out of range";
    return r.error;
  }
  if (trace::enabled()) trace::emit(trace::event::recv_submit, source, 0, tag, 0, len);
  setup_recv(r, source, tag, mask, buf, len, sealed);
  return post_recv(r, source, tag, mask);
}

errc session_impl::precv(int source, tag_t tag, void* buf, std::uint64_t len, std::uint64_t part_len,
                         request_state& r) {
  engine_scope scope(*this);
  if (!r.is_complete()) return errc::invalid_argument;
  std::string bad;
  if (source < 0 || source >= _size) bad = "precv: source rank " + std::to_string(source) + " out of range";
  else if (!buf && len > 0) bad = "precv: null buffer with length " + std::to_string(len);
  else if (part_len == 0 && len > 0) bad = "precv: parts of 0 bytes in a buffer of " + std::to_string(len);
  if (!bad.empty()) {
    r.error = errc::invalid_argument;
    r.error_message = std::move(bad);
    return r.error;
  }
  if (trace::enabled()) trace::emit(trace::event::recv_submit, source, 0, tag, 0, len);
  setup_recv(r, source, tag, full_mask, nullptr, 0, false);
  auto* at = static_cast<std::byte*>(buf);
  if (len == 0) r.segments.push_back({at, 0, 0});
  for (std::uint64_t off = 0; off < len; off += part_len)
    r.segments.push_back({at + off, std::min(part_len, len - off), 0});
  r.capacity = len;
  r.uniform_len = part_len;
  r.recv_sealed = true;
  return post_recv(r, source, tag, full_mask);
}

bool session_impl::parrived(const request_state& r, std::uint64_t first, std::uint64_t count) {
  if (r.type != request_state::kind::recv || first > r.segments.size() || count > r.segments.size() - first)
    return false;
  std::lock_guard ml(_match_lock);
  for (std::uint64_t i = first; i < first + count; ++i) {
    const segment& s = r.segments[static_cast<std::size_t>(i)];
    if (s.received != s.len) return false;
  }
  return true;
}

// The matching half of a receive set up by setup_recv: an unexpected
// message is taken at once, else the receive is posted.
errc session_impl::post_recv(request_state& r, int source, tag_t tag, tag_t mask) {
  std::unique_lock ml(_match_lock);
  // An unexpected message that matches is taken first (arrival order).
  if (unexpected_message* u = _match.first_unexpected(source, tag, mask)) {
    _match.remove_unexpected(*u);
    take_unexpected(r, *u);
    return errc::ok;
  }
  if (source != any_source && _gates[source]->failed.load(std::memory_order_acquire)) {
    fail_request(r, errc::peer_failed, failure_text(*_gates[source]));
    return errc::peer_failed;
  }
  if (source == any_source && no_live_peer()) {
    // Only this process can still send it one: what it sent itself may be
    // in the self driver still (one progress round delivers it).
    ml.unlock();
    progress_now();
    ml.lock();
    if (unexpected_message* u = _match.first_unexpected(source, tag, mask)) {
      _match.remove_unexpected(*u);
      take_unexpected(r, *u);
      return errc::ok;
    }
    // Every other rank: named up to 8 (a large job's message stays short).
    std::string dead;
    for (int k = 0, n = 0; k < _size && n < 8; ++k)
      if (k != _rank) dead += (n++ ? ", rank " : "rank ") + std::to_string(k);
    if (_size - 1 > 8) dead += ", ...";
    fail_request(r, errc::peer_failed, "any-source receive: every other rank failed (" + dead + ")");
    return errc::peer_failed;
  }
  _match.post(r);
  if (_starved_gates > 0) want_posted(r);  // the peer may hold back what it waits for
  return errc::ok;
}

unexpected_message* session_impl::improbe(int source, tag_t tag, tag_t mask, recv_status& st) {
  unexpected_message* u = nullptr;
  int work;
  {
    engine_scope scope(*this);
    work = progress_now();
    std::lock_guard ml(_match_lock);
    u = find_unexpected(source, tag, mask, st);
    if (!u && _starved_gates > 0) want_for_probe(source, tag, mask);
    // Detached: chunks still arriving keep landing in u->msg through the
    // gate's `active` map, exactly as while it was on the list.
    if (u) {
      _match.remove_unexpected(*u);
      _detached.push_back(*u);
    }
  }
  if (!u && work == 0) _waiter.idle_poll();  // the polling discipline (waiter.hpp)
  return u;
}

errc session_impl::imrecv(unexpected_message* u, void* buf, std::size_t len, request_state& r) {
  engine_scope scope(*this);
  if (!u || !r.is_complete() || (!buf && len > 0)) {
    r.error = errc::invalid_argument;
    r.error_message = !u ? "imrecv: no message (already received?)"
                         : (!buf && len > 0) ? "imrecv: null buffer with length " + std::to_string(len)
                                             : "imrecv: request still pending";
    return errc::invalid_argument;
  }
  std::lock_guard ml(_match_lock);
  _detached.erase(_detached.iterator_to(*u));
  setup_recv(r, static_cast<int>(u->source), u->tag, full_mask, buf, len, true);
  take_unexpected(r, *u);
  return errc::ok;
}

errc session_impl::unpack_piece(request_state& r, void* buf, std::size_t len, pack_mode mode) {
  std::size_t index = 0;
  {
    engine_scope scope(*this);
    std::lock_guard ml(_match_lock);
    if (r.type != request_state::kind::recv || r.recv_sealed) return errc::invalid_argument;
    index = r.segments.size();
    if (!buf && len > 0) return errc::invalid_argument;
    if (r.finished()) return r.error;
    r.segments.push_back({static_cast<std::byte*>(buf), len, 0});
    r.capacity += len;
    if (r.matched) {
      drain_buffered(r);
      if (!r.msg.failed) ask_rdvs(*_gates[r.msg.source], r);
    }
  }
  if (mode == pack_mode::cheaper) return errc::ok;
  // Express: this piece must be in memory before returning.
  errc result = errc::ok;
  _waiter.wait([&] {
    engine_scope scope(*this);
    std::lock_guard ml(_match_lock);
    if (r.is_complete()) {
      result = r.error;
      return true;
    }
    if (!r.matched) return false;
    const segment& s = r.segments[index];
    if (r.msg.failed) {
      result = errc::peer_failed;
      return true;
    }
    if (s.received == s.len) return true;
    if (r.msg.total != message_state::unknown && r.capacity > r.msg.total) {
      result = errc::size_mismatch;  // the message ends before this piece
      return true;
    }
    return false;
  });
  return result;
}

errc session_impl::unpack_end(request_state& r) {
  {
    engine_scope scope(*this);
    std::lock_guard ml(_match_lock);
    if (r.type != request_state::kind::recv || r.recv_sealed) return errc::invalid_argument;
    r.recv_sealed = true;
    if (r.matched && !r.finished()) {
      drain_buffered(r);
      if (!r.msg.failed) ask_rdvs(*_gates[r.msg.source], r);
      finish_recv_if_done(r);
    }
  }
  wait_until(r);
  if (r.error == errc::ok && r.msg.total < r.capacity) {
    r.error = errc::size_mismatch;
    r.error_message = "unpacked " + std::to_string(r.capacity) + " bytes but the message from rank " +
                      std::to_string(r.msg.source) + " holds only " + std::to_string(r.msg.total);
  } else if (r.error == errc::truncated) {
    r.error_message = "packed message from rank " + std::to_string(r.msg.source) + " holds " +
                      std::to_string(r.msg.total) + " bytes, more than the " + std::to_string(r.capacity) +
                      " bytes unpacked";
  }
  return r.error;
}

bool session_impl::iprobe(int source, tag_t tag, tag_t mask, recv_status& st) {
  bool found;
  int work;
  {
    engine_scope scope(*this);
    work = progress_now();
    std::lock_guard ml(_match_lock);
    found = find_unexpected(source, tag, mask, st) != nullptr;
  }
  if (!found && work == 0) _waiter.idle_poll();  // the polling discipline (waiter.hpp)
  return found;
}

recv_status session_impl::probe(int source, tag_t tag, tag_t mask) {
  recv_status st;
  _waiter.wait([&] {
    engine_scope scope(*this);
    std::lock_guard ml(_match_lock);
    if (find_unexpected(source, tag, mask, st)) return true;
    if (_starved_gates > 0) want_for_probe(source, tag, mask);
    // Only messages already here can still come from a failed peer.
    const bool hopeless = source == any_source ? no_live_peer()
                          : source >= 0 && source < _size ? _gates[source]->failed.load(std::memory_order_acquire)
                                                          : true;
    if (!hopeless) return false;
    st = recv_status{};
    st.source = source;
    st.error = (source == any_source || (source >= 0 && source < _size)) ? errc::peer_failed
                                                                          : errc::invalid_argument;
    return true;
  });
  return st;
}

// The first unexpected message matching (source, tag/mask) whose length is
// known, in arrival order; fills st. Lock held.
unexpected_message* session_impl::find_unexpected(int source, tag_t tag, tag_t mask, recv_status& st) {
  unexpected_message* u = _match.first_unexpected(source, tag, mask);
  if (!u || u->length() == message_state::unknown) return nullptr;  // length not known yet
  st.source = static_cast<int>(u->source);
  st.tag = u->tag;
  st.length = u->length();
  st.error = errc::ok;
  return u;
}

// A sender asks to withdraw its rendezvous message (see cancel_send): it
// is withdrawn only while it waits, unmatched, in the unexpected queue.
void session_impl::handle_cancel_req(gate& g, const wire::chunk_header& h) {
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
  chunk_entry* a = g.entry_pool.get();
  *a = chunk_entry{};
  a->pooled = true;
  a->kind = chunk_kind::cancel_ack;
  a->flags = withdrawn ? chunk_flag::cancel_ok : 0;
  a->priority = 2;
  a->tag = h.tag;
  a->seq = h.seq;
  a->cookie = h.cookie;
  a->msg_len = chunk_entry::unknown_length;
  g.collect.push_front(*a);
  gl.unlock();
  schedule(g);
}

bool session_impl::cancel(request_state& r) {
  engine_scope scope(*this);
  if (r.type == request_state::kind::send) return cancel_send(r);
  std::lock_guard ml(_match_lock);
  if (r.type != request_state::kind::recv || r.finished() || r.matched || !_match.unpost(r))
    return false;
  if (r.wanted) unwant(r, nullptr);
  r.error = errc::cancelled;
  r.error_message = "receive cancelled";
  complete(r);
  return true;
}

}  // namespace nmad
