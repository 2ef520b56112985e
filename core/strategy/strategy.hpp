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
//   * called with the gate's lock held (and the track's); must not block or
//     call the engine;
//   * may only touch `queue` and `out` (entries belong to the engine: a
//     strategy never frees, copies or keeps pointers to them across calls);
//   * returns true exactly when it added something. Adding nothing while
//     chunks are queued is a *hold* (keep an aggregate open): allowed while
//     a track of the gate has operations outstanding; when every track is
//     idle the engine overrules it (sends the oldest chunk itself), so no
//     strategy can stall a gate;
//   * rendezvous data (answering a ready-to-receive) is posted by the
//     transfer layer itself, before asking the strategy, on the track the
//     receiver's strategy chose (choose_rdv_track).
// One strategy instance exists per gate, so per-peer state is allowed.
// Strategies from outside the engine use the C interface of
// api/nmad/strategy_plugin.h, adapted to this class by plugin.cpp.
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/collect/chunk_entry.hpp"
#include "core/transfer/driver.hpp"
#include "core/transfer/packet_builder.hpp"

namespace nmad {

// What the transfer layer tells a strategy about a track.
struct track_view {
  std::uint32_t rail = 0;         // the track's index in its gate
  const driver_caps* caps = nullptr;
  std::uint32_t outstanding = 0;  // operations posted and not completed
  bool just_sent = false;         // an inline send left since the engine last polled
  driver* drv = nullptr;
  connection_id conn = invalid_connection;
  std::uint64_t bytes_in_flight = 0;  // bytes of the outstanding operations
  std::uint64_t incoming = 0;     // rendezvous bytes this side asked for on it, not in yet
  std::uint32_t window = 2;       // operations it may have posted at once
  bool connected = true;
  std::uint32_t round = 0;        // the engine's progress round now (chunk ages:
                                  // round - chunk_entry::queued_round)
  // Whether the driver still holds bytes the peer has not taken (asks it:
  // only from build_packet/allow_inline of this very track).
  bool backlog() const { return drv && drv->backlog(conn); }
  bool idle() const { return outstanding == 0; }
  bool has_room() const { return outstanding < window; }
};

// A rendezvous range the receiver is about to ask for (choose_rdv_track).
struct rdv_range {
  std::uint64_t tag = 0;
  std::uint32_t seq = 0;
  std::uint64_t offset = 0;
  std::uint64_t len = 0;
};

// Hooks, all called with the gate lock held (one call at a time per
// instance), none may block or enter the engine:
//   build_packet      fill `out` for track `t` from `queue` (see the contract
//                     above). `tracks` are all the gate's tracks (t among
//                     them; the others' figures are hints read without their
//                     locks). Returning false with chunks queued is a *hold*:
//                     allowed while some track of the gate has operations
//                     outstanding (their completion asks again); when every
//                     track is idle the engine overrules a hold and sends the
//                     oldest chunk itself, so a strategy can never stall a gate.
//   on_submit         chunk `e` was just queued (a message or a packed piece).
//   choose_rdv_track  receiver side: the rail that carries the next part of a
//                     rendezvous range; may shorten `len` (the rest comes back
//                     in the next call). Default: ranges of 256 KiB and up cut in
//                     equal pieces over the connected tracks, in turn.
//   allow_inline      may a small message skip the queue (scheduler::send_inline)?
//   flush             send what is held now (the end of a packed message).
class strategy {
 public:
  virtual ~strategy() = default;
  virtual std::string_view name() const = 0;
  virtual bool build_packet(collect_list& queue, packet_builder& out) = 0;
  virtual bool build_packet(collect_list& queue, packet_builder& out, const track_view& t) {
    return build_packet(queue, out);
  }
  virtual bool build_packet(collect_list& queue, packet_builder& out, const track_view& t,
                            std::span<const track_view> tracks) {
    return build_packet(queue, out, t);
  }
  virtual void on_submit(collect_list& queue, chunk_entry& e) {}
  virtual std::uint32_t choose_rdv_track(const rdv_range& r, std::span<const track_view> tracks,
                                         std::uint64_t& len);
  // The inline path (scheduler::send_inline): whether a small message
  // may skip the collect list and go straight to the driver, when nothing
  // is queued for the gate. Default: yes, there is nothing to aggregate or
  // reorder it with. A strategy that aggregates answers no while the track
  // is busy, so that a burst accumulates in the collect list.
  virtual bool allow_inline(const track_view& t) const { return true; }
  virtual void flush() {}

 protected:
  std::uint32_t _next_rdv_rail = 0;  // the default rendezvous rotation
  // The range being cut by the default choice: its rest comes back piece by
  // piece (offset = where the last piece ended) and keeps the first piece's
  // size, so a range is cut in equal pieces, not halved again and again.
  std::uint64_t _rdv_tag = 0, _rdv_end = 0, _rdv_piece = 0;
  std::uint32_t _rdv_seq = 0;
};

// The explicit list of built-in strategies (core/strategy/registry.cpp).
struct strategy_descriptor {
  std::string_view name;
  std::string_view description;
  std::unique_ptr<strategy> (*create)();
};
std::span<const strategy_descriptor> strategy_registry();
const strategy_descriptor* find_strategy(std::string_view name);

// Any strategy by what NMAD_STRATEGY says: a built-in name, a name
// registered in-process (nmad_strategy_register), a plugin found as
// libnmad_strategy_<name>.so in NMAD_STRATEGY_PATH then the installed
// plugin directory, or the path of a shared object (contains a '/').
// Throws std::runtime_error naming what was wrong (file, symbol, versions).
class strategy_source {
 public:
  virtual ~strategy_source() = default;
  virtual std::string_view name() const = 0;
  virtual std::unique_ptr<strategy> create() const = 0;  // throws on failure
};
std::shared_ptr<const strategy_source> resolve_strategy(std::string_view selector);

// Every strategy nmad-info can list: built-ins, registered ones and the
// plugins of the plugin directories (those that fail to load are listed
// with the reason).
struct strategy_listing {
  std::string name;
  std::string origin;       // "built-in", "registered", or the file
  unsigned interface_version = 0;  // 0 for built-ins (C++ interface)
  std::string description;  // or the error
  bool ok = true;
};
std::vector<strategy_listing> list_strategies();
// The directories searched for plugins by name, in order.
std::vector<std::string> strategy_plugin_dirs();

}  // namespace nmad
