// Driver conformance: packets (post_send_packet, send_inline, on_packet).
// Gather lists arrive whole, a thousand packets in order, bursts each way
// while the receiver does not poll (flow control: nothing lost, reordered or
// refused for good), and the largest packet a driver takes, a larger one
// refused without harm.
#include <doctest/doctest.h>

#include <cstddef>
#include <cstring>
#include <vector>

#include "tests/driver_conformance/conformance.hpp"

using namespace nmad_test::conformance;

TEST_CASE("packet round trip with 3-entry gather lists") {
  for (const auto& d : network_drivers()) {
    INFO("driver ", label(d));
    pair_fixture p(d);
    std::vector<std::vector<std::byte>> parts = {make_bytes(5, 1), make_bytes(1000, 2),
                                                 make_bytes(37, 3)};
    std::vector<std::byte> whole;
    for (auto& part : parts) whole.insert(whole.end(), part.begin(), part.end());

    CHECK(round_trip(p, *p.b, p.b2a, p.eb, p.ea, parts) == whole);
    CHECK(p.ea.packets.back().first == p.a2b);
    CHECK(round_trip(p, *p.a, p.a2b, p.ea, p.eb, parts) == whole);
    CHECK(p.eb.packets.back().first == p.b2a);
    poll_for(p.both(), 20ms);
    CHECK(p.ea.packets.size() == 1);
    CHECK(p.eb.packets.size() == 1);
    CHECK(p.ea.sends_done.size() == 1);
    CHECK(p.eb.sends_done.size() == 1);
  }
}

TEST_CASE("1000 packets arrive in order with the right contents") {
  for (const auto& d : network_drivers()) {
    INFO("driver ", label(d));
    pair_fixture p(d);
    constexpr std::size_t kCount = 1000;
    std::vector<std::vector<std::byte>> bufs;
    std::vector<iovec> iovs(kCount);
    for (std::size_t i = 0; i < kCount; ++i) {
      bufs.push_back(make_bytes(8 + (i * 37) % 3000, static_cast<unsigned>(i)));
      std::memcpy(bufs[i].data(), &i, sizeof i);
      iovs[i] = iov_of(bufs[i].data(), bufs[i].size());
    }
    for (std::size_t i = 0; i < kCount; ++i)
      REQUIRE(post_retry(p.both(), [&] {
        return p.b->post_send_packet(p.b2a, {&iovs[i], 1}, tok(i + 1));
      }));
    REQUIRE(poll_until(p.both(), [&] {
      return p.ea.packets.size() == kCount && p.eb.sends_done.size() == kCount;
    }));
    for (std::size_t i = 0; i < kCount; ++i) {
      CHECK(p.ea.packets[i].first == p.a2b);
      CHECK(p.ea.packets[i].second == bufs[i]);
      CHECK(p.eb.sends_done[i] == tok(i + 1));  // one connection: in post order
    }
  }
}

