#pragma once
// A single-producer single-consumer ring of variable-size records in shared
// memory (private to the shm driver).
//
// Positions are byte counters that only grow; the consumer owns `head` (on
// its own cache line), the producer its tail (private). A record is an
// 8-byte header {stamp, payload length and kind} and its payload, padded to
// 8 bytes, always contiguous: when a record does not fit before the end of
// the data area the producer writes a `wrap` record that fills the rest and
// starts over at offset 0. The producer publishes a record by storing its
// *stamp* last (release): the record's position mixed with a key of the
// segment, so neither zeroed memory nor bytes left by an earlier lap (user
// payload included) look like a record. The consumer polls the stamp at its
// own head position (acquire): a small message's header and payload come
// in one cache line, and no shared counter bounces between the cores on
// every message. The header is kept at 8 bytes because the lines of the
// ring are what moves between the cores: an 8-byte MPI message (16 bytes
// of engine header) is a 32-byte record, two to a cache line. It releases the space with a release store of `head` once
// it has finished with the payload (so a payload can be handed to the
// engine in place, without a copy).
//
// The other side may be broken or hostile: everything read from shared
// memory is checked before use. The capacity and the key are fixed when the
// view is made (never re-read), head must satisfy head <= tail <= head +
// capacity for the producer, and a record must lie inside the data area (a
// wrap record exactly up to its end); peek() reports a violation instead of
// reading out of bounds.
//
// Sleeping consumers and producers: a producer whose ring is full sets
// `want_space` before it sleeps; the consumer, after releasing space, sees
// it and wakes the producer (see the shm driver's wake-up protocol).
#include <sys/uio.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "core/common/small_copy.hpp"

namespace nmad::shm {

struct record_header {
  std::uint32_t stamp;   // written last: ring::stamp_of(the record's position)
  std::uint32_t word;    // payload bytes (low 24 bits) | kind << 24
  std::uint32_t length() const { return word & kLengthMask; }
  std::uint16_t kind() const { return static_cast<std::uint16_t>(word >> 24); }
  static constexpr std::uint32_t kLengthMask = (1u << 24) - 1;
};
static_assert(sizeof(record_header) == 8);

constexpr std::uint16_t kind_wrap = 0xff;  // kinds are 1..254

struct ring_control {
  alignas(64) std::atomic<std::uint64_t> head{0};  // consumer position
  alignas(64) std::uint64_t capacity = 0;          // data bytes (multiple of 8)
  alignas(64) std::atomic<std::uint32_t> want_space{0};  // producer sleeps on a full ring
};

enum class peek_result { record, empty, corrupt };

constexpr std::size_t align8(std::size_t n) { return (n + 7) & ~std::size_t{7}; }

// A view of one ring: control block + data area (both in shared memory).
class ring {
 public:
  ring() = default;
  // `capacity` is the size both sides agreed on (checked at set-up); the
  // copy in shared memory is never trusted afterwards.
  // A power-of-two capacity (what this driver makes) turns the position
  // arithmetic into a mask; any other agreed size still works.
  // `key` is the segment's (both sides use the same).
  ring(ring_control* c, std::byte* data, std::uint64_t capacity, std::uint64_t key)
      : _c(c),
        _data(data),
        _cap(capacity),
        _mask((capacity & (capacity - 1)) == 0 ? capacity - 1 : 0),
        _key(key) {}

  std::uint64_t capacity() const { return _cap; }

  // Largest payload that could ever be written at once.
  std::size_t max_payload() const {
    return std::min<std::size_t>(_cap / 2 - sizeof(record_header), record_header::kLengthMask);
  }

  // Writes one record made of `iov` (total `len` bytes). False if there is
  // no room right now (the caller retries later), or if the consumer's
  // position is impossible (a broken peer: the ring then looks full).
  bool write(std::uint16_t kind, std::span<const iovec> iov, std::size_t len) {
    const std::uint64_t cap = _cap;
    if (len > max_payload()) return false;
    const std::size_t need = sizeof(record_header) + align8(len);
    const std::uint64_t tail = _tail;
    std::uint64_t pos = offset_of(tail);
    std::size_t waste = 0;
    if (pos + need > cap) waste = cap - pos;  // wrap record fills the end
    // The consumer's position is re-read only when the cached one says the
    // ring is full: that keeps its cache line where it is most of the time.
    if (cap - (tail - _head_cache) < need + waste) {
      const std::uint64_t head = _c->head.load(std::memory_order_acquire);
      if (head > tail || tail - head > cap) return false;  // corrupt: never write
      _head_cache = head;
      if (cap - (tail - _head_cache) < need + waste) return false;
    }
    if (waste) {
      publish(pos, tail, static_cast<std::uint32_t>(waste - sizeof(record_header)), kind_wrap);
      pos = 0;
    }
    std::byte* p = _data + pos + sizeof(record_header);
    for (const iovec& v : iov) {
      copy_small(p, static_cast<const std::byte*>(v.iov_base), v.iov_len);
      p += v.iov_len;
    }
    publish(pos, tail + waste, static_cast<std::uint32_t>(len), kind);
    _tail = tail + waste + need;
    return true;
  }

