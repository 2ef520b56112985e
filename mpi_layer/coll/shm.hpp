#pragma once
// Shared-memory collectives: the small blocking collectives of a
// communicator whose processes all run on one host, done through one
// shared segment of the communicator instead of engine messages.
//
// Why. When ranks share cores, a collective's cost is how often each rank
// needs the CPU and what it does with it. Through the engine, an 8-byte
// bcast costs every non-root a posted receive, a match and a completion
// (about 1,300 instructions each); through the segment the root copies
// the bytes into its slot and publishes a sequence number, and each
// non-root copies them out: a few dozen instructions, and no rank waits
// for another to be scheduled unless the data it needs is not there yet.
//
// The segment (made by area_of on the communicator's first eligible
// collective, every rank taking part; MPI_COMM_WORLD's at MPI_Init) holds, per rank, a "done" counter
// and rings of slots: `out` (what the rank publishes: its bcast payload,
// its gather block, its barrier arrival) and `in` (what the root of a
// scatter writes for it), each as a deep ring of one-line slots for small
// payloads and a shallow ring of 1 KiB slots for larger ones. Every
// collective of the area has a number `op`, the same on every rank
// (collectives on one communicator are called in the same order
// everywhere); it uses slot op % depth of the ring its payload size
// selects (the size is the same on every rank: signatures match) and
// marks it by storing op in the slot's sequence word (release; readers
// load it with acquire). A rank writes a slot only once every rank has
// finished op - depth (its "done" counter), so a writer runs at most
// `depth` collectives ahead of the slowest reader and never overwrites
// what someone still has to read.
//
//   barrier  every rank publishes its arrival, then waits for everyone's;
//   bcast    the root publishes the payload; the others copy it;
//   gather   each non-root publishes its block; the root copies them;
//   scatter  the root writes each rank's block into that rank's `in` ring;
//            each copies its own;
//   allreduce every rank publishes its operand, then reduces them all in
//            rank order (the same result bits everywhere); reduce: only
//            the root reduces; reduce_scatter(_block) is an allreduce of
//            the whole vector of which each rank keeps its part;
//   allgather every rank publishes its block; each copies all of them;
//   alltoall every rank publishes all its blocks; each copies its own
//            block out of everyone's. Blocks above kSlotBytes per peer
//            (up to kBigBytes) go through pair slots: rank i writes its
//            block for j into a slot of j's kept for i, and j copies each
//            out as soon as it is there. Larger blocks are not copied
//            through the segment: each rank publishes the address of its
//            send blocks and every rank reads its own block straight out
//            of the others' memory (alltoall_cma).
//
// Single copy (alltoall_cma, bcast_cma, scatter_cma, gather_cma: blocks
// above kBigBytes). Measured at 4 ranks
// on 2 cores (medians of 10 alternating launches), a cross-memory read
// costs more than two copies through the segment up to 64 KiB (a system
// call and page pinning per block): 4, 8, 16 and 64 KiB alltoalls took
// 23, 37, 69 and 270 us through pair slots, 45 (engine), 77, 100 and 326
// by single copy; through the engine 64 KiB took about 390. Above 64 KiB
// a block does not fit a slot, and single copy beats the engine (256 KiB:
// 1.1 against 1.35 ms; docs/BENCHMARKS.md).
// Where the kernel lets the ranks read one
// another's memory (Linux cross-memory attach, process_vm_readv: same
// user, Yama's ptrace_scope 0 or absent, NMAD_SHM_CMA not 0), a large
// alltoall costs each rank one publication (its buffer's address and its
// pid, in a line slot), one read per peer straight into its receive
// buffer, and one arrival saying it has read everything; it returns once
// every rank has arrived (its send blocks may be reused then). Through the
// engine the same exchange is a rendezvous per pair and round, each
// needing the peer to be scheduled to answer; here a rank needs another
// only to have published, and reads whenever it runs. Whether the ranks
// can is tested at the area's set-up (each rank reads a word of rank 0's
// memory; rank 0 one of its own) and decided for all of them together, so
// every rank takes the same path.
//
// Waiting. A rank whose data is not there yet calls one round of engine
// progress between looks (so other traffic and non-blocking collectives
// go on, and failures are noticed), which follows the polling discipline:
// on a contended machine every idle round gives the CPU away, so the rank
// it waits for can run. A member found dead (nmad::session::peer_alive)
// ends the wait: the operation returns its rank.
//
// The segment is created by the communicator's rank 0 (shm_open, name
// "/nmad-<tag>-coll-<pid>-...", the form the shm driver's start-up sweep
// removes when its creator is gone), opened by the others, and unlinked
// by rank 0 as soon as every rank has it mapped; it is unmapped when the
// communicator is freed or at MPI_Finalize.
//
// Used by MPI_Barrier, by MPI_Bcast, MPI_Gather, MPI_Scatter,
// MPI_Allgather, MPI_Reduce, MPI_Allreduce, MPI_Reduce_scatter(_block) and
// MPI_Alltoall of at most kBigBytes per block (reduce_scatter: the whole
// vector), and by
// a larger MPI_Bcast, MPI_Gather, MPI_Scatter or MPI_Alltoall and by
// MPI_Gatherv, MPI_Scatterv and MPI_Allgatherv of any size where the area
// allows single copy, blocking forms only (the other non-blocking
// ones keep their schedules: a schedule's steps are engine messages that
// progress without the caller), and by MPI_Ibarrier, and MPI_Iallreduce
// of at most kBigBytes (not a persistent MPI_Allreduce: the area orders
// operations by their starts, persistent collectives match by their
// inits), on a communicator
// whose area is already set up (ibarrier_start, iallreduce_start below:
// the set-up is a collective exchange, which a non-blocking call must not
// wait for).
//
// MPI_Ibarrier. The arrival is published when the call starts, as the
// blocking barrier's, and the rank's "done" counter moves to the op at
// once: the only thing the rank still reads for it is the other ranks'
// sequence words, and a sequence word only grows (an op that reuses the
// slot later stores a larger number), so ">= op" stays true however far
// the others have gone. Completion is a look at those words (test, from
// MPI_Test/Wait), which needs no progress of its own.
//
// Not used (the engine paths stay): intercommunicators, more than kMaxProcs
// ranks, ranks on several hosts (NMAD_EMULATED_HOSTS counts), a job whose
// gates do not use the shm driver, NMAD_COLL_SHM=off, or any rank that
// could not map the segment (then nobody uses it on that communicator).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace nmad::coll {
class reducer;
}
namespace nmad::mpi {
struct comm_obj;
}

