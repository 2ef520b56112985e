#pragma once
// The tcp driver's internals, shared by its source files (tcp_driver.cpp:
// data path and polling; tcp_connect.cpp: connecting, accepting and the
// handshake). Private to drivers/tcp.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "api/nmad/services/config.hpp"
#include "api/nmad/services/log.hpp"
#include "drivers/tcp/tcp_wire.hpp"


namespace nmad::tcp_impl {

namespace wire = tcp_wire;
using steady = std::chrono::steady_clock;

constexpr std::size_t kMaxPacket = 64 * 1024;
constexpr std::size_t kMaxIov = 64;
constexpr std::size_t kMaxSendsInFlight = 32;
constexpr int kMaxWriteIov = 256;
constexpr int kMaxReadsPerPoll = 64;
// Polls an orderly close's report may wait for other hung-up connections.
constexpr int kMaxReportDeferrals = 256;
constexpr int kDefaultSockbuf = 256 * 1024;
constexpr std::size_t kDefaultFragment = 512 * 1024;
constexpr std::size_t kMinFragment = 4096;

struct tunables {
  std::string host = "127.0.0.1";
  std::string host_source = "NMAD_TCP_HOST";  // the variable `host` came from, for errors
  int port = 0;
  std::chrono::milliseconds handshake_timeout{5000};
  std::chrono::milliseconds connect_timeout{30000};
  // 0: the kernel's defaults (a dead peer host or link is noticed after
  // about 15 minutes of retransmissions, an idle connection never).
  std::chrono::milliseconds user_timeout{0};
  // Incoming connections one source address may hold in their handshake.
  unsigned pending_per_source = 256;
  // Incoming connections held in their handshake in all (descriptors kept
  // for the job: by default at most a quarter of the descriptor limit).
  unsigned pending_max = 256;
  // SO_SNDBUF/SO_RCVBUF of every connection; 0: the kernel's autotuning.
  int sockbuf = kDefaultSockbuf;
  // Bulk data longer than this goes in fragments of this size (0: whole).
  std::size_t fragment = kDefaultFragment;
};

// `instance`: which tcp rail this is (driver_config::instance). With
// NMAD_TCP_HOSTS=a,b,... rail i listens on and advertises the i-th address
// (NMAD_TCP_HOST is then ignored); a rail without an entry is an error.
inline tunables read_tunables(int instance = 0) {
  tunables t;
  t.host = config::text("NMAD_TCP_HOST");
  if (const std::string hosts = config::text("NMAD_TCP_HOSTS"); !hosts.empty()) {
    const char* hs = hosts.c_str();
    std::vector<std::string> list;
    std::string_view rest(hs);
    while (true) {
      const std::size_t comma = rest.find(',');
      list.emplace_back(rest.substr(0, comma));
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
    if (instance < 0 || static_cast<std::size_t>(instance) >= list.size())
      throw std::runtime_error("tcp driver: NMAD_TCP_HOSTS='" + std::string(hs) + "' names " +
                               std::to_string(list.size()) + " address(es), but this process opens tcp rail " +
                               std::to_string(instance + 1) +
                               " (NMAD_DRIVERS): give one address per tcp rail, in order");
    t.host = list[static_cast<std::size_t>(instance)];
    t.host_source = "NMAD_TCP_HOSTS entry " + std::to_string(instance + 1);
    if (t.host.empty())
      throw std::runtime_error("tcp driver: NMAD_TCP_HOSTS='" + std::string(hs) + "': entry " +
                               std::to_string(instance + 1) + " is empty");
  }
  // Ranges (core/common/config_knobs.cpp) keep each within its type.
  t.port = static_cast<int>(config::integer("NMAD_TCP_PORT"));
  t.handshake_timeout = config::milliseconds("NMAD_TCP_HANDSHAKE_TIMEOUT_MS");
  t.connect_timeout = config::milliseconds("NMAD_TCP_CONNECT_TIMEOUT_MS");
  t.user_timeout = config::milliseconds("NMAD_TCP_USER_TIMEOUT_MS");
  t.pending_per_source = static_cast<unsigned>(config::integer("NMAD_TCP_PENDING_PER_HOST"));
  if (auto v = config::optional_integer("NMAD_TCP_PENDING_MAX")) {
    t.pending_max = static_cast<unsigned>(*v);
  } else {
    // A quarter of the descriptor table, within 16-256: the rest stays for
    // the job's own connections and files.
    rlimit rl{};
    long dflt = 256;
    if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
      dflt = std::clamp<long>(static_cast<long>(rl.rlim_cur / 4), 16, 256);
    t.pending_max = static_cast<unsigned>(dflt);
  }
  t.sockbuf = static_cast<int>(config::size("NMAD_TCP_SOCKBUF"));
  t.fragment = config::size("NMAD_TCP_FRAGMENT");
  return t;
}

inline std::string errno_text(int err) {
  switch (err) {
    case ECONNRESET:
    case EPIPE: return "connection reset by peer";
    case ECONNREFUSED: return "connection refused";
    case ETIMEDOUT: return "connection timed out (the peer's host stopped answering: host or link down?)";
    default: {
      char buf[128];
      return strerror_r(err, buf, sizeof buf);  // GNU variant
    }
  }
}

inline std::string format_addr(const sockaddr_in& sa) {
  char ip[INET_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof ip);
  return std::string(ip) + ":" + std::to_string(ntohs(sa.sin_port));
}

// "a.b.c.d:port" -> sockaddr_in.
inline bool parse_addr(std::string_view s, sockaddr_in& sa) {
  auto colon = s.rfind(':');
  if (colon == std::string_view::npos) return false;
  std::string host(s.substr(0, colon));
  std::string_view port_s = s.substr(colon + 1);
  unsigned port = 0;
  auto [end, ec] = std::from_chars(port_s.data(), port_s.data() + port_s.size(), port);
  if (ec != std::errc{} || end != port_s.data() + port_s.size() || port == 0 ||
      port > 65535)
    return false;
  sa = {};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<std::uint16_t>(port));
  return inet_pton(AF_INET, host.c_str(), &sa.sin_addr) == 1;
}

// Compares in time independent of where the keys differ.
inline bool same_key(std::string_view a, std::string_view b) {
  std::size_t diff = a.size() ^ b.size();
  std::size_t n = std::max(a.size(), b.size());
  for (std::size_t i = 0; i < n; ++i) {
    unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<std::size_t>(x ^ y);
  }
  return diff == 0;
}

// Fixed socket buffer sizes (0: leave the kernel's autotuning alone).
inline void set_sockbuf(int fd, int bytes) {
  if (bytes <= 0) return;
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
}

inline void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// NMAD_TCP_USER_TIMEOUT_MS: a connection fails (ETIMEDOUT) when what it
// sent stays unacknowledged for `timeout`, or when, idle, its peer's kernel
// stops answering keepalive probes (sent after timeout/2 of silence, then
// every timeout/4, whole seconds, at least 1): a peer host that went away or
// a link that went down is noticed in about `timeout` whatever the traffic.
// Probes and acknowledgements come from the peer's kernel, so a busy peer
// process is not taken for a dead one, except one that leaves its socket
// full (zero window) for `timeout`: Linux counts that too.
inline void set_liveness(int fd, std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0) return;
  const unsigned ms = static_cast<unsigned>(timeout.count());
  int one = 1;
  int idle = std::max(1, static_cast<int>(ms / 2000));
  int interval = std::max(1, static_cast<int>(ms / 4000));
  ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, sizeof ms);
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
}

