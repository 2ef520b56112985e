// tcp driver: connecting, accepting and the handshake that checks the job
// key (see tcp_driver.cpp for the design).
#include "drivers/tcp/tcp_driver.hpp"
#include "drivers/tcp/tcp_internal.hpp"

namespace nmad::tcp_impl {


connection_id tcp_driver::connect(int peer_rank, std::string_view address) {
  conn& c = add_conn();
  c.visible = true;
  c.peer_rank = peer_rank;
  c.peer_addr = address;
  c.deadline = steady::now() + tun_.connect_timeout;
  sockaddr_in sa{};
  if (listen_fd_ < 0) {
    fail(c, "driver not open");
  } else if (peer_rank < 0 || peer_rank >= cfg_.size || peer_rank == cfg_.rank) {
    fail(c, "peer rank out of range");
  } else if (!parse_addr(address, sa)) {
    fail(c, "bad address '" + c.peer_addr + "' (want a.b.c.d:port)");
  } else if ((c.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) < 0) {
    fail(c, "socket: " + errno_text(errno));
  } else {
    set_nodelay(c.fd);
    set_liveness(c.fd, tun_.user_timeout);
    set_sockbuf(c.fd, tun_.sockbuf);
    wire::hello h;
    h.rank = cfg_.rank;
    h.key_len = static_cast<std::uint32_t>(cfg_.job_key.size());
    c.hs_out.assign(reinterpret_cast<const char*>(&h), sizeof h);
    c.hs_out += cfg_.job_key;
    if (::connect(c.fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) < 0 &&
        errno != EINPROGRESS)
      fail(c, "cannot connect: " + errno_text(errno));
  }
  return c.id;
}

// The oldest connection still in its handshake (0 if none) and when it was
// accepted; ids no longer pending are dropped from the front on the way.
connection_id tcp_driver::oldest_pending(steady::time_point* accepted) {
  while (!pending_deadlines_.empty() && !pending_.count(pending_deadlines_.front().second))
    pending_deadlines_.pop_front();
  if (pending_deadlines_.empty()) return 0;
  *accepted = pending_deadlines_.front().first - tun_.handshake_timeout;
  return pending_deadlines_.front().second;
}

// Whether to watch the listening socket now; if not, *resume says until
// when at most (a handshake ending meanwhile wakes the pending epoll set).
// Not after an accept error (kAcceptPause), nor while NMAD_TCP_PENDING_MAX
// handshakes are pending and none has been silent for kSilentEvict.
bool tcp_driver::accepting(steady::time_point now, steady::time_point* resume) {
  if (now < accept_paused_until_) {
    *resume = accept_paused_until_;
    return false;
  }
  if (pending_.size() < tun_.pending_max) return true;
  steady::time_point oldest{};
  if (!oldest_pending(&oldest)) return true;
  const auto evictable = oldest + std::min<steady::duration>(kSilentEvict, tun_.handshake_timeout);
  if (evictable <= now) return true;
  *resume = evictable;
  return false;
}

// Up to kAcceptBatch new connections, each read at once (a peer's hello is
// usually there already: it is sent as soon as the connection is up).
int tcp_driver::accept_all() {
  int work = 0;
  for (int n = 0; n < kAcceptBatch; ++n) {
    steady::time_point resume{};
    if (!accepting(steady::now(), &resume)) return work;
    if (pending_.size() >= tun_.pending_max) {
      // The oldest has been silent long enough: it makes room.
      steady::time_point oldest{};
      if (const connection_id id = oldest_pending(&oldest)) {
        fail(*pending_.at(id), "no hello within 1 s while " + std::to_string(pending_.size()) +
                                   " handshakes were pending (NMAD_TCP_PENDING_MAX)");
        drop_pending(id);
        ++work;
      }
    }
    sockaddr_in sa{};
    socklen_t len = sizeof sa;
    int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&sa), &len,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        // Out of descriptors (or memory): the connections wait in the
        // kernel's queue; look again later, not at once.
        accept_paused_until_ = steady::now() + kAcceptPause;
        refusal_log_.write(log_level::warn, "tcp",
                           "accept: " + errno_text(errno) + " (" + std::to_string(pending_.size()) +
                               " handshakes pending); accepting again in 100 ms");
      }
      return work;
    }
    ++work;
    const std::uint32_t src = sa.sin_addr.s_addr;
    unsigned& held = pending_per_source_[src];
    if (held >= tun_.pending_per_source) {
      ::close(fd);
      refusal_log_.write(log_level::warn, "tcp",
                         "refused connection from " + format_addr(sa) + ": " + std::to_string(held) +
                             " handshakes already pending from that address (NMAD_TCP_PENDING_PER_HOST)");
      continue;
    }
    // Like connect(): no Nagle delay (a small write behind another would
    // wait for the peer's delayed ack, ~40 ms), and the liveness options.
    set_nodelay(fd);
    set_liveness(fd, tun_.user_timeout);
    set_sockbuf(fd, tun_.sockbuf);
    auto c = std::make_unique<conn>();
    c->id = next_id_++;
    c->fd = fd;
    c->incoming = true;
    c->source = src;
    c->st = state::await_hello;
    c->peer_addr = format_addr(sa);
    c->deadline = steady::now() + tun_.handshake_timeout;
    c->hs_in.resize(sizeof(wire::hello));
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = c->id;
    if (::epoll_ctl(pending_epoll_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      refusal_log_.write(log_level::warn, "tcp",
                         "refused connection from " + c->peer_addr + ": epoll: " + errno_text(errno));
      close_fd(*c);
      if (held == 0) pending_per_source_.erase(src);
      continue;
    }
    ++held;
    const connection_id id = c->id;
    pending_deadlines_.emplace_back(c->deadline, id);
    conn& ref = *c;
    pending_.emplace(id, std::move(c));
    // Identify first: what it has sent already.
    read_hello(ref);  // on success moves it to conns_ (promote)
    if (ref.st == state::established) flush_out(ref);  // the ack
    else if (ref.st == state::failed) drop_pending(id);
  }
  return work;
}

