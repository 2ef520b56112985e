// The MPI tool information interface (MPI_T, MPI-3.1 chapter 14 and MPI
// 4.0's additions), over the engine's configuration table and counters.
//
// Control variables: one per NMAD_* knob of api/nmad/services/config.hpp's table
// (the table `nmad-info --config` prints), secret knobs (job keys) left
// out, in the table's order, named as the knob, described by its line of
// the table and what it accepts. Numeric knobs (flag, integer, size,
// duration) are MPI_LONG_LONG (sizes in bytes, durations in microseconds;
// -1 for a value the engine computes, e.g. "auto"), the others MPI_CHAR
// (the value as set, else the default; count MPI_MAX_INFO_VAL). They are
// read from the environment as the engine reads them, at any time. None
// can be written: every knob is read once, at start-up (scope
// MPI_T_SCOPE_CONSTANT when it only matters before MPI_Init, READONLY
// otherwise); MPI_T_cvar_write answers MPI_T_ERR_CVAR_SET_NEVER.
// Categories: one per part of nmad reading the knobs ("nmad_engine",
// "nmad_shm", ...).
//
// Performance variables: the engine's counters (session::stats, and per
// peer session::peer_stats: arrays with one entry per rank of
// MPI_COMM_WORLD), class MPI_T_PVAR_CLASS_COUNTER, MPI_UNSIGNED_LONG_LONG,
// bound to no object, continuous (no start/stop: MPI_T_ERR_PVAR_NO_STARTSTOP)
// and read-only (no write/reset: MPI_T_ERR_PVAR_NO_WRITE), in category
// "nmad_counters". They read 0 while the library is not running.
//
// No enumerations and no events (MPI 4.0): their counts are 0.
#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "api/nmad/services/config.hpp"
#include "mpi_layer/mpi_impl.hpp"

