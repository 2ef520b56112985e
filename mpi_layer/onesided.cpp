// One-sided communication (MPI-3.1 chapter 11): declared so that programs
// which merely name windows (benchmark suites with shared utility code,
// configure scripts that link-test MPI_Accumulate) build, but not provided.
//
// No window can be created, so every call raises
// MPI_ERR_UNSUPPORTED_OPERATION through the usual error-handler path
// (the communicator argument's handler, else MPI_COMM_WORLD's) with the
// detail "one-sided communication is not provided by this MPI", after
// setting its output handles to their null value. What does work:
//   * MPI_Win_free: MPI_ERR_WIN (MPI_WIN_NULL, or a handle no window can
//     have), MPI_ERR_ARG for a null pointer;
//   * MPI_Win_create_errhandler creates a real error handler (freed with
//     MPI_Errhandler_free); MPI_Win_c2f / MPI_Win_f2c (identity);
//   * the predefined attribute callbacks MPI_WIN_NULL_COPY_FN,
//     MPI_WIN_DUP_FN, MPI_WIN_NULL_DELETE_FN.
#include <string>

#include "mpi_layer/mpi_impl.hpp"

using namespace nmad::mpi;

namespace {

constexpr const char* kNoRma = "one-sided communication is not provided by this MPI";

// Raised on MPI_COMM_WORLD's handler (no window exists to carry one).
[[gnu::cold]] int unsupported(const char* fn) {
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  return mpi_raise(fn, nullptr, MPI_ERR_UNSUPPORTED_OPERATION, kNoRma);
}

// Window constructors: an invalid communicator is reported as such, else
// the call is unsupported on the communicator's handler.
[[gnu::cold]] int unsupported_on(const char* fn, MPI_Comm comm) {
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  comm_obj* c = lookup_comm(comm);
  if (!c) return mpi_raise(fn, nullptr, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm));
  return mpi_raise(fn, c, MPI_ERR_UNSUPPORTED_OPERATION, kNoRma);
}

void null_request(MPI_Request* request) {
  if (request) *request = MPI_REQUEST_NULL;
}

}  // namespace