// Handshakes that made progress (readable), then the ones whose deadline
// passed. Nothing here looks at an idle pending connection.
int tcp_driver::progress_pending() {
  int work = 0;
  epoll_event evs[64];
  int n;
  do n = ::epoll_wait(pending_epoll_, evs, 64, 0);
  while (n < 0 && errno == EINTR);
  for (int i = 0; i < n; ++i) {
    const connection_id id = evs[i].data.u64;
    auto it = pending_.find(id);
    if (it == pending_.end()) continue;
    conn& c = *it->second;
    work += read_hello(c);  // on success moves c to conns_ (promote)
    if (c.st == state::established) work += flush_out(c);  // the ack
    else if (c.st == state::failed) drop_pending(id);
  }
  if (!pending_deadlines_.empty()) {
    const steady::time_point now = steady::now();
    while (!pending_deadlines_.empty() && pending_deadlines_.front().first <= now) {
      const connection_id id = pending_deadlines_.front().second;
      pending_deadlines_.pop_front();
      auto it = pending_.find(id);
      if (it == pending_.end()) continue;  // done or refused since
      fail(*it->second, "no complete hello in time");
      drop_pending(id);
      ++work;
    }
  }
  return work;
}

void tcp_driver::drop_pending(connection_id id) {
  auto it = pending_.find(id);
  if (it == pending_.end()) return;
  conn& c = *it->second;
  if (auto s = pending_per_source_.find(c.source); s != pending_per_source_.end() && --s->second == 0)
    pending_per_source_.erase(s);
  close_fd(c);  // also leaves the epoll set
  pending_.erase(it);
}

