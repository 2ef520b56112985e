#pragma once
// Engine log: one line per event on stderr, prefixed with the component and
// this process's rank. Level from $NMAD_LOG (error, warn, info, debug;
// default warn). Thread-safe (one write(2) per line).
#include <string_view>

namespace nmad {

enum class log_level : int { error = 0, warn = 1, info = 2, debug = 3 };

// Sets the rank shown in log lines (-1 = unknown, not shown).
void log_set_rank(int rank);
bool log_enabled(log_level level);
void log_write(log_level level, std::string_view component, std::string_view message);

}  // namespace nmad
