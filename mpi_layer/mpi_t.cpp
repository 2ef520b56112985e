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
// read from the environment as the engine reads them, at any time. Those
// read on every use can be written while the library runs (see
// "writable control variables" below: NMAD_RDV_THRESHOLD, NMAD_WAIT,
// NMAD_WAIT_SPIN_US with scope MPI_T_SCOPE_LOCAL, the NMAD_COLL_* algorithm
// thresholds with MPI_T_SCOPE_ALL_EQ) and then read back as they are now;
// the others are read once, at start-up (scope MPI_T_SCOPE_CONSTANT when
// it only matters before MPI_Init, READONLY otherwise) and
// MPI_T_cvar_write answers MPI_T_ERR_CVAR_SET_NEVER.
// Categories: one per part of nmad reading the knobs ("nmad_engine",
// "nmad_shm", ...).
//
// Performance variables: the engine's counters (session::stats, and per
// peer session::peer_stats: arrays with one entry per rank of
// MPI_COMM_WORLD; per rail: 4 entries), MPI_UNSIGNED_LONG_LONG, bound to
// no object, in category "nmad_counters": counters, a level and a
// high-water mark (the unexpected queue) continuous and read-only (no
// start/stop: MPI_T_ERR_PVAR_NO_STARTSTOP, no write/reset:
// MPI_T_ERR_PVAR_NO_WRITE); the counters and the timer marked so count
// per handle between MPI_T_pvar_start and stop, and reset or write set
// what the handle reads. They read 0 while the library is not running.
//
// Events (MPI 4.0): mpi_layer/mpi_t_events.cpp, in category "nmad_events".
// No enumerations: their count is 0.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "api/nmad/services/config.hpp"
#include "mpi_layer/coll/algorithms.hpp"
#include "mpi_layer/mpi_impl.hpp"

