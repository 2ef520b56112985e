// The tcp driver: one non-blocking IPv4 stream socket per peer.
//
// Tunables (read once by open(); a malformed value makes open() throw):
//   NMAD_TCP_HOST                  address to bind and advertise
//                                  (default 127.0.0.1, IPv4 dotted quad)
//   NMAD_TCP_HOSTS                 one such address per tcp rail
//                                  (NMAD_DRIVERS=tcp+tcp: a,b), instead
//   NMAD_TCP_PORT                  fixed listening port (default 0: ephemeral)
//   NMAD_TCP_HANDSHAKE_TIMEOUT_MS  time an incoming connection has to send a
//                                  complete hello (default 5000)
//   NMAD_TCP_CONNECT_TIMEOUT_MS    time an outgoing connection has to connect
//                                  and receive the ack (default 30000: the
//                                  peer may still be starting up)
//   NMAD_TCP_PENDING_PER_HOST      incoming connections one address may hold
//                                  in their handshake; more are refused
//                                  (default 256)
//   NMAD_TCP_PENDING_MAX           incoming connections held in their
//                                  handshake in all (default: a quarter of
//                                  the descriptor limit, 16 to 256); past it
//                                  the oldest goes once silent for 1 s, else
//                                  new ones wait in the kernel's queue
//   NMAD_TCP_USER_TIMEOUT_MS       a connection whose data stays unacknowledged
//                                  this long, or whose idle peer host stops
//                                  answering keepalive probes, fails
//                                  (default 0: the kernel's, ~15 min)
//   NMAD_TCP_FRAGMENT              bulk data longer than this goes in
//                                  fragments of this size (default 512K;
//                                  0: one frame per transfer)
//   NMAD_TCP_SOCKBUF               SO_SNDBUF and SO_RCVBUF of every socket
//                                  (default 256K; 0: the kernel's autotuning)
// Fixed limits: packets up to 64 KiB (one receive buffer per connection),
// 64 iovec entries per post_*, 32 sends in flight per connection; one
// sendmsg gathers up to 256 entries across queued sends; one poll() makes at
// most 64 reads per connection so a busy peer cannot starve the others.
//
// Progress model. poll() does one poll(2) over the listening socket and all
// connections, then, per connection: finishes connect/handshake steps,
// writes the send queue (in post order, header + user iovec gathered with
// sendmsg), reads frames, and reports send completions and failures. Reads
// are exact: a body is read together with the *next* header only (readv of
// body remainder + header), so data bodies go straight into the iovec
// posted for their cookie and never through an intermediate buffer.
// Bulk data longer than the fragment size is queued as several frames at
// once (each a header and a slice of the caller's iovec: no copy), so the
// socket always has the next fragment to take; a packet posted meanwhile
// goes ahead of the fragments not started yet instead of waiting for the
// whole transfer. The receiver reads each fragment straight into the posted
// iovec after the previous one and reports the transfer at its last.
// post_* may already write to the socket, but every callback is made from
// poll(). Callbacks may re-enter post_* and close_connection (a closed
// connection is kept alive in graveyard_ until the outermost poll returns);
// a nested poll() from a callback does nothing. Incoming connections still
// in their handshake are not in that poll(2): they sit in an epoll set (one
// fd in the poll) and a deadline queue, so a few thousand idle ones held by
// a stranger cost nothing per round; each source address may hold
// NMAD_TCP_PENDING_PER_HOST of them, all together NMAD_TCP_PENDING_MAX
// (descriptors stay for the job). A new connection is read as soon as it is
// accepted (its hello is usually there already), at most 64 per poll. While
// no more may be accepted, or for 100 ms after an accept error (out of
// descriptors), the listening socket is left out of poll and arm_wakeup: a
// queued connection that cannot be taken must not make every round, or
// every wake-up, fail again at once. With no connection at all,
// only one call in 256 polls the listening socket (see kIdlePollEvery).
#include "drivers/tcp/tcp_driver.hpp"
#include "drivers/tcp/tcp_internal.hpp"

