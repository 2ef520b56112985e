// MPI_T events (MPI 4.0 15.3.8) over the engine's events (the sink of
// api/nmad/layer.hpp).
//
// Event types, in index order: nmad_rdv_started (a message to a peer goes
// by rendezvous), nmad_rail_failed (a driver connection to a peer failed),
// nmad_unexpected_queued (a message arrived before its receive),
// nmad_progress_woken (the progress thread woke up). A message event's data
// is {int peer (rank in MPI_COMM_WORLD), int tag (the MPI tag), unsigned
// context (the communicator's engine context), unsigned long long size};
// a rail failure's {int peer, 96 chars: "driver: reason", null-terminated};
// a wake-up has none. One source, "nmad_monotonic": CLOCK_MONOTONIC in
// nanoseconds; unordered (events of different threads are queued as they
// come, stamped just before).
//
// The engine asks for an event type only while some registration of that
// type has a callback (one relaxed load on its path otherwise). Its sink
// runs under engine locks: it only copies the record into each interested
// registration's queue (at most 4096, or the info key "nmad_queue_max" of
// the registration; beyond, the event is counted as dropped). Queued events are delivered at safe points: the end of the
// blocking and polling MPI calls (Send, Recv, Sendrecv, Wait*, Test*,
// Probe, Iprobe, Barrier), MPI_Finalize, and MPI_T_event_handle_free, on
// the calling thread with no lock held, one thread at a time. Any MPI call
// is allowed there, so the context is MPI_T_CB_REQUIRE_NONE: the callback
// registered for that level is used, else the one of the nearest stronger
// level. Drops are reported (to the dropped handler, if set) before the
// registration's next event.
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "api/nmad/layer.hpp"
#include "mpi_layer/mpi_impl.hpp"

struct nmad_t_event_registration {
  int event = 0;  // index
  nmad::mpi::info_entries hints;
  struct callback {
    MPI_T_event_cb_function* fn = nullptr;
    void* user = nullptr;
    nmad::mpi::info_entries hints;
  } cbs[4];
  MPI_T_event_dropped_cb_function* dropped = nullptr;
  std::deque<nmad::layer::event> queue;
  std::size_t queue_max = 4096;  // info key "nmad_queue_max"
  std::uint64_t drops = 0;
  bool freed = false;
  int delivering = 0;  // callbacks of it running now
  MPI_T_event_free_cb_function* free_cb = nullptr;
  void* free_user = nullptr;
};

// What a callback's event_instance points to: the event and its data.
struct nmad_t_event_instance {
  int event = 0;
  std::uint64_t time_ns = 0;
  alignas(8) unsigned char data[128] = {};
};

