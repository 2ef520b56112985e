// The shm driver's record ring (drivers/shm/shm_ring.hpp) on its own: one
// producer view and one consumer view over the same memory, as the two
// processes have them. Records come out whole and in order across many
// wrap-arounds; a full ring refuses and recovers; and whatever a broken or
// hostile peer writes into the shared control block or records is reported
// as `corrupt` (or, for the producer, as a full ring), never read or
// written out of bounds.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <random>
#include <vector>

#include "drivers/shm/shm_ring.hpp"

using namespace nmad::shm;

namespace {

constexpr std::uint64_t kKey = 0x5eed1234abcd9876ULL;

// Control block and data area as they sit in a segment, with guard bytes
// after the data area that must never change.
struct shared_ring {
  explicit shared_ring(std::size_t cap) : data(cap + kGuard, std::byte{0}), capacity(cap) {
    std::memset(data.data() + cap, 0xa5, kGuard);
    control.capacity = cap;
  }
  ring producer() { return ring(&control, data.data(), capacity, kKey); }
  ring consumer() { return ring(&control, data.data(), capacity, kKey); }
  bool guard_intact() const {
    for (std::size_t i = capacity; i < data.size(); ++i)
      if (data[i] != std::byte{0xa5}) return false;
    return true;
  }
  static constexpr std::size_t kGuard = 64;
  ring_control control;
  std::vector<std::byte> data;
  std::size_t capacity;
};

std::vector<std::byte> pattern(std::size_t n, unsigned seed) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((seed * 131u + i * 7u) & 0xff);
  return v;
}

bool write_bytes(ring& r, std::uint16_t kind, const std::vector<std::byte>& b) {
  iovec v{const_cast<std::byte*>(b.data()), b.size()};
  return r.write(kind, {&v, 1}, b.size());
}

}  // namespace

TEST_CASE("records come out whole and in order across many wrap-arounds") {
  shared_ring sr(4096);
  ring tx = sr.producer(), rx = sr.consumer();
  std::mt19937 rng(7);
  std::deque<std::pair<std::uint16_t, std::vector<std::byte>>> in_flight;
  unsigned written = 0, read = 0;
  while (read < 20000) {
    // Write a burst of random sizes (0 to 600 bytes, any alignment), then
    // read some of them: the ring is full now and then, and wraps often.
    const int burst = static_cast<int>(rng() % 12);
    for (int i = 0; i < burst; ++i) {
      const std::size_t n = rng() % 601;
      auto b = pattern(n, written);
      const auto kind = static_cast<std::uint16_t>(1 + written % 4);
      if (!write_bytes(tx, kind, b)) break;  // full: read first
      in_flight.emplace_back(kind, std::move(b));
      ++written;
    }
    const int take = static_cast<int>(rng() % 12);
    for (int i = 0; i < take; ++i) {
      record_header h{};
      std::span<const std::byte> p;
      const peek_result pr = rx.peek(h, p);
      if (in_flight.empty()) {
        REQUIRE(pr == peek_result::empty);
        break;
      }
      REQUIRE(pr == peek_result::record);
      REQUIRE(h.kind() == in_flight.front().first);
      REQUIRE(p.size() == in_flight.front().second.size());
      REQUIRE(std::equal(p.begin(), p.end(), in_flight.front().second.begin()));
      rx.consume(h);
      in_flight.pop_front();
      ++read;
    }
  }
  CHECK(sr.guard_intact());
}

TEST_CASE("an 8-byte message with its 16-byte engine header takes 32 bytes: two to a cache line") {
  shared_ring sr(4096);
  ring tx = sr.producer(), rx = sr.consumer();
  const auto b = pattern(24, 1);
  for (int i = 0; i < 128; ++i) REQUIRE(write_bytes(tx, 1, b));  // exactly 4096 bytes
  CHECK_FALSE(write_bytes(tx, 1, b));                              // full
  record_header h{};
  std::span<const std::byte> p;
  REQUIRE(rx.peek(h, p) == peek_result::record);
  rx.consume(h);
  CHECK(write_bytes(tx, 1, b));  // the consumer's released space is seen
}

