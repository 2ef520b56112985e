#pragma once
// A single-producer single-consumer ring of variable-size records in shared
// memory (private to the shm driver).
//
// Positions are byte counters that only grow; the consumer owns `head`, the
// producer `tail`, each on its own cache line. A record is an 8-byte header
// {payload length, kind} and its payload, padded to 8 bytes, always
// contiguous: when a record does not fit before the end of the data area
// the producer writes a `wrap` record that fills the rest and starts over at
// offset 0. The producer publishes with a release store of `tail`; the
// consumer reads with acquire, and releases the space with a release store
// of `head` once it has finished with the payload (so a payload can be
// handed to the engine in place, without a copy).
//
// The other side may be broken or hostile: everything read from shared
// memory is checked before use. The capacity is fixed when the view is made
// (never re-read), positions must satisfy head <= tail <= head + capacity,
// and a record must lie inside the data area (a wrap record exactly up to
// its end); peek() reports a violation instead of reading out of bounds.
//
// Sleeping consumers and producers: a producer whose ring is full sets
// `want_space` before it sleeps; the consumer, after releasing space, sees
// it and wakes the producer (see the shm driver's wake-up protocol).
#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace nmad::shm {

struct record_header {
  std::uint32_t length;  // payload bytes
  std::uint16_t kind;
  std::uint16_t reserved;
};
static_assert(sizeof(record_header) == 8);

constexpr std::uint16_t kind_wrap = 0xffff;

struct ring_control {
  alignas(64) std::atomic<std::uint64_t> head{0};  // consumer position
  alignas(64) std::atomic<std::uint64_t> tail{0};  // producer position
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
  ring(ring_control* c, std::byte* data, std::uint64_t capacity)
      : _c(c), _data(data), _cap(capacity), _mask((capacity & (capacity - 1)) == 0 ? capacity - 1 : 0) {}

  std::uint64_t capacity() const { return _cap; }

  // Largest payload that could ever be written at once.
  std::size_t max_payload() const { return _cap / 2 - sizeof(record_header); }

  // Writes one record made of `iov` (total `len` bytes). False if there is
  // no room right now (the caller retries later), or if the consumer's
  // position is impossible (a broken peer: the ring then looks full).
  bool write(std::uint16_t kind, std::span<const iovec> iov, std::size_t len) {
    const std::uint64_t cap = _cap;
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
      record_header w{static_cast<std::uint32_t>(waste - sizeof(record_header)), kind_wrap, 0};
      std::memcpy(_data + pos, &w, sizeof w);
      pos = 0;
    }
    record_header h{static_cast<std::uint32_t>(len), kind, 0};
    std::memcpy(_data + pos, &h, sizeof h);
    std::byte* p = _data + pos + sizeof h;
    for (const iovec& v : iov) {
      if (v.iov_len) std::memcpy(p, v.iov_base, v.iov_len);
      p += v.iov_len;
    }
    _tail = tail + waste + need;
    _c->tail.store(_tail, std::memory_order_release);
    return true;
  }

  // Producer: whether the consumer has taken every record written.
  bool drained() const { return _c->head.load(std::memory_order_acquire) == _tail; }

  // Whether a record may be waiting (cheap; for deciding to sleep).
  bool readable() const {
    return _c->tail.load(std::memory_order_acquire) != _head;
  }

  // The next record, if any (skipping wrap records). Valid until consume().
  peek_result peek(record_header& h, std::span<const std::byte>& payload) {
    const std::uint64_t cap = _cap;
    for (;;) {
      const std::uint64_t head = _head;
      const std::uint64_t tail = _c->tail.load(std::memory_order_acquire);
      if (head == tail) return peek_result::empty;
      if (tail < head || tail - head > cap || tail - head < sizeof h) return peek_result::corrupt;
      const std::uint64_t pos = offset_of(head);
      if (pos + sizeof h > cap) return peek_result::corrupt;
      std::memcpy(&h, _data + pos, sizeof h);
      const std::uint64_t span = sizeof h + align8(h.length);
      if (h.kind == kind_wrap) {
        if (pos + span != cap || span > tail - head) return peek_result::corrupt;
        _head = head + span;
        _c->head.store(_head, std::memory_order_release);
        continue;
      }
      if (pos + span > cap || span > tail - head) return peek_result::corrupt;
      payload = {_data + pos + sizeof h, h.length};
      return peek_result::record;
    }
  }

  // Releases the record returned by the last peek().
  void consume(const record_header& h) {
    _head += sizeof h + align8(h.length);
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

  ring_control* _c = nullptr;
  std::byte* _data = nullptr;
  std::uint64_t _cap = 1;
  std::uint64_t _mask = 0;        // _cap - 1 when _cap is a power of two
  std::uint64_t _head_cache = 0;  // producer's last look at `head` (<= the real one)
  std::uint64_t _tail = 0;        // producer's own position (the shared one is only written)
  std::uint64_t _head = 0;        // consumer's own position
};

}  // namespace nmad::shm
