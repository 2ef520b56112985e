#include "api/nmad/services/hw_levels.hpp"

#include <algorithm>
#include <cctype>
#include <set>

namespace nmad::topology {

const std::array<hw_level, hw_level_count>& all_hw_levels() {
  static const std::array<hw_level, hw_level_count> levels = {
      hw_level::machine, hw_level::package, hw_level::numa, hw_level::l3,
      hw_level::l2,      hw_level::l1,      hw_level::core, hw_level::pu};
  return levels;
}

std::string_view hw_level_name(hw_level l) {
  switch (l) {
    case hw_level::machine: return "Machine";
    case hw_level::package: return "Package";
    case hw_level::numa: return "NUMANode";
    case hw_level::l3: return "L3Cache";
    case hw_level::l2: return "L2Cache";
    case hw_level::l1: return "L1Cache";
    case hw_level::core: return "Core";
    case hw_level::pu: return "PU";
  }
  return "?";
}

std::optional<hw_level> parse_hw_level(std::string_view name) {
  std::string n;
  for (char c : name) n += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (n.starts_with("hwloc://")) n.erase(0, 8);
  struct alias {
    const char* text;
    hw_level level;
  };
  static const alias aliases[] = {
      {"machine", hw_level::machine}, {"node", hw_level::machine},     {"host", hw_level::machine},
      {"package", hw_level::package}, {"socket", hw_level::package},   {"numanode", hw_level::numa},
      {"numa", hw_level::numa},       {"l3cache", hw_level::l3},       {"l3", hw_level::l3},
      {"l2cache", hw_level::l2},      {"l2", hw_level::l2},            {"l1cache", hw_level::l1},
      {"l1", hw_level::l1},           {"l1d", hw_level::l1},           {"core", hw_level::core},
      {"pu", hw_level::pu},           {"hwthread", hw_level::pu},      {"thread", hw_level::pu},
  };
  for (const auto& a : aliases)
    if (n == a.text) return a.level;
  return std::nullopt;
}

namespace {

// The label of PU p at level l (-1: none reported, for caches).
int label_of(const pu_info& p, hw_level l) {
  switch (l) {
    case hw_level::machine: return 0;
    case hw_level::package: return p.package;
    case hw_level::numa: return p.numa;
    case hw_level::l3: return p.l3;
    case hw_level::l2: return p.l2;
    case hw_level::l1: return p.l1;
    case hw_level::core: return p.core;
    case hw_level::pu: return p.os_index;
  }
  return -1;
}

}  // namespace

std::vector<hw_level> hw_level_order(const machine_topology& topo) {
  std::vector<std::pair<std::size_t, hw_level>> counted;
  for (hw_level l : all_hw_levels()) {
    std::set<int> objects;
    for (const auto& p : topo.pus())
      if (int o = label_of(p, l); o >= 0) objects.insert(o);
    if (!objects.empty()) counted.emplace_back(objects.size(), l);
  }
  std::stable_sort(counted.begin(), counted.end(), [](auto& a, auto& b) { return a.first < b.first; });
  std::vector<hw_level> order;
  for (auto& [n, l] : counted) order.push_back(l);
  return order;
}

hw_location locate(const machine_topology& topo, const std::vector<int>& cpus) {
  const std::set<int> bound(cpus.begin(), cpus.end());
  std::vector<const pu_info*> mine;
  for (const auto& p : topo.pus())
    if (bound.count(p.os_index)) mine.push_back(&p);
  if (mine.empty())  // unbound, or bound outside this topology
    for (const auto& p : topo.pus()) mine.push_back(&p);
  hw_location where{};
  for (hw_level l : all_hw_levels()) {
    const auto i = static_cast<std::size_t>(l);
    // A level is absent when no PU of the machine reports an object there.
    const bool present = std::any_of(topo.pus().begin(), topo.pus().end(),
                                     [&](const pu_info& p) { return label_of(p, l) >= 0; });
    if (!present) {
      where[i] = hw_absent;
      continue;
    }
    const int first = label_of(*mine.front(), l);
    const bool one = first >= 0 && std::all_of(mine.begin(), mine.end(),
                                               [&](const pu_info* p) { return label_of(*p, l) == first; });
    where[i] = one ? first : hw_spans;
  }
  return where;
}

namespace {

bool same_group(const hw_member& a, const hw_member& b, hw_level l) {
  const auto i = static_cast<std::size_t>(l);
  return a.host == b.host && a.where[i] == b.where[i];
}

bool in_a_group(const hw_member& m, hw_level l) { return m.takes_part && m.where[static_cast<std::size_t>(l)] >= 0; }

}  // namespace

int hw_color(const std::vector<hw_member>& members, int me, hw_level l) {
  const hw_member& m = members.at(static_cast<std::size_t>(me));
  if (!in_a_group(m, l)) return -1;
  for (int r = 0; r < me; ++r)
    if (in_a_group(members[r], l) && same_group(members[r], m, l)) return r;
  return me;
}

bool hw_level_divides(const std::vector<hw_member>& members, hw_level l) {
  const int n = static_cast<int>(members.size());
  int taking_part = 0;
  for (const auto& m : members) taking_part += m.takes_part ? 1 : 0;
  bool any = false;
  std::vector<int> group_size(members.size(), 0);
  for (int r = 0; r < n; ++r) {
    const int c = hw_color(members, r, l);
    if (c < 0) continue;
    any = true;
    if (++group_size[c] == taking_part) return false;  // one group holds everyone
  }
  return any;
}

std::optional<hw_level> hw_unguided_level(const std::vector<hw_member>& members, const std::vector<hw_level>& order) {
  for (hw_level l : order)
    if (hw_level_divides(members, l)) return l;
  return std::nullopt;
}

hw_siblings hw_group_siblings(const std::vector<hw_member>& members, int me, hw_level l) {
  hw_siblings s;
  const int mine = hw_color(members, me, l);
  for (int r = 0; r < static_cast<int>(members.size()); ++r) {
    if (hw_color(members, r, l) != r) continue;  // not the first member of a group
    if (r == mine) s.index = s.count;
    ++s.count;
  }
  return s;
}

std::optional<hw_level> hw_common_level(const std::vector<hw_member>& members, const std::vector<int>& who,
                                        const std::vector<hw_level>& order) {
  if (who.empty()) return std::nullopt;
  const hw_member& first = members.at(static_cast<std::size_t>(who.front()));
  for (int w : who)
    if (members.at(static_cast<std::size_t>(w)).host != first.host) return std::nullopt;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const auto i = static_cast<std::size_t>(*it);
    const int obj = first.where[i];
    if (obj < 0) continue;
    if (std::all_of(who.begin(), who.end(), [&](int w) { return members[static_cast<std::size_t>(w)].where[i] == obj; }))
      return *it;
  }
  return hw_level::machine;  // same host: the machine always holds them
}

}  // namespace nmad::topology
