// Conformance test of every network driver of the build (those
// drivers/builtin.cpp registers, but the loopback one), against the driver
// interface contract (core/transfer/driver.hpp); conformance.hpp holds the
// fixtures, each file of this directory one part of the contract. Here:
// the registry, the capabilities a driver advertises (gather/scatter and
// zero-copy data checked by use), and connection set-up, including posting
// too early and peers that are dead or foreign.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "tests/driver_conformance/conformance.hpp"

using namespace nmad_test::conformance;

TEST_CASE("registry: an explicit list that find_driver searches") {
  REQUIRE(kRegistered);
  auto all = nmad::driver_registry();
  REQUIRE(!all.empty());
  CHECK(nmad::find_driver("tcp") != nullptr);
  CHECK(nmad::find_driver("no-such-driver") == nullptr);
  for (const auto& d : all) {
    INFO("driver ", label(d));
    CHECK(!d.description.empty());
    CHECK(nmad::find_driver(d.name) == &d);
    CHECK(d.create() != nullptr);
  }
  // Exactly one loopback driver (the self driver every session opens).
  CHECK(std::count_if(all.begin(), all.end(), [](const auto& d) { return d.loopback; }) == 1);
  CHECK(!network_drivers().empty());
  // Registering again changes nothing: same entries, same addresses.
  const auto* tcp = nmad::find_driver("tcp");
  nmad::register_builtin_drivers();
  CHECK(nmad::driver_registry().size() == all.size());
  CHECK(nmad::find_driver("tcp") == tcp);
  CHECK(!nmad::register_driver(*tcp));
  // A driver built against another version of the interface is refused.
  nmad::driver_descriptor other{"tcp-next", "tcp, built for a later interface", tcp->create};
  other.abi_version = nmad::kDriverAbiVersion + 1;
  CHECK(!nmad::register_driver(other));
  CHECK(nmad::find_driver("tcp-next") == nullptr);
  CHECK(nmad::driver_registry().size() == all.size());
}

TEST_CASE("caps are sane, and gather_scatter/zero_copy_data are honest") {
  for (const auto& d : network_drivers()) {
    INFO("driver ", label(d));
    pair_fixture p(d);
    const nmad::driver_caps& c = p.a->caps();
    CHECK(c.name == d.name);
    CHECK(c.max_packet_size >= 1024);
    CHECK(c.max_iov >= 1);
    CHECK(c.max_sends_in_flight >= 1);
    CHECK(c.latency_us > 0);
    CHECK(c.bandwidth_mbps > 0);
    CHECK(c.overhead_us >= 0);
    CHECK(!p.a->local_address().empty());
    CHECK(p.a->local_address() != p.b->local_address());
    CHECK(p.a->reachable(p.b->local_address()));
    CHECK(p.b->reachable(p.a->local_address()));

    if (c.gather_scatter) {
      // A packet of max_iov one-byte entries is accepted and arrives whole.
      CHECK(c.max_iov > 1);
      const std::size_t n = std::min(c.max_iov, c.max_packet_size);
      std::vector<std::vector<std::byte>> parts;
      for (std::size_t i = 0; i < n; ++i) parts.push_back({pattern(i, 3)});
      auto got = round_trip(p, *p.b, p.b2a, p.eb, p.ea, parts);
      CHECK(got == make_bytes(n, 3));
    }
    if (c.zero_copy_data) {
      // Deliberately breaks the "do not touch until done" rule to observe
      // that the driver takes the bytes from the caller's buffer when it
      // moves them, not from a snapshot taken at post time: the last byte of
      // a transfer much larger than any socket buffer, changed right after
      // the post and before any poll, arrives changed.
      const std::size_t n = 16 << 20;
      auto src = make_bytes(n, 5);
      std::vector<std::byte> dst(n);
      iovec s = iov_of(src.data(), n), r = iov_of(dst.data(), n);
      REQUIRE(p.a->post_recv_data(p.a2b, 42, {&r, 1}, tok(1)) == post_result::posted);
      REQUIRE(post_retry(p.both(), [&] { return p.b->post_send_data(p.b2a, 42, {&s, 1}, tok(2)); }));
      src[n - 1] = ~src[n - 1];
      REQUIRE(poll_until(p.both(), [&] { return !p.ea.recvs_done.empty(); }));
      CHECK(p.ea.recvs_done[0] == std::pair<void*, std::size_t>(tok(1), n));
      CHECK(dst == src);
    }
    CHECK(p.ea.failed.empty());
    CHECK(p.eb.failed.empty());
  }
}

