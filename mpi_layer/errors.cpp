// Error classes, strings and handlers (MPI_ERRORS_ARE_FATAL by default).
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "mpi_layer/mpi_impl.hpp"

namespace nmad::mpi {
namespace {
struct error_entry {
  int code;
  const char* name;
  const char* text;
};
constexpr error_entry kErrors[] = {
    {MPI_SUCCESS, "MPI_SUCCESS", "no error"},
    {MPI_ERR_BUFFER, "MPI_ERR_BUFFER", "invalid buffer or buffer too small"},
    {MPI_ERR_COUNT, "MPI_ERR_COUNT", "invalid count"},
    {MPI_ERR_TYPE, "MPI_ERR_TYPE", "invalid datatype"},
    {MPI_ERR_TAG, "MPI_ERR_TAG", "invalid tag"},
    {MPI_ERR_COMM, "MPI_ERR_COMM", "invalid communicator"},
    {MPI_ERR_RANK, "MPI_ERR_RANK", "invalid rank"},
    {MPI_ERR_REQUEST, "MPI_ERR_REQUEST", "invalid request"},
    {MPI_ERR_ROOT, "MPI_ERR_ROOT", "invalid root"},
    {MPI_ERR_GROUP, "MPI_ERR_GROUP", "invalid group"},
    {MPI_ERR_OP, "MPI_ERR_OP", "invalid reduction operation"},
    {MPI_ERR_TOPOLOGY, "MPI_ERR_TOPOLOGY", "invalid topology"},
    {MPI_ERR_DIMS, "MPI_ERR_DIMS", "invalid dimensions"},
    {MPI_ERR_ARG, "MPI_ERR_ARG", "invalid argument"},
    {MPI_ERR_UNKNOWN, "MPI_ERR_UNKNOWN", "unknown error"},
    {MPI_ERR_TRUNCATE, "MPI_ERR_TRUNCATE", "message truncated"},
    {MPI_ERR_OTHER, "MPI_ERR_OTHER", "other error"},
    {MPI_ERR_INTERN, "MPI_ERR_INTERN", "internal error"},
    {MPI_ERR_IN_STATUS, "MPI_ERR_IN_STATUS", "error code is in the status"},
    {MPI_ERR_PENDING, "MPI_ERR_PENDING", "request pending"},
    {MPI_ERR_NO_MEM, "MPI_ERR_NO_MEM", "out of memory"},
    {MPI_ERR_PROC_FAILED, "MPI_ERR_PROC_FAILED", "a peer process failed"},
    {MPI_ERR_KEYVAL, "MPI_ERR_KEYVAL", "invalid keyval"},
    {MPI_ERR_INFO, "MPI_ERR_INFO", "invalid info object"},
    {MPI_ERR_INFO_KEY, "MPI_ERR_INFO_KEY", "info key too long or empty"},
    {MPI_ERR_INFO_VALUE, "MPI_ERR_INFO_VALUE", "info value too long"},
    {MPI_ERR_INFO_NOKEY, "MPI_ERR_INFO_NOKEY", "no such info key"},
    {MPI_ERR_NO_SPACE, "MPI_ERR_NO_SPACE", "not enough space (pack buffer)"},
    {MPI_ERR_UNSUPPORTED_OPERATION, "MPI_ERR_UNSUPPORTED_OPERATION", "operation not supported"},
    // One-sided communication and MPI-IO (declared, not provided).
    {MPI_ERR_WIN, "MPI_ERR_WIN", "invalid window"},
    {MPI_ERR_BASE, "MPI_ERR_BASE", "invalid base address"},
    {MPI_ERR_LOCKTYPE, "MPI_ERR_LOCKTYPE", "invalid lock type"},
    {MPI_ERR_DISP, "MPI_ERR_DISP", "invalid displacement"},
    {MPI_ERR_ASSERT, "MPI_ERR_ASSERT", "invalid assertion"},
    {MPI_ERR_RMA_CONFLICT, "MPI_ERR_RMA_CONFLICT", "conflicting accesses to a window"},
    {MPI_ERR_RMA_SYNC, "MPI_ERR_RMA_SYNC", "wrong synchronization of one-sided calls"},
    {MPI_ERR_RMA_RANGE, "MPI_ERR_RMA_RANGE", "target memory outside the window"},
    {MPI_ERR_RMA_ATTACH, "MPI_ERR_RMA_ATTACH", "memory cannot be attached"},
    {MPI_ERR_RMA_SHARED, "MPI_ERR_RMA_SHARED", "memory cannot be shared"},
    {MPI_ERR_RMA_FLAVOR, "MPI_ERR_RMA_FLAVOR", "wrong window flavor"},
    {MPI_ERR_SIZE, "MPI_ERR_SIZE", "invalid size"},
    {MPI_ERR_FILE, "MPI_ERR_FILE", "invalid file handle"},
    {MPI_ERR_NOT_SAME, "MPI_ERR_NOT_SAME", "arguments differ between the processes"},
    {MPI_ERR_AMODE, "MPI_ERR_AMODE", "invalid access mode"},
    {MPI_ERR_UNSUPPORTED_DATAREP, "MPI_ERR_UNSUPPORTED_DATAREP", "unsupported data representation"},
    {MPI_ERR_NO_SUCH_FILE, "MPI_ERR_NO_SUCH_FILE", "no such file"},
    {MPI_ERR_FILE_EXISTS, "MPI_ERR_FILE_EXISTS", "file exists"},
    {MPI_ERR_BAD_FILE, "MPI_ERR_BAD_FILE", "invalid file name"},
    {MPI_ERR_ACCESS, "MPI_ERR_ACCESS", "permission denied"},
    {MPI_ERR_QUOTA, "MPI_ERR_QUOTA", "quota exceeded"},
    {MPI_ERR_READ_ONLY, "MPI_ERR_READ_ONLY", "read-only file or file system"},
    {MPI_ERR_FILE_IN_USE, "MPI_ERR_FILE_IN_USE", "file in use"},
    {MPI_ERR_DUP_DATAREP, "MPI_ERR_DUP_DATAREP", "data representation already registered"},
    {MPI_ERR_CONVERSION, "MPI_ERR_CONVERSION", "data conversion failed"},
    {MPI_ERR_IO, "MPI_ERR_IO", "I/O error"},
    // MPI 4.0 and 4.1.
    {MPI_ERR_SESSION, "MPI_ERR_SESSION", "invalid session"},
    {MPI_ERR_PROC_ABORTED, "MPI_ERR_PROC_ABORTED", "operation with a process that called abort"},
    {MPI_ERR_VALUE_TOO_LARGE, "MPI_ERR_VALUE_TOO_LARGE", "value too large for the output argument"},
    {MPI_ERR_ERRHANDLER, "MPI_ERR_ERRHANDLER", "invalid error handler"},
    // MPI_T (mpi_t.cpp).
    {MPI_T_ERR_MEMORY, "MPI_T_ERR_MEMORY", "MPI_T: out of memory"},
    {MPI_T_ERR_NOT_INITIALIZED, "MPI_T_ERR_NOT_INITIALIZED", "MPI_T is not initialised (MPI_T_init_thread)"},
    {MPI_T_ERR_CANNOT_INIT, "MPI_T_ERR_CANNOT_INIT", "MPI_T cannot be initialised"},
    {MPI_T_ERR_INVALID_INDEX, "MPI_T_ERR_INVALID_INDEX", "MPI_T: index out of range"},
    {MPI_T_ERR_INVALID_ITEM, "MPI_T_ERR_INVALID_ITEM", "MPI_T: item index out of range"},
    {MPI_T_ERR_INVALID_HANDLE, "MPI_T_ERR_INVALID_HANDLE", "MPI_T: invalid handle"},
    {MPI_T_ERR_OUT_OF_HANDLES, "MPI_T_ERR_OUT_OF_HANDLES", "MPI_T: no more handles"},
    {MPI_T_ERR_OUT_OF_SESSIONS, "MPI_T_ERR_OUT_OF_SESSIONS", "MPI_T: no more performance variable sessions"},
    {MPI_T_ERR_INVALID_SESSION, "MPI_T_ERR_INVALID_SESSION", "MPI_T: invalid performance variable session"},
    {MPI_T_ERR_CVAR_SET_NOT_NOW, "MPI_T_ERR_CVAR_SET_NOT_NOW", "MPI_T: the control variable cannot be set now"},
    {MPI_T_ERR_CVAR_SET_NEVER, "MPI_T_ERR_CVAR_SET_NEVER", "MPI_T: the control variable can never be set"},
    {MPI_T_ERR_PVAR_NO_STARTSTOP, "MPI_T_ERR_PVAR_NO_STARTSTOP", "MPI_T: the performance variable cannot be started or stopped"},
    {MPI_T_ERR_PVAR_NO_WRITE, "MPI_T_ERR_PVAR_NO_WRITE", "MPI_T: the performance variable cannot be written or reset"},
    {MPI_T_ERR_PVAR_NO_ATOMIC, "MPI_T_ERR_PVAR_NO_ATOMIC", "MPI_T: the performance variable cannot be read and reset atomically"},
    {MPI_T_ERR_INVALID_NAME, "MPI_T_ERR_INVALID_NAME", "MPI_T: no variable or category of that name"},
    {MPI_T_ERR_INVALID, "MPI_T_ERR_INVALID", "MPI_T: invalid argument"},
    {MPI_T_ERR_NOT_ACCESSIBLE, "MPI_T_ERR_NOT_ACCESSIBLE", "MPI_T: not accessible"},
    {MPI_T_ERR_NOT_SUPPORTED, "MPI_T_ERR_NOT_SUPPORTED", "MPI_T: not supported"},
    // Process creation and management (dynamic.cpp: declared, not provided).
    {MPI_ERR_SPAWN, "MPI_ERR_SPAWN", "processes could not be spawned"},
    {MPI_ERR_PORT, "MPI_ERR_PORT", "invalid port name"},
    {MPI_ERR_SERVICE, "MPI_ERR_SERVICE", "service name could not be published or unpublished"},
    {MPI_ERR_NAME, "MPI_ERR_NAME", "service name not published"},
};
const error_entry* find_error(int code) {
  for (const auto& e : kErrors)
    if (e.code == code) return &e;
  return nullptr;
}

// Error classes and codes added at run time (MPI_Add_error_class/code,
// MPI-3.1 8.5): values MPI_ERR_LASTCODE + 1 + i, each with its class (a
// class is its own) and the string set by MPI_Add_error_string ("" until
// then). `last` is MPI_LASTUSEDCODE's value; the attribute hands out a
// pointer to it, so it is written through atomic_ref only.
struct user_error {
  int cls;
  std::string text;
  bool failure = false;  // made by failure_code(), not by the application
  bool removed = false;  // MPI_Remove_error_class/code (MPI 4.1): never handed out again
  int live_codes = 0;    // a class: how many of its codes (other than itself) are not removed
};
struct user_errors {
  std::mutex mu;
  std::vector<user_error> codes;
  alignas(std::atomic_ref<int>::required_alignment) int last = MPI_ERR_LASTCODE;
};
user_errors& uerr() {
  static user_errors u;
  return u;
}
// Copies the entry of a user code out; false if `code` is not one.
bool find_user(int code, user_error* out) {
  if (code <= MPI_ERR_LASTCODE) return false;
  user_errors& u = uerr();
  std::lock_guard g(u.mu);
  const std::size_t i = static_cast<std::size_t>(code - MPI_ERR_LASTCODE - 1);
  if (i >= u.codes.size() || u.codes[i].removed) return false;
  if (out) *out = u.codes[i];
  return true;
}
int add_user(int cls_or_self) {
  user_errors& u = uerr();
  std::lock_guard g(u.mu);
  const int code = MPI_ERR_LASTCODE + 1 + static_cast<int>(u.codes.size());
  u.codes.push_back({cls_or_self < 0 ? code : cls_or_self, {}});
  if (cls_or_self > MPI_ERR_LASTCODE) ++u.codes[static_cast<std::size_t>(cls_or_self - MPI_ERR_LASTCODE - 1)].live_codes;
  std::atomic_ref<int>(u.last).store(code);
  return code;
}

// A code of class MPI_ERR_PROC_FAILED whose string carries `detail` (the
// engine's "rank 1 failed: peer process died", or a probe's): the class
// alone cannot say which process died, and with MPI_ERRORS_RETURN the
// detail would otherwise be lost. One code per distinct detail (they name
// a rank and its failure, so there are few); past kMaxFailureCodes, the
// class itself.
constexpr std::size_t kMaxFailureCodes = 256;
int failure_code(const std::string& detail) {
  if (detail.empty()) return MPI_ERR_PROC_FAILED;
  std::string text = "MPI_ERR_PROC_FAILED: a peer process failed (" + detail + ")";
  if (text.size() >= MPI_MAX_ERROR_STRING) text.resize(MPI_MAX_ERROR_STRING - 1);
  user_errors& u = uerr();
  std::lock_guard g(u.mu);
  std::size_t n = 0;
  for (std::size_t i = 0; i < u.codes.size(); ++i) {
    if (!u.codes[i].failure) continue;
    if (u.codes[i].text == text) return MPI_ERR_LASTCODE + 1 + static_cast<int>(i);
    ++n;
  }
  if (n >= kMaxFailureCodes) return MPI_ERR_PROC_FAILED;
  const int code = MPI_ERR_LASTCODE + 1 + static_cast<int>(u.codes.size());
  u.codes.push_back({MPI_ERR_PROC_FAILED, std::move(text), true});
  std::atomic_ref<int>(u.last).store(code);
  return code;
}
}  // namespace

// Declared where used (attr.cpp): MPI_LASTUSEDCODE's value, and whether a
// callback's return value is an error code MPI knows (predefined or added).
int* last_used_error_code() { return &uerr().last; }
bool valid_error_code(int code) { return find_error(code) != nullptr || find_user(code, nullptr); }

const char* error_name(int code) {
  const error_entry* e = find_error(code);
  return e ? e->name : "MPI_ERR_UNKNOWN";
}
const char* error_text(int code) {
  const error_entry* e = find_error(code);
  return e ? e->text : "unknown error code";
}

int from_errc(nmad::errc e) {
  switch (e) {
    case nmad::errc::ok: return MPI_SUCCESS;
    case nmad::errc::truncated: return MPI_ERR_TRUNCATE;
    case nmad::errc::size_mismatch: return MPI_ERR_TRUNCATE;
    case nmad::errc::peer_failed: return MPI_ERR_PROC_FAILED;
    case nmad::errc::invalid_argument: return MPI_ERR_ARG;
    case nmad::errc::protocol_error: return MPI_ERR_OTHER;
    case nmad::errc::cancelled: return MPI_SUCCESS;  // reported by MPI_Test_cancelled
    case nmad::errc::no_resource: return MPI_ERR_NO_MEM;
    case nmad::errc::internal: return MPI_ERR_INTERN;
  }
  return MPI_ERR_OTHER;
}

[[noreturn]] static void fatal(const std::string& line) {
  state& s = st();
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
  if (s.session) s.session->abort(1, line);
  std::_Exit(1);
}

bool check_initialized_slow(const char* fn) {
  state& s = st();
  if (s.initialized.load() && !s.finalized.load()) return true;
  fatal(std::string(fn) + ": MPI_ERR_OTHER: " +
        (s.finalized.load() ? "called after MPI_Finalize" : "called before MPI_Init"));
}

namespace {
// Reports code with handler h (user: its function, or null), passing
// `handle` (the object the error is raised on) to a user handler.
int raise_with(const char* fn, MPI_Errhandler h, MPI_Comm_errhandler_function* user, int handle, int code,
               const std::string& detail) {
  state& s = st();
  if (h == MPI_ERRORS_RETURN || user) {
    // What the application gets to see: a dead peer's code names it.
    const int ret = code == MPI_ERR_PROC_FAILED ? failure_code(detail) : code;
    int e = ret;
    if (user) user(&handle, &e);
    return ret;
  }
  std::string line = "nmad MPI (rank " + std::to_string(s.world_rank) + "): " + fn + ": ";
  user_error ue;
  if (find_user(code, &ue))
    line += "user error code " + std::to_string(code) + " (class " + std::to_string(ue.cls) + "): " + ue.text;
  else
    line += std::string(error_name(code)) + ": " + error_text(code);
  if (!detail.empty()) line += " (" + detail + ")";
  fatal(line);
}
MPI_Comm_errhandler_function* user_handler_locked(state& s, MPI_Errhandler h) {
  if (h >= kFirstUserErrhandler && static_cast<std::size_t>(h - kFirstUserErrhandler) < s.errhandlers.size())
    return s.errhandlers[h - kFirstUserErrhandler];
  return nullptr;
}
}  // namespace

int mpi_raise(const char* fn, comm_obj* c, int code, const std::string& detail) {
  if (code == MPI_SUCCESS) return code;
  state& s = st();
  MPI_Errhandler h = MPI_ERRORS_ARE_FATAL;  // (MPI_ERRORS_ABORT: the same, the whole job ends)
  MPI_Comm handle = MPI_COMM_WORLD;
  MPI_Comm_errhandler_function* user = nullptr;
  {
    std::lock_guard g(s.mu);
    if (!c && s.comms.size() > MPI_COMM_WORLD) c = s.comms[MPI_COMM_WORLD].get();
    if (c) {
      h = c->errhandler;
      handle = c->handle;
    }
    user = user_handler_locked(s, h);
  }
  return raise_with(fn, h, user, handle, code, detail);
}

int mpi_raise_on(const char* fn, MPI_Errhandler h, int handle, int code, const std::string& detail) {
  if (code == MPI_SUCCESS) return code;
  state& s = st();
  MPI_Comm_errhandler_function* user = nullptr;
  {
    std::lock_guard g(s.mu);
    user = user_handler_locked(s, h);
  }
  return raise_with(fn, h, user, handle, code, detail);
}

bool valid_errhandler(MPI_Errhandler h) {
  state& s = st();
  std::lock_guard g(s.mu);
  return h == MPI_ERRORS_ARE_FATAL || h == MPI_ERRORS_RETURN || h == MPI_ERRORS_ABORT ||
         user_handler_locked(s, h) != nullptr;
}

int mpi_raise(const char* fn, comm_obj* c, int code, const char* detail) {
  return mpi_raise(fn, c, code, std::string(detail));
}

int mpi_raise_handle(const char* fn, MPI_Comm c, int code, const std::string& detail) {
  return mpi_raise(fn, lookup_comm(c), code, detail);
}

}  // namespace nmad::mpi

