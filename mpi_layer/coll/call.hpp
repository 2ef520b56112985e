#pragma once
// One MPI collective call, as every binding of this folder builds it: the
// call's arguments checked and turned into byte ranges, a schedule built
// over them, then run (blocking) or handed to the progress hook
// (MPI_Ixxx). collectives.cpp holds the collectives themselves, direct.hpp
// the small blocking ones that skip the schedule, inter.hpp the phases of
// intercommunicator collectives, call.cpp what is defined once (the
// transports, the reducers, the launch and MPI_Finalize's part).
//
// TRANSPORTS. Each communicator gets one coll::session_transport, made on
// first use: its members in comm-rank order and a base tag of
// (0x800000 | collective context) << 40, whose high bit keeps collective
// traffic apart from every point-to-point and internal context (< 2^31).
// Blocking and non-blocking collectives share it, so next_sequence(), called
// when a collective is started, numbers them consistently on every member
// (MPI: all members start the collectives of a communicator in the same
// order). A pending non-blocking collective holds its transport
// (shared_ptr): MPI_Comm_free while it is pending lets it finish normally.
//
// DATATYPES. Contiguous types (Datatype::is_contiguous) are used in place:
// byte pointer = buffer + true_lb. Non-contiguous ones are packed into a
// schedule temporary when the collective starts (send side, and the receive
// side's current content when it is also input: MPI_IN_PLACE) and unpacked
// by a final `call` step of the schedule (receive side), so a non-blocking
// collective unpacks when it completes, on whichever thread finishes it.
// Reductions of packed operands: predefined ops run on the packed image
// (Op::reduce_packed rules, types built from one basic type); user ops on
// non-contiguous types get both operands unpacked into temporaries with the
// type's layout (count * extent), then the result is packed back.
//
// NON-BLOCKING. MPI_Ixxx builds the same schedule, wraps its executor in a
// generic request (poll = executor::advance, on_complete = status) and hands
// it to the ONE coll::progress_hook of the session, so progress made by any
// MPI call (or, later, an engine progress thread) advances it too.
// MPI_Request_free on a pending collective: the request becomes a zombie
// that request.cpp recycles once the executor is done (the hook keeps
// advancing it meanwhile).
//
// MPI_FINALIZE with pending non-blocking collectives (erroneous in MPI, but
// must not hang or crash): coll_finalize() first progresses them until done
// (every member is expected to have started them), for at most
// NMAD_COLL_FINALIZE_TIMEOUT_MS (default 10000) ms; those still pending are
// then abandoned (executor::abandon: receives cancelled) and deliberately
// kept alive, never destroyed, so no engine request or transport is freed
// while in flight. Then the progress hook is removed, before the session.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "mpi_layer/coll/algorithms.hpp"
#include "mpi_layer/coll/args.hpp"
#include "mpi_layer/coll/bindings.hpp"
#include "mpi_layer/coll/session_transport.hpp"
#include "mpi_layer/mpi_impl.hpp"
#include "mpi_layer/op/op.hpp"

namespace nmad::mpi::coll_call {

using coll::schedule;
using transport_ptr = std::shared_ptr<coll::session_transport>;

// An intercommunicator's collectives run over the union of its two groups,
// the group holding the lower world rank first (both sides agree on it).
inline bool union_local_first(const comm_obj& c) { return c.local_world_of.front() < c.world_of.front(); }

// The communicator's transport, made on its first collective (see
// comm_obj::coll_transport).
const transport_ptr& transport_of(comm_obj& c);

// ---- one collective call ----------------------------------------------------

extern std::byte g_dummy[1];  // a non-null address for empty buffers (null = in place for the builders)

inline std::byte* at(const void* buf, Aint off) { return addr_at(buf, off); }

class call_error : public std::runtime_error {
 public:
  call_error(int code, const std::string& what) : std::runtime_error(what), code(code) {}
  int code;
};

struct call {
  const char* fn;
  comm_obj* c = nullptr;
  transport_ptr tr;
  schedule sch;
  std::vector<std::function<void()>> post;  // unpack steps, appended after the build
  std::shared_ptr<coll::reducer> red;  // set by reduction()
  // Packing temporaries, made before the builder returns the schedule, then
  // attached to it (schedule::keep) so they live exactly as long.
  // (Made on the first temporary: most calls have none.)
  std::shared_ptr<std::vector<std::unique_ptr<std::byte[]>>> temps;
  int rank = 0, size = 1;
  // Intercommunicators: rank/size above are the LOCAL rank and the REMOTE
  // group's size (what per-peer arrays are indexed by); the schedule runs
  // over the union of both groups, local group rank i being union rank
  // lmap[i] and remote rank i union rank rmap[i].
  bool inter = false;
  int lsize = 0;
  std::vector<int> lmap, rmap;
  // A blocking call (no request) whose arguments say that no rank moves
  // any data (a reduction or broadcast of 0 bytes: the standard makes the
  // counts agree on every rank) sets `nothing` once its arguments are
  // checked: it returns at once, without a schedule or a sequence number
  // (every rank skips both alike). Collectives need not synchronize.
  bool blocking = false;
  bool nothing = false;