namespace nmad::tcp_impl {


void tcp_driver::open(const driver_config& config) {
  if (listen_fd_ >= 0) throw std::runtime_error("tcp driver: already open");
  if (!config.events) throw std::runtime_error("tcp driver: no driver_events");
  if (config.size < 1 || config.rank < 0 || config.rank >= config.size)
    throw std::runtime_error("tcp driver: rank " + std::to_string(config.rank) +
                             " out of range for job size " +
                             std::to_string(config.size));
  tun_ = read_tunables(config.instance);
  cfg_ = config;

  caps_ = {};
  caps_.name = "tcp";
  caps_.max_packet_size = kMaxPacket;
  caps_.max_iov = kMaxIov;
  caps_.max_sends_in_flight = kMaxSendsInFlight;
  caps_.max_inline = kMaxPacket;
  // A rendezvous costs a round trip more on a socket: eager up to the
  // largest packet (the engine caps it there; ping-pong 32-48 KiB halved).
  caps_.rdv_threshold = kMaxPacket;
  caps_.gather_scatter = true;  // sendmsg/readv on the caller's iovec
  caps_.zero_copy_data = true;  // data bodies: user iovec <-> socket
  caps_.rdma_get = false;
  // Static estimates until the engine samples the real link (loopback or a
  // typical 10 GbE network).
  caps_.latency_us = 20;
  caps_.bandwidth_mbps = 1000;
  caps_.overhead_us = 2;

  sockaddr_in sa{};
  if (!parse_addr(tun_.host + ":1", sa))
    throw std::runtime_error("tcp driver: " + tun_.host_source + " '" + tun_.host +
                             "' is not an IPv4 address");
  sa.sin_port = htons(static_cast<std::uint16_t>(tun_.port));
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error("tcp driver: socket: " + errno_text(errno));
  int one = 1;
  set_sockbuf(fd, tun_.sockbuf);  // before listen: accepted sockets inherit it
  if (tun_.port) ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) < 0 ||
      ::listen(fd, SOMAXCONN) < 0) {
    int err = errno;
    ::close(fd);
    throw std::runtime_error("tcp driver: cannot listen on " + tun_.host + ":" +
                             std::to_string(tun_.port) + ": " + errno_text(err));
  }
  socklen_t len = sizeof sa;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  pending_epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (pending_epoll_ < 0) {
    int err = errno;
    ::close(fd);
    throw std::runtime_error("tcp driver: epoll_create1: " + errno_text(err));
  }
  listen_fd_ = fd;
  local_addr_ = format_addr(sa);
  log_write(log_level::info, "tcp", "listening on " + local_addr_);
}

post_result tcp_driver::check_postable(conn* c, std::size_t iov_count) const {
  if (!c || c->st == state::failed || c->st == state::closed || !c->visible)
    return post_result::failed;
  if (iov_count > kMaxIov) return post_result::failed;
  if (c->st != state::established) return post_result::retry;
  return post_result::posted;
}

post_result tcp_driver::post_send_packet(connection_id id, std::span<const iovec> iov,
                                         void* token) {
  conn* c = find(id);
  post_result r = check_postable(c, iov.size());
  if (r != post_result::posted) return r;
  if (total_len(iov) > kMaxPacket) return post_result::failed;
  if (c->queued_reports + c->done.size() >= kMaxSendsInFlight) return post_result::retry;
  enqueue(*c, wire::kind_packet, 0, iov, token);
  return post_result::posted;
}

// Written straight to the socket when nothing is queued before it; what
// the socket does not take now is copied and goes out with later polls.
post_result tcp_driver::send_inline(connection_id id, std::span<const iovec> iov) {
  conn* c = find(id);
  post_result r = check_postable(c, iov.size());
  if (r != post_result::posted) return r;
  const std::size_t len = total_len(iov);
  if (len > kMaxPacket) return post_result::failed;
  if (!c->sendq.empty() || c->hs_sent < c->hs_out.size()) return post_result::retry;
  wire::frame_header hdr;
  hdr.kind = wire::kind_packet;
  hdr.length = len;
  iovec v[kMaxIov + 1];
  v[0] = {&hdr, sizeof hdr};
  for (std::size_t i = 0; i < iov.size(); ++i) v[i + 1] = iov[i];
  msghdr msg{};
  msg.msg_iov = v;
  msg.msg_iovlen = iov.size() + 1;
  ssize_t n;
  do n = ::sendmsg(c->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  while (n < 0 && errno == EINTR);
  if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
    fail(*c, errno_text(errno));
    return post_result::failed;
  }
  const std::size_t written = n < 0 ? 0 : static_cast<std::size_t>(n);
  const std::size_t total = sizeof hdr + len;
  if (written == total) return post_result::posted;
  // Keep the rest (the frame must go out whole, before anything later).
  send_op& op = c->sendq.emplace_back();
  op.report = false;
  op.owned.resize(total - written);
  std::size_t skip = written, at = 0;
  for (std::size_t i = 0; i <= iov.size(); ++i) {
    const std::size_t l = v[i].iov_len;
    if (skip >= l) {
      skip -= l;
      continue;
    }
    std::memcpy(op.owned.data() + at, static_cast<const std::byte*>(v[i].iov_base) + skip, l - skip);
    at += l - skip;
    skip = 0;
  }
  op.cur.parts.push_back({op.owned.data(), op.owned.size()});
  op.left = op.owned.size();
  return post_result::posted;
}