using namespace nmad::mpi;

namespace nmad::mpi {
// A user error handler in the one table of every kind of object; needs no
// initialised library (MPI_Session_create_errhandler comes before
// MPI_Session_init). A null argument is MPI_ERR_ARG on MPI_COMM_WORLD's
// handler when the library is up, else reported and returned.
int create_errhandler(const char* fn, MPI_Comm_errhandler_function* f, MPI_Errhandler* errhandler) {
  state& s = st();
  if (!f || !errhandler) {
    if (s.initialized.load() && !s.finalized.load()) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null argument");
    std::fprintf(stderr, "nmad MPI: %s: MPI_ERR_ARG: null argument\n", fn);
    return MPI_ERR_ARG;
  }
  std::lock_guard g(s.mu);
  s.errhandlers.push_back(f);
  *errhandler = static_cast<MPI_Errhandler>(s.errhandlers.size() - 1 + kFirstUserErrhandler);
  return MPI_SUCCESS;
}
}  // namespace nmad::mpi

extern "C" {

int PMPI_Error_string(int errorcode, char* string, int* resultlen) {
  if (!string || !resultlen) return MPI_ERR_ARG;
  user_error ue;
  const bool user = find_user(errorcode, &ue);
  // A user code's string is exactly what MPI_Add_error_string set ("" if none).
  std::string s = user ? ue.text : std::string(error_name(errorcode)) + ": " + error_text(errorcode);
  if (s.size() >= MPI_MAX_ERROR_STRING) s.resize(MPI_MAX_ERROR_STRING - 1);
  std::memcpy(string, s.c_str(), s.size() + 1);
  *resultlen = static_cast<int>(s.size());
  return user || find_error(errorcode) ? MPI_SUCCESS : MPI_ERR_ARG;
}

int PMPI_Error_class(int errorcode, int* errorclass) {
  if (!errorclass) return MPI_ERR_ARG;
  user_error ue;
  if (find_user(errorcode, &ue)) {
    *errorclass = ue.cls;
    return MPI_SUCCESS;
  }
  if (!find_error(errorcode)) return mpi_raise("MPI_Error_class", nullptr, MPI_ERR_ARG,
                                           "unknown error code " + std::to_string(errorcode));
  *errorclass = errorcode;  // every predefined code is its own class
  return MPI_SUCCESS;
}

int PMPI_Add_error_class(int* errorclass) {
  const char* fn = "MPI_Add_error_class";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (!errorclass) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null errorclass");
  *errorclass = add_user(-1);
  return MPI_SUCCESS;
}

int PMPI_Add_error_code(int errorclass, int* errorcode) {
  const char* fn = "MPI_Add_error_code";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (!errorcode) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null errorcode");
  user_error ue;
  const bool user_class = find_user(errorclass, &ue) && ue.cls == errorclass;
  if (!user_class && !(errorclass > MPI_SUCCESS && find_error(errorclass)))
    return mpi_raise(fn, nullptr, MPI_ERR_ARG, "not an error class: " + std::to_string(errorclass));
  *errorcode = add_user(errorclass);
  return MPI_SUCCESS;
}

namespace {
// The string of a code the application added (MPI_Add_error_string,
// MPI_Remove_error_string: ""); any other code is an error.
int set_user_string(const char* fn, int errorcode, const char* text) {
  user_error ue;
  if (!find_user(errorcode, &ue) || ue.failure)
    return mpi_raise(fn, nullptr, MPI_ERR_ARG,
                     "not a code added by MPI_Add_error_class/code: " + std::to_string(errorcode));
  user_errors& u = uerr();
  std::lock_guard g(u.mu);
  u.codes[static_cast<std::size_t>(errorcode - MPI_ERR_LASTCODE - 1)].text = text;
  return MPI_SUCCESS;
}
}  // namespace

int PMPI_Add_error_string(int errorcode, const char* string) {
  const char* fn = "MPI_Add_error_string";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (!string) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null string");
  if (std::strlen(string) >= MPI_MAX_ERROR_STRING)
    return mpi_raise(fn, nullptr, MPI_ERR_ARG, "string longer than MPI_MAX_ERROR_STRING - 1");
  return set_user_string(fn, errorcode, string);
}

// MPI 4.1 9.5: what MPI_Add_error_class/code/string added can be taken
// back; predefined classes and codes cannot, nor a class that still has
// codes. A removed value is unknown from then on (MPI_Error_class answers
// MPI_ERR_ARG); values are not handed out again.
namespace {
int remove_user(const char* fn, int code, bool as_class) {
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  user_error ue;
  if (!find_user(code, &ue) || ue.failure)
    return mpi_raise(fn, nullptr, MPI_ERR_ARG,
                     std::to_string(code) + " is not a class or code added by MPI_Add_error_class/code");
  if (as_class != (ue.cls == code))
    return mpi_raise(fn, nullptr, MPI_ERR_ARG,
                     std::to_string(code) + (as_class ? " is an error code, not a class (MPI_Remove_error_code)"
                                                      : " is an error class, not a code (MPI_Remove_error_class)"));
  user_errors& u = uerr();
  std::unique_lock g(u.mu);
  user_error& e = u.codes[static_cast<std::size_t>(code - MPI_ERR_LASTCODE - 1)];
  if (as_class && e.live_codes > 0) {
    // (The count keeps removal O(1); which code is left is found only to
    // name it in the message.)
    int left = 0;
    for (std::size_t i = u.codes.size(); i-- > 0;)
      if (!u.codes[i].removed && u.codes[i].cls == code && MPI_ERR_LASTCODE + 1 + static_cast<int>(i) != code) {
        left = MPI_ERR_LASTCODE + 1 + static_cast<int>(i);
        break;
      }
    g.unlock();
    return mpi_raise(fn, nullptr, MPI_ERR_ARG,
                     "class " + std::to_string(code) + " still has error code " + std::to_string(left));
  }
  e.removed = true;
  e.text.clear();
  if (!as_class && e.cls > MPI_ERR_LASTCODE) --u.codes[static_cast<std::size_t>(e.cls - MPI_ERR_LASTCODE - 1)].live_codes;
  return MPI_SUCCESS;
}
}  // namespace

int PMPI_Remove_error_class(int errorclass) { return remove_user("MPI_Remove_error_class", errorclass, true); }
int PMPI_Remove_error_code(int errorcode) { return remove_user("MPI_Remove_error_code", errorcode, false); }

int PMPI_Remove_error_string(int errorcode) {
  const char* fn = "MPI_Remove_error_string";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  return set_user_string(fn, errorcode, "");
}

int PMPI_Comm_create_errhandler(MPI_Comm_errhandler_function* fn, MPI_Errhandler* errhandler) {
  if (!check_initialized("MPI_Comm_create_errhandler")) return MPI_ERR_OTHER;
  return create_errhandler("MPI_Comm_create_errhandler", fn, errhandler);
}

int PMPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler errhandler) {
  if (!check_initialized("MPI_Comm_set_errhandler")) return MPI_ERR_OTHER;
  comm_obj* c = lookup_comm_or_pending(comm);  // also while an idup creates it
  if (!c) return mpi_raise("MPI_Comm_set_errhandler", nullptr, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm));
  if (!valid_errhandler(errhandler))
    return mpi_raise("MPI_Comm_set_errhandler", c, MPI_ERR_ARG, "invalid error handler");
  std::lock_guard g(st().mu);
  c->errhandler = errhandler;
  return MPI_SUCCESS;
}

