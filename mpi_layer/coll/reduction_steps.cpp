// Combining algorithms: reduce, allreduce (recursive doubling,
// Rabenseifner, with the non-power-of-two fold), reduce_scatter, scan and
// exscan. See steps.hpp.
#include "mpi_layer/coll/steps.hpp"

#include <algorithm>
#include <vector>

namespace nmad::coll::steps {

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
namespace {

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

}  // namespace


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

}  // namespace nmad::coll::steps