extern "C" {

// ---- predefined attribute callbacks (real) ----
int nmad_mpi_win_null_copy_fn(MPI_Win, int, void*, void*, void*, int* flag) {
  if (flag) *flag = 0;
  return MPI_SUCCESS;
}
int nmad_mpi_win_dup_fn(MPI_Win, int, void*, void* in, void* out, int* flag) {
  if (out) *static_cast<void**>(out) = in;
  if (flag) *flag = 1;
  return MPI_SUCCESS;
}
int nmad_mpi_win_null_delete_fn(MPI_Win, int, void*, void*) { return MPI_SUCCESS; }

// ---- window creation ----
int PMPI_Win_create(void*, MPI_Aint, int, MPI_Info, MPI_Comm comm, MPI_Win* win) {
  if (win) *win = MPI_WIN_NULL;
  return unsupported_on("MPI_Win_create", comm);
}
int PMPI_Win_allocate(MPI_Aint, int, MPI_Info, MPI_Comm comm, void* baseptr, MPI_Win* win) {
  if (baseptr) *static_cast<void**>(baseptr) = nullptr;
  if (win) *win = MPI_WIN_NULL;
  return unsupported_on("MPI_Win_allocate", comm);
}
int PMPI_Win_allocate_shared(MPI_Aint, int, MPI_Info, MPI_Comm comm, void* baseptr, MPI_Win* win) {
  if (baseptr) *static_cast<void**>(baseptr) = nullptr;
  if (win) *win = MPI_WIN_NULL;
  return unsupported_on("MPI_Win_allocate_shared", comm);
}
int PMPI_Win_create_dynamic(MPI_Info, MPI_Comm comm, MPI_Win* win) {
  if (win) *win = MPI_WIN_NULL;
  return unsupported_on("MPI_Win_create_dynamic", comm);
}
int PMPI_Win_shared_query(MPI_Win, int, MPI_Aint* size, int* disp_unit, void* baseptr) {
  if (size) *size = 0;
  if (disp_unit) *disp_unit = 0;
  if (baseptr) *static_cast<void**>(baseptr) = nullptr;
  return unsupported("MPI_Win_shared_query");
}
int PMPI_Win_attach(MPI_Win, void*, MPI_Aint) { return unsupported("MPI_Win_attach"); }
int PMPI_Win_detach(MPI_Win, const void*) { return unsupported("MPI_Win_detach"); }

int PMPI_Win_free(MPI_Win* win) {
  const char* fn = "MPI_Win_free";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (!win) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null window pointer");
  if (*win == MPI_WIN_NULL) return mpi_raise(fn, nullptr, MPI_ERR_WIN, "MPI_WIN_NULL is not a window");
  return mpi_raise(fn, nullptr, MPI_ERR_WIN,
                   "invalid window " + std::to_string(*win) + " (no window can exist: " + kNoRma + ")");
}

int PMPI_Win_get_group(MPI_Win, MPI_Group* group) {
  if (group) *group = MPI_GROUP_NULL;
  return unsupported("MPI_Win_get_group");
}
int PMPI_Win_set_info(MPI_Win, MPI_Info) { return unsupported("MPI_Win_set_info"); }
int PMPI_Win_get_info(MPI_Win, MPI_Info* info_used) {
  if (info_used) *info_used = MPI_INFO_NULL;
  return unsupported("MPI_Win_get_info");
}

// ---- communication ----
int PMPI_Put(const void*, int, MPI_Datatype, int, MPI_Aint, int, MPI_Datatype, MPI_Win) {
  return unsupported("MPI_Put");
}
int PMPI_Get(void*, int, MPI_Datatype, int, MPI_Aint, int, MPI_Datatype, MPI_Win) { return unsupported("MPI_Get"); }
int PMPI_Accumulate(const void*, int, MPI_Datatype, int, MPI_Aint, int, MPI_Datatype, MPI_Op, MPI_Win) {
  return unsupported("MPI_Accumulate");
}
int PMPI_Get_accumulate(const void*, int, MPI_Datatype, void*, int, MPI_Datatype, int, MPI_Aint, int, MPI_Datatype,
                        MPI_Op, MPI_Win) {
  return unsupported("MPI_Get_accumulate");
}
int PMPI_Fetch_and_op(const void*, void*, MPI_Datatype, int, MPI_Aint, MPI_Op, MPI_Win) {
  return unsupported("MPI_Fetch_and_op");
}
int PMPI_Compare_and_swap(const void*, const void*, void*, MPI_Datatype, int, MPI_Aint, MPI_Win) {
  return unsupported("MPI_Compare_and_swap");
}
int PMPI_Rput(const void*, int, MPI_Datatype, int, MPI_Aint, int, MPI_Datatype, MPI_Win, MPI_Request* request) {
  null_request(request);
  return unsupported("MPI_Rput");
}
int PMPI_Rget(void*, int, MPI_Datatype, int, MPI_Aint, int, MPI_Datatype, MPI_Win, MPI_Request* request) {
  null_request(request);
  return unsupported("MPI_Rget");
}
int PMPI_Raccumulate(const void*, int, MPI_Datatype, int, MPI_Aint, int, MPI_Datatype, MPI_Op, MPI_Win,
                     MPI_Request* request) {
  null_request(request);
  return unsupported("MPI_Raccumulate");
}
int PMPI_Rget_accumulate(const void*, int, MPI_Datatype, void*, int, MPI_Datatype, int, MPI_Aint, int, MPI_Datatype,
                         MPI_Op, MPI_Win, MPI_Request* request) {
  null_request(request);
  return unsupported("MPI_Rget_accumulate");
}

// ---- synchronization ----
int PMPI_Win_fence(int, MPI_Win) { return unsupported("MPI_Win_fence"); }
int PMPI_Win_start(MPI_Group, int, MPI_Win) { return unsupported("MPI_Win_start"); }
int PMPI_Win_complete(MPI_Win) { return unsupported("MPI_Win_complete"); }
int PMPI_Win_post(MPI_Group, int, MPI_Win) { return unsupported("MPI_Win_post"); }
int PMPI_Win_wait(MPI_Win) { return unsupported("MPI_Win_wait"); }
int PMPI_Win_test(MPI_Win, int* flag) {
  // The outputs of a failed call are undefined; "done" keeps a polling
  // loop that ignores the error from spinning for ever.
  if (flag) *flag = 1;
  return unsupported("MPI_Win_test");
}
int PMPI_Win_lock(int, int, int, MPI_Win) { return unsupported("MPI_Win_lock"); }
int PMPI_Win_lock_all(int, MPI_Win) { return unsupported("MPI_Win_lock_all"); }
int PMPI_Win_unlock(int, MPI_Win) { return unsupported("MPI_Win_unlock"); }
int PMPI_Win_unlock_all(MPI_Win) { return unsupported("MPI_Win_unlock_all"); }
int PMPI_Win_flush(int, MPI_Win) { return unsupported("MPI_Win_flush"); }
int PMPI_Win_flush_all(MPI_Win) { return unsupported("MPI_Win_flush_all"); }
int PMPI_Win_flush_local(int, MPI_Win) { return unsupported("MPI_Win_flush_local"); }
int PMPI_Win_flush_local_all(MPI_Win) { return unsupported("MPI_Win_flush_local_all"); }
int PMPI_Win_sync(MPI_Win) { return unsupported("MPI_Win_sync"); }

// ---- attributes, names, error handlers ----
int PMPI_Win_create_keyval(MPI_Win_copy_attr_function*, MPI_Win_delete_attr_function*, int* win_keyval, void*) {
  if (win_keyval) *win_keyval = MPI_KEYVAL_INVALID;
  return unsupported("MPI_Win_create_keyval");
}
int PMPI_Win_free_keyval(int*) { return unsupported("MPI_Win_free_keyval"); }
int PMPI_Win_set_attr(MPI_Win, int, void*) { return unsupported("MPI_Win_set_attr"); }
int PMPI_Win_get_attr(MPI_Win, int, void*, int* flag) {
  if (flag) *flag = 0;
  return unsupported("MPI_Win_get_attr");
}
int PMPI_Win_delete_attr(MPI_Win, int) { return unsupported("MPI_Win_delete_attr"); }
int PMPI_Win_set_name(MPI_Win, const char*) { return unsupported("MPI_Win_set_name"); }
int PMPI_Win_get_name(MPI_Win, char* win_name, int* resultlen) {
  if (win_name) win_name[0] = '\0';
  if (resultlen) *resultlen = 0;
  return unsupported("MPI_Win_get_name");
}

int PMPI_Win_create_errhandler(MPI_Win_errhandler_function* fn, MPI_Errhandler* errhandler) {
  const char* name = "MPI_Win_create_errhandler";
  if (!check_initialized(name)) return MPI_ERR_OTHER;
  if (!fn || !errhandler) return mpi_raise(name, nullptr, MPI_ERR_ARG, "null function or errhandler pointer");
  // Same calling convention as a communicator handler (a pointer to an
  // int handle, a pointer to the code): one table holds both.
  return PMPI_Comm_create_errhandler(reinterpret_cast<MPI_Comm_errhandler_function*>(fn), errhandler);
}
int PMPI_Win_set_errhandler(MPI_Win, MPI_Errhandler) { return unsupported("MPI_Win_set_errhandler"); }
int PMPI_Win_get_errhandler(MPI_Win, MPI_Errhandler* errhandler) {
  if (errhandler) *errhandler = MPI_ERRHANDLER_NULL;
  return unsupported("MPI_Win_get_errhandler");
}
int PMPI_Win_call_errhandler(MPI_Win, int) { return unsupported("MPI_Win_call_errhandler"); }

MPI_Fint PMPI_Win_c2f(MPI_Win win) { return win; }
MPI_Win PMPI_Win_f2c(MPI_Fint win) { return win; }

// ---- the MPI 4.0 large-count forms: unsupported alike ----
int PMPI_Win_create_c(void*, MPI_Aint, MPI_Aint, MPI_Info, MPI_Comm comm, MPI_Win* win) {
  if (win) *win = MPI_WIN_NULL;
  return unsupported_on("MPI_Win_create_c", comm);
}
int PMPI_Win_allocate_c(MPI_Aint, MPI_Aint, MPI_Info, MPI_Comm comm, void* baseptr, MPI_Win* win) {
  if (baseptr) *static_cast<void**>(baseptr) = nullptr;
  if (win) *win = MPI_WIN_NULL;
  return unsupported_on("MPI_Win_allocate_c", comm);
}
int PMPI_Win_allocate_shared_c(MPI_Aint, MPI_Aint, MPI_Info, MPI_Comm comm, void* baseptr, MPI_Win* win) {
  if (baseptr) *static_cast<void**>(baseptr) = nullptr;
  if (win) *win = MPI_WIN_NULL;
  return unsupported_on("MPI_Win_allocate_shared_c", comm);
}
int PMPI_Win_shared_query_c(MPI_Win, int, MPI_Aint* size, MPI_Aint* disp_unit, void* baseptr) {
  if (size) *size = 0;
  if (disp_unit) *disp_unit = 0;
  if (baseptr) *static_cast<void**>(baseptr) = nullptr;
  return unsupported("MPI_Win_shared_query_c");
}
int PMPI_Put_c(const void*, MPI_Count, MPI_Datatype, int, MPI_Aint, MPI_Count, MPI_Datatype, MPI_Win) {
  return unsupported("MPI_Put_c");
}
int PMPI_Get_c(void*, MPI_Count, MPI_Datatype, int, MPI_Aint, MPI_Count, MPI_Datatype, MPI_Win) {
  return unsupported("MPI_Get_c");
}
int PMPI_Accumulate_c(const void*, MPI_Count, MPI_Datatype, int, MPI_Aint, MPI_Count, MPI_Datatype, MPI_Op, MPI_Win) {
  return unsupported("MPI_Accumulate_c");
}
int PMPI_Get_accumulate_c(const void*, MPI_Count, MPI_Datatype, void*, MPI_Count, MPI_Datatype, int, MPI_Aint,
                          MPI_Count, MPI_Datatype, MPI_Op, MPI_Win) {
  return unsupported("MPI_Get_accumulate_c");
}
int PMPI_Rput_c(const void*, MPI_Count, MPI_Datatype, int, MPI_Aint, MPI_Count, MPI_Datatype, MPI_Win,
                MPI_Request* request) {
  null_request(request);
  return unsupported("MPI_Rput_c");
}
int PMPI_Rget_c(void*, MPI_Count, MPI_Datatype, int, MPI_Aint, MPI_Count, MPI_Datatype, MPI_Win,
                MPI_Request* request) {
  null_request(request);
  return unsupported("MPI_Rget_c");
}
int PMPI_Raccumulate_c(const void*, MPI_Count, MPI_Datatype, int, MPI_Aint, MPI_Count, MPI_Datatype, MPI_Op, MPI_Win,
                       MPI_Request* request) {
  null_request(request);
  return unsupported("MPI_Raccumulate_c");
}
int PMPI_Rget_accumulate_c(const void*, MPI_Count, MPI_Datatype, void*, MPI_Count, MPI_Datatype, int, MPI_Aint,
                           MPI_Count, MPI_Datatype, MPI_Op, MPI_Win, MPI_Request* request) {
  null_request(request);
  return unsupported("MPI_Rget_accumulate_c");
}

}  // extern "C"

