// The session's receive entry points: a request set up as a receive, then
// handed to the receive path (core/receive/receive_path.hpp), which matches
// it with what arrived or posts it; probes, matched probes, unpack, cancel.
#include <algorithm>
#include <mutex>

#include "core/session_impl.hpp"

namespace nmad {

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
  std::lock_guard ml(_recv.lock());
  for (std::uint64_t i = first; i < first + count; ++i) {
    const segment& s = r.segments[static_cast<std::size_t>(i)];
    if (s.received != s.len) return false;
  }
  return true;
}

// The matching half of a receive set up by setup_recv: an unexpected
// message is taken at once, else the receive is posted.
errc session_impl::post_recv(request_state& r, int source, tag_t tag, tag_t mask) {
  std::unique_lock ml(_recv.lock());
  // An unexpected message that matches is taken first (arrival order).
  if (unexpected_message* u = _recv.take_first_unexpected(source, tag, mask)) {
    _recv.take_unexpected(r, *u);
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
    if (unexpected_message* u = _recv.take_first_unexpected(source, tag, mask)) {
      _recv.take_unexpected(r, *u);
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
  _recv.post(r);  // (a peer starved of credit hears what it waits for)
  return errc::ok;
}

unexpected_message* session_impl::improbe(int source, tag_t tag, tag_t mask, recv_status& st) {
  unexpected_message* u = nullptr;
  int work;
  {
    engine_scope scope(*this);
    work = progress_now();
    std::lock_guard ml(_recv.lock());
    u = _recv.find_unexpected(source, tag, mask, st);
    if (!u) _recv.probe_missed(source, tag, mask);
    // Detached: chunks still arriving keep landing in u->msg through the
    // gate's `active` map, exactly as while it was on the list.
    if (u) _recv.detach(*u);
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
  std::lock_guard ml(_recv.lock());
  _recv.attach_to_receive(*u);
  setup_recv(r, static_cast<int>(u->source), u->tag, full_mask, buf, len, true);
  _recv.take_unexpected(r, *u);
  return errc::ok;
}

errc session_impl::unpack_piece(request_state& r, void* buf, std::size_t len, pack_mode mode) {
  std::size_t index = 0;
  {
    engine_scope scope(*this);
    std::lock_guard ml(_recv.lock());
    if (r.type != request_state::kind::recv || r.recv_sealed) return errc::invalid_argument;
    index = r.segments.size();
    if (!buf && len > 0) return errc::invalid_argument;
    if (r.finished()) return r.error;
    r.segments.push_back({static_cast<std::byte*>(buf), len, 0});
    r.capacity += len;
    if (r.matched) {
      _recv.drain_buffered(r);
      if (!r.msg.failed) _recv.ask_rdvs(*_gates[r.msg.source], r);
    }
  }
  if (mode == pack_mode::cheaper) return errc::ok;
  // Express: this piece must be in memory before returning.
  errc result = errc::ok;
  _waiter.wait([&] {
    engine_scope scope(*this);
    std::lock_guard ml(_recv.lock());
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
    std::lock_guard ml(_recv.lock());
    if (r.type != request_state::kind::recv || r.recv_sealed) return errc::invalid_argument;
    r.recv_sealed = true;
    if (r.matched && !r.finished()) {
      _recv.drain_buffered(r);
      if (!r.msg.failed) _recv.ask_rdvs(*_gates[r.msg.source], r);
      _recv.finish_recv_if_done(r);
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
    std::lock_guard ml(_recv.lock());
    found = _recv.find_unexpected(source, tag, mask, st) != nullptr;
  }
  if (!found && work == 0) _waiter.idle_poll();  // the polling discipline (waiter.hpp)
  return found;
}

recv_status session_impl::probe(int source, tag_t tag, tag_t mask) {
  recv_status st;
  _waiter.wait([&] {
    engine_scope scope(*this);
    std::lock_guard ml(_recv.lock());
    if (_recv.find_unexpected(source, tag, mask, st)) return true;
    _recv.probe_missed(source, tag, mask);
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

bool session_impl::cancel(request_state& r) {
  engine_scope scope(*this);
  if (r.type == request_state::kind::send) return cancel_send(r);
  std::lock_guard ml(_recv.lock());
  if (r.type != request_state::kind::recv || r.finished() || r.matched || !_recv.withdraw(r))
    return false;
  r.error = errc::cancelled;
  r.error_message = "receive cancelled";
  complete(r);
  return true;
}

}  // namespace nmad
