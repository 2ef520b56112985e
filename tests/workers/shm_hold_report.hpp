#pragma once
// Reading shm_hold_worker's report: each rank prints one line
// "held <n> pid <pid> rank <r>" (n: the shm names of its job it still holds).
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

namespace nmad_test {

// The pids of the ranks that reported, in report order; *held_total: the
// names they hold, all added (0 when every rank let go of its names).
inline std::vector<int> held_lines(const std::string& out, int* held_total) {
  std::vector<int> pids;
  std::istringstream in(out);
  std::string line;
  *held_total = 0;
  while (std::getline(in, line)) {
    const auto at = line.find("held ");
    if (at == std::string::npos) continue;
    int held = -1, pid = -1, rank = -1;
    if (std::sscanf(line.c_str() + at, "held %d pid %d rank %d", &held, &pid, &rank) == 3) {
      pids.push_back(pid);
      *held_total += held;
    }
  }
  return pids;
}

}  // namespace nmad_test
