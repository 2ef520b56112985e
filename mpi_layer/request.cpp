// Requests: the handle table, starting and completing them (Wait/Test and
// their all/any/some forms, which every message goes through: the helpers
// they inline stay in this file), MPI_Request_free and the requests it
// leaves completing in the background. Persistent requests are
// request_persistent.cpp's, status queries and cancel request_status.cpp's.
#include <algorithm>
#include <vector>

#include "mpi_layer/mpi_impl.hpp"

namespace nmad::mpi {

namespace {

[[gnu::always_inline]] inline void release_locked(state& s, request_obj* r) {
  r->active = false;
  r->local_done = false;
  r->freed = false;
  r->persistent = false;
  r->memory_completion = false;
  r->type = request_obj::kind::send;
  // Mostly empty already (plain sends and receives set none of them).
  if (r->poll) r->poll = nullptr;
  if (r->on_complete) r->on_complete = nullptr;
  if (r->on_cancel) r->on_cancel = nullptr;
  if (r->on_status) r->on_status = nullptr;
  if (r->on_free) r->on_free = nullptr;
  if (r->on_start) r->on_start = nullptr;
  r->partitioned = request_obj::part_kind::none;
  if (r->extra) r->extra.reset();
  r->live = false;
  s.free_requests.push_back(r->handle);
}

int hooked_status(request_obj& r, MPI_Status* out, std::string& detail);

// The status an active, done request completed with, written to *out
// (null: MPI_STATUS(ES)_IGNORE, nothing written; the hook still runs);
// returns its error code and sets detail to the engine's message.
[[gnu::always_inline]] inline int request_status(request_obj& r, MPI_Status* out, std::string& detail) {
  if (r.on_complete) return hooked_status(r, out, detail);
  if (r.local_done) {
    if (out) *out = r.local_status;
    return r.local_status.MPI_ERROR;
  }
  const nmad::errc ec = r.engine.error();
  const int err = ec == nmad::errc::ok ? MPI_SUCCESS : from_errc(ec);
  // detail = the engine's message (empty on success: no copy to make then).
  if (const std::string& m = r.engine.error_message(); !(m.empty() && detail.empty())) detail = m;
  if (!out) return err;
  if (r.type == request_obj::kind::recv) {
    fill_status(out, r.comm, r.engine.status(), err);
    if (ec == nmad::errc::cancelled) {
      out->nmad_cancelled = 1;
      out->nmad_count = 0;
    }
  } else {
    empty_status(out);
    out->MPI_ERROR = err;
    if (ec == nmad::errc::cancelled) out->nmad_cancelled = 1;
  }
  return err;
}

// request_status of a request with an on_complete hook: runs the hook
// (once), then takes the status as request_status does.
[[gnu::noinline]] int hooked_status(request_obj& r, MPI_Status* out, std::string& detail) {
  // Generic requests fill local_status themselves; send/recv hooks (e.g.
  // unpacking a staged non-contiguous receive) run exactly once here.
  const int e = r.on_complete(r, detail);
  r.on_complete = nullptr;
  if (r.local_done || r.type == request_obj::kind::generic) {
    if (out) *out = r.local_status;
    return r.local_status.MPI_ERROR;
  }
  const int err = request_status(r, out, detail);  // without the hook now
  if (e == MPI_SUCCESS || err != MPI_SUCCESS) return err;
  if (out) out->MPI_ERROR = e;
  return e;
}

request_obj* lookup_locked(state& s, MPI_Request h) {
  if (h <= 0 || static_cast<std::size_t>(h) > s.requests.size()) return nullptr;
  request_obj* r = s.requests[h - 1].get();
  return r->live && !r->freed ? r : nullptr;
}

}  // namespace

void run_completion_hook(request_obj& r) {
  if (!r.on_complete) return;
  std::string detail;
  r.on_complete(r, detail);
  r.on_complete = nullptr;
}

void empty_status(MPI_Status* s) {
  s->MPI_SOURCE = MPI_ANY_SOURCE;
  s->MPI_TAG = MPI_ANY_TAG;
  s->MPI_ERROR = MPI_SUCCESS;
  s->nmad_cancelled = 0;
  s->nmad_count = 0;
}

void fill_status(MPI_Status* s, comm_obj* c, const nmad::recv_status& rs, int error) {
  s->MPI_SOURCE = (c && rs.source >= 0 && rs.source < static_cast<int>(c->comm_of.size()))
                      ? c->comm_of[rs.source]
                      : MPI_ANY_SOURCE;
  s->MPI_TAG = static_cast<int>(static_cast<std::uint32_t>(rs.tag & 0xffffffffu));
  s->MPI_ERROR = error;
  s->nmad_cancelled = 0;
  s->nmad_count = static_cast<long long>(rs.length);
}

// Requests freed while active (MPI_Request_free). A freed receive must
// still deliver its data, so the completion hook of a freed send/receive
// (e.g. unpacking a staged non-contiguous receive) runs as soon as the
// engine completes it: a session progress task, registered at the first
// such free, visits the zombies on every round of progress (it only runs
// hooks, which touch no MPI lock). Finished zombies are recycled by the
// next new_request().
static int zombie_task(void*) {
  state& s = st();
  if (s.nzombies.load(std::memory_order_acquire) == 0) return 0;
  // try_lock: a thread sweeping or freeing may hold it; next round then.
  std::unique_lock g(s.zombie_mu, std::try_to_lock);
  if (!g.owns_lock()) return 0;
  int work = 0;
  for (request_obj* z : s.zombies)
    if (z->on_complete && z->type != request_obj::kind::generic && !z->local_done && z->engine.completed()) {
      run_completion_hook(*z);
      ++work;
    }
  return work;
}

void sweep_zombies() {
  // request_done() may advance a generic request, hence make progress and
  // run zombie_task: it is called without zombie_mu held.
  state& s = st();
  std::vector<request_obj*> candidates, done;
  {
    std::lock_guard g(s.zombie_mu);
    candidates = s.zombies;
  }
  for (request_obj* z : candidates)
    if (request_done(*z)) done.push_back(z);
  if (done.empty()) return;
  {
    std::lock_guard g(s.zombie_mu);
    for (request_obj* z : done) s.zombies.erase(std::find(s.zombies.begin(), s.zombies.end(), z));
    s.nzombies.store(s.zombies.size(), std::memory_order_release);
  }
  for (request_obj* z : done) run_completion_hook(*z);
  std::lock_guard g(s.mu);
  for (request_obj* z : done) release_locked(s, z);
}

void grow_requests_locked(state& s) {
  s.requests.push_back(std::make_unique<request_obj>());
  request_obj* r = s.requests.back().get();
  r->handle = static_cast<int>(s.requests.size());
  s.free_requests.push_back(r->handle);
}

request_obj* lookup_request(MPI_Request h) {
  state& s = st();
  std::lock_guard g(s.mu);
  return lookup_locked(s, h);
}

namespace {
[[gnu::always_inline]] inline void release(request_obj* r) {
  state& s = st();
  std::lock_guard g(s.mu);
  release_locked(s, r);
}
}  // namespace

void release_request(request_obj* r) { release(r); }

bool request_done(request_obj& r) {
  if (!r.active || r.local_done) return true;
  if (r.type == request_obj::kind::generic) return r.poll && r.poll(r);
  return r.engine.completed();
}

namespace {
// The progress a test call (Test, Testall, Testany, Testsome,
// Request_get_status; Waitsome before it reports) makes first: rounds of
// engine progress until done() holds or rounds find nothing more to do.
// One round is not enough when a transfer takes several protocol steps
// that are all local (a rendezvous or synchronous send to this process:
// request, ready to receive, data, one round each; the steps after an
// Imrecv of a probed rendezvous message): a test call reports what can
// complete without waiting for another process, not the next call.
// A driver the progress thread is polling is waited for, not skipped (what
// it is handling may be what the caller tests); the progress thread may
// also be between its poll and posting what that poll produced, so with
// one, a few rounds must find nothing before the call gives up. Capped, so
// that a stream of incoming traffic cannot keep a test call (which must
// return at once) spinning.
constexpr int kTestRounds = 64;
constexpr int kIdleRoundsWithProgressThread = 3;
// A call that ends without its condition after rounds that found nothing
// follows the polling discipline (session::idle_poll: on a contended
// machine it gives the CPU away, so that a loop of test calls lets the
// processes it waits for run).
template <class Done>
void progress_until(Done&& done) {
  nmad::session& s = *st().session;
  const int idle_allowed = s.has_progress_thread() ? kIdleRoundsWithProgressThread : 0;
  int idle = 0;
  for (int i = 0; i < kTestRounds; ++i) {
    if (nmad::layer::progress_all_drivers(s) > 0) idle = 0;
    else if (++idle > idle_allowed) {
      if (!done()) s.idle_poll();
      return;
    }
    if (done()) return;
  }
}

}  // namespace

void test_progress(bool (*done)(void*), void* arg) {
  progress_until([&] { return done(arg); });
}

namespace {
// A short spin on the request first, where no one waits for this CPU: a
// generic request may complete on memory another process writes (the
// shared-memory collectives: a non-blocking or persistent Allreduce),
// which with a core per rank is a few hundred nanoseconds away, less than
// a round of the session's wait (as shmcoll's own waits spin first).
constexpr int kGenericSpins = 64;
[[gnu::noinline]] void wait_generic(request_obj& r) {
  nmad::session& s = *st().session;
  if (!r.memory_completion) {
    s.wait_until([&] { return request_done(r); });
    return;
  }
  if (!s.contended())
    for (int i = 0; i < kGenericSpins; ++i) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
      if (request_done(r)) return;
    }
  while (!request_done(r)) s.progress();  // (no sleep: see request_obj::memory_completion)
}

// A wait for done() over several requests: polls instead of sleeping when
// one of them completes on memory (request_obj::memory_completion).
template <class Done>
void wait_any_of(request_obj* const* rs, int n, Done&& done) {
  bool memory = false;
  for (int i = 0; i < n && !memory; ++i) memory = rs[i] && rs[i]->active && rs[i]->memory_completion;
  nmad::session& s = *st().session;
  if (!memory) {
    s.wait_until(done);
    return;
  }
  while (!done()) s.progress();
}

// Blocks until request_done(r), making progress (send/recv: engine wait).
[[gnu::always_inline]] inline void wait_request(request_obj& r) {
  if (r.local_done) return;
  if (r.type != request_obj::kind::generic) {
    st().session->wait(r.engine);
    return;
  }
  wait_generic(r);
}
}  // namespace