namespace nmad::mpi {
namespace {

namespace cfg = nmad::config;

struct cvar {
  const cfg::knob* k;
  bool numeric;
};

// How many entries a variable has: one, one per rank of MPI_COMM_WORLD,
// one per rail (track index of the gates; rails 3 and up in the last).
enum class shape { one, per_peer, per_rail };
constexpr int kRails = 4;

struct pvar {
  const char* name;
  const char* desc;
  int cls;          // MPI_T_PVAR_CLASS_*
  shape entries;
  // Continuous: always counting, read-only. Otherwise the handle starts
  // stopped and counts only between MPI_T_pvar_start and stop; reset and
  // write set what the handle reads (handle-local: the engine's counter
  // is not touched).
  bool continuous;
  // one: the value from the session's totals; per_peer: of one gate;
  // per_rail: entry i of the totals.
  std::uint64_t (*total)(const nmad::session_stats&, int i);
  std::uint64_t (*peer)(const nmad::gate_stats&);
};

std::uint64_t sum_tracks(const nmad::gate_stats& g, std::uint64_t nmad::track_stats::*f) {
  std::uint64_t n = 0;
  for (const auto& t : g.tracks) n += t.*f;
  return n;
}

using ss = nmad::session_stats;
using gs = nmad::gate_stats;

const std::vector<pvar>& pvars() {
  constexpr int C = MPI_T_PVAR_CLASS_COUNTER;
  static const std::vector<pvar> v = {
      {"nmad_packets_sent", "packets this process sent (all peers)", C, shape::one, true,
       [](const ss& s, int) { return s.packets_sent; }, nullptr},
      {"nmad_chunks_sent", "chunks (message pieces and control items) those packets carried", C, shape::one, true,
       [](const ss& s, int) { return s.chunks_sent; }, nullptr},
      {"nmad_bytes_sent", "packet bytes sent, headers included", C, shape::one, true,
       [](const ss& s, int) { return s.bytes_sent; }, nullptr},
      {"nmad_rdv_transfers", "bulk rendezvous transfers sent", C, shape::one, true,
       [](const ss& s, int) { return s.rdv_data_sent; }, nullptr},
      {"nmad_packets_received", "packets this process received", C, shape::one, true,
       [](const ss& s, int) { return s.packets_received; }, nullptr},
      {"nmad_unexpected_messages", "messages that arrived before their receive was posted", C, shape::one, true,
       [](const ss& s, int) { return s.unexpected_messages; }, nullptr},
      {"nmad_protocol_errors", "malformed or foreign packets refused", C, shape::one, true,
       [](const ss& s, int) { return s.protocol_errors; }, nullptr},
      {"nmad_offloaded_sends", "eager sends whose copy went to the progress thread", C, shape::one, true,
       [](const ss& s, int) { return s.offloaded_sends; }, nullptr},
      {"nmad_peer_packets", "packets sent to each rank of MPI_COMM_WORLD (one entry per rank)", C, shape::per_peer,
       true, nullptr, [](const gs& g) { return sum_tracks(g, &nmad::track_stats::packets); }},
      {"nmad_peer_bytes",
       "bytes sent to each rank of MPI_COMM_WORLD: packets (headers included) and pushed rendezvous data "
       "(data the receiver pulled from this process's memory is not counted)",
       C, shape::per_peer, true, nullptr,
       [](const gs& g) {
         return sum_tracks(g, &nmad::track_stats::bytes) + sum_tracks(g, &nmad::track_stats::rdv_bytes);
       }},
      {"nmad_peer_chunks", "chunks sent to each rank of MPI_COMM_WORLD (aggregation: chunks per packet)", C,
       shape::per_peer, true, nullptr, [](const gs& g) { return sum_tracks(g, &nmad::track_stats::chunks); }},
      {"nmad_peer_rdv_requests", "messages sent to each rank of MPI_COMM_WORLD by rendezvous", C, shape::per_peer,
       true, nullptr, [](const gs& g) { return g.rdv_requests; }},
      {"nmad_peer_idle_ns", "time each rank's tracks had work queued but nothing posted (ns)", C, shape::per_peer,
       true, nullptr, [](const gs& g) { return sum_tracks(g, &nmad::track_stats::idle_ns); }},
      // MPI 4.1's list: per track, aggregation, the unexpected queue,
      // progress-thread wake-ups, time waiting.
      {"nmad_rail_sends",
       "sends (packets and bulk rendezvous transfers) posted on each rail: entry i for track i of the gates, "
       "rails 3 and up in entry 3",
       C, shape::per_rail, true, [](const ss& s, int i) { return s.rail_sends[i]; }, nullptr},
      {"nmad_peer_aggregated_packets",
       "packets sent to each rank of MPI_COMM_WORLD that carried more than one chunk (aggregated)", C,
       shape::per_peer, true, nullptr,
       [](const gs& g) {
         std::uint64_t n = 0;
         for (const auto& t : g.tracks) n += t.packets > t.chunks_histogram[0] ? t.packets - t.chunks_histogram[0] : 0;
         return n;
       }},
      {"nmad_aggregated_packets",
       "packets sent that carried more than one chunk (aggregated); counts between start and stop", C, shape::one,
       false, [](const ss& s, int) { return s.aggregated_packets; }, nullptr},
      {"nmad_unexpected_queued", "unexpected messages queued now (arrived, no receive posted yet)",
       MPI_T_PVAR_CLASS_LEVEL, shape::one, true, [](const ss& s, int) { return s.unexpected_queued; }, nullptr},
      {"nmad_unexpected_queued_max", "the most unexpected messages ever queued at once",
       MPI_T_PVAR_CLASS_HIGHWATERMARK, shape::one, true,
       [](const ss& s, int) { return s.unexpected_queued_max; }, nullptr},
      {"nmad_progress_wakeups",
       "times the progress thread woke up from a sleep (0 without one); counts between start and stop", C,
       shape::one, false, [](const ss& s, int) { return s.progress_wakeups; }, nullptr},
      {"nmad_waits", "blocking calls that had to wait (not done at once); counts between start and stop", C,
       shape::one, false, [](const ss& s, int) { return s.waits; }, nullptr},
      {"nmad_wait_time", "time spent waiting in blocking calls (ns); counts between start and stop",
       MPI_T_PVAR_CLASS_TIMER, shape::one, false, [](const ss& s, int) { return s.wait_ns; }, nullptr},
  };
  return v;
}

struct category {
  std::string name, desc;
  std::vector<int> cvars, pvars, events;
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
    // Not continuous: started or not, what was counted while started
    // before the last start (or written), the counter at that start.
    bool started = false;
    std::vector<std::uint64_t> accum, base;
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
      t.cats.push_back({cname, "the NMAD_* knobs read by nmad's " + std::string(k.scope) + " part", {}, {}, {}});
    }
    t.cats[static_cast<std::size_t>(it->second)].cvars.push_back(index);
  }
  category counters{"nmad_counters", "the engine's counters (since the library started)", {}, {}, {}};
  for (int i = 0; i < static_cast<int>(pvars().size()); ++i) counters.pvars.push_back(i);
  t.cats.push_back(std::move(counters));
  category events{"nmad_events", "the engine's events (mpi_layer/mpi_t_events.cpp)", {}, {}, {}};
  for (int i = 0; i < tool_event_count(); ++i) events.events.push_back(i);
  t.cats.push_back(std::move(events));
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

// ---- writable control variables ----
// What the engine and the MPI layer read on every use (through atomics)
// can change while the library runs; the rest is read once, at start-up
// (changing it would need the drivers, the gates or the progress thread
// made again), and stays read-only.
enum class writable {
  no,
  rdv_threshold,  // session::set_rdv_threshold: the sender alone decides (LOCAL)
  wait,           // session::set_wait_policy (LOCAL)
  wait_spin,      // the same, its spin (LOCAL)
  coll,           // coll::set_tunable: every process must agree (ALL_EQ)
};

writable writable_kind(const cfg::knob& k) {
  if (k.name == "NMAD_RDV_THRESHOLD") return writable::rdv_threshold;
  if (k.name == "NMAD_WAIT") return writable::wait;
  if (k.name == "NMAD_WAIT_SPIN_US") return writable::wait_spin;
  if (nmad::coll::is_tunable(k.name)) return writable::coll;
  return writable::no;
}

int cvar_scope(const cfg::knob& k) {
  switch (writable_kind(k)) {
    case writable::coll: return MPI_T_SCOPE_ALL_EQ;
    case writable::no: return k.scope == "launcher" || k.scope == "tools" ? MPI_T_SCOPE_CONSTANT : MPI_T_SCOPE_READONLY;
    default: return MPI_T_SCOPE_LOCAL;
  }
}

std::string cvar_desc(const cfg::knob& k) {
  std::string d = std::string(k.what) + " (" + cfg::accepts(k) + ")";
  switch (writable_kind(k)) {
    case writable::no:
      return d + "; read-only: " +
             (k.scope == "launcher" || k.scope == "tools" ? "read by nmad-run and the tools, not by the library"
                                                          : "read once, at start-up");
    case writable::coll:
      return d + "; writable while running (MPI_T_SCOPE_ALL_EQ: every process must write the same value before "
                 "its next collective)";
    default: return d + "; writable while the library runs (this process only)";
  }
}

nmad::session* running_session() {
  state& s = st();
  return s.initialized.load() && !s.finalized.load() && s.session ? s.session.get() : nullptr;
}

const char* policy_name(nmad::wait_policy p) {
  return p == nmad::wait_policy::busy ? "busy" : p == nmad::wait_policy::block ? "block" : "fixed-spin";
}

// The live value of a writable knob; false to read it from the environment.
bool read_live(const cvar& c, void* buf) {
  const writable w = writable_kind(*c.k);
  nmad::session* ses = running_session();
  long long n = 0;
  switch (w) {
    case writable::no: return false;
    case writable::coll: n = static_cast<long long>(*nmad::coll::get_tunable(c.k->name)); break;
    case writable::rdv_threshold:
      if (!ses) return false;
      // Another rank's gate (they all have the same once it was written).
      n = static_cast<long long>(ses->rdv_threshold(ses->size() > 1 ? (ses->rank() + 1) % ses->size() : 0));
      break;
    case writable::wait_spin:
      if (!ses) return false;
      n = static_cast<long long>(ses->get_wait_spin().count() / 1000);
      break;
    case writable::wait: {
      if (!ses) return false;
      int len = MPI_MAX_INFO_VAL;
      give_string(policy_name(ses->get_wait_policy()), static_cast<char*>(buf), &len);
      return true;
    }
  }
  std::memcpy(buf, &n, sizeof n);
  return true;
}

int write_live(const cvar& c, const void* buf) {
  const writable w = writable_kind(*c.k);
  if (w == writable::no) return MPI_T_ERR_CVAR_SET_NEVER;
  long long n = 0;
  if (c.numeric) {
    std::memcpy(&n, buf, sizeof n);
    if (n < 0) return MPI_T_ERR_INVALID;
  }
  if (w == writable::coll) return nmad::coll::set_tunable(c.k->name, static_cast<std::size_t>(n)) ? MPI_SUCCESS
                                                                                                    : MPI_T_ERR_INVALID;
  nmad::session* ses = running_session();
  if (!ses) return MPI_T_ERR_CVAR_SET_NOT_NOW;  // the engine takes it from the environment when it starts
  switch (w) {
    case writable::rdv_threshold:
      if (n == 0) return MPI_T_ERR_INVALID;
      ses->set_rdv_threshold(static_cast<std::size_t>(n));
      break;
    case writable::wait_spin:
      if (n > 10'000'000) return MPI_T_ERR_INVALID;  // the knob's range
      ses->set_wait_policy(ses->get_wait_policy(), std::chrono::microseconds(n));
      break;
    case writable::wait: {
      const char* text = static_cast<const char*>(buf);
      nmad::wait_policy p;
      if (!std::strcmp(text, "busy")) p = nmad::wait_policy::busy;
      else if (!std::strcmp(text, "block")) p = nmad::wait_policy::block;
      else if (!std::strcmp(text, "fixed-spin")) p = nmad::wait_policy::fixed_spin;
      else return MPI_T_ERR_INVALID;
      ses->set_wait_policy(p, ses->get_wait_spin());
      break;
    }
    default: break;
  }
  return MPI_SUCCESS;
}

// The pvar's current values in the engine (count entries, as the handle
// was given).
void read_pvar(const pvar& p, std::uint64_t* out, int n) {
  state& s = st();
  const bool up = s.initialized.load() && !s.finalized.load() && s.session;
  std::fill(out, out + n, 0);
  if (!up) return;
  switch (p.entries) {
    case shape::one: *out = p.total(s.session->stats(), 0); break;
    case shape::per_rail: {
      const nmad::session_stats st = s.session->stats();
      for (int i = 0; i < n; ++i) out[i] = p.total(st, i);
      break;
    }
    case shape::per_peer:
      for (const nmad::gate_stats& g : s.session->peer_stats())
        if (g.peer >= 0 && g.peer < n) out[g.peer] = p.peer(g);
      break;
  }
}

std::vector<std::uint64_t> current(const pvar& p, int n) {
  std::vector<std::uint64_t> v(static_cast<std::size_t>(n));
  read_pvar(p, v.data(), n);
  return v;
}

int pvar_count(const pvar& p) {
  switch (p.entries) {
    case shape::per_peer: return std::max(st().world_size, 1);
    case shape::per_rail: return kRails;
    default: return 1;
  }
}

}  // namespace

