// Environment management: MPI_Init*, MPI_Finalize, MPI_Abort, timers,
// version and processor name.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>

#include "mpi_layer/mpi_impl.hpp"

namespace nmad::mpi {

// Never destroyed: a program that forgets MPI_Finalize must not run the
// session's collective shutdown from a static destructor.

}  // namespace nmad::mpi

using namespace nmad::mpi;

namespace nmad::mpi {

std::mutex& library_mutex() {
  static std::mutex m;
  return m;
}

int start_library(const char* fn, int required) {
  state& s = st();
  nmad::session_options o;
  // Matching order per (peer, communicator context), whatever the tag.
  o.ordering_mask = kContextMask;
  // The engine is told what the application promises about its threads.
  o.threads = required >= MPI_THREAD_MULTIPLE  ? nmad::thread_level::multiple
              : required == MPI_THREAD_SERIALIZED ? nmad::thread_level::serialized
              : required == MPI_THREAD_FUNNELED   ? nmad::thread_level::funneled
                                                  : nmad::thread_level::single;
  s.mu.enable(o.threads == nmad::thread_level::multiple);
  try {
    s.session = nmad::session::create(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nmad MPI: %s: MPI_ERR_OTHER: could not start the engine: %s\n", fn, e.what());
    std::fflush(stderr);
    std::_Exit(1);
  }
  // A progress thread runs completion callbacks and collective schedules
  // while the application runs: the MPI layer's tables need their lock.
  if (s.session->has_progress_thread()) s.mu.enable(true);
  s.world_rank = s.session->rank();
  s.world_size = s.session->size();
  s.thread_level = required < MPI_THREAD_SINGLE ? MPI_THREAD_SINGLE
                   : required > MPI_THREAD_MULTIPLE ? MPI_THREAD_MULTIPLE
                                                    : required;
  s.main_thread = std::this_thread::get_id();
  s.t0 = std::chrono::steady_clock::now();
  init_comms(s.world_rank, s.world_size);
  init_info_env(s.thread_level);
  s.initialized.store(true);
  init_world_hosts();  // an allgather over MPI_COMM_WORLD (needs the above)
  return s.thread_level;
}

void stop_library() {
  state& s = st();
  // MPI-3.1 8.7.1: first, as if MPI_COMM_SELF were freed: the delete
  // callbacks of its attributes run (last set first) while MPI is usable.
  if (comm_obj* self = lookup_comm(MPI_COMM_SELF)) {
    std::string detail;
    if (int e = delete_attrs(*self, detail)) mpi_raise("MPI_Finalize", self, e, detail);
  }
  bsend_flush();
  // Pending non-blocking collectives are finished (or abandoned) and their
  // progress hook removed while the session still exists (coll/collectives.cpp).
  coll_finalize();
  io::io_finalize();  // the same for non-blocking collective file accesses (file/twophase_progress.cpp)
  // Receives still posted can never complete: withdraw them so the engine
  // does not write into memory the program may free.
  {
    std::lock_guard g(s.mu);
    for (auto& r : s.requests)
      if (r && r->active && !r->local_done && r->type == request_obj::kind::recv) s.session->cancel(r->engine);
  }
  s.session.reset();  // flushes sends, fences with every rank, closes
  s.finalized.store(true);
  {
    std::lock_guard g(s.mu);
    s.requests.clear();
    s.free_requests.clear();
    std::lock_guard z(s.zombie_mu);
    s.zombies.clear();
    s.nzombies.store(0);
    s.messages.clear();
  }
}

}  // namespace nmad::mpi

namespace {

int init_common(const char* fn, int required, int* provided) {
  state& s = st();
  std::lock_guard lib(library_mutex());
  if (s.world_initialized.load() || s.finalized.load()) {
    std::fprintf(stderr, "nmad MPI: %s: MPI_ERR_OTHER: %s\n", fn,
                 s.world_finalized.load() || s.finalized.load() ? "MPI cannot be initialised again after MPI_Finalize"
                                                                : "MPI is already initialised");
    return MPI_ERR_OTHER;
  }
  // Started already by a session: the world model joins it, at the
  // thread level the library runs at.
  const int level = s.initialized.load() ? s.thread_level : start_library(fn, required);
  if (provided) *provided = level;
  s.world_initialized.store(true);
  return MPI_SUCCESS;
}

}  // namespace

extern "C" {

int PMPI_Init(int* argc, char*** argv) { return init_common("MPI_Init", MPI_THREAD_SINGLE, nullptr); }

int PMPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  return init_common("MPI_Init_thread", required, provided);
}

int PMPI_Finalize(void) {
  deliver_tool_events();  // what MPI_T events are still queued, while MPI calls still work
  state& s = st();
  if (!check_initialized("MPI_Finalize")) return MPI_ERR_OTHER;
  // The library runs for sessions only.
  if (!s.world_initialized.load() || s.world_finalized.load()) {
    std::fprintf(stderr, "nmad MPI: MPI_Finalize: MPI_ERR_OTHER: %s\n",
                 s.world_finalized.load() ? "called after MPI_Finalize" : "called without MPI_Init (only sessions are open)");
    return MPI_ERR_OTHER;
  }
  std::lock_guard lib(library_mutex());
  // Sessions still open keep the library up; the world model ends here.
  if (s.open_sessions == 0) stop_library();
  s.world_finalized.store(true);
  return MPI_SUCCESS;
}

int PMPI_Initialized(int* flag) {
  if (!flag) return MPI_ERR_ARG;
  *flag = st().world_initialized.load() ? 1 : 0;
  return MPI_SUCCESS;
}

int PMPI_Finalized(int* flag) {
  if (!flag) return MPI_ERR_ARG;
  *flag = st().world_finalized.load() ? 1 : 0;
  return MPI_SUCCESS;
}

int PMPI_Abort(MPI_Comm comm, int errorcode) {
  state& s = st();
  std::string msg = "rank " + std::to_string(s.world_rank) + " called MPI_Abort(" +
                    (comm == MPI_COMM_WORLD ? std::string("MPI_COMM_WORLD") : std::to_string(comm)) + ", " +
                    std::to_string(errorcode) + ")";
  std::fprintf(stderr, "nmad MPI: %s\n", msg.c_str());
  std::fflush(stderr);
  // Exit statuses are 8 bits; a code that would read as success becomes 1.
  int code = errorcode & 0xff;
  if (code == 0) code = 1;
  if (s.session && !s.finalized.load()) s.session->abort(code, msg);
  std::_Exit(code);
}

int PMPI_Query_thread(int* provided) {
  if (!check_initialized("MPI_Query_thread")) return MPI_ERR_OTHER;
  if (!provided) return mpi_raise("MPI_Query_thread", nullptr, MPI_ERR_ARG, "null provided");
  *provided = st().thread_level;
  return MPI_SUCCESS;
}

int PMPI_Is_thread_main(int* flag) {
  if (!check_initialized("MPI_Is_thread_main")) return MPI_ERR_OTHER;
  if (!flag) return mpi_raise("MPI_Is_thread_main", nullptr, MPI_ERR_ARG, "null flag");
  *flag = std::this_thread::get_id() == st().main_thread ? 1 : 0;
  return MPI_SUCCESS;
}

double PMPI_Wtime(void) {
  // Seconds since a fixed point of this process (MPI_Init); monotonic.
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - st().t0).count();
}

