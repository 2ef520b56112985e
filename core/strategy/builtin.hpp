#pragma once
// Private: factories of the built-in strategies, listed in registry.cpp.
#include "core/protocol/wire.hpp"
#include "core/strategy/strategy.hpp"

namespace nmad {
std::unique_ptr<strategy> make_strategy_default();
std::unique_ptr<strategy> make_strategy_aggreg();
}  // namespace nmad
