// engine_worker's partitioned messages: `partitioned` sends messages of
// random lengths in pieces handed over by several threads in random order
// and checks each part as it arrives; `partitioned_packets` reports how
// many packets carried pieces made ready without progress in between.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "api/nmad/nmad.hpp"
#include "tests/workers/engine_scenarios.hpp"
#include "tests/workers/worker_util.hpp"

using namespace nmad;
using namespace nmad_test::worker;

namespace nmad_test::engine {

namespace {

// The byte at `off` of round `round`'s message.
unsigned char part_byte(int round, std::uint64_t off) {
  return static_cast<unsigned char>((off * 131 + static_cast<std::uint64_t>(round) * 17 + (off >> 9)) & 0xff);
}

// Rank 0 sends `rounds` partitioned messages to rank 1: random lengths (0 B
// to 2 MiB), 1-64 pieces handed over in random order by `threads`
// threads, received as 1-64 parts of another size. The receiver checks
// each part as soon as parrived() says it is there, then the whole
// message, then that every part was reported. Round 0 also checks the
// argument errors; the last two rounds a longer (truncated) and a shorter
// message than the receive.
void partitioned_side(session& s, int rounds, int threads, bool sending);

}  // namespace

int partitioned(session& s, int rounds, int threads) {
  if (s.rank() > 1) return 0;
  // Alone: rank 0 sends to itself, the sender in a thread of its own.
  if (s.size() == 1) {
    std::thread sender([&] { partitioned_side(s, rounds, threads, true); });
    partitioned_side(s, rounds, threads, false);
    sender.join();
  } else {
    partitioned_side(s, rounds, threads, s.rank() == 0);
  }
  if (s.rank() == 0 && s.size() == 1) std::printf("partitioned: %d messages checked part by part\n", rounds);
  if (s.rank() == 1) std::printf("partitioned: %d messages checked part by part\n", rounds);
  return 0;
}

namespace {

void partitioned_side(session& s, int rounds, int threads, bool sending) {
  constexpr tag_t kTag = 90;
  const int peer = s.size() == 1 ? 0 : 1 - s.rank();
  for (int round = 0; round < rounds; ++round) {
    std::mt19937_64 rng(static_cast<std::uint64_t>(round) * 7919 + 1);
    const int kind = static_cast<int>(rng() % 8);
    std::uint64_t len = kind == 0 ? 0 : kind < 5 ? 1 + rng() % 4096 : 1 + rng() % (2u << 20);
    const std::uint64_t pieces = 1 + rng() % std::min<std::uint64_t>(64, std::max<std::uint64_t>(len, 1));
    const std::uint64_t parts = 1 + rng() % std::min<std::uint64_t>(64, std::max<std::uint64_t>(len, 1));
    // Last two rounds: the sender's message is longer, then shorter.
    std::uint64_t send_len = len;
    if (round == rounds - 2) send_len = len + 100;
    if (round == rounds - 1) send_len = len / 2;
    if (sending) {
      std::vector<unsigned char> buf(send_len);
      for (std::uint64_t k = 0; k < send_len; ++k) buf[k] = part_byte(round, k);
      const std::uint64_t piece_len = send_len == 0 ? 0 : (send_len + pieces - 1) / pieces;
      request r;
      if (round == 0)
        expect(s.psend_piece(r, 0, buf.data(), 1) == errc::invalid_argument, "a piece of a request never opened");
      expect_ok(s.psend_begin(peer, kTag, send_len, r), r, "psend_begin");
      if (round == 0 && send_len >= 2) {
        expect(s.psend_piece(r, send_len, buf.data(), 1) == errc::invalid_argument, "a piece beyond the message");
        expect(s.psend_piece(r, send_len - 1, buf.data(), 2) == errc::invalid_argument, "a piece crossing the end");
        expect(s.psend_piece(r, 0, buf.data(), 0) == errc::invalid_argument, "an empty piece");
        expect(s.psend_piece(r, 0, nullptr, 1) == errc::invalid_argument, "a null piece");
      }
      std::vector<std::uint64_t> order;
      for (std::uint64_t off = 0; off < send_len; off += piece_len) order.push_back(off);
      std::shuffle(order.begin(), order.end(), rng);
      std::atomic<std::size_t> next{0};
      auto hand_over = [&] {
        for (std::size_t i; (i = next.fetch_add(1)) < order.size();) {
          const std::uint64_t off = order[i], n = std::min(piece_len, send_len - off);
          expect(s.psend_piece(r, off, buf.data() + off, n) == errc::ok, "psend_piece");
        }
      };
      std::vector<std::thread> ts;
      for (int t = 1; t < threads; ++t) ts.emplace_back(hand_over);
      hand_over();
      for (auto& t : ts) t.join();
      expect_ok(s.wait(r), r, "partitioned send");
      if (send_len > 0)
        expect(s.psend_piece(r, 0, buf.data(), 1) == errc::invalid_argument, "a piece of a completed message");
    } else {
      std::vector<unsigned char> buf(len, 0xEE);
      const std::uint64_t part_len = len == 0 ? 0 : (len + parts - 1) / parts;
      const std::uint64_t nparts = len == 0 ? 1 : (len + part_len - 1) / part_len;
      request r;
      expect_ok(s.precv(peer, kTag, buf.data(), len, part_len, r), r, "precv");
      std::vector<bool> seen(nparts, false);
      std::uint64_t seen_count = 0;
      auto check_part = [&](std::uint64_t p, const char* when) {
        const std::uint64_t lo = p * part_len, hi = std::min(len, lo + part_len);
        for (std::uint64_t k = lo; k < hi && k < send_len; ++k)
          if (buf[k] != part_byte(round, k))
            fail("round " + std::to_string(round) + ": byte " + std::to_string(k) + " of part " + std::to_string(p) +
                 " wrong " + when);
      };
      bool done = false;
      while (!done) {
        done = s.test(r);
        for (std::uint64_t p = 0; p < nparts; ++p)
          if (!seen[p] && s.parrived(r, p)) {
            check_part(p, "when parrived said it was there");
            seen[p] = true;
            ++seen_count;
          }
      }
      if (round == rounds - 2) {
        expect(r.error() == errc::truncated, "a longer message truncates: " + std::string(to_string(r.error())));
      } else {
        expect_ok(r.error(), r, "partitioned receive");
      }
      expect(r.status().length == std::min(len, send_len) || round == rounds - 2, "received length");
      for (std::uint64_t p = 0; p < nparts; ++p) check_part(p, "at completion");
      // Every part the message covers was reported arrived; none beyond.
      for (std::uint64_t p = 0; p < nparts; ++p) {
        const bool covered = std::min(len, (p + 1) * part_len) <= send_len;
        if (covered != seen[p])
          fail("round " + std::to_string(round) + ": part " + std::to_string(p) + (covered ? " never reported" : " reported but not sent"));
      }
      expect(!s.parrived(r, nparts, 1), "a part beyond the receive");
      (void)seen_count;
      for (std::uint64_t k = send_len; k < len; ++k) expect(buf[k] == 0xEE, "bytes beyond a shorter message untouched");
    }
  }
}

}  // namespace

// Rank 0 hands over the n pieces of one message (64 B each) without
// progress in between, then waits; reports how many packets carried them.
int partitioned_packets(session& s, int n) {
  if (s.rank() > 1) return 0;
  const std::uint64_t piece = 64, len = piece * static_cast<std::uint64_t>(n);
  int token = 0;
  request t;
  if (s.rank() == 1) {
    std::vector<unsigned char> buf(len);
    request r;
    expect_ok(s.precv(0, 91, buf.data(), len, piece, r), r, "precv");
    expect_ok(s.isend(0, 92, &token, sizeof token, t), t, "ready");
    expect_ok(s.wait(t), t, "ready");
    expect_ok(s.wait(r), r, "partitioned receive");
    for (std::uint64_t k = 0; k < len; ++k) expect(buf[k] == part_byte(5, k), "partitioned bytes");
    return 0;
  }
  expect_ok(s.irecv(1, 92, &token, sizeof token, t), t, "ready");
  expect_ok(s.wait(t), t, "ready");
  std::vector<unsigned char> buf(len);
  for (std::uint64_t k = 0; k < len; ++k) buf[k] = part_byte(5, k);
  request r;
  expect_ok(s.psend_begin(1, 91, len, r), r, "psend_begin");
  const auto before = s.stats().packets_sent;
  for (int i = n - 1; i >= 0; --i)  // last first: any order goes
    expect(s.psend_piece(r, static_cast<std::uint64_t>(i) * piece, buf.data() + i * piece, piece) == errc::ok,
           "psend_piece");
  expect_ok(s.wait(r), r, "partitioned send");
  const auto packets = s.stats().packets_sent - before;
  std::printf("partitioned: strategy %s sent %d pieces in %llu packets\n", std::string(s.strategy_name()).c_str(), n,
              static_cast<unsigned long long>(packets));
  if (s.strategy_name() == "default") expect(packets == static_cast<unsigned>(n), "default sends each piece alone");
  if (s.strategy_name() == "aggreg") expect(packets < static_cast<unsigned>(n) / 2, "aggreg groups ready pieces");
  return 0;
}

}  // namespace nmad_test::engine
