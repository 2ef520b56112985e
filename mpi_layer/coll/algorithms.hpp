#pragma once
// nmad::coll — collective algorithms, built as schedules (schedule.hpp).
//
// Every builder takes this process's group rank and the group size, the
// caller's BYTE buffers and sizes (datatype-agnostic: the MPI binding packs
// non-contiguous datatypes into contiguous buffers first, and gives
// reductions an element count plus an element size and a reducer), and an
// optional forced algorithm (automatic = select_algorithm()). It returns a
// schedule for coll::run() (blocking) or a coll::executor (non-blocking).
// The same call must be made on every member with matching sizes (as MPI
// requires); roots and sizes must agree.
//
// IN PLACE: a null `sendbuf` means MPI_IN_PLACE: the input is read from
// recvbuf (reduce at the root, allreduce, scan, exscan, reduce_scatter(_block)
// — the whole input vector in recvbuf, result at its start —, alltoall(v)),
// or this rank's block is already in place in recvbuf (gather(v) at the root,
// allgather(v)). For scatter(v), a null `recvbuf` at the root means the
// root's block stays where it is. Elsewhere null buffers are only allowed
// with zero sizes.
//
// REDUCTIONS call reducer::apply(in, inout, count) with `in` always the
// operand from lower ranks, so non-commutative ops get MPI's rank order;
// algorithms that reorder operands are used only when op.commutative().
//
// Displacements and counts of the v-variants are in BYTES (reduce_scatter:
// ELEMENT counts), one entry per group rank.
#include <cstddef>
#include <optional>
#include <span>
#include <string_view>

#include "mpi_layer/coll/schedule.hpp"

