// Strategies from outside the engine: the C plugin interface
// (api/nmad/strategy_plugin.h) behind the C++ strategy class, the loader
// (NMAD_STRATEGY, NMAD_STRATEGY_PATH, the installed plugin directory), the
// in-process registry, and the adapter of retired interface versions.
#include <dirent.h>
#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "api/nmad/strategy_plugin.h"
#include "api/nmad/services/config.hpp"
#include "api/nmad/services/log.hpp"
#include "api/nmad/services/thread_heap.hpp"
#include "core/strategy/builtin.hpp"

namespace nmad {
namespace {

// ---- handles -----------------------------------------------------------------
// The opaque handles are the engine's own objects, cast.
collect_list& queue_of(nmad_strategy_queue* q) { return *reinterpret_cast<collect_list*>(q); }
nmad_strategy_queue* handle(collect_list& q) { return reinterpret_cast<nmad_strategy_queue*>(&q); }
chunk_entry& chunk_of(nmad_strategy_chunk* c) { return *reinterpret_cast<chunk_entry*>(c); }
const chunk_entry& chunk_of(const nmad_strategy_chunk* c) { return *reinterpret_cast<const chunk_entry*>(c); }
nmad_strategy_chunk* handle(chunk_entry& e) { return reinterpret_cast<nmad_strategy_chunk*>(&e); }
const track_view& track_of(const nmad_strategy_track* t) { return *reinterpret_cast<const track_view*>(t); }
const nmad_strategy_track* handle(const track_view& t) { return reinterpret_cast<const nmad_strategy_track*>(&t); }
packet_builder& packet_of(nmad_strategy_packet* p) { return *reinterpret_cast<packet_builder*>(p); }
const packet_builder& packet_of(const nmad_strategy_packet* p) { return *reinterpret_cast<const packet_builder*>(p); }
nmad_strategy_packet* handle(packet_builder& p) { return reinterpret_cast<nmad_strategy_packet*>(&p); }

// What the plugin interface keeps per thread, behind a POSIX key (no
// static TLS, see api/nmad/services/thread_heap.hpp): the progress round of the
// hook being called (chunk ages) and the message of the thread's last
// failed nmad_strategy_register.
struct plugin_thread {
  std::uint32_t round = 0;
  std::string last_error;
};
using plugin_state_of_thread = thread_heap::thread_object<plugin_thread>;
plugin_thread& plugin_state() { return plugin_state_of_thread::get(); }

// ---- the engine's table ----------------------------------------------------------
nmad_strategy_chunk* e_queue_first(nmad_strategy_queue* q) {
  collect_list& l = queue_of(q);
  return l.empty() ? nullptr : handle(l.front());
}
nmad_strategy_chunk* e_queue_next(nmad_strategy_queue* q, nmad_strategy_chunk* c) {
  collect_list& l = queue_of(q);
  auto it = l.iterator_to(chunk_of(c));
  ++it;
  return it == l.end() ? nullptr : handle(*it);
}
int e_chunk_info(const nmad_strategy_chunk* c, nmad_strategy_chunk_info* out) {
  const chunk_entry& e = chunk_of(c);
  *out = nmad_strategy_chunk_info{};
  // (A cancel request stays in its message's flow: it counts as the
  // rendezvous request it cancels.)
  out->kind = e.kind == chunk_kind::data                                          ? NMAD_CHUNK_DATA
              : e.kind == chunk_kind::rdv_req || e.kind == chunk_kind::cancel_req ? NMAD_CHUNK_RDV_REQ
                                                                                  : NMAD_CHUNK_CONTROL;
  out->hints = (e.hints & chunk_hint::express ? NMAD_HINT_EXPRESS : 0u) |
               (e.hints & chunk_hint::cheaper ? NMAD_HINT_CHEAPER : 0u) |
               (e.flags & chunk_flag::last ? NMAD_HINT_LAST : 0u);
  out->tag = e.tag;
  out->seq = e.seq;
  out->priority = e.priority;
  out->offset = e.offset;
  out->length = e.len;
  out->msg_length = e.msg_len;
  out->wire_size = packet_builder::wire_size(e);
  out->age = plugin_state().round - e.queued_round;
  return 0;
}
int e_track_info(const nmad_strategy_track* th, nmad_strategy_track_info* out) {
  const track_view& t = track_of(th);
  *out = nmad_strategy_track_info{};
  out->rail = t.rail;
  out->outstanding = t.outstanding;
  out->bytes_in_flight = t.bytes_in_flight;
  out->idle = t.idle() ? 1 : 0;
  out->connected = t.connected ? 1 : 0;
  if (t.caps) {
    out->driver = t.caps->name.c_str();
    out->latency_us = t.caps->latency_us;
    out->bandwidth_mbps = t.caps->bandwidth_mbps;
    out->max_packet = t.caps->max_packet_size;
    out->max_inline = t.caps->max_inline;
  }
  return 0;
}
std::uint64_t e_packet_room(const nmad_strategy_packet* p) { return packet_of(p).room(); }
std::uint32_t e_packet_chunks(const nmad_strategy_packet* p) {
  return static_cast<std::uint32_t>(packet_of(p).chunks());
}
int e_packet_add(nmad_strategy_packet* p, nmad_strategy_queue* q, nmad_strategy_chunk* c, std::uint64_t max) {
  chunk_entry& e = chunk_of(c);
  if (!e.hook.is_linked()) return 0;  // not queued (a stale handle): refused
  return packet_of(p).add(queue_of(q), e, max) ? 1 : 0;
}
void e_log(int level, const char* strategy, const char* message) {
  log_write(level == 0 ? log_level::info : log_level::warn, std::string("strategy ") + (strategy ? strategy : "?"),
            message ? message : "");
}

constexpr nmad_strategy_engine_v2 kEngineV2{
    sizeof(nmad_strategy_engine_v2), NMAD_STRATEGY_INTERFACE_VERSION,
    &e_queue_first, &e_queue_next, &e_chunk_info, &e_track_info, &e_packet_room, &e_packet_chunks,
    &e_packet_add, &e_log};
constexpr nmad_strategy_engine_v1 kEngineV1{
    sizeof(nmad_strategy_engine_v1), 1, &e_queue_first, &e_queue_next, &e_chunk_info, &e_packet_room,
    &e_packet_add};

// ---- version 1, adapted to version 2 ---------------------------------------------
// A version 1 instance behind version 2 hooks: build_packet without the
// track, no other hook (the engine's defaults).
struct v1_instance {
  nmad_strategy_ops_v1 ops;
  void* self;
};
int v1_build(void* self, nmad_strategy_queue* q, nmad_strategy_packet* p, const nmad_strategy_track*) {
  auto* a = static_cast<v1_instance*>(self);
  return a->ops.build_packet(a->self, q, p);
}
void v1_destroy(void* self) {
  auto* a = static_cast<v1_instance*>(self);
  if (a->ops.destroy) a->ops.destroy(a->self);
  delete a;
}
// Returns the adapted instance, or null if the plugin's create failed.
void* create_v1(const nmad_strategy_descriptor_v1& d, nmad_strategy_ops_v2& ops) {
  auto* a = new v1_instance{};
  a->ops.size = sizeof(nmad_strategy_ops_v1);
  a->ops.version = 1;
  a->self = d.create(&kEngineV1, &a->ops);
  if (!a->self || !a->ops.build_packet) {
    if (a->self && a->ops.destroy) a->ops.destroy(a->self);
    delete a;
    return nullptr;
  }
  ops = nmad_strategy_ops_v2{};
  ops.size = sizeof ops;
  ops.version = NMAD_STRATEGY_INTERFACE_VERSION;
  ops.build_packet = &v1_build;
  ops.destroy = &v1_destroy;
  return a;
}

// ---- the C++ face of a plugin instance ---------------------------------------------
class plugin_strategy final : public strategy {
 public:
  plugin_strategy(std::string name, nmad_strategy_ops_v2 ops, void* self)
      : _name(std::move(name)), _ops(ops), _self(self) {}
  ~plugin_strategy() override {
    if (_ops.destroy) _ops.destroy(_self);
  }
  std::string_view name() const override { return _name; }
  bool build_packet(collect_list& queue, packet_builder& out) override {
    track_view t;
    t.connected = true;
    return build_packet(queue, out, t);
  }
  bool build_packet(collect_list& queue, packet_builder& out, const track_view& t) override {
    plugin_state().round = t.round;
    return _ops.build_packet(_self, handle(queue), handle(out), handle(t)) != 0 && !out.empty();
  }
  void on_submit(collect_list& queue, chunk_entry& e) override {
    if (_ops.on_submit) _ops.on_submit(_self, handle(queue), handle(e));
  }
  std::uint32_t choose_rdv_track(const rdv_range& r, std::span<const track_view> tracks,
                                 std::uint64_t& len) override {
    if (!_ops.choose_rdv_track || tracks.size() <= 1) return strategy::choose_rdv_track(r, tracks, len);
    const nmad_strategy_rdv_info info{r.tag, r.seq, 0, r.offset, r.len};
    std::vector<const nmad_strategy_track*> handles;
    handles.reserve(tracks.size());
    for (const track_view& t : tracks) handles.push_back(handle(t));
    std::uint64_t n = len;
    const std::uint32_t rail =
        _ops.choose_rdv_track(_self, &info, handles.data(), static_cast<std::uint32_t>(handles.size()), &n);
    if (n > 0 && n <= len) len = n;
    if (rail < tracks.size() && tracks[rail].connected) return rail;
    for (const track_view& t : tracks)
      if (t.connected) return t.rail;
    return 0;
  }
  bool allow_inline(const track_view& t) const override {
    return !_ops.allow_inline || _ops.allow_inline(_self, handle(t)) != 0;
  }
  void flush() override {
    if (_ops.flush) _ops.flush(_self);
  }