namespace nmad::mpi {

std::atomic<bool> g_tool_events_pending{false};

namespace {

// The one hint understood: "nmad_queue_max", how many events a
// registration keeps awaiting delivery (default 4096, at least 1).
void apply_hints(nmad_t_event_registration& r) {
  for (const auto& [k, v] : r.hints)
    if (k == "nmad_queue_max") {
      char* end = nullptr;
      const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
      if (end != v.c_str() && n > 0) r.queue_max = static_cast<std::size_t>(n);
    }
}

struct element {
  MPI_Datatype type;
  MPI_Aint disp;
  int size;
};

struct event_type {
  const char* name;
  const char* desc;
  nmad::layer::event_kind kind;
  std::vector<element> elements;
  std::size_t bytes;  // what MPI_T_event_copy writes
};

struct message_data {
  int peer;
  int tag;
  unsigned context;
  unsigned pad;
  unsigned long long size;
};

struct failure_data {
  int peer;
  char what[96];
};

const std::vector<event_type>& types() {
  static const std::vector<event_type> v = [] {
    const std::vector<element> msg = {{MPI_INT, offsetof(message_data, peer), 4},
                                      {MPI_INT, offsetof(message_data, tag), 4},
                                      {MPI_UNSIGNED, offsetof(message_data, context), 4},
                                      {MPI_UNSIGNED_LONG_LONG, offsetof(message_data, size), 8}};
    std::vector<element> fail = {{MPI_INT, offsetof(failure_data, peer), 4}};
    for (int i = 0; i < 96; ++i)
      fail.push_back({MPI_CHAR, static_cast<MPI_Aint>(offsetof(failure_data, what) + static_cast<std::size_t>(i)), 1});
    return std::vector<event_type>{
        {"nmad_rdv_started",
         "a message to a peer goes by rendezvous: peer (rank in MPI_COMM_WORLD), MPI tag, engine context, size in "
         "bytes",
         nmad::layer::event_kind::rdv_started, msg, sizeof(message_data)},
        {"nmad_rail_failed",
         "a driver connection to a peer failed: peer (rank in MPI_COMM_WORLD), then 96 characters \"driver: reason\" "
         "(null-terminated)",
         nmad::layer::event_kind::rail_failed, fail, sizeof(failure_data)},
        {"nmad_unexpected_queued",
         "a message arrived before its receive was posted: peer (rank in MPI_COMM_WORLD), MPI tag, engine context, "
         "size in bytes",
         nmad::layer::event_kind::unexpected_queued, msg, sizeof(message_data)},
        {"nmad_progress_woken", "the progress thread woke up from a sleep (no data)",
         nmad::layer::event_kind::progress_woken, {}, 0},
    };
  }();
  return v;
}

struct events_state {
  std::mutex mu;  // a leaf: the engine's sink takes it under engine locks
  std::vector<nmad_t_event_registration*> regs;  // live ones (and freed ones still delivering)
  std::atomic<bool> delivering{false};           // one thread delivers at a time
};

events_state& es() {
  static events_state* s = new events_state;  // never destroyed: the sink may run until exit
  return *s;
}

// Under mu.
void update_mask(events_state& s) {
  unsigned mask = 0;
  for (const auto* r : s.regs) {
    if (r->freed) continue;
    bool any = false;
    for (const auto& c : r->cbs) any |= c.fn != nullptr;
    if (any) mask |= 1u << static_cast<unsigned>(types()[static_cast<std::size_t>(r->event)].kind);
  }
  nmad::layer::set_event_sink(mask, [](const nmad::layer::event& e, void*) {
    events_state& st = es();
    std::lock_guard g(st.mu);
    bool queued = false;
    for (auto* r : st.regs) {
      if (r->freed || types()[static_cast<std::size_t>(r->event)].kind != e.kind) continue;
      if (r->queue.size() < r->queue_max) r->queue.push_back(e);
      else ++r->drops;
      queued = true;
    }
    if (queued) g_tool_events_pending.store(true, std::memory_order_release);
  }, nullptr);
}

bool live(events_state& s, MPI_T_event_registration r) {
  return r && std::find(s.regs.begin(), s.regs.end(), r) != s.regs.end() && !r->freed;
}

// The instance of event e for a registration of type t.
void fill(nmad_t_event_instance& in, int type, const nmad::layer::event& e) {
  in.event = type;
  in.time_ns = e.time_ns;
  switch (e.kind) {
    case nmad::layer::event_kind::rdv_started:
    case nmad::layer::event_kind::unexpected_queued: {
      message_data d{e.peer, static_cast<int>(static_cast<std::uint32_t>(e.tag)),
                     static_cast<unsigned>(e.tag >> 32), 0, static_cast<unsigned long long>(e.size)};
      std::memcpy(in.data, &d, sizeof d);
      break;
    }
    case nmad::layer::event_kind::rail_failed: {
      failure_data d{};
      d.peer = e.peer;
      std::memcpy(d.what, e.what, std::min(sizeof d.what, sizeof e.what));
      d.what[sizeof d.what - 1] = '\0';
      std::memcpy(in.data, &d, sizeof d);
      break;
    }
    case nmad::layer::event_kind::progress_woken: break;
  }
}

// The callback to use in a context of no restriction: the one for
// MPI_T_CB_REQUIRE_NONE, else the nearest stronger level's.
const nmad_t_event_registration::callback* pick(const nmad_t_event_registration& r) {
  for (const auto& c : r.cbs)
    if (c.fn) return &c;
  return nullptr;
}

// One step of delivery: a drop report or an event of some registration.
// False when nothing is left.
bool deliver_one(events_state& s) {
  nmad_t_event_registration* r = nullptr;
  nmad::layer::event e;
  std::uint64_t drops = 0;
  const nmad_t_event_registration::callback* cb = nullptr;
  MPI_T_event_dropped_cb_function* dropped = nullptr;
  void* dropped_user = nullptr;
  {
    std::lock_guard g(s.mu);
    for (auto* x : s.regs)
      if (!x->freed && (x->drops || !x->queue.empty())) {
        r = x;
        break;
      }
    if (!r) {
      g_tool_events_pending.store(false, std::memory_order_release);
      return false;
    }
    if (r->drops) {
      drops = r->drops;
      r->drops = 0;
      dropped = r->dropped;
      // (The handler gets the user data of the callback it stands beside.)
      if (const auto* c = pick(*r)) dropped_user = c->user;
    } else {
      e = r->queue.front();
      r->queue.pop_front();
      cb = pick(*r);
    }
    ++r->delivering;
  }
  if (drops && dropped) dropped(static_cast<MPI_Count>(drops), r, 0, MPI_T_CB_REQUIRE_NONE, dropped_user);
  if (cb) {
    nmad_t_event_instance in;
    fill(in, r->event, e);
    cb->fn(&in, r, MPI_T_CB_REQUIRE_NONE, cb->user);
  }
  MPI_T_event_free_cb_function* free_cb = nullptr;
  void* free_user = nullptr;
  {
    std::lock_guard g(s.mu);
    if (--r->delivering == 0 && r->freed) {
      free_cb = r->free_cb;
      free_user = r->free_user;
      s.regs.erase(std::find(s.regs.begin(), s.regs.end(), r));
    } else {
      r = nullptr;
    }
  }
  if (r) {  // freed from its own callback: its free callback runs now
    if (free_cb) free_cb(r, MPI_T_CB_REQUIRE_NONE, free_user);
    delete r;
  }
  return true;
}

thread_local bool t_in_delivery = false;

}  // namespace

void deliver_tool_events_slow() {
  events_state& s = es();
  if (t_in_delivery) return;  // a callback's own MPI calls: delivered by the outer loop
  bool expected = false;
  if (!s.delivering.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) return;
  t_in_delivery = true;
  while (deliver_one(s)) {
  }
  t_in_delivery = false;
  s.delivering.store(false, std::memory_order_release);
}

int tool_event_count() { return static_cast<int>(types().size()); }

void tool_events_end() {
  events_state& s = es();
  std::lock_guard g(s.mu);
  for (auto* r : s.regs) r->freed = true;
  s.regs.erase(std::remove_if(s.regs.begin(), s.regs.end(),
                              [](nmad_t_event_registration* r) {
                                if (r->delivering) return false;
                                delete r;
                                return true;
                              }),
               s.regs.end());
  update_mask(s);
}

}  // namespace nmad::mpi