// The less common steps of start_request, out of line (they build
// strings): the plain send or receive goes straight to the engine.
namespace {
[[gnu::noinline]] void start_proc_null(request_obj& r) {
  r.local_done = true;
  empty_status(&r.local_status);
  r.local_status.MPI_SOURCE = MPI_PROC_NULL;
}
// Completes as soon as the data is copied into the attached buffer.
[[gnu::noinline]] int start_buffered(request_obj& r, typed_request* typed, int world, nmad::tag_t tag) {
  std::string detail;
  const int err = typed ? bsend_typed(*r.comm, r.sbuf, r.count, typed->type, world, tag, detail)
                        : bsend_copy(*r.comm, r.sbuf, r.bytes, world, tag, detail);
  r.local_done = true;
  empty_status(&r.local_status);
  r.local_status.MPI_ERROR = err;
  return err == MPI_SUCCESS ? err : mpi_raise("MPI_Start", r.comm, err, detail);
}
[[gnu::noinline]] int stage_send(request_obj& r, typed_request& typed, const void*& ptr) {
  std::string detail;
  if (int e = resolve_send(r.sbuf, r.count, typed.type, ptr, r.bytes, typed.send, detail)) {
    r.active = false;
    return mpi_raise(r.persistent ? "MPI_Start" : "MPI_Isend", r.comm, e, detail);
  }
  return MPI_SUCCESS;
}
[[gnu::noinline]] int stage_recv(request_obj& r, typed_request& typed, void*& ptr) {
  std::string detail;
  if (int e = resolve_recv(r.rbuf, r.count, typed.type, ptr, r.bytes, typed.recv, detail)) {
    r.active = false;
    return mpi_raise(r.persistent ? "MPI_Start" : "MPI_Irecv", r.comm, e, detail);
  }
  if (auto stage = typed.recv)  // non-contiguous: unpacked by Wait/Test
    r.on_complete = [stage](request_obj& q, std::string& d) { return stage->finish(q.engine, d); };
  return MPI_SUCCESS;
}
}  // namespace

