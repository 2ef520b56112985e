// PMI-1 client implementation of nmad::bootstrap (see bootstrap.hpp).
//
// Storage format in the launcher's key-value store (all wire-safe):
//   key   : pmi::escape(user key)
//   value : "v" + pmi::escape(value)            when it fits in vallen_max
//           "c" + N, and the N pieces of pmi::escape(value) under the keys
//           escaped_key + "~" + i (i = 0..N-1)  otherwise ('~' never appears
//           in an escaped key, so chunk keys cannot collide with user keys).
//
// Environment:
//   PMI_FD / PMI_PORT (+ PMI_ID) / PMI_RANK / PMI_SIZE   set by the launcher
//   NMAD_JOB_KEY        job secret (set by nmad-run)
//   NMAD_PMI_AUTH       this rank's token for nmad-run's PMI port (PMI_PORT)
//   NMAD_PMI_TIMEOUT    seconds to wait for any PMI reply (default 300)
//   NMAD_RUN_PID        nmad-run's pid and start time: watched once PMI is up
//                       (launcher_watch.hpp)
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>

#include "core/bootstrap/bootstrap.hpp"
#include "core/bootstrap/launcher_watch.hpp"
#include "core/bootstrap/pmi_wire.hpp"
#include "api/nmad/services/config.hpp"
#include "api/nmad/services/log.hpp"
#include "core/common/random.hpp"