// Bursts both ways while the receiving side does not poll: each side posts
// as many packets as its driver takes (polling only itself), then both are
// polled until everything is in. Nothing may be lost, reordered or failed,
// round after round: a driver that lets a sender run past the receiver's
// buffers loses packets, stalls or refuses here. Every third packet goes by
// send_inline where the driver has it (falling back to post_send_packet as
// the engine does). Sizes up to 4000 B: sends the shm provider completes at
// once (inline and inject), so only credits hold a sender back: over ofi
// the sender must have waited for credit, and been given it back.
TEST_CASE("bursts of 2000 packets each way, receivers not polling meanwhile: complete and in order, 3 rounds") {
  for (const auto& d : network_drivers()) {
    INFO("driver ", label(d));
    pair_fixture p(d);
    constexpr std::size_t kCount = 2000;
    std::vector<std::vector<std::byte>> bufs[2];
    std::vector<iovec> iovs[2];
    for (int side = 0; side < 2; ++side)
      for (std::size_t i = 0; i < kCount; ++i) {
        bufs[side].push_back(make_bytes(8 + (i * 53) % 4000, static_cast<unsigned>(i * 2 + side)));
        std::memcpy(bufs[side][i].data(), &i, sizeof i);
      }
    for (int side = 0; side < 2; ++side)
      for (auto& b : bufs[side]) iovs[side].push_back(iov_of(b.data(), b.size()));
    driver* drv[2] = {p.a.get(), p.b.get()};
    const connection_id conn[2] = {p.a2b, p.b2a};
    recorder* ev[2] = {&p.ea, &p.eb};
    std::size_t inlined[2] = {0, 0};
    auto post = [&](int side, std::size_t i) {
      std::span<const iovec> one(&iovs[side][i], 1);
      if (i % 3 == 0 && iovs[side][i].iov_len <= drv[side]->caps().max_inline) {
        const post_result r = drv[side]->send_inline(conn[side], one);
        if (r == post_result::posted) ++inlined[side];
        if (r != post_result::retry) return r;
      }
      return drv[side]->post_send_packet(conn[side], one, tok(i + 1));
    };
    for (int round = 0; round < 3; ++round) {
      CAPTURE(round);
      std::size_t next[2] = {0, 0};
      inlined[0] = inlined[1] = 0;
      const std::size_t got0[2] = {p.ea.packets.size(), p.eb.packets.size()};
      const std::size_t sent0[2] = {p.ea.sends_done.size(), p.eb.sends_done.size()};
      bool failed = false;
      // Each side alone: posts until its driver refuses for 20 ms.
      for (int side = 0; side < 2; ++side) {
        auto quiet_since = steady::now();
        while (next[side] < kCount && steady::now() - quiet_since < 20ms) {
          const post_result r = post(side, next[side]);
          if (r == post_result::failed) failed = true;
          if (r != post_result::retry) {
            ++next[side];
            quiet_since = steady::now();
            continue;
          }
          drv[side]->poll();
        }
      }
      REQUIRE_FALSE(failed);
      // Then both, until every packet is in.
      REQUIRE(poll_until(p.both(), [&] {
        for (int side = 0; side < 2; ++side)
          while (next[side] < kCount) {
            const post_result r = post(side, next[side]);
            if (r == post_result::failed) failed = true;
            if (r != post_result::posted) break;
            ++next[side];
          }
        return failed ||
               (p.ea.packets.size() == got0[0] + kCount && p.eb.packets.size() == got0[1] + kCount &&
                p.ea.sends_done.size() == sent0[0] + kCount - inlined[0] &&
                p.eb.sends_done.size() == sent0[1] + kCount - inlined[1]);
      }));
      REQUIRE_FALSE(failed);
      for (int to = 0; to < 2; ++to) {
        const int from = 1 - to;
        std::size_t wrong = 0;
        for (std::size_t i = 0; i < kCount; ++i) wrong += ev[to]->packets[got0[to] + i].second != bufs[from][i];
        CHECK(wrong == 0);
      }
      CHECK(p.ea.failed.empty());
      CHECK(p.eb.failed.empty());
    }
    if (d.name == "ofi") {
      for (driver* x : drv) {
        const auto st = nmad::ofi_driver_flow_stats(*x);
        CAPTURE(st.window);
        CAPTURE(st.packet_buffers);
        CHECK(st.window >= 2);
        CHECK(st.window < st.packet_buffers);
        CHECK(st.credit_waits > 0);  // 2000 packets: beyond any window
        CHECK(st.credits_received > 0);
      }
    }
  }
}

TEST_CASE("max-size packet; larger is refused without harm") {
  for (const auto& d : network_drivers()) {
    INFO("driver ", label(d));
    pair_fixture p(d);
    const std::size_t max = p.b->caps().max_packet_size;
    std::vector<std::vector<std::byte>> parts = {make_bytes(max, 9)};
    CHECK(round_trip(p, *p.b, p.b2a, p.eb, p.ea, parts) == parts[0]);

    auto big = make_bytes(max + 1, 1);
    iovec v = iov_of(big.data(), big.size());
    CHECK(p.b->post_send_packet(p.b2a, {&v, 1}, nullptr) == post_result::failed);
    std::vector<std::vector<std::byte>> small = {make_bytes(10, 4)};
    CHECK(round_trip(p, *p.b, p.b2a, p.eb, p.ea, small) == small[0]);
    CHECK(p.ea.failed.empty());
    CHECK(p.eb.failed.empty());
  }
}
