#include <array>

#include "core/strategy/builtin.hpp"

namespace nmad {
namespace {
constexpr std::array<strategy_descriptor, 5> kStrategies{{
    {"default", "one chunk per packet, submission order", &make_strategy_default},
    {"aggreg", "aggregate queued chunks up to the packet limit", &make_strategy_aggreg},
    {"aggreg_autoextended", "aggreg that keeps the aggregate open while small packs arrive on a busy track",
     &make_strategy_aggreg_autoextended},
    {"prio", "highest priority first across tags, submission order within a tag", &make_strategy_prio},
    {"split_balance", "small messages on the fastest track, rendezvous split by bandwidth",
     &make_strategy_split_balance},
}};
}  // namespace

std::span<const strategy_descriptor> strategy_registry() { return kStrategies; }

const strategy_descriptor* find_strategy(std::string_view name) {
  for (const auto& d : kStrategies)
    if (d.name == name) return &d;
  return nullptr;
}

}  // namespace nmad
