// The receive path's rendezvous (see receive_path.hpp): asking for the
// ranges a sender announced once a receive has room for them -- pulled
// through the driver where it can read the sender's memory, else a bulk
// receive posted with the driver and a ready-to-receive queued for the
// sender -- and their arrival.
#include <algorithm>
#include <array>
#include <mutex>

#include "api/nmad/services/trace.hpp"
#include "core/receive/receive_path.hpp"

namespace nmad {

// The rail choice for a rendezvous range is the gate's strategy's
// (strategy::choose_rdv_track: by default equal pieces over the connected
// tracks for ranges of 256 KiB and up, in turn). Shrinks n to the piece.
// Matching lock held; takes the gate lock (the strategy's), then each
// track's to read its figures.
track& receive_path::pick_rail(gate& g, std::uint64_t& n, const message_state& m, std::uint64_t offset) {
  if (g.tracks.size() == 1) return g.tracks[0];
  constexpr std::size_t kViews = 8;
  std::array<track_view, kViews> views;
  const std::size_t nviews = std::min(g.tracks.size(), kViews);
  std::lock_guard gl(g.lock);
  for (std::size_t i = 0; i < nviews; ++i) {
    track& t = g.tracks[i];
    std::lock_guard tl(t.lock);
    views[i] = _sched.view_of(t);
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
void receive_path::queue_rtr(gate& g, std::uint8_t flags, std::uint32_t rail, std::uint64_t offset,
                             std::uint64_t len, std::uint64_t sender_cookie, std::uint64_t recv_cookie) {
  if (trace::enabled()) trace::emit(trace::event::rdv_ready_sent, g.rank, rail, 0, 0, len, offset);
  std::lock_guard gl(g.lock);
  chunk_entry& e = g.new_control(chunk_kind::rtr, flags);
  e.rail = rail;
  e.offset = offset;
  e.len = len;
  e.cookie = sender_cookie;
  e.cookie2 = recv_cookie;
  g.queue_control(e);
}

// Answers rendezvous requests whose range has a destination now. Matching
// lock held. A driver another thread holds is not waited for: the rest is
// asked again from the session's pending work (ask_later), in order.
void receive_path::ask_rdvs(gate& g, request_state& r) {
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
          ask_later(g, r);
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
          ask_later(g, r);
          deferred = true;
          break;
        }
        if (res != post_result::posted) {
          t.incoming.fetch_sub(n, std::memory_order_relaxed);
          // (A connection the driver already knows broken: its failure is
          // reported from poll; this receive is not on any list the gate's
          // clean-up walks, so it fails here.)
          delete rr;
          _host.fail_gate(g, broken.empty() ? "the driver refused a rendezvous receive" : broken);
          m.failed = true;
          m.fail_reason = _host.failure_text(g);
          // Still referred to (pieces asked for before, chunks to come): the
          // gate's clean-up finds it there and fails it; else nothing will.
          if (m.rdv_in_flight == 0 && !m.in_active) _host.fail_request(r, errc::peer_failed, m.fail_reason);
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
  _sched.schedule(g);
}

// r's rendezvous wait for a driver: asked again, in order, by retry_asks
// from the session's pending work. Matching lock held.
void receive_path::ask_later(gate& g, request_state& r) {
  if (!r.ask_deferred) {
    r.ask_deferred = true;
    g.ask_again.push_back(&r);
  }
  _host.driver_busy(g);
}

void receive_path::retry_asks(gate& g) {
  std::lock_guard ml(_lock);
  if (g.ask_again.empty()) return;
  std::vector<request_state*> asks;
  asks.swap(g.ask_again);
  for (request_state* r : asks) {
    r->ask_deferred = false;
    if (!r->finished()) ask_rdvs(g, *r);  // may defer it again
  }
}

// Matching lock held.
void receive_path::note_unpack_waiting(gate& g, request_state& r, bool waiting) {
  if (waiting == r.unpack_waiting) return;
  r.unpack_waiting = waiting;
  if (waiting) g.unpack_waiting.push_back(&r);
  else std::erase(g.unpack_waiting, &r);
}

// From poll (the driver's lock held).
void receive_path::recv_data_done(rdv_recv* rr, std::size_t received) {
  gate& g = *rr->owner;
  std::lock_guard ml(_lock);
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
    _host.protocol_violation(g, "rendezvous data shorter than announced");
    return;
  }
  if (pulled) {
    // Tell the sender its bytes were taken: its send completes.
    queue_rtr(g, chunk_flag::pulled, 0, offset, len, sender_cookie, 0);
    _sched.schedule(g);
  }
  finish_recv_if_done(r);
}

}  // namespace nmad
