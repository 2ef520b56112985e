// Sessions (MPI 4.0 chapter 11.3): MPI_Session_init/finalize, process
// sets, MPI_Group_from_session_pset, MPI_Comm_create_from_group,
// MPI_Intercomm_create_from_groups.
//
// A session is a handle over the one library: the first MPI_Session_init
// (or MPI_Init) starts the engine at the thread level asked for (info key
// "thread_level", default MPI_THREAD_SINGLE); later ones, and MPI_Init
// after a session, join it at the level it runs at (reported by
// MPI_Session_get_info and MPI_Query_thread). The library shuts down when
// the last session is finalized and the world model is not in use (never
// initialised, or finalized already), or at MPI_Finalize when no session
// is open; that shutdown is collective over every process of the job, like
// MPI_Finalize. A shut-down library does not start again in the same
// process: a later MPI_Session_init fails with MPI_ERR_SESSION.
//
// Process sets: "mpi://WORLD" (every process of the job) and "mpi://SELF"
// (this process); MPI_Session_get_pset_info gives their "mpi_size".
// MPI_Comm_create_from_group is collective over the group's members, who
// agree on a context through the job's own world communicator, told apart
// by the string tag (concurrent creations with one group must use
// different tags, as the standard requires).
//
// Errors in session calls go to the session's error handler (the one given
// at init; MPI_ERRORS_ARE_FATAL if none); errors with no valid session go
// to MPI_ERRORS_ARE_FATAL's handling, as for a communicator-less call.
#include <strings.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "mpi_layer/mpi_impl.hpp"

namespace nmad::mpi {
namespace {

struct session_obj {
  MPI_Errhandler errhandler = MPI_ERRORS_ARE_FATAL;
  info_entries hints;  // the info given at init
};

// Handles: session i is i + 1 (0 is MPI_SESSION_NULL). Under library_mutex().
std::vector<std::unique_ptr<session_obj>>& sessions() {
  static std::vector<std::unique_ptr<session_obj>> v;
  return v;
}

// Records that communicator h derives from session `session` (its
// buffered sends use the session's buffer when it has none of its own).
void set_comm_session(MPI_Comm h, MPI_Session session) {
  if (session == MPI_SESSION_NULL || h == MPI_COMM_NULL) return;
  comm_obj* c = lookup_comm(h);
  if (!c) return;
  std::lock_guard g(st().mu);
  c->session = session;
}

session_obj* lookup_session(MPI_Session h) {
  std::lock_guard g(library_mutex());
  auto& v = sessions();
  if (h < 1 || static_cast<std::size_t>(h) > v.size()) return nullptr;
  return v[static_cast<std::size_t>(h - 1)].get();
}

int raise_session(const char* fn, MPI_Session h, session_obj* so, int code, const std::string& detail) {
  return mpi_raise_on(fn, so ? so->errhandler : MPI_ERRORS_ARE_FATAL, h, code, detail);
}

const char* level_name(int level) {
  switch (level) {
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    default: return "MPI_THREAD_SINGLE";
  }
}

// -1: not a level name.
int level_of(const std::string& v) {
  for (int l : {MPI_THREAD_SINGLE, MPI_THREAD_FUNNELED, MPI_THREAD_SERIALIZED, MPI_THREAD_MULTIPLE})
    if (v == level_name(l)) return l;
  return -1;
}

constexpr const char* kWorld = "mpi://WORLD";
constexpr const char* kSelf = "mpi://SELF";

// The process set's members (world ranks); false if the name is unknown.
// Names compare without regard to case, as URIs' schemes do.
bool pset_members(const char* name, std::vector<int>& out) {
  if (!name) return false;
  if (!strcasecmp(name, kWorld)) {
    out.resize(static_cast<std::size_t>(st().world_size));
    for (int i = 0; i < st().world_size; ++i) out[static_cast<std::size_t>(i)] = i;
    return true;
  }
  if (!strcasecmp(name, kSelf)) {
    out.assign(1, st().world_rank);
    return true;
  }
  return false;
}

// pset_members, or the error raised on the session naming the set.
int pset_or_raise(const char* fn, MPI_Session h, session_obj* so, const char* name, std::vector<int>& out) {
  if (pset_members(name, out)) return MPI_SUCCESS;
  return raise_session(fn, h, so, MPI_ERR_ARG,
                       std::string("unknown process set \"") + (name ? name : "(null)") +
                           "\" (known: mpi://WORLD, mpi://SELF)");
}

// Checks the session handle of a call; raises on the fatal handler if bad.
session_obj* need_session(const char* fn, MPI_Session h, int& rc) {
  if (!check_initialized(fn)) {
    rc = MPI_ERR_OTHER;
    return nullptr;
  }
  session_obj* so = lookup_session(h);
  if (!so) rc = raise_session(fn, h, nullptr, MPI_ERR_SESSION, "invalid session " + std::to_string(h));
  return so;
}

}  // namespace

bool session_valid(const char* fn, int h, int& rc) { return need_session(fn, h, rc) != nullptr; }

int session_raise(const char* fn, int h, int code, const std::string& detail) {
  return raise_session(fn, h, lookup_session(h), code, detail);
}

}  // namespace nmad::mpi