namespace nmad::coll {

enum class collective {
  barrier, bcast, reduce, allreduce, gather, gatherv, scatter, scatterv, allgather, allgatherv,
  alltoall, alltoallv, reduce_scatter, reduce_scatter_block, scan, exscan,
};

enum class algorithm {
  automatic,
  dissemination,       // barrier (2 or more than kBarrierLinearMax ranks)
  binomial,            // bcast, reduce, gather, scatter
  scatter_allgather,   // bcast: binomial scatter + ring allgather (van de Geijn)
  chain,               // bcast: pipelined chain of segments; scan/exscan: chain
  recursive_doubling,  // allreduce (with the non-power-of-two fold),
                       // allgather (power-of-two sizes; else Bruck), scan/exscan
  rabenseifner,        // allreduce: reduce-scatter (halving) + allgather (doubling); commutative only
  linear,              // gather(v)/scatter(v): root talks to everyone; alltoall(v): all posted at once;
                       // barrier (3 to kBarrierLinearMax ranks): fan-in to rank 0, then its release
  bruck,               // allgather; alltoall (tiny blocks: log2(n) rounds of packed blocks)
  ring,                // allgather(v)
  pairwise,            // alltoall(v): one peer per round; reduce_scatter: commutative, one peer per round
  reduce_scatterv,     // reduce_scatter(_block): binomial reduce to rank 0 + linear scatterv (any op)
};

// The largest group whose barrier is linear by default.
inline constexpr int kBarrierLinearMax = 8;

std::string_view to_string(collective c);
std::string_view to_string(algorithm a);

// The tunables of select_algorithm(), in bytes. Defaults below; the
// environment can override each one: NMAD_COLL_<NAME in upper case>
// (e.g. NMAD_COLL_BCAST_SMALL=4096), read by tunables::from_env() (and
// changeable while running: set_tunable below).
struct tunables {
  std::size_t bcast_small = 12 * 1024;        // bcast: < this (or <= 2 procs) -> binomial
  std::size_t bcast_large = 512 * 1024;       // bcast: >= this -> pipelined chain, between -> scatter_allgather
  std::size_t bcast_min_procs = 8;            // bcast on fewer processes: binomial below bcast_large (the other
                                              // algorithms' extra steps need every rank scheduled; 4 ranks on
                                              // 2 cores, 64 KiB: binomial 2-3x faster)
  std::size_t chain_segment = 64 * 1024;      // bcast chain segment size
  std::size_t allreduce_small = 4096;         // allreduce: < this (or non-commutative) -> recursive_doubling, else rabenseifner (4 ranks: equal at 4 KiB, RD 2x faster at 2 KiB oversubscribed)
  std::size_t allreduce_pair_large = 512 * 1024;  // allreduce on 2 processes: rabenseifner from this size
  std::size_t gather_large = 512 * 1024;      // gather/scatter total bytes >= this -> linear, else binomial
  std::size_t allgather_small = 80 * 1024;    // allgather total bytes < this -> recursive_doubling (2^k procs) / bruck, else ring
  std::size_t alltoall_small = 32 * 1024;     // alltoall(v) block bytes <= this -> linear (all at once), else pairwise
  std::size_t alltoall_bruck = 256;           // alltoall block bytes <= this with >= alltoall_bruck_procs -> bruck
  std::size_t alltoall_bruck_procs = 8;
  std::size_t reduce_scatter_large = 64 * 1024;  // reduce_scatter total bytes >= this and commutative -> pairwise
  std::size_t scan_large = 256 * 1024;        // scan/exscan bytes >= this -> chain, else recursive_doubling
  static tunables from_env();
};

// The one place algorithms are chosen. `bytes` is: bcast: the buffer;
// reduce/allreduce/scan/exscan: count * element size; gather/scatter/
// allgather: the whole gathered vector (block * nprocs); alltoall(v): one
// block (v: the average block); reduce_scatter(_block): the whole input
// vector. Never returns automatic.
algorithm select_algorithm(collective c, int nprocs, std::size_t bytes, bool commutative = true,
                           const tunables& t = tunables());

// Process-wide tunables used when a builder gets automatic: from_env() on
// first use, each field changeable at run time (a copy of the current
// values; any thread).
tunables default_tunables();
// By knob name (NMAD_COLL_BCAST_SMALL, ...): whether it is one of them,
// its current value, and setting it (false: not one of them, or a value
// it refuses: a chain segment of 0). Every process of a communicator must
// have the same values when it calls a collective (MPI_T_SCOPE_ALL_EQ):
// they choose the algorithm.
bool is_tunable(std::string_view knob);
std::optional<std::size_t> get_tunable(std::string_view knob);
bool set_tunable(std::string_view knob, std::size_t value);

schedule build_barrier(int rank, int size, algorithm a = algorithm::automatic);
schedule build_bcast(int rank, int size, void* buf, std::size_t bytes, int root,
                     algorithm a = algorithm::automatic);
schedule build_reduce(int rank, int size, const void* sendbuf, void* recvbuf, std::size_t count,
                      std::size_t elem_size, reducer& op, int root, algorithm a = algorithm::automatic);
schedule build_allreduce(int rank, int size, const void* sendbuf, void* recvbuf, std::size_t count,
                         std::size_t elem_size, reducer& op, algorithm a = algorithm::automatic);
// block_bytes: what each rank contributes (recvbuf at the root: size * block_bytes).
schedule build_gather(int rank, int size, const void* sendbuf, void* recvbuf, std::size_t block_bytes,
                      int root, algorithm a = algorithm::automatic);
schedule build_gatherv(int rank, int size, const void* sendbuf, std::size_t send_bytes, void* recvbuf,
                       std::span<const std::size_t> recv_bytes, std::span<const std::size_t> displs, int root);
schedule build_scatter(int rank, int size, const void* sendbuf, void* recvbuf, std::size_t block_bytes,
                       int root, algorithm a = algorithm::automatic);
schedule build_scatterv(int rank, int size, const void* sendbuf, std::span<const std::size_t> send_bytes,
                        std::span<const std::size_t> displs, void* recvbuf, std::size_t recv_bytes, int root);
schedule build_allgather(int rank, int size, const void* sendbuf, void* recvbuf, std::size_t block_bytes,
                         algorithm a = algorithm::automatic);
schedule build_allgatherv(int rank, int size, const void* sendbuf, std::size_t send_bytes, void* recvbuf,
                          std::span<const std::size_t> recv_bytes, std::span<const std::size_t> displs);
schedule build_alltoall(int rank, int size, const void* sendbuf, void* recvbuf, std::size_t block_bytes,
                        algorithm a = algorithm::automatic);
schedule build_alltoallv(int rank, int size, const void* sendbuf, std::span<const std::size_t> send_bytes,
                         std::span<const std::size_t> sdispls, void* recvbuf,
                         std::span<const std::size_t> recv_bytes, std::span<const std::size_t> rdispls,
                         algorithm a = algorithm::automatic);
// recv_counts: elements of the result each rank gets (input: their sum).
schedule build_reduce_scatter(int rank, int size, const void* sendbuf, void* recvbuf,
                              std::span<const std::size_t> recv_counts, std::size_t elem_size, reducer& op,
                              algorithm a = algorithm::automatic);
schedule build_reduce_scatter_block(int rank, int size, const void* sendbuf, void* recvbuf,
                                    std::size_t recv_count, std::size_t elem_size, reducer& op,
                                    algorithm a = algorithm::automatic);
// Inclusive prefix: rank r gets x0 op ... op xr. Exclusive: x0 op ... op x(r-1);
// rank 0's recvbuf is left untouched.
schedule build_scan(int rank, int size, const void* sendbuf, void* recvbuf, std::size_t count,
                    std::size_t elem_size, reducer& op, algorithm a = algorithm::automatic);
schedule build_exscan(int rank, int size, const void* sendbuf, void* recvbuf, std::size_t count,
                      std::size_t elem_size, reducer& op, algorithm a = algorithm::automatic);

}  // namespace nmad::coll