inline std::size_t total_len(std::span<const iovec> iov) {
  std::size_t n = 0;
  for (const iovec& v : iov) n += v.iov_len;
  return n;
}

// A cursor over an iovec list: `part` entries and `off` bytes consumed.
struct iov_cursor {
  std::vector<iovec> parts;
  std::size_t part = 0, off = 0;

  // Appends up to `limit` bytes of what is left to out[*n..max).
  std::size_t fill(iovec* out, int* n, int max, std::size_t limit) const {
    std::size_t bytes = 0;
    std::size_t o = off;
    for (std::size_t p = part; p < parts.size() && *n < max && bytes < limit; ++p, o = 0) {
      std::size_t len = std::min(parts[p].iov_len - o, limit - bytes);
      if (len == 0) continue;
      out[(*n)++] = {static_cast<char*>(parts[p].iov_base) + o, len};
      bytes += len;
    }
    return bytes;
  }
  void advance(std::size_t n) {
    while (part < parts.size()) {
      std::size_t left = parts[part].iov_len - off;
      if (n < left) { off += n; return; }
      n -= left;
      ++part;
      off = 0;
    }
  }
};

enum class state { connecting, await_ack, await_hello, established, failed, closed };

struct send_op {
  wire::frame_header hdr;
  iov_cursor cur;  // parts[0] is hdr itself (or `owned`)
  std::size_t left = 0;
  void* token = nullptr;
  bool report = true;                 // false: an inline send or a fragment
                                      // before the last (never reported)
  bool fragment = false;              // a piece of a transfer cut in fragments
  std::vector<std::byte> owned;       // inline send: the bytes not written yet
};