using namespace nmad::mpi;

extern "C" {

int PMPI_Session_init(MPI_Info info, MPI_Errhandler errhandler, MPI_Session* session) {
  const char* fn = "MPI_Session_init";
  state& s = st();
  // Checked before the library may be up: these errors use the default
  // (fatal) handling, as the standard has no session to raise them on.
  info_entries hints;
  if (info != MPI_INFO_NULL) {
    auto e = info_get_entries(info);
    if (!e) {
      std::fprintf(stderr, "nmad MPI: %s: MPI_ERR_INFO: invalid info handle %d\n", fn, info);
      return MPI_ERR_INFO;
    }
    hints = *e;
  }
  if (!session) {
    std::fprintf(stderr, "nmad MPI: %s: MPI_ERR_ARG: null session\n", fn);
    return MPI_ERR_ARG;
  }
  int required = MPI_THREAD_SINGLE;
  for (const auto& [k, v] : hints)
    if (k == "thread_level") {
      required = level_of(v);
      if (required < 0) {
        std::fprintf(stderr, "nmad MPI: %s: MPI_ERR_INFO: thread_level \"%s\" is not MPI_THREAD_SINGLE, _FUNNELED, "
                     "_SERIALIZED or _MULTIPLE\n", fn, v.c_str());
        return MPI_ERR_INFO;
      }
    }
  {
    std::lock_guard lib(library_mutex());
    if (s.finalized.load()) {
      std::fprintf(stderr, "nmad MPI: %s: MPI_ERR_SESSION: the library was shut down in this process (the last "
                   "session or MPI_Finalize ended it) and does not start again\n", fn);
      return MPI_ERR_SESSION;
    }
    if (!s.initialized.load()) start_library(fn, required);
  }
  if (errhandler != MPI_ERRHANDLER_NULL && !valid_errhandler(errhandler))
    return mpi_raise_on(fn, MPI_ERRORS_ARE_FATAL, MPI_SESSION_NULL, MPI_ERR_ARG, "invalid error handler");
  auto so = std::make_unique<session_obj>();
  so->errhandler = errhandler == MPI_ERRHANDLER_NULL ? MPI_ERRORS_ARE_FATAL : errhandler;
  so->hints = std::move(hints);
  std::lock_guard lib(library_mutex());
  auto& v = sessions();
  v.push_back(std::move(so));
  ++s.open_sessions;
  *session = static_cast<MPI_Session>(v.size());
  return MPI_SUCCESS;
}

int PMPI_Session_finalize(MPI_Session* session) {
  const char* fn = "MPI_Session_finalize";
  if (!session) return mpi_raise_on(fn, MPI_ERRORS_ARE_FATAL, MPI_SESSION_NULL, MPI_ERR_ARG, "null session");
  int rc = MPI_SUCCESS;
  if (!need_session(fn, *session, rc)) return rc;
  bsend_session_end(*session);  // its buffered messages leave first
  state& s = st();
  std::lock_guard lib(library_mutex());
  sessions()[static_cast<std::size_t>(*session - 1)].reset();
  *session = MPI_SESSION_NULL;
  --s.open_sessions;
  const bool world_in_use = s.world_initialized.load() && !s.world_finalized.load();
  if (s.open_sessions == 0 && !world_in_use) stop_library();
  return MPI_SUCCESS;
}

int PMPI_Session_get_num_psets(MPI_Session session, MPI_Info info, int* npset_names) {
  const char* fn = "MPI_Session_get_num_psets";
  int rc = MPI_SUCCESS;
  session_obj* so = need_session(fn, session, rc);
  if (!so) return rc;
  if (!npset_names) return raise_session(fn, session, so, MPI_ERR_ARG, "null npset_names");
  if (info != MPI_INFO_NULL && !info_get_entries(info))
    return raise_session(fn, session, so, MPI_ERR_INFO, "invalid info handle " + std::to_string(info));
  *npset_names = 2;
  return MPI_SUCCESS;
}

int PMPI_Session_get_nth_pset(MPI_Session session, MPI_Info info, int n, int* pset_len, char* pset_name) {
  const char* fn = "MPI_Session_get_nth_pset";
  int rc = MPI_SUCCESS;
  session_obj* so = need_session(fn, session, rc);
  if (!so) return rc;
  if (info != MPI_INFO_NULL && !info_get_entries(info))
    return raise_session(fn, session, so, MPI_ERR_INFO, "invalid info handle " + std::to_string(info));
  if (n < 0 || n > 1) return raise_session(fn, session, so, MPI_ERR_ARG, "process set " + std::to_string(n) + " not in [0, 2)");
  if (!pset_len) return raise_session(fn, session, so, MPI_ERR_ARG, "null pset_len");
  const char* name = n == 0 ? kWorld : kSelf;
  const int need = static_cast<int>(std::strlen(name)) + 1;
  // *pset_len 0: the caller asks for the length (with the terminating null).
  if (*pset_len == 0) {
    *pset_len = need;
    return MPI_SUCCESS;
  }
  if (!pset_name) return raise_session(fn, session, so, MPI_ERR_ARG, "null pset_name");
  const int copy = std::min(*pset_len - 1, need - 1);
  if (copy > 0) std::memcpy(pset_name, name, static_cast<std::size_t>(copy));
  pset_name[std::max(copy, 0)] = '\0';
  *pset_len = need;
  return MPI_SUCCESS;
}

int PMPI_Session_get_pset_info(MPI_Session session, const char* pset_name, MPI_Info* info) {
  const char* fn = "MPI_Session_get_pset_info";
  int rc = MPI_SUCCESS;
  session_obj* so = need_session(fn, session, rc);
  if (!so) return rc;
  if (!info) return raise_session(fn, session, so, MPI_ERR_ARG, "null info");
  std::vector<int> members;
  if (int e = pset_or_raise(fn, session, so, pset_name, members)) return e;
  *info = new_info({{"mpi_size", std::to_string(members.size())}});
  return MPI_SUCCESS;
}

int PMPI_Session_get_info(MPI_Session session, MPI_Info* info_used) {
  const char* fn = "MPI_Session_get_info";
  int rc = MPI_SUCCESS;
  session_obj* so = need_session(fn, session, rc);
  if (!so) return rc;
  if (!info_used) return raise_session(fn, session, so, MPI_ERR_ARG, "null info");
  info_entries e;
  for (const auto& kv : so->hints)
    if (kv.first != "thread_level") e.push_back(kv);
  e.insert(e.begin(), {"thread_level", level_name(st().thread_level)});
  *info_used = new_info(std::move(e));
  return MPI_SUCCESS;
}

int PMPI_Session_create_errhandler(MPI_Session_errhandler_function* session_errhandler_fn, MPI_Errhandler* errhandler) {
  // Callable before any session or MPI_Init (its handler is what
  // MPI_Session_init is given). One table of user handlers for every kind
  // of object (errors.cpp).
  return create_errhandler("MPI_Session_create_errhandler",
                           reinterpret_cast<MPI_Comm_errhandler_function*>(session_errhandler_fn), errhandler);
}

int PMPI_Session_set_errhandler(MPI_Session session, MPI_Errhandler errhandler) {
  const char* fn = "MPI_Session_set_errhandler";
  int rc = MPI_SUCCESS;
  session_obj* so = need_session(fn, session, rc);
  if (!so) return rc;
  if (!valid_errhandler(errhandler)) return raise_session(fn, session, so, MPI_ERR_ARG, "invalid error handler");
  std::lock_guard lib(library_mutex());
  so->errhandler = errhandler;
  return MPI_SUCCESS;
}

int PMPI_Session_get_errhandler(MPI_Session session, MPI_Errhandler* errhandler) {
  const char* fn = "MPI_Session_get_errhandler";
  int rc = MPI_SUCCESS;
  session_obj* so = need_session(fn, session, rc);
  if (!so) return rc;
  if (!errhandler) return raise_session(fn, session, so, MPI_ERR_ARG, "null errhandler");
  std::lock_guard lib(library_mutex());
  *errhandler = so->errhandler;
  return MPI_SUCCESS;
}

int PMPI_Session_call_errhandler(MPI_Session session, int errorcode) {
  const char* fn = "MPI_Session_call_errhandler";
  int rc = MPI_SUCCESS;
  session_obj* so = need_session(fn, session, rc);
  if (!so) return rc;
  raise_session(fn, session, so, errorcode, {});
  return MPI_SUCCESS;  // the handler was called
}

int PMPI_Group_from_session_pset(MPI_Session session, const char* pset_name, MPI_Group* newgroup) {
  const char* fn = "MPI_Group_from_session_pset";
  int rc = MPI_SUCCESS;
  session_obj* so = need_session(fn, session, rc);
  if (!so) return rc;
  if (!newgroup) return raise_session(fn, session, so, MPI_ERR_ARG, "null newgroup");
  std::vector<int> members;
  if (int e = pset_or_raise(fn, session, so, pset_name, members)) return e;
  *newgroup = new_group(std::move(members), session);
  return MPI_SUCCESS;
}

int PMPI_Comm_create_from_group(MPI_Group group, const char* stringtag, MPI_Info info, MPI_Errhandler errhandler,
                                MPI_Comm* newcomm) {
  const char* fn = "MPI_Comm_create_from_group";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (errhandler != MPI_ERRHANDLER_NULL && !valid_errhandler(errhandler))
    return mpi_raise_on(fn, MPI_ERRORS_ARE_FATAL, MPI_COMM_NULL, MPI_ERR_ARG, "invalid error handler");
  // Argument errors go to the handler given (the one the new communicator
  // would have; no other object is at hand), else MPI_ERRORS_ARE_FATAL.
  const MPI_Errhandler eh = errhandler != MPI_ERRHANDLER_NULL ? errhandler : MPI_ERRORS_ARE_FATAL;
  if (!newcomm) return mpi_raise_on(fn, eh, MPI_COMM_NULL, MPI_ERR_ARG, "null newcomm");
  if (!stringtag) return mpi_raise_on(fn, eh, MPI_COMM_NULL, MPI_ERR_ARG, "null stringtag");
  if (std::strlen(stringtag) >= MPI_MAX_STRINGTAG_LEN)
    return mpi_raise_on(fn, eh, MPI_COMM_NULL, MPI_ERR_ARG, "stringtag longer than MPI_MAX_STRINGTAG_LEN - 1");
  std::optional<info_entries> hints;
  if (info != MPI_INFO_NULL && !(hints = info_get_entries(info)))
    return mpi_raise_on(fn, eh, MPI_COMM_NULL, MPI_ERR_INFO, "invalid info handle " + std::to_string(info));
  // The members agree through the job's world communicator; the tag (an
  // FNV-1a hash of the string tag) keeps concurrent creations apart.
  std::uint32_t h = 2166136261u;
  for (const char* p = stringtag; *p; ++p) h = (h ^ static_cast<unsigned char>(*p)) * 16777619u;
  const int tag = static_cast<int>(h & 0x3fffffffu);
  MPI_Errhandler keep = MPI_ERRORS_ARE_FATAL;
  comm_obj* world = lookup_comm(MPI_COMM_WORLD);
  // Errors of the creation itself go to the handler given (the new
  // communicator's), not to MPI_COMM_WORLD's.
  if (world) {
    std::lock_guard g(st().mu);
    keep = world->errhandler;
    world->errhandler = MPI_ERRORS_RETURN;
  }
  const int e = PMPI_Comm_create_group(MPI_COMM_WORLD, group, tag, newcomm);
  if (world) {
    std::lock_guard g(st().mu);
    world->errhandler = keep;
  }
  if (e != MPI_SUCCESS) return mpi_raise_on(fn, eh, MPI_COMM_NULL, e, "creating the communicator failed");
  if (*newcomm != MPI_COMM_NULL) {
    set_comm_session(*newcomm, group_session(group));
    PMPI_Comm_set_errhandler(*newcomm, eh);
    if (hints && !hints->empty()) PMPI_Comm_set_info(*newcomm, info);
  }
  return MPI_SUCCESS;
}

// Made of what exists: each group makes its own communicator from its
// group (Comm_create_from_group, the string tag telling it from other
// creations), then the two leaders meet over the job's world communicator
// as MPI_Intercomm_create's do (on its collective context, with a tag of
// their own derived from the string tag: user traffic cannot match it).
// Both sides must give the same string tag, as the standard requires.
int PMPI_Intercomm_create_from_groups(MPI_Group local_group, int local_leader, MPI_Group remote_group,
                                      int remote_leader, const char* stringtag, MPI_Info info,
                                      MPI_Errhandler errhandler, MPI_Comm* newintercomm) {
  const char* fn = "MPI_Intercomm_create_from_groups";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  const MPI_Errhandler eh = errhandler == MPI_ERRHANDLER_NULL ? MPI_ERRORS_ARE_FATAL : errhandler;
  if (errhandler != MPI_ERRHANDLER_NULL && !valid_errhandler(errhandler))
    return mpi_raise_on(fn, MPI_ERRORS_ARE_FATAL, MPI_COMM_NULL, MPI_ERR_ARG, "invalid error handler");
  auto fail = [&](int code, const std::string& detail) { return mpi_raise_on(fn, eh, MPI_COMM_NULL, code, detail); };
  if (!newintercomm) return fail(MPI_ERR_ARG, "null newintercomm");
  if (!stringtag) return fail(MPI_ERR_ARG, "null stringtag");
  if (std::strlen(stringtag) >= MPI_MAX_STRINGTAG_LEN)
    return fail(MPI_ERR_ARG, "stringtag longer than MPI_MAX_STRINGTAG_LEN - 1");
  const auto local = group_members(local_group), remote = group_members(remote_group);
  if (!local || local->empty()) return fail(MPI_ERR_GROUP, "invalid or empty local_group");
  if (!remote || remote->empty()) return fail(MPI_ERR_GROUP, "invalid or empty remote_group");
  if (std::find(local->begin(), local->end(), st().world_rank) == local->end())
    return fail(MPI_ERR_GROUP, "the calling process is not a member of local_group");
  if (local_leader < 0 || local_leader >= static_cast<int>(local->size()))
    return fail(MPI_ERR_RANK, "local_leader " + std::to_string(local_leader) + " not in [0, " +
                                  std::to_string(local->size()) + ")");
  if (remote_leader < 0 || remote_leader >= static_cast<int>(remote->size()))
    return fail(MPI_ERR_RANK, "remote_leader " + std::to_string(remote_leader) + " not in [0, " +
                                  std::to_string(remote->size()) + ")");
  for (int w : *remote)
    if (std::find(local->begin(), local->end(), w) != local->end())
      return fail(MPI_ERR_GROUP, "local_group and remote_group overlap (world rank " + std::to_string(w) + ")");
  // The two groups' own creations may run at once with one string tag:
  // their members differ, and so do the messages of each.
  MPI_Comm lc = MPI_COMM_NULL;
  const std::string ltag = std::string(stringtag).substr(0, MPI_MAX_STRINGTAG_LEN - 8) + "\x01local";
  if (int e = PMPI_Comm_create_from_group(local_group, ltag.c_str(), MPI_INFO_NULL, MPI_ERRORS_RETURN, &lc))
    return fail(e, "creating the local group's communicator failed");
  std::uint32_t h = 2166136261u;
  for (const char* p = stringtag; *p; ++p) h = (h ^ static_cast<unsigned char>(*p)) * 16777619u;
  h = (h ^ 0x1eu) * 16777619u;  // not the tag Comm_create_from_group derives
  const int tag = static_cast<int>(h & 0x3fffffffu);
  const int remote_world = (*remote)[static_cast<std::size_t>(remote_leader)];
  const int e = PMPI_Intercomm_create(lc, local_leader, MPI_COMM_WORLD, remote_world, tag, newintercomm);
  PMPI_Comm_free(&lc);
  if (e != MPI_SUCCESS) return fail(e, "joining the two groups failed");
  set_comm_session(*newintercomm, group_session(local_group));
  PMPI_Comm_set_errhandler(*newintercomm, eh);
  std::optional<info_entries> hints;
  if (info != MPI_INFO_NULL && (hints = info_get_entries(info)) && !hints->empty())
    PMPI_Comm_set_info(*newintercomm, info);
  return MPI_SUCCESS;
}

MPI_Fint PMPI_Session_c2f(MPI_Session session) { return session; }
MPI_Session PMPI_Session_f2c(MPI_Fint session) { return session; }

}  // extern "C"

#pragma weak MPI_Session_init = PMPI_Session_init
#pragma weak MPI_Session_finalize = PMPI_Session_finalize
#pragma weak MPI_Session_get_num_psets = PMPI_Session_get_num_psets
#pragma weak MPI_Session_get_nth_pset = PMPI_Session_get_nth_pset
#pragma weak MPI_Session_get_pset_info = PMPI_Session_get_pset_info
#pragma weak MPI_Session_get_info = PMPI_Session_get_info
#pragma weak MPI_Session_create_errhandler = PMPI_Session_create_errhandler
#pragma weak MPI_Session_set_errhandler = PMPI_Session_set_errhandler
#pragma weak MPI_Session_get_errhandler = PMPI_Session_get_errhandler
#pragma weak MPI_Session_call_errhandler = PMPI_Session_call_errhandler
#pragma weak MPI_Group_from_session_pset = PMPI_Group_from_session_pset
#pragma weak MPI_Comm_create_from_group = PMPI_Comm_create_from_group
#pragma weak MPI_Intercomm_create_from_groups = PMPI_Intercomm_create_from_groups
#pragma weak MPI_Session_c2f = PMPI_Session_c2f
#pragma weak MPI_Session_f2c = PMPI_Session_f2c
