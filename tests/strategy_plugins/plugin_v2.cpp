// A version 2 test plugin written in C++ against the C interface:
// "smallest first" — each packet starts with the queued chunk of smallest
// wire size that is first of its tag flow, then aggregates in queue order.
// It counts what it does (exported for the tests, printed at exit when
// NMAD_TEST_PLUGIN_REPORT is set) so a test can tell it really ran.
#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "api/nmad/strategy_plugin.h"

namespace {

std::atomic<unsigned long> g_packets{0}, g_submits{0}, g_rdv_choices{0}, g_instances{0}, g_flushes{0};

struct instance {
  const nmad_strategy_engine_v2* engine;
};

int build(void* self, nmad_strategy_queue* q, nmad_strategy_packet* p, const nmad_strategy_track* t) {
  const nmad_strategy_engine_v2& e = *static_cast<instance*>(self)->engine;
  nmad_strategy_track_info ti;
  e.track_info(t, &ti);
  // The smallest chunk that is first of its tag (a control answer at once).
  nmad_strategy_chunk* best = nullptr;
  nmad_strategy_chunk_info bi{};
  unsigned long long seen[32];
  int nseen = 0;
  for (nmad_strategy_chunk* c = e.queue_first(q); c && nseen < 32; c = e.queue_next(q, c)) {
    nmad_strategy_chunk_info ci;
    e.chunk_info(c, &ci);
    if (ci.kind == NMAD_CHUNK_CONTROL) {
      best = c;
      break;
    }
    bool first = true;
    for (int k = 0; k < nseen; ++k) first &= seen[k] != ci.tag;
    if (!first) continue;
    seen[nseen++] = ci.tag;
    if (!best || ci.wire_size < bi.wire_size) {
      best = c;
      bi = ci;
    }
  }
  if (!best || !e.packet_add(p, q, best, UINT64_MAX)) return 0;
  // Then whole chunks in queue order while they fit (only first-of-flow
  // ones, so a tag's order is kept).
  nseen = 0;
  for (nmad_strategy_chunk* c = e.queue_first(q); c && nseen < 32;) {
    nmad_strategy_chunk* next = e.queue_next(q, c);
    nmad_strategy_chunk_info ci;
    e.chunk_info(c, &ci);
    bool first = true;
    for (int k = 0; k < nseen; ++k) first &= seen[k] != ci.tag;
    seen[nseen++] = ci.tag;
    if (first && ci.wire_size <= e.packet_room(p) + 64) {
      if (!e.packet_add(p, q, c, UINT64_MAX)) break;
    }
    c = next;
  }
  g_packets.fetch_add(1, std::memory_order_relaxed);
  return 1;
}

void on_submit(void*, nmad_strategy_queue*, nmad_strategy_chunk*) { g_submits.fetch_add(1, std::memory_order_relaxed); }

uint32_t choose(void*, const nmad_strategy_rdv_info*, const nmad_strategy_track* const*, uint32_t ntracks,
                uint64_t* length) {
  g_rdv_choices.fetch_add(1, std::memory_order_relaxed);
  return ntracks - 1;  // the last track carries everything
}

void flush(void*) { g_flushes.fetch_add(1, std::memory_order_relaxed); }

void destroy(void* self) { delete static_cast<instance*>(self); }

void* create(const nmad_strategy_engine_v2* engine, nmad_strategy_ops_v2* ops) {
  if (engine->version < 2 || engine->size < sizeof(nmad_strategy_engine_v2)) return nullptr;
  ops->build_packet = &build;
  ops->on_submit = &on_submit;
  ops->choose_rdv_track = &choose;
  ops->flush = &flush;
  ops->destroy = &destroy;
  g_instances.fetch_add(1, std::memory_order_relaxed);
  return new instance{engine};
}

struct reporter {
  ~reporter() {
    if (std::getenv("NMAD_TEST_PLUGIN_REPORT"))
      std::fprintf(stderr, "test_v2 plugin: %lu instances, %lu packets, %lu submits, %lu rdv choices\n",
                   g_instances.load(), g_packets.load(), g_submits.load(), g_rdv_choices.load());
  }
} g_reporter;

}  // namespace

NMAD_STRATEGY_EXPORT const nmad_strategy_descriptor_v2 nmad_strategy_plugin = {
    NMAD_STRATEGY_INTERFACE_VERSION, sizeof(nmad_strategy_descriptor_v2), "test_v2",
    "test plugin: smallest chunk first, then aggregate", &create};
extern "C" {
__attribute__((visibility("default"))) unsigned long test_plugin_packets(void) { return g_packets.load(); }
__attribute__((visibility("default"))) unsigned long test_plugin_submits(void) { return g_submits.load(); }
__attribute__((visibility("default"))) unsigned long test_plugin_rdv_choices(void) { return g_rdv_choices.load(); }
__attribute__((visibility("default"))) unsigned long test_plugin_flushes(void) { return g_flushes.load(); }
}
