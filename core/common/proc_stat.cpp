// /proc stat files (see proc_stat.hpp).
#include "core/common/proc_stat.hpp"

#include <cstdio>
#include <cstring>

namespace nmad {

std::string proc_stat_fields(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "re");
  if (!f) return {};
  char buf[1024];
  const std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = 0;
  const char* p = std::strrchr(buf, ')');
  if (!p || p[1] != ' ') return {};
  return std::string(p + 2);
}

std::string process_start_time(pid_t pid) {
  const std::string fields = proc_stat_fields("/proc/" + std::to_string(pid) + "/stat");
  // fields[0] is field 3; field 22 follows 19 more spaces.
  std::size_t i = 0;
  for (int field = 3; field < 22 && i < fields.size(); ++i)
    if (fields[i] == ' ') ++field;
  std::string v;
  while (i < fields.size() && fields[i] >= '0' && fields[i] <= '9') v += fields[i++];
  return v;
}

}  // namespace nmad