// Derived datatypes: r.extra holds a typed_request (set by Isend/Irecv and
// the *_init calls) with the type itself, so a persistent request survives
// MPI_Type_free of its handle. Each start stages anew (a persistent send
// packs the buffer's current contents) reusing the staging buffer.
int start_request(request_obj& r) {
  state& s = st();
  r.active = true;
  r.local_done = false;
  if (r.type == request_obj::kind::generic) return r.on_start ? r.on_start(r) : MPI_SUCCESS;
  auto* typed = plain_size(r.type_handle) >= 0 ? nullptr : static_cast<typed_request*>(r.extra.get());
  if (typed) r.on_complete = nullptr;  // a persistent receive's hook of the previous start
  if (r.peer == MPI_PROC_NULL) {
    start_proc_null(r);
    return MPI_SUCCESS;
  }
  if (r.type == request_obj::kind::send) {
    const int world = r.comm->world_of[r.peer];
    const nmad::tag_t tag = engine_tag(r.comm->p2p_ctx, r.tag);
    if (r.mode == send_mode::buffered) return start_buffered(r, typed, world, tag);
    const void* ptr = r.sbuf;
    if (typed)
      if (int e = stage_send(r, *typed, ptr)) return e;
    s.session->isend(world, tag, ptr, r.bytes, r.engine,
                     send_options_of(*r.comm, r.mode == send_mode::synchronous ? nmad::send_flags::synchronous
                                                                               : nmad::send_flags::none));
  } else {
    void* ptr = r.rbuf;
    if (typed)
      if (int e = stage_recv(r, *typed, ptr)) return e;
    const int src = r.peer == MPI_ANY_SOURCE ? nmad::any_source : r.comm->world_of[r.peer];
    s.session->irecv(src, engine_tag(r.comm->p2p_ctx, r.tag == MPI_ANY_TAG ? 0 : r.tag), ptr, r.bytes,
                     r.engine, engine_mask(r.tag));
  }
  // Errors found at start (dead peer) complete the request with that error.
  return MPI_SUCCESS;
}

