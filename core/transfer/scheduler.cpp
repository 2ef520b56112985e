// The NIC-driven scheduler (see scheduler.hpp).
#include "core/transfer/scheduler.hpp"

#include <array>
#include <chrono>

#include "api/nmad/services/log.hpp"
#include "api/nmad/services/trace.hpp"
#include "core/transfer/packet_builder.hpp"

namespace nmad {
namespace {

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

// Gate lock held.
packet_wrapper* scheduler::get_wrapper(gate& g, track& t) {
  packet_wrapper* pw = g.wrapper_pool.get();
  const std::size_t cap = t.caps->max_packet_size;
  if (pw->staging_capacity < cap) {
    pw->staging = std::make_unique<std::byte[]>(cap);
    pw->staging_capacity = cap;
  }
  pw->reset();
  pw->owner = &g;
  pw->rail = t.rail;
  return pw;
}

// Gate and track locks held.
packet_wrapper* scheduler::next_wrapper(gate& g, track& t, bool force) {
  // Bulk data already negotiated goes first: its receiver is waiting.
  for (auto it = g.data_out.begin(); it != g.data_out.end(); ++it) {
    if (it->rail != t.rail) continue;
    data_send ds = *it;
    g.data_out.erase(it);
    packet_wrapper* pw = get_wrapper(g, t);
    pw->type = packet_wrapper::kind::data;
    pw->data_cookie = ds.cookie;
    pw->iov[0] = {const_cast<std::byte*>(ds.entry->ptr) + (ds.offset - ds.entry->offset), ds.len};
    pw->niov = 1;
    pw->length = ds.len;
    pw->carried[0] = ds.entry;  // its `wrappers` count was taken by handle_rtr
    pw->ncarried = 1;
    return pw;
  }
  if (g.collect.empty()) return nullptr;
  packet_wrapper* pw = get_wrapper(g, t);
  const driver_caps& caps = *t.caps;
  packet_builder pb(*pw, caps.max_packet_size, caps.gather_scatter ? caps.max_iov : 1, _copy_threshold);
  // The strategy sees this track exactly and the gate's others as hints.
  constexpr std::size_t kViews = 8;
  std::array<track_view, kViews> views;
  const std::size_t nviews = std::min(g.tracks.size(), kViews);
  for (std::size_t i = 0; i < nviews; ++i)
    views[i] = &g.tracks[i] == &t ? view_of(t) : other_track_view(g.tracks[i]);
  const track_view& mine = t.rail < nviews ? views[t.rail] : (views[0] = view_of(t));
  const bool built = g.strat->build_packet(g.collect, pb, mine, std::span<const track_view>(views.data(), nviews));
  if (!built && !pb.empty())
    log_write(log_level::error, "strategy", "build_packet added chunks but returned false");
  // A hold the engine overrules (every track idle): the oldest chunk goes.
  if (pb.empty() && force && !g.collect.empty()) pb.add(g.collect, g.collect.front());
  if (pb.empty()) {
    put_wrapper(pw);
    return nullptr;
  }
  pb.finish();
  if (trace::enabled()) trace::emit(trace::event::packet_built, g.rank, t.rail, 0, pw->nchunks, pw->length);
  return pw;
}

// The NIC-driven step: while a track has room, the strategy builds its
// next packet from the collect list and the driver takes it. Any lock
// above the gate's may be held. A driver that another thread holds is not
// waited for: the gate is scheduled again once it is free.
// A strategy may hold queued chunks while a track is busy (its completion
// schedules again); if after a pass every connected track is idle and
// chunks are still queued, a second pass overrules the holds.
void scheduler::schedule(gate& g) {
  if (g.failed.load(std::memory_order_acquire)) return;
  std::lock_guard gl(g.lock);
  for (int pass = 0; pass < 2; ++pass) {
    bool busy = false, any = false;
    for (track& t : g.tracks) {
      if (!t.connected.load(std::memory_order_acquire)) continue;
      any = true;
      std::lock_guard tl(t.lock);
      if (t.outstanding >= t.window) {
        busy = true;
        continue;
      }
      if (!t.retry && g.collect.empty() && g.data_out.empty()) {
        if (t.stats.starved_since) note_starved(g, t);
        busy |= t.outstanding > 0;
        continue;
      }
      driver_slot& slot = *t.slot;
      if (!slot.lock.try_lock()) {
        // Its holder (or this thread's next lock-free point) schedules us.
        _host.driver_busy(g);
        if (!slot.lock.try_lock()) {
          note_starved(g, t);
          busy = true;
          continue;
        }
      }
      busy |= schedule_track(g, t, pass == 1);
      slot.lock.unlock();
      if (g.failed.load(std::memory_order_relaxed)) return;
      note_starved(g, t);
    }
    if (busy || !any || g.collect.empty()) return;
  }
}

// Statistics: a track with nothing posted while its gate has work for it
// is idle for want of a packet (the strategy held the work back, the
// driver refused or another thread held it); the time is added up when it
// posts again or the work is gone. Gate and track locks held.
void scheduler::note_starved(gate& g, track& t) {
  bool work = t.outstanding == 0 && (!g.collect.empty() || t.retry);
  if (t.outstanding == 0 && !work)
    for (const data_send& ds : g.data_out)
      if (ds.rail == t.rail) {
        work = true;
        break;
      }
  if (work) {
    if (!t.stats.starved_since) t.stats.starved_since = steady_ns();
  } else if (t.stats.starved_since) {
    t.stats.idle_ns.add(static_cast<std::uint64_t>(steady_ns() - t.stats.starved_since));
    t.stats.starved_since = 0;
  }
}

// Gate and track locks and the track's driver lock held.
bool scheduler::schedule_track(gate& g, track& t, bool force) {
  driver& d = *t.slot->drv;
  while (t.outstanding < t.window) {
    packet_wrapper* pw = t.retry;
    t.retry = nullptr;
    if (!pw) pw = next_wrapper(g, t, force);
    if (!pw) break;
    const trace::stamp posted = trace::enabled() ? trace::stamp_now() : trace::stamp{};
    const post_result res =
        pw->type == packet_wrapper::kind::packet
            ? d.post_send_packet(t.conn, std::span<const iovec>(pw->iov.data(), pw->niov), pw)
            : d.post_send_data(t.conn, pw->data_cookie, std::span<const iovec>(pw->iov.data(), pw->niov), pw);
    if (res == post_result::retry) {
      t.retry = pw;
      _host.driver_busy(g);
      _host.posted();  // sleeping threads must see it
      break;
    }
    if (res == post_result::failed) {
      t.retry = pw;  // reclaimed by the gate's clean-up
      // The cause if the driver knows the connection broken (the peer died,
      // closed it), else the refusal itself.
      const std::string broken = d.failure_reason(t.conn);
      _host.send_refused(g, broken.empty() ? "the driver refused a send" : broken);
      return true;
    }
    t.outstanding++;
    t.bytes_in_flight += pw->length;
    t.outstanding_hint.store(t.outstanding, std::memory_order_relaxed);
    t.bytes_hint.store(t.bytes_in_flight, std::memory_order_relaxed);
    t.in_flight.push_back(*pw);
    if (trace::enabled()) trace::emit_stamped(posted, pw->type == packet_wrapper::kind::packet ? trace::event::packet_post : trace::event::data_post, g.rank, t.rail, pw->data_cookie, 0, pw->length, reinterpret_cast<std::uintptr_t>(pw));
    _host.posted();  // the driver may have queued it: sleepers re-arm
    // (The session's totals are the tracks' counters: see stats().)
    if (pw->type == packet_wrapper::kind::packet) {
      t.stats.count_packet(pw->nchunks, pw->length);
    } else {
      t.stats.rdv_transfers.add();
      t.stats.rdv_bytes.add(pw->length);
    }
    if (t.stats.starved_since) {
      t.stats.idle_ns.add(static_cast<std::uint64_t>(steady_ns() - t.stats.starved_since));
      t.stats.starved_since = 0;
    }
  }
  return t.outstanding > 0 || t.retry;
}

// From poll (the driver's lock held): the track first, then the gate.
void scheduler::send_done(packet_wrapper* pw) {
  gate& g = *pw->owner;
  track& t = g.tracks[pw->rail];
  {
    std::lock_guard tl(t.lock);
    if (!pw->track_hook.is_linked()) return;  // reclaimed by a failure meanwhile
    t.in_flight.erase(t.in_flight.iterator_to(*pw));
    if (trace::enabled()) trace::emit(pw->type == packet_wrapper::kind::packet ? trace::event::packet_done : trace::event::data_done, g.rank, t.rail, pw->data_cookie, 0, pw->length, reinterpret_cast<std::uintptr_t>(pw));
    t.outstanding--;
    t.bytes_in_flight -= pw->length;
    t.outstanding_hint.store(t.outstanding, std::memory_order_relaxed);
    t.bytes_hint.store(t.bytes_in_flight, std::memory_order_relaxed);
  }
  {
    std::lock_guard gl(g.lock);
    for (std::size_t i = 0; i < pw->ncarried; ++i) {
      chunk_entry* e = pw->carried[i];
      e->wrappers--;
      _host.entry_sent(g, *e);
    }
    put_wrapper(pw);
  }
  schedule(g);  // the track has room again: this is where strategies act
}

// Anything queued means the strategy path keeps the order and may
// aggregate: no inline send then. A driver another thread holds is not
// waited for.
bool scheduler::send_inline(gate& g, std::uint64_t tag, const void* buf, std::size_t len) {
  track& t = g.tracks[0];
  if (len + sizeof(wire::short_header) > t.max_inline || !g.collect.empty() || !g.data_out.empty() ||
      !g.inline_admits(len) || !t.connected.load(std::memory_order_acquire))
    return false;  // (credit short: the general path, where the message waits for it)
  std::lock_guard tl(t.lock);
  if (t.retry) return false;
  driver_slot& slot = *t.slot;
  if (!slot.lock.try_lock()) return false;
  // (The strategy may ask the driver about its backlog: under its lock.)
  if (!g.strat->allow_inline(view_of(t))) {
    slot.lock.unlock();
    return false;
  }
  // The number is read here and taken only once the driver took the message.
  std::uint32_t& seq = g.seq_counter(tag);
  const wire::short_header h = wire::short_form(tag, seq);
  const iovec iov[2] = {{const_cast<wire::short_header*>(&h), sizeof h}, {const_cast<void*>(buf), len}};
  const trace::stamp posted = trace::enabled() ? trace::stamp_now() : trace::stamp{};
  const post_result res = slot.drv->send_inline(t.conn, std::span<const iovec>(iov, len ? 2 : 1));
  slot.lock.unlock();
  if (res != post_result::posted) return false;  // failed: the general path reports it
  if (trace::enabled()) trace::emit_stamped(posted, trace::event::send_inline, g.rank, 0, h.tag, h.seq, len);
  ++seq;
  g.charge_inline(len);
  t.inline_round = _rounds.load(std::memory_order_relaxed);
  // (The session's totals add the tracks' counters in: see stats().)
  t.stats.inline_sends.add();
  t.stats.inline_bytes.add(sizeof h + len);
  return true;
}

}  // namespace nmad
