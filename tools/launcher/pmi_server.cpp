#include "tools/launcher/pmi_server.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "core/bootstrap/pmi_wire.hpp"

namespace nmad::launcher {

using steady = std::chrono::steady_clock;

struct pmi_server::conn {
  int fd = -1;
  int rank = -1;
  bool accepted = false;     // from a listening socket: must authenticate
  std::uint32_t source = 0;  // accepted: the client's IPv4 address (127/8 as one), host order
  steady::time_point since{};  // accepted: when
  std::string peer;          // accepted: the client's address
  std::string in;
  std::string out;
};

namespace {
void set_nonblocking(int fd) {
  int fl = ::fcntl(fd, F_GETFL);
  if (fl >= 0) ::fcntl(fd, F_SETFL, fl | O_NONBLOCK);
  ::fcntl(fd, F_SETFD, FD_CLOEXEC);
}

constexpr std::size_t kMaxUnidentified = 128;
constexpr std::size_t kMaxUnidentifiedPerSource = 32;
constexpr std::size_t kMaxLineBeforeAuth = 4096;
constexpr std::size_t kAcceptBatch = 64;
constexpr auto kSilentGrace = std::chrono::milliseconds(500);
constexpr auto kAcceptPause = std::chrono::milliseconds(100);

// Where a connection comes from, for the per-source limit: its IPv4
// address, every loopback address (127/8) counting as one source.
std::uint32_t source_of(const sockaddr_in& sa) {
  if (sa.sin_family != AF_INET) return 0;
  const std::uint32_t a = ntohl(sa.sin_addr.s_addr);
  return (a >> 24) == 127 ? 0x7f000000u : a;
}

std::string source_text(std::uint32_t source) {
  if (source == 0x7f000000u) return "loopback addresses";
  in_addr a{htonl(source)};
  char ip[INET_ADDRSTRLEN] = "?";
  ::inet_ntop(AF_INET, &a, ip, sizeof ip);
  return ip;
}

// Compares in time independent of where the strings differ.
bool same_secret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const std::size_t n = std::max(a.size(), b.size());
  for (std::size_t i = 0; i < n; ++i)
    diff |= static_cast<unsigned char>((i < a.size() ? a[i] : 0) ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

bool parse_int(const std::string* s, long& out) {
  if (!s || s->empty()) return false;
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s->c_str(), &end, 10);
  if (errno || *end) return false;
  out = v;
  return true;
}
}  // namespace

pmi_server::pmi_server(int size, std::string kvsname, limits lim)
    : _size(size),
      _kvsname(std::move(kvsname)),
      _limits(lim),
      _in_barrier(size, 0),
      _gone(size, 0),
      _finalized(size, 0),
      _initialised(size, 0),
      _connected(size, 0) {}

pmi_server::~pmi_server() { close_all(); }

void pmi_server::add_connection(int fd, int rank) {
  set_nonblocking(fd);
  auto c = std::make_unique<conn>();
  c->fd = fd;
  c->rank = rank;
  if (rank >= 0 && rank < _size) _connected[rank] = 1;
  _conns.push_back(std::move(c));
}

void pmi_server::add_listener(int fd) {
  set_nonblocking(fd);
  _listen_fds.push_back(fd);
  _listen_paused_until.push_back(steady::time_point{});
}

void pmi_server::set_auth_tokens(std::vector<std::string> tokens) { _auth = std::move(tokens); }

bool pmi_server::finalized(int rank) const { return rank >= 0 && rank < _size && _finalized[rank]; }

bool pmi_server::initialised(int rank) const { return rank >= 0 && rank < _size && _initialised[rank]; }

void pmi_server::drain(int rank) {
  if (rank < 0 || rank >= _size) return;
  for (std::size_t i = 0; i < _conns.size(); ++i) {
    conn& c = *_conns[i];  // handle_conn never adds connections
    if (c.fd >= 0 && c.rank == rank) handle_conn(c, POLLIN);
  }
}

void pmi_server::fill_pollfds(std::vector<pollfd>& fds) {
  // Drop closed connections first so indices match handle().
  std::erase_if(_conns, [](const std::unique_ptr<conn>& c) { return c->fd < 0; });
  const auto now = steady::now();
  for (std::size_t l = 0; l < _listen_fds.size(); ++l)  // a paused one: -1, ignored by poll
    fds.push_back(pollfd{now < _listen_paused_until[l] ? -1 : _listen_fds[l], POLLIN, 0});
  _npolled = _conns.size();
  for (auto& c : _conns) {
    short ev = POLLIN;
    if (!c->out.empty()) ev |= POLLOUT;
    fds.push_back(pollfd{c->fd, ev, 0});
  }
}

int pmi_server::poll_timeout_ms() const {
  const auto now = steady::now();
  long long ms = -1;
  for (const auto& until : _listen_paused_until)
    if (until > now) {
      const long long left = std::chrono::ceil<std::chrono::milliseconds>(until - now).count();
      ms = ms < 0 ? left : std::min(ms, left);
    }
  return static_cast<int>(ms);
}

// Up to kAcceptBatch new connections from one listening socket, each read
// at once: a genuine client's initack is usually there already.
void pmi_server::accept_some(std::size_t l) {
  for (std::size_t n = 0; n < kAcceptBatch; ++n) {
    sockaddr_in sa{};
    socklen_t len = sizeof sa;
    int fd = ::accept4(_listen_fds[l], reinterpret_cast<sockaddr*>(&sa), &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        // Out of descriptors or memory: the pending connections stay in
        // the kernel's queue; look again a little later (not at once: the
        // socket stays readable and the loop would spin).
        const int err = errno;
        _listen_paused_until[l] = steady::now() + kAcceptPause;
        std::string summary;
        const bool now = _refusal_log->admit(&summary);
        if (on_report && !summary.empty()) on_report("PMI port: " + summary + " (refused connections)");
        if (on_report && now)
          on_report(std::string("PMI port: accept: ") + std::strerror(err) + "; accepting again in 100 ms");
      }
      return;
    }
    add_connection(fd, -1);
    conn& c = *_conns.back();
    c.accepted = true;
    c.source = source_of(sa);
    c.since = steady::now();
    char ip[INET_ADDRSTRLEN] = "?";
    if (sa.sin_family == AF_INET) ::inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof ip);
    c.peer = std::string(ip) + ":" + std::to_string(ntohs(sa.sin_port));
    handle_conn(c, POLLIN);  // identify first
    if (c.fd >= 0 && c.rank < 0) make_room(c);
  }
}

