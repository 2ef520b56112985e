// Generalized requests (MPI-3.1 12.2): MPI_Grequest_start,
// MPI_Grequest_complete.
//
// A generalized request is a generic request_obj (see request.cpp) whose
// hooks call the application's callbacks, so every completion call, mixed
// arrays included, takes it like any other request:
//   poll         true once MPI_Grequest_complete was called (an atomic
//                flag, set from any thread)
//   on_complete  the call that completes it (Wait, Test and their forms):
//                query_fn fills the status, then free_fn runs; the first
//                failure (query_fn's code, else the MPI_ERROR query_fn put
//                in the status, else free_fn's code) is the request's error,
//                so the multiple-completion calls say MPI_ERR_IN_STATUS
//   on_status    MPI_Request_get_status once complete: query_fn only (the
//                request stays active; query_fn may run several times)
//   on_cancel    MPI_Cancel: cancel_fn(extra_state, complete); the request
//                still completes through MPI_Grequest_complete
//   on_free      MPI_Request_free: free_fn (no query_fn) runs in whichever
//                of MPI_Request_free and MPI_Grequest_complete comes last;
//                the request object is released after it
// MPI_Grequest_complete finds the request through this file's table (a
// request freed before completion is no longer found by lookup_request),
// and wakes threads sleeping in a wait (session::notify_waiters): the
// completing thread is usually not the waiting one. Callbacks run with no
// lock of the layer held, so they may call MPI.
#include <memory>
#include <mutex>
#include <unordered_map>

#include "mpi_layer/mpi_impl.hpp"

namespace nmad::mpi {
namespace {

struct grequest {
  MPI_Grequest_query_function* query_fn = nullptr;
  MPI_Grequest_free_function* free_fn = nullptr;
  MPI_Grequest_cancel_function* cancel_fn = nullptr;
  void* extra_state = nullptr;
  MPI_Request handle = MPI_REQUEST_NULL;
  request_obj* req = nullptr;
  std::atomic<bool> complete{false};
  std::mutex mu;        // orders MPI_Grequest_complete against MPI_Request_free
  bool freed = false;   // MPI_Request_free'd (mu)
};

// The generalized requests not yet released, by handle.
struct grequest_table {
  std::mutex mu;
  std::unordered_map<MPI_Request, std::shared_ptr<grequest>> by_handle;
};
grequest_table& table() {
  static auto* t = new grequest_table();  // never destroyed (threads may still call at exit)
  return *t;
}

std::shared_ptr<grequest> find(MPI_Request h) {
  grequest_table& t = table();
  std::lock_guard g(t.mu);
  auto it = t.by_handle.find(h);
  return it == t.by_handle.end() ? nullptr : it->second;
}
void forget(MPI_Request h) {
  grequest_table& t = table();
  std::lock_guard g(t.mu);
  t.by_handle.erase(h);
}

std::string code_text(const char* fn, int code) {
  return std::string(fn) + " returned " + (valid_error_code(code) ? error_name(code) : "invalid code") + " (" +
         std::to_string(code) + ")";
}

// query_fn into *s (a valid status even when the caller passed
// MPI_STATUS_IGNORE); the request's error: query_fn's code, else the
// MPI_ERROR it set.
int run_query(grequest& gr, MPI_Status* s, std::string& detail) {
  empty_status(s);
  const int rc = gr.query_fn(gr.extra_state, s);
  if (rc != MPI_SUCCESS) {
    detail = code_text("query_fn", rc);
    return rc;
  }
  if (s->MPI_ERROR != MPI_SUCCESS) detail = "query_fn set MPI_ERROR to " + std::string(error_name(s->MPI_ERROR));
  return s->MPI_ERROR;
}

// free_fn, then the request object goes (the request-free path).
int free_and_release(const std::shared_ptr<grequest>& gr, std::string& detail) {
  forget(gr->handle);
  const int rc = gr->free_fn(gr->extra_state);
  if (rc != MPI_SUCCESS) detail = code_text("free_fn", rc);
  release_request(gr->req);
  return rc;
}

}  // namespace
}  // namespace nmad::mpi

using namespace nmad::mpi;