using namespace nmad::mpi;

#define EV_ENTER()                                         \
  if (!tool_initialized()) return MPI_T_ERR_NOT_INITIALIZED; \
  events_state& s = es()

extern "C" {

int PMPI_T_event_get_num(int* num_events) {
  EV_ENTER();
  (void)s;
  if (!num_events) return MPI_T_ERR_INVALID;
  *num_events = static_cast<int>(types().size());
  return MPI_SUCCESS;
}

int PMPI_T_event_get_info(int event_index, char* name, int* name_len, int* verbosity, MPI_Datatype array_of_datatypes[],
                          MPI_Aint array_of_displacements[], int* num_elements, MPI_T_enum* enumtype, MPI_Info* info,
                          char* desc, int* desc_len, int* bind) {
  EV_ENTER();
  (void)s;
  if (event_index < 0 || event_index >= static_cast<int>(types().size())) return MPI_T_ERR_INVALID_INDEX;
  const event_type& t = types()[static_cast<std::size_t>(event_index)];
  tool_give_string(t.name, name, name_len);
  tool_give_string(t.desc, desc, desc_len);
  if (verbosity) *verbosity = MPI_T_VERBOSITY_TUNER_DETAIL;
  // MPI 4.0: num_elements in: the arrays' length; out: the element count.
  const int n = static_cast<int>(t.elements.size());
  if (num_elements) {
    const int room = *num_elements;
    for (int i = 0; i < std::min(room, n); ++i) {
      if (array_of_datatypes) array_of_datatypes[i] = t.elements[static_cast<std::size_t>(i)].type;
      if (array_of_displacements) array_of_displacements[i] = t.elements[static_cast<std::size_t>(i)].disp;
    }
    *num_elements = n;
  }
  if (enumtype) *enumtype = MPI_T_ENUM_NULL;
  if (info) *info = new_info({});
  if (bind) *bind = MPI_T_BIND_NO_OBJECT;
  return MPI_SUCCESS;
}

int PMPI_T_event_get_index(const char* name, int* event_index) {
  EV_ENTER();
  (void)s;
  if (!name || !event_index) return MPI_T_ERR_INVALID;
  for (std::size_t i = 0; i < types().size(); ++i)
    if (!std::strcmp(types()[i].name, name)) {
      *event_index = static_cast<int>(i);
      return MPI_SUCCESS;
    }
  return MPI_T_ERR_INVALID_NAME;
}

int PMPI_T_event_handle_alloc(int event_index, void*, MPI_Info info, MPI_T_event_registration* event_registration) {
  EV_ENTER();
  if (event_index < 0 || event_index >= static_cast<int>(types().size())) return MPI_T_ERR_INVALID_INDEX;
  if (!event_registration) return MPI_T_ERR_INVALID;
  std::optional<info_entries> hints;
  if (info != MPI_INFO_NULL && !(hints = info_get_entries(info))) return MPI_T_ERR_INVALID;
  auto* r = new nmad_t_event_registration;
  r->event = event_index;
  if (hints) r->hints = *hints;
  apply_hints(*r);
  std::lock_guard g(s.mu);
  s.regs.push_back(r);
  *event_registration = r;
  return MPI_SUCCESS;
}

int PMPI_T_event_handle_set_info(MPI_T_event_registration event_registration, MPI_Info info) {
  EV_ENTER();
  std::optional<info_entries> hints;
  if (info != MPI_INFO_NULL && !(hints = info_get_entries(info))) return MPI_T_ERR_INVALID;
  std::lock_guard g(s.mu);
  if (!live(s, event_registration)) return MPI_T_ERR_INVALID_HANDLE;
  // Hints are kept (and read back) as given; nmad_queue_max is applied.
  if (hints)
    for (auto& kv : *hints) {
      auto& h = event_registration->hints;
      auto it = std::find_if(h.begin(), h.end(), [&](const auto& x) { return x.first == kv.first; });
      if (it != h.end()) it->second = kv.second;
      else h.push_back(kv);
    }
  apply_hints(*event_registration);
  return MPI_SUCCESS;
}

int PMPI_T_event_handle_get_info(MPI_T_event_registration event_registration, MPI_Info* info_used) {
  EV_ENTER();
  if (!info_used) return MPI_T_ERR_INVALID;
  info_entries h;
  {
    std::lock_guard g(s.mu);
    if (!live(s, event_registration)) return MPI_T_ERR_INVALID_HANDLE;
    h = event_registration->hints;
  }
  *info_used = new_info(std::move(h));
  return MPI_SUCCESS;
}

int PMPI_T_event_register_callback(MPI_T_event_registration event_registration, MPI_T_cb_safety cb_safety,
                                   MPI_Info info, void* user_data, MPI_T_event_cb_function event_cb_function) {
  EV_ENTER();
  if (cb_safety < MPI_T_CB_REQUIRE_NONE || cb_safety > MPI_T_CB_REQUIRE_ASYNC_SIGNAL_SAFE) return MPI_T_ERR_INVALID;
  std::optional<info_entries> hints;
  if (info != MPI_INFO_NULL && !(hints = info_get_entries(info))) return MPI_T_ERR_INVALID;
  std::lock_guard g(s.mu);
  if (!live(s, event_registration)) return MPI_T_ERR_INVALID_HANDLE;
  // A null function removes the level's callback (as MPICH does).
  auto& c = event_registration->cbs[cb_safety];
  c.fn = event_cb_function;
  c.user = user_data;
  c.hints = hints ? *hints : info_entries{};
  update_mask(s);
  return MPI_SUCCESS;
}

int PMPI_T_event_callback_set_info(MPI_T_event_registration event_registration, MPI_T_cb_safety cb_safety,
                                   MPI_Info info) {
  EV_ENTER();
  if (cb_safety < MPI_T_CB_REQUIRE_NONE || cb_safety > MPI_T_CB_REQUIRE_ASYNC_SIGNAL_SAFE) return MPI_T_ERR_INVALID;
  std::optional<info_entries> hints;
  if (info != MPI_INFO_NULL && !(hints = info_get_entries(info))) return MPI_T_ERR_INVALID;
  std::lock_guard g(s.mu);
  if (!live(s, event_registration)) return MPI_T_ERR_INVALID_HANDLE;
  auto& c = event_registration->cbs[cb_safety];
  if (!c.fn) return MPI_T_ERR_INVALID;  // no callback at that level
  if (hints) c.hints = *hints;
  return MPI_SUCCESS;
}

int PMPI_T_event_callback_get_info(MPI_T_event_registration event_registration, MPI_T_cb_safety cb_safety,
                                   MPI_Info* info_used) {
  EV_ENTER();
  if (cb_safety < MPI_T_CB_REQUIRE_NONE || cb_safety > MPI_T_CB_REQUIRE_ASYNC_SIGNAL_SAFE || !info_used)
    return MPI_T_ERR_INVALID;
  info_entries h;
  {
    std::lock_guard g(s.mu);
    if (!live(s, event_registration)) return MPI_T_ERR_INVALID_HANDLE;
    const auto& c = event_registration->cbs[cb_safety];
    if (!c.fn) return MPI_T_ERR_INVALID;
    h = c.hints;
  }
  *info_used = new_info(std::move(h));
  return MPI_SUCCESS;
}

int PMPI_T_event_handle_free(MPI_T_event_registration event_registration, void* user_data,
                             MPI_T_event_free_cb_function free_cb_function) {
  EV_ENTER();
  bool now = false;
  {
    std::lock_guard g(s.mu);
    if (!live(s, event_registration)) return MPI_T_ERR_INVALID_HANDLE;
    // Events still queued for it are dropped with it.
    event_registration->freed = true;
    event_registration->queue.clear();
    event_registration->free_cb = free_cb_function;
    event_registration->free_user = user_data;
    if (event_registration->delivering == 0) {
      s.regs.erase(std::find(s.regs.begin(), s.regs.end(), event_registration));
      now = true;
    }
    update_mask(s);
  }
  // Else one of its callbacks runs (this is called from it): the free
  // callback runs once that returns.
  if (now) {
    if (free_cb_function) free_cb_function(event_registration, MPI_T_CB_REQUIRE_NONE, user_data);
    delete event_registration;
  }
  return MPI_SUCCESS;
}

int PMPI_T_event_set_dropped_handler(MPI_T_event_registration event_registration,
                                     MPI_T_event_dropped_cb_function dropped_cb_function) {
  EV_ENTER();
  std::lock_guard g(s.mu);
  if (!live(s, event_registration)) return MPI_T_ERR_INVALID_HANDLE;
  event_registration->dropped = dropped_cb_function;
  return MPI_SUCCESS;
}

// The instance calls are made from a callback, with the instance it got.
int PMPI_T_event_read(MPI_T_event_instance event_instance, int element_index, void* buffer) {
  EV_ENTER();
  (void)s;
  if (!event_instance) return MPI_T_ERR_INVALID_HANDLE;
  const event_type& t = types()[static_cast<std::size_t>(event_instance->event)];
  if (element_index < 0 || element_index >= static_cast<int>(t.elements.size())) return MPI_T_ERR_INVALID_INDEX;
  if (!buffer) return MPI_T_ERR_INVALID;
  const element& el = t.elements[static_cast<std::size_t>(element_index)];
  std::memcpy(buffer, event_instance->data + el.disp, static_cast<std::size_t>(el.size));
  return MPI_SUCCESS;
}

int PMPI_T_event_copy(MPI_T_event_instance event_instance, void* buffer) {
  EV_ENTER();
  (void)s;
  if (!event_instance) return MPI_T_ERR_INVALID_HANDLE;
  const event_type& t = types()[static_cast<std::size_t>(event_instance->event)];
  if (!buffer && t.bytes) return MPI_T_ERR_INVALID;
  if (t.bytes) std::memcpy(buffer, event_instance->data, t.bytes);
  return MPI_SUCCESS;
}

int PMPI_T_event_get_timestamp(MPI_T_event_instance event_instance, MPI_Count* event_timestamp) {
  EV_ENTER();
  (void)s;
  if (!event_instance) return MPI_T_ERR_INVALID_HANDLE;
  if (!event_timestamp) return MPI_T_ERR_INVALID;
  *event_timestamp = static_cast<MPI_Count>(event_instance->time_ns);
  return MPI_SUCCESS;
}

int PMPI_T_event_get_source(MPI_T_event_instance event_instance, int* source_index) {
  EV_ENTER();
  (void)s;
  if (!event_instance) return MPI_T_ERR_INVALID_HANDLE;
  if (!source_index) return MPI_T_ERR_INVALID;
  *source_index = 0;
  return MPI_SUCCESS;
}

int PMPI_T_source_get_num(int* num_sources) {
  EV_ENTER();
  (void)s;
  if (!num_sources) return MPI_T_ERR_INVALID;
  *num_sources = 1;
  return MPI_SUCCESS;
}

int PMPI_T_source_get_info(int source_index, char* name, int* name_len, char* desc, int* desc_len,
                           MPI_T_source_order* ordering, MPI_Count* ticks_per_second, MPI_Count* max_ticks,
                           MPI_Info* info) {
  EV_ENTER();
  (void)s;
  if (source_index != 0) return MPI_T_ERR_INVALID_INDEX;
  tool_give_string("nmad_monotonic", name, name_len);
  tool_give_string("the engine's events, stamped with CLOCK_MONOTONIC in nanoseconds when they happen", desc,
                   desc_len);
  if (ordering) *ordering = MPI_T_SOURCE_UNORDERED;
  if (ticks_per_second) *ticks_per_second = 1000000000LL;
  if (max_ticks) *max_ticks = 0x7fffffffffffffffLL;
  if (info) *info = new_info({});
  return MPI_SUCCESS;
}

int PMPI_T_source_get_timestamp(int source_index, MPI_Count* timestamp) {
  EV_ENTER();
  (void)s;
  if (source_index != 0) return MPI_T_ERR_INVALID_INDEX;
  if (!timestamp) return MPI_T_ERR_INVALID;
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  *timestamp = static_cast<MPI_Count>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
  return MPI_SUCCESS;
}

}  // extern "C"

