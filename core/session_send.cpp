// Send side: requests become chunk entries on their gate's collect list;
// the peer's answers (from the receive path: rtr, cancel answers, credit,
// wants, offer answers) act on the gate's send side -- a ready-to-receive
// becomes a bulk-data transfer.
#include "api/nmad/services/log.hpp"
#include "core/common/events.hpp"
#include "core/session_impl.hpp"

namespace nmad {

// Where the receiver can read our memory, it pulls a rendezvous' bytes as
// soon as it matches (we only learn it is done): the transfer then needs
// nothing from this process, which may be computing meanwhile.
static bool receiver_pulls(const gate& g, const chunk_entry& e) {
  return e.kind == chunk_kind::rdv_req && e.len > 0 && g.tracks[0].caps->rdma_get;
}

// The track-0 driver makes the entry's bytes readable by the peer: the
// address (cookie2) and key (rail, on the wire too) the receiver's post_get
// needs travel in the request. Gate lock held, so the driver is only
// try-locked: busy (or unable), the rendezvous is pushed instead.
static bool expose_for_pull(gate& g, chunk_entry& e) {
  driver_slot& slot = *g.tracks[0].slot;
  if (!slot.lock.try_lock()) return false;
  std::uint64_t addr = 0;
  std::uint32_t key = 0;
  const bool ok = slot.drv->expose(e.ptr, e.len, addr, key);
  slot.lock.unlock();
  if (!ok) return false;
  e.cookie2 = addr;
  e.rail = key;
  return true;
}

// The send side's expose_pull hook (see session_setup): a rendezvous
// request whose bytes the receiver may read itself.
bool session_impl::expose_pull_hook(send_side& side, chunk_entry& e) {
  gate& g = static_cast<gate&>(side);
  return receiver_pulls(g, e) && expose_for_pull(g, e);
}

static bool start_request(session_impl& s, request_state& r, request_state::kind k) {
  if (!r.is_complete()) return false;  // still pending: caller's bug
  r.type = k;
  r.engine = &s;
  r.engine_id = s.serial();
  r.error = errc::ok;
  r.error_message.clear();
  r.cancel_requested = false;
  r.finishing = false;
  r.wake_fd.store(-1, std::memory_order_relaxed);
  r.done.store(false, std::memory_order_relaxed);
  return true;
}

errc session_impl::isend(int dest, tag_t tag, const void* buf, std::size_t len, request_state& r,
                         send_flags flags, std::uint8_t priority) {
  engine_scope scope(*this);
  if (!r.is_complete()) return errc::invalid_argument;
  if (dest < 0 || dest >= _size || (!buf && len > 0)) {
    r.error = errc::invalid_argument;
    r.error_message = dest < 0 || dest >= _size
                          ? "isend: destination rank " + std::to_string(dest) + " out of range [0, " +
                                std::to_string(_size) + ")"
                          : "isend: null buffer with length " + std::to_string(len);
    return r.error;
  }
  start_request(*this, r, request_state::kind::send);
  gate& g = *_gates[dest];
  r.dest = &g;
  r.pending_chunks = 0;
  r.sealed = true;
  r.held_piece = nullptr;
  r.partitioned = false;
  r.seq_pending = false;
  if (g.failed.load(std::memory_order_acquire)) {
    fail_request(r, errc::peer_failed, failure_text(g));
    return errc::peer_failed;
  }
  const bool sync = (static_cast<unsigned>(flags) & static_cast<unsigned>(send_flags::synchronous)) != 0;
  r.first_piece.tag = tag;
  // Copy offload: an eager message the progress thread will copy (only
  // when this thread goes back to the application: see counts_work()).
  // Not to itself: the self driver's copy is the receive's, and a message
  // to self must be there for an any-source receive at once (see irecv).
  const std::size_t rdv_threshold = g.rdv_limit();
  const bool offload = _copy_offload_min && !sync && len >= _copy_offload_min && len < rdv_threshold &&
                       dest != _rank && _waiter.counts_work();
  std::unique_lock gl(g.lock);
  if (!offload && !sync && len < rdv_threshold && _sched.send_inline(g, r.first_piece.tag, buf, len)) {
    gl.unlock();
    complete(r);
    return errc::ok;
  }
  chunk_entry& e = r.first_piece;
  e = chunk_entry{};
  // A synchronous send always goes through the rendezvous: its completion
  // (all data asked for by the receiver's rtr) then means it was matched.
  // An empty one waits for a zero-length rtr (see ask_rdvs).
  e.kind = (sync || len >= rdv_threshold) ? chunk_kind::rdv_req : chunk_kind::data;
  if (e.kind == chunk_kind::rdv_req && events::wanted(layer::event_kind::rdv_started))
    events::emit_message(layer::event_kind::rdv_started, dest, tag, len);
  e.awaiting_ack = sync && len == 0;
  e.flags = chunk_flag::last;
  e.priority = priority;
  e.tag = tag;
  e.ptr = static_cast<const std::byte*>(buf);
  e.offset = 0;
  e.len = len;
  e.msg_len = len;
  r.seq_pending = true;  // numbered when admitted (see queue_piece)
  r.opening = nullptr;
  r.opened = false;
  r.offer_pending = false;
  // Work for the progress thread, unless the receiver pulls the bytes.
  // Counted before the entry is visible: nobody can complete it before.
  if (_waiter.counts_work() && !receiver_pulls(g, e)) {
    r.bg_counted = true;
    _waiter.work_started();
  }
  g.queue_piece(r, e);
  if (trace::enabled()) trace::emit(trace::event::send_submit, dest, 0, tag, e.seq, len);
  gl.unlock();
  if (offload) {
    count(_stats.offloaded_sends);
    offload_schedule(g);
  } else {
    schedule(g);
  }
  return errc::ok;
}

// One task per gate at a time: the task schedules everything the gate
// queued by then. The count keeps a thread that goes to sleep meanwhile
// from sleeping on it (arm_drivers answers busy), and kick() wakes one
// that sleeps already.
void session_impl::offload_schedule(gate& g) {
  if (!g.offload_queued.exchange(true, std::memory_order_acq_rel)) {
    _offloads_queued.fetch_add(1, std::memory_order_seq_cst);
    _tasks.submit(&session_impl::offload_task, &g, task_options{task_repeat::once, 10, {}});
  }
  _waiter.kick();
}

task_result session_impl::offload_task(void* arg) {
  gate& g = *static_cast<gate*>(arg);
  session_impl& s = *g.owner;
  g.offload_queued.store(false, std::memory_order_release);  // later isends queue a new task
  s._offloads_queued.fetch_sub(1, std::memory_order_seq_cst);
  if (waiter::on_progress_thread()) {
    bool queued;
    {
      std::lock_guard gl(g.lock);
      queued = !g.collect.empty();
    }
    if (queued) s.count(s._stats.offload_tasks_by_thread);
  }
  s.schedule(g);
  return {1, true};
}

errc session_impl::pack_begin(int dest, tag_t tag, request_state& r, std::uint8_t priority) {
  engine_scope scope(*this);
  if (!r.is_complete()) return errc::invalid_argument;
  if (dest < 0 || dest >= _size) {
    r.error = errc::invalid_argument;
    r.error_message = "pack_begin: destination rank " + std::to_string(dest) + " out of range";
    return r.error;
  }
  start_request(*this, r, request_state::kind::send);
  if (_waiter.counts_work()) {  // work for the progress thread (nothing queued yet)
    r.bg_counted = true;
    _waiter.work_started();
  }
  gate& g = *_gates[dest];
  r.dest = &g;
  r.pending_chunks = 0;
  r.sealed = false;
  r.held_piece = nullptr;
  r.packed_bytes = 0;
  r.partitioned = false;
  r.first_piece = chunk_entry{};
  r.first_piece.tag = tag;
  r.first_piece.priority = priority;  // every piece's (express ones at least 1)
  if (trace::enabled()) trace::emit(trace::event::send_submit, dest, 0, tag, 0, 0);
  // The whole packed message's sequence number is taken when its first
  // piece is admitted (queue_piece): a message of its domain sent meanwhile
  // never waits at the receiver for pieces this process has not sent.
  r.seq_pending = true;
  r.opening = nullptr;
  r.opened = false;
  r.offer_pending = false;
  std::lock_guard gl(g.lock);
  if (g.failed.load(std::memory_order_acquire))
    fail_request(r, errc::peer_failed, failure_text(g));
  return r.error;
}

errc session_impl::pack_piece(request_state& r, const void* buf, std::size_t len, pack_mode mode) {
  engine_scope scope(*this);
  if (r.type != request_state::kind::send || r.sealed) return errc::invalid_argument;
  if (!buf && len > 0) return errc::invalid_argument;
  gate& g = *r.dest;
  std::unique_lock gl(g.lock);
  if (r.finished()) return r.error;  // failed peer
  // The previous piece is not the last one: queue it now.
  if (r.held_piece) {
    g.queue_piece(r, *r.held_piece);
    r.held_piece = nullptr;
  }
  chunk_entry* e = g.entry_pool.get();
  *e = chunk_entry{};
  e->pooled = true;
  e->kind = len >= g.rdv_limit() ? chunk_kind::rdv_req : chunk_kind::data;
  if (e->kind == chunk_kind::rdv_req && events::wanted(layer::event_kind::rdv_started))
    events::emit_message(layer::event_kind::rdv_started, g.rank, r.first_piece.tag, len);
  e->priority = mode == pack_mode::express ? std::max<std::uint8_t>(r.first_piece.priority, 1)
                                           : r.first_piece.priority;
  e->hints = mode == pack_mode::express ? chunk_hint::express : chunk_hint::cheaper;
  e->tag = r.first_piece.tag;
  e->ptr = static_cast<const std::byte*>(buf);
  e->offset = r.packed_bytes;
  e->len = len;
  e->msg_len = chunk_entry::unknown_length;
  r.packed_bytes += len;
  r.held_piece = e;
  gl.unlock();
  schedule(g);
  return errc::ok;
}

errc session_impl::pack_end(request_state& r) {
  if (r.type != request_state::kind::send || r.sealed) return errc::invalid_argument;
  pack_seal(r);
  return wait(r);
}

errc session_impl::pack_seal(request_state& r) {
  {
    engine_scope scope(*this);
    if (r.type != request_state::kind::send || r.sealed) return errc::invalid_argument;
    gate& g = *r.dest;
    std::unique_lock gl(g.lock);
    if (!r.finished()) {
      chunk_entry* e = r.held_piece;
      if (!e) {  // empty message: one empty chunk ends it
        e = g.entry_pool.get();
        *e = chunk_entry{};
        e->pooled = true;
        e->kind = chunk_kind::data;
        e->priority = r.first_piece.priority;
        e->tag = r.first_piece.tag;
        e->offset = 0;
      }
      e->flags |= chunk_flag::last;
      e->msg_len = r.packed_bytes;
      r.held_piece = nullptr;
      r.sealed = true;
      g.queue_piece(r, *e);
      g.strat->flush();  // the message is whole: nothing of it may be held
      gl.unlock();
      schedule(g);
    } else {
      r.sealed = true;
    }
  }
  return r.finished() ? r.error : errc::ok;
}

errc session_impl::psend_begin(int dest, tag_t tag, std::uint64_t len, request_state& r, std::uint8_t priority) {
  const errc e = pack_begin(dest, tag, r, priority);
  if (e != errc::ok) return e;
  r.partitioned = true;
  r.part_total = len;
  if (len == 0) return pack_seal(r);  // nothing will be handed over: the empty message leaves now
  return errc::ok;
}

// A piece of a partitioned message: queued at once (no piece is held back
// to carry `last`: every chunk announces the message's length). The piece
// that completes the message seals the request and lets the strategy send
// whatever it kept for aggregation.
errc session_impl::psend_piece(request_state& r, std::uint64_t offset, const void* buf, std::uint64_t len) {
  engine_scope scope(*this);
  if (r.type != request_state::kind::send || !r.partitioned || r.is_complete()) return errc::invalid_argument;
  if (!buf || len == 0) return errc::invalid_argument;
  gate& g = *r.dest;
  std::unique_lock gl(g.lock);
  if (r.finished()) return r.error;  // failed peer
  if (r.sealed || offset > r.part_total || len > r.part_total - offset || len > r.part_total - r.packed_bytes)
    return errc::invalid_argument;
  chunk_entry* e = g.entry_pool.get();
  *e = chunk_entry{};
  e->pooled = true;
  e->kind = len >= g.rdv_limit() ? chunk_kind::rdv_req : chunk_kind::data;
  if (e->kind == chunk_kind::rdv_req && events::wanted(layer::event_kind::rdv_started))
    events::emit_message(layer::event_kind::rdv_started, g.rank, r.first_piece.tag, len);
  e->priority = r.first_piece.priority;
  e->hints = chunk_hint::cheaper;
  e->tag = r.first_piece.tag;
  e->ptr = static_cast<const std::byte*>(buf);
  e->offset = offset;
  e->len = len;
  e->msg_len = r.part_total;
  r.packed_bytes += len;
  const bool whole = r.packed_bytes == r.part_total;
  if (whole) r.sealed = true;
  g.queue_piece(r, *e);
  if (whole) g.strat->flush();
  gl.unlock();
  schedule(g);
  return errc::ok;
}

void session_impl::entry_progress(gate& g, chunk_entry& e) {
  if (e.wrappers > 0 || e.hook.is_linked()) return;
  switch (e.kind) {
    case chunk_kind::rtr:
    case chunk_kind::cancel_req:
    case chunk_kind::cancel_ack:
    case chunk_kind::credit:
    case chunk_kind::want:
    case chunk_kind::offer_ack:
      g.entry_pool.put(&e);
      return;
    case chunk_kind::failure_notice:
      g.notice_sent.store(true, std::memory_order_release);
      g.entry_pool.put(&e);
      return;
    case chunk_kind::data:
      if (e.len > 0) return;
      break;
    case chunk_kind::rdv_req:
      if (e.rdv_left > 0 || e.awaiting_ack) return;
      break;
  }
  request_state* r = e.req;
  if (r && r->opening == &e) r->opening = nullptr;  // (recycled below: see request_state::opened)
  if (e.pooled) g.entry_pool.put(&e);
  if (r) {
    r->pending_chunks--;
    finish_send_if_done(*r);
  }
}

void session_impl::finish_send_if_done(request_state& r) {
  if (r.pending_chunks == 0 && r.sealed && !r.finished()) {
    if (trace::enabled()) trace_completion(r);
    complete(r);
  }
}

// ---- the peer's control chunks for the send side -----------------------------

// The receive path's hand-over (receive_path::host), matching lock held.
void receive_path::host::send_side_chunk(gate& g, const wire::chunk_header& h) {
  session_impl& s = static_cast<session_impl&>(*this);
  switch (static_cast<chunk_kind>(h.kind)) {
    case chunk_kind::rtr:
      s.handle_rtr(g, h);
      return;
    case chunk_kind::cancel_ack:
      s.handle_cancel_ack(g, h);
      return;
    case chunk_kind::credit:
      s.handle_credit(g, h);
      return;
    case chunk_kind::want:
      s.handle_want(g, h);
      return;
    case chunk_kind::offer_ack:
      s.handle_offer_ack(g, h);
      return;
    default:
      return;  // (the receive path hands over only these)
  }
}

void session_impl::handle_rtr(gate& g, const wire::chunk_header& h) {
  if (trace::enabled()) trace::emit(trace::event::rdv_ready, g.rank, h.rail, h.tag, h.seq, h.len, h.offset);
  std::unique_lock gl(g.lock);
  auto it = g.rdv_out.find(h.cookie);
  if (it == g.rdv_out.end()) {
    protocol_violation(g, "ready-to-receive for unknown cookie " + std::to_string(h.cookie));
    return;
  }
  chunk_entry& e = *it->second;
  if (e.flags & chunk_flag::offer) g.on_offer_taken(e);  // asked for: its receive took it
  if (h.offset < e.offset || h.offset + h.len > e.offset + e.len || h.len > e.rdv_left ||
      h.rail >= g.tracks.size()) {
    protocol_violation(g, "ready-to-receive outside its rendezvous range");
    return;
  }
  if ((h.flags & chunk_flag::pulled) && !(e.flags & chunk_flag::pullable)) {
    protocol_violation(g, "pulled a rendezvous that was not offered for pulling");
    return;
  }
  e.rdv_left -= h.len;
  e.awaiting_ack = false;
  if (e.rdv_left == 0) {
    g.rdv_out.erase(it);
    end_exposure(g, e);
  }
  if (!(h.flags & (chunk_flag::discard | chunk_flag::pulled)) && h.len > 0) {
    e.wrappers++;  // released when the data wrapper completes
    g.data_out.push_back({&e, h.cookie2, h.offset, h.len, h.rail});
  }
  entry_progress(g, e);
  gl.unlock();
  schedule(g);
}

// Flow control (see "Credits" in core/protocol/wire.hpp): the gate's
// send_side (core/collect/send_side.hpp) keeps the held messages, wants and
// offers; the session applies the peer's chunks to it, completes what it
// withdraws and fails a gate that breaks the protocol.

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

// ---- cancelling a send -----------------------------------------------------
//
// Only a rendezvous (large or synchronous send) can be cancelled: eager data
// completes the send by itself. The sender asks the receiver to withdraw the
// message (cancel_req with its tag, sequence and cookie); the receiver
// removes it from its unexpected queue if no receive has matched it and
// answers cancel_ack with cancel_ok, or answers without the flag when a
// receive already took it (its ready-to-receive then comes as usual). So a
// cancelled send completes either with errc::cancelled, never to be
// received, or normally.

bool session_impl::cancel_send(request_state& r) {
  if (!r.dest) return false;
  gate& g = *r.dest;
  std::unique_lock gl(g.lock);
  if (withdraw_held(g, r)) {  // it waited for credit: the receiver never saw it
    gl.unlock();
    schedule(g);
    return true;
  }
  if (r.finished() || r.cancel_requested || !r.sealed) return false;
  chunk_entry& e = r.first_piece;
  if (g.failed.load(std::memory_order_acquire) || e.kind != chunk_kind::rdv_req || r.held_piece) return false;
  auto it = g.rdv_out.find(e.cookie);
  const bool unanswered = it != g.rdv_out.end() && it->second == &e && (e.len == 0 ? e.awaiting_ack : e.rdv_left == e.len);
  if (!unanswered) return false;  // the receiver already asked for the data
  r.cancel_requested = true;
  chunk_entry* c = g.entry_pool.get();
  *c = chunk_entry{};
  c->pooled = true;
  c->kind = chunk_kind::cancel_req;
  c->tag = e.tag;
  c->seq = e.seq;
  c->cookie = e.cookie;
  c->msg_len = chunk_entry::unknown_length;
  g.collect.push_back(*c);  // after the rendezvous request, if still queued
  gl.unlock();
  schedule(g);
  return true;
}

void session_impl::handle_cancel_ack(gate& g, const wire::chunk_header& h) {
  std::lock_guard gl(g.lock);
  auto it = g.rdv_out.find(h.cookie);
  if (it == g.rdv_out.end()) return;  // answered meanwhile: nothing to undo
  chunk_entry& e = *it->second;
  request_state* r = e.req;
  if (!r || !r->cancel_requested || e.tag != h.tag || e.seq != h.seq) {
    protocol_violation(g, "cancel answer for a send that asked none");
    return;
  }
  if (!(h.flags & chunk_flag::cancel_ok)) return;  // matched: the rtr follows
  g.rdv_out.erase(it);
  end_exposure(g, e);
  e.rdv_left = 0;
  e.awaiting_ack = false;
  r->error = errc::cancelled;
  r->error_message = "send cancelled";
  entry_progress(g, e);  // completes the request once no wrapper carries it
}

}  // namespace nmad