  // Persistent build (bindings.hpp, persistent_build): launch() makes an
  // inactive persistent request. Every packing of a buffer's contents done
  // while building is recorded in `repack`, run again at each start.
  bool persistent = false;
  std::vector<std::function<void()>> repack;

  std::byte* temp(std::size_t bytes) {
    if (!temps) temps = std::make_shared<std::vector<std::unique_ptr<std::byte[]>>>();
    temps->push_back(std::make_unique<std::byte[]>(bytes ? bytes : 1));
    return temps->back().get();
  }

  explicit call(const char* f) : fn(f) {
    if (g_persistent_build) {  // taken over by this call (see bindings.hpp)
      fn = g_persistent_build->fn;
      persistent = true;
      g_persistent_build = nullptr;
    }
  }

  // Packs n elements of dt at buf into tmp (bytes), now and, for a
  // persistent collective, again at each start.
  void pack(const Datatype& dt, const void* buf, Count n, std::byte* tmp, std::size_t bytes) {
    Count pos = 0;
    dt.pack(buf, n, tmp, static_cast<Count>(bytes), pos);
    if (persistent)
      repack.push_back([dt, buf, n, tmp, bytes] {
        Count p = 0;
        dt.pack(buf, n, tmp, static_cast<Count>(bytes), p);
      });
  }

  [[noreturn]] void fail(int code, const std::string& detail) { throw call_error(code, detail); }

  tinfo type(MPI_Datatype h, const char* what) {
    tinfo ti;
    std::string detail;
    if (int e = describe_type(h, ti, detail)) fail(e, std::string(what) + ": " + detail);
    return ti;
  }
  void count(Count n, const char* what) {
    if (n < 0) fail(MPI_ERR_COUNT, std::string(what) + " " + std::to_string(n) + " is negative");
  }
  void root(int r) {
    if (r < 0 || r >= size)
      fail(MPI_ERR_ROOT, "root " + std::to_string(r) + " out of range for " + std::to_string(size) + " process(es)");
  }
  // A null buffer is only refused for predefined types: a derived type
  // may address absolute locations from MPI_BOTTOM.
  void buffer(const void* buf, long long n, const tinfo& t, const char* what) {
    if (n > 0 && t.size > 0 && ((buf == nullptr && basic_of(t.h)) || buf == MPI_IN_PLACE))
      fail(MPI_ERR_BUFFER, std::string(buf ? "MPI_IN_PLACE" : "null") + " " + what + " with count " +
                               std::to_string(n));
  }
  // Block i of a v/w buffer at its own address (buf + displacement): with
  // MPI_BOTTOM the displacements may be absolute addresses, so only a
  // block whose address is null and holds a predefined type is refused.
  void block(const void* buf, const std::byte* addr, long long n, const tinfo& t, const char* what, int i) {
    if (buf == MPI_IN_PLACE && n > 0 && t.size > 0) fail(MPI_ERR_BUFFER, std::string("MPI_IN_PLACE ") + what);
    if (n > 0 && t.size > 0 && addr == nullptr && basic_of(t.h))
      fail(MPI_ERR_BUFFER, std::string("null address for ") + what + " block " + std::to_string(i) +
                               (buf ? "" : " (MPI_BOTTOM + displacement 0)") + " with count " + std::to_string(n));
  }
  count_array array(count_array a, const char* what) {
    if (!a) fail(MPI_ERR_ARG, std::string("null ") + what + " array");
    for (int i = 0; i < size; ++i)
      if (std::strstr(what, "count") && a[i] < 0)
        fail(MPI_ERR_COUNT, std::string(what) + "[" + std::to_string(i) + "] = " + std::to_string(a[i]) + " is negative");
    return a;
  }
  // Checks op on t and makes the call's reducer (fails as MPI does).
  void reduction(MPI_Op o, const tinfo& t);