#pragma weak MPI_T_event_get_num = PMPI_T_event_get_num
#pragma weak MPI_T_event_get_info = PMPI_T_event_get_info
#pragma weak MPI_T_event_get_index = PMPI_T_event_get_index
#pragma weak MPI_T_event_handle_alloc = PMPI_T_event_handle_alloc
#pragma weak MPI_T_event_handle_set_info = PMPI_T_event_handle_set_info
#pragma weak MPI_T_event_handle_get_info = PMPI_T_event_handle_get_info
#pragma weak MPI_T_event_register_callback = PMPI_T_event_register_callback
#pragma weak MPI_T_event_callback_set_info = PMPI_T_event_callback_set_info
#pragma weak MPI_T_event_callback_get_info = PMPI_T_event_callback_get_info
#pragma weak MPI_T_event_handle_free = PMPI_T_event_handle_free
#pragma weak MPI_T_event_set_dropped_handler = PMPI_T_event_set_dropped_handler
#pragma weak MPI_T_event_read = PMPI_T_event_read
#pragma weak MPI_T_event_copy = PMPI_T_event_copy
#pragma weak MPI_T_event_get_timestamp = PMPI_T_event_get_timestamp
#pragma weak MPI_T_event_get_source = PMPI_T_event_get_source
#pragma weak MPI_T_source_get_num = PMPI_T_source_get_num
#pragma weak MPI_T_source_get_info = PMPI_T_source_get_info
#pragma weak MPI_T_source_get_timestamp = PMPI_T_source_get_timestamp
