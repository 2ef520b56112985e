// Data-movement algorithms: barrier, bcast, gather/scatter (and their v
// forms), allgather, alltoall. See steps.hpp.
#include "mpi_layer/coll/steps.hpp"

#include <algorithm>
#include <vector>

namespace nmad::coll::steps {

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
  // Empty blocks are not sent (the sender's count and the root's count for
  // it agree: matching type signatures), as in Open MPI and MPICH: a rank
  // with nothing to contribute leaves at once.
  if (rank != root) {
    if (send_bytes) s.send(root, T(blk, 0), own, send_bytes);
    return;
  }
  for (int i = 1; i < n; ++i) {
    const int p = (root + i) % n;
    if (rb[p]) s.recv(p, T(blk, 0), recvbuf + displs[p], rb[p]);
  }
  if (own) s.copy(own, recvbuf + displs[root], std::min(send_bytes, rb[root]));
}

void add_scatterv_linear(schedule& s, int rank, int n, const byte* sendbuf, std::span<const std::size_t> sb,
                         std::span<const std::size_t> displs, byte* own, std::size_t recv_bytes, int root) {
  const auto blk = s.tag_block();
  s.new_round();
  if (rank != root) {  // (empty blocks are not sent: see add_gatherv_linear)
    if (recv_bytes) s.recv(root, T(blk, 0), own, recv_bytes);
    return;
  }
  for (int i = 1; i < n; ++i) {
    const int p = (root + i) % n;
    if (sb[p]) s.send(p, T(blk, 0), sendbuf + displs[p], sb[p]);
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
    // (Every rank knows every block's size: an empty one is not passed on.)
    if (rb[sb]) s.send(right, T(blk, i), recvbuf + displs[sb], rb[sb]);
    if (rb[rbk]) s.recv(left, T(blk, i), recvbuf + displs[rbk], rb[rbk]);
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
    // (Empty blocks are not sent: see add_gatherv_linear.)
    if (sb[to]) s.send(to, T(blk, 0), sendbuf + sd[to], sb[to]);
    if (rb[from]) s.recv(from, T(blk, 0), recvbuf + rd[from], rb[from]);
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

}  // namespace nmad::coll::steps