namespace nmad {
namespace {

using steady = std::chrono::steady_clock;
constexpr const char* kJobKeyName = "nmad.job_key";

[[noreturn]] void fail(const std::string& msg) { throw std::runtime_error("nmad bootstrap: " + msg); }

// The launcher's PMI port turned this connection away before taking it as
// a rank's (too many strangers' connections at once: it said "busy" or
// "silent", or reset it): connecting again may work.
struct turned_away : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string errno_text(int err) { return std::strerror(err); }

std::optional<std::string> env_string(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

std::optional<long> parse_long(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return std::nullopt;
  return v;
}

int env_int(const char* name, long min, long max, bool required) {
  auto s = env_string(name);
  if (!s) {
    if (required) fail(std::string(name) + " is not set (required with a PMI launcher)");
    return -1;
  }
  auto v = parse_long(*s);
  if (!v || *v < min || *v > max)
    fail(std::string(name) + "='" + *s + "' is not an integer in [" + std::to_string(min) + ", " +
         std::to_string(max) + "]");
  return static_cast<int>(*v);
}

std::chrono::milliseconds pmi_timeout() {
  try {
    return config::milliseconds("NMAD_PMI_TIMEOUT");  // seconds, fractions allowed
  } catch (const config::config_error& e) {
    fail(e.what());
  }
}

std::string seconds_text(std::chrono::milliseconds ms) {
  std::string s = std::to_string(ms.count() / 1000.0);
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s + " s";
}


// ---------------------------------------------------------------------------
class singleton_bootstrap final : public bootstrap {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void put(const std::string& key, const std::string& value) override { _store[key] = value; }
  void fence() override {}
  std::string get(const std::string& key) override {
    auto it = _store.find(key);
    if (it == _store.end()) fail("get: no value was published under key '" + key + "'");
    return it->second;
  }
  void abort(int exit_code, const std::string& message) override {
    log_write(log_level::error, "bootstrap",
              "abort (exit code " + std::to_string(exit_code) + ")" + (message.empty() ? "" : ": " + message));
  }
  void finalize() override {}

 private:
  std::map<std::string, std::string> _store;
};

// ---------------------------------------------------------------------------
class pmi_bootstrap final : public bootstrap {
 public:
  // Takes ownership of fd. port_mode: do the PMI_PORT `initack` handshake.
  pmi_bootstrap(int fd, bool port_mode, int pmi_id, int env_rank, int env_size)
      : _fd(fd), _timeout(pmi_timeout()) {
    try {
      if (port_mode) handshake_port(pmi_id, env_rank, env_size);
      else {
        _rank = env_rank;
        _size = env_size;
      }
      if (_size < 1 || _rank < 0 || _rank >= _size)
        fail("inconsistent rank " + std::to_string(_rank) + " / size " + std::to_string(_size) + " from the launcher");

      auto r = transact(pmi::format_line("init", {{"pmi_version", "1"}, {"pmi_subversion", "1"}}),
                        "response_to_init", "init");
      if (const auto* v = r.find("pmi_version"); v && *v != "1")
        fail("the launcher speaks PMI version " + *v + ", not 1");

      r = transact(pmi::format_line("get_maxes"), "maxes", "get_maxes");
      _keylen_max = max_value(r, "keylen_max", 64);
      _vallen_max = max_value(r, "vallen_max", 1024);

      r = transact(pmi::format_line("get_my_kvsname"), "my_kvsname", "get_my_kvsname");
      const auto* k = r.find("kvsname");
      if (!k || k->empty()) fail("malformed reply to get_my_kvsname (no kvsname): " + _last_line);
      _kvsname = *k;
      log_write(log_level::debug, "bootstrap",
                "PMI-1 ready: rank " + std::to_string(_rank) + " of " + std::to_string(_size) + ", kvs " + _kvsname +
                    ", keylen_max " + std::to_string(_keylen_max) + ", vallen_max " + std::to_string(_vallen_max));
    } catch (...) {
      ::close(_fd);
      _fd = -1;
      throw;
    }
  }

  ~pmi_bootstrap() override {
    if (_fd >= 0) ::close(_fd);
  }

  int rank() const override { return _rank; }
  int size() const override { return _size; }

  void put(const std::string& key, const std::string& value) override {
    check_open("put");
    const std::string ekey = encoded_key(key, "put");
    std::string evalue = pmi::escape(value);
    const std::size_t room = _vallen_max - 1;  // keep room for a C client's NUL
    if (evalue.size() + 1 <= room) {
      put_raw(ekey, "v" + evalue, key);
      return;
    }
    const std::size_t nchunks = (evalue.size() + room - 1) / room;
    if ((ekey + "~" + std::to_string(nchunks)).size() > _keylen_max - 1)
      fail("put: key '" + key + "' is too long for a value of " + std::to_string(value.size()) +
           " bytes (launcher limit keylen_max=" + std::to_string(_keylen_max) + ")");
    for (std::size_t i = 0; i < nchunks; ++i)
      put_raw(ekey + "~" + std::to_string(i), evalue.substr(i * room, room), key);
    put_raw(ekey, "c" + std::to_string(nchunks), key);
  }

  void fence() override {
    check_open("fence");
    auto r = transact(pmi::format_line("barrier_in"), "barrier_out", "fence (barrier_in)");
    (void)r;
  }

  std::string get(const std::string& key) override {
    check_open("get");
    const std::string ekey = encoded_key(key, "get");
    std::string stored = get_raw(ekey, key);
    std::string evalue;
    if (!stored.empty() && stored[0] == 'v') {
      evalue = stored.substr(1);
    } else if (!stored.empty() && stored[0] == 'c') {
      auto n = parse_long(stored.substr(1));
      if (!n || *n < 1 || *n > 1'000'000) fail("get: corrupt chunk header '" + stored + "' for key '" + key + "'");
      for (long i = 0; i < *n; ++i) evalue += get_raw(ekey + "~" + std::to_string(i), key);
    } else {
      fail("get: value of key '" + key + "' was not stored by an nmad bootstrap ('" + stored.substr(0, 40) + "')");
    }
    auto v = pmi::unescape(evalue);
    if (!v) fail("get: corrupt escaped value for key '" + key + "'");
    return *v;
  }

  void abort(int exit_code, const std::string& message) override {
    log_write(log_level::error, "bootstrap",
              "abort (exit code " + std::to_string(exit_code) + ")" + (message.empty() ? "" : ": " + message));
    if (_fd < 0) return;
    std::string line = "cmd=abort exitcode=" + std::to_string(exit_code);
    if (!message.empty()) line += " message=" + pmi::escape(message.substr(0, 1000));
    line += '\n';
    try {
      send_line(line, "abort");
    } catch (const std::exception& e) {
      log_write(log_level::error, "bootstrap", std::string("could not notify the launcher: ") + e.what());
    }
    _aborted = true;
  }

  void finalize() override {
    if (_fd < 0 || _finalized || _aborted) return;
    transact(pmi::format_line("finalize"), "finalize_ack", "finalize");
    _finalized = true;
    ::close(_fd);
    _fd = -1;
  }

 private:
  void check_open(const char* what) const {
    if (_finalized) fail(std::string(what) + " after finalize()");
    if (_aborted) fail(std::string(what) + " after abort()");
    if (_fd < 0) fail(std::string(what) + ": no PMI connection");
  }

  std::size_t max_value(const pmi::command& r, const char* name, std::size_t dflt) {
    const auto* v = r.find(name);
    if (!v) return dflt;
    auto n = parse_long(*v);
    if (!n || *n < 8) fail("malformed reply to get_maxes (" + std::string(name) + "): " + _last_line);
    return static_cast<std::size_t>(*n);
  }

  std::string encoded_key(const std::string& key, const char* what) const {
    if (key.empty()) fail(std::string(what) + ": empty key");
    std::string ek = pmi::escape(key);
    if (ek.size() > _keylen_max - 1)
      fail(std::string(what) + ": key '" + key + "' is too long (" + std::to_string(ek.size()) +
           " bytes escaped; launcher limit keylen_max=" + std::to_string(_keylen_max) + ")");
    return ek;
  }

  void put_raw(const std::string& ekey, const std::string& evalue, const std::string& user_key) {
    transact(pmi::format_line("put", {{"kvsname", _kvsname}, {"key", ekey}, {"value", evalue}}), "put_result",
             "put of key '" + user_key + "'");
  }

  std::string get_raw(const std::string& ekey, const std::string& user_key) {
    auto r = transact(pmi::format_line("get", {{"kvsname", _kvsname}, {"key", ekey}}), "get_result",
                      "get of key '" + user_key + "'", /*check_rc=*/false);
    const auto* rc = r.find("rc");
    if (!rc) fail("malformed reply to get (no rc): " + _last_line);
    if (*rc != "0")
      fail("get: no value was published under key '" + user_key + "' (launcher replied: " + _last_line + ")");
    const auto* v = r.find("value");
    if (!v) fail("malformed reply to get (no value): " + _last_line);
    return *v;
  }

  void handshake_port(int pmi_id, int env_rank, int env_size) {
    // nmad-run's PMI port takes a rank only with its token (NMAD_PMI_AUTH);
    // other PMI-1 servers ignore the extra key.
    std::string line = "cmd=initack pmiid=" + std::to_string(pmi_id);
    if (const std::string token = config::text("NMAD_PMI_AUTH");
        !token.empty() && token.find_first_of(" \t\n=") == std::string::npos)
      line += " auth=" + token;
    send_line(line + "\n", "initack");
    // Told it is busy (or was silent too long), or reset before any answer:
    // turned away (the caller connects again). Refused for another reason,
    // or closed without a word: say so.
    _closed_is_turned_away = true;
    std::string first = read_line("initack");
    _closed_is_turned_away = false;
    _last_line = first;
    std::string err;
    auto c = pmi::parse_line(first, &err);
    if (!c) fail("PMI initack: malformed line from the launcher (" + err + "): '" + first + "'");
    if (c->cmd != "initack") fail("PMI initack: unexpected reply '" + first + "' (expected cmd=initack)");
    if (const auto* rc = c->find("rc"); rc && *rc != "0") {
      const auto* msg = c->find("msg");
      const std::string why = msg ? *msg : std::string("no reason given");
      if (why == "busy" || why == "silent") throw turned_away(why);
      fail("the launcher's PMI port refused this process as PMI id " + std::to_string(pmi_id) + " (" + why + "): " +
           (why == "wrong_token" || why == "no_token" ? "NMAD_PMI_AUTH does not hold this rank's token from nmad-run"
                                                      : std::string("see the launcher's message")));
    }
    int size = -1, rank = -1;
    bool debug_seen = false;
    for (int i = 0; i < 3; ++i) {
      auto s = read_reply("set", "initack (cmd=set size/rank/debug)");
      bool known = false;
      for (const auto& [k, v] : s.args) {
        auto n = parse_long(v);
        if (k == "size" || k == "rank" || k == "debug") {
          if (!n) fail("malformed value in '" + _last_line + "' during the PMI_PORT handshake");
          known = true;
          if (k == "size") size = static_cast<int>(*n);
          if (k == "rank") rank = static_cast<int>(*n);
          if (k == "debug") debug_seen = true;
        }
      }
      if (!known) fail("unexpected line '" + _last_line + "' during the PMI_PORT handshake");
    }
    (void)debug_seen;
    if (size < 0) size = env_size;
    if (rank < 0) rank = env_rank;
    if (size < 0 || rank < 0) fail("the PMI_PORT handshake did not give this process's rank and size");
    if (env_rank >= 0 && env_rank != rank)
      log_write(log_level::warn, "bootstrap",
                "PMI_RANK=" + std::to_string(env_rank) + " differs from the launcher's rank " + std::to_string(rank));
    _rank = rank;
    _size = size;
  }

  pmi::command transact(const std::string& line, std::string_view expected, const std::string& what,
                        bool check_rc = true) {
    send_line(line, what);
    auto r = read_reply(expected, what);
    if (check_rc) {
      if (const auto* rc = r.find("rc"); rc && *rc != "0") {
        const auto* msg = r.find("msg");
        fail("PMI " + what + " failed: rc=" + *rc + (msg ? " (" + *msg + ")" : std::string()));
      }
    }
    return r;
  }

  void send_line(const std::string& line, const std::string& what) {
    if (_fd < 0) fail("PMI " + what + ": connection already closed");
    const auto deadline = steady::now() + _timeout;
    std::size_t off = 0;
    while (off < line.size()) {
      ssize_t n = ::send(_fd, line.data() + off, line.size() - off, MSG_NOSIGNAL);
      if (n < 0 && errno == ENOTSOCK) n = ::write(_fd, line.data() + off, line.size() - off);
      if (n > 0) {
        off += static_cast<std::size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        wait_fd(POLLOUT, deadline, what);
        continue;
      }
      int err = errno;
      if (err == EPIPE || err == ECONNRESET)
        fail("PMI " + what + ": the launcher closed the connection (" + errno_text(err) + ")");
      fail("PMI " + what + ": write to the launcher failed: " + errno_text(err));
    }
  }

  void wait_fd(short events, steady::time_point deadline, const std::string& what) {
    for (;;) {
      auto now = steady::now();
      if (now >= deadline)
        fail("PMI " + what + ": timed out after " + seconds_text(_timeout) +
             " waiting for the launcher (set NMAD_PMI_TIMEOUT to change)");
      auto ms = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
      pollfd p{_fd, events, 0};
      int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(ms, 1 << 30)));
      if (r < 0) {
        if (errno == EINTR) continue;
        fail("PMI " + what + ": poll failed: " + errno_text(errno));
      }
      if (r > 0) return;
    }
  }