namespace nmad::mpi {
namespace {

namespace cfg = nmad::config;

struct cvar {
  const cfg::knob* k;
  bool numeric;
};

struct pvar {
  const char* name;
  const char* desc;
  bool per_peer;
  // Session totals: the field; per peer: the value of one gate.
  std::uint64_t (*total)(const nmad::session_stats&);
  std::uint64_t (*peer)(const nmad::gate_stats&);
};

std::uint64_t sum_tracks(const nmad::gate_stats& g, std::uint64_t nmad::track_stats::*f) {
  std::uint64_t n = 0;
  for (const auto& t : g.tracks) n += t.*f;
  return n;
}

const std::vector<pvar>& pvars() {
  static const std::vector<pvar> v = {
      {"nmad_packets_sent", "packets this process sent (all peers)", false,
       [](const nmad::session_stats& s) { return s.packets_sent; }, nullptr},
      {"nmad_chunks_sent", "chunks (message pieces and control items) those packets carried", false,
       [](const nmad::session_stats& s) { return s.chunks_sent; }, nullptr},
      {"nmad_bytes_sent", "packet bytes sent, headers included", false,
       [](const nmad::session_stats& s) { return s.bytes_sent; }, nullptr},
      {"nmad_rdv_transfers", "bulk rendezvous transfers sent", false,
       [](const nmad::session_stats& s) { return s.rdv_data_sent; }, nullptr},
      {"nmad_packets_received", "packets this process received", false,
       [](const nmad::session_stats& s) { return s.packets_received; }, nullptr},
      {"nmad_unexpected_messages", "messages that arrived before their receive was posted", false,
       [](const nmad::session_stats& s) { return s.unexpected_messages; }, nullptr},
      {"nmad_protocol_errors", "malformed or foreign packets refused", false,
       [](const nmad::session_stats& s) { return s.protocol_errors; }, nullptr},
      {"nmad_offloaded_sends", "eager sends whose copy went to the progress thread", false,
       [](const nmad::session_stats& s) { return s.offloaded_sends; }, nullptr},
      {"nmad_peer_packets", "packets sent to each rank of MPI_COMM_WORLD (one entry per rank)", true, nullptr,
       [](const nmad::gate_stats& g) { return sum_tracks(g, &nmad::track_stats::packets); }},
      {"nmad_peer_bytes",
       "bytes sent to each rank of MPI_COMM_WORLD: packets (headers included) and pushed rendezvous data "
       "(data the receiver pulled from this process's memory is not counted)",
       true, nullptr,
       [](const nmad::gate_stats& g) {
         return sum_tracks(g, &nmad::track_stats::bytes) + sum_tracks(g, &nmad::track_stats::rdv_bytes);
       }},
      {"nmad_peer_chunks", "chunks sent to each rank of MPI_COMM_WORLD (aggregation: chunks per packet)", true,
       nullptr, [](const nmad::gate_stats& g) { return sum_tracks(g, &nmad::track_stats::chunks); }},
      {"nmad_peer_rdv_requests", "messages sent to each rank of MPI_COMM_WORLD by rendezvous", true, nullptr,
       [](const nmad::gate_stats& g) { return g.rdv_requests; }},
      {"nmad_peer_idle_ns", "time each rank's tracks had work queued but nothing posted (ns)", true, nullptr,
       [](const nmad::gate_stats& g) { return sum_tracks(g, &nmad::track_stats::idle_ns); }},
  };
  return v;
}

struct category {
  std::string name, desc;
  std::vector<int> cvars, pvars;
};

struct tool_state {
  std::mutex mu;
  int inits = 0;  // MPI_T_init_thread minus MPI_T_finalize calls
  std::vector<cvar> cvars;
  std::vector<category> cats;
  // Handles: index + 1 into these (0 is the NULL handle); -1 when freed.
  std::vector<int> cvar_handles;                   // -> cvar index
  std::vector<int> sessions;                       // 1 live, 0 freed
  struct pvar_handle {
    int session;  // 0: freed
    int index;    // into pvars()
    int count;    // entries, fixed at allocation
  };
  std::vector<pvar_handle> pvar_handles;
};

tool_state& ts() {
  static tool_state t;
  return t;
}

void build_tables(tool_state& t) {
  if (!t.cvars.empty()) return;
  std::map<std::string, int> cat_of;
  for (const cfg::knob& k : cfg::knobs()) {
    if (k.secret) continue;
    const bool numeric = k.type == cfg::kind::flag || k.type == cfg::kind::integer || k.type == cfg::kind::size ||
                         k.type == cfg::kind::duration;
    const int index = static_cast<int>(t.cvars.size());
    t.cvars.push_back({&k, numeric});
    const std::string cname = "nmad_" + std::string(k.scope);
    auto it = cat_of.find(cname);
    if (it == cat_of.end()) {
      it = cat_of.emplace(cname, static_cast<int>(t.cats.size())).first;
      t.cats.push_back({cname, "the NMAD_* knobs read by nmad's " + std::string(k.scope) + " part", {}, {}});
    }
    t.cats[static_cast<std::size_t>(it->second)].cvars.push_back(index);
  }
  category counters{"nmad_counters", "the engine's counters (since the library started)", {}, {}};
  for (int i = 0; i < static_cast<int>(pvars().size()); ++i) counters.pvars.push_back(i);
  t.cats.push_back(std::move(counters));
}

// MPI-3.1 14.3.3's string convention: *len 0 asks for the length (with the
// terminating null); otherwise up to *len - 1 characters and a null, and
// *len is set to what was written (null included).
void give_string(const std::string& s, char* out, int* len) {
  if (!len) return;
  if (*len == 0 || !out) {
    *len = static_cast<int>(s.size()) + 1;
    return;
  }
  const int n = std::min(*len - 1, static_cast<int>(s.size()));
  if (n > 0) std::memcpy(out, s.data(), static_cast<std::size_t>(n));
  out[std::max(n, 0)] = '\0';
  *len = n + 1;
}

bool live_cvar(const tool_state& t, MPI_T_cvar_handle h) {
  return h >= 1 && h <= static_cast<int>(t.cvar_handles.size()) && t.cvar_handles[static_cast<std::size_t>(h - 1)] >= 0;
}

std::string cvar_desc(const cfg::knob& k) { return std::string(k.what) + " (" + cfg::accepts(k) + ")"; }

// The pvar's current values (count entries, as the handle was given).
void read_pvar(const pvar& p, std::uint64_t* out, int n) {
  state& s = st();
  const bool up = s.initialized.load() && !s.finalized.load() && s.session;
  if (!p.per_peer) {
    *out = up ? p.total(s.session->stats()) : 0;
    return;
  }
  std::fill(out, out + n, 0);
  if (!up) return;
  for (const nmad::gate_stats& g : s.session->peer_stats())
    if (g.peer >= 0 && g.peer < n) out[g.peer] = p.peer(g);
}

int pvar_count(const pvar& p) { return p.per_peer ? std::max(st().world_size, 1) : 1; }

}  // namespace
}  // namespace nmad::mpi

