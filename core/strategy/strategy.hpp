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
#include "core/transfer/driver.hpp"
#include "core/transfer/packet_builder.hpp"

namespace nmad {

// What the transfer layer tells a strategy about the track it asks for.
struct track_view {
  std::uint32_t rail = 0;         // the track's index in its gate
  const driver_caps* caps = nullptr;
  std::uint32_t outstanding = 0;  // operations posted and not completed
  bool just_sent = false;         // an inline send left since the engine last polled
  driver* drv = nullptr;
  connection_id conn = invalid_connection;
  // Whether the driver still holds bytes the peer has not taken (asks it).
  bool backlog() const { return drv && drv->backlog(conn); }
};

class strategy {
 public:
  virtual ~strategy() = default;
  virtual std::string_view name() const = 0;
  virtual bool build_packet(collect_list& queue, packet_builder& out) = 0;
  // The same, told which track the packet is for (its rail index and
  // driver capabilities: a gate may have several). Default: the above.
  virtual bool build_packet(collect_list& queue, packet_builder& out, const track_view& t) {
    return build_packet(queue, out);
  }
  // The inline path (session_impl::send_inline): whether a small message
  // may skip the collect list and go straight to the driver, when nothing
  // is queued for the gate. Default: yes, there is nothing to aggregate or
  // reorder it with. A strategy that aggregates answers no while the track
  // is busy, so that a burst accumulates in the collect list.
  virtual bool allow_inline(const track_view& t) const { return true; }
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