post_result tcp_driver::post_send_data(connection_id id, std::uint64_t cookie,
                                       std::span<const iovec> iov, void* token) {
  conn* c = find(id);
  post_result r = check_postable(c, iov.size());
  if (r != post_result::posted) return r;
  if (c->queued_reports + c->done.size() >= kMaxSendsInFlight) return post_result::retry;
  enqueue(*c, wire::kind_data, cookie, iov, token);
  return post_result::posted;
}

post_result tcp_driver::post_recv_data(connection_id id, std::uint64_t cookie,
                                       std::span<const iovec> iov, void* token) {
  conn* c = find(id);
  post_result r = check_postable(c, iov.size());
  if (r != post_result::posted) return r;
  recv_op op;
  op.cur.parts.assign(iov.begin(), iov.end());
  op.capacity = total_len(iov);
  op.token = token;
  if (!c->recvs.emplace(cookie, std::move(op)).second) return post_result::failed;
  return post_result::posted;
}

// A new entry of the send queue: at the back, or (a packet) ahead of the
// fragments not started yet, so that control traffic and small messages do
// not wait behind a whole bulk transfer. Inserting in the middle of the
// deque moves entries: their header parts are pointed at their new place.
send_op& tcp_driver::push_op(conn& c, bool ahead_of_fragments) {
  auto at = c.sendq.end();
  if (ahead_of_fragments) {
    at = std::find_if(c.sendq.begin(), c.sendq.end(), [](const send_op& o) {
      return o.fragment && o.left == sizeof o.hdr + o.hdr.length;
    });
  }
  if (at == c.sendq.end()) return c.sendq.emplace_back();  // deque: &op.hdr stays put
  const auto pos = at - c.sendq.begin();
  c.sendq.emplace(at);
  for (send_op& o : c.sendq)
    if (o.owned.empty() && !o.cur.parts.empty()) o.cur.parts[0].iov_base = &o.hdr;
  return c.sendq[static_cast<std::size_t>(pos)];
}

// Queues a frame, or (bulk data longer than the fragment size) one frame
// per fragment, each with its own header and the caller's bytes (no copy);
// only the last is reported.
void tcp_driver::enqueue(conn& c, std::uint32_t kind, std::uint64_t cookie,
                         std::span<const iovec> iov, void* token) {
  bool was_idle = !c.wants_write();
  const std::size_t len = total_len(iov);
  const std::size_t frag = tun_.fragment;
  const bool cut = kind == wire::kind_data && frag > 0 && len > frag;
  iov_cursor src;
  if (cut) src.parts.assign(iov.begin(), iov.end());
  std::size_t left = len;
  do {
    send_op& op = push_op(c, kind == wire::kind_packet);
    const std::size_t piece = cut ? std::min(frag, left) : len;
    left -= piece;
    op.hdr.kind = cut && left > 0 ? wire::kind_data_more : kind;
    op.hdr.length = piece;
    op.hdr.cookie = cookie;
    op.fragment = cut;
    op.cur.parts.push_back({&op.hdr, sizeof op.hdr});
    if (cut) {
      iovec v[kMaxIov];
      int n = 0;
      src.fill(v, &n, kMaxIov, piece);
      src.advance(piece);
      op.cur.parts.insert(op.cur.parts.end(), v, v + n);
    } else {
      op.cur.parts.insert(op.cur.parts.end(), iov.begin(), iov.end());
    }
    op.left = sizeof op.hdr + piece;
    op.report = left == 0;
    if (op.report) {
      op.token = token;
      ++c.queued_reports;
    }
  } while (left > 0);
  if (was_idle) flush_out(c);  // completion is still reported by poll()
}