// A new connection that has not identified itself took the number of
// unidentified ones from its source, or in all, over the limit: the oldest
// that has stayed silent for kSilentGrace goes (read one last time first),
// or the newcomer is turned away when every one is younger.
void pmi_server::make_room(conn& newcomer) {
  for (;;) {
    std::size_t total = 0, from_source = 0;
    for (auto& c : _conns)
      if (c->fd >= 0 && c->rank < 0 && c->accepted) {
        ++total;
        from_source += c->source == newcomer.source;
      }
    const bool per_source = from_source > kMaxUnidentifiedPerSource;
    if (!per_source && total <= kMaxUnidentified) return;
    const auto now = steady::now();
    conn* victim = nullptr;
    for (auto& c : _conns)
      if (c.get() != &newcomer && c->fd >= 0 && c->rank < 0 && c->accepted &&
          (!per_source || c->source == newcomer.source) && now - c->since >= kSilentGrace &&
          (!victim || c->since < victim->since))
        victim = c.get();
    const std::string limit =
        per_source ? "more than " + std::to_string(kMaxUnidentifiedPerSource) +
                         " unidentified connections from " + source_text(newcomer.source)
                   : "more than " + std::to_string(kMaxUnidentified) + " unidentified connections";
    if (!victim) {
      refuse(newcomer, limit + ", none silent for 500 ms yet; come back later", "busy");
      return;
    }
    handle_conn(*victim, POLLIN);  // what it may have sent since the last poll
    if (victim->fd >= 0 && victim->rank < 0) {
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - victim->since).count();
      refuse(*victim, limit + "; this one said nothing in " + std::to_string(ms) + " ms", "silent");
    }
  }
}