 private:
  std::string _name;
  nmad_strategy_ops_v2 _ops;
  void* _self;
};

// ---- descriptors -------------------------------------------------------------------
// The head every descriptor version shares.
struct descriptor_head {
  std::uint32_t interface_version;
  std::uint32_t size;
  const char* name;
  const char* description;
};

// Checks a descriptor; returns "" or what is wrong with it.
std::string check_descriptor(const void* p) {
  if (!p) return "the descriptor is NULL";
  const auto* h = static_cast<const descriptor_head*>(p);
  const std::uint32_t v = h->interface_version;
  if (v < 1 || v > NMAD_STRATEGY_INTERFACE_VERSION)
    return "interface version " + std::to_string(v) + " is not supported (this engine accepts versions 1 to " +
           std::to_string(NMAD_STRATEGY_INTERFACE_VERSION) + ")";
  const std::uint32_t expect =
      v == 1 ? sizeof(nmad_strategy_descriptor_v1) : sizeof(nmad_strategy_descriptor_v2);
  if (h->size != expect)
    return "descriptor size " + std::to_string(h->size) + " does not match interface version " +
           std::to_string(v) + " (expected " + std::to_string(expect) + ")";
  if (!h->name || !*h->name) return "the descriptor has no name";
  const bool has_create = v == 1 ? static_cast<const nmad_strategy_descriptor_v1*>(p)->create != nullptr
                                 : static_cast<const nmad_strategy_descriptor_v2*>(p)->create != nullptr;
  if (!has_create) return "the descriptor has no create function";
  return {};
}

class plugin_source final : public strategy_source {
 public:
  plugin_source(const void* desc, std::string origin) : _desc(desc), _origin(std::move(origin)) {
    _name = static_cast<const descriptor_head*>(desc)->name;
  }
  std::string_view name() const override { return _name; }
  std::unique_ptr<strategy> create() const override {
    const auto* h = static_cast<const descriptor_head*>(_desc);
    nmad_strategy_ops_v2 ops{};
    ops.size = sizeof ops;
    ops.version = NMAD_STRATEGY_INTERFACE_VERSION;
    void* self = h->interface_version == 1
                     ? create_v1(*static_cast<const nmad_strategy_descriptor_v1*>(_desc), ops)
                     : static_cast<const nmad_strategy_descriptor_v2*>(_desc)->create(&kEngineV2, &ops);
    if (!self)
      throw std::runtime_error("nmad: strategy '" + _name + "' (" + _origin + "): its create function failed");
    if (!ops.build_packet) {
      if (ops.destroy) ops.destroy(self);
      throw std::runtime_error("nmad: strategy '" + _name + "' (" + _origin +
                               "): create left build_packet NULL");
    }
    return std::make_unique<plugin_strategy>(_name, ops, self);
  }