namespace {
// Completes an active, done request: fills status, deactivates it, frees
// it if not persistent (and sets *handle to MPI_REQUEST_NULL).
[[gnu::always_inline]] inline int finish_request(request_obj& r, MPI_Request* handle, MPI_Status* status,
                                                 std::string& detail) {
  const int err = request_status(r, status, detail);  // MPI_STATUS_IGNORE is null: nothing written
  r.active = false;
  r.local_done = false;
  if (!r.persistent) {
    release(&r);
    *handle = MPI_REQUEST_NULL;
  }
  return err;
}
}  // namespace

bool handle_done(MPI_Request handle) {
  if (handle == MPI_REQUEST_NULL) return true;
  request_obj* r = lookup_request(handle);
  return !r || request_done(*r);
}

int finish_done_request(MPI_Request* handle, MPI_Status* status, std::string& detail) {
  request_obj* r = lookup_request(*handle);
  if (!r) {
    detail = "invalid request " + std::to_string(*handle);
    return MPI_ERR_REQUEST;
  }
  if (!r->active) {
    if (status) empty_status(status);
    return MPI_SUCCESS;
  }
  return finish_request(*r, handle, status, detail);
}

// Raises the first error of a multiple completion as MPI_ERR_IN_STATUS.
int raise_in_status(const char* fn, comm_obj* c, int first_err, const std::string& detail, bool have_statuses) {
  return mpi_raise(fn, c, have_statuses ? MPI_ERR_IN_STATUS : first_err,
                   std::string(error_name(first_err)) + (detail.empty() ? "" : ": " + detail));
}

}  // namespace nmad::mpi

