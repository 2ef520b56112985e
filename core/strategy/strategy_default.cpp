// `default`: one chunk per packet, in submission order. The baseline every
// other strategy is measured against.
#include "core/strategy/builtin.hpp"

namespace nmad {
namespace {

class strategy_default final : public strategy {
 public:
  std::string_view name() const override { return "default"; }
  bool build_packet(collect_list& queue, packet_builder& out) override { return tactics::take_oldest(queue, out); }
};

}  // namespace

std::unique_ptr<strategy> make_strategy_default() { return std::make_unique<strategy_default>(); }

// The default rendezvous rail choice of every strategy.
std::uint32_t strategy::choose_rdv_track(const rdv_range& r, std::span<const track_view> tracks,
                                         std::uint64_t& len) {
  return tactics::rotate_equal(tracks, _next_rdv_rail, len);
}

}  // namespace nmad
