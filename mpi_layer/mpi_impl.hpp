#pragma once
// Private state of the MPI layer (not installed).
//
// The layer is a thin translation onto one nmad::session per process:
//   * engine tag = (context id << 32) | (uint32) MPI tag; MPI_ANY_TAG masks
//     the low 32 bits out; MPI_ANY_SOURCE is nmad::any_source. The session's
//     ordering mask keeps only the context bits, so messages are matched in
//     send order per (peer, communicator) even with MPI_ANY_TAG, as MPI's
//     non-overtaking rule requires.
//   * every communicator owns a context *slot* i: p2p context 2i and
//     collective (internal) context 2i+1. Slots are agreed at creation from
//     the parent's members' used-slot masks (see comm_context.cpp).
//   * handles are small ints indexing tables below; objects never move
//     (unique_ptr), so a pointer looked up under `mu` stays valid without
//     it. Blocking waits never hold `mu`. Lock order: mu, then the engine's.
#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <cstdint>
#include <list>
#include <map>
#include <tuple>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api/nmad/layer.hpp"
#include "api/nmad/nmad.hpp"
#include "mpi_layer/datatype/datatype.hpp"
#include "mpi_layer/include/mpi.h"

// The collective engine and bindings (mpi_layer/coll/) by name only: this
// header, and the request and point-to-point files, do not depend on them.
namespace nmad::coll {
class hierarchy;
class session_transport;
}

