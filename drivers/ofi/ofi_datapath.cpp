// The ofi driver's data path: packet buffers and credits, sends, bulk data,
// the completion queue, poll and sleeping (see ofi_internal.hpp).
#include "drivers/ofi/ofi_internal.hpp"

namespace nmad::ofi_detail {


void ofi_driver::post_rx_buffer(op* o) {
  ssize_t r = fi_trecv(_ep, o->rx, kMaxPacket, nullptr, FI_ADDR_UNSPEC, 0, kIgnoreNonData, &o->ctx);
  if (r == 0) {
    const connection_id owed = o->conn;
    o->conn = invalid_connection;
    if (owed != invalid_connection) owe_credit(owed);
    return;
  }
  _rx_idle.push_back(o);  // posted again by the next poll()
  if (transient(r)) {
    ++_flow.transient_retries;
    return;
  }
  // The provider refuses packet buffers for good: no peer can send us
  // anything any more (its credits would run out, unanswered).
  if (!_rx_post_error_logged)
    log_write(log_level::error, "ofi", fi_error(_prov, "fi_trecv (packet buffer)", static_cast<int>(r)));
  _rx_post_error_logged = true;
  fail_all("this process's provider refuses receive buffers (" +
           fi_error(_prov, "fi_trecv (packet buffer)", static_cast<int>(r)) + ")");
}

void ofi_driver::owe_credit(connection_id id) {
  conn* c = find(id);
  if (!c || c->st != state::established) return;
  ++c->rx_owed;
  if (c->rx_owed >= _credit_threshold && !c->owing_listed) {
    c->owing_listed = true;
    _owing.push_back(id);
  }
}

// Peers owed half a window or more whose packets have not carried it back
// meanwhile get a credit message (it costs no credit: see the top).
void ofi_driver::return_credits() {
  std::vector<connection_id> owing;
  owing.swap(_owing);
  for (connection_id id : owing) {
    conn* c = find(id);
    if (!c) continue;
    c->owing_listed = false;
    if (c->st != state::established || c->rx_owed < _credit_threshold) continue;
    const std::uint64_t tag = ctrl_tag(c->peer_id) | std::min<std::uint64_t>(c->rx_owed, kCreditMask);
    c->rx_owed = 0;
    ++_flow.credit_messages;
    send_ctrl(c->addr, tag, ctrl_type::credit, make_ctrl(ctrl_type::credit, _cfg.rank, c->id, {}, {}), c->id);
  }
}

post_result ofi_driver::send_packet(connection_id id, std::span<const iovec> iov, void* token) {
  conn* c = find(id);
  if (post_result r = check_postable(c); r != post_result::posted) return r;
  const std::size_t len = total_len(iov);
  if (len > kMaxPacket || iov.size() > 64) return post_result::failed;
  if (c->in_flight >= kMaxSendsInFlight) return post_result::retry;
  if (c->tx_credits == 0) {
    ++_flow.credit_waits;
    return post_result::retry;
  }
  op* o = new_op(op_kind::send, id);
  o->token = token;
  const std::uint64_t tag = packet_tag_for(*c);
  ssize_t r;
  if (iov.size() <= _iov_limit) {
    r = fi_tsendv(_ep, iov.data(), nullptr, iov.size(), c->addr, tag, &o->ctx);
  } else {  // more pieces than the provider takes: one copy
    o->owned.resize(len);
    std::size_t pos = 0;
    for (const iovec& v : iov) {
      if (v.iov_len) std::memcpy(o->owned.data() + pos, v.iov_base, v.iov_len);
      pos += v.iov_len;
    }
    r = fi_tsend(_ep, o->owned.data(), len, nullptr, c->addr, tag, &o->ctx);
  }
  if (r == 0) {
    ++c->in_flight;
    c->sends.insert(o);
    --c->tx_credits;
    c->rx_owed = 0;  // carried by the tag
    return post_result::posted;
  }
  release(o);
  return refused(*c, r, "fi_tsend (packet)");
}

post_result ofi_driver::inject_packet(connection_id id, std::span<const iovec> iov) {
  conn* c = find(id);
  if (post_result r = check_postable(c); r != post_result::posted) return r;
  const std::size_t len = total_len(iov);
  if (len > _caps.max_inline || len == 0) return post_result::retry;
  if (c->tx_credits == 0) {
    ++_flow.credit_waits;
    return post_result::retry;
  }
  std::byte buf[4096];
  if (len > sizeof buf) return post_result::retry;
  std::size_t pos = 0;
  for (const iovec& v : iov) {
    if (v.iov_len) std::memcpy(buf + pos, v.iov_base, v.iov_len);
    pos += v.iov_len;
  }
  ssize_t r = fi_tinject(_ep, buf, len, c->addr, packet_tag_for(*c));
  if (r == 0) {
    --c->tx_credits;
    c->rx_owed = 0;
    return post_result::posted;
  }
  return refused(*c, r, "fi_tinject (packet)");
}

post_result ofi_driver::refused(conn& c, ssize_t r, const char* call) {
  if (transient(r)) {
    ++_flow.transient_retries;
    return post_result::retry;
  }
  fail(c, fi_error(_prov, call, static_cast<int>(r)));
  return post_result::failed;
}

post_result ofi_driver::send_data(connection_id id, std::uint64_t cookie, std::span<const iovec> iov,
                                  void* token) {
  conn* c = find(id);
  if (post_result r = check_postable(c); r != post_result::posted) return r;
  if (iov.size() > _iov_limit) return post_result::failed;
  if (c->in_flight >= kMaxSendsInFlight) return post_result::retry;
  op* o = new_op(op_kind::send, id);
  o->token = token;
  o->cookie = cookie;
  ssize_t r = iov.empty() ? fi_tsend(_ep, nullptr, 0, nullptr, c->addr, data_tag(c->peer_id, cookie), &o->ctx)
                          : fi_tsendv(_ep, iov.data(), nullptr, iov.size(), c->addr, data_tag(c->peer_id, cookie),
                                      &o->ctx);
  if (r == 0) {
    ++c->in_flight;
    c->sends.insert(o);
    return post_result::posted;
  }
  release(o);
  return refused(*c, r, "fi_tsend (data)");
}

post_result ofi_driver::recv_data(connection_id id, std::uint64_t cookie, std::span<const iovec> iov,
                                  void* token) {
  conn* c = find(id);
  if (post_result r = check_postable(c); r != post_result::posted) return r;
  if (iov.size() > _iov_limit) return post_result::failed;
  const auto low = static_cast<std::uint32_t>(cookie);
  if (c->recvs.count(low)) return post_result::failed;  // posted already (or same low half)
  if (_data_recvs >= _data_recv_max) {  // the provider's queue is for packet buffers too
    ++_flow.data_recv_waits;
    return post_result::retry;
  }
  op* o = new_op(op_kind::recv_data, id);
  o->token = token;
  o->cookie = cookie;
  o->capacity = total_len(iov);
  // The local connection id is what the peer puts in its data tags.
  const std::uint64_t tag = data_tag(c->id, cookie);
  const ssize_t r = iov.empty() ? fi_trecv(_ep, nullptr, 0, nullptr, FI_ADDR_UNSPEC, tag, 0, &o->ctx)
                                : fi_trecvv(_ep, iov.data(), nullptr, iov.size(), FI_ADDR_UNSPEC, tag, 0, &o->ctx);
  if (r != 0) {
    release(o);
    if (transient(r)) {
      ++_flow.transient_retries;
      ++_flow.data_recv_waits;
      return post_result::retry;
    }
    fail(*c, "this process's provider refused the receive: " + fi_error(_prov, "fi_trecv (data)", static_cast<int>(r)));
    return post_result::failed;
  }
  c->recvs.emplace(low, o);
  return post_result::posted;
}

void ofi_driver::complete(const fi_cq_tagged_entry& e) {
  op* o = static_cast<op*>(e.op_context);
  if (!o || !_ops.count(o)) return;  // an inject or a stranger: nothing to do
  switch (o->kind) {
    case op_kind::rx_buffer: {
      const std::span<const std::byte> bytes(o->rx, e.len);
      o->conn = invalid_connection;
      if (e.tag & kCtrlBit) {
        on_ctrl(e.tag, bytes);
      } else {
        const auto id = static_cast<connection_id>((e.tag >> 32) & kMaxConnId);
        conn* c = find(id);
        if (c && c->st == state::established) {
          credited(*c, e.tag);  // before the engine may answer
          o->conn = id;         // owed a credit once the buffer is posted again
          _cfg.events->on_packet(id, bytes);
        }
      }
      post_rx_buffer(o);
      return;
    }
    case op_kind::ctrl_send:
      --_ctrl_pending;
      release(o);
      return;
    case op_kind::send: {
      const bool dead = o->dead;
      void* token = o->token;
      conn* c = dead ? nullptr : find(o->conn);
      if (c) {
        c->sends.erase(o);
        --c->in_flight;
      }
      release(o);
      if (c) _cfg.events->on_send_done(token);
      return;
    }
    case op_kind::recv_data: {
      const bool dead = o->dead;
      void* token = o->token;
      const connection_id id = o->conn;
      const auto low = static_cast<std::uint32_t>(o->cookie);
      release(o);
      if (dead) return;
      if (conn* c = find(id)) c->recvs.erase(low);
      _cfg.events->on_recv_data_done(token, e.len);
      return;
    }
    case op_kind::get: {  // an RMA read: the whole iovec is in
      const bool dead = o->dead;
      void* token = o->token;
      const std::size_t n = o->capacity;
      conn* c = dead ? nullptr : find(o->conn);
      if (c) {
        c->sends.erase(o);
        --c->in_flight;
      }
      release(o);
      if (c) _cfg.events->on_recv_data_done(token, n);
      return;
    }
  }
}

void ofi_driver::complete_error(const fi_cq_err_entry& e) {
  op* o = static_cast<op*>(e.op_context);
  if (!o || !_ops.count(o)) return;
  char buf[256];
  const char* detail = fi_cq_strerror(_cq, e.prov_errno, e.err_data, buf, sizeof buf);
  const std::string text = std::string(ofi_library::strerror(e.err)) + (detail && *detail ? std::string(" (") + detail + ")" : "");
  switch (o->kind) {
    case op_kind::rx_buffer:
      if (e.err != FI_ECANCELED) {
        if (!_rx_error_logged)
          log_write(log_level::warn, "ofi", "packet receive failed (" + _prov + "): " + text);
        _rx_error_logged = true;
        // A packet larger than the buffers (FI_ETRUNC) fails its sender.
        const auto id = static_cast<connection_id>((e.tag >> 32) & kMaxConnId);
        if (conn* c = find(id); c && !(e.tag & kCtrlBit))
          fail(*c, "protocol error: packet larger than " + std::to_string(kMaxPacket) + " bytes (" + text + ")");
      }
      o->conn = invalid_connection;
      if (_ep) post_rx_buffer(o);
      return;
    case op_kind::ctrl_send: {
      --_ctrl_pending;
      const connection_id id = o->conn;
      release(o);
      if (conn* c = find(id); c && c->st == state::await_ack)
        fail(*c, "cannot reach the peer: " + text + " [" + _prov + "]");
      return;
    }
    case op_kind::send:
    case op_kind::get:
    case op_kind::recv_data: {
      const bool dead = o->dead;
      const connection_id id = o->conn;
      const std::uint64_t cookie = o->cookie;
      const bool recv = o->kind == op_kind::recv_data;
      const bool get = o->kind == op_kind::get;
      release(o);
      if (dead || e.err == FI_ECANCELED) return;
      conn* c = find(id);
      if (!c) return;
      if (get)
        fail(*c, "RMA read of the peer's rendezvous data failed: " + text + " [" + _prov + "]");
      else if (recv && e.err == FI_ETRUNC)
        fail(*c, "protocol error: data for cookie " + std::to_string(cookie) + " exceeds the bytes posted (" + text +
                     ")");
      else
        fail(*c, std::string(recv ? "data receive" : "send") + " failed: " + text + " [" + _prov + "]");
      return;
    }
  }
}

int ofi_driver::poll() {
  if (!_ep || _depth > 0) return 0;
  struct depth_guard {
    int& depth;
    ~depth_guard() { --depth; }
  } guard{++_depth};
  int work = 0;
  try {
    work = progress();
  } catch (const std::exception& e) {
    internal_error(invalid_connection, e.what());
  } catch (...) {
    internal_error(invalid_connection, "unknown exception");
  }
  // Failures, each reported once; the connection then goes.
  while (!_to_report.empty()) {
    const connection_id id = _to_report.front();
    _to_report.erase(_to_report.begin());
    auto it = _conns.find(id);
    if (it == _conns.end()) continue;
    std::string reason;
    reason.swap(it->second.fail_reason);
    _conns.erase(it);
    _failed_reasons[id] = reason;
    _cfg.events->on_connection_failed(id, reason);
    ++work;
  }
  return work;
}

int ofi_driver::progress() {
  apply_released();
  int work = 0;
  if (!_rx_idle.empty()) {
    std::vector<op*> idle;
    idle.swap(_rx_idle);
    for (op* o : idle) post_rx_buffer(o);
  }
  bool drained = false;
  for (int round = 0; round < kMaxCqReadsPerPoll; ++round) {
    fi_cq_tagged_entry e[kCqBatch];
    ssize_t n = fi_cq_read(_cq, e, kCqBatch);
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      if (fi_cq_readerr(_cq, &err, 0) > 0) complete_error(err);
      ++work;
      continue;
    }
    if (n <= 0) {
      if (n != -FI_EAGAIN && n != 0) {
        log_write(log_level::error, "ofi", fi_error(_prov, "fi_cq_read", static_cast<int>(n)));
      }
      drained = true;
      break;
    }
    for (ssize_t i = 0; i < n; ++i) complete(e[i]);
    work += static_cast<int>(n);
    if (n < kCqBatch) {
      drained = true;
      break;
    }
  }
  if (!_owing.empty()) return_credits();
  if (!_ctrl_queue.empty()) flush_ctrl();
  // Handshakes past their deadline.
  const steady::time_point now = steady::now();
  for (auto& [id, c] : _conns)
    if (c.st == state::await_ack && now > c.deadline)
      fail(c, "no answer to the hello within " + std::to_string(_connect_timeout.count()) +
                  " ms (peer not running, or not polling?) [" + _prov + "]");
  // shm peers gone without a bye; only once everything they sent before
  // (a bye among it) has been read.
  if (drained && _shm_segment) check_liveness(now);
  return work;
}

arm_result ofi_driver::arm_wakeup(std::vector<pollfd>& fds, int& timeout_ms) {
  if (!_ep) return arm_result::armed;
  // Buffers or control messages the provider refused are retried by poll().
  if (!_to_report.empty() || _wait_fd < 0 || !_rx_idle.empty() || !_ctrl_queue.empty() || !_owing.empty())
    return arm_result::busy;
  fid* f = &_cq->fid;
  if (fi_trywait(_fabric, &f, 1) != FI_SUCCESS) return arm_result::busy;
  fds.push_back({_wait_fd, POLLIN, 0});
  for (auto& [id, c] : _conns)
    if (c.st == state::await_ack) {
      limit_sleep(timeout_ms, 10);
      break;
    }
  return arm_result::armed;
}

}  // namespace nmad::ofi_detail
