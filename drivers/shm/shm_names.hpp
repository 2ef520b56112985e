#pragma once
// Names of the shm driver's segments in /dev/shm, shared with nmad-run so it
// can remove what a killed rank of *its* job left behind:
//   nmad-<job tag>-<what>-<pid>-<counter>-<random>
// The job tag is a hash of the job key (never the key itself); it keeps
// jobs apart even where pids repeat (PID namespaces, sandboxes, reuse).
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace nmad::shm {

inline std::string job_tag(std::string_view job_key) {
  std::uint32_t h = 2166136261u;  // FNV-1a
  for (unsigned char c : job_key) h = (h ^ c) * 16777619u;
  static constexpr char hex[] = "0123456789abcdef";
  std::string out(8, '0');
  for (int i = 7; i >= 0; --i, h >>= 4) out[static_cast<std::size_t>(i)] = hex[h & 15];
  return out;
}

// "nmad-<tag>-" : every segment of that job starts with it.
inline std::string segment_prefix(std::string_view job_key) { return "nmad-" + job_tag(job_key) + "-"; }

// Whether /dev/shm entry `name` was created by process `pid` of that job.
inline bool segment_of(std::string_view name, std::string_view job_key, pid_t pid) {
  const std::string prefix = segment_prefix(job_key);
  if (name.substr(0, prefix.size()) != prefix) return false;
  name.remove_prefix(prefix.size());
  const auto dash = name.find('-');  // after <what>
  if (dash == std::string_view::npos) return false;
  const std::string infix = "-" + std::to_string(pid) + "-";
  return name.substr(dash, infix.size()) == infix;
}

}  // namespace nmad::shm
