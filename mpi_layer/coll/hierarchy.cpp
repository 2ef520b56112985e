// Hierarchical collectives (see hierarchy.hpp).
#include "mpi_layer/coll/hierarchy.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>

#include "mpi_layer/coll/algorithms.hpp"

namespace nmad::coll {

hierarchy::hierarchy(int n, std::vector<std::vector<int>> keys) : _keys(std::move(keys)), _n(n) {
  if (n < 0) throw std::invalid_argument("coll::hierarchy: negative group size");
  for (const auto& k : _keys)
    if (static_cast<int>(k.size()) != _n)
      throw std::invalid_argument("coll::hierarchy: every level needs one key per rank");
  const int L = levels();
  _part_of.assign(L + 1, std::vector<int>(n, 0));
  _parts.resize(L + 1);
  _children.resize(L);
  if (n > 0) {
    _parts[0].push_back({});
    for (int r = 0; r < n; ++r) _parts[0][0].push_back(r);
  }
  // A part at depth d + 1 is a (part at depth d, key at level d) pair.
  for (int d = 0; d < L; ++d) {
    std::map<std::pair<int, int>, int> index;
    _children[d].resize(_parts[d].size());
    for (int r = 0; r < n; ++r) {  // ascending: members come out sorted
      const int parent = _part_of[d][r];
      const auto [it, fresh] = index.emplace(std::make_pair(parent, _keys[d][r]), static_cast<int>(_parts[d + 1].size()));
      if (fresh) {
        _parts[d + 1].emplace_back();
        _children[d][parent].push_back(it->second);
      }
      _part_of[d + 1][r] = it->second;
      _parts[d + 1][it->second].push_back(r);
    }
  }
}

std::vector<const std::vector<int>*> hierarchy::children(int depth, int rank) const {
  std::vector<const std::vector<int>*> out;
  for (int c : _children[depth][_part_of[depth][rank]]) out.push_back(&_parts[depth + 1][c]);
  return out;
}

bool hierarchy::splits() const {
  for (int d = 0; d < levels(); ++d)
    for (std::size_t p = 0; p < _parts[d].size(); ++p)
      if (_children[d][p].size() > 1)
        for (int c : _children[d][p])
          if (_parts[d + 1][c].size() > 1) return true;
  return false;
}

chosen_levels choose_levels(int n, const std::vector<std::vector<int>>& candidates) {
  chosen_levels out;
  for (const auto& c : candidates)
    if (static_cast<int>(c.size()) != n)
      throw std::invalid_argument("coll::choose_levels: every level needs one key per rank");
  std::vector<int> nested(n, 0), kept(n, 0);  // parts over all usable candidates / over the kept ones
  for (std::size_t l = 0; l < candidates.size(); ++l) {
    const auto& key = candidates[l];
    if (std::any_of(key.begin(), key.end(), [](int k) { return k < 0; })) continue;
    std::map<std::pair<int, int>, int> id;
    std::vector<int> next(n);
    for (int r = 0; r < n; ++r) next[r] = id.emplace(std::make_pair(nested[r], key[r]), static_cast<int>(id.size())).first->second;
    // Per kept part: its distinct new parts, and whether one has two ranks.
    std::map<int, std::map<int, int>> sizes;  // kept part -> new part -> ranks
    for (int r = 0; r < n; ++r) ++sizes[kept[r]][next[r]];
    bool divides = false;
    for (const auto& [part, children] : sizes)
      if (children.size() > 1)
        for (const auto& [child, count] : children) divides = divides || count > 1;
    nested = next;
    if (!divides) continue;
    out.index.push_back(static_cast<int>(l));
    out.keys.push_back(next);
    kept = next;
  }
  return out;
}

namespace {

using byte = std::byte;

bool holds(const std::vector<int>& v, int r) { return std::binary_search(v.begin(), v.end(), r); }
int index_of(const std::vector<int>& v, int r) {
  return static_cast<int>(std::lower_bound(v.begin(), v.end(), r) - v.begin());
}
// A part's leader: the root when the part holds it, else its lowest rank.
int leader(const std::vector<int>& part, int root) { return root >= 0 && holds(part, root) ? root : part.front(); }

// The leaders (ascending) of the children of the part at depth d
// (d < levels) holding `rank`.
std::vector<int> child_leaders(const hierarchy& h, int d, int rank, int root) {
  std::vector<int> out;
  for (const std::vector<int>* child : h.children(d, rank)) out.push_back(leader(*child, root));
  std::sort(out.begin(), out.end());
  return out;
}

// The sub-group this rank talks in at depth d (d == levels: its part's
// members; else its part's child leaders), and that sub-group's leader
// (the part's). Empty when the rank takes no part at that depth.
struct phase_group {
  std::vector<int> members;
  int lead = -1;
};
phase_group group_at(const hierarchy& h, int d, int rank, int root) {
  phase_group g;
  const std::vector<int>& p = h.part(d, rank);
  g.lead = leader(p, root);
  if (d == h.levels()) g.members = p;
  else {
    g.members = child_leaders(h, d, rank, root);
    if (!holds(g.members, rank)) g.members.clear();
  }
  return g;
}

void add_phase(schedule& s, std::uint32_t phase, schedule&& sub, const std::vector<int>& members) {
  if (sub.next_block() > kBlocksPerPhase)
    throw std::length_error("coll::hierarchy: a phase uses more than " + std::to_string(kBlocksPerPhase) +
                            " tag blocks");
  s.skip_to_block(phase * kBlocksPerPhase);
  s.append(std::move(sub), members);
}

void check_rank(const hierarchy& h, int rank, int root, const char* what) {
  if (h.size() < 1 || rank < 0 || rank >= h.size())
    throw std::invalid_argument(std::string("coll::hierarchy ") + what + ": rank " + std::to_string(rank) +
                                " outside a group of " + std::to_string(h.size()));
  if (root >= h.size())
    throw std::invalid_argument(std::string("coll::hierarchy ") + what + ": root " + std::to_string(root) +
                                " outside a group of " + std::to_string(h.size()));
}

// Down phases from `from_depth` to the leaves: each sub-group broadcasts
// buf from its part's leader. Phase numbers from `phase` on.
void add_bcast_down(schedule& s, const hierarchy& h, int rank, void* buf, std::size_t bytes, int root,
                    int from_depth, std::uint32_t phase) {
  for (int d = from_depth; d <= h.levels(); ++d, ++phase) {
    const phase_group g = group_at(h, d, rank, root);
    if (g.members.size() < 2) continue;
    add_phase(s, phase,
              build_bcast(index_of(g.members, rank), static_cast<int>(g.members.size()), buf, bytes,
                          index_of(g.members, g.lead)),
              g.members);
  }
}

// Up phases from the leaves to `to_depth`: each sub-group reduces into its
// part's leader, whose result goes to `out` (a leader's running value
// becomes `out`). Returns this rank's running value afterwards.
const byte* add_reduce_up(schedule& s, const hierarchy& h, int rank, const byte* cur, byte* out, std::size_t count,
                          std::size_t es, reducer& op, int root, int to_depth, std::uint32_t phase) {
  for (int d = h.levels(); d >= to_depth; --d, ++phase) {
    const phase_group g = group_at(h, d, rank, root);
    if (g.members.size() < 2) continue;
    const int i = index_of(g.members, rank), n = static_cast<int>(g.members.size());
    const int ri = index_of(g.members, g.lead);
    if (rank == g.lead) {
      add_phase(s, phase, build_reduce(i, n, cur == out ? nullptr : cur, out, count, es, op, ri), g.members);
      cur = out;
    } else {
      add_phase(s, phase, build_reduce(i, n, cur, nullptr, count, es, op, ri), g.members);
    }
  }
  return cur;
}

// Fan-in/fan-out token: a reducer that combines nothing.
struct token_reducer final : reducer {
  void apply(const void*, void*, std::size_t) override {}
};

}  // namespace

schedule build_hier_bcast(const hierarchy& h, int rank, void* buf, std::size_t bytes, int root) {
  check_rank(h, rank, root, "bcast");
  if (root < 0) throw std::invalid_argument("coll::hierarchy bcast: negative root");
  schedule s;
  if (bytes == 0) return s;
  add_bcast_down(s, h, rank, buf, bytes, root, 0, 0);
  return s;
}

schedule build_hier_reduce(const hierarchy& h, int rank, const void* sendbuf, void* recvbuf, std::size_t count,
                           std::size_t es, reducer& op, int root) {
  check_rank(h, rank, root, "reduce");
  if (root < 0) throw std::invalid_argument("coll::hierarchy reduce: negative root");
  if (!op.commutative())
    throw std::invalid_argument("coll::hierarchy reduce: needs a commutative op (parts need not be rank ranges)");
  schedule s;
  if (count == 0) return s;
  const std::size_t bytes = count * es;
  const byte* input = static_cast<const byte*>(sendbuf ? sendbuf : recvbuf);
  byte* out = rank == root ? static_cast<byte*>(recvbuf) : nullptr;
  if (!out) {
    // Only a leader of some sub-group below the root's needs an accumulator.
    bool leads = false;
    for (int d = 0; d <= h.levels() && !leads; ++d) {
      const auto& p = h.part(d, rank);
      leads = p.size() > 1 && leader(p, root) == rank;
    }
    out = leads ? s.temp(bytes) : nullptr;
  }
  const byte* cur = add_reduce_up(s, h, rank, input, out, count, es, op, root, 0, 0);
  if (rank == root && cur != recvbuf) {
    s.new_round();
    s.copy(cur, recvbuf, bytes);  // every sub-group of the root had one member
  }
  return s;
}

schedule build_hier_allreduce(const hierarchy& h, int rank, const void* sendbuf, void* recvbuf, std::size_t count,
                              std::size_t es, reducer& op) {
  check_rank(h, rank, 0, "allreduce");
  if (!op.commutative())
    throw std::invalid_argument("coll::hierarchy allreduce: needs a commutative op (parts need not be rank ranges)");
  schedule s;
  if (count == 0) return s;
  const std::size_t bytes = count * es;
  const int L = h.levels();
  byte* result = static_cast<byte*>(recvbuf);
  const byte* cur = static_cast<const byte*>(sendbuf ? sendbuf : recvbuf);
  // Up to the leaders of the depth-1 parts (phases 0 .. L-1).
  cur = add_reduce_up(s, h, rank, cur, result, count, es, op, -1, 1, 0);
  // Among them (phase L).
  const phase_group top = group_at(h, 0, rank, -1);
  if (top.members.size() >= 2) {
    add_phase(s, static_cast<std::uint32_t>(L),
              build_allreduce(index_of(top.members, rank), static_cast<int>(top.members.size()),
                              cur == result ? nullptr : cur, result, count, es, op),
              top.members);
    cur = result;
  }
  if (cur != result && (L == 0 || leader(h.part(1, rank), -1) == rank)) {
    s.new_round();
    s.copy(cur, result, bytes);
  }
  // And down again (phases L+1 .. 2L).
  add_bcast_down(s, h, rank, result, bytes, -1, 1, static_cast<std::uint32_t>(L) + 1);
  return s;
}

schedule build_hier_barrier(const hierarchy& h, int rank) {
  check_rank(h, rank, 0, "barrier");
  static token_reducer token;
  schedule s;
  const int L = h.levels();
  byte* tok = s.temp(1);
  add_reduce_up(s, h, rank, tok, tok, 1, 1, token, -1, 1, 0);
  const phase_group top = group_at(h, 0, rank, -1);
  if (top.members.size() >= 2)
    add_phase(s, static_cast<std::uint32_t>(L),
              build_barrier(index_of(top.members, rank), static_cast<int>(top.members.size())), top.members);
  add_bcast_down(s, h, rank, tok, 1, -1, 1, static_cast<std::uint32_t>(L) + 1);
  return s;
}

}  // namespace nmad::coll