namespace nmad::mpi::shmcoll {

constexpr int kMaxProcs = 8;
// Payloads of at most kLineBytes travel in one cache line with their
// sequence word, in rings of kLineDepth; larger ones (up to kSlotBytes) in
// rings of kDepth slots. A deep ring lets a root run far ahead of readers
// that are not scheduled (4 ranks on 2 cores: with 8 slots, a bcast
// loop paid a context switch every few calls, 2.5 us a call; with 64,
// 0.55 us), at 64 bytes a step.
constexpr std::size_t kLineBytes = 56;
constexpr int kLineDepth = 256;
constexpr std::size_t kSlotBytes = 1024;
constexpr int kDepth = 8;
// Larger payloads, up to kBigBytes (bcast, gather, scatter, allreduce),
// in rings of kBigDepth slots: a writer runs at most two such operations
// ahead of the slowest reader. Through the engine a 64 KiB bcast at 4
// ranks on 2 cores took 95 us idle and 150 loaded (Open MPI: 70 and 83):
// a rendezvous per reader, each waiting for the root to be scheduled;
// here the root copies once and each reader copies out when it runs.
constexpr std::size_t kBigBytes = 64 * 1024;
constexpr int kBigDepth = 2;

class area;

// The area of c, made the first time a rank asks for it (a collective
// step: every rank of c must ask at the same point, which the eligibility
// test below guarantees for calls that are themselves collective); null
// when c cannot have one. Throws call_error only when a peer failed
// during the set-up (the caller reports it as the collective's error).
area* area_of(comm_obj& c);
// Releases c's area (MPI_Comm_free, MPI_Finalize). No collective.
void release(comm_obj& c);

// Each returns -1, or the communicator rank of a member found dead while
// this rank waited for it (the operation did not complete).
int barrier(area& a);
// MPI_Ibarrier: publishes this rank's arrival under the area's next op
// (waiting only if some rank is a whole ring of ops behind, as every
// writer does) and returns -1 with that op, or a member found dead.
int ibarrier_start(area& a, std::uint64_t& op);
// Whether every member has arrived at op: -1 yes, -2 not yet, or the rank
// of a member found dead (looked for when check_alive) that has not.
int ibarrier_test(area& a, std::uint64_t op, bool check_alive);
// Non-blocking allreduce (MPI_Iallreduce) of at
// most kBigBytes, on a communicator whose area is already set up (as
// MPI_Ibarrier: every member takes the path alike). start takes the area's
// next op and publishes the operand, unless its slot may still be read
// (some rank a whole ring of ops behind): then the operand is published by
// a later test. test (MPI_Test/Wait) reduces every operand in rank order,
// as allreduce, once they are all there. Older open ones are advanced
// first, and until an op is closed this rank's "done" counter stays below
// it, so a blocking collective finishing meanwhile does not let a writer
// reuse the slots still to be read. Never waits. The state must stay put
// from start until test says it is closed.
struct iallreduce {
  const void* mine = nullptr;  // may be result (in place)
  void* result = nullptr;
  std::size_t bytes = 0, count = 0;
  nmad::coll::reducer* red = nullptr;
  std::uint64_t op = 0;
  int phase = 0;  // 0 not published, 1 published, 2 done, 3 failed (dead)
  int dead = -1;
  unsigned polls = 0;
};
void iallreduce_start(area& a, iallreduce& x);
// -2 pending, -1 done, or the rank of a member found dead.
int iallreduce_test(area& a, iallreduce& x);
// x's owner goes away before x closed (MPI_Finalize): forgets it.
void iallreduce_drop(area& a, iallreduce& x);
// buf: bytes (<= kBigBytes) of contiguous data, at every rank.
int bcast(area& a, int root, void* buf, std::size_t bytes);
// all: the root's blocks (rank order), mine: this rank's block (null at the
// root for MPI_IN_PLACE). block <= kBigBytes.
int gather(area& a, int root, const void* mine, void* all, std::size_t block);
int scatter(area& a, int root, const void* all, void* mine, std::size_t block);
// Allreduce of `count` elements (bytes <= kBigBytes in the reducer's
// packed form): every rank publishes its operand, then reduces all of them
// in rank order (a0 op a1 op ... op an-1, the canonical order, so
// non-commutative ops are right and every rank gets the same bits) into
// result. mine may be result (in place).
int allreduce(area& a, const void* mine, void* result, std::size_t bytes, std::size_t count,
              nmad::coll::reducer& red);
// Reduce to root: every rank publishes its operand (mine; at the root it
// may be result, in place) and returns, the root reduces them in rank
// order as allreduce does. bytes <= kBigBytes.
int reduce(area& a, int root, const void* mine, void* result, std::size_t bytes, std::size_t count,
           nmad::coll::reducer& red);
// Allgather of `block` bytes per rank (<= kBigBytes): every rank publishes
// its block (mine; null for MPI_IN_PLACE: its block is in all already) and
// copies everyone's into all.
int allgather(area& a, const void* mine, void* all, std::size_t block);
// The v-collectives, blocks of any size, where single_copy(a) (else
// kDeclined, nothing done): a block of at most kBigBytes is copied through
// the slot its size selects, a larger one is read in place by single copy
// (its owner waits for its readers' marks). `bytes`/`displs`: every rank's block size
// and place in `all` (gatherv: at the root; allgatherv: everywhere);
// mine null for MPI_IN_PLACE (the root's block, or this rank's, is in all
// already). Empty blocks are not read.
int gatherv(area& a, int root, const void* mine, std::size_t send_bytes, void* all,
            std::span<const std::size_t> bytes, std::span<const std::size_t> displs);
int scatterv(area& a, int root, const void* all, std::span<const std::size_t> bytes,
             std::span<const std::size_t> displs, void* mine, std::size_t recv_bytes);
int allgatherv(area& a, const void* mine, std::size_t send_bytes, void* all, std::span<const std::size_t> bytes,
               std::span<const std::size_t> displs);
// Alltoall of `block` bytes per peer (block <= kBigBytes): every rank
// publishes its size() blocks (in one slot when they fit, else one slot
// per peer; above kSlotBytes, in the pair slots of the receivers), then
// copies block `rank` of each. out may be in (in place).
int alltoall(area& a, const void* in, void* out, std::size_t block);

// Whether a's ranks may read one another's memory (decided at set-up, the
// same answer on every rank).
bool single_copy(const area& a);
// Alltoall of any block size by single copy (see above): in holds this
// rank's size() blocks, out receives them; out may be in (in place: the
// blocks are first copied aside, since the others read them while this
// rank overwrites them). Returns kDeclined, changing nothing, when
// !single_copy(a); else -1 or a member found dead (or whose memory could
// not be read).
constexpr int kDeclined = -3;
int alltoall_cma(area& a, const void* in, void* out, std::size_t block);
// Bcast, scatter and gather of any size by single copy, same returns: the
// root publishes its buffer and the others read their part of it (bcast,
// scatter), or the others publish their blocks and the root reads them
// (gather, mine null at the root for MPI_IN_PLACE); whoever was read from
// returns once its readers marked the end.
int bcast_cma(area& a, int root, void* buf, std::size_t bytes);
int scatter_cma(area& a, int root, const void* all, void* mine, std::size_t block);
int gather_cma(area& a, int root, const void* mine, void* all, std::size_t block);

}  // namespace nmad::mpi::shmcoll