double PMPI_Wtick(void) {
  timespec ts{};
  if (clock_getres(CLOCK_MONOTONIC, &ts) == 0 && (ts.tv_sec > 0 || ts.tv_nsec > 0))
    return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
  return 1e-9;
}

int PMPI_Get_processor_name(char* name, int* resultlen) {
  if (!name || !resultlen) return mpi_raise("MPI_Get_processor_name", nullptr, MPI_ERR_ARG, "null argument");
  char host[MPI_MAX_PROCESSOR_NAME] = {};
  if (gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "localhost");
  host[sizeof host - 1] = '\0';
  std::strcpy(name, host);
  *resultlen = static_cast<int>(std::strlen(host));
  return MPI_SUCCESS;
}

int PMPI_Get_version(int* version, int* subversion) {
  if (!version || !subversion) return MPI_ERR_ARG;
  *version = MPI_VERSION;
  *subversion = MPI_SUBVERSION;
  return MPI_SUCCESS;
}

int PMPI_Get_library_version(char* version, int* resultlen) {
  if (!version || !resultlen) return MPI_ERR_ARG;
#define NMAD_STR2(x) #x
#define NMAD_STR(x) NMAD_STR2(x)
  static const char text[] = "nmad MPI 0.1 (MPI " NMAD_STR(MPI_VERSION) "." NMAD_STR(MPI_SUBVERSION) " over the nmad communication engine)";
#undef NMAD_STR
#undef NMAD_STR2
  std::memcpy(version, text, sizeof text);
  *resultlen = static_cast<int>(sizeof text - 1);
  return MPI_SUCCESS;
}

}  // extern "C"

// The public names: weak aliases, so profiling tools can interpose.
#pragma weak MPI_Init = PMPI_Init
#pragma weak MPI_Init_thread = PMPI_Init_thread
#pragma weak MPI_Finalize = PMPI_Finalize
#pragma weak MPI_Initialized = PMPI_Initialized
#pragma weak MPI_Finalized = PMPI_Finalized
#pragma weak MPI_Abort = PMPI_Abort
#pragma weak MPI_Query_thread = PMPI_Query_thread
#pragma weak MPI_Is_thread_main = PMPI_Is_thread_main
#pragma weak MPI_Wtime = PMPI_Wtime
#pragma weak MPI_Wtick = PMPI_Wtick
#pragma weak MPI_Get_processor_name = PMPI_Get_processor_name
#pragma weak MPI_Get_version = PMPI_Get_version
#pragma weak MPI_Get_library_version = PMPI_Get_library_version