 private:
  const void* _desc;
  std::string _origin;
  std::string _name;
};

class builtin_source final : public strategy_source {
 public:
  explicit builtin_source(const strategy_descriptor& d) : _d(d) {}
  std::string_view name() const override { return _d.name; }
  std::unique_ptr<strategy> create() const override { return _d.create(); }

 private:
  const strategy_descriptor& _d;
};

// ---- in-process registry and loaded files ------------------------------------------
std::mutex g_mutex;  // guards the two below
std::vector<const void*>& registered() {
  static std::vector<const void*> v;
  return v;
}
// Loaded shared objects stay loaded: instances' code must outlive them.
std::map<std::string, const void*>& loaded() {
  static std::map<std::string, const void*> m;
  return m;
}

// Loads `path` and returns its checked descriptor; throws naming the file,
// the symbol or the versions.
const void* load_plugin_file(const std::string& path) {
  {
    std::lock_guard l(g_mutex);
    if (auto it = loaded().find(path); it != loaded().end()) return it->second;
  }
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* why = dlerror();
    throw std::runtime_error("nmad: cannot load strategy plugin " + path + ": " + (why ? why : "dlopen failed"));
  }
  dlerror();
  const void* desc = dlsym(h, NMAD_STRATEGY_SYMBOL);
  if (!desc) {
    dlclose(h);
    throw std::runtime_error("nmad: " + path + " is not an nmad strategy plugin: it has no symbol '" +
                             std::string(NMAD_STRATEGY_SYMBOL) + "'");
  }
  if (std::string why = check_descriptor(desc); !why.empty()) {
    dlclose(h);
    throw std::runtime_error("nmad: strategy plugin " + path + " (symbol " + NMAD_STRATEGY_SYMBOL + "): " + why);
  }
  std::lock_guard l(g_mutex);
  loaded().emplace(path, desc);
  return desc;
}

bool is_file(const std::string& p) {
  struct stat st{};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string names_of_builtins() {
  std::string s;
  for (const auto& d : strategy_registry()) s += (s.empty() ? "" : ", ") + std::string(d.name);
  return s;
}

}  // namespace

std::vector<std::string> strategy_plugin_dirs() {
  std::vector<std::string> dirs;
  if (const std::string p = config::text("NMAD_STRATEGY_PATH"); !p.empty()) {
    const std::string& s = p;
    std::size_t pos = 0;
    while (pos <= s.size()) {
      std::size_t end = s.find(':', pos);
      if (end == std::string::npos) end = s.size();
      if (end > pos) dirs.push_back(s.substr(pos, end - pos));
      pos = end + 1;
    }
  }
  // The installed directory, <prefix>/lib/nmad/strategies: next to
  // libnmad.so (<prefix>/lib), or, for a program the engine is linked
  // into, beside the program's bin/ directory.
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&strategy_plugin_dirs), &info) && info.dli_fname) {
    std::string lib = info.dli_fname;
    if (auto slash = lib.rfind('/'); slash != std::string::npos) {
      std::string dir = lib.substr(0, slash);
      const auto up = dir.rfind('/');
      if (up != std::string::npos && dir.substr(up + 1) == "bin") dir = dir.substr(0, up) + "/lib";
      dirs.push_back(dir + "/nmad/strategies");
    }
  }
  return dirs;
}