void pmi_server::handle(const std::vector<pollfd>& fds, std::size_t first) {
  // The known connections first (a rank's initack is read before anything
  // new can crowd it), then the listening sockets.
  std::vector<conn*> polled;
  for (std::size_t i = 0; i < _npolled && i < _conns.size(); ++i) polled.push_back(_conns[i].get());
  const std::size_t base = first + _listen_fds.size();
  for (std::size_t i = 0; i < polled.size(); ++i) {
    const pollfd& p = fds[base + i];
    conn* c = polled[i];
    if (c->fd >= 0 && c->fd == p.fd && p.revents) handle_conn(*c, p.revents);
  }
  for (std::size_t l = 0; l < _listen_fds.size(); ++l)
    if (fds[first + l].fd >= 0 && (fds[first + l].revents & POLLIN)) accept_some(l);
}

void pmi_server::handle_conn(conn& c, short revents) {
  if (revents & POLLOUT) flush(c);
  if (c.fd < 0) return;
  if (!(revents & (POLLIN | POLLHUP | POLLERR))) return;
  for (;;) {
    char buf[8192];
    ssize_t n = ::read(c.fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      close_conn(c);  // ECONNRESET & co: the rank is gone
      return;
    }
    if (n == 0) {
      close_conn(c);
      return;
    }
    c.in.append(buf, static_cast<std::size_t>(n));
    std::size_t pos;
    while (c.fd >= 0 && (pos = c.in.find('\n')) != std::string::npos) {
      std::string line = c.in.substr(0, pos);
      c.in.erase(0, pos + 1);
      process_line(c, line);
    }
    if (c.fd < 0) return;
    if (c.rank < 0 && c.accepted && c.in.size() > kMaxLineBeforeAuth) {
      refuse(c, "sent " + std::to_string(c.in.size()) + " bytes without a complete initack line", "line_too_long");
      return;
    }
    if (c.in.size() > pmi::max_line_length) {
      protocol_error(c, "line longer than " + std::to_string(pmi::max_line_length) + " bytes");
      return;
    }
  }
}

std::string pmi_server::rank_name(const conn& c) const {
  if (c.rank >= 0) return "rank " + std::to_string(c.rank);
  return "an unidentified PMI client";
}

// A connection that did not identify itself as a rank of this job: told
// why in one line (best effort: `msg` is what our client acts on, "busy"
// meaning "connect again"), closed, reported within a rate limit (a flood
// of them must not flood stderr).
void pmi_server::refuse(conn& c, const std::string& why, const std::string& msg) {
  ++_refused;
  std::string summary;
  const bool now = _refusal_log->admit(&summary);
  if (on_report && !summary.empty()) on_report("PMI port: " + summary + " (refused connections)");
  if (on_report && now)
    on_report("PMI port: refused a connection from " + (c.peer.empty() ? std::string("?") : c.peer) + ": " + why);
  if (c.fd >= 0 && c.out.empty()) {
    const std::string line = "cmd=initack rc=-1 msg=" + msg + "\n";
    ssize_t n = ::send(c.fd, line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)n;
  }
  close_conn(c);
}

void pmi_server::protocol_error(conn& c, const std::string& what) {
  if (c.rank < 0 && c.accepted) {
    refuse(c, "PMI protocol error: " + what, "protocol_error");
    return;
  }
  if (on_report) on_report(rank_name(c) + ": PMI protocol error: " + what + "; closing its PMI connection");
  close_conn(c);
}

void pmi_server::reply(conn& c, std::string text) {
  c.out += text;
  flush(c);
}

