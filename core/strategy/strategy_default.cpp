// `default`: one chunk per packet, in submission order. The baseline every
// other strategy is measured against.
#include <algorithm>

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
  const bool rest = _rdv_piece > 0 && r.tag == _rdv_tag && r.seq == _rdv_seq && r.offset == _rdv_end;
  std::uint64_t piece = rest ? std::min(len, _rdv_piece) : len;
  // The rest of a range already cut: the same piece size, never cut again.
  const std::uint32_t rail =
      tactics::rotate_equal(tracks, _next_rdv_rail, piece, rest ? ~std::uint64_t{0} : 256 * 1024);
  if (!rest) _rdv_piece = piece < len ? piece : 0;
  _rdv_tag = r.tag;
  _rdv_seq = r.seq;
  _rdv_end = r.offset + piece;
  len = piece;
  return rail;
}

}  // namespace nmad
