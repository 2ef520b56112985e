// Progress, the NIC-driven scheduler, driver events and failure handling.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <set>
#include <thread>

#include "core/common/log.hpp"
#include "core/session_impl.hpp"

namespace nmad {

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
  t.conn = conn;
  t.connected = true;
  slot.gates.set(conn, &g);
  schedule(g);
}

void session_impl::connection_failed(driver_slot& slot, connection_id conn, std::string_view reason) {
  gate* found = slot.gates.find(conn);
  if (!found) return;  // not a gate of ours (e.g. refused)
  gate& g = *found;
  slot.gates.erase(conn);
  if (_finalizing) {
    g.failed = true;
    return;
  }
  fail_gate(g, std::string(reason));
}

// ---- progress ----------------------------------------------------------------

int session_impl::progress() {
  engine_guard guard(*this);
  return progress_locked();
}

int session_impl::progress_locked() {
  int work = 0;
  // A quiet driver (nothing connected or posted) is polled one round in 64
  // only, for connections that may still come.
  const bool all = (++_rounds & 63) == 0 || _connecting;
  for (auto& slot : _slots)
    if (all || !slot->drv->quiet()) work += slot->drv->poll();
  // Index loop: a task may add or remove tasks.
  for (std::size_t i = 0; i < _tasks.size(); ++i) work += _tasks[i].fn(_tasks[i].arg);
  // Operations a driver refused with `retry` are offered again.
  if (!_retry_gates.empty()) {
    std::vector<gate*> gates;
    gates.swap(_retry_gates);
    for (gate* g : gates) schedule(*g);
  }
  return work;
}

int session_impl::progress_round() {
  engine_guard guard(*this);
  return progress_locked();
}

// Arms every driver; their descriptors follow the ones the waiter put first.
// Which entries belong to which driver is recomputed by disarm_drivers from
// the counts kept here (one arm per thread at a time: thread_local).
namespace {
thread_local std::vector<std::size_t> t_arm_counts;
}

arm_result session_impl::arm_drivers(std::vector<pollfd>& fds, int& timeout_ms) {
  engine_guard guard(*this);
  t_arm_counts.assign(_slots.size(), 0);
  arm_result result = _retry_gates.empty() ? arm_result::armed : arm_result::busy;
  for (std::size_t i = 0; i < _slots.size(); ++i) {
    const std::size_t before = fds.size();
    const arm_result r = _slots[i]->drv->arm_wakeup(fds, timeout_ms);
    t_arm_counts[i] = fds.size() - before;
    if (r == arm_result::busy) result = arm_result::busy;
    else if (r == arm_result::cannot && result == arm_result::armed) result = arm_result::cannot;
  }
  return result;
}

void session_impl::disarm_drivers(std::span<const pollfd> fds) {
  engine_guard guard(*this);
  std::size_t total = 0;
  for (std::size_t n : t_arm_counts) total += n;
  std::size_t pos = fds.size() - total;  // the drivers' entries come last
  for (std::size_t i = 0; i < _slots.size() && i < t_arm_counts.size(); ++i) {
    _slots[i]->drv->disarm_wakeup(fds.subspan(pos, t_arm_counts[i]));
    pos += t_arm_counts[i];
  }
}

void session_impl::wait_until(request_state& r) {
  _waiter.wait([](void* p) { return static_cast<request_state*>(p)->is_complete(); }, &r, &r.wake_fd);
}

bool session_impl::test(request_state& r) {
  if (r.is_complete()) return true;
  engine_guard guard(*this);
  progress_locked();
  return r.is_complete();
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
  engine_guard guard(*this);
  const int id = _next_task_id++;
  _tasks.push_back({id, fn, arg});
  return id;
}

void session_impl::remove_progress_task(int id) {
  engine_guard guard(*this);
  std::erase_if(_tasks, [id](const progress_task& t) { return t.id == id; });
}

