// The ofi driver: open and close, connections, hellos and control messages,
// liveness of shm peers, failures (see ofi_internal.hpp).
#include "drivers/ofi/ofi_internal.hpp"

namespace nmad::ofi_detail {

ofi_driver::~ofi_driver() {
  if (_ep) {
    // Tell every peer still there that we are going (a bye each, after the
    // byes already in: an endpoint that left is not written to), then let
    // the provider move them out for a short while; nothing is reported to
    // the engine any more.
    drain_quietly();
    try {
      for (auto& [id, c] : _conns)
        if (c.st == state::established)
          send_ctrl(c.addr, ctrl_tag(c.peer_id), ctrl_type::bye, make_ctrl(ctrl_type::bye, _cfg.rank, c.id, {}, {}),
                    invalid_connection);
    } catch (const std::exception&) {
      // Out of memory for a bye: the peers see the endpoint go instead.
    }
    const auto end = steady::now() + std::chrono::milliseconds(200);
    while ((_ctrl_pending > 0 || !_ctrl_queue.empty()) && steady::now() < end) {
      flush_ctrl();
      drain_quietly();
    }
    if (_rma)
      log_write(log_level::info, "ofi",
                "RMA reads " + std::to_string(_mr_stats.reads) + ", registration cache: " +
                    std::to_string(_mr_stats.hits) + " hits, " + std::to_string(_mr_stats.misses) + " misses, " +
                    std::to_string(_mr_stats.evictions) + " evictions");
    close_regions();
    fi_close(&_ep->fid);
  }
  if (_av) fi_close(&_av->fid);
  if (_cq) fi_close(&_cq->fid);
  if (_domain) fi_close(&_domain->fid);
  if (_fabric) fi_close(&_fabric->fid);
  for (op* o : _ops) delete o;
}

void ofi_driver::drain_quietly() {
  for (int round = 0; round < 64; ++round) {
    fi_cq_tagged_entry e[kCqBatch];
    ssize_t n = fi_cq_read(_cq, e, kCqBatch);
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      if (fi_cq_readerr(_cq, &err, 0) > 0) settle_quietly(static_cast<op*>(err.op_context), nullptr);
      continue;
    }
    if (n <= 0) return;
    for (ssize_t i = 0; i < n; ++i) settle_quietly(static_cast<op*>(e[i].op_context), &e[i]);
  }
}

void ofi_driver::settle_quietly(op* o, const fi_cq_tagged_entry* e) {
  if (!o || !_ops.count(o)) return;
  if (o->kind == op_kind::rx_buffer) {  // not posted again: the endpoint closes
    ctrl_header h;
    if (e && (e->tag & kCtrlBit) && e->len >= sizeof h) {
      std::memcpy(&h, o->rx, sizeof h);
      conn* c = find(static_cast<connection_id>((e->tag >> 32) & kMaxConnId));
      if (std::memcmp(h.magic, kCtrlMagic, 4) == 0 && h.type == ctrl_type::bye && c && c->peer_id == h.sender_id)
        c->st = state::failed;
    }
    return;
  }
  if (o->kind == op_kind::ctrl_send) --_ctrl_pending;
  release(o);
}