using namespace nmad::mpi;

// Every call but init checks that MPI_T is initialised (under the lock).
#define T_ENTER(t)                          \
  tool_state& t = ts();                     \
  std::lock_guard t##_lock(t.mu);           \
  if (t.inits <= 0) return MPI_T_ERR_NOT_INITIALIZED

extern "C" {

int PMPI_T_init_thread(int required, int* provided) {
  tool_state& t = ts();
  std::lock_guard g(t.mu);
  build_tables(t);
  ++t.inits;
  if (provided)
    *provided = required < MPI_THREAD_SINGLE ? MPI_THREAD_SINGLE
                : required > MPI_THREAD_MULTIPLE ? MPI_THREAD_MULTIPLE
                                                 : required;
  return MPI_SUCCESS;
}

int PMPI_T_finalize(void) {
  T_ENTER(t);
  if (--t.inits == 0) {  // handles and sessions end with the last finalize
    t.cvar_handles.clear();
    t.sessions.clear();
    t.pvar_handles.clear();
  }
  return MPI_SUCCESS;
}

int PMPI_T_enum_get_info(MPI_T_enum, int*, char*, int*) {
  T_ENTER(t);
  return MPI_T_ERR_INVALID_HANDLE;  // no enumerations
}

int PMPI_T_enum_get_item(MPI_T_enum, int, int*, char*, int*) {
  T_ENTER(t);
  return MPI_T_ERR_INVALID_HANDLE;
}

int PMPI_T_cvar_get_num(int* num_cvar) {
  T_ENTER(t);
  if (!num_cvar) return MPI_T_ERR_INVALID;
  *num_cvar = static_cast<int>(t.cvars.size());
  return MPI_SUCCESS;
}

int PMPI_T_cvar_get_info(int cvar_index, char* name, int* name_len, int* verbosity, MPI_Datatype* datatype,
                         MPI_T_enum* enumtype, char* desc, int* desc_len, int* bind, int* scope) {
  T_ENTER(t);
  if (cvar_index < 0 || cvar_index >= static_cast<int>(t.cvars.size())) return MPI_T_ERR_INVALID_INDEX;
  const cvar& c = t.cvars[static_cast<std::size_t>(cvar_index)];
  give_string(std::string(c.k->name), name, name_len);
  if (verbosity) *verbosity = c.k->scope == "testing" ? MPI_T_VERBOSITY_MPIDEV_ALL : MPI_T_VERBOSITY_USER_BASIC;
  if (datatype) *datatype = c.numeric ? MPI_LONG_LONG : MPI_CHAR;
  if (enumtype) *enumtype = MPI_T_ENUM_NULL;
  give_string(cvar_desc(*c.k), desc, desc_len);
  if (bind) *bind = MPI_T_BIND_NO_OBJECT;
  if (scope) *scope = c.k->scope == "launcher" || c.k->scope == "tools" ? MPI_T_SCOPE_CONSTANT : MPI_T_SCOPE_READONLY;
  return MPI_SUCCESS;
}

int PMPI_T_cvar_get_index(const char* name, int* cvar_index) {
  T_ENTER(t);
  if (!name || !cvar_index) return MPI_T_ERR_INVALID;
  for (std::size_t i = 0; i < t.cvars.size(); ++i)
    if (t.cvars[i].k->name == name) {
      *cvar_index = static_cast<int>(i);
      return MPI_SUCCESS;
    }
  return MPI_T_ERR_INVALID_NAME;
}

int PMPI_T_cvar_handle_alloc(int cvar_index, void*, MPI_T_cvar_handle* handle, int* count) {
  T_ENTER(t);
  if (cvar_index < 0 || cvar_index >= static_cast<int>(t.cvars.size())) return MPI_T_ERR_INVALID_INDEX;
  if (!handle || !count) return MPI_T_ERR_INVALID;
  t.cvar_handles.push_back(cvar_index);
  *handle = static_cast<MPI_T_cvar_handle>(t.cvar_handles.size());
  *count = t.cvars[static_cast<std::size_t>(cvar_index)].numeric ? 1 : MPI_MAX_INFO_VAL;
  return MPI_SUCCESS;
}

int PMPI_T_cvar_handle_free(MPI_T_cvar_handle* handle) {
  T_ENTER(t);
  if (!handle || !live_cvar(t, *handle)) return MPI_T_ERR_INVALID_HANDLE;
  t.cvar_handles[static_cast<std::size_t>(*handle - 1)] = -1;
  *handle = MPI_T_CVAR_HANDLE_NULL;
  return MPI_SUCCESS;
}

int PMPI_T_cvar_read(MPI_T_cvar_handle handle, void* buf) {
  T_ENTER(t);
  if (!live_cvar(t, handle)) return MPI_T_ERR_INVALID_HANDLE;
  if (!buf) return MPI_T_ERR_INVALID;
  const cvar& c = t.cvars[static_cast<std::size_t>(t.cvar_handles[static_cast<std::size_t>(handle - 1)])];
  cfg::value v;
  try {
    v = cfg::read(c.k->name);
  } catch (const std::exception&) {
    return MPI_T_ERR_INVALID;  // a value the table refuses (start-up would have stopped on it)
  }
  if (c.numeric) {
    const long long n = v.automatic ? -1 : static_cast<long long>(v.number);
    std::memcpy(buf, &n, sizeof n);
  } else {
    int len = MPI_MAX_INFO_VAL;
    give_string(v.given ? v.text : v.word, static_cast<char*>(buf), &len);
  }
  return MPI_SUCCESS;
}

int PMPI_T_cvar_write(MPI_T_cvar_handle handle, const void*) {
  T_ENTER(t);
  if (!live_cvar(t, handle)) return MPI_T_ERR_INVALID_HANDLE;
  return MPI_T_ERR_CVAR_SET_NEVER;  // every knob is read at start-up
}

int PMPI_T_pvar_get_num(int* num_pvar) {
  T_ENTER(t);
  if (!num_pvar) return MPI_T_ERR_INVALID;
  *num_pvar = static_cast<int>(pvars().size());
  return MPI_SUCCESS;
}

int PMPI_T_pvar_get_info(int pvar_index, char* name, int* name_len, int* verbosity, int* var_class,
                         MPI_Datatype* datatype, MPI_T_enum* enumtype, char* desc, int* desc_len, int* bind,
                         int* readonly, int* continuous, int* atomic) {
  T_ENTER(t);
  if (pvar_index < 0 || pvar_index >= static_cast<int>(pvars().size())) return MPI_T_ERR_INVALID_INDEX;
  const pvar& p = pvars()[static_cast<std::size_t>(pvar_index)];
  give_string(p.name, name, name_len);
  if (verbosity) *verbosity = p.per_peer ? MPI_T_VERBOSITY_TUNER_DETAIL : MPI_T_VERBOSITY_USER_BASIC;
  if (var_class) *var_class = MPI_T_PVAR_CLASS_COUNTER;
  if (datatype) *datatype = MPI_UNSIGNED_LONG_LONG;
  if (enumtype) *enumtype = MPI_T_ENUM_NULL;
  give_string(p.desc, desc, desc_len);
  if (bind) *bind = MPI_T_BIND_NO_OBJECT;
  if (readonly) *readonly = 1;
  if (continuous) *continuous = 1;
  if (atomic) *atomic = 0;
  return MPI_SUCCESS;
}

int PMPI_T_pvar_get_index(const char* name, int var_class, int* pvar_index) {
  T_ENTER(t);
  if (!name || !pvar_index) return MPI_T_ERR_INVALID;
  if (var_class == MPI_T_PVAR_CLASS_COUNTER)
    for (std::size_t i = 0; i < pvars().size(); ++i)
      if (!std::strcmp(pvars()[i].name, name)) {
        *pvar_index = static_cast<int>(i);
        return MPI_SUCCESS;
      }
  return MPI_T_ERR_INVALID_NAME;
}

int PMPI_T_pvar_session_create(MPI_T_pvar_session* session) {
  T_ENTER(t);
  if (!session) return MPI_T_ERR_INVALID;
  t.sessions.push_back(1);
  *session = static_cast<MPI_T_pvar_session>(t.sessions.size());
  return MPI_SUCCESS;
}

namespace {
bool live_session(tool_state& t, MPI_T_pvar_session s) {
  return s >= 1 && s <= static_cast<int>(t.sessions.size()) && t.sessions[static_cast<std::size_t>(s - 1)] == 1;
}
bool live_handle(tool_state& t, MPI_T_pvar_session s, MPI_T_pvar_handle h) {
  return h >= 1 && h <= static_cast<int>(t.pvar_handles.size()) &&
         t.pvar_handles[static_cast<std::size_t>(h - 1)].session == s;
}
}  // namespace

int PMPI_T_pvar_session_free(MPI_T_pvar_session* session) {
  T_ENTER(t);
  if (!session || !live_session(t, *session)) return MPI_T_ERR_INVALID_SESSION;
  for (auto& h : t.pvar_handles)
    if (h.session == *session) h.session = 0;  // its handles go with it
  t.sessions[static_cast<std::size_t>(*session - 1)] = 0;
  *session = MPI_T_PVAR_SESSION_NULL;
  return MPI_SUCCESS;
}

int PMPI_T_pvar_handle_alloc(MPI_T_pvar_session session, int pvar_index, void*, MPI_T_pvar_handle* handle,
                             int* count) {
  T_ENTER(t);
  if (!live_session(t, session)) return MPI_T_ERR_INVALID_SESSION;
  if (pvar_index < 0 || pvar_index >= static_cast<int>(pvars().size())) return MPI_T_ERR_INVALID_INDEX;
  if (!handle || !count) return MPI_T_ERR_INVALID;
  *count = pvar_count(pvars()[static_cast<std::size_t>(pvar_index)]);
  t.pvar_handles.push_back({session, pvar_index, *count});
  *handle = static_cast<MPI_T_pvar_handle>(t.pvar_handles.size());
  return MPI_SUCCESS;
}

int PMPI_T_pvar_handle_free(MPI_T_pvar_session session, MPI_T_pvar_handle* handle) {
  T_ENTER(t);
  if (!live_session(t, session)) return MPI_T_ERR_INVALID_SESSION;
  if (!handle || !live_handle(t, session, *handle)) return MPI_T_ERR_INVALID_HANDLE;
  t.pvar_handles[static_cast<std::size_t>(*handle - 1)].session = 0;
  *handle = MPI_T_PVAR_HANDLE_NULL;
  return MPI_SUCCESS;
}

namespace {
int startstop(MPI_T_pvar_session session, MPI_T_pvar_handle handle) {
  T_ENTER(t);
  if (!live_session(t, session)) return MPI_T_ERR_INVALID_SESSION;
  // Every variable is continuous: MPI_T_PVAR_ALL_HANDLES has nothing to do.
  if (handle == MPI_T_PVAR_ALL_HANDLES) return MPI_SUCCESS;
  if (!live_handle(t, session, handle)) return MPI_T_ERR_INVALID_HANDLE;
  return MPI_T_ERR_PVAR_NO_STARTSTOP;
}
int nowrite(MPI_T_pvar_session session, MPI_T_pvar_handle handle) {
  T_ENTER(t);
  if (!live_session(t, session)) return MPI_T_ERR_INVALID_SESSION;
  if (handle == MPI_T_PVAR_ALL_HANDLES) return MPI_SUCCESS;  // no writable variable among them
  if (!live_handle(t, session, handle)) return MPI_T_ERR_INVALID_HANDLE;
  return MPI_T_ERR_PVAR_NO_WRITE;
}
}  // namespace

int PMPI_T_pvar_start(MPI_T_pvar_session session, MPI_T_pvar_handle handle) { return startstop(session, handle); }
int PMPI_T_pvar_stop(MPI_T_pvar_session session, MPI_T_pvar_handle handle) { return startstop(session, handle); }

int PMPI_T_pvar_read(MPI_T_pvar_session session, MPI_T_pvar_handle handle, void* buf) {
  int index, count;
  {
    T_ENTER(t);
    if (!live_session(t, session)) return MPI_T_ERR_INVALID_SESSION;
    if (!live_handle(t, session, handle)) return MPI_T_ERR_INVALID_HANDLE;
    if (!buf) return MPI_T_ERR_INVALID;
    index = t.pvar_handles[static_cast<std::size_t>(handle - 1)].index;
    count = t.pvar_handles[static_cast<std::size_t>(handle - 1)].count;
  }
  // (Outside the tool lock: the engine's counters take the engine's locks.)
  read_pvar(pvars()[static_cast<std::size_t>(index)], static_cast<std::uint64_t*>(buf), count);
  return MPI_SUCCESS;
}

int PMPI_T_pvar_write(MPI_T_pvar_session session, MPI_T_pvar_handle handle, const void*) {
  return nowrite(session, handle);
}
int PMPI_T_pvar_reset(MPI_T_pvar_session session, MPI_T_pvar_handle handle) { return nowrite(session, handle); }
int PMPI_T_pvar_readreset(MPI_T_pvar_session session, MPI_T_pvar_handle handle, void*) {
  return nowrite(session, handle);
}

int PMPI_T_category_get_num(int* num_cat) {
  T_ENTER(t);
  if (!num_cat) return MPI_T_ERR_INVALID;
  *num_cat = static_cast<int>(t.cats.size());
  return MPI_SUCCESS;
}

int PMPI_T_category_get_info(int cat_index, char* name, int* name_len, char* desc, int* desc_len, int* num_cvars,
                             int* num_pvars, int* num_categories) {
  T_ENTER(t);
  if (cat_index < 0 || cat_index >= static_cast<int>(t.cats.size())) return MPI_T_ERR_INVALID_INDEX;
  const category& c = t.cats[static_cast<std::size_t>(cat_index)];
  give_string(c.name, name, name_len);
  give_string(c.desc, desc, desc_len);
  if (num_cvars) *num_cvars = static_cast<int>(c.cvars.size());
  if (num_pvars) *num_pvars = static_cast<int>(c.pvars.size());
  if (num_categories) *num_categories = 0;
  return MPI_SUCCESS;
}

int PMPI_T_category_get_index(const char* name, int* cat_index) {
  T_ENTER(t);
  if (!name || !cat_index) return MPI_T_ERR_INVALID;
  for (std::size_t i = 0; i < t.cats.size(); ++i)
    if (t.cats[i].name == name) {
      *cat_index = static_cast<int>(i);
      return MPI_SUCCESS;
    }
  return MPI_T_ERR_INVALID_NAME;
}

namespace {
int give_indices(const std::vector<int>& from, int len, int indices[]) {
  if (len < 0 || (len > 0 && !indices)) return MPI_T_ERR_INVALID;
  for (int i = 0; i < len && i < static_cast<int>(from.size()); ++i) indices[i] = from[static_cast<std::size_t>(i)];
  return MPI_SUCCESS;
}
}  // namespace

int PMPI_T_category_get_cvars(int cat_index, int len, int indices[]) {
  T_ENTER(t);
  if (cat_index < 0 || cat_index >= static_cast<int>(t.cats.size())) return MPI_T_ERR_INVALID_INDEX;
  return give_indices(t.cats[static_cast<std::size_t>(cat_index)].cvars, len, indices);
}

int PMPI_T_category_get_pvars(int cat_index, int len, int indices[]) {
  T_ENTER(t);
  if (cat_index < 0 || cat_index >= static_cast<int>(t.cats.size())) return MPI_T_ERR_INVALID_INDEX;
  return give_indices(t.cats[static_cast<std::size_t>(cat_index)].pvars, len, indices);
}

int PMPI_T_category_get_categories(int cat_index, int len, int indices[]) {
  T_ENTER(t);
  if (cat_index < 0 || cat_index >= static_cast<int>(t.cats.size())) return MPI_T_ERR_INVALID_INDEX;
  return give_indices({}, len, indices);
}

int PMPI_T_category_changed(int* stamp) {
  T_ENTER(t);
  if (!stamp) return MPI_T_ERR_INVALID;
  *stamp = 0;  // the tables never change while the process runs
  return MPI_SUCCESS;
}

int PMPI_T_category_get_num_events(int cat_index, int* num_events) {
  T_ENTER(t);
  if (cat_index < 0 || cat_index >= static_cast<int>(t.cats.size())) return MPI_T_ERR_INVALID_INDEX;
  if (!num_events) return MPI_T_ERR_INVALID;
  *num_events = 0;
  return MPI_SUCCESS;
}

int PMPI_T_category_get_events(int cat_index, int len, int indices[]) {
  T_ENTER(t);
  if (cat_index < 0 || cat_index >= static_cast<int>(t.cats.size())) return MPI_T_ERR_INVALID_INDEX;
  return give_indices({}, len, indices);
}

int PMPI_T_source_get_num(int* num_sources) {
  T_ENTER(t);
  if (!num_sources) return MPI_T_ERR_INVALID;
  *num_sources = 0;
  return MPI_SUCCESS;
}

int PMPI_T_event_get_num(int* num_events) {
  T_ENTER(t);
  if (!num_events) return MPI_T_ERR_INVALID;
  *num_events = 0;
  return MPI_SUCCESS;
}

}  // extern "C"

