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
#include <atomic>
#include <bit>
#include <cstdint>

#include "core/common/engine_mutex.hpp"

#include "core/transfer/driver.hpp"
#include "core/transfer/packet_wrapper.hpp"

namespace nmad {

struct driver_slot;

// A statistics counter with one writer at a time (the holder of the lock
// guarding it) and readers anywhere: a relaxed load and store, no
// read-modify-write on the message path.
class stat_counter {
 public:
  stat_counter() = default;
  stat_counter(const stat_counter& o) : _v(o.get()) {}
  stat_counter& operator=(const stat_counter& o) {
    _v.store(o.get(), std::memory_order_relaxed);
    return *this;
  }
  void add(std::uint64_t n = 1) { _v.store(_v.load(std::memory_order_relaxed) + n, std::memory_order_relaxed); }
  void raise_to(std::uint64_t n) {
    if (n > get()) _v.store(n, std::memory_order_relaxed);
  }
  std::uint64_t get() const { return _v.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> _v{0};
};

// What a track sent (NMAD_STATS, session::peer_stats), under the track
// lock. Small messages sent inline count only `inline_sends` and
// `inline_bytes` (one chunk per packet each): the readers add them in.
struct track_counters {
  stat_counter packets, chunks, chunks_max, bytes, rdv_transfers, rdv_bytes;
  stat_counter inline_sends, inline_bytes;
  stat_counter chunks_histogram[8];  // packets of 1, 2, 3-4, ..., 65+ chunks
  stat_counter idle_ns;
  // Since when the track has had nothing posted while work for it was
  // queued (steady-clock ns; 0: it has not). Timestamps are taken only
  // when that state begins or ends.
  std::int64_t starved_since = 0;

  void count_packet(std::uint64_t nchunks, std::uint64_t len) {
    packets.add();
    chunks.add(nchunks);
    bytes.add(len);
    chunks_max.raise_to(nchunks);
    const unsigned bucket = nchunks <= 1 ? 0u : static_cast<unsigned>(std::bit_width(nchunks - 1));
    chunks_histogram[bucket < 7 ? bucket : 7].add();
  }
};

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
  track_counters stats;                // what it sent (under the track lock)
};

}  // namespace nmad
