#pragma once
// The steps of the flat collective algorithms (algorithms.hpp), private to
// this package: each add_* appends one algorithm's rounds to a schedule;
// the builders of algorithms.cpp check arguments, pick the algorithm and
// call these. Data movement (barrier, bcast, gather/scatter, allgather,
// alltoall) is in movement_steps.cpp, combining ones (reduce, allreduce,
// reduce_scatter, scan) in reduction_steps.cpp.
//
// Conventions: `vr` is a rank relative to a root, (rank - root) mod n;
// abs(vr) = (vr + root) mod n. Every step function allocates its tag
// blocks unconditionally (same sequence on every member), and, within one
// phase, two messages between the same pair in the same round never share
// a tag.
#include <cstddef>
#include <cstdint>
#include <span>

#include "mpi_layer/coll/schedule.hpp"

namespace nmad::coll::steps {

using byte = std::byte;
using tag = std::uint32_t;
inline tag T(std::uint32_t block, std::size_t i) { return schedule::make_tag(block, i); }

inline int lowbit_mask(int vr, int n) {  // lowest set bit of vr; for vr == 0: smallest 2^k >= n
  int mask = 1;
  while (mask < n) {
    if (vr & mask) return mask;
    mask <<= 1;
  }
  return mask;
}
inline int largest_pow2_le(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}
inline byte* B(void* p) { return static_cast<byte*>(p); }
inline const byte* CB(const void* p) { return static_cast<const byte*>(p); }

// ---- movement_steps.cpp ----
void add_barrier(schedule& s, int rank, int n);
void add_barrier_linear(schedule& s, int rank, int n);
void add_bcast_binomial(schedule& s, int rank, int n, byte* buf, std::size_t bytes, int root);
void add_bcast_scatter_allgather(schedule& s, int rank, int n, byte* buf, std::size_t bytes, int root);
void add_bcast_chain(schedule& s, int rank, int n, byte* buf, std::size_t bytes, int root, std::size_t seg);
void add_gather_binomial(schedule& s, int rank, int n, const byte* own, byte* recvbuf, std::size_t blk_bytes,
                         int root);
void add_scatter_binomial(schedule& s, int rank, int n, const byte* sendbuf, byte* own, std::size_t blk_bytes,
                          int root);
void add_gatherv_linear(schedule& s, int rank, int n, const byte* own, std::size_t send_bytes, byte* recvbuf,
                        std::span<const std::size_t> rb, std::span<const std::size_t> displs, int root);
void add_scatterv_linear(schedule& s, int rank, int n, const byte* sendbuf, std::span<const std::size_t> sb,
                         std::span<const std::size_t> displs, byte* own, std::size_t recv_bytes, int root);
void add_allgatherv_ring(schedule& s, int rank, int n, const byte* own, std::size_t send_bytes, byte* recvbuf,
                         std::span<const std::size_t> rb, std::span<const std::size_t> displs);
void add_allgather_rd(schedule& s, int rank, int n, const byte* own, byte* recvbuf, std::size_t b);
void add_allgather_bruck(schedule& s, int rank, int n, const byte* own, byte* recvbuf, std::size_t b);
void add_alltoallv(schedule& s, int rank, int n, const byte* sendbuf, std::span<const std::size_t> sb,
                   std::span<const std::size_t> sd, byte* recvbuf, std::span<const std::size_t> rb,
                   std::span<const std::size_t> rd, bool pairwise);
void add_alltoall_bruck(schedule& s, int rank, int n, const byte* sendbuf, byte* recvbuf, std::size_t b);

// ---- reduction_steps.cpp ----
void add_reduce_binomial(schedule& s, int rank, int n, const byte* input, byte* result, std::size_t count,
                         std::size_t es, reducer& op, int root);
void add_allreduce_rd(schedule& s, int rank, int n, const byte* input, byte* recvbuf, std::size_t count,
                      std::size_t es, reducer& op);
void add_allreduce_rabenseifner(schedule& s, int rank, int n, const byte* input, byte* recvbuf,
                                std::size_t count, std::size_t es, reducer& op);
void add_reduce_scatter_pairwise(schedule& s, int rank, int n, const byte* input, byte* recvbuf,
                                 std::span<const std::size_t> counts, std::span<const std::size_t> offs,
                                 std::size_t es, reducer& op);
void add_scan_rd(schedule& s, int rank, int n, const byte* input, byte* recvbuf, std::size_t count,
                 std::size_t es, reducer& op, bool exclusive);
void add_scan_chain(schedule& s, int rank, int n, const byte* input, byte* recvbuf, std::size_t count,
                    std::size_t es, reducer& op, bool exclusive);

}  // namespace nmad::coll::steps
