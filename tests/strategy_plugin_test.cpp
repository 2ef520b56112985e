// The C strategy plugin interface: loading by path and by name, the
// version 1 adapter, in-process registration, and the errors that stop
// start-up (wrong version, missing symbol, unknown name, not a shared
// object, failing create). The plugins are built by Bazel as shared
// objects (tests/strategy_plugins/) and loaded for real with dlopen.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "api/nmad/strategy_plugin.h"
#include "core/strategy/strategy.hpp"
#include "tests/test_paths.hpp"

using namespace nmad;

namespace {

using nmad_test::contains;

std::string plugin(const std::string& name) {
  return nmad_test::runfile("tests/strategy_plugins/libnmad_strategy_" + name + ".so");
}

std::string error_of(const std::string& selector) {
  try {
    resolve_strategy(selector)->create();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

struct window {
  std::vector<char> data = std::vector<char>(4096, 'p');
  std::vector<chunk_entry> entries;
  collect_list list;
  explicit window(std::size_t n, std::size_t size) : entries(n) {
    for (std::size_t i = 0; i < n; ++i) {
      chunk_entry& e = entries[i];
      e.kind = chunk_kind::data;
      e.flags = chunk_flag::last;
      e.ptr = reinterpret_cast<const std::byte*>(data.data());
      e.len = size + i;  // later ones bigger
      e.msg_len = e.len;
      e.tag = i;
      list.push_back(e);
    }
  }
  ~window() { list.clear(); }
};

// Drains w through s; returns the chunks of each packet.
std::vector<std::size_t> drain(strategy& s, window& w) {
  std::vector<std::size_t> out;
  driver_caps c;
  c.name = "test";
  c.max_packet_size = 65536;
  track_view t;
  t.caps = &c;
  while (!w.list.empty()) {
    packet_wrapper pw;
    pw.staging = std::make_unique<std::byte[]>(65536);
    pw.staging_capacity = 65536;
    packet_builder pb(pw, 65536, 64, 256);
    REQUIRE(s.build_packet(w.list, pb, t, std::span<const track_view>(&t, 1)));
    out.push_back(pw.nchunks);
    REQUIRE(out.size() < 1000);
  }
  return out;
}

template <typename F>
F symbol(const std::string& path, const char* name) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(h != nullptr);
  void* f = dlsym(h, name);
  dlclose(h);
  REQUIRE(f != nullptr);
  return reinterpret_cast<F>(f);
}

}  // namespace

TEST_CASE("a version 2 plugin loads by path and builds the packets") {
  const std::string path = plugin("test_v2");
  auto src = resolve_strategy(path);
  CHECK(src->name() == "test_v2");
  auto s = src->create();
  auto packets = symbol<unsigned long (*)()>(path, "test_plugin_packets");
  const unsigned long before = packets();
  window w(10, 8);
  const auto per_packet = drain(*s, w);
  CHECK(per_packet.size() == 1);  // all ten aggregate
  CHECK(per_packet[0] == 10);
  CHECK(packets() == before + 1);
  // The smallest chunk goes first: the first entry (8 bytes) here. Make
  // the last one the smallest instead.
  window w2(3, 100);
  w2.entries[2].len = 1;
  packet_wrapper pw;
  pw.staging = std::make_unique<std::byte[]>(65536);
  pw.staging_capacity = 65536;
  packet_builder pb(pw, 65536, 64, 256);
  driver_caps c;
  c.max_packet_size = 65536;
  track_view t;
  t.caps = &c;
  REQUIRE(s->build_packet(w2.list, pb, t, std::span<const track_view>(&t, 1)));
  CHECK(pw.carried[0] == &w2.entries[2]);
}

TEST_CASE("on_submit, flush and the rendezvous choice reach a version 2 plugin") {
  const std::string path = plugin("test_v2");
  auto s = resolve_strategy(path)->create();
  auto submits = symbol<unsigned long (*)()>(path, "test_plugin_submits");
  auto rdv = symbol<unsigned long (*)()>(path, "test_plugin_rdv_choices");
  auto flushes = symbol<unsigned long (*)()>(path, "test_plugin_flushes");
  const unsigned long s0 = submits(), r0 = rdv(), f0 = flushes();
  window w(1, 8);
  s->on_submit(w.list, w.entries[0]);
  s->flush();
  CHECK(submits() == s0 + 1);
  CHECK(flushes() == f0 + 1);
  driver_caps c;
  c.max_packet_size = 65536;
  std::array<track_view, 3> tracks;
  for (std::uint32_t i = 0; i < 3; ++i) {
    tracks[i].rail = i;
    tracks[i].caps = &c;
  }
  std::uint64_t len = 1 << 20;
  CHECK(s->choose_rdv_track({}, tracks, len) == 2);  // it always answers the last track
  CHECK(len == 1 << 20);
  CHECK(rdv() == r0 + 1);
  tracks[2].connected = false;  // an answer naming a closed track is overruled
  CHECK(s->choose_rdv_track({}, tracks, len) == 0);
}

TEST_CASE("a version 1 plugin keeps working through the adapter") {
  const std::string path = plugin("test_v1");
  auto src = resolve_strategy(path);
  CHECK(src->name() == "test_v1");
  auto s = src->create();
  auto packets = symbol<unsigned long (*)()>(path, "test_plugin_packets");
  const unsigned long before = packets();
  window w(4, 8);
  CHECK(drain(*s, w) == std::vector<std::size_t>{1, 1, 1, 1});
  CHECK(packets() == before + 4);
  // Hooks version 1 lacks take the engine's defaults.
  CHECK(s->allow_inline(track_view{}));
}

TEST_CASE("NMAD_STRATEGY=name finds libnmad_strategy_<name>.so in NMAD_STRATEGY_PATH") {
  const std::string dir = std::filesystem::path(plugin("test_v2")).parent_path().string();
  ::setenv("NMAD_STRATEGY_PATH", ("/nonexistent:" + dir).c_str(), 1);
  auto src = resolve_strategy("test_v1");
  CHECK(src->name() == "test_v1");
  CHECK(src->create() != nullptr);
  const auto dirs = strategy_plugin_dirs();
  REQUIRE(dirs.size() >= 2);
  CHECK(dirs[0] == "/nonexistent");
  CHECK(dirs[1] == dir);
  // nmad-info's listing: the built-ins, then every plugin of the
  // directories with its version, the broken ones with their error.
  bool v1 = false, v2 = false, bad = false, builtin = false;
  for (const auto& l : list_strategies()) {
    if (l.name == "prio" && l.origin == "built-in") builtin = true;
    if (l.name == "test_v1") v1 = l.ok && l.interface_version == 1;
    if (l.name == "test_v2") v2 = l.ok && l.interface_version == 2;
    if (l.name == "bad_version") bad = !l.ok && contains(l.description, "interface version 99");
  }
  CHECK(builtin);
  CHECK(v1);
  CHECK(v2);
  CHECK(bad);
  ::unsetenv("NMAD_STRATEGY_PATH");
}

TEST_CASE("a wrong interface version stops start-up naming the file, the symbol and the versions") {
  const std::string path = plugin("bad_version");
  const std::string e = error_of(path);
  INFO(e);
  CHECK(contains(e, path));
  CHECK(contains(e, "nmad_strategy_plugin"));
  CHECK(contains(e, "interface version 99"));
  CHECK(contains(e, "versions 1 to 2"));
}

TEST_CASE("a shared object without the descriptor symbol is refused") {
  const std::string path = plugin("no_symbol");
  const std::string e = error_of(path);
  INFO(e);
  CHECK(contains(e, path));
  CHECK(contains(e, "no symbol 'nmad_strategy_plugin'"));
}

TEST_CASE("a file that is not a shared object is refused with dlopen's reason") {
  const std::string path = "/tmp/libnmad_strategy_garbage_" + std::to_string(::getpid()) + ".so";
  std::ofstream(path) << "this is not a shared object\n";
  const std::string e = error_of(path);
  INFO(e);
  CHECK(contains(e, "cannot load strategy plugin " + path));
  std::filesystem::remove(path);
  CHECK(contains(error_of("/nonexistent/libnmad_strategy_x.so"), "cannot load strategy plugin /nonexistent"));
}

TEST_CASE("an unknown name lists the built-ins and the directories searched") {
  ::setenv("NMAD_STRATEGY_PATH", "/nonexistent/a:/nonexistent/b", 1);
  const std::string e = error_of("nosuch");
  INFO(e);
  CHECK(contains(e, "unknown strategy 'nosuch'"));
  CHECK(contains(e, "aggreg_autoextended"));
  CHECK(contains(e, "libnmad_strategy_nosuch.so"));
  CHECK(contains(e, "/nonexistent/a, /nonexistent/b"));
  ::unsetenv("NMAD_STRATEGY_PATH");
}

TEST_CASE("a plugin whose create fails stops start-up") {
  const std::string e = error_of(plugin("failing_create"));
  INFO(e);
  CHECK(contains(e, "failing_create"));
  CHECK(contains(e, "create function failed"));
}

namespace {
int g_inproc_packets = 0;
const nmad_strategy_engine_v2* g_inproc_engine = nullptr;
int inproc_build(void*, nmad_strategy_queue* q, nmad_strategy_packet* p, const nmad_strategy_track*) {
  nmad_strategy_chunk* c = g_inproc_engine->queue_first(q);
  if (!c || !g_inproc_engine->packet_add(p, q, c, UINT64_MAX)) return 0;
  ++g_inproc_packets;
  return 1;
}
void* inproc_create(const nmad_strategy_engine_v2* e, nmad_strategy_ops_v2* ops) {
  g_inproc_engine = e;
  ops->build_packet = &inproc_build;
  return reinterpret_cast<void*>(1);
}
const nmad_strategy_descriptor_v2 kInProcess{NMAD_STRATEGY_INTERFACE_VERSION, sizeof(nmad_strategy_descriptor_v2),
                                             "in_process", "linked into the program", &inproc_create};
const nmad_strategy_descriptor_v2 kTakesBuiltinName{NMAD_STRATEGY_INTERFACE_VERSION,
                                                    sizeof(nmad_strategy_descriptor_v2), "prio", "", &inproc_create};
const nmad_strategy_descriptor_v2 kWrongSize{NMAD_STRATEGY_INTERFACE_VERSION, 12, "wrong_size", "", &inproc_create};
}  // namespace

TEST_CASE("in-process registration: by name, with the same checks") {
  REQUIRE(nmad_strategy_register(&kInProcess) == 0);
  auto s = resolve_strategy("in_process")->create();
  window w(3, 8);
  CHECK(drain(*s, w) == std::vector<std::size_t>{1, 1, 1});
  CHECK(g_inproc_packets == 3);
  CHECK(nmad_strategy_register(&kInProcess) == -1);
  CHECK(contains(nmad_strategy_last_error(), "already taken"));
  CHECK(nmad_strategy_register(&kTakesBuiltinName) == -1);
  CHECK(nmad_strategy_register(&kWrongSize) == -1);
  CHECK(contains(nmad_strategy_last_error(), "descriptor size 12"));
  CHECK(nmad_strategy_register(nullptr) == -1);
}