void tcp_driver::fail(conn& c, std::string reason) {
  if (c.st == state::failed || c.st == state::closed) return;
  if (c.visible)
    log_write(log_level::warn, "tcp",
              "connection to rank " + std::to_string(c.peer_rank) + " (" +
                  c.peer_addr + ") failed: " + reason);
  else
    refusal_log_.write(log_level::warn, "tcp", "refused connection from " + c.peer_addr + ": " + reason);
  close_fd(c);
  c.st = state::failed;
  c.fail_reason = std::move(reason);
  c.sendq.clear();
  c.queued_reports = 0;
  // c.done keeps the sends already written out whole: settle() reports
  // them as done before the failure (a peer that read them and exited
  // must not turn them into errors).
  c.recvs.clear();
  c.rx_data = nullptr;
}

std::string tcp_driver::failure_reason(connection_id id) const {
  if (auto it = conns_.find(id); it != conns_.end() && it->second->st != state::closed)
    return it->second->st == state::failed ? it->second->fail_reason : std::string();
  if (auto it = failed_reasons_.find(id); it != failed_reasons_.end()) return it->second;
  return "connection closed";
}

void tcp_driver::close_connection(connection_id id) {
  conn* c = find(id);
  if (!c) return;
  c->st = state::closed;
  retire(*c);
}

int tcp_driver::poll() {
  if (listen_fd_ < 0 || depth_ > 0) return 0;
  if (conns_.empty() && pending_.empty() && (++idle_polls_ % kIdlePollEvery) != 0) return 0;
  ++depth_;
  int work = 0;
  pfds_.clear();
  pids_.clear();
  steady::time_point resume{};
  const bool listening = accepting(steady::now(), &resume);
  pfds_.push_back({listening ? listen_fd_ : -1, POLLIN, 0});
  const bool had_pending = !pending_.empty();
  pfds_.push_back({had_pending ? pending_epoll_ : -1, POLLIN, 0});
  bool handshaking = false;
  for (auto& [id, c] : conns_) {
    short ev = 0;
    if (c->fd >= 0) {
      ev = c->st == state::connecting ? POLLOUT : POLLIN;
      if (c->st == state::established) ev |= POLLRDHUP;
      if (c->wants_write()) ev |= POLLOUT;
    }
    handshaking |= c->st == state::connecting || c->st == state::await_ack ||
                   c->st == state::await_hello;
    pfds_.push_back({c->fd, ev, 0});
    pids_.push_back(id);
  }
  if (::poll(pfds_.data(), pfds_.size(), 0) < 0)
    for (pollfd& p : pfds_) p.revents = 0;  // EINTR: try again next time
  const bool accepted = pfds_[0].revents && accept_all() > 0;
  work += accepted ? 1 : 0;
  if (had_pending || accepted) work += progress_pending();
  const steady::time_point now = handshaking ? steady::now() : steady::time_point{};
  for (std::size_t i = 0; i < pids_.size(); ++i)  // all of them before any report_later()
    if (conn* c = find(pids_[i]); c && c->st == state::established)
      c->hangup = (pfds_[i + 2].revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
  for (std::size_t i = 0; i < pids_.size(); ++i) {
    conn* c = find(pids_[i]);
    if (!c) continue;  // closed by a callback
    work += progress(*c, pfds_[i + 2].revents);
    if (handshaking && now > c->deadline &&
        (c->st == state::connecting || c->st == state::await_ack ||
         c->st == state::await_hello))
      fail(*c, c->incoming ? "no complete hello in time"
                           : "handshake timed out (peer does not answer)");
    if (report_later(*c)) {
      ++work;  // not idle: the report is due within a few polls
      continue;
    }
    work += settle(*c);
  }
  --depth_;
  graveyard_.clear();
  return work;
}

// Sleeping: the listening socket and every connection's socket (writable
// too while bytes wait to go out). Finished sends not reported yet, or a
// failure not reported, are work to do now. A handshake in progress bounds
// the sleep so its deadline is checked.
arm_result tcp_driver::arm_wakeup(std::vector<pollfd>& fds, int& timeout_ms) {
  if (listen_fd_ < 0) return arm_result::armed;
  steady::time_point resume{};
  if (accepting(steady::now(), &resume)) {
    fds.push_back({listen_fd_, POLLIN, 0});
  } else {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(resume - steady::now());
    limit_sleep(timeout_ms, static_cast<int>(std::clamp<long long>(left.count(), 0, 1 << 30)));
  }
  if (!pending_.empty()) {
    fds.push_back({pending_epoll_, POLLIN, 0});
    // Wake for the earliest handshake deadline.
    if (!pending_deadlines_.empty()) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(pending_deadlines_.front().first - steady::now());
      limit_sleep(timeout_ms, static_cast<int>(std::clamp<long long>(left.count(), 0, 1 << 30)));
    }
  }
  bool handshaking = false;
  for (auto& [id, c] : conns_) {
    if (!c->done.empty() || c->st == state::failed) return arm_result::busy;
    if (c->fd < 0) continue;
    short ev = c->st == state::connecting ? POLLOUT : POLLIN;
    if (c->wants_write()) ev |= POLLOUT;
    fds.push_back({c->fd, ev, 0});
    handshaking |= c->st == state::connecting || c->st == state::await_ack || c->st == state::await_hello;
  }
  if (handshaking) limit_sleep(timeout_ms, 10);
  return arm_result::armed;
}

