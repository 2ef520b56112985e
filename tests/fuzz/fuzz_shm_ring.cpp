// Fuzz target: the shm driver's record ring (drivers/shm/shm_ring.hpp) as
// a reader sees a segment that a hostile or crashed peer wrote. A producer
// view and a consumer view share one control block and one data area (the
// data area is its own heap block, so a read or write past it is an ASan
// report); the input interleaves legitimate writes and reads with hostile
// stores: arbitrary bytes anywhere in the data area, an arbitrary consumer
// position in the control block, and record headers forged with the right
// stamp (a peer knows the segment's key) but any length and kind.
// Input: byte 0 picks the capacity (powers of two and other multiples of
// 8), bytes 1-8 the key, then operations of one byte each plus operands.
// Checked: no out-of-bounds access; every record peek() returns lies inside
// the data area; while nothing hostile happened, records come out whole,
// in order and intact, and `empty` means nothing is waiting; after
// `corrupt` the consumer is not used again (the driver fails the
// connection).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <vector>

#include "drivers/shm/shm_ring.hpp"

namespace {
using namespace nmad::shm;

struct reader {
  const std::uint8_t* p;
  std::size_t left;
  template <class T>
  bool take(T& out) {
    if (left < sizeof out) return false;
    std::memcpy(&out, p, sizeof out);
    p += sizeof out;
    left -= sizeof out;
    return true;
  }
};

// The stamp a record at `position` carries (the ring's private formula,
// restated: a hostile peer can compute it, since it knows the key). Checked
// against the ring's own stamps below, so a change there is noticed.
std::uint32_t stamp_for(std::uint64_t position, std::uint64_t key) {
  return static_cast<std::uint32_t>((((position + 1) * 0x9e3779b97f4a7c15ULL) ^ key) >> 32) | 1u;
}

void require(bool ok) {
  if (!ok) std::abort();
}

struct expected_record {
  std::uint16_t kind;
  std::size_t len;
  std::uint8_t seed;
};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  reader in{data, size};
  std::uint8_t capsel = 0;
  std::uint64_t key = 0;
  if (!in.take(capsel) || !in.take(key)) return 0;
  const std::uint64_t cap = capsel & 0x80 ? 8 * (32 + (capsel & 0x7f)) : std::uint64_t{64} << (capsel % 7);
  auto control = std::make_unique<ring_control>();
  control->capacity = cap;
  std::unique_ptr<std::byte[]> area(new std::byte[cap]());
  ring tx(control.get(), area.get(), cap, key), rx(control.get(), area.get(), cap, key);
  std::deque<expected_record> fifo;
  bool hostile = false, corrupt = false;
  std::uint64_t consumer_pos = 0;  // the consumer's head as it last stored it
  std::uint64_t producer_pos = 0;  // where the next legitimate record starts (before a wrap)
  std::uint8_t op;
  while (in.take(op)) {
    switch (op % 6) {
      case 0: {  // producer: one record
        std::uint8_t kind = 0, seed = 0;
        std::uint16_t len = 0;
        if (!in.take(kind) || !in.take(len) || !in.take(seed)) break;
        const std::uint16_t k = static_cast<std::uint16_t>(1 + kind % 254);
        const std::size_t n = len % (tx.max_payload() + 16);  // some too large
        std::vector<std::byte> bytes(n);
        for (std::size_t i = 0; i < n; ++i) bytes[i] = static_cast<std::byte>(seed + i * 13);
        iovec v{bytes.data(), n};
        const bool wrote = tx.write(k, {&v, 1}, n);
        if (n > tx.max_payload()) require(!wrote);
        if (wrote) {
          fifo.push_back({k, n, seed});
          if (!hostile) {
            // The record sits at producer_pos, or at 0 after a wrap record.
            const std::uint64_t need = sizeof(record_header) + align8(n);
            const std::uint64_t off = producer_pos % cap;
            std::uint64_t at = producer_pos;
            if (off + need > cap) at = producer_pos + (cap - off);
            std::uint32_t stamp;
            std::memcpy(&stamp, area.get() + at % cap, 4);
            require(stamp == stamp_for(at, key));
            producer_pos = at + need;
          }
        }
        break;
      }
      case 1:
      case 2: {  // consumer: next record (op 1 also releases it)
        if (corrupt) break;
        record_header h;
        std::span<const std::byte> payload;
        const peek_result r = rx.peek(h, payload);
        if (r == peek_result::corrupt) {
          require(hostile);
          corrupt = true;
          break;
        }
        if (r == peek_result::empty) {
          if (!hostile) require(fifo.empty());
          consumer_pos = control->head.load();
          break;
        }
        require(payload.empty() || (payload.data() >= area.get() && payload.data() + payload.size() <= area.get() + cap));
        volatile unsigned sum = 0;
        for (std::byte b : payload) sum = sum + static_cast<unsigned>(b);
        if (!hostile) {
          require(!fifo.empty());
          const expected_record e = fifo.front();
          require(h.kind() == e.kind && payload.size() == e.len);
          for (std::size_t i = 0; i < e.len; ++i) require(payload[i] == static_cast<std::byte>(e.seed + i * 13));
        }
        if (op % 6 == 1) {
          rx.consume(h);
          if (!fifo.empty()) fifo.pop_front();
        }
        consumer_pos = control->head.load();
        break;
      }
      case 3: {  // hostile: 8 bytes anywhere in the data area
        std::uint16_t at = 0;
        std::uint64_t v = 0;
        if (!in.take(at) || !in.take(v)) break;
        std::memcpy(area.get() + (at % (cap / 8)) * 8, &v, 8);
        hostile = true;
        break;
      }
      case 4: {  // hostile: the consumer position in the control block
        std::uint64_t v = 0;
        if (!in.take(v)) break;
        control->head.store(v);
        hostile = true;
        break;
      }
      case 5: {  // hostile: a forged record header where the consumer looks next
        std::uint32_t word = 0;
        if (!in.take(word)) break;
        const std::uint32_t stamp = stamp_for(consumer_pos, key);
        // (consumer_pos may be a hostile value read back from the control
        // block: a header slot is 8-aligned.)
        std::byte* at = area.get() + (consumer_pos % cap & ~std::uint64_t{7});
        std::memcpy(at, &stamp, 4);
        std::memcpy(at + 4, &word, 4);
        hostile = true;
        break;
      }
    }
  }
  return 0;
}