using namespace nmad::mpi;

namespace {

// The request objects of an array of handles (null for MPI_REQUEST_NULL):
// on the stack for arrays of up to kInline requests.
class request_refs {
 public:
  explicit request_refs(int n) : _p(n <= kInline ? _inline : (_heap.resize(n), _heap.data())) {}
  request_refs(const request_refs&) = delete;
  request_refs& operator=(const request_refs&) = delete;
  request_obj*& operator[](int i) { return _p[i]; }

 private:
  static constexpr int kInline = 64;
  request_obj* _inline[kInline];
  std::vector<request_obj*> _heap;
  request_obj** _p;
};

// Looks up every handle (one hold of the table lock); false (and *bad set)
// if one is invalid.
bool lookup_all(int count, const MPI_Request* reqs, request_refs& out, int* bad) {
  state& s = st();
  std::lock_guard g(s.mu);
  for (int i = 0; i < count; ++i) {
    out[i] = nullptr;
    if (reqs[i] == MPI_REQUEST_NULL) continue;
    out[i] = lookup_locked(s, reqs[i]);
    if (!out[i]) {
      *bad = i;
      return false;
    }
  }
  return true;
}

bool is_active(request_obj* r) { return r && r->active; }

// finish_request for the calls that return one status (Wait, Test, Waitany,
// Testany): MPI-3.1 3.2.5 says they never modify its MPI_ERROR field (the
// return code carries the error). The multiple-completion calls set it.
int finish_single(request_obj& r, MPI_Request* handle, MPI_Status* status, std::string& detail) {
  const int keep = status != MPI_STATUS_IGNORE ? status->MPI_ERROR : MPI_SUCCESS;
  const int err = finish_request(r, handle, status, detail);
  if (status != MPI_STATUS_IGNORE) status->MPI_ERROR = keep;
  return err;
}




}  // namespace