void pmi_server::flush(conn& c) {
  while (c.fd >= 0 && !c.out.empty()) {
    ssize_t n = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
    if (n > 0) {
      c.out.erase(0, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    close_conn(c);  // peer gone
    return;
  }
}

void pmi_server::close_conn(conn& c) {
  if (c.fd < 0) return;
  ::close(c.fd);
  c.fd = -1;
  c.in.clear();
  c.out.clear();
  // Not "gone" yet: the job tells rank_exited() when the process has ended
  // (a rank may close its PMI connection and go on; its exit status decides).
}

void pmi_server::rank_exited(int rank) {
  if (rank < 0 || rank >= _size) return;
  drain(rank);  // what the rank wrote before it died, then forget it
  _gone[rank] = 1;
  check_barrier();
}

void pmi_server::close_all() {
  for (auto& c : _conns)
    if (c->fd >= 0) {
      ::close(c->fd);
      c->fd = -1;
    }
  _conns.clear();
  for (int lfd : _listen_fds) ::close(lfd);
  _listen_fds.clear();
  if (on_report && _refusal_log) {
    const std::string summary = _refusal_log->take_summary();
    if (!summary.empty()) on_report("PMI port: " + summary + " (refused connections)");
  }
}

void pmi_server::check_barrier() {
  if (_barrier_count == 0) return;
  if (_barrier_count == _size) {
    _barrier_count = 0;
    std::fill(_in_barrier.begin(), _in_barrier.end(), 0);
    for (auto& c : _conns)
      if (c->fd >= 0 && c->rank >= 0) reply(*c, pmi::format_line("barrier_out"));
    return;
  }
  std::string gone;
  for (int r = 0; r < _size; ++r)
    if (_gone[r] && !_in_barrier[r]) gone += (gone.empty() ? "" : " ") + std::to_string(r);
  if (gone.empty()) return;
  // The barrier can never complete: make the waiting ranks' fence fail
  // (they see their PMI connection close) instead of hanging.
  std::string waiting;
  std::vector<conn*> victims;
  for (auto& c : _conns)
    if (c->fd >= 0 && c->rank >= 0 && _in_barrier[c->rank]) {
      victims.push_back(c.get());
      waiting += (waiting.empty() ? "" : " ") + std::to_string(c->rank);
    }
  _barrier_count = 0;
  std::fill(_in_barrier.begin(), _in_barrier.end(), 0);
  if (on_report && !victims.empty() && !_barrier_failure_reported) {
    // Once a rank is gone, every later barrier fails too: say it once.
    _barrier_failure_reported = true;
    on_report("PMI barrier cannot complete: rank(s) " + gone +
              " left the job without entering it; closing the PMI connection of waiting rank(s) " + waiting);
  }
  for (conn* c : victims) close_conn(*c);
}

void pmi_server::process_line(conn& c, const std::string& line) {
  std::string err;
  auto parsed = pmi::parse_line(line, &err);
  if (!parsed) {
    protocol_error(c, "malformed line '" + line.substr(0, 200) + "' (" + err + ")");
    return;
  }
  const pmi::command& m = *parsed;
  const std::string& cmd = m.cmd;

  if (cmd == "initack") {
    long id;
    if (!parse_int(m.find("pmiid"), id) || id < 0 || id >= _size) {
      protocol_error(c, "initack with a bad pmiid in '" + line + "'");
      return;
    }
    if (c.rank >= 0 && c.rank != id) {
      protocol_error(c, "initack pmiid=" + std::to_string(id) + " on the connection of rank " + std::to_string(c.rank));
      return;
    }
    if (c.rank < 0 && c.accepted && !_auth.empty()) {
      const std::string* token = m.find("auth");
      if (!token || static_cast<std::size_t>(id) >= _auth.size() || !same_secret(*token, _auth[id])) {
        refuse(c, std::string(token ? "wrong" : "no") + " authentication token for pmiid=" + std::to_string(id),
               token ? "wrong_token" : "no_token");
        return;
      }
    }
    if (c.rank < 0) {
      if (_connected[id]) {
        protocol_error(c, "initack: rank " + std::to_string(id) + " is already connected");
        return;
      }
      c.rank = static_cast<int>(id);
      _connected[id] = 1;
    }
    reply(c, "cmd=initack\ncmd=set size=" + std::to_string(_size) + "\ncmd=set rank=" + std::to_string(id) +
                 "\ncmd=set debug=0\n");
    return;
  }
  if (c.rank < 0) {
    protocol_error(c, "'" + cmd + "' before initack");
    return;
  }
  const int rank = c.rank;

  if (cmd == "init") {
    _initialised[rank] = 1;
    const std::string* v = m.find("pmi_version");
    if (v && *v != "1") {
      reply(c, "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=-1 msg=unsupported_pmi_version\n");
      return;
    }
    reply(c, "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n");
  } else if (cmd == "get_maxes") {
    reply(c, "cmd=maxes kvsname_max=" + std::to_string(_limits.kvsname_max) +
                 " keylen_max=" + std::to_string(_limits.keylen_max) +
                 " vallen_max=" + std::to_string(_limits.vallen_max) + "\n");
  } else if (cmd == "get_my_kvsname") {
    reply(c, pmi::format_line("my_kvsname", {{"kvsname", _kvsname}}));
  } else if (cmd == "get_universe_size") {
    reply(c, "cmd=universe_size size=" + std::to_string(_size) + "\n");
  } else if (cmd == "get_appnum") {
    reply(c, "cmd=appnum appnum=0\n");
  } else if (cmd == "put") {
    const std::string* kvs = m.find("kvsname");
    const std::string* key = m.find("key");
    const std::string* value = m.find("value");
    if (!kvs || *kvs != _kvsname) reply(c, "cmd=put_result rc=-1 msg=unknown_kvsname\n");
    else if (!key || key->empty() || !value) reply(c, "cmd=put_result rc=-1 msg=missing_key_or_value\n");
    else if (key->size() > _limits.keylen_max) reply(c, "cmd=put_result rc=-1 msg=key_too_long\n");
    else if (value->size() > _limits.vallen_max) reply(c, "cmd=put_result rc=-1 msg=value_too_long\n");
    else {
      _kvs[*key] = *value;
      reply(c, "cmd=put_result rc=0 msg=success\n");
    }
  } else if (cmd == "get") {
    const std::string* kvs = m.find("kvsname");
    const std::string* key = m.find("key");
    if (!kvs || *kvs != _kvsname) {
      reply(c, "cmd=get_result rc=-1 msg=unknown_kvsname value=unknown\n");
    } else if (!key) {
      reply(c, "cmd=get_result rc=-1 msg=missing_key value=unknown\n");
    } else if (auto it = _kvs.find(*key); it == _kvs.end()) {
      reply(c, "cmd=get_result rc=-1 msg=key_" + *key + "_not_found value=unknown\n");
    } else {
      reply(c, "cmd=get_result rc=0 msg=success value=" + it->second + "\n");
    }
  } else if (cmd == "barrier_in") {
    if (_in_barrier[rank]) {
      protocol_error(c, "barrier_in twice");
      return;
    }
    _in_barrier[rank] = 1;
    ++_barrier_count;
    check_barrier();
  } else if (cmd == "finalize") {
    _finalized[rank] = 1;
    reply(c, "cmd=finalize_ack\n");
    _gone[rank] = 1;
    check_barrier();
  } else if (cmd == "abort") {
    long code = 1;
    if (!parse_int(m.find("exitcode"), code)) code = 1;
    std::string msg;
    if (const std::string* em = m.find("message")) {
      auto d = pmi::unescape(*em);
      msg = d ? *d : *em;
    }
    _gone[rank] = 1;
    if (on_abort) on_abort(rank, static_cast<int>(code), msg);
    check_barrier();
  } else {
    if (on_report) on_report("rank " + std::to_string(rank) + " sent an unsupported PMI command '" + cmd + "'");
    reply(c, "cmd=" + cmd + "_result rc=-1 msg=unsupported_command\n");
  }
}

}  // namespace nmad::launcher
