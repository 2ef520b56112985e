#pragma once
// A track is one driver connection of a gate. The transfer layer keeps at
// most `window` operations posted on it (one in flight, one prepared
// ahead); while it is full, new sends wait on the gate's collect list where
// the strategy can still aggregate or reorder them.
//
// Locking: `lock` (the track lock) guards the send list: outstanding,
// retry, in_flight and inline_round. It is taken after its gate's lock
// when both are needed (see LOCK ORDER in core/session_impl.hpp).
// `connected` and `conn` are written under the gate and track locks and
// read without them (connected is atomic, conn is published before it).
#include <cstdint>

#include "core/common/engine_mutex.hpp"

#include "core/transfer/driver.hpp"
#include "core/transfer/packet_wrapper.hpp"

namespace nmad {

struct driver_slot;

struct track {
  driver_slot* slot = nullptr;
  connection_id conn = invalid_connection;
  std::uint32_t rail = 0;
  std::uint32_t window = 2;
  const driver_caps* caps = nullptr;   // the driver's (stable once opened)
  std::size_t max_inline = 0;          // caps->max_inline
  domain_mutex lock;                   // the track lock (see above)
  std::uint32_t outstanding = 0;       // posted, not yet completed
  std::uint64_t bytes_in_flight = 0;   // their bytes
  // Copies of the two above for the strategy asking about the gate's other
  // tracks (read without their lock: hints), and the rendezvous bytes this
  // side asked the peer to send on this track and has not received yet
  // (updated under the matching lock).
  copyable_atomic<std::uint32_t> outstanding_hint{0};
  copyable_atomic<std::uint64_t> bytes_hint{0};
  copyable_atomic<std::uint64_t> incoming{0};
  copyable_atomic<bool> connected{false};
  unsigned inline_round = ~0u;         // progress round of the last inline send
  packet_wrapper* retry = nullptr;     // refused with `retry`, posted first
  track_wrapper_list in_flight;        // to reclaim them if the peer fails
};

}  // namespace nmad
