#pragma once
// nmad::coll — hierarchical collectives: the group split into levels (the
// hosts of a job, then, inside a host, e.g. its packages or NUMA nodes),
// one leader per part, each phase a flat algorithm of algorithms.hpp over a
// small sub-group. Traffic inside a host stays between the host's ranks (the
// shm driver); only one rank per host talks to other hosts, once per
// collective instead of once per rank pair a flat tree happens to cross.
//
// LEVELS. A hierarchy gives each rank a key per level, outermost first:
// ranks r and q are in the same part at depth d when their keys agree at
// every level < d (depth 0: the whole group). The sub-groups that talk are,
// for each depth d < L (L = number of levels) and each part P at depth d,
// the leaders of P's children; and at depth L the members of each part.
// Leader of a part: the collective's root when the part holds it, else its
// lowest rank (so a part's leader also leads the child part it is in).
//
// ALGORITHMS (every phase skipped when its sub-group has one member):
//   bcast      down: depth 0 .. L, each sub-group from its part's leader
//   reduce     up: depth L .. 0 into each part's leader (commutative ops
//              only: parts need not be rank ranges)
//   allreduce  up to the leaders of the depth-1 parts, allreduce among
//              them, then down (bcast) again
//   barrier    fan-in (1-byte reduce) up, barrier among the depth-1
//              leaders, fan-out (1-byte bcast) down
// Each phase is built by the flat builders (their own algorithm choice for
// the sub-group's size and the bytes) and appended with its own window of
// tag blocks (phase k: blocks [k * kBlocksPerPhase, ...)), identical on every
// member whether it takes part in the phase or not, so messages of
// different phases never match each other.
//
// Buffers follow algorithms.hpp (null sendbuf = in place). The schedules
// are ordinary schedules: blocking (run) or non-blocking (executor).
#include <cstddef>
#include <vector>

#include "mpi_layer/coll/schedule.hpp"

namespace nmad::coll {

class hierarchy {
 public:
  hierarchy() = default;
  // A group of n ranks; keys[l][r]: rank r's key at level l (none: flat).
  // Throws std::invalid_argument unless every level has n keys.
  hierarchy(int n, std::vector<std::vector<int>> keys);

  int size() const { return _n; }
  int levels() const { return static_cast<int>(_keys.size()); }
  // True when some level really splits the group, i.e. there are parts and
  // one of them has more than one rank: only then a hierarchical schedule
  // differs from the flat one.
  bool splits() const;
  // Ranks (ascending) of the part at `depth` (0..levels()) holding `rank`.
  const std::vector<int>& part(int depth, int rank) const {
    return _parts[depth][_part_of[depth][rank]];
  }
  // The children (parts at depth + 1) of the part at `depth` holding `rank`.
  std::vector<const std::vector<int>*> children(int depth, int rank) const;
  int key(int level, int rank) const { return _keys[level][rank]; }

 private:
  std::vector<std::vector<int>> _keys;
  int _n = 0;
  // Per depth 0..levels(): each rank's part, and the parts' members; per
  // depth < levels(): each part's children (indexes at depth + 1). Made
  // once, so building a schedule does not regroup the ranks.
  std::vector<std::vector<int>> _part_of;
  std::vector<std::vector<std::vector<int>>> _parts;
  std::vector<std::vector<std::vector<int>>> _children;
};

// Choosing levels. `candidates` are levels a group might be split along,
// outermost first (e.g. host, package, NUMA node), one key per rank; a
// negative key means the rank lies in no single object of that level (an
// unbound process spans the packages of its node). Keys are nested here: a
// rank's part at candidate level l is its part at l - 1 together with its
// key at l, so equal package numbers on two hosts stay two parts. A
// candidate is kept when every rank has a key at it and it divides some
// part of the levels kept so far into several parts, one of which holds
// more than one rank (a level that only separates single ranks changes no
// schedule). `index`: the kept candidates, in order; `keys`: their nested
// keys, ready for hierarchy(n, keys). Throws std::invalid_argument unless
// every candidate has n keys.
struct chosen_levels {
  std::vector<int> index;
  std::vector<std::vector<int>> keys;
};
chosen_levels choose_levels(int n, const std::vector<std::vector<int>>& candidates);

inline constexpr std::uint32_t kBlocksPerPhase = 4;

schedule build_hier_barrier(const hierarchy& h, int rank);
schedule build_hier_bcast(const hierarchy& h, int rank, void* buf, std::size_t bytes, int root);
// op must be commutative (std::invalid_argument otherwise).
schedule build_hier_reduce(const hierarchy& h, int rank, const void* sendbuf, void* recvbuf, std::size_t count,
                           std::size_t elem_size, reducer& op, int root);
schedule build_hier_allreduce(const hierarchy& h, int rank, const void* sendbuf, void* recvbuf, std::size_t count,
                              std::size_t elem_size, reducer& op);

}  // namespace nmad::coll
