// The split-tree cost model (see placement.hpp for the formulas).
#include <algorithm>
#include <stdexcept>
#include <string>

#include "api/nmad/services/placement.hpp"

namespace nmad::topology {

namespace {
int floor_log2(int n) {
  int l = 0;
  while ((2L << l) <= n) ++l;
  return l;
}
int ceil_log2(int n) {
  int h = 0;
  while ((1L << h) < n) ++h;
  return h;
}
}  // namespace

long split_tree_level_ops_scaled(int n, int i) {
  if (n < 1 || i < 1 || i > 40) throw std::invalid_argument("split-tree: need N >= 1 and 1 <= level <= 40");
  // F(N,i) * 2^i = 2^L + 2^i * floor((R + 2^(i-1)) / 2^i), exact even when L < i.
  const int l = floor_log2(n);
  const long r = n - (1L << l);
  const long two_i = 1L << i;
  return (1L << l) + two_i * ((r + two_i / 2) / two_i);
}

long split_tree_cost(int s, int n, int progress_cores) {
  const int h = ceil_log2(n);
  if (s < 0) throw std::invalid_argument("split-tree: S must be >= 0");
  long t = std::min(s, h);
  for (int i = s + 1; i <= h; ++i) {
    if (progress_cores <= 0) return -1;  // levels above S with nowhere to run
    // ceil(F / P) = ceil(F * 2^i / (P * 2^i))
    const long denom = static_cast<long>(progress_cores) << i;
    t += (split_tree_level_ops_scaled(n, i) + denom - 1) / denom;
  }
  return t;
}

split_tree_choice choose_split(int n, int progress_cores) {
  if (n < 1) throw std::invalid_argument("split-tree: need N >= 1");
  split_tree_choice c;
  c.n = n;
  c.height = ceil_log2(n);
  c.progress_cores = progress_cores;
  c.split = c.height;
  for (int s = 0; s <= c.height; ++s) c.cost.push_back(split_tree_cost(s, n, progress_cores));
  if (progress_cores > 0)
    for (int s = 0; s <= c.height; ++s)
      if (c.cost[s] < c.cost[c.split] || (c.cost[s] == c.cost[c.split] && s < c.split)) c.split = s;
  return c;
}

std::string split_tree_table(int cores, int max_n) {
  std::string out =
      "| N | H | P = " + std::to_string(cores) +
      " − N | S | T(S,N) | T(0,N) | T(H,N) |\n|---:|---:|---:|---:|---:|---:|---:|\n";
  auto cell = [](long v) { return v < 0 ? std::string("—") : std::to_string(v); };
  for (int n = 1; n <= max_n; ++n) {
    const auto c = choose_split(n, cores - n);
    out += "| " + std::to_string(n) + " | " + std::to_string(c.height) + " | " + std::to_string(c.progress_cores) +
           " | " + std::to_string(c.split) + " | " + cell(c.cost[c.split]) + " | " + cell(c.cost.front()) + " | " +
           cell(c.cost.back()) + " |\n";
  }
  return out;
}

}  // namespace nmad::topology
