#pragma once
// A gate is this process's connection to one peer: its tracks (one per
// driver the peer is reachable through), its collect list and strategy on
// the send side, and its matching state on the receive side.
//
// Locking (see LOCK ORDER in core/session_impl.hpp): the send side
// (collect list, sequence counters, rendezvous bookkeeping, the strategy,
// the pools of entries and wrappers) is guarded by `lock`, the gate lock;
// the receive side by the session's matching lock; each track's send list
// by the track's own lock. `failed` is atomic: read anywhere, set once by
// session_impl::fail_gate (fail_reason is written before it).
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/collect/chunk_entry.hpp"
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

// Bulk data negotiated by a ready-to-receive, waiting for a track.
struct data_send {
  chunk_entry* entry;
  std::uint64_t cookie;   // receiver's data cookie
  std::uint64_t offset;   // absolute offset in the message
  std::uint64_t len;
  std::uint32_t rail;
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

// Sequence counters of one direction of a gate: a fixed table of
// kSeqBuckets counters, an ordering domain (tag & ordering mask) using the
// counter its hash selects, so that many distinct tags cost no memory.
// Domains that share a counter are ordered together; that never makes a
// message wait for a *receive*: the receiver only re-orders arrivals (a
// chunk waits for earlier chunks that are already on their way, see
// session_impl::find_message), and a message's sequence number is taken
// when its first piece is queued (pack: at the first queued piece, not at
// pack_begin), so every earlier number is already being sent. Both sides
// use the same table size and hash (a protocol constant).
struct seq_table {
  static constexpr std::size_t kSeqBuckets = 256;
  static std::size_t bucket(std::uint64_t domain) {
    std::uint64_t h = domain * 0x9e3779b97f4a7c15ULL;
    return static_cast<std::size_t>(h >> 56);  // top 8 bits: kSeqBuckets = 256
  }
  std::uint32_t& get(std::uint64_t domain) { return counters[bucket(domain)]; }
  std::uint32_t counters[kSeqBuckets] = {};
};
static_assert(seq_table::kSeqBuckets == 256, "bucket() takes the hash's top 8 bits");

// A free list that only allocates when it grows (not thread-safe: each
// pool lives under one lock).
template <typename T>
class object_pool {
 public:
  object_pool() = default;
  object_pool(const object_pool&) = delete;
  object_pool& operator=(const object_pool&) = delete;
  ~object_pool() {
    for (T* p : _free) delete p;
  }
  T* get() {
    if (_free.empty()) return new T();
    T* p = _free.back();
    _free.pop_back();
    return p;
  }
  void put(T* p) { _free.push_back(p); }

 private:
  std::vector<T*> _free;
};

class gate {
 public:
  int rank = -1;
  std::vector<track> tracks;  // sized once at set-up, never resized
  std::atomic<bool> failed{false};
  std::string fail_reason;    // written once, before `failed` turns true
  bool fail_queued = false;   // fail_gate ran (session's pending lock)
  bool cleaned_up = false;    // clean_up_failed ran (matching lock)

  std::size_t rdv_threshold = 1;  // messages this long and up: rendezvous (set-up)

  // Send side: under `lock`.
  domain_mutex lock;
  std::unique_ptr<strategy> strat;
  object_pool<chunk_entry> entry_pool;      // control chunks, pack pieces
  object_pool<packet_wrapper> wrapper_pool;
  collect_list collect;
  seq_table send_seq;                                          // domain -> next
  std::unordered_map<std::uint64_t, chunk_entry*> rdv_out;     // cookie -> entry
  std::deque<data_send> data_out;
  std::uint64_t next_cookie = 1;
  // Flow control, send side (see "Credits" in core/protocol/wire.hpp and
  // core/session_flow.cpp): credit charged by what was sent so far, and
  // the most the peer allows. The self gate is not flow-controlled.
  std::uint64_t tx_spent = 0;
  std::uint64_t tx_limit = wire::initial_credit;
  // Messages waiting for credit, unnumbered, in queue order: the first
  // entry of each (and the later pieces of a packed one behind it). The
  // receiver has seen nothing of them; they cost it nothing.
  collect_list held;
  std::uint64_t next_queue_order = 1;
  std::size_t held_pieces = 0;        // entries on `held` that open no message
  // Held first entries by tag, each in queue order (a want for one tag
  // finds its message without walking the whole queue).
  std::unordered_map<std::uint64_t, std::deque<chunk_entry*>> held_by_tag;
  // Receives the peer waits for (want chunks), by stamp: offered = an
  // offer for it is out; probe = release up to the first match instead.
  struct want {
    std::uint64_t stamp, tag, mask;
    bool offered;
    bool probe;
  };
  std::vector<want> wants;
  // Held messages offered and not answered yet: nothing behind the first
  // of them is admitted meanwhile (a declined one goes back to its place).
  std::vector<chunk_entry*> offered;
  stat_counter rdv_requests;    // rendezvous sends queued (statistics)
  // Copy offload: a progress task will schedule this gate (see
  // session_impl::offload_schedule); `owner` is the session it belongs to.
  std::atomic<bool> offload_queued{false};
  session_impl* owner = nullptr;

  // Receive side: under the session's matching lock.
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
  bool flow_control = false;  // false: the self gate
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
  // driver was busy (another thread polled it): asked again by the session's
  // pending work (session_impl::flush_pending).
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
