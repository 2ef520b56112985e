#pragma once
// Engine log: one line per event on stderr, prefixed with the component and
// this process's rank. Level from $NMAD_LOG (error, warn, info, debug;
// default warn). Thread-safe.
//
// Logging never holds up the caller (the progress loop logs too): a line is
// written with one non-blocking write. When stderr is a pipe or socket
// nobody reads, what does not fit waits in a small backlog (64 KiB) that
// later log calls and log_flush() try to write out; past that, lines are
// dropped and counted (log_dropped_lines()). A reader that went away never
// raises SIGPIPE in this process. Regular files and terminals are written
// as usual.
//
// Events an outsider can trigger in bulk (refused connections, junk on a
// listening port) go through a log_limiter: the first `burst` lines of a
// kind are written, then at most one "suppressed K similar messages" line
// per interval.
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

namespace nmad {

enum class log_level : int { error = 0, warn = 1, info = 2, debug = 3 };

// Sets the rank shown in log lines (-1 = unknown, not shown).
void log_set_rank(int rank);
bool log_enabled(log_level level);
void log_write(log_level level, std::string_view component, std::string_view message);

// Writes `text` (whole lines, each ending in '\n') to stderr without
// blocking, as described above. False when (part of) it had to be dropped.
bool log_emit(std::string_view text);
// Tries to write the backlog for up to `timeout_ms` (0: what fits now).
// True when nothing is left.
bool log_flush(int timeout_ms);
// Lines dropped so far because stderr was not being read.
std::uint64_t log_dropped_lines();

// Rate limit for one kind of message. Thread-safe; cheap when quiet.
class log_limiter {
 public:
  explicit log_limiter(unsigned burst = 5, std::chrono::milliseconds interval = std::chrono::seconds(10))
      : _burst(burst), _interval(interval) {}
  ~log_limiter() { flush(); }
  log_limiter(const log_limiter&) = delete;
  log_limiter& operator=(const log_limiter&) = delete;

  // Like log_write, within the limit.
  void write(log_level level, std::string_view component, std::string_view message);
  // For a caller with its own output (the launcher): whether to print the
  // message now; `summary` gets the "suppressed K similar messages ..." text
  // (print it first) when one is due, else is left empty.
  bool admit(std::string* summary);
  // The summary of what was suppressed since the last one (empty if none),
  // and a fresh window.
  std::string take_summary();
  // Writes the pending summary through log_write.
  void flush();
  std::uint64_t suppressed_total() const;

 private:
  std::string summary_locked(std::chrono::steady_clock::time_point now);

  const unsigned _burst;
  const std::chrono::milliseconds _interval;
  mutable std::mutex _mutex;
  std::chrono::steady_clock::time_point _window_start{};
  unsigned _in_window = 0;
  std::uint64_t _suppressed = 0;        // in this window
  std::uint64_t _suppressed_total = 0;  // since construction
  log_level _last_level = log_level::warn;
  std::string _last_component;
};

}  // namespace nmad