void session_impl::abort(int exit_code, const std::string& message) {
  {
    engine_guard guard(*this);
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

// ---- the NIC-driven scheduler --------------------------------------------------

packet_wrapper* session_impl::get_wrapper(gate& g, track& t) {
  packet_wrapper* pw = _wrapper_pool.get();
  const std::size_t cap = t.slot->drv->caps().max_packet_size;
  if (pw->staging_capacity < cap) {
    pw->staging = std::make_unique<std::byte[]>(cap);
    pw->staging_capacity = cap;
  }
  pw->reset();
  pw->owner = &g;
  pw->rail = t.rail;
  return pw;
}

void session_impl::put_wrapper(packet_wrapper* pw) { _wrapper_pool.put(pw); }

packet_wrapper* session_impl::next_wrapper(gate& g, track& t) {
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
  const driver_caps& caps = t.slot->drv->caps();
  packet_builder pb(*pw, caps.max_packet_size, caps.gather_scatter ? caps.max_iov : 1, _copy_threshold);
  if (!g.strat->build_packet(g.collect, pb, view_of(t)) || pb.empty()) {
    if (!pb.empty()) log_write(log_level::error, "strategy", "build_packet added chunks but returned false");
    put_wrapper(pw);
    return nullptr;
  }
  pb.finish();
  return pw;
}

void session_impl::schedule(gate& g) {
  if (g.failed) return;
  for (track& t : g.tracks) {
    if (!t.connected) continue;
    while (t.outstanding < t.window) {
      packet_wrapper* pw = t.retry;
      t.retry = nullptr;
      if (!pw) pw = next_wrapper(g, t);
      if (!pw) break;
      driver& d = *t.slot->drv;
      post_result res =
          pw->type == packet_wrapper::kind::packet
              ? d.post_send_packet(t.conn, std::span<const iovec>(pw->iov.data(), pw->niov), pw)
              : d.post_send_data(t.conn, pw->data_cookie, std::span<const iovec>(pw->iov.data(), pw->niov), pw);
      if (res == post_result::retry) {
        t.retry = pw;
        if (std::find(_retry_gates.begin(), _retry_gates.end(), &g) == _retry_gates.end())
          _retry_gates.push_back(&g);
        _waiter.kick();  // sleeping threads must see it
        break;
      }
      if (res == post_result::failed) {
        t.retry = pw;  // reclaimed by fail_gate
        fail_gate(g, "the driver refused a send");
        return;
      }
      t.outstanding++;
      t.in_flight.push_back(*pw);
      _stats.rail_sends[std::min<std::size_t>(t.rail, 3)]++;
      _waiter.kick();  // the driver may have queued it: sleepers re-arm
      if (pw->type == packet_wrapper::kind::packet) {
        _stats.packets_sent++;
        _stats.chunks_sent += pw->nchunks;
        _stats.bytes_sent += pw->length;
      } else {
        _stats.rdv_data_sent++;
      }
    }
  }
}

void session_impl::send_done(packet_wrapper* pw) {
  gate& g = *pw->owner;
  track& t = g.tracks[pw->rail];
  t.in_flight.erase(t.in_flight.iterator_to(*pw));
  t.outstanding--;
  for (std::size_t i = 0; i < pw->ncarried; ++i) {
    chunk_entry* e = pw->carried[i];
    e->wrappers--;
    entry_progress(*e);
  }
  put_wrapper(pw);
  schedule(g);  // the track has room again: this is where strategies act
}

// ---- completion and failure ------------------------------------------------------

void session_impl::complete(request_state& r) {
  if (r.cb && r.owner) {
    r.finishing = true;
    _deferred.push_back(&r);  // run by the outermost guard, outside the lock
    return;
  }
  publish(r);
}

void session_impl::publish(request_state& r) {
  // After the store below the request may be gone (its owner saw it
  // done): its wake slot is read before.
  const int fd = _waiter.claim(r.wake_fd);
  r.done.store(true, std::memory_order_release);
  _waiter.notify(fd);  // a thread may sleep waiting for it
}

void session_impl::run_deferred() {
  // Taken while still locked: other threads append to their own batches.
  thread_local std::vector<request_state*> batch;
  const std::size_t mark = batch.size();  // a callback's own guard nests a batch
  batch.insert(batch.end(), _deferred.begin(), _deferred.end());
  _deferred.clear();
  _lock.unlock();
  for (std::size_t i = mark; i < batch.size(); ++i) {
    request_state& r = *batch[i];
    // The callback runs just before the request counts as complete: once
    // it does, its owner may destroy it at any moment.
    r.cb(*r.owner, r.cb_arg);
    publish(r);
  }
  batch.resize(mark);
}

void session_impl::fail_request(request_state& r, errc e, std::string message) {
  if (r.finished()) return;
  if (r.error == errc::ok) {
    r.error = e;
    r.error_message = std::move(message);
  }
  complete(r);
}

void session_impl::protocol_violation(gate& g, const std::string& what) {
  _stats.protocol_errors++;
  log_write(log_level::warn, "session", "protocol error from " + peer_name(g) + ": " + what +
                                            "; closing the connection");
  for (track& t : g.tracks)
    if (t.connected) {
      t.slot->gates.erase(t.conn);
      t.slot->drv->close_connection(t.conn);
    }
  fail_gate(g, "protocol error: " + what);
}

void session_impl::fail_gate(gate& g, std::string reason) {
  if (g.failed) return;
  g.failed = true;
  g.fail_reason = reason;
  const std::string msg = peer_name(g) + " failed: " + reason;
  log_write(log_level::warn, "session", msg);

  // Send side: every entry still queued, in flight, or waiting for a
  // ready-to-receive belongs to a request that can no longer complete.
  std::set<chunk_entry*> entries;
  std::set<request_state*> sends;
  auto note = [&](chunk_entry* e) {
    entries.insert(e);
    if (e->req) sends.insert(e->req);
  };
  for (track& t : g.tracks) {
    t.connected = false;
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
  }
  while (!g.collect.empty()) {
    chunk_entry& e = g.collect.front();
    g.collect.pop_front();
    note(&e);
  }
  for (auto& ds : g.data_out) note(ds.entry);
  g.data_out.clear();
  for (auto& [cookie, e] : g.rdv_out) note(e);
  g.rdv_out.clear();
  for (request_state* r : sends) {
    if (r->held_piece && r->held_piece->pooled) _entry_pool.put(r->held_piece);
    r->held_piece = nullptr;
    fail_request(*r, errc::peer_failed, msg);
  }
  for (chunk_entry* e : entries)
    if (e->pooled) _entry_pool.put(e);

  // Receive side. Matched receives whose bytes are still to come fail:
  // messages still arriving (active), and rendezvous data asked for.
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
  for (request_state* r : receives) {
    r->msg.failed = true;
    r->msg.fail_reason = msg;
    fail_request(*r, errc::peer_failed, msg);
  }
  // Unmatched messages that are not whole (rendezvous not asked for yet):
  // a receive that takes one later fails instead of waiting for its data.
  auto mark = [&](unexpected_message& u) {
    if (u.msg.source == g.rank && !u.msg.rdvs.empty()) {
      u.msg.failed = true;
      u.msg.fail_reason = msg;
    }
  };
  _match.for_each_unexpected(g.rank, mark);
  for (unexpected_message& u : _detached) mark(u);
  // Receives posted for this peer, and any-source receives once no other
  // peer is alive to match them.
  _match.drain_posted(g.rank, [&](request_state& r) { fail_request(r, errc::peer_failed, msg); });
  if (no_live_peer())
    _match.drain_posted(any_source, [&](request_state& r) {
      fail_request(r, errc::peer_failed, "any-source receive: every other rank failed (last: " + msg + ")");
    });
}

bool session_impl::no_live_peer() const {
  if (_size <= 1) return false;  // alone: only this process can send to itself
  for (const auto& g : _gates)
    if (g->rank != _rank && !g->failed) return false;
  return true;
}

}  // namespace nmad