int PMPI_Comm_get_errhandler(MPI_Comm comm, MPI_Errhandler* errhandler) {
  if (!check_initialized("MPI_Comm_get_errhandler")) return MPI_ERR_OTHER;
  comm_obj* c = lookup_comm_or_pending(comm);  // also while an idup creates it
  if (!c) return mpi_raise("MPI_Comm_get_errhandler", nullptr, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm));
  if (!errhandler) return mpi_raise("MPI_Comm_get_errhandler", c, MPI_ERR_ARG, "null errhandler");
  std::lock_guard g(st().mu);
  *errhandler = c->errhandler;
  return MPI_SUCCESS;
}

int PMPI_Comm_call_errhandler(MPI_Comm comm, int errorcode) {
  if (!check_initialized("MPI_Comm_call_errhandler")) return MPI_ERR_OTHER;
  comm_obj* c = lookup_comm(comm);
  if (!c) return mpi_raise("MPI_Comm_call_errhandler", nullptr, MPI_ERR_COMM, "invalid communicator");
  mpi_raise("MPI_Comm_call_errhandler", c, errorcode);
  return MPI_SUCCESS;
}

int PMPI_Errhandler_free(MPI_Errhandler* errhandler) {
  const char* fn = "MPI_Errhandler_free";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (!errhandler) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null errhandler pointer");
  if (*errhandler == MPI_ERRHANDLER_NULL)
    return mpi_raise(fn, nullptr, MPI_ERR_ARG, "MPI_ERRHANDLER_NULL is not an error handler");
  if (!valid_errhandler(*errhandler))
    return mpi_raise(fn, nullptr, MPI_ERR_ARG, "invalid error handler " + std::to_string(*errhandler));
  // User handlers stay registered while a communicator may still use them
  // (MPI semantics: freeing only drops the caller's reference).
  *errhandler = MPI_ERRHANDLER_NULL;
  return MPI_SUCCESS;
}

}  // extern "C"

// The public names: weak aliases, so profiling tools can interpose.
#pragma weak MPI_Error_string = PMPI_Error_string
#pragma weak MPI_Error_class = PMPI_Error_class
#pragma weak MPI_Add_error_class = PMPI_Add_error_class
#pragma weak MPI_Add_error_code = PMPI_Add_error_code
#pragma weak MPI_Add_error_string = PMPI_Add_error_string
#pragma weak MPI_Comm_create_errhandler = PMPI_Comm_create_errhandler
#pragma weak MPI_Comm_set_errhandler = PMPI_Comm_set_errhandler
#pragma weak MPI_Comm_get_errhandler = PMPI_Comm_get_errhandler
#pragma weak MPI_Comm_call_errhandler = PMPI_Comm_call_errhandler
#pragma weak MPI_Errhandler_free = PMPI_Errhandler_free
#pragma weak MPI_Remove_error_class = PMPI_Remove_error_class
#pragma weak MPI_Remove_error_code = PMPI_Remove_error_code
#pragma weak MPI_Remove_error_string = PMPI_Remove_error_string