struct recv_op {
  iov_cursor cur;
  std::size_t capacity = 0;
  std::size_t got = 0;  // bytes of the fragments received so far
  void* token = nullptr;
};

struct conn {
  connection_id id = invalid_connection;
  int fd = -1;
  state st = state::connecting;
  bool incoming = false;
  bool visible = false;  // the engine knows this id
  std::uint32_t source = 0;  // incoming: the peer's IPv4 address (network order)
  int peer_rank = -1;
  std::string peer_addr;
  steady::time_point deadline;
  std::string fail_reason;
  // The peer closed in order (end of stream): its failure is reported after
  // those of connections whose peers hung up too (a peer often closes
  // because a third process died; the engine names the first failure it
  // sees, which should be the death). `hangup`: the last poll saw the
  // peer's end hang up, the stream not read to its end yet.
  bool closed_by_peer = false;
  bool hangup = false;
  int report_deferred = 0;  // polls the report waited for those

  // Handshake bytes in and out.
  std::vector<char> hs_in;
  std::size_t hs_got = 0;
  std::string hs_out;
  std::size_t hs_sent = 0;

  // Sends in post order (a packet may pass fragments not started yet);
  // tokens of finished sends not yet reported. `queued_reports`: entries of
  // sendq that will be reported (what counts against the in-flight limit).
  std::deque<send_op> sendq;
  std::size_t queued_reports = 0;
  std::vector<void*> done;
  std::vector<void*> reporting;  // the batch settle() is reporting now

  // Receive side: posted cookies, and the frame being read.
  std::unordered_map<std::uint64_t, recv_op> recvs;
  wire::frame_header rx_hdr;
  std::size_t rx_hdr_got = 0;
  bool rx_in_body = false;
  std::uint32_t rx_kind = 0;
  std::size_t rx_len = 0, rx_got = 0;
  recv_op* rx_data = nullptr;  // data frames: the receive in `recvs` it fills
  std::uint64_t rx_cookie = 0;
  std::vector<std::byte> pkt_buf;

  bool wants_write() const { return hs_sent < hs_out.size() || !sendq.empty(); }
};

class tcp_driver final : public driver {
 public:
  ~tcp_driver() override {
    for (auto& [id, c] : conns_) close_fd(*c);
    for (auto& [id, c] : pending_) close_fd(*c);
    for (auto& c : graveyard_) close_fd(*c);
    if (listen_fd_ >= 0) ::close(listen_fd_);
    if (pending_epoll_ >= 0) ::close(pending_epoll_);
  }

  void open(const driver_config& config) override;
  const driver_caps& caps() const override { return caps_; }
  std::string local_address() const override { return local_addr_; }
  connection_id connect(int peer_rank, std::string_view address) override;
  post_result post_send_packet(connection_id id, std::span<const iovec> iov,
                               void* token) override;
  post_result send_inline(connection_id id, std::span<const iovec> iov) override;
  bool quiet() const override { return conns_.empty(); }
  bool backlog(connection_id id) const override {
    auto it = conns_.find(id);
    return it != conns_.end() && !it->second->sendq.empty();
  }
  post_result post_send_data(connection_id id, std::uint64_t cookie,
                             std::span<const iovec> iov, void* token) override;
  post_result post_recv_data(connection_id id, std::uint64_t cookie,
                             std::span<const iovec> iov, void* token) override;
  std::string failure_reason(connection_id id) const override;
  int poll() override;
  void close_connection(connection_id id) override;
  arm_result arm_wakeup(std::vector<pollfd>& fds, int& timeout_ms) override;