std::shared_ptr<const strategy_source> resolve_strategy(std::string_view selector) {
  const std::string sel(selector);
  if (sel.find('/') != std::string::npos) return std::make_shared<plugin_source>(load_plugin_file(sel), sel);
  if (const strategy_descriptor* d = find_strategy(sel)) return std::make_shared<builtin_source>(*d);
  {
    std::lock_guard l(g_mutex);
    for (const void* d : registered())
      if (static_cast<const descriptor_head*>(d)->name == sel)
        return std::make_shared<plugin_source>(d, "registered in-process");
  }
  const std::vector<std::string> dirs = strategy_plugin_dirs();
  const std::string file = NMAD_STRATEGY_FILE_PREFIX + sel + ".so";
  for (const std::string& dir : dirs) {
    const std::string path = dir + "/" + file;
    if (!is_file(path)) continue;
    const void* desc = load_plugin_file(path);
    if (static_cast<const descriptor_head*>(desc)->name != sel)
      throw std::runtime_error("nmad: strategy plugin " + path + " is named '" +
                               static_cast<const descriptor_head*>(desc)->name + "', not '" + sel + "'");
    return std::make_shared<plugin_source>(desc, path);
  }
  std::string searched;
  for (const std::string& d : dirs) searched += (searched.empty() ? "" : ", ") + d;
  throw std::runtime_error("nmad: unknown strategy '" + sel + "' (built-in: " + names_of_builtins() +
                           "; no " + file + " in " + (searched.empty() ? "no plugin directory" : searched) +
                           "; set NMAD_STRATEGY_PATH or give the plugin's path)");
}

