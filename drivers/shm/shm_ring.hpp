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
};

constexpr std::size_t align8(std::size_t n) { return (n + 7) & ~std::size_t{7}; }

// A view of one ring: control block + data area (both in shared memory).
class ring {
 public:
  ring() = default;
  ring(ring_control* c, std::byte* data) : _c(c), _data(data) {}

  std::uint64_t capacity() const { return _c->capacity; }

  // Largest payload that could ever be written at once.
  std::size_t max_payload() const { return _c->capacity / 2 - sizeof(record_header); }

  // Writes one record made of `iov` (total `len` bytes). False if there is
  // no room right now (the caller retries later).
  bool write(std::uint16_t kind, std::span<const iovec> iov, std::size_t len) {
    const std::uint64_t cap = _c->capacity;
    const std::size_t need = sizeof(record_header) + align8(len);
    const std::uint64_t tail = _c->tail.load(std::memory_order_relaxed);
    std::uint64_t pos = tail % cap;
    std::size_t waste = 0;
    if (pos + need > cap) waste = cap - pos;  // wrap record fills the end
    // The consumer's position is re-read only when the cached one says the
    // ring is full: that keeps its cache line where it is most of the time.
    if (cap - (tail - _head_cache) < need + waste) {
      _head_cache = _c->head.load(std::memory_order_acquire);
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
    _c->tail.store(tail + waste + need, std::memory_order_release);
    return true;
  }

  // The next record, if any (skipping wrap records). Valid until consume().
  bool peek(record_header& h, std::span<const std::byte>& payload) {
    for (;;) {
      const std::uint64_t head = _c->head.load(std::memory_order_relaxed);
      const std::uint64_t tail = _c->tail.load(std::memory_order_acquire);
      if (head == tail) return false;
      const std::uint64_t pos = head % _c->capacity;
      std::memcpy(&h, _data + pos, sizeof h);
      if (h.kind == kind_wrap) {
        _c->head.store(head + sizeof h + h.length, std::memory_order_release);
        continue;
      }
      payload = {_data + pos + sizeof h, h.length};
      return true;
    }
  }

  // Releases the record returned by the last peek().
  void consume(const record_header& h) {
    const std::uint64_t head = _c->head.load(std::memory_order_relaxed);
    _c->head.store(head + sizeof h + align8(h.length), std::memory_order_release);
  }

 private:
  ring_control* _c = nullptr;
  std::byte* _data = nullptr;
  std::uint64_t _head_cache = 0;  // producer's last look at `head` (<= the real one)
};

}  // namespace nmad::shm
