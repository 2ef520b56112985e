// `split_balance`: for gates of several tracks. Small messages go on the
// lowest-latency track that has room (another track holds them rather
// than take them: the engine asks every track in turn, and overrules a
// hold when all are idle); rendezvous data is split over the tracks in
// proportion to their bandwidths (driver_caps), a track still busy being
// charged its predicted release time. With one track it is aggreg.
#include "core/strategy/builtin.hpp"

namespace nmad {
namespace {

class strategy_split_balance final : public strategy {
 public:
  std::string_view name() const override { return "split_balance"; }
  bool allow_inline(const track_view& t) const override { return tactics::quiet_track(t); }
  bool build_packet(collect_list& queue, packet_builder& out) override { return tactics::aggregate(queue, out); }
  bool build_packet(collect_list& queue, packet_builder& out, const track_view& t,
                    std::span<const track_view> tracks) override {
    if (tracks.size() > 1) {
      const track_view* best = tactics::lowest_latency_with_room(tracks);
      if (best && best->rail != t.rail && best->caps && t.caps && best->caps->latency_us < t.caps->latency_us) {
        // Only small eager chunks are steered; anything else takes the
        // first track with room.
        const tactics::window_summary w = tactics::summarize(queue, 4096);
        if (w.all_small_data) return false;
      }
    }
    return tactics::aggregate(queue, out);
  }
  std::uint32_t choose_rdv_track(const rdv_range&, std::span<const track_view> tracks,
                                 std::uint64_t& len) override {
    return tactics::balance_by_bandwidth(tracks, len);
  }
};

}  // namespace

std::unique_ptr<strategy> make_strategy_split_balance() { return std::make_unique<strategy_split_balance>(); }

}  // namespace nmad
