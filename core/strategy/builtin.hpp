#pragma once
// Private: factories of the built-in strategies, listed in registry.cpp.
// Each is written on the tactics of tactics.hpp.
#include "core/protocol/wire.hpp"
#include "core/strategy/strategy.hpp"
#include "core/strategy/tactics.hpp"

namespace nmad {
std::unique_ptr<strategy> make_strategy_default();
std::unique_ptr<strategy> make_strategy_aggreg();
std::unique_ptr<strategy> make_strategy_aggreg_autoextended();
std::unique_ptr<strategy> make_strategy_prio();
std::unique_ptr<strategy> make_strategy_split_balance();
}  // namespace nmad