namespace nmad::mpi {
namespace shmcoll {
class area;
}

constexpr int kContextSlots = 1024;
constexpr nmad::tag_t kContextMask = 0xFFFFFFFF00000000ULL;

// Internal tags on a communicator's collective context.
constexpr int kTagGather = 1;
constexpr int kTagBcast = 2;

inline nmad::tag_t engine_tag(std::uint32_t ctx, int tag) {
  return (static_cast<nmad::tag_t>(ctx) << 32) | static_cast<std::uint32_t>(tag);
}
inline nmad::tag_t engine_mask(int tag) { return tag == MPI_ANY_TAG ? kContextMask : nmad::full_mask; }

struct bsend_pool;  // below

struct comm_obj {
  MPI_Comm handle = MPI_COMM_NULL;
  int slot = -1;                 // context slot (p2p 2*slot, coll 2*slot+1)
  std::uint32_t p2p_ctx = 0, coll_ctx = 0;
  int rank = 0;                  // this process's rank in the communicator
  std::vector<int> world_of;     // comm rank -> world rank
  std::vector<int> comm_of;      // world rank -> comm rank (-1: not a member)
  MPI_Errhandler errhandler = MPI_ERRORS_ARE_FATAL;
  bool freed = false;
  // Intercommunicators: world_of/comm_of describe the REMOTE group (the
  // ranks point-to-point calls name); `rank` and local_world_of the local
  // group. Intracommunicators leave local_world_of empty.
  bool inter = false;
  std::vector<int> local_world_of;
  std::string name;              // MPI_Comm_set_name (guarded by state::mu)
  std::vector<std::pair<std::string, std::string>> hints;  // MPI_Comm_set_info (mu)
  // The "nmad_priority" hint (0 to 255, default 0): the engine priority
  // (nmad::send_options::priority) of every point-to-point send started on
  // this communicator from then on (Send, Isend, persistent Start, Sendrecv).
  // Set by MPI_Comm_set_info / MPI_Comm_dup_with_info, inherited by
  // MPI_Comm_dup; collectives do not use it. Read without the lock.
  std::atomic<std::uint8_t> send_priority{0};
  // Cached attributes (keyval, value) in the order they were first set;
  // guarded by attr_mutex() (attr.cpp), never held across user callbacks.
  std::vector<std::pair<int, void*>> attrs;
  // MPI_Comm_idup: the handle exists from the call on, but lookup_comm
  // finds it only once its context is agreed (ready, set with release).
  std::atomic<bool> ready{true};
  int nb_seq = 0;                // idups started on this communicator (mu)
  // Partitioned communication: MPI_Psend_init/MPI_Precv_init calls made so
  // far per (peer, tag, 0 send / 1 receive) (mu). The k-th send init to a
  // peer with a tag pairs with that peer's k-th receive init with it.
  std::map<std::tuple<int, int, int>, std::uint32_t> part_inits;
  // comm_hierarchy()'s levels (coll/bindings.hpp), made on first use under
  // coll/hierarchy_select.cpp's mutex;
  // hier_known (set with release after hier) lets later calls skip it.
  std::shared_ptr<const nmad::coll::hierarchy> hier;
  std::atomic<bool> hier_known{false};
  // The collectives' transport (coll/collectives.cpp's transport_of), made on the
  // first collective under mu and read without it from then on (two
  // collectives on one communicator at once are erroneous). Dropped at
  // MPI_Finalize, before the session.
  std::shared_ptr<nmad::coll::session_transport> coll_transport;
  // The shared-memory collectives' area (coll/shm.hpp), made by the first
  // eligible collective: shm_state 0 not tried yet, 1 ready, 2 none.
  std::shared_ptr<shmcoll::area> shm_area;
  std::atomic<int> shm_state{0};
  // MPI_Comm_attach_buffer's buffer (null: none; mu), and the session the
  // communicator derives from (MPI_Comm_create_from_group of a group from
  // MPI_Group_from_session_pset; MPI_SESSION_NULL otherwise), whose buffer
  // its buffered sends use when it has none of its own.
  std::shared_ptr<bsend_pool> bsend;
  int session = 0;
  // The remote group's size for p2p ranks; local_size() is MPI_Comm_size.
  int size() const { return static_cast<int>(world_of.size()); }
  int local_size() const { return inter ? static_cast<int>(local_world_of.size()) : size(); }
  const std::vector<int>& local_members() const { return inter ? local_world_of : world_of; }
};

enum class send_mode { standard, synchronous, ready, buffered };

// The engine options of a point-to-point send on c (its priority hint).
inline nmad::send_options send_options_of(const comm_obj& c, nmad::send_flags flags = nmad::send_flags::none) {
  return nmad::send_options{flags, c.send_priority.load(std::memory_order_relaxed)};
}

struct request_obj {
  // send/recv: an engine operation. generic: anything else that completes
  // asynchronously (non-blocking collectives, MPI_Comm_idup): `poll`
  // advances it and returns true once done, having filled local_status.
  enum class kind { send, recv, generic };
  nmad::request engine;          // the engine operation, when one was started
  int handle = 0;
  kind type = kind::send;
  send_mode mode = send_mode::standard;
  bool persistent = false;
  bool active = false;           // started and not yet completed by Wait/Test
  bool local_done = false;       // completed without an engine operation
  bool freed = false;            // MPI_Request_free'd while active
  bool live = false;             // handle in use (not on the free list)
  // Parameters (persistent requests restart with them).
  const void* sbuf = nullptr;
  void* rbuf = nullptr;
  MPI_Count count = 0;           // MPI_Count: the _c bindings' counts too
  MPI_Datatype type_handle = MPI_BYTE;
  std::size_t bytes = 0;
  int peer = 0;                  // comm rank, MPI_ANY_SOURCE or MPI_PROC_NULL
  int tag = 0;
  comm_obj* comm = nullptr;
  MPI_Status local_status{};     // for local_done and generic completions
  // Hooks (reset when the request is released):
  //  poll         generic requests: advance, true once done (never blocks).
  //  on_complete  runs once when Wait/Test completes the request, before
  //               its status is read (e.g. unpacks a staged non-contiguous
  //               receive into the user's buffer); returns an MPI error code
  //               (detail: its text). Generic requests set local_status here
  //               or in poll.
  //  on_cancel    generic requests: MPI_Cancel (null: not cancellable);
  //               returns an MPI error code (detail: its text).
  //  on_status    generic requests: the status MPI_Request_get_status
  //               reports for a done request that stays active (null:
  //               local_status); returns its error code.
  //  on_free      generic requests: MPI_Request_free takes this instead of
  //               its own handling (null: none); it owns the request's
  //               release from then on. Returns an MPI error code.
  //  on_start     persistent generic requests (persistent collectives):
  //               MPI_Start runs it after making the request active;
  //               returns an MPI error code (raised by the caller).
  //  extra        state the hooks keep alive (staging buffer, executor...).
  // Partitioned communication (partitioned.cpp): extra holds its state.
  enum class part_kind : std::uint8_t { none, send, recv };
  part_kind partitioned = part_kind::none;
  // Generic requests that complete on memory other processes write (the
  // shared-memory collectives' MPI_Ibarrier, MPI_Iallreduce and persistent
  // MPI_Allreduce): no driver event announces it, so a wait on one polls
  // (session progress, which yields when contended) instead of sleeping
  // on the drivers.
  bool memory_completion = false;
  std::function<bool(request_obj&)> poll;
  std::function<int(request_obj&)> on_start;
  std::function<int(request_obj&, std::string& detail)> on_complete;
  std::function<int(request_obj&, std::string& detail)> on_cancel;
  std::function<int(request_obj&, MPI_Status* status, std::string& detail)> on_status;
  std::function<int(request_obj&, std::string& detail)> on_free;
  std::shared_ptr<void> extra;
};

// Matched-message handles (MPI_Mprobe): MPI_MESSAGE_NULL 0 and
// MPI_MESSAGE_NO_PROC 1 are predefined, message i of state::messages is
// handle i + kFirstMessageHandle.
constexpr int kFirstMessageHandle = 2;

// Error handlers: MPI_ERRORS_ARE_FATAL 1, MPI_ERRORS_RETURN 2,
// MPI_ERRORS_ABORT 3 are predefined; user handler i is handle i + 4.
constexpr int kFirstUserErrhandler = 4;

struct message_obj {
  nmad::message_handle engine;
  comm_obj* comm = nullptr;
  int source = 0;                // comm rank
  int tag = 0;
  std::size_t bytes = 0;
  bool in_use = false;
};

struct bsend_record {
  nmad::request req;
  std::size_t offset = 0, len = 0;  // region of the attached buffer
  std::unique_ptr<std::byte[]> owned;  // MPI_BUFFER_AUTOMATIC: the message's own copy
};

// An attached buffer for buffered sends (bsend.cpp): the process's
// (MPI_Buffer_attach), a session's or a communicator's (MPI 4.1). Exists
// while attached; its fields are guarded by state::mu.
struct bsend_pool {
  std::byte* buf = nullptr;
  std::size_t size = 0;
  bool automatic = false;          // MPI_BUFFER_AUTOMATIC: each message allocated apart
  std::list<bsend_record> records;  // in flight, in offset order of allocation
};

// A mutex that MPI_Init turns off when the application promised that only
// one thread at a time calls MPI (below MPI_THREAD_MULTIPLE): the tables it
// guards are then reached without any atomic operation.
class table_mutex {
 public:
  void enable(bool on) { _on = on; }
  void lock() {
    if (_on) _m.lock();
  }
  bool try_lock() { return !_on || _m.try_lock(); }
  void unlock() {
    if (_on) _m.unlock();
  }