extern "C" {

int PMPI_Wait(MPI_Request* request, MPI_Status* status) {
  tool_event_point tool_events;  // (MPI_T events: delivered on the way out)
  if (!check_initialized("MPI_Wait")) return MPI_ERR_OTHER;
  if (!request) return mpi_raise("MPI_Wait", nullptr, MPI_ERR_ARG, "null request pointer");
  if (*request == MPI_REQUEST_NULL) {
    if (status != MPI_STATUS_IGNORE) empty_status(status);
    return MPI_SUCCESS;
  }
  request_obj* r = lookup_request(*request);
  if (!r) return mpi_raise("MPI_Wait", nullptr, MPI_ERR_REQUEST, "invalid request " + std::to_string(*request));
  if (!r->active) {
    if (status != MPI_STATUS_IGNORE) empty_status(status);
    return MPI_SUCCESS;
  }
  wait_request(*r);
  comm_obj* c = r->comm;
  std::string detail;
  const int err = finish_single(*r, request, status, detail);
  return err == MPI_SUCCESS ? err : mpi_raise("MPI_Wait", c, err, detail);
}

int PMPI_Test(MPI_Request* request, int* flag, MPI_Status* status) {
  tool_event_point tool_events;  // (MPI_T events: delivered on the way out)
  if (!check_initialized("MPI_Test")) return MPI_ERR_OTHER;
  if (!request || !flag) return mpi_raise("MPI_Test", nullptr, MPI_ERR_ARG, "null argument");
  request_obj* r = nullptr;
  if (*request != MPI_REQUEST_NULL) {
    r = lookup_request(*request);
    if (!r) return mpi_raise("MPI_Test", nullptr, MPI_ERR_REQUEST, "invalid request " + std::to_string(*request));
  }
  if (!is_active(r)) {
    *flag = 1;
    if (status != MPI_STATUS_IGNORE) empty_status(status);
    return MPI_SUCCESS;
  }
  if (!request_done(*r)) progress_until([r] { return request_done(*r); });
  if (!request_done(*r)) {
    *flag = 0;
    return MPI_SUCCESS;
  }
  *flag = 1;
  comm_obj* c = r->comm;
  std::string detail;
  const int err = finish_single(*r, request, status, detail);
  return err == MPI_SUCCESS ? err : mpi_raise("MPI_Test", c, err, detail);
}

int PMPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
  tool_event_point tool_events;  // (MPI_T events: delivered on the way out)
  if (!check_initialized("MPI_Waitall")) return MPI_ERR_OTHER;
  if (count < 0 || (count > 0 && !requests)) return mpi_raise("MPI_Waitall", nullptr, MPI_ERR_ARG, "bad count or array");
  request_refs rs(count);
  int bad = -1;
  if (!lookup_all(count, requests, rs, &bad))
    return mpi_raise("MPI_Waitall", nullptr, MPI_ERR_REQUEST, "invalid request at index " + std::to_string(bad));
  int first_err = MPI_SUCCESS;
  comm_obj* err_comm = nullptr;
  std::string err_detail, detail;
  for (int i = 0; i < count; ++i) {
    MPI_Status* sp = statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &statuses[i];
    if (!is_active(rs[i])) {
      if (sp) empty_status(sp);
      continue;
    }
    wait_request(*rs[i]);
    comm_obj* c = rs[i]->comm;
    detail.clear();
    const int err = finish_request(*rs[i], &requests[i], sp, detail);
    if (err != MPI_SUCCESS && first_err == MPI_SUCCESS) {
      first_err = err;
      err_comm = c;
      err_detail = detail;
    }
  }
  if (first_err == MPI_SUCCESS) return MPI_SUCCESS;
  return raise_in_status("MPI_Waitall", err_comm, first_err, err_detail, statuses != MPI_STATUSES_IGNORE);
}

int PMPI_Testall(int count, MPI_Request requests[], int* flag, MPI_Status statuses[]) {
  tool_event_point tool_events;  // (MPI_T events: delivered on the way out)
  if (!check_initialized("MPI_Testall")) return MPI_ERR_OTHER;
  if (count < 0 || !flag || (count > 0 && !requests))
    return mpi_raise("MPI_Testall", nullptr, MPI_ERR_ARG, "bad count or array");
  request_refs rs(count);
  int bad = -1;
  if (!lookup_all(count, requests, rs, &bad))
    return mpi_raise("MPI_Testall", nullptr, MPI_ERR_REQUEST, "invalid request at index " + std::to_string(bad));
  auto all_done = [&] {
    for (int i = 0; i < count; ++i)
      if (is_active(rs[i]) && !request_done(*rs[i])) return false;
    return true;
  };
  if (!all_done()) progress_until(all_done);
  for (int i = 0; i < count; ++i)
    if (is_active(rs[i]) && !request_done(*rs[i])) {
      *flag = 0;
      return MPI_SUCCESS;
    }
  *flag = 1;
  return PMPI_Waitall(count, requests, statuses);  // every one is done: no waiting
}