  pmi::command read_reply(std::string_view expected, const std::string& what) {
    std::string line = read_line(what);
    _last_line = line;
    std::string err;
    auto c = pmi::parse_line(line, &err);
    if (!c) fail("PMI " + what + ": malformed line from the launcher (" + err + "): '" + line + "'");
    if (c->cmd != expected)
      fail("PMI " + what + ": unexpected reply '" + line + "' (expected cmd=" + std::string(expected) + ")");
    return std::move(*c);
  }

  std::string read_line(const std::string& what) {
    const auto deadline = steady::now() + _timeout;
    for (;;) {
      auto pos = _inbuf.find('\n');
      if (pos != std::string::npos) {
        std::string line = _inbuf.substr(0, pos);
        _inbuf.erase(0, pos + 1);
        return line;
      }
      if (_inbuf.size() > pmi::max_line_length) fail("PMI " + what + ": line from the launcher is too long");
      wait_fd(POLLIN, deadline, what);
      char buf[4096];
      ssize_t n = ::read(_fd, buf, sizeof buf);
      // (A reset before any answer: the launcher closed the connection with
      // our initack unread, having turned it away just before it came.)
      if (_closed_is_turned_away && _inbuf.empty() && n < 0 && errno == ECONNRESET)
        throw turned_away("reset before answering");
      if (n == 0)
        fail("PMI " + what + ": the launcher closed the connection (EOF)" +
             (_inbuf.empty() ? std::string() : " in the middle of a line") +
             "; the job was probably aborted or another rank failed");
      if (n < 0) {
        if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
        int err = errno;
        fail("PMI " + what + ": read from the launcher failed: " + errno_text(err));
      }
      _inbuf.append(buf, static_cast<std::size_t>(n));
    }
  }