 private:
  bool _on = true;
  std::mutex _m;
};

struct state {
  std::unique_ptr<nmad::session> session;
  // initialized/finalized: the library is up (MPI_Init or a first
  // MPI_Session_init started the engine) / shut down for good. The world
  // model (MPI_Initialized, MPI_Finalized) has flags of its own: sessions
  // may precede MPI_Init and outlive MPI_Finalize (session.cpp).
  std::atomic<bool> initialized{false}, finalized{false};
  std::atomic<bool> world_initialized{false}, world_finalized{false};
  int open_sessions = 0;         // MPI_Session_init'ed, not finalized (under env's lock)
  int thread_level = MPI_THREAD_SINGLE;
  std::thread::id main_thread;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  int world_rank = 0, world_size = 1;

  // MPI_COMM_WORLD and MPI_COMM_SELF (indexes 1 and 2), looked up without `mu`.
  std::atomic<comm_obj*> predefined_comms[3] = {};

  table_mutex mu;  // guards every table below (a no-op below MPI_THREAD_MULTIPLE)
  std::vector<std::unique_ptr<comm_obj>> comms;        // index = handle
  // Context slots in use; guarded by comm_context.cpp's slot lock (a leaf
  // lock, also taken from engine progress), not by mu.
  std::vector<std::uint32_t> used_slots = std::vector<std::uint32_t>(kContextSlots / 32, 0);
  std::vector<std::unique_ptr<request_obj>> requests;  // index = handle - 1
  std::vector<int> free_requests;
  // Requests MPI_Request_free'd while active (own lock: a progress task
  // visits them with the engine's lock held; see request.cpp).
  std::mutex zombie_mu;
  std::vector<request_obj*> zombies;
  std::atomic<std::size_t> nzombies{0};
  std::atomic<bool> zombie_task{false};
  std::vector<std::unique_ptr<message_obj>> messages;  // index = handle - 1
  std::vector<MPI_Comm_errhandler_function*> errhandlers;  // index = handle - kFirstUserErrhandler

