// `aggreg_autoextended`: aggreg that keeps its aggregate open. While the
// track still has a packet outstanding and only small eager chunks wait,
// it holds them (builds nothing) so that more small packs join the same
// packet; the aggregate leaves when the track goes idle (the outstanding
// packet completed: the engine asks again), when it reaches the size
// limit, when a chunk is not small (rendezvous, large data, control),
// when an express piece comes (its receiver waits for it), or on a flush
// (the end of a packed message).
#include "core/strategy/builtin.hpp"

namespace nmad {
namespace {

class strategy_aggreg_autoextended final : public strategy {
 public:
  static constexpr std::uint64_t kSmall = 1024;        // "small pack" (bytes)
  static constexpr std::uint64_t kLimit = 16 * 1024;   // close the aggregate here

  std::string_view name() const override { return "aggreg_autoextended"; }
  bool allow_inline(const track_view& t) const override { return tactics::quiet_track(t); }
  void on_submit(collect_list&, chunk_entry& e) override {
    if (e.hints & chunk_hint::express) _flush = true;
  }
  void flush() override { _flush = true; }

  bool build_packet(collect_list& queue, packet_builder& out) override {
    return emit(queue, out);
  }
  bool build_packet(collect_list& queue, packet_builder& out, const track_view& t) override {
    if (!_flush && t.outstanding > 0) {
      const tactics::window_summary w = tactics::summarize(queue, kSmall);
      if (w.all_small_data && !w.any_express && w.wire_bytes < std::min<std::uint64_t>(kLimit, out.room()))
        return false;  // hold: the completion of the outstanding packet asks again
    }
    return emit(queue, out);
  }

 private:
  bool emit(collect_list& queue, packet_builder& out) {
    const bool added = tactics::aggregate(queue, out);
    if (queue.empty()) _flush = false;
    return added;
  }
  bool _flush = false;
};

}  // namespace

std::unique_ptr<strategy> make_strategy_aggreg_autoextended() {
  return std::make_unique<strategy_aggreg_autoextended>();
}

}  // namespace nmad
