// The state of a request without completing it: MPI_Request_get_status
// and its array forms (test calls that leave the request active), the
// status fields through functions, MPI_Cancel and MPI_Test_cancelled.
#include <string>
#include <vector>

#include "mpi_layer/mpi_impl.hpp"

using namespace nmad::mpi;

namespace {

bool is_active(request_obj* r) { return r && r->active; }

// test_progress with a callable.
template <class Done>
void progress_until(const Done& done) {
  test_progress([](void* d) { return (*static_cast<const Done*>(d))(); }, const_cast<Done*>(&done));
}

// The status of done request r, which stays active (MPI_Request_get_status
// and its MPI 4.1 array forms); returns its error, also in out->MPI_ERROR.
int peek_status(request_obj& r, MPI_Status* out, std::string& detail) {
  if (r.on_status) {  // e.g. a generalized request's query_fn
    const int err = r.on_status(r, out, detail);
    out->MPI_ERROR = err;
    return err;
  }
  if (r.local_done || r.type == request_obj::kind::generic) {
    *out = r.local_status;
  } else if (r.type == request_obj::kind::recv) {
    fill_status(out, r.comm, r.engine.status(), from_errc(r.engine.error()));
  } else {
    empty_status(out);
    out->MPI_ERROR = from_errc(r.engine.error());
  }
  if (!r.local_done && r.type != request_obj::kind::generic && r.engine.error() == nmad::errc::cancelled)
    out->nmad_cancelled = 1;
  return out->MPI_ERROR;
}

// The request objects of an array (null for MPI_REQUEST_NULL and inactive
// ones); an invalid handle is the call's error.
int active_requests(const char* fn, int count, const MPI_Request requests[], std::vector<request_obj*>& rs) {
  rs.assign(static_cast<std::size_t>(count), nullptr);
  for (int i = 0; i < count; ++i) {
    if (requests[i] == MPI_REQUEST_NULL) continue;
    request_obj* r = lookup_request(requests[i]);
    if (!r) return mpi_raise(fn, nullptr, MPI_ERR_REQUEST, "invalid request " + std::to_string(requests[i]) +
                                                             " at index " + std::to_string(i));
    if (r->active) rs[static_cast<std::size_t>(i)] = r;
  }
  return MPI_SUCCESS;
}

}  // namespace