TEST_CASE("a record larger than half the ring is never accepted; two halves fill it") {
  shared_ring sr(1024);
  ring tx = sr.producer(), rx = sr.consumer();
  CHECK_FALSE(write_bytes(tx, 1, pattern(tx.max_payload() + 1, 0)));
  CHECK(write_bytes(tx, 1, pattern(tx.max_payload(), 0)));  // exactly half the ring each
  CHECK(write_bytes(tx, 1, pattern(tx.max_payload(), 1)));
  CHECK_FALSE(write_bytes(tx, 1, pattern(0, 2)));
  record_header h{};
  std::span<const std::byte> p;
  for (unsigned i = 0; i < 2; ++i) {
    REQUIRE(rx.peek(h, p) == peek_result::record);
    CHECK(p.size() == tx.max_payload());
    CHECK(std::ranges::equal(p, pattern(p.size(), i)));
    rx.consume(h);
  }
  CHECK(rx.peek(h, p) == peek_result::empty);
}

TEST_CASE("zeroed memory and bytes of an earlier lap are not records") {
  shared_ring sr(1024);
  ring rx = sr.consumer();
  record_header h{};
  std::span<const std::byte> p;
  CHECK(rx.peek(h, p) == peek_result::empty);
  CHECK_FALSE(rx.readable());
  // One lap of records consumed, then the consumer is at position 1024
  // (offset 0 again) where the first lap's record still lies.
  ring tx = sr.producer();
  for (int i = 0; i < 4; ++i) {
    REQUIRE(write_bytes(tx, 1, pattern(248, i)));
    REQUIRE(rx.peek(h, p) == peek_result::record);
    rx.consume(h);
  }
  CHECK(rx.peek(h, p) == peek_result::empty);
}

TEST_CASE("hostile writes into the shared memory are reported, never followed out of bounds") {
  SUBCASE("a record length that runs past the end of the data area") {
    shared_ring sr(1024);
    ring tx = sr.producer(), rx = sr.consumer();
    REQUIRE(write_bytes(tx, 1, pattern(16, 0)));
    const std::uint32_t word = 4000u | (1u << 24);  // the peer rewrites the length
    std::memcpy(sr.data.data() + offsetof(record_header, word), &word, 4);
    record_header h{};
    std::span<const std::byte> p;
    CHECK(rx.peek(h, p) == peek_result::corrupt);
  }
  SUBCASE("a wrap record that does not end exactly at the end of the data area") {
    shared_ring sr(1024);
    ring tx = sr.producer(), rx = sr.consumer();
    REQUIRE(write_bytes(tx, 1, pattern(16, 0)));
    const std::uint32_t word = 16u | (std::uint32_t{kind_wrap} << 24);
    std::memcpy(sr.data.data() + offsetof(record_header, word), &word, 4);
    record_header h{};
    std::span<const std::byte> p;
    CHECK(rx.peek(h, p) == peek_result::corrupt);
  }
  SUBCASE("a consumer position ahead of the producer's or a lap behind: the ring looks full") {
    shared_ring sr(1024);
    ring tx = sr.producer();
    sr.control.head.store(1 << 20);  // ahead of everything written
    // The cached view still has room for a while; once it is re-read the
    // impossible position is refused and nothing more is written.
    int accepted = 0;
    while (accepted < 100 && write_bytes(tx, 1, pattern(100, accepted))) ++accepted;
    CHECK(accepted < 100);
    CHECK(sr.guard_intact());
  }
  SUBCASE("random garbage over the whole data area") {
    std::mt19937 rng(11);
    for (int round = 0; round < 200; ++round) {
      shared_ring sr(512);
      ring tx = sr.producer(), rx = sr.consumer();
      for (int i = 0; i < 3; ++i) (void)write_bytes(tx, 1, pattern(rng() % 100, i));
      for (std::size_t i = 0; i < sr.capacity; ++i)
        if (rng() % 4 == 0) sr.data[i] = static_cast<std::byte>(rng());
      // Whatever the consumer is given lies inside the data area.
      for (int i = 0; i < 64; ++i) {
        record_header h{};
        std::span<const std::byte> p;
        const peek_result pr = rx.peek(h, p);
        if (pr != peek_result::record) break;
        REQUIRE(p.data() >= sr.data.data());
        REQUIRE(p.data() + p.size() <= sr.data.data() + sr.capacity);
        rx.consume(h);
      }
      CHECK(sr.guard_intact());
    }
  }
}
