// `prio`: priority classes. Each packet is filled with the chunk of
// highest priority that is first of its (peer, tag) flow (control answers
// first, then send_options::priority, then age): a latency-critical
// message overtakes bulk traffic of other tags, never an earlier message
// of its own tag. Small messages skip the queue only on a quiet track, so
// a priority message submitted during a burst competes in the queue.
#include "core/strategy/builtin.hpp"

namespace nmad {
namespace {

class strategy_prio final : public strategy {
 public:
  std::string_view name() const override { return "prio"; }
  bool allow_inline(const track_view& t) const override { return tactics::quiet_track(t); }
  // A chunk above priority 0 was queued: the picks look at the whole
  // queue (however deep the bulk in front of it) until none is left;
  // otherwise at its first 64 entries.
  void on_submit(collect_list&, chunk_entry& e) override {
    if (e.priority > 0) _urgent = true;
  }
  bool build_packet(collect_list& queue, packet_builder& out) override {
    const bool added = tactics::aggregate_by_priority(queue, out, _urgent ? ~std::size_t{0} : 64);
    if (_urgent) _urgent = tactics::any_priority(queue);
    return added;
  }

 private:
  bool _urgent = false;
};

}  // namespace

std::unique_ptr<strategy> make_strategy_prio() { return std::make_unique<strategy_prio>(); }

}  // namespace nmad