#pragma weak MPI_T_init_thread = PMPI_T_init_thread
#pragma weak MPI_T_finalize = PMPI_T_finalize
#pragma weak MPI_T_enum_get_info = PMPI_T_enum_get_info
#pragma weak MPI_T_enum_get_item = PMPI_T_enum_get_item
#pragma weak MPI_T_cvar_get_num = PMPI_T_cvar_get_num
#pragma weak MPI_T_cvar_get_info = PMPI_T_cvar_get_info
#pragma weak MPI_T_cvar_get_index = PMPI_T_cvar_get_index
#pragma weak MPI_T_cvar_handle_alloc = PMPI_T_cvar_handle_alloc
#pragma weak MPI_T_cvar_handle_free = PMPI_T_cvar_handle_free
#pragma weak MPI_T_cvar_read = PMPI_T_cvar_read
#pragma weak MPI_T_cvar_write = PMPI_T_cvar_write
#pragma weak MPI_T_pvar_get_num = PMPI_T_pvar_get_num
#pragma weak MPI_T_pvar_get_info = PMPI_T_pvar_get_info
#pragma weak MPI_T_pvar_get_index = PMPI_T_pvar_get_index
#pragma weak MPI_T_pvar_session_create = PMPI_T_pvar_session_create
#pragma weak MPI_T_pvar_session_free = PMPI_T_pvar_session_free
#pragma weak MPI_T_pvar_handle_alloc = PMPI_T_pvar_handle_alloc
#pragma weak MPI_T_pvar_handle_free = PMPI_T_pvar_handle_free
#pragma weak MPI_T_pvar_start = PMPI_T_pvar_start
#pragma weak MPI_T_pvar_stop = PMPI_T_pvar_stop
#pragma weak MPI_T_pvar_read = PMPI_T_pvar_read
#pragma weak MPI_T_pvar_write = PMPI_T_pvar_write
#pragma weak MPI_T_pvar_reset = PMPI_T_pvar_reset
#pragma weak MPI_T_pvar_readreset = PMPI_T_pvar_readreset
#pragma weak MPI_T_category_get_num = PMPI_T_category_get_num
#pragma weak MPI_T_category_get_info = PMPI_T_category_get_info
#pragma weak MPI_T_category_get_index = PMPI_T_category_get_index
#pragma weak MPI_T_category_get_cvars = PMPI_T_category_get_cvars
#pragma weak MPI_T_category_get_pvars = PMPI_T_category_get_pvars
#pragma weak MPI_T_category_get_categories = PMPI_T_category_get_categories
#pragma weak MPI_T_category_changed = PMPI_T_category_changed
#pragma weak MPI_T_category_get_num_events = PMPI_T_category_get_num_events
#pragma weak MPI_T_category_get_events = PMPI_T_category_get_events
#pragma weak MPI_T_source_get_num = PMPI_T_source_get_num
#pragma weak MPI_T_event_get_num = PMPI_T_event_get_num
