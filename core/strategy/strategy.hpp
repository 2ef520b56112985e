#pragma once
// The strategy layer: how queued chunks become packets.
//
// When a track of a gate can take one more packet (it has fewer than two
// operations in flight: one on the wire, one prepared ahead), the transfer
// layer hands the gate's strategy the gate's collect list (oldest entry
// first) and an empty packet_builder for that track. The strategy picks
// entries — in order or not, whole or a prefix of a data entry — and adds
// them through the builder, which enforces the track's limits. Whatever it
// leaves on the list waits for the next idle moment of a track: that window
// of pending entries is what a strategy optimises.
//
// Contract for build_packet():
//   * called with the session lock held; must not block or call the engine;
//   * may only touch `queue` and `out` (entries belong to the engine: a
//     strategy never frees, copies or keeps pointers to them across calls);
//   * must add at least one entry if `queue` is not empty and returns true
//     exactly when it added something (otherwise the track would stall);
//   * rendezvous (bulk data answering a ready-to-receive) is scheduled by
//     the transfer layer itself, before asking the strategy.
// One strategy instance exists per gate, so per-peer state is allowed.
#include <memory>
#include <span>
#include <string_view>

#include "core/collect/chunk_entry.hpp"
#include "core/transfer/packet_builder.hpp"

namespace nmad {

class strategy {
 public:
  virtual ~strategy() = default;
  virtual std::string_view name() const = 0;
  virtual bool build_packet(collect_list& queue, packet_builder& out) = 0;
};

// The explicit list of built-in strategies (core/strategy/registry.cpp).
struct strategy_descriptor {
  std::string_view name;
  std::string_view description;
  std::unique_ptr<strategy> (*create)();
};
std::span<const strategy_descriptor> strategy_registry();
const strategy_descriptor* find_strategy(std::string_view name);

}  // namespace nmad
