#include "api/nmad/services/log.hpp"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "api/nmad/services/config.hpp"

namespace nmad {
namespace {
std::atomic<int> g_rank{-1};

// A bad NMAD_LOG is refused by the start-up check (config.hpp); logging
// itself never throws, and keeps the default.
log_level level_from_env() {
  std::string v;
  try {
    v = config::word("NMAD_LOG");
  } catch (const std::exception&) {
    return log_level::warn;
  }
  if (v == "error") return log_level::error;
  if (v == "info") return log_level::info;
  if (v == "debug") return log_level::debug;
  return log_level::warn;
}

log_level current_level() {
  static const log_level level = level_from_env();
  return level;
}

constexpr std::string_view level_name(log_level l) {
  switch (l) {
    case log_level::error: return "error";
    case log_level::warn: return "warning";
    case log_level::info: return "info";
    case log_level::debug: return "debug";
  }
  return "?";
}

std::string prefix(std::string_view component, log_level level) {
  std::string line = "nmad";
  int rank = g_rank.load(std::memory_order_relaxed);
  if (rank >= 0) line += "[" + std::to_string(rank) + "]";
  line += " ";
  line += component;
  line += " ";
  line += level_name(level);
  line += ": ";
  return line;
}

// ---------------------------------------------------------------------------
// Non-blocking output to stderr. Everything below runs under g_out.
constexpr std::size_t kBacklogMax = 64 * 1024;

struct output {
  std::mutex mutex;
  std::string backlog;             // bytes accepted but not written yet
  std::uint64_t dropped = 0;       // lines dropped, total
  std::uint64_t unreported = 0;    // lines dropped since the last note
  // A private non-blocking open file description of the pipe on fd 2
  // (setting O_NONBLOCK on fd 2 itself would change it for every process
  // sharing it), for the pipe identified by dev/ino.
  int pipe_fd = -1;
  dev_t dev = 0;
  ino_t ino = 0;
};

output& out() {
  static output* o = new output;  // never destroyed: usable from exit handlers
  return *o;
}

std::size_t count_lines(std::string_view s) {
  std::size_t n = static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n'));
  return n ? n : (s.empty() ? 0 : 1);
}

// write(2) with SIGPIPE held off in this thread: a reader that went away
// gives EPIPE, and the signal the kernel raised is taken back.
ssize_t write_without_sigpipe(int fd, const char* p, std::size_t n) {
  sigset_t pipe_only, old, pending;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  sigemptyset(&pending);
  ::sigpending(&pending);
  const bool was_pending = sigismember(&pending, SIGPIPE) == 1;
  ::pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
  ssize_t r;
  do r = ::write(fd, p, n);
  while (r < 0 && errno == EINTR);
  const int err = errno;
  if (r < 0 && err == EPIPE && !was_pending) {
    timespec zero{0, 0};
    while (::sigtimedwait(&pipe_only, nullptr, &zero) < 0 && errno == EINTR) {
    }
  }
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  errno = err;
  return r;
}

// Writes what stderr takes now without blocking. Returns the bytes written,
// or -1 when the output is gone for good (the bytes are to be dropped).
ssize_t write_now(output& o, const char* p, std::size_t n) {
  struct stat st {};
  if (::fstat(STDERR_FILENO, &st) != 0) return -1;  // no stderr: drop quietly
  ssize_t r;
  if (S_ISSOCK(st.st_mode)) {
    do r = ::send(STDERR_FILENO, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
    while (r < 0 && errno == EINTR);
  } else if (S_ISFIFO(st.st_mode)) {
    if (o.pipe_fd >= 0 && (o.dev != st.st_dev || o.ino != st.st_ino)) {
      ::close(o.pipe_fd);
      o.pipe_fd = -1;
    }
    if (o.pipe_fd < 0) {
      o.pipe_fd = ::open("/proc/self/fd/2", O_WRONLY | O_NONBLOCK | O_CLOEXEC);
      o.dev = st.st_dev;
      o.ino = st.st_ino;
    }
    if (o.pipe_fd >= 0) {
      r = write_without_sigpipe(o.pipe_fd, p, n);
    } else {
      // No /proc: a pipe that polls writable has room for PIPE_BUF bytes
      // (unless another writer takes it first).
      pollfd pf{STDERR_FILENO, POLLOUT, 0};
      if (::poll(&pf, 1, 0) != 1 || !(pf.revents & POLLOUT)) return 0;
      if (pf.revents & POLLERR) return -1;
      r = write_without_sigpipe(STDERR_FILENO, p, std::min<std::size_t>(n, PIPE_BUF));
    }
  } else {
    r = write_without_sigpipe(STDERR_FILENO, p, n);  // file, terminal, /dev/null
  }
  if (r >= 0) return r;
  if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
  return -1;
}

// Writes the backlog as far as it goes. True when it is empty.
bool drain_locked(output& o) {
  while (!o.backlog.empty()) {
    ssize_t r = write_now(o, o.backlog.data(), o.backlog.size());
    if (r < 0) {
      o.dropped += count_lines(o.backlog);
      o.unreported += count_lines(o.backlog);
      o.backlog.clear();
      return true;
    }
    if (r == 0) return false;
    o.backlog.erase(0, static_cast<std::size_t>(r));
  }
  return true;
}

void queue_locked(output& o, std::string_view text) {
  if (o.backlog.size() + text.size() <= kBacklogMax) {
    o.backlog.append(text);
  } else {
    o.dropped += count_lines(text);
    o.unreported += count_lines(text);
  }
}

bool emit_locked(output& o, std::string_view text) {
  if (!drain_locked(o)) {
    const std::uint64_t before = o.dropped;
    queue_locked(o, text);
    return o.dropped == before;
  }
  std::string note;
  if (o.unreported) {
    note = prefix("log", log_level::warn) + std::to_string(o.unreported) +
           " line(s) dropped: stderr was not being read\n";
    o.unreported = 0;
  }
  std::string all = note;
  all.append(text);
  ssize_t r = write_now(o, all.data(), all.size());
  if (r < 0) {
    o.dropped += count_lines(text);
    return false;  // nobody will ever read it
  }
  const std::uint64_t before = o.dropped;
  if (static_cast<std::size_t>(r) < all.size()) queue_locked(o, std::string_view(all).substr(static_cast<std::size_t>(r)));
  return o.dropped == before;
}
}  // namespace

void log_set_rank(int rank) { g_rank.store(rank, std::memory_order_relaxed); }

bool log_enabled(log_level level) { return level <= current_level(); }

void log_write(log_level level, std::string_view component, std::string_view message) {
  if (!log_enabled(level)) return;
  std::string line = prefix(component, level);
  line += message;
  line += "\n";
  log_emit(line);
}

bool log_emit(std::string_view text) {
  output& o = out();
  std::lock_guard lock(o.mutex);
  return emit_locked(o, text);
}

bool log_flush(int timeout_ms) {
  output& o = out();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(0, timeout_ms));
  for (;;) {
    {
      std::lock_guard lock(o.mutex);
      if (drain_locked(o)) return true;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd pf{STDERR_FILENO, POLLOUT, 0};
    ::poll(&pf, 1, static_cast<int>(std::min<long long>(left.count(), 50)));
  }
}

std::uint64_t log_dropped_lines() {
  output& o = out();
  std::lock_guard lock(o.mutex);
  return o.dropped;
}

// ---------------------------------------------------------------------------
std::string log_limiter::summary_locked(std::chrono::steady_clock::time_point now) {
  if (_suppressed == 0) return {};
  const double s = std::chrono::duration<double>(now - _window_start).count();
  char buf[160];
  std::snprintf(buf, sizeof buf, "suppressed %llu similar message(s) in the last %.1f s",
                static_cast<unsigned long long>(_suppressed), s);
  _suppressed = 0;
  return buf;
}

bool log_limiter::admit(std::string* summary) {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(_mutex);
  if (_in_window == 0 && _suppressed == 0 && _window_start == std::chrono::steady_clock::time_point{})
    _window_start = now;
  if (now - _window_start >= _interval) {
    std::string s = summary_locked(now);
    if (summary) *summary = std::move(s);
    _window_start = now;
    _in_window = 0;
  }
  if (_in_window < _burst) {
    ++_in_window;
    return true;
  }
  ++_suppressed;
  ++_suppressed_total;
  return false;
}

std::string log_limiter::take_summary() {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(_mutex);
  std::string s = summary_locked(now);
  _window_start = now;
  _in_window = 0;
  return s;
}

void log_limiter::write(log_level level, std::string_view component, std::string_view message) {
  if (!log_enabled(level)) return;
  {
    std::lock_guard lock(_mutex);
    _last_level = level;
    _last_component.assign(component);
  }
  std::string summary;
  const bool now = admit(&summary);
  if (!summary.empty()) log_write(level, component, summary);
  if (now) log_write(level, component, message);
}

void log_limiter::flush() {
  std::string s = take_summary();
  if (s.empty()) return;
  log_level level;
  std::string component;
  {
    std::lock_guard lock(_mutex);
    level = _last_level;
    component = _last_component;
  }
  log_write(level, component, s);
}

std::uint64_t log_limiter::suppressed_total() const {
  std::lock_guard lock(_mutex);
  return _suppressed_total;
}

}  // namespace nmad
