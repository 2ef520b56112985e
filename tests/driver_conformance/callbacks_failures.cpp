// Driver conformance: callbacks and connection failures. Sends posted from
// on_send_done never stall on the in-flight limit, callbacks may re-enter
// the driver, a peer destroyed mid-way fails its connection exactly once,
// and close_connection is silent locally while the peer's side fails.
#include <doctest/doctest.h>

#include <cstddef>
#include <vector>

#include "tests/driver_conformance/conformance.hpp"

using namespace nmad_test::conformance;

TEST_CASE("a chain of sends posted from on_send_done never stalls on the in-flight limit") {
  for (const auto& d : network_drivers()) {
    INFO("driver ", label(d));
    pair_fixture p(d);
    // The engine posts its next packet from the completion of the previous
    // one; reported sends must not count as in flight any more.
    constexpr int chain = 500;
    int posted = 1, refused = 0;
    std::uint32_t value = 0;
    iovec v = iov_of(&value, sizeof value);
    p.eb.send_hook = [&](void*) {
      if (posted == chain) return;
      if (p.b->post_send_packet(p.b2a, {&v, 1}, tok(posted)) == post_result::posted) ++posted;
      else ++refused;
    };
    REQUIRE(p.b->post_send_packet(p.b2a, {&v, 1}, tok(0)) == post_result::posted);
    REQUIRE(poll_until(p.both(), [&] { return static_cast<int>(p.ea.packets.size()) == chain || refused > 0; }));
    CHECK(refused == 0);
    CHECK(p.ea.packets.size() == chain);
  }
}

TEST_CASE("callbacks may re-enter the driver (rendezvous driven from on_packet)") {
  for (const auto& d : network_drivers()) {
    INFO("driver ", label(d));
    pair_fixture p(d);
    // b announces a transfer (RTS); a posts the receive and answers (RTR)
    // from inside on_packet; b sends the data from inside on_packet.
    const std::size_t n = 1 << 20;
    auto src = make_bytes(n, 30);
    std::vector<std::byte> dst(n);
    iovec s = iov_of(src.data(), n), r = iov_of(dst.data(), n);
    std::uint64_t rts = 99, rtr = 99;
    iovec rts_iov = iov_of(&rts, sizeof rts), rtr_iov = iov_of(&rtr, sizeof rtr);
    int posted_inside = 0;
    p.ea.packet_hook = [&](connection_id c, std::span<const std::byte>) {
      posted_inside += p.a->post_recv_data(c, rts, {&r, 1}, tok(1)) == post_result::posted;
      posted_inside += p.a->post_send_packet(c, {&rtr_iov, 1}, tok(2)) == post_result::posted;
    };
    p.eb.packet_hook = [&](connection_id c, std::span<const std::byte>) {
      posted_inside += p.b->post_send_data(c, rtr, {&s, 1}, tok(3)) == post_result::posted;
    };
    REQUIRE(p.b->post_send_packet(p.b2a, {&rts_iov, 1}, tok(4)) == post_result::posted);
    REQUIRE(poll_until(p.both(), [&] {
      return p.ea.recvs_done.size() == 1 && p.eb.sends_done.size() == 2;
    }));
    CHECK(posted_inside == 3);
    CHECK(dst == src);
    CHECK(p.ea.recvs_done[0] == std::pair<void*, std::size_t>(tok(1), n));
  }
}

TEST_CASE("a peer destroyed mid-way fails its connection exactly once") {
  for (const auto& d : network_drivers()) {
    INFO("driver ", label(d));
    pair_fixture p(d);
    std::vector<std::byte> room(1 << 20), bytes = make_bytes(1 << 20, 1);
    iovec r = iov_of(room.data(), room.size()), s = iov_of(bytes.data(), bytes.size());
    REQUIRE(p.a->post_recv_data(p.a2b, 5, {&r, 1}, tok(1)) == post_result::posted);
    // A send the peer never drains: it dies first.
    REQUIRE(p.a->post_send_data(p.a2b, 6, {&s, 1}, tok(2)) == post_result::posted);
    CHECK(p.a->failure_reason(p.a2b).empty());  // nothing known broken yet
    p.b.reset();
    REQUIRE(poll_until({p.a.get()}, [&] { return !p.ea.failed.empty(); }));
    poll_for({p.a.get()}, 100ms);
    REQUIRE(p.ea.failed.size() == 1);
    CHECK(p.ea.failed[0].first == p.a2b);
    CHECK(!p.ea.failed[0].second.empty());
    CHECK(p.ea.recvs_done.empty());  // pending operations dropped silently
    CHECK(p.a->post_send_packet(p.a2b, {&s, 1}, nullptr) == post_result::failed);
    CHECK(p.a->post_send_data(p.a2b, 7, {&s, 1}, nullptr) == post_result::failed);
    CHECK(p.a->post_recv_data(p.a2b, 8, {&r, 1}, nullptr) == post_result::failed);
    // A refused post can be explained: the same cause the failure gave.
    CHECK(p.a->failure_reason(p.a2b) == p.ea.failed[0].second);
  }
}

TEST_CASE("close_connection is silent locally and fails the peer's side") {
  for (const auto& d : network_drivers()) {
    INFO("driver ", label(d));
    pair_fixture p(d);
    p.a->close_connection(p.a2b);
    REQUIRE(poll_until(p.both(), [&] { return !p.eb.failed.empty(); }));
    poll_for(p.both(), 50ms);
    CHECK(p.eb.failed.size() == 1);
    CHECK(p.eb.failed[0].first == p.b2a);
    CHECK(p.ea.failed.empty());
    std::byte x{};
    iovec v = iov_of(&x, 1);
    CHECK(p.a->post_send_packet(p.a2b, {&v, 1}, nullptr) == post_result::failed);
    CHECK(p.b->post_send_packet(p.b2a, {&v, 1}, nullptr) == post_result::failed);
    CHECK(p.a->failure_reason(p.a2b) == "connection closed");
    CHECK(p.b->failure_reason(p.b2a) == p.eb.failed[0].second);
  }
}