 private:
  conn* find(connection_id id) {
    auto it = conns_.find(id);
    return it == conns_.end() ? nullptr : it->second.get();
  }
  conn& add_conn() {
    auto c = std::make_unique<conn>();
    c->id = next_id_++;
    conn& ref = *c;
    conns_.emplace(ref.id, std::move(c));
    return ref;
  }
  // Removes a connection from the table; it dies when the outermost poll()
  // returns (callbacks may still hold it).
  void retire(conn& c) {
    close_fd(c);
    auto it = conns_.find(c.id);
    if (it == conns_.end()) return;
    graveyard_.push_back(std::move(it->second));
    conns_.erase(it);
    if (depth_ == 0) graveyard_.clear();
  }
  static void close_fd(conn& c) {
    if (c.fd >= 0) ::close(c.fd);
    c.fd = -1;
  }
  post_result check_postable(conn* c, std::size_t iov_count) const;
  void enqueue(conn& c, std::uint32_t kind, std::uint64_t cookie,
               std::span<const iovec> iov, void* token);
  send_op& push_op(conn& c, bool ahead_of_fragments);
  void fail(conn& c, std::string reason);
  int accept_all();
  bool accepting(steady::time_point now, steady::time_point* resume);
  connection_id oldest_pending(steady::time_point* accepted);
  int progress_pending();
  void promote(conn& c);
  void drop_pending(connection_id id);
  int progress(conn& c, short revents);
  int flush_out(conn& c);
  int read_ack(conn& c);
  int read_hello(conn& c);
  int read_frames(conn& c);
  void start_body(conn& c);
  void finish_body(conn& c);
  int settle(conn& c);
  bool report_later(conn& c);
  bool read_exact(conn& c);
  void become_established(conn& c);

  driver_config cfg_;
  driver_caps caps_;
  tunables tun_;
  int listen_fd_ = -1;
  std::string local_addr_;
  connection_id next_id_ = 0;
  std::map<connection_id, std::unique_ptr<conn>> conns_;
  std::vector<std::unique_ptr<conn>> graveyard_;
  // Why each reported connection failed (connections to ranks only: a few
  // per peer), for failure_reason once the connection is gone.
  std::unordered_map<connection_id, std::string> failed_reasons_;
  int depth_ = 0;
  // Incoming connections still in their handshake, kept apart so that idle
  // ones cost nothing: watched through one epoll set (a single fd in the
  // per-round poll), their deadlines in accept order (one timeout for all,
  // so the front is the earliest; ids no longer pending are skipped).
  std::unordered_map<connection_id, std::unique_ptr<conn>> pending_;
  std::deque<std::pair<steady::time_point, connection_id>> pending_deadlines_;
  std::unordered_map<std::uint32_t, unsigned> pending_per_source_;
  int pending_epoll_ = -1;
  // Not accepting until then (an accept error: out of descriptors, say).
  // The listening socket is left out of the polls meanwhile, so a pending
  // connection in the kernel's queue does not make every round (or every
  // wake-up) fail again at once. See accepting().
  steady::time_point accept_paused_until_{};
  static constexpr int kAcceptBatch = 64;  // accepts per poll()
  static constexpr auto kAcceptPause = std::chrono::milliseconds(100);
  // At NMAD_TCP_PENDING_MAX, a newcomer takes the place of the oldest
  // pending connection once that one has said nothing for this long (a
  // peer sends its hello as soon as it is connected).
  static constexpr auto kSilentEvict = std::chrono::milliseconds(1000);
  // Refusals are for strangers to trigger at will: rate-limited.
  log_limiter refusal_log_{5, std::chrono::seconds(10)};
  // With no connection at all (every peer reached over another driver, the
  // usual case for a single-host job), only the listening socket is watched:
  // one poll(2) in kIdlePollEvery calls keeps a system call off every round
  // of engine progress while still accepting newcomers promptly.
  static constexpr unsigned kIdlePollEvery = 256;
  unsigned idle_polls_ = 0;
  std::vector<pollfd> pfds_;
  std::vector<connection_id> pids_;
};
}  // namespace nmad::tcp_impl
