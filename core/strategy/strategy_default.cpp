// `default`: one chunk per packet, in submission order. The baseline every
// other strategy is measured against.
#include "core/strategy/builtin.hpp"

namespace nmad {
namespace {

class strategy_default final : public strategy {
 public:
  std::string_view name() const override { return "default"; }
  bool build_packet(collect_list& queue, packet_builder& out) override {
    if (queue.empty()) return false;
    return out.add(queue, queue.front());
  }
};

}  // namespace

std::unique_ptr<strategy> make_strategy_default() { return std::make_unique<strategy_default>(); }

}  // namespace nmad