bool tool_initialized() {
  tool_state& t = ts();
  std::lock_guard g(t.mu);
  return t.inits > 0;
}

void tool_give_string(const std::string& s, char* out, int* len) { give_string(s, out, len); }

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
    tool_events_end();
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
  if (scope) *scope = cvar_scope(*c.k);
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
  if (read_live(c, buf)) return MPI_SUCCESS;
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

int PMPI_T_cvar_write(MPI_T_cvar_handle handle, const void* buf) {
  T_ENTER(t);
  if (!live_cvar(t, handle)) return MPI_T_ERR_INVALID_HANDLE;
  const cvar& c = t.cvars[static_cast<std::size_t>(t.cvar_handles[static_cast<std::size_t>(handle - 1)])];
  if (writable_kind(*c.k) == writable::no) return MPI_T_ERR_CVAR_SET_NEVER;
  if (!buf) return MPI_T_ERR_INVALID;
  return write_live(c, buf);
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
  if (verbosity) *verbosity = p.entries != shape::one ? MPI_T_VERBOSITY_TUNER_DETAIL : MPI_T_VERBOSITY_USER_BASIC;
  if (var_class) *var_class = p.cls;
  if (datatype) *datatype = MPI_UNSIGNED_LONG_LONG;
  if (enumtype) *enumtype = MPI_T_ENUM_NULL;
  give_string(p.desc, desc, desc_len);
  if (bind) *bind = MPI_T_BIND_NO_OBJECT;
  if (readonly) *readonly = p.continuous;
  if (continuous) *continuous = p.continuous;
  if (atomic) *atomic = 0;
  return MPI_SUCCESS;
}

