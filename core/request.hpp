#pragma once
// Engine-side state of a request. It lives inside the opaque storage of
// the application's nmad::request (constructed by request's constructor in
// core/api.cpp, so starting a request never allocates); the engine reaches
// it only through state_of(request&), and from the state back through
// `owner`. A request is either a send (one message made of one or more
// pieces queued on a gate's collect list) or a receive (a posted match
// pattern, then the state of the message it matched).
#include <atomic>
#include <boost/intrusive/list.hpp>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <vector>

#include "api/nmad/nmad.hpp"
#include "core/collect/chunk_entry.hpp"
#include "core/common/errc.hpp"

namespace nmad {

class gate;
class request;
class session_impl;

// One destination range of a receive (irecv: one; unpack: one per unpack).
struct segment {
  std::byte* ptr = nullptr;
  std::uint64_t len = 0;
  std::uint64_t received = 0;  // bytes of this segment already written
};

// A list of segments that does not allocate for the common case (1-2).
class segment_list {
 public:
  std::size_t size() const { return _count; }
  segment& operator[](std::size_t i) { return i < kInline ? _inline[i] : _spill[i - kInline]; }
  const segment& operator[](std::size_t i) const {
    return i < kInline ? _inline[i] : _spill[i - kInline];
  }
  void push_back(const segment& s) {
    if (_count < kInline) _inline[_count] = s; else _spill.push_back(s);
    ++_count;
  }
  void clear() { _count = 0; _spill.clear(); }

 private:
  static constexpr std::size_t kInline = 2;
  segment _inline[kInline];
  std::vector<segment> _spill;
  std::size_t _count = 0;
};

// A copy of some bytes: up to kInline of them inside the object (a small
// eager message kept unexpected costs no allocation), more on the heap.
class kept_bytes {
 public:
  static constexpr std::size_t kInline = 32;
  kept_bytes() = default;
  explicit kept_bytes(std::span<const std::byte> b) : _size(b.size()) {
    std::byte* p = _inline;
    if (_size > kInline) {
      _heap.reset(new std::byte[_size]);
      p = _heap.get();
    }
    if (_size) std::memcpy(p, b.data(), _size);
  }
  kept_bytes(kept_bytes&& o) noexcept : _heap(std::move(o._heap)), _size(o._size) {
    if (!_heap && _size) std::memcpy(_inline, o._inline, _size);
    o._size = 0;
  }
  kept_bytes& operator=(kept_bytes&& o) noexcept {
    if (this != &o) {
      _heap = std::move(o._heap);
      _size = o._size;
      if (!_heap && _size) std::memcpy(_inline, o._inline, _size);
      o._size = 0;
    }
    return *this;
  }
  std::size_t size() const { return _size; }
  const std::byte* data() const { return _heap ? _heap.get() : _inline; }
  operator std::span<const std::byte>() const { return {data(), _size}; }

 private:
  std::unique_ptr<std::byte[]> _heap;
  std::size_t _size = 0;
  std::byte _inline[kInline];
};

// Eager bytes that arrived before a destination for them was posted.
struct buffered_bytes {
  std::uint64_t offset;
  kept_bytes bytes;
};
using buffered_list = std::vector<buffered_bytes>;
// A rendezvous range announced by the sender, not yet asked for.
struct pending_rdv {
  std::uint64_t sender_cookie;
  std::uint64_t offset;
  std::uint64_t len;
  bool pullable = false;
  std::uint64_t pull_base = 0;  // sender's address of message offset 0 (mod 2^64)
  std::uint32_t pull_key = 0;   // the sender driver's key for post_get (driver::expose)
};
using rdv_list = std::vector<pending_rdv>;

// Receiver-side state of one incoming message (matched or unexpected).
struct request_state;
struct unexpected_message;

struct message_state {
  static constexpr std::uint64_t unknown = ~std::uint64_t{0};
  request_state* req = nullptr;            // the receive it matched, if any
  unexpected_message* unexpected = nullptr;  // else: its unexpected entry
  int source = -1;
  std::uint64_t tag = 0;
  std::uint32_t seq = 0;
  std::uint64_t total = unknown;   // known from msg_len or the last chunk
  std::uint64_t accounted = 0;     // bytes placed, buffered or discarded
  std::uint64_t arrived = 0;       // eager bytes + announced rendezvous bytes
  bool truncated = false;          // bytes beyond the receive were dropped
  bool in_active = false;          // entered in its gate's `active` table
  buffered_list buffered;
  rdv_list rdvs;
  std::uint32_t rdv_in_flight = 0;  // post_recv_data not completed yet
  bool failed = false;              // its peer failed before it was whole
  std::uint32_t held_credit = 0;    // its own credit still charged (unexpected: wire::own_credit)
  std::string fail_reason;

