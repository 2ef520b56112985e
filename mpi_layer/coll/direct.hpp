#pragma once
// The direct path of small blocking collectives: no schedule, the root
// exchanges with every rank itself, through the communicator's
// shared-memory area when it has one (shm.hpp) or engine messages.
//
// A blocking bcast, scatter or gather on an intracommunicator of at most
// kDirectProcs processes, with blocks of at most kDirectBytes (and, for
// bcast, no hierarchy), skips the schedule: the root sends (or receives)
// every block itself, each other rank receives (or sends) one message.
// (Allreduce stays on its schedule: through rank 0 alone, a rank that dies
// was reported to the others as rank 0 leaving, proc_failed_coll.) No rank
// forwards for another, so none waits for a third one to be scheduled
// (what costs when ranks share cores), and no schedule or executor is
// built (most of a small collective's time). The choice depends only on arguments every rank
// agrees on (block bytes, communicator size, blocking), so all ranks take
// it alike; non-contiguous data goes through the call's packing
// temporaries and unpack steps as on the full path. The message tags come
// from the communicator's collective sequence, as the schedules' do.
#include <cstddef>
#include <string>

#include "mpi_layer/coll/call.hpp"
#include "mpi_layer/coll/shm.hpp"

namespace nmad::mpi::coll_call {

constexpr std::size_t kDirectBytes = 1024;
constexpr int kDirectProcs = 8;

enum class rooted { bcast, scatter, gather };

inline bool direct_ok(const call& x, std::size_t block) {
  return x.blocking && !x.inter && x.size <= kDirectProcs && block <= kDirectBytes;
}
// Whether a blocking bcast, gather, scatter or allreduce of `block` bytes
// per rank may go through the communicator's shared-memory area (when it
// has one: run_shm): blocks up to shmcoll::kBigBytes, beyond the engine's
// direct path.
inline bool shm_ok(const call& x, std::size_t block) {
  return x.blocking && !x.inter && x.size <= shmcoll::kMaxProcs && block <= shmcoll::kBigBytes;
}
// Whether a blocking alltoall may go through the area (blocks up to
// shmcoll::kBigBytes per peer through its slots, larger ones by single
// copy, shmcoll::alltoall_cma, where the area allows it), and likewise a
// blocking gatherv, scatterv or allgatherv (shmcoll::gatherv and its
// kind, where the area allows single copy).
inline bool shm_alltoall_ok(const call& x) { return x.blocking && !x.inter && x.size <= shmcoll::kMaxProcs; }
// Whether a blocking bcast, gather or scatter of `block` bytes per rank,
// too large for the area's slots, may go by single copy through it
// (shmcoll::bcast_cma and its kind, where the area allows it).
inline bool shm_single_copy_ok(const call& x, std::size_t block) {
  return x.blocking && !x.inter && x.size <= shmcoll::kMaxProcs && block > shmcoll::kBigBytes;
}

// The shared-memory area of x's communicator (shm.hpp) for a
// blocking collective that takes the direct path, or null (engine
// messages). Its set-up is a collective step: a peer failing during it is
// the call's error.
shmcoll::area* shm_area(call& x);
// What a rank found dead in shared memory is reported as.
std::string shm_failure(int rank);

// The end of a direct collective: unpack steps, nothing left to launch.
void direct_done(call& x);

// Runs `op` (area& -> the rank found dead, or -1; shmcoll::kDeclined
// when the area cannot do it, nothing done) on the shared-memory area of
// x's communicator and ends the call, if it has an area; false if not.
template <typename Op>
bool run_shm(call& x, Op op) {
  shmcoll::area* a = shm_area(x);
  if (!a) return false;
  const int dead = op(*a);
  if (dead == shmcoll::kDeclined) return false;
  if (dead >= 0) x.fail(MPI_ERR_PROC_FAILED, shm_failure(dead));
  direct_done(x);
  return true;
}

// s: the root's data (bcast: the buffer; scatter: every block; gather: this
// rank's block, null for MPI_IN_PLACE); r: where this rank's data goes
// (bcast: the buffer; scatter: this rank's block, null for MPI_IN_PLACE;
// gather at the root: every block). Engine messages: the callers try the
// communicator's shared-memory area first (shm_ok, run_shm).
void direct(call& x, rooted op, int root, const std::byte* s, std::byte* r, std::size_t block);

// The fast path of the direct rooted collectives: a blocking bcast,
// scatter or gather whose arguments are plainly valid and that takes the
// direct path anyway (predefined types, blocks of 1 byte to kDirectBytes,
// an intracommunicator of 2 to kDirectProcs ranks, no hierarchy for bcast)
// runs without building a call: the call's schedule, argument
// descriptions and error plumbing were half of the MPI layer's
// instructions in an 8-byte bcast (callgrind). The messages and tags are
// the direct path's, so ranks taking either path match. Anything else, and
// every invalid argument, answers kDeclined and takes the full path, which
// checks and reports as usual.
constexpr int kDeclined = -1;

// A blocking bcast taking the fast path: its MPI result, or kDeclined.
int bcast_fast(const char* fn, void* buf, int count, MPI_Datatype dt, int root, MPI_Comm comm);

// Scatter (gather = false) or gather. `mine` is this rank's block (scatter:
// rbuf, gather: sbuf; MPI_IN_PLACE allowed at the root), `all` the root's
// blocks (scatter: sbuf, gather: rbuf).
int rooted_fast(const char* fn, bool gather, const void* mine, int mcount, MPI_Datatype mtype, const void* all,
                int acount, MPI_Datatype atype, int root, MPI_Comm comm);

// A blocking barrier on 3 to kDirectProcs ranks, fan-in then fan-out: each
// rank tells rank 0 it arrived and waits for its release; rank 0 releases
// all once it has heard from each. Every rank needs the CPU twice at most,
// where the dissemination schedule needs every rank scheduled in each of
// its rounds, each depending on another rank's previous one (what costs
// when ranks share cores); with a core per rank both take two hops at 4
// ranks and three against two at 8. On 2 ranks the schedule's single
// exchange stays (one hop, not two).
// The release carries what rank 0 saw: 0, or 1 + the rank whose arrival
// failed, so that every rank reports that failure (MPI_ERR_PROC_FAILED
// naming it) rather than some completing and others naming rank 0.
inline bool direct_barrier_ok(const call& x) { return x.blocking && !x.inter && x.size >= 3 && x.size <= kDirectProcs; }
void direct_barrier(call& x);

// MPI_Ibarrier through the shared-memory area of x's communicator, when it
// has one already (shm.hpp: every member reaches that state at the same
// collective, so all take this path alike): the arrival is published now
// and *req completes once every member's is there (MPI_ERR_PROC_FAILED
// naming a member found dead before it arrived). False, with nothing
// done, when the communicator has no area yet or none at all; the
// schedule serves then.
bool shm_ibarrier(call& x, MPI_Request* req);

// MPI_Iallreduce, and the persistent MPI_Allreduce_init, through the
// shared-memory area (shmcoll::iallreduce) under the same condition as
// shm_ibarrier, for contiguous operands of 1 to shmcoll::kBigBytes bytes (as the blocking one)
// (mine may be result): a non-blocking call publishes its operand now; a
// persistent one makes an inactive request that does so at each MPI_Start.
// Completion is a look at the other ranks' slots (MPI_Test/Wait),
// MPI_ERR_PROC_FAILED naming a member found dead before it published.
// False, with nothing done, when the conditions do not hold.
bool shm_iallreduce(call& x, const std::byte* mine, std::byte* result, std::size_t bytes, std::size_t count,
                    bool contig, MPI_Request* req);
// MPI_Finalize: advances every started one (freed requests too) once;
// true when all are done.
bool shm_iallreduce_finish_all();

}  // namespace nmad::mpi::coll_call