std::vector<strategy_listing> list_strategies() {
  std::vector<strategy_listing> out;
  for (const auto& d : strategy_registry())
    out.push_back({std::string(d.name), "built-in", 0, std::string(d.description), true});
  {
    std::lock_guard l(g_mutex);
    for (const void* d : registered()) {
      const auto* h = static_cast<const descriptor_head*>(d);
      out.push_back({h->name, "registered", h->interface_version, h->description ? h->description : "", true});
    }
  }
  const std::string prefix = NMAD_STRATEGY_FILE_PREFIX;
  for (const std::string& dir : strategy_plugin_dirs()) {
    DIR* dp = opendir(dir.c_str());
    if (!dp) continue;
    std::vector<std::string> files;
    while (dirent* de = readdir(dp)) {
      const std::string f = de->d_name;
      if (f.size() > prefix.size() + 3 && f.compare(0, prefix.size(), prefix) == 0 &&
          f.compare(f.size() - 3, 3, ".so") == 0)
        files.push_back(f);
    }
    closedir(dp);
    std::sort(files.begin(), files.end());
    for (const std::string& f : files) {
      const std::string path = dir + "/" + f;
      strategy_listing s;
      s.name = f.substr(prefix.size(), f.size() - prefix.size() - 3);
      s.origin = path;
      try {
        const auto* h = static_cast<const descriptor_head*>(load_plugin_file(path));
        s.name = h->name;
        s.interface_version = h->interface_version;
        s.description = h->description ? h->description : "";
      } catch (const std::exception& e) {
        s.ok = false;
        s.description = e.what();
      }
      out.push_back(std::move(s));
    }
  }
  return out;
}

}  // namespace nmad

extern "C" {

int nmad_strategy_register(const void* descriptor) {
  using namespace nmad;
  if (std::string why = check_descriptor(descriptor); !why.empty()) {
    plugin_state().last_error = "nmad_strategy_register: " + why;
    return -1;
  }
  const std::string name = static_cast<const descriptor_head*>(descriptor)->name;
  std::lock_guard l(g_mutex);
  bool taken = find_strategy(name) != nullptr;
  for (const void* d : registered()) taken |= static_cast<const descriptor_head*>(d)->name == name;
  if (taken) {
    plugin_state().last_error = "nmad_strategy_register: the name '" + name + "' is already taken";
    return -1;
  }
  registered().push_back(descriptor);
  return 0;
}

const char* nmad_strategy_last_error(void) {
  const nmad::plugin_thread* p = nmad::plugin_state_of_thread::peek();
  return p ? p->last_error.c_str() : "";
}

}  // extern "C"