#pragma weak MPI_Win_create = PMPI_Win_create
#pragma weak MPI_Win_allocate = PMPI_Win_allocate
#pragma weak MPI_Win_allocate_shared = PMPI_Win_allocate_shared
#pragma weak MPI_Win_shared_query = PMPI_Win_shared_query
#pragma weak MPI_Win_create_dynamic = PMPI_Win_create_dynamic
#pragma weak MPI_Win_attach = PMPI_Win_attach
#pragma weak MPI_Win_detach = PMPI_Win_detach
#pragma weak MPI_Win_free = PMPI_Win_free
#pragma weak MPI_Win_get_group = PMPI_Win_get_group
#pragma weak MPI_Win_set_info = PMPI_Win_set_info
#pragma weak MPI_Win_get_info = PMPI_Win_get_info
#pragma weak MPI_Put = PMPI_Put
#pragma weak MPI_Get = PMPI_Get
#pragma weak MPI_Accumulate = PMPI_Accumulate
#pragma weak MPI_Get_accumulate = PMPI_Get_accumulate
#pragma weak MPI_Fetch_and_op = PMPI_Fetch_and_op
#pragma weak MPI_Compare_and_swap = PMPI_Compare_and_swap
#pragma weak MPI_Rput = PMPI_Rput
#pragma weak MPI_Rget = PMPI_Rget
#pragma weak MPI_Raccumulate = PMPI_Raccumulate
#pragma weak MPI_Rget_accumulate = PMPI_Rget_accumulate
#pragma weak MPI_Win_fence = PMPI_Win_fence
#pragma weak MPI_Win_start = PMPI_Win_start
#pragma weak MPI_Win_complete = PMPI_Win_complete
#pragma weak MPI_Win_post = PMPI_Win_post
#pragma weak MPI_Win_wait = PMPI_Win_wait
#pragma weak MPI_Win_test = PMPI_Win_test
#pragma weak MPI_Win_lock = PMPI_Win_lock
#pragma weak MPI_Win_lock_all = PMPI_Win_lock_all
#pragma weak MPI_Win_unlock = PMPI_Win_unlock
#pragma weak MPI_Win_unlock_all = PMPI_Win_unlock_all
#pragma weak MPI_Win_flush = PMPI_Win_flush
#pragma weak MPI_Win_flush_all = PMPI_Win_flush_all
#pragma weak MPI_Win_flush_local = PMPI_Win_flush_local
#pragma weak MPI_Win_flush_local_all = PMPI_Win_flush_local_all
#pragma weak MPI_Win_sync = PMPI_Win_sync
#pragma weak MPI_Win_create_keyval = PMPI_Win_create_keyval
#pragma weak MPI_Win_free_keyval = PMPI_Win_free_keyval
#pragma weak MPI_Win_set_attr = PMPI_Win_set_attr
#pragma weak MPI_Win_get_attr = PMPI_Win_get_attr
#pragma weak MPI_Win_delete_attr = PMPI_Win_delete_attr
#pragma weak MPI_Win_set_name = PMPI_Win_set_name
#pragma weak MPI_Win_get_name = PMPI_Win_get_name
#pragma weak MPI_Win_create_errhandler = PMPI_Win_create_errhandler
#pragma weak MPI_Win_set_errhandler = PMPI_Win_set_errhandler
#pragma weak MPI_Win_get_errhandler = PMPI_Win_get_errhandler
#pragma weak MPI_Win_call_errhandler = PMPI_Win_call_errhandler
#pragma weak MPI_Win_c2f = PMPI_Win_c2f
#pragma weak MPI_Win_f2c = PMPI_Win_f2c
#pragma weak MPI_Win_create_c = PMPI_Win_create_c
#pragma weak MPI_Win_allocate_c = PMPI_Win_allocate_c
#pragma weak MPI_Win_allocate_shared_c = PMPI_Win_allocate_shared_c
#pragma weak MPI_Win_shared_query_c = PMPI_Win_shared_query_c
#pragma weak MPI_Put_c = PMPI_Put_c
#pragma weak MPI_Get_c = PMPI_Get_c
#pragma weak MPI_Accumulate_c = PMPI_Accumulate_c
#pragma weak MPI_Get_accumulate_c = PMPI_Get_accumulate_c
#pragma weak MPI_Rput_c = PMPI_Rput_c
#pragma weak MPI_Rget_c = PMPI_Rget_c
#pragma weak MPI_Raccumulate_c = PMPI_Raccumulate_c
#pragma weak MPI_Rget_accumulate_c = PMPI_Rget_accumulate_c