int PMPI_T_pvar_get_index(const char* name, int var_class, int* pvar_index) {
  T_ENTER(t);
  if (!name || !pvar_index) return MPI_T_ERR_INVALID;
  for (std::size_t i = 0; i < pvars().size(); ++i)
    if (pvars()[i].cls == var_class && !std::strcmp(pvars()[i].name, name)) {
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
  tool_state::pvar_handle h{session, pvar_index, *count, false, {}, {}};
  h.accum.assign(static_cast<std::size_t>(*count), 0);
  h.base.assign(static_cast<std::size_t>(*count), 0);
  t.pvar_handles.push_back(std::move(h));
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
enum class op { start, stop, reset, write };

// Applies op to one handle (h) or to every handle of the session that
// allows it (MPI_T_PVAR_ALL_HANDLES). The engine is read outside the tool
// lock (its counters take the engine's locks), then the handles are
// updated under it.
int apply(MPI_T_pvar_session session, MPI_T_pvar_handle handle, op o, const void* value = nullptr) {
  std::vector<std::pair<int, int>> targets;  // (handle, pvar index)
  {
    T_ENTER(t);
    if (!live_session(t, session)) return MPI_T_ERR_INVALID_SESSION;
    if (handle == MPI_T_PVAR_ALL_HANDLES) {
      if (o == op::write) return MPI_T_ERR_INVALID_HANDLE;  // write names one handle
      for (std::size_t i = 0; i < t.pvar_handles.size(); ++i)
        if (t.pvar_handles[i].session == session &&
            !pvars()[static_cast<std::size_t>(t.pvar_handles[i].index)].continuous)
          targets.emplace_back(static_cast<int>(i + 1), t.pvar_handles[i].index);
    } else {
      if (!live_handle(t, session, handle)) return MPI_T_ERR_INVALID_HANDLE;
      const int index = t.pvar_handles[static_cast<std::size_t>(handle - 1)].index;
      if (pvars()[static_cast<std::size_t>(index)].continuous)
        return o == op::start || o == op::stop ? MPI_T_ERR_PVAR_NO_STARTSTOP : MPI_T_ERR_PVAR_NO_WRITE;
      if (o == op::write && !value) return MPI_T_ERR_INVALID;
      targets.emplace_back(handle, index);
    }
  }
  std::vector<std::vector<std::uint64_t>> now;
  for (const auto& [h, index] : targets) {
    const pvar& p = pvars()[static_cast<std::size_t>(index)];
    now.push_back(current(p, pvar_count(p)));
  }
  T_ENTER(t);
  for (std::size_t k = 0; k < targets.size(); ++k) {
    if (!live_handle(t, session, targets[k].first)) continue;  // freed meanwhile
    auto& h = t.pvar_handles[static_cast<std::size_t>(targets[k].first - 1)];
    const auto& cur = now[k];
    for (std::size_t i = 0; i < h.accum.size() && i < cur.size(); ++i) {
      switch (o) {
        case op::start:
          if (!h.started) h.base[i] = cur[i];
          break;
        case op::stop:
          if (h.started) h.accum[i] += cur[i] - h.base[i];
          break;
        case op::reset:
          h.accum[i] = 0;
          h.base[i] = cur[i];
          break;
        case op::write:
          std::memcpy(&h.accum[i], static_cast<const std::uint64_t*>(value) + i, sizeof(std::uint64_t));
          h.base[i] = cur[i];
          break;
      }
    }
    if (o == op::start) h.started = true;
    if (o == op::stop) h.started = false;
  }
  return MPI_SUCCESS;
}
}  // namespace

int PMPI_T_pvar_start(MPI_T_pvar_session session, MPI_T_pvar_handle handle) { return apply(session, handle, op::start); }
int PMPI_T_pvar_stop(MPI_T_pvar_session session, MPI_T_pvar_handle handle) { return apply(session, handle, op::stop); }

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
  const pvar& p = pvars()[static_cast<std::size_t>(index)];
  auto* out = static_cast<std::uint64_t*>(buf);
  read_pvar(p, out, count);
  if (p.continuous) return MPI_SUCCESS;
  // Handle-local: what it counted while started.
  T_ENTER(t);
  if (!live_handle(t, session, handle)) return MPI_T_ERR_INVALID_HANDLE;
  const auto& h = t.pvar_handles[static_cast<std::size_t>(handle - 1)];
  for (int i = 0; i < count; ++i)
    out[i] = h.accum[static_cast<std::size_t>(i)] + (h.started ? out[i] - h.base[static_cast<std::size_t>(i)] : 0);
  return MPI_SUCCESS;
}

