// Progress, driver events, completion and failure handling, and what the
// receive path asks of the session.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <set>
#include <thread>

#include "api/nmad/services/log.hpp"
#include "api/nmad/services/thread_heap.hpp"
#include "core/common/events.hpp"
#include "core/session_impl.hpp"

namespace nmad {

// A request's completion as a trace record (tracing on).
void session_impl::trace_completion(const request_state& r) {
  if (r.type == request_state::kind::send)
    trace::emit(trace::event::send_done, r.dest ? r.dest->rank : -1, 0, r.first_piece.tag, 0, 0, static_cast<std::uint64_t>(r.error));
  else
    trace::emit(trace::event::recv_done, r.msg.source, 0, r.msg.tag, r.msg.seq, r.msg.total, static_cast<std::uint64_t>(r.error));
}

// ---- driver events: route to the engine ------------------------------------

void driver_slot::on_connected(connection_id conn, int peer_rank) { engine->connected(*this, conn, peer_rank); }
void driver_slot::on_packet(connection_id conn, std::span<const std::byte> packet) {
  engine->packet_arrived(*this, conn, packet);
}
void driver_slot::on_send_done(void* token) { engine->send_done(static_cast<packet_wrapper*>(token)); }
void driver_slot::on_recv_data_done(void* token, std::size_t received) {
  engine->recv_data_done(static_cast<rdv_recv*>(token), received);
}
void driver_slot::on_connection_failed(connection_id conn, std::string_view reason) {
  engine->connection_failed(*this, conn, reason);
}

void session_impl::connected(driver_slot& slot, connection_id conn, int peer_rank) {
  if (peer_rank < 0 || peer_rank >= _size) {
    log_write(log_level::warn, "session", "connection claims invalid rank " + std::to_string(peer_rank));
    slot.drv->close_connection(conn);
    return;
  }
  gate& g = *_gates[peer_rank];
  track* found = nullptr;  // the gate's track on this driver (one per driver)
  for (track& tr : g.tracks)
    if (tr.slot == &slot) found = &tr;
  gate* known = slot.gates.find(conn);  // our own connect() to that peer
  if (!found || found->connected || (known && known != &g)) {
    log_write(log_level::warn, "session",
              "refused a second connection claiming to be " + peer_name(g));
    slot.drv->close_connection(conn);
    return;
  }
  track& t = *found;
  {
    std::lock_guard gl(g.lock);
    std::lock_guard tl(t.lock);
    t.conn = conn;
    t.connected.store(true, std::memory_order_release);
  }
  slot.gates.set(conn, &g);
  schedule(g);
}

void session_impl::connection_failed(driver_slot& slot, connection_id conn, std::string_view reason) {
  gate* found = slot.gates.find(conn);
  if (!found) return;  // not a gate of ours (e.g. refused)
  gate& g = *found;
  slot.gates.erase(conn);
  if (_finalizing.load(std::memory_order_relaxed)) {
    g.failed = true;
    return;
  }
  // Several rails: the gate fails with the first of them (what that rail
  // had in flight is lost and the protocol does not resend it); the reason
  // names the rail.
  std::string why(reason);
  if (g.tracks.size() > 1)
    for (const track& t : g.tracks)
      if (t.slot == &slot)
        why = "rail " + std::to_string(t.rail + 1) + " of " + std::to_string(g.tracks.size()) + " (" +
              slot.caps.name + ") failed: " + why;
  if (events::wanted(layer::event_kind::rail_failed))
    events::emit_text(layer::event_kind::rail_failed, g.rank, std::string(slot.caps.name) + ": " + std::string(reason));
  fail_gate(g, std::move(why));
}

// ---- progress ----------------------------------------------------------------

[[gnu::tls_model("initial-exec")]] thread_local int session_impl::t_depth = 0;
[[gnu::tls_model("initial-exec")]] thread_local session_impl::thread_work* session_impl::t_work = nullptr;
session_impl::thread_work& session_impl::work_of_thread() {
  thread_work* w = t_work;
  return w ? *w : thread_heap::create(t_work);
}

int session_impl::progress(bool wait_busy_drivers) {
  engine_scope scope(*this);
  return progress_now(wait_busy_drivers);
}

int session_impl::progress_now(bool wait_busy_drivers) {
  int work = 0;
  // A quiet driver (nothing connected or posted) is polled one round in 64
  // only, for connections that may still come. (Racing threads may lose a
  // count: the round number is only a hint.)
  const unsigned round = _rounds.load(std::memory_order_relaxed) + 1;
  _rounds.store(round, std::memory_order_relaxed);
  const bool all = (round & 63) == 0 || _connecting;
  for (auto& slot : _slots) {
    // A driver another thread polls (or posts on) is skipped, not waited
    // for, unless the caller asked to (it holds no engine lock then: the
    // driver lock is the first of the lock order).
    if (wait_busy_drivers) slot->lock.lock();
    else if (!slot->lock.try_lock()) continue;
    if (all || !slot->drv->quiet()) work += slot->drv->poll();
    slot->lock.unlock();
  }
  // The progress tasks (one thread at a time; see progress_engine.hpp).
  work += _tasks.run_round();
  // Operations refused with `retry` or deferred from a busy driver (a
  // packet posted now is work: the next round may have to handle its
  // consequences, e.g. a send to this process itself).
  if (_pending_any.load(std::memory_order_acquire)) work += flush_pending();
  // Work another thread took off the shared lists and has not finished
  // (flush_pending): not an idle round.
  if (work == 0 && _flushing.load(std::memory_order_acquire) > 0) work = 1;
  return work;
}

void session_impl::leave_engine() {
  if (_pending_any.load(std::memory_order_acquire)) {
    ++t_depth;  // completions made while flushing are deferred to below
    flush_pending();
    --t_depth;
  }
  if (deferred_waiting()) run_deferred();
}

void session_impl::defer_schedule(gate& g) {
  std::lock_guard pl(_pending_lock);
  if (std::find(_pending_gates.begin(), _pending_gates.end(), &g) == _pending_gates.end())
    _pending_gates.push_back(&g);
  _pending_any.store(true, std::memory_order_release);
}

int session_impl::flush_pending() {
  std::vector<failure> failures;
  std::vector<gate*> gates;
  {
    std::lock_guard pl(_pending_lock);
    failures.swap(_failures);
    gates.swap(_pending_gates);
    _pending_any.store(false, std::memory_order_relaxed);
    if (failures.empty() && gates.empty()) return 0;
    // Taken off the shared lists but not done yet: another thread's round
    // must not conclude meanwhile that nothing is left to do (a test call
    // would report a request that this flush is about to complete as
    // pending; see progress_now).
    _flushing.fetch_add(1, std::memory_order_acq_rel);
  }
  for (const failure& f : failures) clean_up_failed(*f.g, f.close);
  for (gate* g : gates) {
    _recv.retry_asks(*g);
    schedule(*g);
  }
  _flushing.fetch_sub(1, std::memory_order_acq_rel);
  return static_cast<int>(failures.size() + gates.size());
}

int session_impl::progress_round() {
  engine_scope scope(*this);
  return progress_now();
}

// Arms every driver; their descriptors follow the ones the waiter put first.
// Which entries belong to which driver is recomputed by disarm_drivers from
// the counts kept in the thread's work (one arm per thread at a time). A
// driver another thread is polling makes the answer busy (poll again).
arm_result session_impl::arm_drivers(std::vector<pollfd>& fds, int& timeout_ms) {
  engine_scope scope(*this);
  thread_work& w = work_of_thread();
  w.arm_counts.assign(_slots.size(), 0);
  w.armed.assign(_slots.size(), false);
  arm_result result = _pending_any.load(std::memory_order_acquire) || _offloads_queued.load(std::memory_order_seq_cst) > 0
                          ? arm_result::busy
                          : arm_result::armed;
  for (std::size_t i = 0; i < _slots.size() && result != arm_result::busy; ++i) {
    driver_slot& slot = *_slots[i];
    if (!slot.lock.try_lock()) {
      result = arm_result::busy;
      break;
    }
    const std::size_t before = fds.size();
    const arm_result r = slot.drv->arm_wakeup(fds, timeout_ms);
    slot.lock.unlock();
    w.armed[i] = true;
    w.arm_counts[i] = fds.size() - before;
    if (r == arm_result::busy) result = arm_result::busy;
    else if (r == arm_result::cannot && result == arm_result::armed) result = arm_result::cannot;
  }
  return result;
}

void session_impl::disarm_drivers(std::span<const pollfd> fds) {
  engine_scope scope(*this);
  const thread_work& w = work_of_thread();
  std::size_t total = 0;
  for (std::size_t n : w.arm_counts) total += n;
  std::size_t pos = fds.size() - total;  // the drivers' entries come last
  for (std::size_t i = 0; i < _slots.size() && i < w.arm_counts.size(); ++i) {
    if (w.armed[i]) {
      std::lock_guard dl(_slots[i]->lock);  // nothing else held: may wait
      _slots[i]->drv->disarm_wakeup(fds.subspan(pos, w.arm_counts[i]));
    }
    pos += w.arm_counts[i];
  }
}

void session_impl::wait_until(request_state& r) {
  _waiter.wait([](void* p) { return static_cast<request_state*>(p)->is_complete(); }, &r, &r.wake_fd);
}

bool session_impl::test(request_state& r) {
  if (r.is_complete()) return true;
  int work;
  {
    engine_scope scope(*this);
    work = progress_now();
  }
  if (r.is_complete()) return true;
  if (work == 0) _waiter.idle_poll();  // the polling discipline (waiter.hpp)
  return false;
}

errc session_impl::wait(request_state& r) {
  wait_until(r);
  return r.error;
}

int session_impl::wait_any(std::span<request* const> reqs) {
  bool any = false;
  for (request* q : reqs) any |= (q != nullptr);
  if (!any) return -1;
  int found = -1;
  _waiter.wait([&] {
    for (std::size_t i = 0; i < reqs.size(); ++i)
      if (reqs[i] && reqs[i]->completed()) {
        found = static_cast<int>(i);
        return true;
      }
    return false;
  });
  return found;
}

int session_impl::add_progress_task(int (*fn)(void*), void* arg) {
  return _tasks.submit(progress_engine::work_fn{fn}, arg);
}

void session_impl::remove_progress_task(int id) { _tasks.cancel(id); }

void session_impl::abort(int exit_code, const std::string& message) {
  {
    bool told = false;
    try {
      _boot->abort(exit_code, message);
      told = true;
    } catch (...) {
    }
    // The launcher ends the whole job with our code. Exiting at once would
    // let the peers see this process die and fail on their own, racing the
    // launcher with their own (other) exit codes: give it a moment to end
    // us first.
    if (told && _size > 1)
      for (int i = 0; i < 100; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::_Exit(exit_code);
}

// ---- completion and failure ------------------------------------------------------

// Any lock may be held: a request with a callback completes when the
// thread leaves the engine (the callback runs first, outside every lock).
void session_impl::complete(request_state& r) {
  // (A receive completes under the matching lock.)
  if (r.unpack_waiting) _recv.note_unpack_waiting(*_gates[r.msg.source], r, false);
  // (A send that succeeded was recorded by finish_send_if_done; one sent
  // inline by its send_inline record.)
  if (trace::enabled() && (r.type == request_state::kind::recv || r.error != errc::ok)) trace_completion(r);
  if (r.cb && r.owner) {
    r.finishing = true;
    work_of_thread().deferred.push({this, &r});
    if (t_depth == 0) run_deferred();  // not inside the engine: no lock held
    return;
  }
  publish(r);
}

void session_impl::publish(request_state& r) {
  // After the store below the request may be gone (its owner saw it
  // done): its wake slot is read before.
  const int fd = _waiter.claim(r.wake_fd);
  if (r.bg_counted) {
    r.bg_counted = false;
    _waiter.work_finished();
  }
  r.done.store(true, std::memory_order_release);
  _waiter.notify(fd);  // a thread may sleep waiting for it
}

void session_impl::run_deferred() {
  // A callback may enter the engine again; its own outermost scope then
  // runs what it completed (above the mark) before returning here.
  thread_work& w = work_of_thread();
  std::vector<deferred_completion>& batch = w.batch;
  const std::size_t mark = batch.size();
  deferred_queue& pending = w.deferred;
  batch.insert(batch.end(), pending.items, pending.items + std::min(pending.size, deferred_queue::kInline));
  if (pending.size > deferred_queue::kInline) {
    batch.insert(batch.end(), pending.spill.begin(), pending.spill.end());
    pending.spill.clear();
  }
  pending.size = 0;
  for (std::size_t i = mark; i < batch.size(); ++i) {
    const deferred_completion d = batch[i];
    request_state& r = *d.r;
    // The callback runs just before the request counts as complete: once
    // it does, its owner may destroy it at any moment.
    r.cb(*r.owner, r.cb_arg);
    d.s->publish(r);
  }
  batch.resize(mark);
}

// ---- requests destroyed while pending ---------------------------------------------

namespace {
// The sessions alive in this process, with their serial numbers (a request
// names its session by both). Touched at session start and end and when a
// pending request is destroyed: never on the message path.
std::mutex g_live_lock;
std::vector<std::pair<const session_impl*, std::uint64_t>> g_live;
std::uint64_t g_next_serial = 1;
}  // namespace

std::uint64_t session_impl::enlist(session_impl* s) {
  std::lock_guard l(g_live_lock);
  g_live.emplace_back(s, g_next_serial);
  return g_next_serial++;
}

void session_impl::delist(session_impl* s) {
  std::lock_guard l(g_live_lock);
  std::erase_if(g_live, [s](const auto& e) { return e.first == s; });
}

void session_impl::abandon(request_state& r) {
  {
    std::lock_guard l(g_live_lock);
    const std::pair<const session_impl*, std::uint64_t> key{r.engine, r.engine_id};
    if (std::find(g_live.begin(), g_live.end(), key) == g_live.end()) return;  // its session is gone
  }
  r.engine->abandon_request(r);
}

// Cancels what can be (nothing of it has reached the peer, or the peer
// withdraws it), then waits until the request completes: from then on no
// list, map, driver or deferred completion refers to it (a completed
// request is on none: every path that completes one takes it off first,
// and a gate's failure clean-up fails only requests it finds there). Its
// callback is dropped unless its completion is already being reported.
void session_impl::abandon_request(request_state& r) {
  if (r.type == request_state::kind::recv) {
    engine_scope scope(*this);
    std::lock_guard ml(_recv.lock());
    if (!r.finishing) r.cb = nullptr;
    if (!r.finished()) {
      if (!r.matched) {
        if (_recv.withdraw(r)) {  // never matched: it never takes a message
          r.error = errc::cancelled;
          r.error_message = "receive destroyed while pending";
          complete(r);
        }
      } else if (!r.recv_sealed) {
        // An unpack whose next pieces will never come: what its segments
        // do not hold is dropped, as for a receive too small.
        r.recv_sealed = true;
        _recv.drain_buffered(r);
        if (!r.msg.failed) _recv.ask_rdvs(*_gates[r.msg.source], r);
        _recv.finish_recv_if_done(r);
      }
    }
  } else if (r.type == request_state::kind::send) {
    // A packed message's last piece: the message ends here. A partitioned
    // one with pieces missing cannot end (its length was announced): what
    // was handed over still goes, the receiver waits for the rest.
    if (!r.sealed && !r.partitioned) pack_seal(r);
    {
      engine_scope scope(*this);
      std::lock_guard gl(r.dest->lock);
      if (!r.finishing) r.cb = nullptr;
      withdraw_held(*r.dest, r);  // still waiting for credit: the receiver never saw it
      if (!r.sealed) {  // (partitioned) done once what it handed over left
        r.sealed = true;
        finish_send_if_done(r);
      }
    }
    cancel(r);  // an unmatched rendezvous: withdrawn (or matched meanwhile, then sent)
  }
  wait_until(r);
}

// The lock of r's domain held (gate lock for a send, matching lock for a
// receive), or both.
void session_impl::fail_request(request_state& r, errc e, std::string message) {
  if (r.finished()) return;
  if (r.error == errc::ok) {
    r.error = e;
    r.error_message = std::move(message);
  }
  complete(r);
}

void session_impl::protocol_violation(gate& g, const std::string& what) {
  count(_stats.protocol_errors);
  log_write(log_level::warn, "session", "protocol error from " + peer_name(g) + ": " + what +
                                            "; closing the connection");
  fail_gate(g, "protocol error: " + what, /*close=*/true);
}

void session_impl::fail_gate(gate& g, std::string reason, bool close) {
  {
    std::lock_guard pl(_pending_lock);
    if (g.fail_queued) return;
    g.fail_queued = true;
    g.fail_reason = reason;
    if (_first_failed < 0) {
      _first_failed = g.rank;
      _first_failure = peer_name(g) + " failed: " + reason + reported_cause(g);
    }
    _failures.push_back({&g, close});
    _pending_any.store(true, std::memory_order_release);
  }
  // From here on nothing new starts on the gate; what is under way is
  // failed by clean_up_failed at this thread's next lock-free point.
  g.failed.store(true, std::memory_order_release);
  log_write(log_level::warn, "session", peer_name(g) + " failed: " + reason);
}

std::string session_impl::failure_text(const gate& g) {
  std::string text = peer_name(g) + " failed: " + g.fail_reason;
  std::lock_guard pl(_pending_lock);
  // The first failure seen here, unless g's is the one it was caused by
  // (a peer that closed because g's peer died, as it reported).
  if (_first_failed >= 0 && _first_failed != g.rank) {
    if (_gates[_first_failed]->cause_reported.load(std::memory_order_acquire) != g.rank)
      text += " (after " + _first_failure + ")";
  } else {
    text += reported_cause(g);
  }
  return text;
}

std::string session_impl::reported_cause(const gate& g) const {
  const int cause = g.cause_reported.load(std::memory_order_acquire);
  if (cause < 0) return {};
  return " (after " + peer_name(*_gates[cause]) + " failed, as " + peer_name(g) + " reported)";
}

void session_impl::clean_up_failed(gate& g, bool close) {
  const std::string msg = failure_text(g);
  // The drivers first (one at a time, nothing else held): no more events
  // of these connections reach the gate.
  for (track& t : g.tracks) {
    std::lock_guard dl(t.slot->lock);
    if (t.conn != invalid_connection && t.slot->gates.find(t.conn) == &g) {
      t.slot->gates.erase(t.conn);
      if (close) t.slot->drv->close_connection(t.conn);
    }
  }
  std::lock_guard ml(_recv.lock());
  {
    std::lock_guard gl(g.lock);
    // Send side: every entry still queued, in flight, or waiting for a
    // ready-to-receive belongs to a request that can no longer complete.
    std::set<chunk_entry*> entries;
    std::set<request_state*> sends;
    auto note = [&](chunk_entry* e) {
      entries.insert(e);
      if (e->req) sends.insert(e->req);
    };
    for (track& t : g.tracks) {
      std::lock_guard tl(t.lock);
      t.connected.store(false, std::memory_order_release);
      auto reclaim = [&](packet_wrapper* pw) {
        for (std::size_t i = 0; i < pw->ncarried; ++i) note(pw->carried[i]);
        put_wrapper(pw);
      };
      while (!t.in_flight.empty()) {
        packet_wrapper& pw = t.in_flight.front();
        t.in_flight.pop_front();
        reclaim(&pw);
      }
      if (t.retry) reclaim(t.retry);
      t.retry = nullptr;
      t.outstanding = 0;
      t.bytes_in_flight = 0;
      t.outstanding_hint.store(0, std::memory_order_relaxed);
      t.bytes_hint.store(0, std::memory_order_relaxed);
    }
    while (!g.collect.empty()) {
      chunk_entry& e = g.collect.front();
      g.collect.pop_front();
      note(&e);
    }
    while (!g.held.empty()) {
      chunk_entry& e = g.held.front();
      g.held.pop_front();
      note(&e);
    }
    g.held_by_tag.clear();
    g.held_pieces = 0;
    g.wants.clear();
    g.offered.clear();
    for (auto& ds : g.data_out) note(ds.entry);
    g.data_out.clear();
    for (auto& [cookie, e] : g.rdv_out) {
      end_exposure(g, *e);
      note(e);
    }
    g.rdv_out.clear();
    // The pool's entries first: once failed, a request (and the entries
    // inside it) may be gone at any moment (another thread saw it done).
    for (chunk_entry* e : entries)
      if (e->pooled) g.entry_pool.put(e);
    for (request_state* r : sends) {
      if (r->held_piece && r->held_piece->pooled) g.entry_pool.put(r->held_piece);
      r->held_piece = nullptr;
      fail_request(*r, errc::peer_failed, msg);
    }
  }

  // Receive side: what g's peer was to complete fails, and what waits for it.
  _recv.gate_failed(g, msg, no_live_peer());
}

bool session_impl::no_live_peer() const {
  if (_size <= 1) return false;  // alone: only this process can send to itself
  for (const auto& g : _gates)
    if (g->rank != _rank && !g->failed.load(std::memory_order_acquire)) return false;
  return true;
}

// ---- what the receive path asks of the session ------------------------------
// (receive_path::host, core/receive/receive_path.hpp: direct calls, the
// session being the one host; send_side_chunk is in session_send.cpp.)

void receive_path::host::complete(request_state& r) { static_cast<session_impl&>(*this).complete(r); }

void receive_path::host::fail_request(request_state& r, errc e, std::string message) {
  static_cast<session_impl&>(*this).fail_request(r, e, std::move(message));
}

void receive_path::host::protocol_violation(gate& g, const std::string& what) {
  static_cast<session_impl&>(*this).protocol_violation(g, what);
}

void receive_path::host::fail_gate(gate& g, std::string reason) {
  static_cast<session_impl&>(*this).fail_gate(g, std::move(reason));
}

std::string receive_path::host::failure_text(const gate& g) {
  return static_cast<session_impl&>(*this).failure_text(g);
}

void receive_path::host::driver_busy(gate& g) { static_cast<session_impl&>(*this).defer_schedule(g); }

}  // namespace nmad