  // Contiguous bytes holding `n` elements of t at buf (input): the buffer
  // itself, or a packed copy made now.
  const std::byte* in(const void* buf, Count n, const tinfo& t) {
    const std::size_t bytes = static_cast<std::size_t>(n) * t.size;
    if (bytes == 0) return g_dummy;
    if (t.contig) return at(buf, t.true_lb);
    std::byte* tmp = temp(bytes);
    pack(t.type(), buf, n, tmp, bytes);
    return tmp;
  }
  // Where the schedule writes `n` elements of t destined for buf: the buffer
  // itself, or a temporary unpacked into buf when the schedule ends
  // (preloaded with buf's current content when that is input too).
  std::byte* out(void* buf, Count n, const tinfo& t, bool preload, Count unpack_n = -1) {
    const std::size_t bytes = static_cast<std::size_t>(n) * t.size;
    if (bytes == 0) return g_dummy;
    if (t.contig) return at(buf, t.true_lb);
    std::byte* tmp = temp(bytes);
    if (preload) pack(t.type(), buf, n, tmp, bytes);
    const Count un = unpack_n < 0 ? n : unpack_n;
    Datatype dt = t.type();
    post.push_back([dt, tmp, buf, un] {
      Count pos = 0;
      dt.unpack(tmp, dt.packed_size(un), pos, buf, un);
    });
    return tmp;
  }

  // Per-rank blocks of a v-collective: block i = counts[i] elements of
  // types[i] at base_i. Returns a common base and byte sizes/displacements
  // relative to it; packs (send side) or stages with unpack steps (receive
  // side) when a type is not contiguous.
  struct vblocks {
    std::byte* base = g_dummy;
    std::vector<std::size_t> bytes, displs;
  };
  vblocks blocks(const std::vector<std::byte*>& addr, const std::vector<Count>& counts,
                 const std::vector<const tinfo*>& types, bool send, bool preload);
};

// The blocks of a v-collective's buffer: counts[i] elements of t at
// displs[i] extents from buf, one per peer (see blocks()).
call::vblocks vector_blocks(call& x, const void* buf, count_array counts, count_array displs, const tinfo& t,
                            const char* what, bool send, bool preload);

// Common prologue: communicator checks (x.c, rank, size, the intercommunicator
// maps). Throws call_error.
void open(call& x, MPI_Comm comm);

// Ends the build (keeps the reducer and temporaries with the schedule,
// appends the unpack steps) and runs the schedule on the communicator's
// transport under its next sequence number: to completion when req is
// null, else as a generic request made active in *req.
int launch(call& x, MPI_Request* req);

// Runs body(x) (checks + build) then launches; every failure becomes an MPI
// error raised on the communicator.
template <class Body>
int collective(const char* fn, MPI_Comm comm, MPI_Request* req, Body&& body) {
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  call x(fn);
  x.blocking = req == nullptr;
  if (req) *req = MPI_REQUEST_NULL;
  try {
    open(x, comm);
    if (req == nullptr && std::strncmp(fn, "MPI_I", 5) == 0) throw call_error(MPI_ERR_ARG, "null request pointer");
    body(x);
  } catch (const call_error& e) {
    if (!x.c) return mpi_raise_handle(fn, comm, e.code, e.what());
    return mpi_raise(fn, x.c, e.code, e.what());
  } catch (const OpError& e) {
    return mpi_raise(fn, x.c, e.code() == OpErrc::invalid_count ? MPI_ERR_COUNT : MPI_ERR_OP, e.what());
  } catch (const DatatypeError& e) {
    return mpi_raise(fn, x.c, e.code() == DatatypeErrc::invalid_count ? MPI_ERR_COUNT : MPI_ERR_TYPE, e.what());
  } catch (const std::invalid_argument& e) {
    return mpi_raise(fn, x.c, MPI_ERR_ARG, e.what());
  } catch (const std::bad_alloc&) {
    return mpi_raise(fn, x.c, MPI_ERR_NO_MEM, "out of memory for the collective's temporaries");
  } catch (const std::exception& e) {
    return mpi_raise(fn, x.c, MPI_ERR_INTERN, e.what());
  }
  if (x.nothing) return MPI_SUCCESS;
  return launch(x, req);
}

// A non-blocking collective's request on c, not yet active: generic, not
// persistent, holding `extra` (the caller sets poll and on_complete).
inline request_obj* new_collective_request(comm_obj* c, std::shared_ptr<void> extra) {
  request_obj* r = new_request();
  r->type = request_obj::kind::generic;
  r->comm = c;
  r->persistent = false;
  r->local_done = false;
  r->extra = std::move(extra);
  return r;
}

inline bool in_place(const void* p) { return p == MPI_IN_PLACE; }

inline std::size_t sz(Count n, const tinfo& t) { return static_cast<std::size_t>(n) * t.size; }

}  // namespace nmad::mpi::coll_call