// The Waitany/Testany step: completes the first active request that is
// done. none_active: every request is null or inactive (index is
// MPI_UNDEFINED and the status empty, as MPI wants).
enum class any_result { completed, pending, none_active };
static any_result complete_any(const char* fn, int count, request_refs& rs, MPI_Request requests[],
                               int* index, MPI_Status* status, int& err) {
  bool any_active = false;
  for (int i = 0; i < count; ++i) {
    if (!is_active(rs[i])) continue;
    any_active = true;
    if (!request_done(*rs[i])) continue;
    *index = i;
    comm_obj* c = rs[i]->comm;
    std::string detail;
    err = finish_single(*rs[i], &requests[i], status, detail);
    if (err != MPI_SUCCESS) err = mpi_raise(fn, c, err, detail);
    return any_result::completed;
  }
  *index = MPI_UNDEFINED;
  if (any_active) return any_result::pending;
  if (status != MPI_STATUS_IGNORE) empty_status(status);
  return any_result::none_active;
}

int PMPI_Waitany(int count, MPI_Request requests[], int* index, MPI_Status* status) {
  tool_event_point tool_events;  // (MPI_T events: delivered on the way out)
  if (!check_initialized("MPI_Waitany")) return MPI_ERR_OTHER;
  if (count < 0 || !index || (count > 0 && !requests))
    return mpi_raise("MPI_Waitany", nullptr, MPI_ERR_ARG, "bad count or array");
  request_refs rs(count);
  int bad = -1;
  if (!lookup_all(count, requests, rs, &bad))
    return mpi_raise("MPI_Waitany", nullptr, MPI_ERR_REQUEST, "invalid request at index " + std::to_string(bad));
  int err = MPI_SUCCESS;
  any_result r = any_result::pending;
  wait_any_of(&rs[0], count, [&] {
    r = complete_any("MPI_Waitany", count, rs, requests, index, status, err);
    return r != any_result::pending;
  });
  return r == any_result::completed ? err : MPI_SUCCESS;
}

int PMPI_Testany(int count, MPI_Request requests[], int* index, int* flag, MPI_Status* status) {
  tool_event_point tool_events;  // (MPI_T events: delivered on the way out)
  if (!check_initialized("MPI_Testany")) return MPI_ERR_OTHER;
  if (count < 0 || !index || !flag || (count > 0 && !requests))
    return mpi_raise("MPI_Testany", nullptr, MPI_ERR_ARG, "bad count or array");
  request_refs rs(count);
  int bad = -1;
  if (!lookup_all(count, requests, rs, &bad))
    return mpi_raise("MPI_Testany", nullptr, MPI_ERR_REQUEST, "invalid request at index " + std::to_string(bad));
  progress_until([&] {
    for (int i = 0; i < count; ++i)
      if (is_active(rs[i]) && request_done(*rs[i])) return true;
    return false;
  });
  int err = MPI_SUCCESS;
  const any_result r = complete_any("MPI_Testany", count, rs, requests, index, status, err);
  *flag = r != any_result::pending;
  if (r == any_result::completed) return err;
  return MPI_SUCCESS;
}

