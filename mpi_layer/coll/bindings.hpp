#pragma once
// What the MPI collective bindings of this folder share among themselves
// (not the engine: algorithms, schedule, hierarchy, progress_hook and
// session_transport know nothing of MPI). The rest of the MPI layer reaches
// collectives only through mpi_impl.hpp's three entry points
// (init_world_hosts, coll_finalize, collective_transport), which name the
// engine's types without including its headers: the request and
// point-to-point files do not compile against collectives.
#include <cstddef>
#include <string>

#include "mpi_layer/coll/hierarchy.hpp"
#include "mpi_layer/coll/schedule.hpp"
#include "mpi_layer/mpi_impl.hpp"

namespace nmad::mpi {

// ---- which communicators get hierarchical collectives (hierarchy_select.cpp)
// comm_hierarchy() is the levels of an intracommunicator's ranks (hosts,
// then packages and NUMA nodes inside a host, each kept when it divides
// the group: coll::choose_levels) when NMAD_COLL_HIER selects the
// hierarchical algorithm for that collective, else null (flat
// algorithms). The levels are computed once per communicator; later calls
// read them without a lock. How a hierarchical collective runs is
// coll/hierarchy.hpp's.
enum class hier_coll { barrier, bcast, reduce, allreduce };
// root: the reduce's root (its selection depends on it), else ignored.
const nmad::coll::hierarchy* comm_hierarchy(comm_obj* c, hier_coll which, int root = 0);
// Whether every member of intracommunicator c runs on one host (as
// init_world_hosts learnt; false when that is unknown).
bool comm_on_one_host(const comm_obj& c);

// ---- the collectives' common road (collectives.cpp)
// One exchange between rank 0 of c and every other rank, over the
// engine: rank 0 sends p (bytes) to every rank (root_sends), or receives
// every rank's p into all + rank * bytes. -1, or the rank of a peer whose
// transfer failed (why says how). Collective over c.
int coll_direct_step(comm_obj& c, bool root_sends, std::byte* p, std::size_t bytes, std::byte* all,
                     std::string& why);
// Runs (req null) or starts (MPI_Ixxx) a schedule built for communicator c
// on its collective transport, like every other collective. Returns an
// MPI error code (raised on c).
int launch_schedule(const char* fn, comm_obj* c, coll::schedule&& s, MPI_Request* req);

// ---- persistent collectives (persistent.cpp)
// MPI_<Coll>_init builds its collective by calling the non-blocking form
// with persistent_build set (this thread only): the first collective call
// object made then (call.hpp) takes it over (and clears it, so collectives
// the build itself runs, e.g. a hierarchy's set-up, stay ordinary ones),
// checks the arguments under the _init call's name, builds the schedule
// once and makes an INACTIVE persistent request of it instead of starting
// it (launch). Each MPI_Start replays that schedule (executor::restart)
// under the communicator's next sequence number.
struct persistent_build {
  const char* fn;  // the _init call's name
};
extern thread_local persistent_build* g_persistent_build;
// Whether a persistent build is pending on this thread (neighbor.cpp:
// non-contiguous send blocks are packed again at each start).
inline bool persistent_building() { return g_persistent_build != nullptr; }

// MPI_<Coll>_init(_c) named fn: checks the communicator, request and info,
// then runs build (a call of the collective's non-blocking form, given the
// request pointer) as the persistent build of fn. Shared by the int
// (persistent.cpp) and the large-count (large_count.cpp) forms.
template <class Build>
int persistent_init(const char* fn, MPI_Comm comm, MPI_Info info, MPI_Request* request, Build build) {
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  comm_obj* c = lookup_comm(comm);
  if (!c) return mpi_raise_handle(fn, comm, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm));
  if (!request) return mpi_raise(fn, c, MPI_ERR_ARG, "null request");
  if (info != MPI_INFO_NULL && !info_get_entries(info))
    return mpi_raise(fn, c, MPI_ERR_INFO, "invalid info handle " + std::to_string(info));
  persistent_build pb{fn};
  g_persistent_build = &pb;
  const int e = build(request);
  g_persistent_build = nullptr;  // (cleared already when a collective call took it over)
  return e;
}

}  // namespace nmad::mpi
