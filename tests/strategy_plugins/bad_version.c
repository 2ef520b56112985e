/* A plugin claiming an interface version this engine does not know. */
#include "api/nmad/strategy_plugin.h"

static void* create(const nmad_strategy_engine_v2* engine, nmad_strategy_ops_v2* ops) {
  (void)engine;
  (void)ops;
  return 0;
}

NMAD_STRATEGY_EXPORT const nmad_strategy_descriptor_v2 nmad_strategy_plugin = {
    99, sizeof(nmad_strategy_descriptor_v2), "bad_version", "from the future", &create};
