#pragma once
// A gate is this process's connection to one peer: its tracks (one per
// driver the peer is reachable through, core/transfer/), its send side
// (collect list, sequence numbers, credit, strategy: send_side,
// core/collect/) and its matching state on the receive side (the receive
// path's, core/receive/).
//
// Locking (see LOCK ORDER in core/session_impl.hpp): the send side
// (collect list, sequence counters, rendezvous bookkeeping, the strategy,
// the pools of entries and wrappers) is guarded by `lock`, the gate lock;
// the receive side by the receive path's matching lock; each track's
// send list by the track's own lock. `failed` is atomic: read anywhere, set
// once by session_impl::fail_gate (fail_reason is written before it).
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/collect/chunk_entry.hpp"
#include "core/collect/send_side.hpp"
#include "core/common/engine_mutex.hpp"
#include "core/protocol/wire.hpp"
#include "core/request.hpp"
#include "core/strategy/strategy.hpp"
#include "core/transfer/track.hpp"

namespace nmad {

class session_impl;

// Key of one message within a gate.
struct message_key {
  std::uint64_t tag;
  std::uint32_t seq;
  bool operator==(const message_key&) const = default;
};
struct message_key_hash {
  std::size_t operator()(const message_key& k) const noexcept {
    return std::hash<std::uint64_t>()(k.tag * 0x9e3779b97f4a7c15ULL ^ k.seq);
  }
};

// A posted bulk-data receive (token of driver::post_recv_data).
struct rdv_recv {
  gate* owner;
  request_state* req;
  std::uint64_t cookie;
  std::uint64_t offset;
  std::uint64_t len;
  std::vector<iovec> iov;
  bool pulled = false;            // post_get: tell the sender once it is in
  std::uint32_t rail = 0;         // track it was asked for on (pushed data)
  std::uint64_t sender_cookie = 0;
};

// A chunk that arrived before its message could be matched in order.
struct early_chunk {
  wire::chunk_header header;
  std::vector<std::byte> payload;
};

class gate : public send_side {
 public:
  int rank = -1;
  std::vector<track> tracks;  // sized once at set-up, never resized
  std::atomic<bool> failed{false};
  std::string fail_reason;    // written once, before `failed` turns true
  bool fail_queued = false;   // fail_gate ran (session's pending lock)
  bool cleaned_up = false;    // clean_up_failed ran (matching lock)
  // The failure the peer gave as the reason it ends its connections (a
  // failure_notice: a rank, or -1), and whether ours to it left.
  std::atomic<int> cause_reported{-1};
  std::atomic<bool> notice_sent{false};

  // Messages this long and up: rendezvous. Set at set-up, changed at run
  // time by session::set_rdv_threshold (MPI_T_cvar_write): read once per
  // message (relaxed), so a message sees one value or the other.
  std::atomic<std::size_t> rdv_threshold{1};
  std::size_t rdv_limit() const { return rdv_threshold.load(std::memory_order_relaxed); }

  // Send side (send_side, core/collect/): under `lock`.
  domain_mutex lock;
  // Copy offload: a progress task will schedule this gate (see
  // session_impl::offload_schedule); `owner` is the session it belongs to.
  std::atomic<bool> offload_queued{false};
  session_impl* owner = nullptr;

  // Receive side (core/receive/receive_path.hpp): under the matching lock.
  seq_table recv_seq;                                          // domain -> expected
  // Messages whose chunks are still arriving (one that comes whole in a
  // single chunk is never entered).
  std::unordered_map<message_key, message_state*, message_key_hash> active;
  std::vector<early_chunk> early;
  std::unordered_map<std::uint64_t, rdv_recv*> rdv_in;         // cookie -> recv
  std::uint64_t next_recv_cookie = 1;
  bool draining_early = false;
  // Flow control, receive side: this process's window for the peer (what
  // it accepts to buffer unexpectedly, set-up), the credit the peer's
  // chunks charged, how much of it left our buffers, and the extra credit
  // announced to the peer so far (cumulative).
  std::uint64_t rx_window = wire::initial_credit;
  std::uint64_t rx_charged = 0;
  std::uint64_t rx_released = 0;
  std::uint64_t rx_granted = 0;
  // Half the window or more is held here: the peer may be holding
  // messages back, so posted receives for it send wants (cleared below a
  // quarter). probe_wants: the probe patterns (tag, mask) wanted meanwhile,
  // until a message they match arrives.
  bool rx_starved = false;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> probe_wants;
  // Matched receives whose rendezvous could not be asked for because a
  // driver was busy (another thread polled it): asked again from the
  // session's pending work (receive_path::retry_asks).
  std::vector<request_state*> ask_again;
  // Matched receives (unpack) with rendezvous pieces waiting for the next
  // unpack to give them room: failed with the gate (nothing else refers to
  // them until then).
  std::vector<request_state*> unpack_waiting;

  // Gate and track locks held.
  bool idle() const {
    if (!collect.empty() || !data_out.empty() || !held.empty()) return false;
    for (const auto& t : tracks)
      if (t.outstanding > 0 || t.retry) return false;
    return true;
  }
};

}  // namespace nmad
