// Collective algorithms as schedules. See algorithms.hpp.
//
// Conventions below: `vr` is a rank relative to a root, (rank - root) mod n;
// abs(vr) = (vr + root) mod n. Every builder allocates its tag blocks
// unconditionally (same sequence on every member), and, within one phase,
// two messages between the same pair in the same round never share a tag.
#include "mpi_layer/coll/algorithms.hpp"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/common/config.hpp"

namespace nmad::coll {

using byte = std::byte;

std::string_view to_string(collective c) {
  switch (c) {
    case collective::barrier: return "barrier";
    case collective::bcast: return "bcast";
    case collective::reduce: return "reduce";
    case collective::allreduce: return "allreduce";
    case collective::gather: return "gather";
    case collective::gatherv: return "gatherv";
    case collective::scatter: return "scatter";
    case collective::scatterv: return "scatterv";
    case collective::allgather: return "allgather";
    case collective::allgatherv: return "allgatherv";
    case collective::alltoall: return "alltoall";
    case collective::alltoallv: return "alltoallv";
    case collective::reduce_scatter: return "reduce_scatter";
    case collective::reduce_scatter_block: return "reduce_scatter_block";
    case collective::scan: return "scan";
    case collective::exscan: return "exscan";
  }
  return "?";
}

std::string_view to_string(algorithm a) {
  switch (a) {
    case algorithm::automatic: return "automatic";
    case algorithm::dissemination: return "dissemination";
    case algorithm::binomial: return "binomial";
    case algorithm::scatter_allgather: return "scatter_allgather";
    case algorithm::chain: return "chain";
    case algorithm::recursive_doubling: return "recursive_doubling";
    case algorithm::rabenseifner: return "rabenseifner";
    case algorithm::linear: return "linear";
    case algorithm::bruck: return "bruck";
    case algorithm::ring: return "ring";
    case algorithm::pairwise: return "pairwise";
    case algorithm::reduce_scatterv: return "reduce_scatterv";
  }
  return "?";
}

// ---- selection -------------------------------------------------------------

namespace {
// Through the configuration reader (the knobs, their defaults and ranges
// are in core/common/config_knobs.cpp; MPI_Init has checked them).
void env_size(const char* name, std::size_t& v) { v = static_cast<std::size_t>(nmad::config::size(name)); }
void env_count(const char* name, std::size_t& v) { v = static_cast<std::size_t>(nmad::config::integer(name)); }
bool is_pow2(int n) { return n > 0 && (n & (n - 1)) == 0; }
}  // namespace

tunables tunables::from_env() {
  tunables t;
  env_size("NMAD_COLL_BCAST_SMALL", t.bcast_small);
  env_size("NMAD_COLL_BCAST_LARGE", t.bcast_large);
  env_count("NMAD_COLL_BCAST_MIN_PROCS", t.bcast_min_procs);
  env_size("NMAD_COLL_CHAIN_SEGMENT", t.chain_segment);
  env_size("NMAD_COLL_ALLREDUCE_SMALL", t.allreduce_small);
  env_size("NMAD_COLL_ALLREDUCE_PAIR_LARGE", t.allreduce_pair_large);
  env_size("NMAD_COLL_GATHER_LARGE", t.gather_large);
  env_size("NMAD_COLL_ALLGATHER_SMALL", t.allgather_small);
  env_size("NMAD_COLL_ALLTOALL_SMALL", t.alltoall_small);
  env_size("NMAD_COLL_ALLTOALL_BRUCK", t.alltoall_bruck);
  env_count("NMAD_COLL_ALLTOALL_BRUCK_PROCS", t.alltoall_bruck_procs);
  env_size("NMAD_COLL_REDUCE_SCATTER_LARGE", t.reduce_scatter_large);
  env_size("NMAD_COLL_SCAN_LARGE", t.scan_large);
  if (t.chain_segment == 0) t.chain_segment = 64 * 1024;
  return t;
}

const tunables& default_tunables() {
  static const tunables t = tunables::from_env();
  return t;
}

algorithm select_algorithm(collective c, int n, std::size_t bytes, bool commutative, const tunables& t) {
  switch (c) {
    // 3 to 8 ranks: two hops either way, and linear needs each rank
    // scheduled twice at most; 2 ranks: one exchange beats two hops.
    case collective::barrier: return n >= 3 && n <= kBarrierLinearMax ? algorithm::linear : algorithm::dissemination;
    case collective::bcast:
      if (n <= 2 || bytes < t.bcast_small) return algorithm::binomial;
      if (static_cast<std::size_t>(n) < t.bcast_min_procs && bytes < t.bcast_large) return algorithm::binomial;
      return bytes < t.bcast_large ? algorithm::scatter_allgather : algorithm::chain;
    case collective::reduce: return algorithm::binomial;
    case collective::allreduce:
      // Two processes: one exchange of everything beats halving + doubling
      // until the reduction of the whole vector costs more than a second
      // round trip (measured crossover on shm: about 512 KiB).
      if (!commutative || n < 2 || bytes < t.allreduce_small || (n == 2 && bytes < t.allreduce_pair_large))
        return algorithm::recursive_doubling;
      return algorithm::rabenseifner;
    case collective::gather:
    case collective::scatter: return bytes < t.gather_large ? algorithm::binomial : algorithm::linear;
    case collective::gatherv:
    case collective::scatterv: return algorithm::linear;
    case collective::allgather:
      if (bytes < t.allgather_small) return is_pow2(n) ? algorithm::recursive_doubling : algorithm::bruck;
      return algorithm::ring;
    case collective::allgatherv: return algorithm::ring;
    case collective::alltoall:
      if (bytes <= t.alltoall_bruck && static_cast<std::size_t>(n) >= t.alltoall_bruck_procs) return algorithm::bruck;
      return bytes <= t.alltoall_small ? algorithm::linear : algorithm::pairwise;
    case collective::alltoallv: return bytes <= t.alltoall_small ? algorithm::linear : algorithm::pairwise;
    case collective::reduce_scatter:
    case collective::reduce_scatter_block:
      return (commutative && bytes >= t.reduce_scatter_large) ? algorithm::pairwise : algorithm::reduce_scatterv;
    case collective::scan:
    case collective::exscan: return bytes >= t.scan_large ? algorithm::chain : algorithm::recursive_doubling;
  }
  throw std::invalid_argument("coll::select_algorithm: unknown collective");
}

// ---- helpers ---------------------------------------------------------------

namespace {

using tag = std::uint32_t;
inline tag T(std::uint32_t block, std::size_t i) { return schedule::make_tag(block, i); }

void check_group(int rank, int n, const char* what) {
  if (n <= 0 || rank < 0 || rank >= n)
    throw std::invalid_argument(std::string("coll::") + what + ": rank " + std::to_string(rank) +
                                " outside a group of " + std::to_string(n));
}
void check_root(int root, int n, const char* what) {
  if (root < 0 || root >= n)
    throw std::invalid_argument(std::string("coll::") + what + ": root " + std::to_string(root) +
                                " outside a group of " + std::to_string(n));
}
void check_span(std::span<const std::size_t> s, int n, const char* what, const char* name) {
  if (s.size() < static_cast<std::size_t>(n))
    throw std::invalid_argument(std::string("coll::") + what + ": " + name + " has " + std::to_string(s.size()) +
                                " entries for a group of " + std::to_string(n));
}
void unsupported(const char* what, algorithm a) {
  throw std::invalid_argument(std::string("coll::") + what + ": algorithm " + std::string(to_string(a)) +
                              " does not apply");
}

int lowbit_mask(int vr, int n) {  // lowest set bit of vr; for vr == 0: smallest 2^k >= n
  int mask = 1;
  while (mask < n) {
    if (vr & mask) return mask;
    mask <<= 1;
  }
  return mask;
}
int largest_pow2_le(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}
inline byte* B(void* p) { return static_cast<byte*>(p); }
inline const byte* CB(const void* p) { return static_cast<const byte*>(p); }

// --- barrier: dissemination ---
void add_barrier(schedule& s, int rank, int n) {
  const auto blk = s.tag_block();
  std::size_t i = 0;
  for (int k = 1; k < n; k <<= 1, ++i) {
    s.new_round();
    s.send((rank + k) % n, T(blk, i), nullptr, 0);
    s.recv((rank - k + n) % n, T(blk, i), nullptr, 0);
  }
}

// --- barrier: linear (fan-in to rank 0, then its release) ---
// Each rank needs the CPU twice at most; dissemination needs every rank in
// each of its rounds, each waiting for another rank's previous one (what
// costs when ranks share cores). Rank 0 leaves first.
void add_barrier_linear(schedule& s, int rank, int n) {
  const auto blk = s.tag_block();
  s.new_round();
  if (rank != 0) {
    s.send(0, T(blk, 0), nullptr, 0);
    s.recv(0, T(blk, 1), nullptr, 0);
    return;
  }
  for (int i = 1; i < n; ++i) s.recv(i, T(blk, 0), nullptr, 0);
  s.new_round();
  for (int i = 1; i < n; ++i) s.send(i, T(blk, 1), nullptr, 0);
}

// --- bcast ---
void add_bcast_binomial(schedule& s, int rank, int n, byte* buf, std::size_t bytes, int root) {
  const auto blk = s.tag_block();
  const int vr = (rank - root + n) % n;
  const int mask = lowbit_mask(vr, n);
  if (vr != 0) {
    s.new_round();
    s.recv((vr - mask + root) % n, T(blk, 0), buf, bytes);
  }
  s.new_round();
  for (int m = mask >> 1; m > 0; m >>= 1)
    if (vr + m < n) s.send((vr + m + root) % n, T(blk, 0), buf, bytes);
}

void add_bcast_scatter_allgather(schedule& s, int rank, int n, byte* buf, std::size_t bytes, int root) {
  const auto blk_scatter = s.tag_block();
  const auto blk_ring = s.tag_block();
  const int vr = (rank - root + n) % n;
  const std::size_t chunk = (bytes + n - 1) / n;
  auto range = [&](int j0, int j1) {  // byte range of relative blocks [j0, j1)
    const std::size_t lo = std::min(static_cast<std::size_t>(j0) * chunk, bytes);
    const std::size_t hi = std::min(static_cast<std::size_t>(j1) * chunk, bytes);
    return std::pair<std::size_t, std::size_t>{lo, hi - lo};
  };
  // Binomial scatter: vr receives blocks [vr, vr + subtree).
  const int mask = lowbit_mask(vr, n);
  if (vr != 0) {
    auto [off, len] = range(vr, std::min(vr + mask, n));
    s.new_round();
    s.recv((vr - mask + root) % n, T(blk_scatter, 0), buf + off, len);
  }
  s.new_round();
  for (int m = mask >> 1; m > 0; m >>= 1) {
    const int c = vr + m;
    if (c >= n) continue;
    auto [off, len] = range(c, std::min(c + m, n));
    s.send((c + root) % n, T(blk_scatter, 0), buf + off, len);
  }
  // Ring allgather of the blocks (relative numbering).
  const int right = (vr + 1) % n, left = (vr - 1 + n) % n;
  for (int i = 0; i < n - 1; ++i) {
    const int sb = ((vr - i) % n + n) % n, rb = ((vr - i - 1) % n + n) % n;
    auto [so, sl] = range(sb, sb + 1);
    auto [ro, rl] = range(rb, rb + 1);
    s.new_round();
    s.send((right + root) % n, T(blk_ring, i), buf + so, sl);
    s.recv((left + root) % n, T(blk_ring, i), buf + ro, rl);
  }
}

void add_bcast_chain(schedule& s, int rank, int n, byte* buf, std::size_t bytes, int root, std::size_t seg) {
  const auto blk = s.tag_block();
  const int vr = (rank - root + n) % n;
  const std::size_t nseg = std::max<std::size_t>(1, (bytes + seg - 1) / seg);
  auto seg_at = [&](std::size_t k) {
    const std::size_t lo = std::min(k * seg, bytes);
    return std::pair<std::size_t, std::size_t>{lo, std::min(bytes, lo + seg) - lo};
  };
  const bool has_prev = vr > 0, has_next = vr + 1 < n;
  const int prev = (vr - 1 + root) % n, next = (vr + 1 + root) % n;
  for (std::size_t k = 0; k <= nseg; ++k) {
    s.new_round();
    if (k < nseg && has_prev) {
      auto [o, l] = seg_at(k);
      s.recv(prev, T(blk, k), buf + o, l);
    }
    // The root has every segment: it sends segment k in round k; others
    // forward segment k-1 while receiving segment k.
    const std::size_t fwd = has_prev ? k - 1 : k;
    if (has_next && (has_prev ? k >= 1 : k < nseg)) {
      auto [o, l] = seg_at(fwd);
      s.send(next, T(blk, fwd), buf + o, l);
    }
  }
}

// --- reduce: binomial, operands combined in rank order ---
// input: this rank's contribution; result: where the root wants it.
void add_reduce_binomial(schedule& s, int rank, int n, const byte* input, byte* result, std::size_t count,
                         std::size_t es, reducer& op, int root) {
  const auto blk = s.tag_block();
  const std::size_t bytes = count * es;
  // Non-commutative: tree over actual ranks rooted at 0 (each subtree is a
  // contiguous rank range), then 0 forwards the result to the root.
  const int tree_root = op.commutative() ? root : 0;
  const int vr = (rank - tree_root + n) % n;
  const byte* acc = input;
  byte* bufs[2] = {nullptr, nullptr};
  int next_buf = 0;
  for (int mask = 1; mask < n; mask <<= 1) {
    if (vr & mask) {
      s.new_round();
      s.send((vr - mask + tree_root) % n, T(blk, 0), acc, bytes);
      break;
    }
    const int child = vr + mask;
    if (child >= n) continue;
    if (!bufs[next_buf]) bufs[next_buf] = s.temp(bytes);
    byte* fresh = bufs[next_buf];
    next_buf ^= 1;
    s.new_round();
    s.recv((child + tree_root) % n, T(blk, 0), fresh, bytes);
    s.reduce(op, acc, fresh, count);  // fresh = acc (lower ranks) op child's
    acc = fresh;
  }
  if (rank == tree_root) {
    s.new_round();
    if (tree_root == root) s.copy(acc, result, bytes);
    else s.send(root, T(blk, 1), acc, bytes);
  } else if (rank == root) {
    s.new_round();
    s.recv(tree_root, T(blk, 1), result, bytes);
  }
}

// --- allreduce ---
// The non-power-of-two fold: of the first 2*rem ranks, even ones hand their
// data to the next (odd) rank and wait for the result; new rank of a
// survivor: odd r < 2*rem -> r/2, r >= 2*rem -> r - rem. New-rank order is
// rank order, so every group combined below is a contiguous rank range.
struct fold_info {
  int p2, rem, nr;  // nr = -1: folded away
  int old_of(int new_rank) const { return new_rank < rem ? 2 * new_rank + 1 : new_rank + rem; }
};
fold_info fold_plan(int rank, int n) {
  fold_info f;
  f.p2 = largest_pow2_le(n);
  f.rem = n - f.p2;
  if (rank < 2 * f.rem) f.nr = (rank % 2) ? rank / 2 : -1;
  else f.nr = rank - f.rem;
  return f;
}

// Non-power-of-two fold: ranks 2i (i < rem) hand their vector to 2i+1 and
// sit out; their partner combines it with its own (lower rank's operand
// first) into `out`. Returns the running value of this rank afterwards.
const byte* add_fold_in(schedule& s, int rank, const fold_info& f, std::uint32_t blk, const byte* cur, byte* tmp,
                        byte* out, std::size_t bytes, std::size_t count, reducer& op) {
  if (rank >= 2 * f.rem) return cur;
  s.new_round();
  if (f.nr < 0) {
    s.send(rank + 1, T(blk, 0), cur, bytes);
    return cur;
  }
  s.recv(rank - 1, T(blk, 0), tmp, bytes);
  s.reduce_into(op, tmp, cur, out, count, bytes);
  return out;
}
// ...and the result goes back to the ranks that sat out.
void add_unfold(schedule& s, int rank, const fold_info& f, std::uint32_t blk, const byte* acc, byte* recvbuf,
                std::size_t bytes) {
  if (rank >= 2 * f.rem) return;
  s.new_round();
  if (f.nr < 0) s.recv(rank + 1, T(blk, 0), recvbuf, bytes);
  else s.send(rank - 1, T(blk, 0), acc, bytes);
}

// Recursive doubling. The running value starts as the input itself (no
// copy into recvbuf first) and each round writes its result with
// reduce_into() into a buffer the partner has not just read: recvbuf, or a
// spare when the value being sent is recvbuf (the rounds then alternate
// between the two). Writing over cache lines the partner's core has just
// read costs an invalidation per line: on this kind of machine reducing
// 512 KiB into the buffer just sent took 4-5x as long as into a private one.
void add_allreduce_rd(schedule& s, int rank, int n, const byte* input, byte* recvbuf, std::size_t count,
                      std::size_t es, reducer& op) {
  const auto blk = s.tag_block();
  const auto blk_unfold = s.tag_block();
  const std::size_t bytes = count * es;
  const byte* cur = input;
  byte* tmp = s.temp(bytes);  // the partner's operand
  byte* spare = nullptr;
  // Where a round whose partner read `cur` (sent) writes its result.
  auto out_for = [&](bool sent, bool last) -> byte* {
    if (cur != recvbuf || !sent || last) return recvbuf;
    if (!spare) spare = s.temp(bytes);
    return spare;
  };
  const fold_info f = fold_plan(rank, n);
  cur = add_fold_in(s, rank, f, blk, cur, tmp, out_for(false, false), bytes, count, op);
  if (f.nr >= 0) {
    std::size_t i = 1;
    for (int mask = 1; mask < f.p2; mask <<= 1, ++i) {
      const int pnr = f.nr ^ mask, partner = f.old_of(pnr);
      s.new_round();
      s.send(partner, T(blk, i), cur, bytes);
      s.recv(partner, T(blk, i), tmp, bytes);
      byte* out = out_for(true, (mask << 1) >= f.p2);
      if (pnr < f.nr) s.reduce_into(op, tmp, cur, out, count, bytes);  // lower group's operand first
      else s.reduce_into(op, cur, tmp, out, count, bytes);
      cur = out;
    }
  }
  add_unfold(s, rank, f, blk_unfold, cur, recvbuf, bytes);
  if (f.nr >= 0) {
    s.new_round();
    s.copy(cur, recvbuf, bytes);  // skipped when the last round wrote recvbuf
  }
}

// Rabenseifner: reduce-scatter by recursive halving, then allgather by
// recursive doubling. The first reduction reads the input directly and
// writes the kept half of recvbuf (no copy of the whole input first); the
// half a rank sends is never the half it then writes.
void add_allreduce_rabenseifner(schedule& s, int rank, int n, const byte* input, byte* recvbuf,
                                std::size_t count, std::size_t es, reducer& op) {
  const auto blk = s.tag_block();
  const auto blk_unfold = s.tag_block();
  const std::size_t bytes = count * es;
  byte* tmp = s.temp(bytes);
  const fold_info f = fold_plan(rank, n);
  const byte* cur = add_fold_in(s, rank, f, blk, input, tmp, recvbuf, bytes, count, op);
  if (f.nr >= 0) {
    std::size_t i = 1;
    std::size_t lo = 0, hi = count;
    struct halving {
      std::size_t lo, mid, hi;
      bool kept_lower;
    };
    std::vector<halving> hist;
    // Reduce-scatter by recursive halving.
    for (int mask = f.p2 / 2; mask > 0; mask >>= 1, ++i) {
      const int pnr = f.nr ^ mask, partner = f.old_of(pnr);
      const std::size_t mid = lo + (hi - lo) / 2;
      const bool lower = f.nr < pnr;
      const std::size_t klo = lower ? lo : mid, khi = lower ? mid : hi;
      const std::size_t slo = lower ? mid : lo, shi = lower ? hi : mid;
      s.new_round();
      s.send(partner, T(blk, i), cur + slo * es, (shi - slo) * es);
      s.recv(partner, T(blk, i), tmp + klo * es, (khi - klo) * es);
      const std::size_t kb = (khi - klo) * es;
      if (lower) s.reduce_into(op, cur + klo * es, tmp + klo * es, recvbuf + klo * es, khi - klo, kb);
      else s.reduce_into(op, tmp + klo * es, cur + klo * es, recvbuf + klo * es, khi - klo, kb);
      cur = recvbuf;  // from now on the kept part lives in recvbuf
      hist.push_back({lo, mid, hi, lower});
      lo = klo;
      hi = khi;
    }
    // Allgather by recursive doubling, replaying the halving backwards: send
    // the (reduced) part this rank kept, receive the partner's.
    for (int mask = 1; mask < f.p2; mask <<= 1, ++i) {
      const int pnr = f.nr ^ mask, partner = f.old_of(pnr);
      const halving h = hist.back();
      hist.pop_back();
      const std::size_t olo = h.kept_lower ? h.mid : h.lo, ohi = h.kept_lower ? h.hi : h.mid;
      s.new_round();
      s.send(partner, T(blk, i), recvbuf + lo * es, (hi - lo) * es);
      s.recv(partner, T(blk, i), recvbuf + olo * es, (ohi - olo) * es);
      lo = h.lo;
      hi = h.hi;
    }
  }
  if (f.nr >= 0 && f.p2 == 1) {  // alone: the result is the input
    s.new_round();
    s.copy(cur, recvbuf, bytes);
  }
  add_unfold(s, rank, f, blk_unfold, recvbuf, recvbuf, bytes);
}

// --- gather / scatter ---
void add_gather_binomial(schedule& s, int rank, int n, const byte* own, byte* recvbuf, std::size_t blk_bytes,
                         int root) {
  const auto blk = s.tag_block();
  const int vr = (rank - root + n) % n;
  const int mask = lowbit_mask(vr, n);
  const int sub = vr == 0 ? n : std::min(mask, n - vr);
  byte* tmp = nullptr;
  if (rank == root && root == 0) tmp = recvbuf;
  else if (sub > 1 || rank == root) tmp = s.temp(static_cast<std::size_t>(sub) * blk_bytes);
  if (tmp) {
    s.new_round();
    s.copy(own, tmp, blk_bytes);
  }
  s.new_round();
  for (int m = 1; m < mask && m < n; m <<= 1) {
    const int c = vr + m;
    if (c >= n) break;
    const int cnt = std::min(m, n - c);
    s.recv((c + root) % n, T(blk, 0), tmp + static_cast<std::size_t>(m) * blk_bytes,
           static_cast<std::size_t>(cnt) * blk_bytes);
  }
  if (vr != 0) {
    s.new_round();
    s.send((vr - mask + root) % n, T(blk, 0), tmp ? tmp : own, static_cast<std::size_t>(sub) * blk_bytes);
  } else if (root != 0) {
    // tmp is in relative order: relative block j belongs to rank (j + root) mod n.
    s.new_round();
    s.copy(tmp, recvbuf + static_cast<std::size_t>(root) * blk_bytes, static_cast<std::size_t>(n - root) * blk_bytes);
    s.copy(tmp + static_cast<std::size_t>(n - root) * blk_bytes, recvbuf, static_cast<std::size_t>(root) * blk_bytes);
  }
}

void add_scatter_binomial(schedule& s, int rank, int n, const byte* sendbuf, byte* own, std::size_t blk_bytes,
                          int root) {
  const auto blk = s.tag_block();
  const int vr = (rank - root + n) % n;
  const int mask = lowbit_mask(vr, n);
  const int sub = vr == 0 ? n : std::min(mask, n - vr);
  const byte* src = nullptr;  // this rank's subtree's blocks, relative order
  if (vr == 0) {
    if (root == 0) src = sendbuf;
    else {
      byte* t = s.temp(static_cast<std::size_t>(n) * blk_bytes);
      s.new_round();
      s.copy(sendbuf + static_cast<std::size_t>(root) * blk_bytes, t, static_cast<std::size_t>(n - root) * blk_bytes);
      s.copy(sendbuf, t + static_cast<std::size_t>(n - root) * blk_bytes, static_cast<std::size_t>(root) * blk_bytes);
      src = t;
    }
  } else {
    byte* t = sub > 1 ? s.temp(static_cast<std::size_t>(sub) * blk_bytes) : own;
    s.new_round();
    s.recv((vr - mask + root) % n, T(blk, 0), t, static_cast<std::size_t>(sub) * blk_bytes);
    src = t;
  }
  s.new_round();
  for (int m = mask >> 1; m > 0; m >>= 1) {
    const int c = vr + m;
    if (c >= n) continue;
    const int cnt = std::min(m, n - c);
    s.send((c + root) % n, T(blk, 0), src + static_cast<std::size_t>(m) * blk_bytes,
           static_cast<std::size_t>(cnt) * blk_bytes);
  }
  if (own) s.copy(src, own, blk_bytes);
}

void add_gatherv_linear(schedule& s, int rank, int n, const byte* own, std::size_t send_bytes, byte* recvbuf,
                        std::span<const std::size_t> rb, std::span<const std::size_t> displs, int root) {
  const auto blk = s.tag_block();
  s.new_round();
  if (rank != root) {
    s.send(root, T(blk, 0), own, send_bytes);
    return;
  }
  for (int i = 1; i < n; ++i) {
    const int p = (root + i) % n;
    s.recv(p, T(blk, 0), recvbuf + displs[p], rb[p]);
  }
  if (own) s.copy(own, recvbuf + displs[root], std::min(send_bytes, rb[root]));
}

void add_scatterv_linear(schedule& s, int rank, int n, const byte* sendbuf, std::span<const std::size_t> sb,
                         std::span<const std::size_t> displs, byte* own, std::size_t recv_bytes, int root) {
  const auto blk = s.tag_block();
  s.new_round();
  if (rank != root) {
    s.recv(root, T(blk, 0), own, recv_bytes);
    return;
  }
  for (int i = 1; i < n; ++i) {
    const int p = (root + i) % n;
    s.send(p, T(blk, 0), sendbuf + displs[p], sb[p]);
  }
  if (own) s.copy(sendbuf + displs[root], own, std::min(recv_bytes, sb[root]));
}

// --- allgather ---
void add_allgatherv_ring(schedule& s, int rank, int n, const byte* own, std::size_t send_bytes, byte* recvbuf,
                         std::span<const std::size_t> rb, std::span<const std::size_t> displs) {
  const auto blk = s.tag_block();
  s.new_round();
  if (own) s.copy(own, recvbuf + displs[rank], std::min(send_bytes, rb[rank]));
  const int right = (rank + 1) % n, left = (rank - 1 + n) % n;
  for (int i = 0; i < n - 1; ++i) {
    const int sb = ((rank - i) % n + n) % n, rbk = ((rank - i - 1) % n + n) % n;
    s.new_round();
    s.send(right, T(blk, i), recvbuf + displs[sb], rb[sb]);
    s.recv(left, T(blk, i), recvbuf + displs[rbk], rb[rbk]);
  }
}

void add_allgather_rd(schedule& s, int rank, int n, const byte* own, byte* recvbuf, std::size_t b) {
  const auto blk = s.tag_block();
  s.new_round();
  if (own) s.copy(own, recvbuf + static_cast<std::size_t>(rank) * b, b);
  std::size_t i = 0;
  for (int mask = 1; mask < n; mask <<= 1, ++i) {
    const int partner = rank ^ mask;
    const std::size_t mine = static_cast<std::size_t>(rank / mask * mask), theirs = static_cast<std::size_t>(partner / mask * mask);
    s.new_round();
    s.send(partner, T(blk, i), recvbuf + mine * b, static_cast<std::size_t>(mask) * b);
    s.recv(partner, T(blk, i), recvbuf + theirs * b, static_cast<std::size_t>(mask) * b);
  }
}

void add_allgather_bruck(schedule& s, int rank, int n, const byte* own, byte* recvbuf, std::size_t b) {
  const auto blk = s.tag_block();
  byte* tmp = s.temp(static_cast<std::size_t>(n) * b);
  s.new_round();
  s.copy(own ? own : recvbuf + static_cast<std::size_t>(rank) * b, tmp, b);
  std::size_t i = 0;
  for (int k = 1; k < n; k <<= 1, ++i) {
    const std::size_t cnt = static_cast<std::size_t>(std::min(k, n - k));
    s.new_round();
    s.send((rank - k + n) % n, T(blk, i), tmp, cnt * b);
    s.recv((rank + k) % n, T(blk, i), tmp + static_cast<std::size_t>(k) * b, cnt * b);
  }
  // tmp block j holds rank (rank + j) mod n.
  s.new_round();
  s.copy(tmp, recvbuf + static_cast<std::size_t>(rank) * b, static_cast<std::size_t>(n - rank) * b);
  s.copy(tmp + static_cast<std::size_t>(n - rank) * b, recvbuf, static_cast<std::size_t>(rank) * b);
}

// --- alltoall ---
void add_alltoallv(schedule& s, int rank, int n, const byte* sendbuf, std::span<const std::size_t> sb,
                   std::span<const std::size_t> sd, byte* recvbuf, std::span<const std::size_t> rb,
                   std::span<const std::size_t> rd, bool pairwise) {
  const auto blk = s.tag_block();
  s.new_round();
  for (int i = 1; i < n; ++i) {
    const int to = (rank + i) % n, from = (rank - i + n) % n;
    if (pairwise) s.new_round();
    s.send(to, T(blk, 0), sendbuf + sd[to], sb[to]);
    s.recv(from, T(blk, 0), recvbuf + rd[from], rb[from]);
  }
  s.copy(sendbuf + sd[rank], recvbuf + rd[rank], std::min(sb[rank], rb[rank]));
}

// Bruck: rotate so block j is for rank (rank + j); at step k send every
// block whose index has bit k set to rank + k (packed), receive the same
// positions from rank - k; afterwards block j came from rank - j.
void add_alltoall_bruck(schedule& s, int rank, int n, const byte* sendbuf, byte* recvbuf, std::size_t b) {
  const auto blk = s.tag_block();
  const std::size_t nb = static_cast<std::size_t>(n);
  byte* tmp = s.temp(nb * b);
  std::size_t max_cnt = 0;
  for (int k = 1; k < n; k <<= 1) {
    std::size_t cnt = 0;
    for (int j = 0; j < n; ++j) cnt += (j & k) != 0;
    max_cnt = std::max(max_cnt, cnt);
  }
  byte* pack = s.temp(max_cnt * b);
  byte* unpack = s.temp(max_cnt * b);
  auto pack_for = [&](int k) {  // local steps: gather blocks with bit k into `pack`
    std::size_t c = 0;
    for (int j = 0; j < n; ++j)
      if (j & k) s.copy(tmp + static_cast<std::size_t>(j) * b, pack + (c++) * b, b);
    return c;
  };
  s.new_round();
  for (int j = 0; j < n; ++j) s.copy(sendbuf + static_cast<std::size_t>((rank + j) % n) * b, tmp + static_cast<std::size_t>(j) * b, b);
  std::size_t cnt = pack_for(1);
  std::size_t i = 0;
  for (int k = 1; k < n; k <<= 1, ++i) {
    s.new_round();
    s.send((rank + k) % n, T(blk, i), pack, cnt * b);
    s.recv((rank - k + n) % n, T(blk, i), unpack, cnt * b);
    std::size_t c = 0;
    for (int j = 0; j < n; ++j)
      if (j & k) s.copy(unpack + (c++) * b, tmp + static_cast<std::size_t>(j) * b, b);
    if ((k << 1) < n) cnt = pack_for(k << 1);
  }
  s.new_round();
  for (int p = 0; p < n; ++p) s.copy(tmp + static_cast<std::size_t>((rank - p + n) % n) * b, recvbuf + static_cast<std::size_t>(p) * b, b);
}

// --- reduce_scatter ---
void add_reduce_scatter_pairwise(schedule& s, int rank, int n, const byte* input, byte* recvbuf,
                                 std::span<const std::size_t> counts, std::span<const std::size_t> offs,
                                 std::size_t es, reducer& op) {
  const auto blk = s.tag_block();
  const std::size_t mine = counts[rank];
  byte* tmp = s.temp(mine * es);
  s.new_round();
  s.copy(input + offs[rank] * es, recvbuf, mine * es);
  for (int i = 1; i < n; ++i) {
    const int to = (rank + i) % n, from = (rank - i + n) % n;
    s.new_round();
    s.send(to, T(blk, i), input + offs[to] * es, counts[to] * es);
    s.recv(from, T(blk, i), tmp, mine * es);
    s.reduce(op, tmp, recvbuf, mine);  // commutative only
  }
}

// --- scan / exscan ---
void add_scan_rd(schedule& s, int rank, int n, const byte* input, byte* recvbuf, std::size_t count,
                 std::size_t es, reducer& op, bool exclusive) {
  const auto blk = s.tag_block();
  const std::size_t bytes = count * es;
  byte* tmp = s.temp(bytes);
  byte* acc = recvbuf;  // inclusive partial result, the one sent
  s.new_round();
  if (exclusive) {
    acc = s.temp(bytes);
    s.copy(input, acc, bytes);
  } else {
    s.copy(input, recvbuf, bytes);
  }
  bool first = true;
  std::size_t i = 0;
  for (int mask = 1; mask < n; mask <<= 1, ++i) {
    s.new_round();
    if (rank + mask < n) s.send(rank + mask, T(blk, i), acc, bytes);
    if (rank - mask >= 0) {
      s.recv(rank - mask, T(blk, i), tmp, bytes);
      if (exclusive) {
        if (first) s.copy(tmp, recvbuf, bytes);
        else s.reduce(op, tmp, recvbuf, count);
        first = false;
      }
      s.reduce(op, tmp, acc, count);
    }
  }
}

void add_scan_chain(schedule& s, int rank, int n, const byte* input, byte* recvbuf, std::size_t count,
                    std::size_t es, reducer& op, bool exclusive) {
  const auto blk = s.tag_block();
  const std::size_t bytes = count * es;
  byte* acc;
  s.new_round();
  if (exclusive) {
    acc = s.temp(bytes);
    s.copy(input, acc, bytes);
  } else {
    acc = recvbuf;
    s.copy(input, recvbuf, bytes);
  }
  if (rank > 0) {
    s.new_round();
    if (exclusive) {
      s.recv(rank - 1, T(blk, 0), recvbuf, bytes);  // x0 op ... op x(r-1)
      s.reduce(op, recvbuf, acc, count);
    } else {
      byte* tmp = s.temp(bytes);
      s.recv(rank - 1, T(blk, 0), tmp, bytes);
      s.reduce(op, tmp, acc, count);
    }
  }
  if (rank + 1 < n) {
    s.new_round();
    s.send(rank + 1, T(blk, 0), acc, bytes);
  }
}

// Input of an in-place reduction-type collective: recvbuf.
const byte* input_of(const void* sendbuf, void* recvbuf) { return sendbuf ? CB(sendbuf) : CB(recvbuf); }

algorithm pick(algorithm a, collective c, int n, std::size_t bytes, bool commutative) {
  return a == algorithm::automatic ? select_algorithm(c, n, bytes, commutative, default_tunables()) : a;
}

std::vector<std::size_t> prefix(std::span<const std::size_t> v, int n) {
  std::vector<std::size_t> p(static_cast<std::size_t>(n) + 1, 0);
  for (int i = 0; i < n; ++i) p[i + 1] = p[i] + v[i];
  return p;
}

}  // namespace

// ---- builders ----------------------------------------------------------------

schedule build_barrier(int rank, int n, algorithm a) {
  check_group(rank, n, "barrier");
  a = pick(a, collective::barrier, n, 0, true);
  if (a != algorithm::dissemination && a != algorithm::linear) unsupported("barrier", a);
  schedule s;
  if (n == 1) return s;
  if (a == algorithm::linear) add_barrier_linear(s, rank, n);
  else add_barrier(s, rank, n);
  return s;
}

schedule build_bcast(int rank, int n, void* buf, std::size_t bytes, int root, algorithm a) {
  check_group(rank, n, "bcast");
  check_root(root, n, "bcast");
  a = pick(a, collective::bcast, n, bytes, true);
  if (a != algorithm::binomial && a != algorithm::scatter_allgather && a != algorithm::chain) unsupported("bcast", a);
  schedule s;
  if (n == 1 || bytes == 0) return s;
  switch (a) {
    case algorithm::binomial: add_bcast_binomial(s, rank, n, B(buf), bytes, root); break;
    case algorithm::scatter_allgather: add_bcast_scatter_allgather(s, rank, n, B(buf), bytes, root); break;
    case algorithm::chain: {
      std::size_t seg = default_tunables().chain_segment;
      // Keep the segment count within one phase's tag space.
      const std::size_t max_seg = (std::size_t{1} << schedule::tag_step_bits) - 1;
      if ((bytes + seg - 1) / seg > max_seg) seg = (bytes + max_seg - 1) / max_seg;
      add_bcast_chain(s, rank, n, B(buf), bytes, root, seg);
      break;
    }
    default: unsupported("bcast", a);
  }
  return s;
}

schedule build_reduce(int rank, int n, const void* sendbuf, void* recvbuf, std::size_t count, std::size_t es,
                      reducer& op, int root, algorithm a) {
  check_group(rank, n, "reduce");
  check_root(root, n, "reduce");
  a = pick(a, collective::reduce, n, count * es, op.commutative());
  if (a != algorithm::binomial) unsupported("reduce", a);
  schedule s;
  if (count == 0) return s;
  add_reduce_binomial(s, rank, n, input_of(sendbuf, recvbuf), B(recvbuf), count, es, op, root);
  return s;
}

schedule build_allreduce(int rank, int n, const void* sendbuf, void* recvbuf, std::size_t count, std::size_t es,
                         reducer& op, algorithm a) {
  check_group(rank, n, "allreduce");
  a = pick(a, collective::allreduce, n, count * es, op.commutative());
  if (a != algorithm::recursive_doubling && !(a == algorithm::rabenseifner && op.commutative()))
    unsupported("allreduce", a);
  schedule s;
  if (count == 0) return s;
  const byte* in = input_of(sendbuf, recvbuf);
  if (a == algorithm::recursive_doubling) add_allreduce_rd(s, rank, n, in, B(recvbuf), count, es, op);
  else add_allreduce_rabenseifner(s, rank, n, in, B(recvbuf), count, es, op);
  return s;
}

schedule build_gather(int rank, int n, const void* sendbuf, void* recvbuf, std::size_t b, int root, algorithm a) {
  check_group(rank, n, "gather");
  check_root(root, n, "gather");
  a = pick(a, collective::gather, n, b * n, true);
  if (a != algorithm::binomial && a != algorithm::linear) unsupported("gather", a);
  schedule s;
  if (b == 0) return s;
  const byte* own = sendbuf ? CB(sendbuf) : CB(recvbuf) + static_cast<std::size_t>(rank) * b;
  if (a == algorithm::binomial) add_gather_binomial(s, rank, n, own, B(recvbuf), b, root);
  else if (a == algorithm::linear) {
    std::vector<std::size_t> sizes(n, b), displs(n);
    for (int i = 0; i < n; ++i) displs[i] = static_cast<std::size_t>(i) * b;
    add_gatherv_linear(s, rank, n, sendbuf ? CB(sendbuf) : nullptr, b, B(recvbuf), sizes, displs, root);
  } else unsupported("gather", a);
  return s;
}

schedule build_gatherv(int rank, int n, const void* sendbuf, std::size_t send_bytes, void* recvbuf,
                       std::span<const std::size_t> rb, std::span<const std::size_t> displs, int root) {
  check_group(rank, n, "gatherv");
  check_root(root, n, "gatherv");
  schedule s;
  if (rank == root) {
    check_span(rb, n, "gatherv", "recv_bytes");
    check_span(displs, n, "gatherv", "displs");
  }
  add_gatherv_linear(s, rank, n, CB(sendbuf), send_bytes, B(recvbuf), rb, displs, root);
  return s;
}

schedule build_scatter(int rank, int n, const void* sendbuf, void* recvbuf, std::size_t b, int root, algorithm a) {
  check_group(rank, n, "scatter");
  check_root(root, n, "scatter");
  a = pick(a, collective::scatter, n, b * n, true);
  if (a != algorithm::binomial && a != algorithm::linear) unsupported("scatter", a);
  schedule s;
  if (b == 0) return s;
  if (a == algorithm::binomial) add_scatter_binomial(s, rank, n, CB(sendbuf), B(recvbuf), b, root);
  else if (a == algorithm::linear) {
    std::vector<std::size_t> sizes(n, b), displs(n);
    for (int i = 0; i < n; ++i) displs[i] = static_cast<std::size_t>(i) * b;
    add_scatterv_linear(s, rank, n, CB(sendbuf), sizes, displs, B(recvbuf), b, root);
  } else unsupported("scatter", a);
  return s;
}

schedule build_scatterv(int rank, int n, const void* sendbuf, std::span<const std::size_t> sb,
                        std::span<const std::size_t> displs, void* recvbuf, std::size_t recv_bytes, int root) {
  check_group(rank, n, "scatterv");
  check_root(root, n, "scatterv");
  if (rank == root) {
    check_span(sb, n, "scatterv", "send_bytes");
    check_span(displs, n, "scatterv", "displs");
  }
  schedule s;
  add_scatterv_linear(s, rank, n, CB(sendbuf), sb, displs, B(recvbuf), recv_bytes, root);
  return s;
}

schedule build_allgather(int rank, int n, const void* sendbuf, void* recvbuf, std::size_t b, algorithm a) {
  check_group(rank, n, "allgather");
  a = pick(a, collective::allgather, n, b * n, true);
  if (a != algorithm::recursive_doubling && a != algorithm::bruck && a != algorithm::ring) unsupported("allgather", a);
  schedule s;
  if (b == 0) return s;
  const byte* own = CB(sendbuf);
  if (a == algorithm::recursive_doubling && !is_pow2(n)) a = algorithm::bruck;
  switch (a) {
    case algorithm::recursive_doubling: add_allgather_rd(s, rank, n, own, B(recvbuf), b); break;
    case algorithm::bruck: add_allgather_bruck(s, rank, n, own, B(recvbuf), b); break;
    case algorithm::ring: {
      std::vector<std::size_t> sizes(n, b), displs(n);
      for (int i = 0; i < n; ++i) displs[i] = static_cast<std::size_t>(i) * b;
      add_allgatherv_ring(s, rank, n, own, b, B(recvbuf), sizes, displs);
      break;
    }
    default: unsupported("allgather", a);
  }
  return s;
}

schedule build_allgatherv(int rank, int n, const void* sendbuf, std::size_t send_bytes, void* recvbuf,
                          std::span<const std::size_t> rb, std::span<const std::size_t> displs) {
  check_group(rank, n, "allgatherv");
  check_span(rb, n, "allgatherv", "recv_bytes");
  check_span(displs, n, "allgatherv", "displs");
  schedule s;
  add_allgatherv_ring(s, rank, n, CB(sendbuf), send_bytes, B(recvbuf), rb, displs);
  return s;
}

schedule build_alltoall(int rank, int n, const void* sendbuf, void* recvbuf, std::size_t b, algorithm a) {
  check_group(rank, n, "alltoall");
  std::vector<std::size_t> sizes(n, b), displs(n);
  for (int i = 0; i < n; ++i) displs[i] = static_cast<std::size_t>(i) * b;
  a = pick(a, collective::alltoall, n, b, true);
  if (a != algorithm::linear && a != algorithm::pairwise && a != algorithm::bruck) unsupported("alltoall", a);
  if (b == 0) return schedule{};
  if (a == algorithm::bruck) {
    schedule s;
    const byte* src = CB(sendbuf);
    if (!sendbuf) {  // in place
      byte* t = s.temp(static_cast<std::size_t>(n) * b);
      s.copy(recvbuf, t, static_cast<std::size_t>(n) * b);
      src = t;
    }
    add_alltoall_bruck(s, rank, n, src, B(recvbuf), b);
    return s;
  }
  return build_alltoallv(rank, n, sendbuf, sizes, displs, recvbuf, sizes, displs, a);
}

schedule build_alltoallv(int rank, int n, const void* sendbuf, std::span<const std::size_t> sb,
                         std::span<const std::size_t> sd, void* recvbuf, std::span<const std::size_t> rb,
                         std::span<const std::size_t> rd, algorithm a) {
  check_group(rank, n, "alltoallv");
  check_span(rb, n, "alltoallv", "recv_bytes");
  check_span(rd, n, "alltoallv", "rdispls");
  schedule s;
  const byte* src = CB(sendbuf);
  if (!sendbuf) {  // in place: send what recvbuf holds, with the receive layout
    sb = rb;
    sd = rd;
    std::size_t extent = 0;
    for (int i = 0; i < n; ++i) extent = std::max(extent, rd[i] + rb[i]);
    byte* t = s.temp(extent);
    s.copy(recvbuf, t, extent);
    src = t;
  }
  check_span(sb, n, "alltoallv", "send_bytes");
  check_span(sd, n, "alltoallv", "sdispls");
  std::size_t total = 0;
  for (int i = 0; i < n; ++i) total += sb[i];
  a = pick(a, collective::alltoallv, n, total / static_cast<std::size_t>(n), true);
  if (a != algorithm::linear && a != algorithm::pairwise) unsupported("alltoallv", a);
  add_alltoallv(s, rank, n, src, sb, sd, B(recvbuf), rb, rd, a == algorithm::pairwise);
  return s;
}

schedule build_reduce_scatter(int rank, int n, const void* sendbuf, void* recvbuf,
                              std::span<const std::size_t> counts, std::size_t es, reducer& op, algorithm a) {
  check_group(rank, n, "reduce_scatter");
  check_span(counts, n, "reduce_scatter", "recv_counts");
  const std::vector<std::size_t> offs = prefix(counts, n);
  const std::size_t total = offs[n];
  a = pick(a, collective::reduce_scatter, n, total * es, op.commutative());
  if (a != algorithm::reduce_scatterv && !(a == algorithm::pairwise && op.commutative()))
    unsupported("reduce_scatter", a);
  schedule s;
  if (total == 0) return s;
  const byte* in = input_of(sendbuf, recvbuf);
  if (!sendbuf) {  // in place: the result overwrites the input's start; work on a copy
    byte* t = s.temp(total * es);
    s.copy(recvbuf, t, total * es);
    in = t;
  }
  if (a == algorithm::pairwise && op.commutative()) {
    add_reduce_scatter_pairwise(s, rank, n, in, B(recvbuf), counts, offs, es, op);
  } else if (a == algorithm::reduce_scatterv) {
    byte* full = rank == 0 ? s.temp(total * es) : nullptr;
    add_reduce_binomial(s, rank, n, in, full, total, es, op, 0);
    std::vector<std::size_t> sb(n), displs(n);
    for (int i = 0; i < n; ++i) {
      sb[i] = counts[i] * es;
      displs[i] = offs[i] * es;
    }
    add_scatterv_linear(s, rank, n, full, sb, displs, B(recvbuf), counts[rank] * es, 0);
  } else {
    unsupported("reduce_scatter", a);
  }
  return s;
}

schedule build_reduce_scatter_block(int rank, int n, const void* sendbuf, void* recvbuf, std::size_t count,
                                    std::size_t es, reducer& op, algorithm a) {
  check_group(rank, n, "reduce_scatter_block");
  std::vector<std::size_t> counts(n, count);
  if (a == algorithm::automatic)
    a = select_algorithm(collective::reduce_scatter_block, n, count * n * es, op.commutative(), default_tunables());
  return build_reduce_scatter(rank, n, sendbuf, recvbuf, counts, es, op, a);
}

schedule build_scan(int rank, int n, const void* sendbuf, void* recvbuf, std::size_t count, std::size_t es,
                    reducer& op, algorithm a) {
  check_group(rank, n, "scan");
  a = pick(a, collective::scan, n, count * es, op.commutative());
  if (a != algorithm::recursive_doubling && a != algorithm::chain) unsupported("scan", a);
  schedule s;
  if (count == 0) return s;
  const byte* in = input_of(sendbuf, recvbuf);
  if (a == algorithm::recursive_doubling) add_scan_rd(s, rank, n, in, B(recvbuf), count, es, op, false);
  else if (a == algorithm::chain) add_scan_chain(s, rank, n, in, B(recvbuf), count, es, op, false);
  else unsupported("scan", a);
  return s;
}

schedule build_exscan(int rank, int n, const void* sendbuf, void* recvbuf, std::size_t count, std::size_t es,
                      reducer& op, algorithm a) {
  check_group(rank, n, "exscan");
  a = pick(a, collective::exscan, n, count * es, op.commutative());
  if (a != algorithm::recursive_doubling && a != algorithm::chain) unsupported("exscan", a);
  schedule s;
  if (count == 0) return s;
  const byte* in = input_of(sendbuf, recvbuf);
  if (a == algorithm::recursive_doubling) add_scan_rd(s, rank, n, in, B(recvbuf), count, es, op, true);
  else if (a == algorithm::chain) add_scan_chain(s, rank, n, in, B(recvbuf), count, es, op, true);
  else unsupported("exscan", a);
  return s;
}

}  // namespace nmad::coll