TEST_CASE("connect: both sides report the right peer ranks") {
  for (const auto& d : network_drivers()) {
    INFO("driver ", label(d));
    {  // rank 1 connects to rank 0
      pair_fixture p(d);
      poll_for(p.both(), 50ms);  // nothing more comes
      REQUIRE(p.ea.connected.size() == 1);
      REQUIRE(p.eb.connected.size() == 1);
      CHECK(p.ea.connected[0].second == 1);
      CHECK(p.eb.connected[0] == std::pair<connection_id, int>(p.b2a, 0));
      CHECK(p.ea.failed.empty());
      CHECK(p.eb.failed.empty());
    }
    {  // the other way round works too
      recorder e0, e1;
      auto d0 = open_driver(d, 0, 2, e0), d1 = open_driver(d, 1, 2, e1);
      connection_id c = d0->connect(1, d1->local_address());
      REQUIRE(poll_until({d0.get(), d1.get()},
                         [&] { return !e0.connected.empty() && !e1.connected.empty(); }));
      CHECK(e0.connected[0] == std::pair<connection_id, int>(c, 1));
      CHECK(e1.connected[0].second == 0);
    }
    {  // a mesh of three, each connecting to the lower ranks
      recorder e[3];
      std::unique_ptr<driver> drv[3];
      for (int r = 0; r < 3; ++r) drv[r] = open_driver(d, r, 3, e[r]);
      for (int r = 1; r < 3; ++r)
        for (int j = 0; j < r; ++j) drv[r]->connect(j, drv[j]->local_address());
      REQUIRE(poll_until({drv[0].get(), drv[1].get(), drv[2].get()}, [&] {
        return e[0].connected.size() == 2 && e[1].connected.size() == 2 &&
               e[2].connected.size() == 2;
      }));
      for (int r = 0; r < 3; ++r) {
        std::vector<int> ranks;
        for (auto& [c, peer] : e[r].connected) ranks.push_back(peer);
        std::sort(ranks.begin(), ranks.end());
        std::vector<int> want;
        for (int j = 0; j < 3; ++j)
          if (j != r) want.push_back(j);
        CHECK(ranks == want);
      }
    }
  }
}

TEST_CASE("connect: posting too early retries; a dead or foreign peer fails") {
  for (const auto& d : network_drivers()) {
    INFO("driver ", label(d));
    recorder ea, eb;
    auto a = open_driver(d, 0, 2, ea), b = open_driver(d, 1, 2, eb);
    std::byte x{1};
    iovec v = iov_of(&x, 1);
    CHECK(b->post_send_packet(12345, {&v, 1}, nullptr) == post_result::failed);

    connection_id c = b->connect(0, a->local_address());
    CHECK(b->post_send_packet(c, {&v, 1}, nullptr) == post_result::retry);
    CHECK(b->post_recv_data(c, 1, {&v, 1}, nullptr) == post_result::retry);
    REQUIRE(poll_until({a.get(), b.get()}, [&] { return !eb.connected.empty(); }));

    {  // dead address
      recorder ez;
      std::string gone = open_driver(d, 0, 2, ez)->local_address();
      connection_id dead = b->connect(0, gone);
      REQUIRE(poll_until({a.get(), b.get()}, [&] { return !eb.failed.empty(); }));
      poll_for({a.get(), b.get()}, 50ms);
      REQUIRE(eb.failed.size() == 1);
      CHECK(eb.failed[0].first == dead);
      CHECK(eb.connected.size() == 1);
      CHECK(b->post_send_packet(dead, {&v, 1}, nullptr) == post_result::failed);
    }
    {  // a peer with another job key
      recorder ez;
      auto z = open_driver(d, 1, 2, ez, "some-other-job");
      connection_id bad = z->connect(0, a->local_address());
      REQUIRE(poll_until({a.get(), z.get()}, [&] { return !ez.failed.empty(); }));
      poll_for({a.get(), z.get()}, 50ms);
      REQUIRE(ez.failed.size() == 1);
      CHECK(ez.failed[0].first == bad);
      CHECK(ez.connected.empty());
      CHECK(ea.connected.size() == 1);  // only b
      CHECK(ea.failed.empty());
    }
  }
}
