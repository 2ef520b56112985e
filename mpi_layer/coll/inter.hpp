#pragma once
// The phases of collectives on intercommunicators (MPI-3.1 5.2.2), which
// collectives.cpp composes into one schedule per call.
//
// One schedule over the union of both groups: local phases are the
// intracommunicator schedules of one group appended with its rank map, and
// the two groups meet through their leaders (local rank 0) or directly.
// Every member of a group allocates tag blocks at the same points, so the
// phases' tags agree inside each group and across the two.
//   Barrier    local barrier; leaders exchange; local broadcast
//   Bcast      root -> remote leader; broadcast in the receiving group
//   Reduce     reduce to the leader of the sending group; leader -> root
//   Allreduce  each group reduces to its leader; leaders exchange; local bcast
//   Reduce_scatter(_block)  each group reduces its vector (the same
//              element count in both groups) to its leader; leaders
//              exchange; each scatters the OTHER group's result over its
//              own group (MPI-3.1 5.10: recvcounts describe the local group)
//   Gather(v), Scatter(v), Allgather(v), Alltoall(v,w): direct transfers
//              between the processes concerned
// Scan and Exscan are not defined on intercommunicators, nor is MPI_IN_PLACE.
#include <cstdint>
#include <vector>

#include "mpi_layer/coll/call.hpp"

namespace nmad::mpi::coll_call::inter {

// What root_of() answers besides a remote rank.
enum { proc_null = -1, is_root = -2 };

// Validates a root argument: MPI_ROOT (this process is the root),
// MPI_PROC_NULL (another process of this group is), or a remote rank.
int root_of(call& x, int root);

// Fails the call when a or b is MPI_IN_PLACE.
void no_in_place(call& x, const void* a, const void* b = nullptr);

// Appends an intracommunicator schedule of this group (local ranks).
void local_phase(call& x, schedule&& s);

// Leader of this group: send `out` to and receive `in` from the remote leader.
void leaders_exchange(call& x, std::uint32_t tag, const std::byte* out, std::size_t out_bytes, std::byte* in,
                      std::size_t in_bytes);

// Local barrier; leaders exchange; local broadcast.
void barrier(call& x);

// root: MPI_ROOT, MPI_PROC_NULL or the remote root (see root_of).
void bcast(call& x, void* buf, Count count, const tinfo& t, int root);

// Reduce (root given) or allreduce (all = true).
void reduce(call& x, const void* sbuf, void* rbuf, Count count, const tinfo& t, int root, bool all);

// Reduce_scatter(_block): every process of this group gives `total`
// elements (the sum of `counts`, one count per LOCAL process, equal to the
// remote group's total); this group's reduction goes to the remote group,
// and the remote group's reduction is scattered here, counts[i] elements to
// local rank i.
void reduce_scatter(call& x, const void* sbuf, void* rbuf, const std::vector<std::size_t>& counts, const tinfo& t);

// Direct transfers: block i of `out` to remote rank i and block i of `in`
// from remote rank i (null bases skip that direction).
void exchange(call& x, std::uint32_t tag, const call::vblocks* out, const call::vblocks* in);

// n equal blocks of `block` bytes from base.
call::vblocks even(std::byte* base, std::size_t block, int n);

// This process's send block, the same for every remote process.
call::vblocks my_block(call& x, const void* sbuf, Count scount, MPI_Datatype stype);

// Scatter(v) outside the root group: this process's block from the root.
void recv_from_root(call& x, std::uint32_t tag, int root, void* rbuf, Count rcount, MPI_Datatype rtype);

}  // namespace nmad::mpi::coll_call::inter