// Whether c's failure, an orderly close by its peer, waits for another
// connection whose peer hung up too to be read to its end (and fail first).
// Bounded: a peer that half-closed and still reads does not delay it long.
bool tcp_driver::report_later(conn& c) {
  if (c.st != state::failed || !c.closed_by_peer || c.report_deferred >= kMaxReportDeferrals) return false;
  for (auto& [id, o] : conns_)
    if (o.get() != &c && o->st == state::established && o->hangup) {
      ++c.report_deferred;
      return true;
    }
  return false;
}

int tcp_driver::progress(conn& c, short revents) {
  int work = 0;
  bool readable = revents & (POLLIN | POLLHUP | POLLERR);
  bool writable = revents & (POLLOUT | POLLHUP | POLLERR);
  if (c.st == state::connecting) {
    if (!writable) return 0;
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) err = errno;
    if (err) {
      fail(c, "cannot connect: " + errno_text(err));
      return 1;
    }
    c.st = state::await_ack;
    ++work;
  }
  if (writable && c.wants_write()) work += flush_out(c);
  if (readable && c.st == state::await_ack) {
    work += read_ack(c);
  } else if (readable && c.st == state::await_hello) {
    work += read_hello(c);
    if (c.st == state::established) work += flush_out(c);  // the ack
  }
  if (readable && c.st == state::established) work += read_frames(c);
  return work;
}

int tcp_driver::flush_out(conn& c) {
  int work = 0;
  while (c.hs_sent < c.hs_out.size()) {
    ssize_t n = ::send(c.fd, c.hs_out.data() + c.hs_sent, c.hs_out.size() - c.hs_sent,
                       MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) fail(c, errno_text(errno));
      return work;
    }
    c.hs_sent += static_cast<std::size_t>(n);
    ++work;
  }
  while (c.st == state::established && !c.sendq.empty()) {
    iovec v[kMaxWriteIov];
    int n = 0;
    std::size_t want = 0;
    for (auto it = c.sendq.begin(); it != c.sendq.end() && n < kMaxWriteIov; ++it)
      want += it->cur.fill(v, &n, kMaxWriteIov, it->left);
    msghdr msg{};
    msg.msg_iov = v;
    msg.msg_iovlen = static_cast<std::size_t>(n);
    ssize_t r = ::sendmsg(c.fd, &msg, MSG_NOSIGNAL);
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) fail(c, errno_text(errno));
      return work;
    }
    ++work;
    std::size_t sent = static_cast<std::size_t>(r);
    while (!c.sendq.empty()) {
      send_op& op = c.sendq.front();
      std::size_t take = std::min(sent, op.left);
      op.cur.advance(take);
      op.left -= take;
      sent -= take;
      if (op.left) break;
      if (op.report) {
        c.done.push_back(op.token);
        --c.queued_reports;
      }
      c.sendq.pop_front();
    }
    if (static_cast<std::size_t>(r) < want) return work;  // socket full
  }
  return work;
}