extern "C" {

int PMPI_Grequest_start(MPI_Grequest_query_function* query_fn, MPI_Grequest_free_function* free_fn,
                        MPI_Grequest_cancel_function* cancel_fn, void* extra_state, MPI_Request* request) {
  const char* fn = "MPI_Grequest_start";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (!request) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null request");
  if (!query_fn || !free_fn || !cancel_fn)
    return mpi_raise(fn, nullptr, MPI_ERR_ARG,
                     std::string("null ") + (!query_fn ? "query_fn" : !free_fn ? "free_fn" : "cancel_fn"));
  auto gr = std::make_shared<grequest>();
  gr->query_fn = query_fn;
  gr->free_fn = free_fn;
  gr->cancel_fn = cancel_fn;
  gr->extra_state = extra_state;
  request_obj* r = new_request();
  r->type = request_obj::kind::generic;
  r->comm = nullptr;  // errors go to MPI_COMM_WORLD's handler
  r->persistent = false;
  r->local_done = false;
  r->active = true;
  gr->req = r;
  gr->handle = r->handle;
  grequest* g = gr.get();  // the hooks live in r, which gr outlives (r->extra)
  r->poll = [g](request_obj&) { return g->complete.load(std::memory_order_acquire); };
  r->on_complete = [g](request_obj& q, std::string& detail) {
    forget(g->handle);
    int err = run_query(*g, &q.local_status, detail);
    const int frc = g->free_fn(g->extra_state);
    if (err == MPI_SUCCESS && frc != MPI_SUCCESS) {
      err = frc;
      detail = code_text("free_fn", frc);
    }
    q.local_status.MPI_ERROR = err;
    return err;
  };
  r->on_status = [g](request_obj&, MPI_Status* s, std::string& detail) { return run_query(*g, s, detail); };
  r->on_cancel = [g](request_obj&, std::string& detail) {
    const int rc = g->cancel_fn(g->extra_state, g->complete.load(std::memory_order_acquire) ? 1 : 0);
    if (rc != MPI_SUCCESS) detail = code_text("cancel_fn", rc);
    return rc;
  };
  r->on_free = [g](request_obj& q, std::string& detail) {
    std::shared_ptr<grequest> keep = std::static_pointer_cast<grequest>(q.extra);
    bool complete = false;
    {
      std::lock_guard l(g->mu);
      g->freed = true;
      complete = g->complete.load(std::memory_order_relaxed);
    }
    {
      std::lock_guard l(st().mu);
      q.freed = true;  // the handle is gone for every other call
    }
    return complete ? free_and_release(keep, detail) : MPI_SUCCESS;  // else MPI_Grequest_complete frees it
  };
  r->extra = gr;
  {
    grequest_table& t = table();
    std::lock_guard l(t.mu);
    t.by_handle[r->handle] = gr;
  }
  *request = r->handle;
  return MPI_SUCCESS;
}

int PMPI_Grequest_complete(MPI_Request request) {
  const char* fn = "MPI_Grequest_complete";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  std::shared_ptr<grequest> gr = find(request);
  if (!gr)
    return mpi_raise(fn, nullptr, MPI_ERR_REQUEST,
                     "request " + std::to_string(request) + " is not a pending generalized request");
  bool freed = false;
  {
    std::lock_guard l(gr->mu);
    if (gr->complete.load(std::memory_order_relaxed))
      return mpi_raise(fn, nullptr, MPI_ERR_REQUEST,
                       "generalized request " + std::to_string(request) + " is already complete");
    freed = gr->freed;
    gr->complete.store(true, std::memory_order_release);
  }
  if (freed) {  // MPI_Request_free came first: its free_fn runs now
    std::string detail;
    const int rc = free_and_release(gr, detail);
    return rc == MPI_SUCCESS ? rc : mpi_raise(fn, nullptr, rc, detail);
  }
  st().session->notify_waiters();  // a thread may sleep in MPI_Wait on it
  return MPI_SUCCESS;
}

}  // extern "C"

// The public names: weak aliases, so profiling tools can interpose.
#pragma weak MPI_Grequest_start = PMPI_Grequest_start
#pragma weak MPI_Grequest_complete = PMPI_Grequest_complete
