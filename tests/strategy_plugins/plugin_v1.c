/* A version 1 test plugin in plain C, as written before version 2 existed
 * (version 1 knows build_packet and destroy only): one chunk per packet,
 * the oldest. It counts its packets. */
#include <stdint.h>
#include <stdlib.h>

#include "api/nmad/strategy_plugin.h"

static unsigned long g_packets;
static const nmad_strategy_engine_v1* g_engine;

static int build(void* self, nmad_strategy_queue* q, nmad_strategy_packet* p) {
  (void)self;
  nmad_strategy_chunk* c = g_engine->queue_first(q);
  if (!c || !g_engine->packet_add(p, q, c, UINT64_MAX)) return 0;
  __atomic_add_fetch(&g_packets, 1, __ATOMIC_RELAXED);
  return 1;
}

static void destroy(void* self) { free(self); }

static void* create(const nmad_strategy_engine_v1* engine, nmad_strategy_ops_v1* ops) {
  if (engine->version != 1 || engine->size < sizeof(nmad_strategy_engine_v1)) return NULL;
  g_engine = engine;
  ops->build_packet = &build;
  ops->destroy = &destroy;
  return malloc(1);
}

NMAD_STRATEGY_EXPORT const nmad_strategy_descriptor_v1 nmad_strategy_plugin = {
    1, sizeof(nmad_strategy_descriptor_v1), "test_v1", "test plugin (interface version 1): oldest chunk", &create};
__attribute__((visibility("default"))) unsigned long test_plugin_packets(void) {
  return __atomic_load_n(&g_packets, __ATOMIC_RELAXED);
}