static int some_common(const char* fn, bool wait, int incount, MPI_Request requests[], int* outcount,
                       int indices[], MPI_Status statuses[]) {
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (incount < 0 || !outcount || (incount > 0 && (!requests || !indices)))
    return mpi_raise(fn, nullptr, MPI_ERR_ARG, "bad count or array");
  request_refs rs(incount);
  int bad = -1;
  if (!lookup_all(incount, requests, rs, &bad))
    return mpi_raise(fn, nullptr, MPI_ERR_REQUEST, "invalid request at index " + std::to_string(bad));
  int result = MPI_SUCCESS;
  // One look at the requests; true when the call is over (result set).
  auto scan = [&]() -> bool {
    bool any_active = false;
    int n = 0, first_err = MPI_SUCCESS;
    comm_obj* err_comm = nullptr;
    std::string err_detail;
    for (int i = 0; i < incount; ++i) {
      if (!is_active(rs[i])) continue;
      any_active = true;
      if (!request_done(*rs[i])) continue;
      comm_obj* c = rs[i]->comm;
      std::string detail;
      MPI_Status* sp = statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &statuses[n];
      const int err = finish_request(*rs[i], &requests[i], sp, detail);
      indices[n++] = i;
      if (err != MPI_SUCCESS && first_err == MPI_SUCCESS) {
        first_err = err;
        err_comm = c;
        err_detail = detail;
      }
    }
    if (!any_active) {
      *outcount = MPI_UNDEFINED;
      result = MPI_SUCCESS;
      return true;
    }
    if (n > 0 || !wait) {
      *outcount = n;
      result = first_err == MPI_SUCCESS
                   ? MPI_SUCCESS
                   : raise_in_status(fn, err_comm, first_err, err_detail, statuses != MPI_STATUSES_IGNORE);
      return true;
    }
    return false;
  };
  // Both forms report every request that can complete now: progress first
  // (Waitsome too, so that it does not return one request of a batch that
  // the next round completes whole).
  progress_until([&] {
    for (int i = 0; i < incount; ++i)
      if (is_active(rs[i]) && !request_done(*rs[i])) return false;
    return true;
  });
  if (!scan()) wait_any_of(&rs[0], incount, scan);
  return result;
}

int PMPI_Waitsome(int incount, MPI_Request requests[], int* outcount, int indices[], MPI_Status statuses[]) {
  tool_event_point tool_events;  // (MPI_T events: delivered on the way out)
  return some_common("MPI_Waitsome", true, incount, requests, outcount, indices, statuses);
}

int PMPI_Testsome(int incount, MPI_Request requests[], int* outcount, int indices[], MPI_Status statuses[]) {
  tool_event_point tool_events;  // (MPI_T events: delivered on the way out)
  return some_common("MPI_Testsome", false, incount, requests, outcount, indices, statuses);
}


int PMPI_Request_free(MPI_Request* request) {
  if (!check_initialized("MPI_Request_free")) return MPI_ERR_OTHER;
  if (!request || *request == MPI_REQUEST_NULL)
    return mpi_raise("MPI_Request_free", nullptr, MPI_ERR_REQUEST, "null request");
  request_obj* r = lookup_request(*request);
  if (!r) return mpi_raise("MPI_Request_free", nullptr, MPI_ERR_REQUEST, "invalid request " + std::to_string(*request));
  state& s = st();
  if (r->on_free) {  // e.g. a generalized request: it releases r itself
    std::string detail;
    auto on_free = r->on_free;
    *request = MPI_REQUEST_NULL;
    const int err = on_free(*r, detail);
    return err == MPI_SUCCESS ? err : mpi_raise("MPI_Request_free", nullptr, err, detail);
  }
  if (r->active && !request_done(*r)) {
    {
      std::lock_guard g(s.zombie_mu);
      r->freed = true;  // completes in the background; recycled afterwards
      s.zombies.push_back(r);
      s.nzombies.store(s.zombies.size(), std::memory_order_release);
    }
    if (!s.zombie_task.exchange(true)) nmad::layer::add_session_task(*s.session, zombie_task, nullptr);
  } else {
    if (r->active) run_completion_hook(*r);  // e.g. unpack a staged receive that already arrived
    std::lock_guard g(s.mu);
    release_locked(s, r);
  }
  *request = MPI_REQUEST_NULL;
  return MPI_SUCCESS;
}

}  // extern "C"

// The public names: weak aliases, so profiling tools can interpose.
#pragma weak MPI_Wait = PMPI_Wait
#pragma weak MPI_Test = PMPI_Test
#pragma weak MPI_Waitall = PMPI_Waitall
#pragma weak MPI_Testall = PMPI_Testall
#pragma weak MPI_Waitany = PMPI_Waitany
#pragma weak MPI_Testany = PMPI_Testany
#pragma weak MPI_Waitsome = PMPI_Waitsome
#pragma weak MPI_Testsome = PMPI_Testsome
#pragma weak MPI_Request_free = PMPI_Request_free