  int _fd = -1;
  std::chrono::milliseconds _timeout;
  int _rank = -1;
  int _size = -1;
  std::string _kvsname;
  std::size_t _keylen_max = 64;
  std::size_t _vallen_max = 1024;
  std::string _inbuf;
  std::string _last_line;
  bool _finalized = false;
  bool _aborted = false;
  bool _closed_is_turned_away = false;  // during the PMI_PORT initack
};

// Connects to host:port ("[v6addr]:port" accepted) within the PMI timeout.
// A connection attempt that gets no answer is abandoned after 100 ms (10 ms
// more each time, up to 2 s) for a fresh one: a port whose queue of
// connections is kept full by strangers drops connection requests, and the
// kernel's own retries of one request come at 1, 3, 7, 15 s.
int connect_port(const std::string& spec) {
  auto colon = spec.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == spec.size())
    fail("PMI_PORT='" + spec + "' is not host:port");
  std::string host = spec.substr(0, colon);
  std::string port = spec.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0) fail("PMI_PORT='" + spec + "': cannot resolve: " + ::gai_strerror(rc));
  std::string last_error = "no address";
  const auto timeout = pmi_timeout();
  const auto deadline = steady::now() + timeout;
  long long attempt_ms = 100;
  for (;;) {
    bool unanswered = false;  // an attempt timed out: worth another one
    for (addrinfo* ai = res; ai; ai = ai->ai_next) {
      int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
      if (fd < 0) {
        last_error = errno_text(errno);
        continue;
      }
      // Non-blocking connect, bounded, then back to blocking.
      int flags = ::fcntl(fd, F_GETFL);
      ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
      int r = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
      if (r < 0 && (errno == EINPROGRESS || errno == EINTR)) {
        const long long left = std::chrono::ceil<std::chrono::milliseconds>(deadline - steady::now()).count();
        pollfd p{fd, POLLOUT, 0};
        int pr;
        do pr = ::poll(&p, 1, static_cast<int>(std::clamp<long long>(std::min(left, attempt_ms), 0, 1 << 30)));
        while (pr < 0 && errno == EINTR);
        int soerr = 0;
        socklen_t len = sizeof soerr;
        if (pr == 1 && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) == 0 && soerr == 0) r = 0;
        else errno = pr == 0 ? ETIMEDOUT : (soerr ? soerr : errno);
        unanswered |= pr == 0;
      }
      if (r == 0) ::fcntl(fd, F_SETFL, flags);
      if (r == 0) {
        ::freeaddrinfo(res);
        return fd;
      }
      last_error = errno_text(errno);
      ::close(fd);
    }
    if (!unanswered || steady::now() >= deadline) break;
    attempt_ms = std::min<long long>(attempt_ms + 10, 2000);
  }
  ::freeaddrinfo(res);
  fail("cannot connect to the PMI launcher at PMI_PORT='" + spec + "': " + last_error);
}

}  // namespace