int PMPI_T_pvar_write(MPI_T_pvar_session session, MPI_T_pvar_handle handle, const void* buf) {
  return apply(session, handle, op::write, buf);
}
int PMPI_T_pvar_reset(MPI_T_pvar_session session, MPI_T_pvar_handle handle) { return apply(session, handle, op::reset); }
int PMPI_T_pvar_readreset(MPI_T_pvar_session session, MPI_T_pvar_handle handle, void* buf) {
  if (handle == MPI_T_PVAR_ALL_HANDLES) return MPI_T_ERR_INVALID_HANDLE;
  // Read then reset (not atomic: MPI_T_pvar_get_info says atomic = 0).
  if (int e = PMPI_T_pvar_read(session, handle, buf)) return e;
  return apply(session, handle, op::reset);
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
  *num_events = static_cast<int>(t.cats[static_cast<std::size_t>(cat_index)].events.size());
  return MPI_SUCCESS;
}

int PMPI_T_category_get_events(int cat_index, int len, int indices[]) {
  T_ENTER(t);
  if (cat_index < 0 || cat_index >= static_cast<int>(t.cats.size())) return MPI_T_ERR_INVALID_INDEX;
  return give_indices(t.cats[static_cast<std::size_t>(cat_index)].events, len, indices);
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