// A pending connection presented the job key: it becomes a connection the
// engine knows (same id, same object).
void tcp_driver::promote(conn& c) {
  auto it = pending_.find(c.id);
  if (it == pending_.end()) return;
  ::epoll_ctl(pending_epoll_, EPOLL_CTL_DEL, c.fd, nullptr);
  if (auto s = pending_per_source_.find(c.source); s != pending_per_source_.end() && --s->second == 0)
    pending_per_source_.erase(s);
  conns_.emplace(c.id, std::move(it->second));
  pending_.erase(it);
}

// Reads into hs_in until it is full. False on EOF/error (the connection has
// failed) or when the socket has nothing more for now.
bool tcp_driver::read_exact(conn& c) {
  while (c.hs_got < c.hs_in.size()) {
    ssize_t n = ::recv(c.fd, c.hs_in.data() + c.hs_got, c.hs_in.size() - c.hs_got, 0);
    if (n == 0) {
      fail(c, c.incoming ? "closed before completing the handshake"
                         : "peer closed the connection during the handshake "
                           "(wrong job key?)");
      return false;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) fail(c, errno_text(errno));
      return false;
    }
    c.hs_got += static_cast<std::size_t>(n);
  }
  return true;
}

int tcp_driver::read_ack(conn& c) {
  c.hs_in.resize(sizeof(wire::ack));
  if (!read_exact(c)) return 0;
  wire::ack a;
  std::memcpy(&a, c.hs_in.data(), sizeof a);
  if (std::memcmp(a.magic, wire::ack{}.magic, sizeof a.magic) != 0) {
    fail(c, "bad handshake ack (not an nmad tcp peer)");
  } else if (a.version != wire::protocol_version) {
    fail(c, "peer speaks protocol version " + std::to_string(a.version));
  } else if (a.rank != c.peer_rank) {
    fail(c, "peer at that address is rank " + std::to_string(a.rank));
  } else {
    become_established(c);
    cfg_.events->on_connected(c.id, c.peer_rank);
  }
  return 1;
}

int tcp_driver::read_hello(conn& c) {
  if (!read_exact(c)) return 0;
  wire::hello h;
  std::memcpy(&h, c.hs_in.data(), sizeof h);
  if (c.hs_in.size() == sizeof h) {  // fixed part complete: check, then read key
    if (std::memcmp(h.magic, wire::hello{}.magic, sizeof h.magic) != 0) {
      fail(c, "bad hello (not an nmad tcp peer)");
      return 1;
    }
    if (h.version != wire::protocol_version) {
      fail(c, "unsupported protocol version " + std::to_string(h.version));
      return 1;
    }
    if (h.key_len > wire::max_key_len) {
      fail(c, "bad hello (job key too long)");
      return 1;
    }
    c.hs_in.resize(sizeof h + h.key_len);
    if (!read_exact(c)) return 1;
  }
  std::string_view key(c.hs_in.data() + sizeof h, h.key_len);
  if (!same_key(key, cfg_.job_key)) {
    fail(c, "wrong job key");
  } else if (h.rank < 0 || h.rank >= cfg_.size || h.rank == cfg_.rank) {
    fail(c, "rank " + std::to_string(h.rank) + " out of range");
  } else {
    wire::ack a;
    a.rank = cfg_.rank;
    c.hs_out.assign(reinterpret_cast<const char*>(&a), sizeof a);
    c.hs_sent = 0;
    c.peer_rank = h.rank;
    promote(c);
    c.visible = true;
    become_established(c);
    cfg_.events->on_connected(c.id, c.peer_rank);
  }
  return 1;
}

void tcp_driver::become_established(conn& c) {
  c.st = state::established;
  c.hs_in = {};
  c.pkt_buf.resize(kMaxPacket);
  log_write(log_level::info, "tcp",
            "connected to rank " + std::to_string(c.peer_rank) + " (" + c.peer_addr + ")");
}
}  // namespace nmad::tcp_impl
