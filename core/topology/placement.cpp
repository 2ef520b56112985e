#include "api/nmad/services/placement.hpp"

#include <algorithm>
#include <stdexcept>

namespace nmad::topology {

namespace {

std::string ordinal(int k) {
  const char* suffix = "th";
  if (k % 100 < 11 || k % 100 > 13) suffix = k % 10 == 1 ? "st" : k % 10 == 2 ? "nd" : k % 10 == 3 ? "rd" : "th";
  return std::to_string(k) + suffix;
}

std::string numa_name(const machine_topology& t, int numa) {
  return "NUMA node " + std::to_string(t.numa_nodes()[numa].label);
}

std::string core_name(const machine_topology& t, int core) {
  return "core " + std::to_string(t.cores()[core].label) + " (CPUs " + cpu_list(t.cpus_of_core(core)) + ")";
}

// The PUs of a NUMA node, every core's first PU before any second one.
std::vector<int> pus_smt_last(const machine_topology& t, int numa) {
  std::vector<int> out;
  for (std::size_t s = 0;; ++s) {
    bool any = false;
    for (int c : t.numa_nodes()[numa].cores)
      if (t.cores()[c].pus.size() > s) {
        out.push_back(t.cores()[c].pus[s]);
        any = true;
      }
    if (!any) return out;
  }
}

// Position of each rank among the ranks of the same NUMA node (rank order).
std::vector<int> index_in_node(const machine_topology& t, const std::vector<rank_place>& ranks) {
  std::vector<int> seen(static_cast<std::size_t>(t.numa_count())), out;
  for (const auto& r : ranks) out.push_back(seen[r.numa]++);
  return out;
}

std::vector<std::vector<int>> free_by_node(const machine_topology& t, const std::vector<int>& free) {
  std::vector<std::vector<int>> out(static_cast<std::size_t>(t.numa_count()));
  for (int c : free) out[t.cores()[c].numa].push_back(c);
  return out;
}

// `want` free cores (all when <= 0), taken round robin over the NUMA nodes,
// each node's from its last core down.
std::vector<int> pick_pool(const machine_topology& t, const std::vector<int>& free, int want) {
  auto left = free_by_node(t, free);
  const std::size_t goal = want <= 0 ? free.size() : std::min(free.size(), static_cast<std::size_t>(want));
  std::vector<int> pool;
  while (pool.size() < goal)
    for (auto& node : left)
      if (!node.empty() && pool.size() < goal) {
        pool.push_back(node.back());
        node.pop_back();
      }
  return pool;
}

// Assigns each of `who` (ranks, in order) a core of `pool`: the pool cores
// of its own NUMA node in turn when there are any, else the whole pool in turn.
std::vector<int> assign_from_pool(const machine_topology& t, const std::vector<rank_place>& ranks,
                                  const std::vector<int>& who, const std::vector<int>& pool) {
  const auto by_node = free_by_node(t, pool);
  std::vector<int> seen(static_cast<std::size_t>(t.numa_count())), out;
  std::size_t elsewhere = 0;
  for (int r : who) {
    const auto& own = by_node[ranks[r].numa];
    if (!own.empty())
      out.push_back(own[static_cast<std::size_t>(seen[ranks[r].numa]++) % own.size()]);
    else
      out.push_back(pool[elsewhere++ % pool.size()]);
  }
  return out;
}

progress_place on_rank_core(const rank_place& r, std::string reason) {
  progress_place p;
  p.rank = r.rank;
  p.core = r.core;
  p.numa = r.numa;
  p.cpus = r.cpus;
  p.on_rank_core = true;
  p.reason = std::move(reason);
  return p;
}

progress_place on_core(const machine_topology& t, const rank_place& r, int core, std::string reason) {
  if (core == r.core) return on_rank_core(r, std::move(reason));
  progress_place p;
  p.rank = r.rank;
  p.core = core;
  p.numa = t.cores()[core].numa;
  p.cpus = t.cpus_of_core(core);
  p.reason = std::move(reason);
  return p;
}

int split_progress_cores(const machine_topology& t, const std::vector<rank_place>& ranks,
                         const std::vector<int>& free) {
  // P(N) = cores - N; with no free core that is <= 0 (N = cores, or ranks on single PUs).
  return free.empty() ? t.core_count() - static_cast<int>(ranks.size()) : static_cast<int>(free.size());
}

}  // namespace

std::vector<rank_place> place_ranks(const machine_topology& t, int n) {
  if (n < 1) throw std::invalid_argument("placement: the number of ranks must be at least 1");
  const int cores = t.core_count(), pus = t.pu_count(), nodes = t.numa_count();
  const bool by_core = n <= cores;
  // Slots per node: its cores, or its PUs (SMT siblings last).
  std::vector<std::vector<int>> slots(static_cast<std::size_t>(nodes));
  for (int m = 0; m < nodes; ++m) slots[m] = by_core ? t.numa_nodes()[m].cores : pus_smt_last(t, m);
  const long layers = by_core ? 1 : std::max(1L, (static_cast<long>(n) + pus - 1) / pus);
  // NUMA nodes in turn, skipping full ones.
  std::vector<int> node_of(static_cast<std::size_t>(n)), count(static_cast<std::size_t>(nodes));
  int next = 0;
  for (int r = 0; r < n; ++r) {
    int m = next;
    while (count[m] >= static_cast<long>(slots[m].size()) * layers) m = (m + 1) % nodes;
    node_of[r] = m;
    ++count[m];
    next = (m + 1) % nodes;
  }
  std::vector<rank_place> out;
  std::vector<int> seen(static_cast<std::size_t>(nodes));
  for (int r = 0; r < n; ++r) {
    const int m = node_of[r], j = seen[m]++, k = count[m];
    const auto& s = slots[m];
    const int c = static_cast<int>(s.size());
    rank_place p;
    p.rank = r;
    p.numa = m;
    p.whole_core = by_core;
    std::string where = "scatter by NUMA: " + numa_name(t, m) + " (nodes in turn), " + ordinal(j + 1) + " of its " +
                        std::to_string(k) + " rank(s)";
    if (by_core) {
      p.core = s[static_cast<std::size_t>(static_cast<long>(j) * c / k)];
      p.cpus = t.cpus_of_core(p.core);
      p.reason = where + " spread over its " + std::to_string(c) + " core(s): " + core_name(t, p.core);
    } else {
      const int pu = s[static_cast<std::size_t>(j % c)];
      p.core = -1;
      for (int ci = 0; ci < cores && p.core < 0; ++ci)
        if (std::find(t.cores()[ci].pus.begin(), t.cores()[ci].pus.end(), pu) != t.cores()[ci].pus.end()) p.core = ci;
      p.cpus = {t.pus()[pu].os_index};
      p.reason = where + (n > pus ? ", oversubscribed (" + std::to_string(n) + " ranks > " + std::to_string(pus) +
                                        " PUs): PUs shared in turn: CPU "
                                  : ", more ranks than cores: one PU each, every core's first PU before SMT "
                                    "siblings: CPU ") +
                 std::to_string(p.cpus[0]);
    }
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<int> free_cores(const machine_topology& t, const std::vector<rank_place>& ranks) {
  std::vector<bool> used(static_cast<std::size_t>(t.core_count()));
  for (const auto& r : ranks) used[r.core] = true;
  std::vector<int> out;
  for (int c = 0; c < t.core_count(); ++c)
    if (!used[c]) out.push_back(c);
  return out;
}

namespace {
struct policy_name {
  progress_policy policy;
  std::string_view name;
};
constexpr policy_name policy_names[] = {
    {progress_policy::bind, "bind"},       {progress_policy::numa, "numa"},
    {progress_policy::dedicated, "dedicated"}, {progress_policy::smt, "smt"},
    {progress_policy::odd_even, "odd-even"}, {progress_policy::split_tree, "split-tree"},
    {progress_policy::float_node, "float"},  {progress_policy::pair, "pair"},
    {progress_policy::automatic, "auto"},
};
}  // namespace

std::optional<progress_policy> parse_progress_policy(std::string_view name) {
  std::string n(name);
  std::replace(n.begin(), n.end(), '_', '-');
  for (const auto& p : policy_names)
    if (p.name == n) return p.policy;
  return std::nullopt;
}

std::string_view name_of(progress_policy p) {
  for (const auto& e : policy_names)
    if (e.policy == p) return e.name;
  return "?";
}

const std::vector<progress_policy>& all_progress_policies() {
  static const std::vector<progress_policy> all = [] {
    std::vector<progress_policy> v;
    for (const auto& p : policy_names) v.push_back(p.policy);
    return v;
  }();
  return all;
}

namespace {

std::vector<progress_place> place_numa(const machine_topology& t, const std::vector<rank_place>& ranks,
                                       const std::vector<int>& free) {
  const auto by_node = free_by_node(t, free);
  const auto j = index_in_node(t, ranks);
  std::vector<progress_place> out;
  for (const auto& r : ranks) {
    const auto& f = by_node[r.numa];
    if (f.empty()) {
      out.push_back(on_rank_core(r, "numa: " + numa_name(t, r.numa) +
                                        " has no free core, so on its rank's core (never another node)"));
      continue;
    }
    const int core = f[static_cast<std::size_t>(j[r.rank]) % f.size()];
    out.push_back(on_core(t, r, core,
                          "numa: free " + core_name(t, core) + " of its rank's " + numa_name(t, r.numa) + " (" +
                              std::to_string(f.size()) + " free core(s) there, taken in turn)"));
  }
  return out;
}

// The rank's whole NUMA node; `why` prefixes the reason.
progress_place on_node(const machine_topology& t, const rank_place& r, const std::string& why) {
  progress_place p;
  p.rank = r.rank;
  p.core = r.core;
  p.numa = r.numa;
  for (int core : t.numa_nodes()[r.numa].cores)
    for (int cpu : t.cpus_of_core(core)) p.cpus.push_back(cpu);
  std::sort(p.cpus.begin(), p.cpus.end());
  p.on_rank_core = p.cpus == r.cpus;
  p.reason = why + "anywhere on its rank's " + numa_name(t, r.numa) + " (CPUs " + cpu_list(p.cpus) +
             "): the kernel runs it where a core is idle";
  return p;
}

std::vector<progress_place> place_float(const machine_topology& t, const std::vector<rank_place>& ranks) {
  std::vector<progress_place> out;
  for (const auto& r : ranks) out.push_back(on_node(t, r, "float: "));
  return out;
}

// The partner of each rank (pair): ranks of one NUMA node in rank order,
// paired 1st-2nd, 3rd-4th...; an odd last one goes with the previous pair's
// second rank; a rank alone on its node is its own partner.
std::vector<progress_place> place_pair(const machine_topology& t, const std::vector<rank_place>& ranks,
                                       const std::string& why) {
  std::vector<std::vector<int>> by_node(static_cast<std::size_t>(t.numa_count()));
  for (std::size_t i = 0; i < ranks.size(); ++i) by_node[ranks[i].numa].push_back(static_cast<int>(i));
  std::vector<progress_place> out(ranks.size());
  for (const auto& members : by_node) {
    const std::size_t k = members.size();
    for (std::size_t j = 0; j < k; ++j) {
      const rank_place& r = ranks[members[j]];
      if (k == 1) {
        out[members[j]] = on_rank_core(r, why + "pair: alone on its " + numa_name(t, r.numa) +
                                              ", so on its rank's core");
        continue;
      }
      const std::size_t mate = j % 2 == 0 ? (j + 1 < k ? j + 1 : j - 1) : j - 1;
      const rank_place& m = ranks[members[mate]];
      progress_place p;
      p.rank = r.rank;
      p.core = m.core;
      p.numa = m.numa;
      p.cpus = m.cpus;
      p.on_rank_core = m.core == r.core;
      p.reason = why + "pair: on " + core_name(t, m.core) + " of its partner, rank " + std::to_string(m.rank) +
                 " (one computes while the other waits: the waiting one's core is free)";
      out[members[j]] = std::move(p);
    }
  }
  return out;
}

std::vector<progress_place> place_auto(const machine_topology& t, const std::vector<rank_place>& ranks,
                                       const std::vector<int>& free) {
  std::vector<progress_place> out = place_numa(t, ranks, free);
  const auto paired = place_pair(t, ranks, "auto: no free core on its node, so ");
  for (std::size_t i = 0; i < out.size(); ++i)
    if (out[i].on_rank_core) out[i] = paired[i];
    else out[i].reason = "auto: " + out[i].reason;
  return out;
}

std::vector<progress_place> place_dedicated(const machine_topology& t, const std::vector<rank_place>& ranks,
                                            const std::vector<int>& free, int want) {
  const auto pool = pick_pool(t, free, want);
  std::vector<progress_place> out;
  if (pool.empty()) {
    for (const auto& r : ranks) out.push_back(on_rank_core(r, "dedicated: no free core, so on its rank's core"));
    return out;
  }
  std::vector<int> all(ranks.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
  const auto cores = assign_from_pool(t, ranks, all, pool);
  for (const auto& r : ranks) {
    const int core = cores[r.rank];
    const bool near = t.cores()[core].numa == r.numa;
    out.push_back(on_core(t, r, core,
                          "dedicated: " + core_name(t, core) + " of a pool of " + std::to_string(pool.size()) +
                              " free core(s), " + (near ? "on its rank's NUMA node" : "none on its rank's NUMA node")));
  }
  return out;
}

std::vector<progress_place> place_smt(const machine_topology& t, const std::vector<rank_place>& ranks) {
  std::vector<progress_place> out;
  for (const auto& r : ranks) {
    std::vector<int> siblings;
    const auto core_cpus = t.cpus_of_core(r.core);
    // A rank on its whole core leaves the siblings of the first PU; one on a
    // single PU, every other PU of its core.
    for (std::size_t i = r.whole_core ? 1 : 0; i < core_cpus.size(); ++i)
      if (r.whole_core || std::find(r.cpus.begin(), r.cpus.end(), core_cpus[i]) == r.cpus.end())
        siblings.push_back(core_cpus[i]);
    if (siblings.empty()) {
      out.push_back(on_rank_core(r, "smt: its rank's core has no SMT sibling, so on its rank's core"));
      continue;
    }
    progress_place p = on_rank_core(r, "smt: SMT sibling(s) CPU " + cpu_list(siblings) + " of its rank's " +
                                           core_name(t, r.core));
    p.cpus = siblings;
    p.on_rank_core = false;
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<progress_place> place_odd_even(const machine_topology& t, const std::vector<rank_place>& ranks,
                                           const std::vector<int>& free) {
  const auto by_node = free_by_node(t, free);
  int chosen[2] = {-1, -1};
  for (int g = 0; g < 2; ++g) {
    std::vector<int> count(static_cast<std::size_t>(t.numa_count()));
    bool any = false;
    for (const auto& r : ranks)
      if (r.rank % 2 == g) ++count[r.numa], any = true;
    if (!any || free.empty()) continue;
    std::vector<int> order(count.size());
    for (std::size_t m = 0; m < order.size(); ++m) order[m] = static_cast<int>(m);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return count[a] > count[b]; });
    for (int m : order) {
      for (auto it = by_node[m].rbegin(); it != by_node[m].rend() && chosen[g] < 0; ++it)
        if (*it != chosen[1 - g]) chosen[g] = *it;
      if (chosen[g] >= 0) break;
    }
    if (chosen[g] < 0) chosen[g] = chosen[1 - g];  // one free core: both groups share it
  }
  std::vector<progress_place> out;
  for (const auto& r : ranks) {
    const int g = r.rank % 2, core = chosen[g];
    const char* group = g ? "odd" : "even";
    if (core < 0) {
      out.push_back(on_rank_core(r, std::string("odd-even: no free core, so on its rank's core")));
      continue;
    }
    const bool shared = chosen[0] == chosen[1];
    out.push_back(on_core(t, r, core,
                          std::string("odd-even: the ") + group + " ranks' dedicated " + core_name(t, core) +
                              (shared ? " (the only free core: even and odd ranks share it)" : "")));
  }
  return out;
}

std::vector<progress_place> place_split_tree(const machine_topology& t, const std::vector<rank_place>& ranks,
                                             const std::vector<int>& free, const split_tree_choice& c) {
  const int s = c.split, h = c.height;
  std::vector<int> deep;  // ranks with work above level S: rank mod 2^S == 0
  if (s < h)
    for (const auto& r : ranks)
      if (r.rank % (1 << s) == 0) deep.push_back(r.rank);
  const auto pool = pick_pool(t, free, 0);
  const auto cores = deep.empty() ? std::vector<int>() : assign_from_pool(t, ranks, deep, pool);
  const std::string model = "split-tree: S = " + std::to_string(s) + " of H = " + std::to_string(h) + " levels (T = " +
                            std::to_string(c.cost[s]) + ", P = " + std::to_string(c.progress_cores) + ")";
  std::vector<progress_place> out;
  for (const auto& r : ranks) {
    const auto it = std::find(deep.begin(), deep.end(), r.rank);
    if (s == h) {
      out.push_back(on_rank_core(r, model + ": every level on its rank's core"));
      continue;
    }
    const std::string low = s > 0 ? "levels 1-" + std::to_string(s) + " on its rank's core, " : "";
    if (it == deep.end()) {
      out.push_back(on_rank_core(r, model + ": " + low + "no part above level " + std::to_string(s)));
      continue;
    }
    const int core = cores[static_cast<std::size_t>(it - deep.begin())];
    progress_place p = on_rank_core(r, model + ": " + low + "levels " + std::to_string(s + 1) + "-" +
                                           std::to_string(h) + " on free " + core_name(t, core));
    p.deep_core = core;
    p.deep_cpus = t.cpus_of_core(core);
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace

std::vector<progress_place> place_progress(const machine_topology& t, const std::vector<rank_place>& ranks,
                                           const progress_options& opts) {
  const auto free = free_cores(t, ranks);
  switch (opts.policy) {
    case progress_policy::bind: {
      std::vector<progress_place> out;
      for (const auto& r : ranks) out.push_back(on_rank_core(r, "bind: on its rank's core"));
      return out;
    }
    case progress_policy::numa: return place_numa(t, ranks, free);
    case progress_policy::dedicated: return place_dedicated(t, ranks, free, opts.dedicated_cores);
    case progress_policy::smt: return place_smt(t, ranks);
    case progress_policy::odd_even: return place_odd_even(t, ranks, free);
    case progress_policy::float_node: return place_float(t, ranks);
    case progress_policy::pair: return place_pair(t, ranks, "");
    case progress_policy::automatic: return place_auto(t, ranks, free);
    case progress_policy::split_tree:
      return place_split_tree(t, ranks, free,
                              choose_split(static_cast<int>(ranks.size()), split_progress_cores(t, ranks, free)));
  }
  throw std::invalid_argument("placement: unknown progress policy");
}

job_placement place_job(const machine_topology& t, int n, const progress_options& opts) {
  job_placement j;
  j.ranks = place_ranks(t, n);
  if (opts.policy == progress_policy::smt)
    for (auto& r : j.ranks)
      if (r.whole_core && t.cores()[r.core].pus.size() > 1) {
        r.cpus.resize(1);
        r.whole_core = false;
        r.reason += "; keeps the core's first PU, its progress thread takes the sibling(s)";
      }
  j.progress = place_progress(t, j.ranks, opts);
  if (opts.policy == progress_policy::split_tree)
    j.split = choose_split(n, split_progress_cores(t, j.ranks, free_cores(t, j.ranks)));
  return j;
}

}  // namespace nmad::topology