extern "C" {

int PMPI_Request_get_status(MPI_Request request, int* flag, MPI_Status* status) {
  const char* fn = "MPI_Request_get_status";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (!flag) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null flag");
  request_obj* r = nullptr;
  if (request != MPI_REQUEST_NULL) {
    r = lookup_request(request);
    if (!r) return mpi_raise(fn, nullptr, MPI_ERR_REQUEST, "invalid request");
  }
  if (!is_active(r)) {
    *flag = 1;
    if (status != MPI_STATUS_IGNORE) empty_status(status);
    return MPI_SUCCESS;
  }
  if (!request_done(*r)) progress_until([r] { return request_done(*r); });
  *flag = request_done(*r) ? 1 : 0;
  if (!*flag || (status == MPI_STATUS_IGNORE && !r->on_status)) return MPI_SUCCESS;
  std::string detail;
  MPI_Status tmp;
  const int err = peek_status(*r, &tmp, detail);
  if (status != MPI_STATUS_IGNORE) {
    tmp.MPI_ERROR = status->MPI_ERROR;  // one status: MPI_ERROR is left alone
    *status = tmp;
  }
  // (A generalized request's query_fn error is the call's.)
  return err == MPI_SUCCESS || !r->on_status ? MPI_SUCCESS : mpi_raise(fn, r->comm, err, detail);
}

// MPI 4.1 3.7.5: Testany/Testall/Testsome that leave every request as it
// is (active, not freed), like MPI_Request_get_status.
int PMPI_Request_get_status_any(int count, MPI_Request requests[], int* index, int* flag, MPI_Status* status) {
  const char* fn = "MPI_Request_get_status_any";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (count < 0 || !index || !flag || (count > 0 && !requests))
    return mpi_raise(fn, nullptr, MPI_ERR_ARG, "negative count or null argument");
  std::vector<request_obj*> rs;
  if (int e = active_requests(fn, count, requests, rs)) return e;
  const auto done_at = [&] {
    for (int i = 0; i < count; ++i)
      if (rs[i] && request_done(*rs[i])) return i;
    return -1;
  };
  int i = done_at();
  if (i < 0 && std::any_of(rs.begin(), rs.end(), [](request_obj* r) { return r != nullptr; })) {
    progress_until([&] { return done_at() >= 0; });
    i = done_at();
  }
  *flag = i >= 0 || std::none_of(rs.begin(), rs.end(), [](request_obj* r) { return r != nullptr; });
  *index = i >= 0 ? i : MPI_UNDEFINED;
  if (status == MPI_STATUS_IGNORE || !*flag) return MPI_SUCCESS;
  if (i < 0) {
    empty_status(status);
    return MPI_SUCCESS;
  }
  std::string detail;
  MPI_Status tmp;
  peek_status(*rs[i], &tmp, detail);
  tmp.MPI_ERROR = status->MPI_ERROR;  // one status: MPI_ERROR is left alone
  *status = tmp;
  return MPI_SUCCESS;
}

int PMPI_Request_get_status_all(int count, MPI_Request requests[], int* flag, MPI_Status statuses[]) {
  const char* fn = "MPI_Request_get_status_all";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (count < 0 || !flag || (count > 0 && !requests))
    return mpi_raise(fn, nullptr, MPI_ERR_ARG, "negative count or null argument");
  std::vector<request_obj*> rs;
  if (int e = active_requests(fn, count, requests, rs)) return e;
  const auto all_done = [&] {
    return std::all_of(rs.begin(), rs.end(), [](request_obj* r) { return !r || request_done(*r); });
  };
  if (!all_done()) progress_until(all_done);
  *flag = all_done() ? 1 : 0;
  if (!*flag || statuses == MPI_STATUSES_IGNORE) return MPI_SUCCESS;
  std::string first_detail;
  int first = MPI_SUCCESS;
  for (int i = 0; i < count; ++i) {
    std::string detail;
    if (!rs[i]) {
      empty_status(&statuses[i]);
      continue;
    }
    const int e = peek_status(*rs[i], &statuses[i], detail);
    if (e != MPI_SUCCESS && first == MPI_SUCCESS) first = e, first_detail = detail;
  }
  return first == MPI_SUCCESS ? first : raise_in_status(fn, nullptr, first, first_detail, true);
}

int PMPI_Request_get_status_some(int incount, MPI_Request requests[], int* outcount, int indices[],
                                 MPI_Status statuses[]) {
  const char* fn = "MPI_Request_get_status_some";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (incount < 0 || !outcount || (incount > 0 && (!requests || !indices)))
    return mpi_raise(fn, nullptr, MPI_ERR_ARG, "negative incount or null argument");
  std::vector<request_obj*> rs;
  if (int e = active_requests(fn, incount, requests, rs)) return e;
  if (std::none_of(rs.begin(), rs.end(), [](request_obj* r) { return r != nullptr; })) {
    *outcount = MPI_UNDEFINED;
    return MPI_SUCCESS;
  }
  const auto any_done = [&] {
    return std::any_of(rs.begin(), rs.end(), [](request_obj* r) { return r && request_done(*r); });
  };
  if (!any_done()) progress_until(any_done);
  int n = 0, first = MPI_SUCCESS;
  std::string first_detail;
  for (int i = 0; i < incount; ++i) {
    if (!rs[i] || !request_done(*rs[i])) continue;
    indices[n] = i;
    if (statuses != MPI_STATUSES_IGNORE) {
      std::string detail;
      const int e = peek_status(*rs[i], &statuses[n], detail);
      if (e != MPI_SUCCESS && first == MPI_SUCCESS) first = e, first_detail = detail;
    }
    ++n;
  }
  *outcount = n;
  return first == MPI_SUCCESS ? first : raise_in_status(fn, nullptr, first, first_detail, true);
}

// MPI 4.1 3.2.5: the status fields through functions (for languages that
// cannot reach the struct).
int PMPI_Status_get_source(MPI_Status* status, int* source) {
  if (!status || !source) return mpi_raise("MPI_Status_get_source", nullptr, MPI_ERR_ARG, "null argument");
  *source = status->MPI_SOURCE;
  return MPI_SUCCESS;
}
int PMPI_Status_set_source(MPI_Status* status, int source) {
  if (!status) return mpi_raise("MPI_Status_set_source", nullptr, MPI_ERR_ARG, "null status");
  status->MPI_SOURCE = source;
  return MPI_SUCCESS;
}
int PMPI_Status_get_tag(MPI_Status* status, int* tag) {
  if (!status || !tag) return mpi_raise("MPI_Status_get_tag", nullptr, MPI_ERR_ARG, "null argument");
  *tag = status->MPI_TAG;
  return MPI_SUCCESS;
}
int PMPI_Status_set_tag(MPI_Status* status, int tag) {
  if (!status) return mpi_raise("MPI_Status_set_tag", nullptr, MPI_ERR_ARG, "null status");
  status->MPI_TAG = tag;
  return MPI_SUCCESS;
}
int PMPI_Status_get_error(MPI_Status* status, int* error) {
  if (!status || !error) return mpi_raise("MPI_Status_get_error", nullptr, MPI_ERR_ARG, "null argument");
  *error = status->MPI_ERROR;
  return MPI_SUCCESS;
}
int PMPI_Status_set_error(MPI_Status* status, int error) {
  if (!status) return mpi_raise("MPI_Status_set_error", nullptr, MPI_ERR_ARG, "null status");
  status->MPI_ERROR = error;
  return MPI_SUCCESS;
}

int PMPI_Cancel(MPI_Request* request) {
  if (!check_initialized("MPI_Cancel")) return MPI_ERR_OTHER;
  if (!request || *request == MPI_REQUEST_NULL)
    return mpi_raise("MPI_Cancel", nullptr, MPI_ERR_REQUEST, "null request");
  request_obj* r = lookup_request(*request);
  if (!r) return mpi_raise("MPI_Cancel", nullptr, MPI_ERR_REQUEST, "invalid request " + std::to_string(*request));
  // Receives not matched yet are withdrawn. A send waiting for its
  // rendezvous asks the receiver to withdraw the message: it then completes
  // as cancelled or, if a receive already took it, normally; eager sends
  // complete by themselves (MPI_Test_cancelled reports false). Either way
  // MPI_Wait returns without the receiver posting anything.
  if (r->active && !r->local_done && r->type != request_obj::kind::generic) st().session->cancel(r->engine);
  if (r->active && r->type == request_obj::kind::generic && r->on_cancel) {  // e.g. a generalized request
    std::string detail;
    const int err = r->on_cancel(*r, detail);
    if (err != MPI_SUCCESS) return mpi_raise("MPI_Cancel", r->comm, err, detail);
  }
  return MPI_SUCCESS;
}

int PMPI_Test_cancelled(const MPI_Status* status, int* flag) {
  if (!status || !flag) return mpi_raise("MPI_Test_cancelled", nullptr, MPI_ERR_ARG, "null argument");
  *flag = status->nmad_cancelled ? 1 : 0;
  return MPI_SUCCESS;
}

}  // extern "C"

// The public names: weak aliases, so profiling tools can interpose.
#pragma weak MPI_Request_get_status = PMPI_Request_get_status
#pragma weak MPI_Request_get_status_any = PMPI_Request_get_status_any
#pragma weak MPI_Request_get_status_all = PMPI_Request_get_status_all
#pragma weak MPI_Request_get_status_some = PMPI_Request_get_status_some
#pragma weak MPI_Status_get_source = PMPI_Status_get_source
#pragma weak MPI_Status_set_source = PMPI_Status_set_source
#pragma weak MPI_Status_get_tag = PMPI_Status_get_tag
#pragma weak MPI_Status_set_tag = PMPI_Status_set_tag
#pragma weak MPI_Status_get_error = PMPI_Status_get_error
#pragma weak MPI_Status_set_error = PMPI_Status_set_error
#pragma weak MPI_Cancel = PMPI_Cancel
#pragma weak MPI_Test_cancelled = PMPI_Test_cancelled
