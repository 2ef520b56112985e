/* A shared object without the descriptor symbol (it misspells it). */
#include "api/nmad/strategy_plugin.h"

NMAD_STRATEGY_EXPORT const int nmad_strategy_plugn = 2;
