#pragma once
// Reading /proc/<pid>/stat and /proc/<pid>/task/<tid>/stat (proc(5)). The
// second field, the command name in parentheses, may hold any character,
// spaces and ')' included: the fields that follow are found after its
// LAST ')'.
#include <sys/types.h>

#include <string>

namespace nmad {

// The fields of a stat file from the third (the state letter) on, as one
// space-separated line; empty if the file cannot be read or is malformed.
std::string proc_stat_fields(const std::string& path);

// A process's start time (field 22, clock ticks since boot), as digits:
// with the pid it names one process for good (pids are reused). Empty if
// the process is gone or unreadable.
std::string process_start_time(pid_t pid);

}  // namespace nmad