  // Back to a fresh state, keeping the containers' storage.
  void reset() {
    req = nullptr;
    unexpected = nullptr;
    source = -1;
    tag = 0;
    seq = 0;
    total = unknown;
    accounted = arrived = 0;
    truncated = in_active = false;
    buffered.clear();
    rdvs.clear();
    rdv_in_flight = 0;
    failed = false;
    held_credit = 0;
    fail_reason.clear();
  }
};

using posted_hook = boost::intrusive::list_member_hook<
    boost::intrusive::link_mode<boost::intrusive::safe_link>>;

struct request_state {
  enum class kind : std::uint8_t { none, send, recv };

  // --- common ---
  kind type = kind::none;
  std::atomic<bool> done{true};   // true when idle or complete
  std::atomic<int> wake_fd{-1};   // a thread sleeping for it (waiter slot)
  errc error = errc::ok;
  std::string error_message;
  void (*cb)(request&, void*) = nullptr;
  void* cb_arg = nullptr;
  request* owner = nullptr;        // the nmad::request embedding this state
  // The session that started it (set by every start; read by ~request to
  // cancel a request destroyed while pending, see session_impl::abandon).
  session_impl* engine = nullptr;
  std::uint64_t engine_id = 0;     // that session's serial number (session_impl::serial)

  bool finishing = false;          // complete() ran, its callback is deferred
                                   // (engine lock held: use finished())
  bool bg_counted = false;         // counted in flight for the progress thread

  bool is_complete() const { return done.load(std::memory_order_acquire); }
  // Engine side: complete, or completing once its callback has run.
  bool finished() const { return finishing || is_complete(); }

  // --- send ---
  gate* dest = nullptr;
  std::uint32_t pending_chunks = 0;  // entries not fully sent yet
  bool sealed = true;                // no more pieces will be added
  bool cancel_requested = false;     // a cancel_req went out for its rendezvous
  chunk_entry first_piece;           // isend uses this one; pack uses a pool
  chunk_entry* held_piece = nullptr; // pack: last piece, held to flag `last`
  std::uint64_t packed_bytes = 0;    // pack: bytes packed so far
  // Partitioned send (psend_begin): the message's announced length, the
  // pieces placed anywhere in it (every chunk carries msg_len).
  bool partitioned = false;
  std::uint64_t part_total = 0;
  // Flow control: the sequence number is taken when the message's first
  // entry (`opening`) is admitted (see core/collect/send_side.hpp), not while it
  // waits for credit; offer_pending: it is out as an offer, unanswered.
  // `opening` points to that entry only while it lives: a pooled entry
  // is recycled once sent, and a later piece of the same message may get
  // the same address (`opened` tells the message has its opening).
  bool seq_pending = false;
  bool opened = false;
  chunk_entry* opening = nullptr;
  bool offer_pending = false;

  // --- receive ---
  posted_hook posted;                // on a posted list (core/matching)
  std::uint64_t post_stamp = 0;      // posting order (any_source vs per-source)
  int source_filter = -1;            // rank or any_source
  std::uint64_t tag_filter = 0;
  std::uint64_t tag_mask = ~std::uint64_t{0};
  bool matched = false;
  segment_list segments;             // where the message's bytes go
  std::uint64_t capacity = 0;        // sum of segment lengths
  // precv: every segment but the last is this long (0: segments of any
  // length): the segment of an offset is found by division, not a walk.
  std::uint64_t uniform_len = 0;
  bool recv_sealed = true;           // irecv: yes; unpack: at end()
  bool ask_deferred = false;         // on its gate's ask_again list
  bool unpack_waiting = false;       // on its gate's unpack_waiting list
  bool wanted = false;               // a want went out for it (flow control)
  message_state msg;                 // valid once matched
};

// The engine's way into a request's opaque storage (a friend of
// nmad::request). The public header fixes the storage's size and alignment;
// these checks fail the build, not the ABI, when the state outgrows it.
struct request_storage {
  static_assert(sizeof(request_state) <= request::storage_size,
                "request_state outgrew nmad::request's storage: raise request::storage_size (an ABI change)");
  static_assert(alignof(request_state) <= alignof(std::max_align_t),
                "request_state needs more alignment than nmad::request's storage has");

  static request_state* construct(request& r) { return ::new (static_cast<void*>(r._storage)) request_state; }
  static request_state& of(request& r) noexcept { return *std::launder(reinterpret_cast<request_state*>(r._storage)); }
  static const request_state& of(const request& r) noexcept {
    return *std::launder(reinterpret_cast<const request_state*>(r._storage));
  }
};

inline request_state& state_of(request& r) noexcept { return request_storage::of(r); }
inline const request_state& state_of(const request& r) noexcept { return request_storage::of(r); }

}  // namespace nmad