int tcp_driver::read_frames(conn& c) {
  int work = 0;
  for (int i = 0; i < kMaxReadsPerPoll && c.st == state::established; ++i) {
    iovec v[kMaxIov + 1];
    int n = 0;
    std::size_t want = 0;
    if (c.rx_in_body) {
      std::size_t body_left = c.rx_len - c.rx_got;
      if (c.rx_kind == wire::kind_packet) {
        v[n++] = {c.pkt_buf.data() + c.rx_got, body_left};
        want += body_left;
      } else {
        want += c.rx_data->cur.fill(v, &n, kMaxIov, body_left);
      }
    }
    if (want == (c.rx_in_body ? c.rx_len - c.rx_got : 0)) {  // whole body listed
      v[n++] = {reinterpret_cast<char*>(&c.rx_hdr) + c.rx_hdr_got,
                sizeof c.rx_hdr - c.rx_hdr_got};
      want += sizeof c.rx_hdr - c.rx_hdr_got;
    }
    ssize_t r = ::readv(c.fd, v, n);
    if (r == 0) {
      c.closed_by_peer = true;
      fail(c, "peer closed the connection");
      break;
    }
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) fail(c, errno_text(errno));
      break;
    }
    ++work;
    std::size_t got = static_cast<std::size_t>(r);
    if (c.rx_in_body) {
      std::size_t take = std::min(got, c.rx_len - c.rx_got);
      c.rx_got += take;
      if (c.rx_kind != wire::kind_packet) c.rx_data->cur.advance(take);
      got -= take;
      if (c.rx_got == c.rx_len) finish_body(c);
    }
    c.rx_hdr_got += got;  // bytes past the body went into the next header
    if (c.rx_hdr_got == sizeof c.rx_hdr && c.st == state::established) start_body(c);
    if (static_cast<std::size_t>(r) < want) break;  // drained for now
  }
  return work;
}

// A whole header is in rx_hdr: checks it and sets up its body.
void tcp_driver::start_body(conn& c) {
  const wire::frame_header h = c.rx_hdr;
  c.rx_hdr_got = 0;
  if (h.magic != wire::frame_magic) {
    fail(c, "protocol error: bad frame magic");
    return;
  }
  if (h.kind == wire::kind_packet) {
    if (h.length > kMaxPacket) {
      fail(c, "protocol error: packet of " + std::to_string(h.length) +
                  " bytes exceeds the maximum of " + std::to_string(kMaxPacket));
      return;
    }
  } else if (h.kind == wire::kind_data || h.kind == wire::kind_data_more) {
    auto it = c.recvs.find(h.cookie);
    if (it == c.recvs.end()) {
      fail(c, "protocol error: data frame for unknown cookie " + std::to_string(h.cookie));
      return;
    }
    recv_op& op = it->second;
    if (h.length > op.capacity - op.got) {
      fail(c, "protocol error: data frame of " + std::to_string(h.length) +
                  " bytes for cookie " + std::to_string(h.cookie) +
                  (op.got ? " after " + std::to_string(op.got) + " bytes" : std::string()) +
                  " exceeds the " + std::to_string(op.capacity) + " bytes posted");
      return;
    }
    c.rx_data = &op;  // stays put: recvs is a node-based map
    c.rx_cookie = h.cookie;
  } else {
    fail(c, "protocol error: unknown frame kind " + std::to_string(h.kind));
    return;
  }
  c.rx_kind = h.kind;
  c.rx_len = h.length;
  c.rx_got = 0;
  c.rx_in_body = true;
  if (c.rx_len == 0) finish_body(c);
}

// The body is complete: hands it to the engine (which may re-enter us).
void tcp_driver::finish_body(conn& c) {
  c.rx_in_body = false;
  if (c.rx_kind == wire::kind_packet) {
    cfg_.events->on_packet(c.id, std::span<const std::byte>(c.pkt_buf.data(), c.rx_len));
  } else {
    recv_op* op = c.rx_data;
    c.rx_data = nullptr;
    op->got += c.rx_len;
    if (c.rx_kind == wire::kind_data_more) return;  // more fragments follow
    void* token = op->token;
    const std::size_t got = op->got;
    c.recvs.erase(c.rx_cookie);
    cfg_.events->on_recv_data_done(token, got);
  }
}

// Reports finished sends, then a failure if there was one.
int tcp_driver::settle(conn& c) {
  int work = 0;
  // Report the sends finished so far; sends the callbacks post (and that
  // finish at once) go to c.done for the next poll, so they never count
  // against the in-flight limit as if still pending.
  c.reporting.swap(c.done);
  for (std::size_t i = 0; i < c.reporting.size() && (c.st == state::established || c.st == state::failed);
       ++i, ++work)
    cfg_.events->on_send_done(c.reporting[i]);
  c.reporting.clear();
  if (c.st == state::failed) {
    retire(c);
    if (c.visible) failed_reasons_[c.id] = c.fail_reason;
    if (c.visible) cfg_.events->on_connection_failed(c.id, c.fail_reason);
    ++work;
  }
  return work;
}

}  // namespace nmad::tcp_impl

namespace nmad {
std::unique_ptr<driver> make_tcp_driver() { return std::make_unique<tcp_impl::tcp_driver>(); }
}  // namespace nmad