std::unique_ptr<bootstrap> bootstrap::singleton() { return std::make_unique<singleton_bootstrap>(); }

std::unique_ptr<bootstrap> bootstrap::from_environment() {
  std::unique_ptr<bootstrap> b;
  if (auto fd_s = env_string("PMI_FD")) {
    auto fd = parse_long(*fd_s);
    if (!fd || *fd < 0 || *fd > 1'000'000) fail("PMI_FD='" + *fd_s + "' is not a file descriptor number");
    struct stat st {};
    if (::fstat(static_cast<int>(*fd), &st) != 0)
      fail("PMI_FD=" + *fd_s + " is not an open file descriptor (" + errno_text(errno) +
           "); was this process started by a PMI launcher such as nmad-run?");
    if (!S_ISSOCK(st.st_mode)) fail("PMI_FD=" + *fd_s + " is not a socket");
    int rank = env_int("PMI_RANK", 0, 1 << 24, true);
    int size = env_int("PMI_SIZE", 1, 1 << 24, true);
    // Keep the launcher connection out of programs this process may exec.
    ::fcntl(static_cast<int>(*fd), F_SETFD, FD_CLOEXEC);
    b = std::make_unique<pmi_bootstrap>(static_cast<int>(*fd), false, rank, rank, size);
  } else if (auto port = env_string("PMI_PORT")) {
    int rank = env_int("PMI_RANK", 0, 1 << 24, false);
    int size = env_int("PMI_SIZE", 1, 1 << 24, false);
    int id = env_int("PMI_ID", 0, 1 << 24, false);
    if (id < 0) id = rank >= 0 ? rank : 0;
    // Turned away by a busy port (strangers' connections crowding it):
    // connect again, with a growing, jittered pause, within the PMI timeout.
    const auto timeout = pmi_timeout();
    const auto deadline = steady::now() + timeout;
    auto pause = std::chrono::milliseconds(5);
    for (int attempt = 1;; ++attempt) {
      int fd = connect_port(*port);
      try {
        b = std::make_unique<pmi_bootstrap>(fd, true, id, rank, size);
        break;
      } catch (const turned_away& e) {
        if (steady::now() + pause >= deadline)
          fail("PMI_PORT='" + *port + "' turned this process away " + std::to_string(attempt) + " times in " +
               seconds_text(timeout) + " (last: " + e.what() + "); set NMAD_PMI_TIMEOUT to wait longer");
        log_write(log_level::debug, "bootstrap",
                  "PMI port turned this process away (" + std::string(e.what()) + "); connecting again");
        static std::minstd_rand jitter_rng(static_cast<unsigned>(::getpid()));
        std::this_thread::sleep_for(pause + std::chrono::milliseconds(jitter_rng() % (pause.count() + 1)));
        pause = std::min<std::chrono::milliseconds>(pause * 2, std::chrono::milliseconds(500));
      }
    }
  } else {
    if (auto s = env_string("PMI_SIZE"); s && *s != "1")
      fail("PMI_SIZE=" + *s + " is set but neither PMI_FD nor PMI_PORT is: cannot reach the PMI launcher");
    b = singleton();
  }
  log_set_rank(b->rank());
  if (env_string("PMI_FD") || env_string("PMI_PORT")) bootstrap_detail::watch_launcher();  // not a singleton
  return b;
}

std::string bootstrap::job_key() {
  if (!_job_key.empty()) return _job_key;
  if (std::string k = config::text("NMAD_JOB_KEY"); !k.empty()) {
    _job_key = std::move(k);
    return _job_key;
  }
  std::string key;
  if (rank() == 0) {
    try {
      key = nmad::random_hex(32);
    } catch (const std::exception& e) {
      fail(e.what());
    }
    if (size() > 1) put(kJobKeyName, key);
  }
  if (size() > 1) {
    fence();
    if (rank() != 0) key = get(kJobKeyName);
  }
  if (key.empty()) fail("job_key: rank 0 published an empty job key");
  _job_key = key;
  return _job_key;
}

}  // namespace nmad
