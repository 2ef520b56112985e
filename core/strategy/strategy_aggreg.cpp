// `aggreg`: packs as many queued chunks as fit into one packet, in
// submission order, up to the track's packet limit. Messages above the
// rendezvous threshold travel as (small) rendezvous requests, so they
// aggregate too; their bulk data goes separately.
#include "core/strategy/builtin.hpp"

namespace nmad {
namespace {

class strategy_aggreg final : public strategy {
 public:
  std::string_view name() const override { return "aggreg"; }
  // Inline only on a quiet track: once a packet is on its way, later sends
  // wait in the collect list and leave together.
  bool allow_inline(const track_view& t) const override { return tactics::quiet_track(t); }
  bool build_packet(collect_list& queue, packet_builder& out) override { return tactics::aggregate(queue, out); }
};

}  // namespace

std::unique_ptr<strategy> make_strategy_aggreg() { return std::make_unique<strategy_aggreg>(); }

}  // namespace nmad