void ofi_driver::open(const driver_config& config) {
  if (_ep) throw std::runtime_error("ofi driver: already open");
  if (!config.events) throw std::runtime_error("ofi driver: no driver_events");
  if (config.size < 1 || config.rank < 0 || config.rank >= config.size)
    throw std::runtime_error("ofi driver: rank " + std::to_string(config.rank) + " out of range for job size " +
                             std::to_string(config.size));
  _cfg = config;
  const tunables tun = read_tunables();
  _connect_timeout = tun.connect_timeout;
  _cache_max = tun.mr_cache;
  const std::string& rma_mode = tun.rma;
  std::string forced = _forced, forced_by = "forced";
  if (forced.empty()) forced = tun.provider, forced_by = tun.provider_source;
  const std::string& domain = tun.domain;

  // Every provider offered for the driver's needs, best first by what it
  // can do (ofi_ranking.hpp); the lists stay alive while the endpoint is
  // made from their entries.
  const bool want_rma = rma_mode != "off";
  const survey offered = survey_providers(forced, domain, want_rma);
  const int ret = offered.ret;
  if (offered.ranked.empty()) {
    const std::string where = domain.empty() ? "" : " with domain '" + domain + "' (NMAD_OFI_DOMAIN)";
    if (!forced.empty())
      throw std::runtime_error("ofi driver: provider '" + forced + "' (" + forced_by +
                               ") is not available here" + where + " for reliable tagged messages (fi_getinfo: " +
                               (ret ? ofi_library::strerror(-ret) : "no matching entry") + "); see fi_info -l");
    throw std::runtime_error("ofi driver: no libfabric provider offers reliable tagged messages here" + where +
                             " (fi_getinfo: " + (ret ? ofi_library::strerror(-ret) : "no matching entry") + ")");
  }
  const candidate& best = offered.ranked.front();
  fi_info* info = best.info;
  _prov = best.provider;
  // RMA read: the same provider and domain as offered with FI_RMA.
  if (want_rma) {
    if (best.rma_info) {
      info = best.rma_info;
      _rma = true;
    } else if (rma_mode == "on") {
      const int rret = offered.rma_ret;
      throw std::runtime_error("ofi driver: NMAD_OFI_RMA=on but provider '" + _prov +
                               "' offers no RMA read (FI_RMA) here" +
                               (rret ? std::string(" (fi_getinfo: ") + ofi_library::strerror(-rret) + ")" : std::string()));
    }
  }
  if (log_enabled(log_level::debug)) {
    std::string order;
    for (const candidate& c : offered.ranked)
      order += (order.empty() ? "" : "; ") + c.provider + " (" + ofi_ranking::describe(c.traits) + ")";
    log_write(log_level::debug, "ofi", "providers best first: " + order);
  }
  _virt_addr = (info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) != 0;
  _prov_key = (info->domain_attr->mr_mode & FI_MR_PROV_KEY) != 0;
  _mr_endpoint = (info->domain_attr->mr_mode & FI_MR_ENDPOINT) != 0;

  check(ofi_library::require().fabric(info->fabric_attr, &_fabric, nullptr), "fi_fabric");
  check(fi_domain(_fabric, info, &_domain, nullptr), "fi_domain");
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_TAGGED;
  cq_attr.size = 0;
  cq_attr.wait_obj = FI_WAIT_FD;
  if (fi_cq_open(_domain, &cq_attr, &_cq, nullptr) != 0) {
    cq_attr.wait_obj = FI_WAIT_NONE;  // no descriptor: arm_wakeup answers busy
    check(fi_cq_open(_domain, &cq_attr, &_cq, nullptr), "fi_cq_open");
  } else if (fi_control(&_cq->fid, FI_GETWAIT, &_wait_fd) != 0) {
    _wait_fd = -1;
  }
  fi_av_attr av_attr{};
  av_attr.type = FI_AV_MAP;
  if (fi_av_open(_domain, &av_attr, &_av, nullptr) != 0) {
    av_attr.type = FI_AV_TABLE;
    check(fi_av_open(_domain, &av_attr, &_av, nullptr), "fi_av_open");
  }
  check(fi_endpoint(_domain, info, &_ep, nullptr), "fi_endpoint");
  check(fi_ep_bind(_ep, &_cq->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)");
  check(fi_ep_bind(_ep, &_av->fid, 0), "fi_ep_bind(av)");
  _shm_segment = in_shm_segment(info);
  if (_shm_segment) {
    // The shm provider names its segment after the process id: two
    // processes of one host in different pid namespaces (containers,
    // sandboxes) would open each other's. A name of our own instead (it
    // also lets us find our segments again: see ofi_shm_segment.hpp).
    const std::string own = ofi_shm::make_endpoint_name();
    if (fi_setname(&_ep->fid, const_cast<char*>(own.c_str()), own.size() + 1) != 0)
      log_write(log_level::info, "ofi", "the shm provider keeps its own endpoint name (fi_setname refused)");
  }
  check(fi_enable(_ep), "fi_enable");
  char name[kMaxAddr];
  std::size_t len = sizeof name;
  check(fi_getname(&_ep->fid, name, &len), "fi_getname");
  _name.assign(name, len);
  if (_shm_segment) {
    const std::string file = ofi_shm::segment_file(_name);
    if (ofi_shm::is_driver_segment(file) && !_seg.take(file))
      log_write(log_level::warn, "ofi", "cannot hold the shm segment /dev/shm/" + file +
                                             ": peers will not notice this process dying");
    // What earlier processes of this user left (killed before they
    // withdrew their names).
    for (const std::string& left : ofi_shm::reap_abandoned_segments(std::chrono::seconds(2)))
      log_write(log_level::info, "ofi", "removed /dev/shm/" + left + " (left by a process that is gone)");
  }
  _host = hostname();
  std::string prov_field = _prov;
  std::replace(prov_field.begin(), prov_field.end(), ';', ',');
  _local = "ofi:" + prov_field + ":" + _host + ":" + hex(_name);

  _iov_limit = std::max<std::size_t>(1, std::min<std::size_t>(info->tx_attr->iov_limit, info->rx_attr->iov_limit));
  _inject = info->tx_attr->inject_size;

  _caps = {};
  _caps.name = "ofi";
  _caps.max_packet_size = kMaxPacket;
  _caps.max_iov = std::min<std::size_t>(_iov_limit, 64);
  _caps.max_sends_in_flight = kMaxSendsInFlight;
  _caps.max_inline = std::min<std::size_t>(_inject, kMaxPacket);
  _caps.gather_scatter = _iov_limit > 1;
  _caps.zero_copy_data = true;  // the provider moves bytes from/to the caller's iovec
  _caps.rdma_get = _rma;
  // Not offered for other hosts (FI_REMOTE_COMM): this host only.
  _caps.node_local = best.traits.node_local();
  // Estimates, placed behind the built-in drivers of the same reach (the
  // session's automatic choice never takes ofi; NMAD_DRIVER=ofi does).
  _caps.latency_us = _caps.node_local ? 2 : 25;
  _caps.bandwidth_mbps = _caps.node_local ? 5000 : 1000;
  _caps.overhead_us = 1;

  // Packet buffers, credit windows and the data receives' budget, from the
  // provider's receive queue (see the top of this file).
  const std::size_t queue = info->rx_attr->size ? info->rx_attr->size : 1024;
  const std::size_t peers = static_cast<std::size_t>(std::max(1, _cfg.size - 1));
  const std::size_t reserve = kCtrlReserve + kCtrlReservePerPeer * peers;
  _rx_count = std::max(kRecvBuffers, reserve + kMinWindow * peers);
  if (_shm_segment) _rx_count = std::max(_rx_count, std::min(queue / 2, kMaxRecvBuffersShm));
  if (queue > kRecvQueueMargin + kMinDataRecvs)
    _rx_count = std::min(_rx_count, queue - kRecvQueueMargin - kMinDataRecvs);
  _rx_count = std::max<std::size_t>(_rx_count, 2 * peers + kCtrlReserve);
  const std::size_t share = _rx_count > reserve ? (_rx_count - reserve) / peers : 0;
  _window = static_cast<std::uint32_t>(std::clamp<std::size_t>(share, 2, kCreditMask));
  if (share < 2)
    log_write(log_level::warn, "ofi",
              "the provider's receive queue (" + std::to_string(queue) + ") is short for " + std::to_string(peers) +
                  " peers: credit windows of 2 packets exceed the packet buffers");
  _credit_threshold = std::max<std::uint32_t>(1, (_window + 1) / 2);
  _data_recv_max = queue > _rx_count + kRecvQueueMargin + kMinDataRecvs ? queue - _rx_count - kRecvQueueMargin
                                                                          : kMinDataRecvs;
  _rx_block.reset(new std::byte[_rx_count * kMaxPacket]);  // not initialised: pages stay untouched
  for (std::size_t i = 0; i < _rx_count; ++i) {
    op* o = new_op(op_kind::rx_buffer, invalid_connection);
    o->rx = _rx_block.get() + i * kMaxPacket;
    post_rx_buffer(o);
  }
  if (_rx_post_error_logged)
    throw std::runtime_error("ofi driver (" + _prov + "): the provider refuses receive buffers (see the log)");
  log_write(log_level::info, "ofi",
            "provider " + _prov + " (domain " + std::string(info->domain_attr->name ? info->domain_attr->name : "?") +
                ": " + ofi_ranking::describe(best.traits) + "), address " + _local + ", " +
                std::to_string(_rx_count) + " packet buffers, window " + std::to_string(_window) + " per peer, " +
                std::to_string(_data_recv_max) + " data receives");
}

void ofi_driver::fail_all(const std::string& reason) {
  for (auto& [id, c] : _conns) fail(c, reason);
}

void ofi_driver::internal_error(connection_id id, const char* what) noexcept {
  try {
    const std::string reason = std::string("internal error in this process's ofi driver: ") + what;
    log_write(log_level::error, "ofi", reason);
    if (id == invalid_connection) {
      fail_all(reason);
    } else if (conn* c = find(id)) {
      fail(*c, reason);
    }
  } catch (...) {
    // Out of memory even for the message: the connection stays as it is.
  }
}

void ofi_driver::check_liveness(steady::time_point now) {
  if (now < _next_liveness) return;
  _next_liveness = now + kLivenessPeriod;
  for (auto& [id, c] : _conns) {
    if (c.st == state::failed || !c.probe || c.seg.held()) continue;
    c.seg.reap();
    fail(c, "peer process died (nobody holds its shared-memory endpoint " + c.seg.file() + " any more) [" + _prov +
                "]");
  }
}

bool ofi_driver::reachable(std::string_view address) const {
  parsed_address p;
  if (!parse_address(address, p)) return false;
  if (p.provider != _prov) return false;
  return !_caps.node_local || p.host == _host;
}

conn& ofi_driver::add_conn() {
  while (_conns.count(_next_id) || _next_id == 0) _next_id = (_next_id % kMaxConnId) + 1;
  conn& c = _conns[_next_id];
  c.id = _next_id;
  _next_id = (_next_id % kMaxConnId) + 1;
  return c;
}

bool ofi_driver::insert_address(std::string_view name, fi_addr_t& out, std::string& why) {
  std::string copy(name);
  int n = fi_av_insert(_av, copy.data(), 1, &out, 0, nullptr);
  if (n == 1) return true;
  why = fi_error(_prov, "fi_av_insert", n < 0 ? n : -FI_EINVAL);
  return false;
}

void ofi_driver::send_ctrl(fi_addr_t to, std::uint64_t tag, ctrl_type type, std::vector<std::byte> bytes,
                           connection_id conn) {
  op* o = new_op(op_kind::ctrl_send, conn);
  o->ctrl = type;
  o->owned = std::move(bytes);
  _ctrl_queue.push_back({to, tag, type, o});
  flush_ctrl();
}

bool ofi_driver::flush_ctrl() {
  while (!_ctrl_queue.empty()) {
    queued_ctrl& q = _ctrl_queue.front();
    op* o = q.o;
    conn* c = o->conn == invalid_connection ? nullptr : find(o->conn);
    if (o->conn != invalid_connection && (!c || c->st == state::failed)) {  // its connection went meanwhile
      release(o);
      _ctrl_queue.pop_front();
      continue;
    }
    ssize_t r = fi_tsend(_ep, o->owned.data(), o->owned.size(), nullptr, q.to, q.tag, &o->ctx);
    if (transient(r)) return false;
    const ctrl_type type = q.type;
    _ctrl_queue.pop_front();
    if (r != 0) {
      release(o);
      if (c) fail(*c, fi_error(_prov, "fi_tsend (control message)", static_cast<int>(r)));
      continue;
    }
    ++_ctrl_pending;
    if (c && type == ctrl_type::ack && c->st == state::ack_queued) c->st = state::established;
  }
  return true;
}

// An shm peer's endpoint `name`: its segment must exist, and where the
// driver named it, it is opened into `seg` for the liveness checks; one
// that nobody holds and whose pid does not run here belongs to a process
// that is gone. (Other names, and other providers: true.)
bool shm_peer_alive(const std::string& name, ofi_shm::peer_segment& seg, std::string& why) {
  if (name.compare(0, 9, "fi_shm://") != 0) return true;
  const std::string file = ofi_shm::segment_file(name);
  if (file.empty() || ::access(("/dev/shm/" + file).c_str(), F_OK) != 0) {
    why = "the peer's shared-memory endpoint is gone (" + (file.empty() ? std::string("bad name") : file) + ")";
    return false;
  }
  int pid = 0;
  if (!ofi_shm::is_driver_segment(file, &pid)) return true;
  if (!seg.open(file)) {
    why = "the peer's shared-memory endpoint is gone (" + file + ")";
    return false;
  }
  if (!seg.held() && ::kill(pid, 0) != 0 && errno == ESRCH) {
    seg.reap();
    why = "the peer process is gone (nobody holds its shared-memory endpoint " + file + ")";
    return false;
  }
  return true;
}

connection_id ofi_driver::connect(int peer_rank, std::string_view address) {
  conn& c = add_conn();
  c.peer_rank = peer_rank;
  c.deadline = steady::now() + _connect_timeout;
  parsed_address p;
  std::string why;
  if (!_ep) {
    fail(c, "driver not open");
  } else if (peer_rank < 0 || peer_rank >= _cfg.size || peer_rank == _cfg.rank) {
    fail(c, "peer rank out of range");
  } else if (!parse_address(address, p)) {
    fail(c, "bad address '" + std::string(address) + "' (want ofi:provider:host:name)");
  } else if (p.provider != _prov) {
    fail(c, "the peer uses provider " + p.provider + ", this process " + _prov);
  } else if (_caps.node_local && p.host != _host) {
    fail(c, "the peer is on another host (" + p.host + ") and provider " + _prov + " reaches this host only");
  } else if (!shm_peer_alive(p.name, c.seg, why)) {
    fail(c, why);
  } else if (!insert_address(p.name, c.addr, why)) {
    fail(c, why);
  } else {
    send_ctrl(c.addr, ctrl_tag(0), ctrl_type::hello,
              make_ctrl(ctrl_type::hello, _cfg.rank, c.id, _cfg.job_key, _name, _window, segment_flags()), c.id);
  }
  return c.id;
}

void ofi_driver::close_connection(connection_id id) {
  conn* c = find(id);
  if (!c) return;
  try {
    if (c->st == state::established)
      send_ctrl(c->addr, ctrl_tag(c->peer_id), ctrl_type::bye, make_ctrl(ctrl_type::bye, _cfg.rank, c->id, {}, {}),
                invalid_connection);
  } catch (const std::exception&) {
    // No memory for a bye: the peer finds the connection silent instead.
  }
  fail(*c, "closed");
  std::erase(_to_report, id);
  _conns.erase(id);
}

// Fails a connection: its pending operations die silently (receives are
// cancelled so libfabric lets go of the caller's buffers); the failure is
// reported from poll().
void ofi_driver::fail(conn& c, std::string reason) {
  if (c.st == state::failed) return;
  c.st = state::failed;
  c.fail_reason = reason;
  for (auto& [low, o] : c.recvs) {
    o->dead = true;
    fi_cancel(&_ep->fid, &o->ctx);
  }
  c.recvs.clear();
  for (op* o : c.sends) o->dead = true;
  c.sends.clear();
  c.in_flight = 0;
  c.tx_credits = 0;
  c.rx_owed = 0;
  if (reason != "closed") {
    log_write(log_level::warn, "ofi",
              "connection to rank " + std::to_string(c.peer_rank) + " (" + _prov + ") failed: " + reason);
    _to_report.push_back(c.id);
  }
}

void ofi_driver::on_ctrl(std::uint64_t tag, std::span<const std::byte> bytes) {
  ctrl_header h;
  if (bytes.size() < sizeof h) return;
  std::memcpy(&h, bytes.data(), sizeof h);
  if (std::memcmp(h.magic, kCtrlMagic, 4) != 0 || h.version != kCtrlVersion) return;
  if (h.key_len > kMaxKey || h.addr_len > kMaxAddr || sizeof h + h.key_len + h.addr_len > bytes.size()) return;
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()) + sizeof h, h.key_len);
  const std::string_view addr(reinterpret_cast<const char*>(bytes.data()) + sizeof h + h.key_len, h.addr_len);
  const auto my_id = static_cast<connection_id>((tag >> 32) & kMaxConnId);
  switch (h.type) {
    case ctrl_type::hello: {
      if (addr.empty()) return;
      fi_addr_t from;
      std::string why;
      if (!insert_address(addr, from, why)) {
        log_write(log_level::warn, "ofi", "refused a hello: " + why);
        return;
      }
      std::string refusal;
      if (text.size() != _cfg.job_key.size() || std::memcmp(text.data(), _cfg.job_key.data(), text.size()) != 0)
        refusal = "wrong job key";
      else if (h.rank < 0 || h.rank >= _cfg.size || h.rank == _cfg.rank)
        refusal = "rank " + std::to_string(h.rank) + " out of range";
      if (!refusal.empty()) {
        log_write(log_level::warn, "ofi", "refused a hello from a peer claiming rank " + std::to_string(h.rank) + ": " + refusal);
        send_ctrl(from, ctrl_tag(h.sender_id), ctrl_type::refuse, make_ctrl(ctrl_type::refuse, _cfg.rank, 0, refusal, {}),
                  invalid_connection);
        return;
      }
      conn& c = add_conn();
      c.peer_rank = h.rank;
      c.addr = from;
      c.peer_id = h.sender_id;
      c.st = state::ack_queued;
      c.tx_credits = c.tx_window = h.window;
      // shm: the peer's segment, for the liveness checks (it exists: the
      // peer is waiting for our answer).
      if (_shm_segment && (h.flags & kCtrlSegmentHeld)) c.probe = shm_peer_alive(std::string(addr), c.seg, why);
      send_ctrl(from, ctrl_tag(h.sender_id), ctrl_type::ack,
                make_ctrl(ctrl_type::ack, _cfg.rank, c.id, {}, {}, _window, segment_flags()), c.id);
      log_write(log_level::info, "ofi", "connected to rank " + std::to_string(c.peer_rank) + " (" + _prov + ")");
      _cfg.events->on_connected(c.id, c.peer_rank);
      return;
    }
    case ctrl_type::ack: {
      conn* c = find(my_id);
      if (!c || c->st != state::await_ack) return;
      if (h.rank != c->peer_rank) {
        fail(*c, "peer at that address is rank " + std::to_string(h.rank));
        return;
      }
      c->peer_id = h.sender_id;
      c->st = state::established;
      c->tx_credits = c->tx_window = h.window;
      c->probe = c->seg.is_open() && (h.flags & kCtrlSegmentHeld);
      log_write(log_level::info, "ofi", "connected to rank " + std::to_string(c->peer_rank) + " (" + _prov + ")");
      _cfg.events->on_connected(c->id, c->peer_rank);
      return;
    }
    case ctrl_type::refuse: {
      conn* c = find(my_id);
      if (c && c->st == state::await_ack) fail(*c, "rank " + std::to_string(h.rank) + " refused: " + std::string(text));
      return;
    }
    case ctrl_type::bye: {
      conn* c = find(my_id);
      if (c && c->st == state::established && c->peer_id == h.sender_id) fail(*c, "peer closed the connection");
      return;
    }
    case ctrl_type::credit: {
      conn* c = find(my_id);
      if (c && c->st == state::established && c->peer_id == h.sender_id) credited(*c, tag);
      return;
    }
  }
}

}  // namespace nmad::ofi_detail