  // Buffered sends: the process's buffer (MPI_Buffer_attach; null: none)
  // and the sessions' (MPI_Session_attach_buffer), by session handle.
  std::shared_ptr<bsend_pool> bsend;
  std::map<int, std::shared_ptr<bsend_pool>> session_bsends;
};

// The process's MPI state (never destroyed: threads may still be inside
// MPI calls at exit). Inline: every MPI call starts here.
// Hidden: its static is reached PC-relative, not through the GOT (it is
// the first load of every call).
[[gnu::always_inline, gnu::visibility("hidden")]] inline state& st() {
  static state* const s = new state();
  return *s;
}

// ---- errors (errors.cpp) ----
// Reports `code` from function `fn` on communicator c (null: MPI_COMM_WORLD's
// handler): ERRORS_ARE_FATAL prints "fn: MPI_ERR_X: text (detail)" and ends
// the job; ERRORS_RETURN returns code; a user handler is called first.
int mpi_raise(const char* fn, comm_obj* c, int code, const std::string& detail = {});
// The same with a fixed text: out of line, so that a call site with a
// literal detail builds no string (and needs no stack frame for one).
[[gnu::cold]] int mpi_raise(const char* fn, comm_obj* c, int code, const char* detail);
int mpi_raise_handle(const char* fn, MPI_Comm c, int code, const std::string& detail = {});
// The same on an object that is not a communicator (files): handler h,
// `handle` passed to a user handler.
int mpi_raise_on(const char* fn, MPI_Errhandler h, int handle, int code, const std::string& detail = {});
// MPI_ERRORS_ARE_FATAL, MPI_ERRORS_RETURN or a created handler.
bool valid_errhandler(MPI_Errhandler h);
// Makes a user error handler (errors.cpp): MPI_Comm/Session/File/Win_create_errhandler.
int create_errhandler(const char* fn, MPI_Comm_errhandler_function* f, MPI_Errhandler* errhandler);
const char* error_name(int code);
const char* error_text(int code);
int from_errc(nmad::errc e);
// MPI_LASTUSEDCODE's value (grows with MPI_Add_error_class/code), and
// whether a code is known (predefined or added): attribute callbacks'
// return values are passed on as is when they are.
int* last_used_error_code();
bool valid_error_code(int code);
// Fails (fatally: nothing can be returned to) when MPI is not initialised.
[[gnu::cold, gnu::noinline]] bool check_initialized_slow(const char* fn);
[[gnu::always_inline]] inline bool check_initialized(const char* fn) {
  const state& s = st();
  if (s.initialized.load(std::memory_order_acquire) && !s.finalized.load(std::memory_order_acquire)) return true;
  return check_initialized_slow(fn);
}

// ---- library start and shutdown (env.cpp), shared by the world model
// and sessions (session.cpp). Both under library_mutex().
std::mutex& library_mutex();
// Starts the engine and the library's objects at thread level `required`
// (clamped); exits the process if the engine cannot start. Returns the
// level provided.
int start_library(const char* fn, int required);
// Shuts the library down (collective with every process's engine).
void stop_library();

// ---- datatypes (datatype/datatype_bindings.cpp) ----
// Handles: predefined types are 1..kLastPredefinedType with
// handle == BasicType + 1 (see mpi.h); derived types get handles from
// kFirstDerivedType up.
constexpr int kLastPredefinedType = kNumBasicTypes;
constexpr int kFirstDerivedType = 64;
// The basic type of a predefined handle (nullopt: not a predefined handle).
inline std::optional<BasicType> basic_of(MPI_Datatype t) {
  if (t >= 1 && t <= kLastPredefinedType) return static_cast<BasicType>(t - 1);
  return std::nullopt;
}
// The datatype behind any valid handle (predefined or derived, committed or
// not); a null Datatype if the handle is invalid or freed. Thread-safe.
Datatype type_of(MPI_Datatype t);
// Size in bytes of one element of a predefined datatype, or -1 if the
// handle is not predefined (fast path, no lock).
extern int g_predefined_type_size[kLastPredefinedType + 1];  // [0] = -1; filled at load time
inline int type_size(MPI_Datatype t) {
  return (t >= 1 && t <= kLastPredefinedType) ? g_predefined_type_size[t] : -1;
}
// Bytes of one element of a predefined datatype whose elements are
// contiguous (size == extent), so count of them are count * size bytes
// straight from the buffer; -1 for any other handle, including the padded
// MINLOC/MAXLOC pairs (MPI_SHORT_INT, MPI_DOUBLE_INT, MPI_LONG_INT,
// MPI_LONG_DOUBLE_INT), which are packed like derived types. The point-to-
// point fast paths use this, not type_size.
extern int g_plain_type_size[kLastPredefinedType + 1];  // [0] = -1; filled at load time
inline int plain_size(MPI_Datatype t) {
  return (t >= 1 && t <= kLastPredefinedType) ? g_plain_type_size[t] : -1;
}
// Derived handle table (datatype/datatype_bindings.cpp): registers a type under a new (or
// recycled) handle >= kFirstDerivedType.
MPI_Datatype register_type(Datatype d);
// The same for a type MPI calls predefined though it is made at run time
// (MPI_Type_create_f90_*): MPI_Type_free refuses it, get_contents returns
// its handle as it is.
MPI_Datatype register_predefined_type(Datatype d);
// A predefined handle: basic, or registered by register_predefined_type.
bool is_predefined_type(MPI_Datatype t);
// The predefined handle (basic or F90) of d, else MPI_DATATYPE_NULL.
MPI_Datatype predefined_handle_of(const Datatype& d);
// type_of(t), or throws DatatypeError{invalid_datatype} naming `what`.
Datatype need_type(MPI_Datatype t, const char* what);
// "MPI_INT", "datatype 65", "MPI_DATATYPE_NULL": for error details.
std::string type_handle_text(MPI_Datatype t);
// MPI class of a datatype engine error (pack: buffer_too_small is
// MPI_ERR_NO_SPACE; unpack passes unpacking = true: MPI_ERR_TRUNCATE).
int datatype_error_class(const DatatypeError& e, bool unpacking = false);
// The MPI_COMBINER_* constant of an engine combiner.
int mpi_combiner_of(Combiner c);

// Communication with any datatype (p2p.cpp, request.cpp). Predefined types
// keep their fast path (no lock, no allocation): callers test
// type_size(t) >= 0 first and only use what follows for derived types.
//
// Validates (count, datatype, buf) of a send or receive: count >= 0, a live
// datatype, committed (else MPI_ERR_TYPE), buf non-null when data moves
// (predefined types only: derived types may use MPI_BOTTOM with absolute
// displacements). Returns 0 or an MPI class with detail set.
int check_comm_buffer(MPI_Count count, MPI_Datatype t, const void* buf, std::string& detail);
// The datatype of a handle for communication: live and committed, else
// MPI_ERR_TYPE with detail.
int lookup_comm_type(MPI_Datatype t, Datatype& out, std::string& detail);

// Send side: `count` elements that form one contiguous block go in place
// (ptr = buf + true_lb, no copy; also large messages, which then take the
// engine's zero-copy rendezvous); other layouts are packed into `stage`
// (created, or reused when non-null), which must live until the engine send
// completes. A gather (iovec) send in the engine would remove this staging
// copy: Datatype::for_each_block(_range) yields the memory blocks directly.
struct send_stage {
  std::vector<std::byte> bytes;
};
int resolve_send(const void* buf, MPI_Count count, const Datatype& d, const void*& ptr, std::size_t& bytes,
                 std::shared_ptr<send_stage>& stage, std::string& detail);
// Receive side: contiguous layouts receive in place (stage reset to null);
// others receive into stage->bytes (created or reused) and stage->finish()
// unpacks what arrived into the user's buffer. (A scatter receive in the
// engine would remove this copy too.)
struct recv_stage {
  Datatype type;
  void* user = nullptr;
  MPI_Count count = 0;
  std::vector<std::byte> bytes;
  // Unpacks the first min(received, capacity) bytes: a shorter message
  // fills a prefix of the elements (the last one possibly partly), a
  // truncated one the bytes that fit. Returns an MPI error code (detail set).
  int finish(std::size_t received, std::string& detail);
  // The hook for a completed engine receive: unpacks unless it failed
  // (cancelled, dead peer); truncation still unpacks what fit.
  int finish(const nmad::request& engine, std::string& detail);
};
int resolve_recv(void* buf, MPI_Count count, const Datatype& d, void*& ptr, std::size_t& bytes,
                 std::shared_ptr<recv_stage>& stage, std::string& detail);
// What a send/recv request on a derived datatype keeps in request_obj::extra
// (released with the request): the type - so that a persistent request
// keeps working after MPI_Type_free of its handle - and the staging of the
// current operation.
struct typed_request {
  Datatype type;
  std::shared_ptr<send_stage> send;
  std::shared_ptr<recv_stage> recv;
};
// Buffered send of a derived datatype: the packed image is written straight
// into the attached buffer (defined in bsend.cpp).
int bsend_typed(const comm_obj& c, const void* buf, MPI_Count count, const Datatype& d, int world_dest,
                nmad::tag_t tag, std::string& detail);

// ---- communicators (comm.cpp) ----
// The communicator behind a handle; null if invalid or freed. The
// predefined communicators are never freed: found without `mu`.
comm_obj* lookup_comm_table(MPI_Comm c);  // any handle, under mu
[[gnu::always_inline]] inline comm_obj* lookup_comm(MPI_Comm c) {
  if (c == MPI_COMM_WORLD || c == MPI_COMM_SELF)
    if (comm_obj* p = st().predefined_comms[c].load(std::memory_order_acquire)) return p;
  return lookup_comm_table(c);
}
// The same, also finding a communicator MPI_Comm_idup is still creating:
// for the local calls that may name it before the idup completes (error
// handler, name), which Open MPI and MPICH accept too; the others wait for
// the request (MPI-3.1 6.4.2 makes using it earlier erroneous).
comm_obj* lookup_comm_or_pending(MPI_Comm c);
void init_comms(int world_rank, int world_size);
// Communicator construction for hwsplit.cpp (MPI_Comm_split_type and the
// MPIX hsplit calls), collective over an intracommunicator's members:
// MPI_Comm_split's agreement (color MPI_UNDEFINED: MPI_COMM_NULL), and an
// allgather of n bytes from every member on its collective context.
// Both return an MPI error code (comm_split raises it, comm_allgather sets
// detail).
int comm_split(const char* fn, comm_obj* parent, int color, int key, MPI_Comm* newcomm);
int comm_allgather(const comm_obj& c, const void* mine, std::size_t n, std::vector<std::byte>& all,
                   std::string& detail);
// This process's host identity (hwsplit.cpp): host name and boot id, or
// its NMAD_EMULATED_HOSTS name. False (detail set) when that knob is bad.
bool host_identity(std::string& id, std::string& detail);
// The package and NUMA node (labels of the machine's objects, or
// topology::hw_spans / hw_absent) this process's binding lies in, with the
// binding rules of MPI_Comm_split_type (NMAD_HW_BINDING, synthetic
// topologies). False (detail set) when the topology or the knob is bad.
bool hw_locate_self(int& package, int& numa, std::string& detail);
// Hierarchical collectives (coll/hierarchy_select.cpp): runs once in
// MPI_Init, an allgather over MPI_COMM_WORLD of every world rank's host
// identity, package and NUMA node, from which each communicator's levels
// are derived (coll/bindings.hpp).
void init_world_hosts();
// A zero-count transfer naming MPI_DATATYPE_NULL: valid with any peer (as
// MPICH accepts it; Open MPI refuses it with a real peer), it moves nothing
// and goes as zero MPI_BYTEs (p2p.cpp, request_persistent.cpp replace the
// type before anything looks at it).
inline bool empty_null_type(MPI_Count count, MPI_Datatype t) { return count == 0 && t == MPI_DATATYPE_NULL; }
// Argument checks shared by p2p calls: 0 or an error code + detail.
int check_buffer(MPI_Count count, MPI_Datatype t, const void* buf, std::string& detail);

// ---- groups (group.cpp) ----
// Groups are ordered lists of world ranks (no dynamic processes). Handles:
// MPI_GROUP_NULL 0, MPI_GROUP_EMPTY 1, others from 2 up (never reused).
// Thread-safe (own lock; never takes state::mu while holding it).
// A handle for a new group with these members (MPI_GROUP_EMPTY if none),
// derived from session `session` (MPI_SESSION_NULL: from the world model).
MPI_Group new_group(std::vector<int> world_ranks, int session = 0);
// The session a valid group derives from (MPI_Group_from_session_pset, and
// the groups and communicators made from its groups); MPI_SESSION_NULL
// otherwise. A communicator made from the group derives from it too.
int group_session(MPI_Group g);
// The members of a valid, unfreed group; nullopt for an invalid handle.
std::optional<std::vector<int>> group_members(MPI_Group g);

// ---- attributes (attr.cpp) ----
// Runs the copy callbacks of `from`'s attributes (in the order they were
// set) and caches the copies on `to` (MPI_Comm_dup/idup). Returns an MPI
// error code (a callback's failure) with detail.
int copy_attrs(comm_obj& from, comm_obj& to, std::string& detail);
// ---- topologies (topo.cpp) ----
// MPI_Comm_dup/idup: the new communicator gets the old one's topology.
void copy_topology(MPI_Comm from, MPI_Comm to);
// Runs the delete callbacks of every attribute of c, last set first, and
// removes them (MPI_Comm_free, Finalize). Stops at the first failure.
int delete_attrs(comm_obj& c, std::string& detail);
// The same for datatype handles: MPI_Type_dup copies (copy callbacks, set
// order), MPI_Type_free deletes (last set first; a failing callback stops
// the free).
int copy_type_attrs(MPI_Datatype from, MPI_Datatype to, std::string& detail);
int delete_type_attrs(MPI_Datatype type, std::string& detail);
// The same for windows (MPI_Win_free), last set first.
int delete_win_attrs(MPI_Win win, std::string& detail);

// ---- the tool interface (mpi_t.cpp, mpi_t_events.cpp) ----
// Whether MPI_T is initialised (MPI_T_init_thread more often than
// MPI_T_finalize).
bool tool_initialized();
// MPI_T's string convention (*len 0 asks for the length).
void tool_give_string(const std::string& s, char* out, int* len);
// MPI_T events: how many event types; the last MPI_T_finalize frees every
// registration. Queued events are delivered at safe points (no lock held,
// the end of blocking and polling calls): tool_event_point's destructor,
// which costs one relaxed load when nothing is queued.
int tool_event_count();
void tool_events_end();
extern std::atomic<bool> g_tool_events_pending;
void deliver_tool_events_slow();
inline void deliver_tool_events() {
  if (g_tool_events_pending.load(std::memory_order_relaxed)) [[unlikely]]
    deliver_tool_events_slow();
}
struct tool_event_point {
  tool_event_point() = default;
  tool_event_point(const tool_event_point&) = delete;
  tool_event_point& operator=(const tool_event_point&) = delete;
  ~tool_event_point() { deliver_tool_events(); }
};

// ---- info (info.cpp) ----
using info_entries = std::vector<std::pair<std::string, std::string>>;
// Fills MPI_INFO_ENV (called by MPI_Init*).
void init_info_env(int thread_level);
std::optional<info_entries> info_get_entries(MPI_Info i);  // nullopt: invalid
MPI_Info new_info(info_entries e);

// ---- requests (request.cpp, request_status.cpp, request_persistent.cpp) ----
// Recycles the MPI_Request_free'd requests that have completed.
void sweep_zombies();
// Appends a new request object to the table and its handle to
// free_requests (mu held).
void grow_requests_locked(state& s);
// A request off the free list (takes mu). Inline: every non-blocking call
// starts here.
[[gnu::always_inline]] inline request_obj* new_request() {
  state& s = st();
  if (s.nzombies.load(std::memory_order_acquire) > 0) sweep_zombies();
  std::lock_guard g(s.mu);
  if (s.free_requests.empty()) grow_requests_locked(s);
  request_obj* r = s.requests[s.free_requests.back() - 1].get();
  s.free_requests.pop_back();
  r->live = true;
  return r;
}
request_obj* lookup_request(MPI_Request h);
void release_request(request_obj* r);  // takes mu
// Runs r's on_complete hook once, if any (MPI_Request_free'd requests).
void run_completion_hook(request_obj& r);
// Starts r with its parameters (send/recv). Returns an MPI error code.
int start_request(request_obj& r);
bool request_done(request_obj& r);
// Whether the request behind a handle is done (MPI_REQUEST_NULL or an
// invalid handle: true), as MPI_Test would see it; makes no progress.
bool handle_done(MPI_Request handle);
// Completes the done request *handle as MPI_Wait would (hook, status with
// its MPI_ERROR, release; *handle becomes MPI_REQUEST_NULL unless
// persistent) without raising: returns the error, detail its text.
int finish_done_request(MPI_Request* handle, MPI_Status* status, std::string& detail);
void empty_status(MPI_Status* s);
// The progress a test call makes (MPI_Test's: rounds of engine progress
// until done(arg) holds or nothing more happens, then the polling
// discipline if it still does not). For test-like calls of other files
// (MPI_Parrived).
void test_progress(bool (*done)(void*), void* arg);
// Translates an engine receive status into an MPI status on comm c.
void fill_status(MPI_Status* s, comm_obj* c, const nmad::recv_status& rs, int error);
// Raises the first error of a multiple completion (Waitall, Testsome,
// Request_get_status_all...) as MPI_ERR_IN_STATUS when the statuses carry
// it, else as itself.
int raise_in_status(const char* fn, comm_obj* c, int first_err, const std::string& detail, bool have_statuses);

// ---- buffered sends (bsend.cpp) ----
// A buffered send on c goes into c's buffer if it has one, else into its
// session's, else into the process's (MPI 4.1 3.6.1).
int bsend_copy(const comm_obj& c, const void* buf, std::size_t bytes, int world_dest, nmad::tag_t tag,
               std::string& detail);
void bsend_flush();  // waits for every buffered send of every buffer (finalize)
// MPI_Comm_free: waits until the messages in c's buffer have left, then
// detaches it.
void bsend_comm_free(comm_obj& c);
// MPI_Session_finalize: the same for the session's buffer.
void bsend_session_end(int session);

// ---- sessions (session.cpp), for the session-specific calls of other files ----
// Whether h is an open session; if not, raises MPI_ERR_SESSION (fatal
// handling, there being no session to raise it on) and sets rc.
bool session_valid(const char* fn, int h, int& rc);
// Raises code on session h's error handler.
int session_raise(const char* fn, int h, int code, const std::string& detail);

// ---- collectives and reduction ops (op/op_bindings.cpp, coll/collectives.cpp) ----
class Op;
// The op behind a handle (predefined 1..14, user ops from 32): false if
// the handle is invalid or freed. Thread-safe.
bool op_of(MPI_Op h, Op& out);
std::string op_display_name(MPI_Op h);  // "MPI_SUM", "user op 33"
// Checks that op h applies to datatype `type` (handle th): predefined ops
// need a type built from one basic type they are defined on (collective:
// MPI_REPLACE/MPI_NO_OP are refused too); user ops take any type. 0 or
// MPI_ERR_OP with a detail naming the op and the type.
int check_op(MPI_Op h, MPI_Datatype th, const Datatype& type, bool collective, Op& out, std::string& detail);
// type_of(h), and MPI_ERR_TYPE unless it is valid and committed.
int check_datatype(MPI_Datatype h, Datatype& out, std::string& detail);
// A predefined op on a predefined datatype it is defined for, in a
// collective (not MPI_REPLACE/MPI_NO_OP): what the short path of a
// zero-count reduction may take without building anything. False only
// means "ask check_op".
bool predefined_reduction_ok(MPI_Op h, MPI_Datatype th);
// MPI_Finalize, before the session goes: finishes (or, after a bounded
// wait, abandons) pending non-blocking collectives and removes their
// progress hook. See coll/collectives.cpp.
void coll_finalize();
// The collective transport of a communicator (made on first use): MPI-IO's
// two-phase exchange runs the collective schedules over it. See
// coll/collectives.cpp.
std::shared_ptr<nmad::coll::session_transport> collective_transport(comm_obj& c);
namespace io {
// MPI_Finalize, after coll_finalize: finishes (bounded by
// NMAD_COLL_FINALIZE_TIMEOUT_MS) the non-blocking collective file accesses
// nobody waited for and removes their progress task. See file/twophase_progress.cpp.
void io_finalize();
}  // namespace io

}  // namespace nmad::mpi