  // Producer: whether the consumer has taken every record written.
  bool drained() const { return _c->head.load(std::memory_order_acquire) == _tail; }

  // Consumer: whether a record may be waiting (cheap; for deciding to sleep).
  bool readable() const { return stamp_at(offset_of(_head)) == stamp_of(_head); }

  // The next record, if any (skipping wrap records). Valid until consume().
  peek_result peek(record_header& h, std::span<const std::byte>& payload) {
    const std::uint64_t cap = _cap;
    for (;;) {
      const std::uint64_t head = _head;
      const std::uint64_t pos = offset_of(head);  // 8-aligned: a header fits
      const std::uint32_t stamp = stamp_of(head);
      if (stamp_at(pos) != stamp) return peek_result::empty;
      std::memcpy(&h.word, _data + pos + offsetof(record_header, word), sizeof h.word);  // after the stamp (acquire)
      h.stamp = stamp;
      const std::uint64_t span = sizeof h + align8(h.length());
      if (h.kind() == kind_wrap) {
        if (pos + span != cap) return peek_result::corrupt;
        _head = head + span;
        _c->head.store(_head, std::memory_order_release);
        continue;
      }
      if (pos + span > cap) return peek_result::corrupt;
      payload = {_data + pos + sizeof h, h.length()};
      return peek_result::record;
    }
  }

  // Releases the record returned by the last peek().
  void consume(const record_header& h) {
    _head += sizeof h + align8(h.length());
    _c->head.store(_head, std::memory_order_release);
  }

  // Producer: about to sleep with records waiting for room (see above).
  void request_space() { _c->want_space.store(1, std::memory_order_seq_cst); }
  // Consumer: after releasing space, whether the producer asked to be woken
  // (clears the request). The caller fences between its head store and
  // this (the producer fences between its request and its look at head).
  bool space_wanted() {
    if (_c->want_space.load(std::memory_order_relaxed) == 0) return false;
    _c->want_space.store(0, std::memory_order_relaxed);
    return true;
  }

 private:
  std::uint64_t offset_of(std::uint64_t position) const { return _mask ? position & _mask : position % _cap; }
  // Never 0 for any position the ring reaches (zeroed memory is no record),
  // and keyed: stale bytes of an earlier lap do not match it (the high half
  // of a multiplicative hash of the position, which every bit of the
  // position changes; a stale match needs a 32-bit collision).
  std::uint32_t stamp_of(std::uint64_t position) const {
    return static_cast<std::uint32_t>((((position + 1) * 0x9e3779b97f4a7c15ULL) ^ _key) >> 32) | 1u;
  }
  std::uint32_t stamp_at(std::uint64_t offset) const {
    auto* stamp = reinterpret_cast<std::uint32_t*>(_data + offset + offsetof(record_header, stamp));
    return std::atomic_ref<std::uint32_t>(*stamp).load(std::memory_order_acquire);
  }
  void publish(std::uint64_t offset, std::uint64_t position, std::uint32_t len, std::uint16_t kind) {
    const std::uint32_t word = len | static_cast<std::uint32_t>(kind) << 24;
    std::memcpy(_data + offset + offsetof(record_header, word), &word, sizeof word);
    auto* stamp = reinterpret_cast<std::uint32_t*>(_data + offset + offsetof(record_header, stamp));
    std::atomic_ref<std::uint32_t>(*stamp).store(stamp_of(position), std::memory_order_release);
  }

  ring_control* _c = nullptr;
  std::byte* _data = nullptr;
  std::uint64_t _cap = 1;
  std::uint64_t _mask = 0;        // _cap - 1 when _cap is a power of two
  std::uint64_t _key = 0;         // the segment's stamp key
  std::uint64_t _head_cache = 0;  // producer's last look at `head` (<= the real one)
  std::uint64_t _tail = 0;        // producer's own position (the shared one is only written)
  std::uint64_t _head = 0;        // consumer's own position
};

}  // namespace nmad::shm
