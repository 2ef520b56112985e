#include "core/common/log.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

namespace nmad {
namespace {
std::atomic<int> g_rank{-1};

log_level level_from_env() {
  const char* v = std::getenv("NMAD_LOG");
  if (!v) return log_level::warn;
  if (!std::strcmp(v, "error")) return log_level::error;
  if (!std::strcmp(v, "info")) return log_level::info;
  if (!std::strcmp(v, "debug")) return log_level::debug;
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
}  // namespace

void log_set_rank(int rank) { g_rank.store(rank, std::memory_order_relaxed); }

bool log_enabled(log_level level) { return level <= current_level(); }

void log_write(log_level level, std::string_view component, std::string_view message) {
  if (!log_enabled(level)) return;
  std::string line = "nmad";
  int rank = g_rank.load(std::memory_order_relaxed);
  if (rank >= 0) line += "[" + std::to_string(rank) + "]";
  line += " ";
  line += component;
  line += " ";
  line += level_name(level);
  line += ": ";
  line += message;
  line += "\n";
  ssize_t rc = ::write(STDERR_FILENO, line.data(), line.size());
  (void)rc;
}

}  // namespace nmad
