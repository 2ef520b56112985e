#include <array>

#include "core/strategy/builtin.hpp"

namespace nmad {
namespace {
constexpr std::array<strategy_descriptor, 2> kStrategies{{
    {"default", "one chunk per packet, submission order", &make_strategy_default},
    {"aggreg", "aggregate queued chunks up to the packet limit", &make_strategy_aggreg},
}};
}  // namespace

std::span<const strategy_descriptor> strategy_registry() { return kStrategies; }

const strategy_descriptor* find_strategy(std::string_view name) {
  for (const auto& d : kStrategies)
    if (d.name == name) return &d;
  return nullptr;
}

}  // namespace nmad
