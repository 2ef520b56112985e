// Driver conformance: data transfers by cookie (post_recv_data,
// post_send_data, post_get). Receives beyond the driver's room are retried,
// never failed; 8 MiB land in a scattered iovec; rdma_get pulls the peer's
// memory where the driver advertises it and is refused elsewhere; cookies
// posted out of order, mixed with packets, each find their transfer.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "tests/driver_conformance/conformance.hpp"

using namespace nmad_test::conformance;

// The engine posts a data receive before it tells the peer to send (the
// ready-to-receive); a driver whose transport takes only so many posted
// receives answers retry beyond them, never failed, and takes the rest as
// earlier ones complete. 1500 receives posted at once (ofi over shm: its
// provider's queue holds 1024 entries, half of them packet buffers).
TEST_CASE("1500 data receives posted at once: retry beyond the driver's room, never failed; every byte arrives") {
  for (const auto& d : network_drivers()) {
    INFO("driver ", label(d));
    pair_fixture p(d);
    constexpr std::size_t kCount = 1500, kLen = 1000;
    std::vector<std::vector<std::byte>> src, dst(kCount, std::vector<std::byte>(kLen));
    std::vector<iovec> siov, riov;
    for (std::size_t i = 0; i < kCount; ++i) src.push_back(make_bytes(kLen, static_cast<unsigned>(i + 7)));
    for (std::size_t i = 0; i < kCount; ++i) {
      siov.push_back(iov_of(src[i].data(), kLen));
      riov.push_back(iov_of(dst[i].data(), kLen));
    }
    std::size_t posted = 0, sent = 0, retries = 0, failures = 0;
    // Post as many as the driver takes, without the peer sending anything.
    while (posted < kCount) {
      const post_result r = p.a->post_recv_data(p.a2b, 1000 + posted, {&riov[posted], 1}, tok(posted + 1));
      if (r == post_result::failed) ++failures;
      if (r != post_result::posted) break;
      ++posted;
    }
    REQUIRE(failures == 0);
    MESSAGE(label(d) << ": " << posted << " data receives taken at once");
    // The peer sends what was posted; refused receives are posted again as
    // room comes.
    REQUIRE(poll_until(p.both(), [&] {
      while (sent < posted) {
        const post_result r = p.b->post_send_data(p.b2a, 1000 + sent, {&siov[sent], 1}, tok(sent + 1));
        if (r == post_result::failed) ++failures;
        if (r != post_result::posted) break;
        ++sent;
      }
      while (posted < kCount) {
        const post_result r = p.a->post_recv_data(p.a2b, 1000 + posted, {&riov[posted], 1}, tok(posted + 1));
        if (r == post_result::failed) ++failures;
        if (r == post_result::retry) ++retries;
        if (r != post_result::posted) break;
        ++posted;
      }
      return failures > 0 || p.ea.recvs_done.size() == kCount;
    }));
    REQUIRE(failures == 0);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < kCount; ++i) wrong += dst[i] != src[i];
    CHECK(wrong == 0);
    CHECK(p.ea.failed.empty());
    CHECK(p.eb.failed.empty());
    if (d.name == "ofi") {
      const auto st = nmad::ofi_driver_flow_stats(*p.a);
      CHECK(st.data_recv_limit > 0);
      CHECK(st.data_recvs == 0);  // all completed
      if (d.description == std::string_view("shm")) {
        CHECK(st.data_recv_limit + st.packet_buffers <= 1024);  // the provider's receive queue
        CHECK(retries > 0);
        CHECK(st.data_recv_waits > 0);
      }
    }
  }
}

TEST_CASE("8 MiB of data into a scattered 3-entry iovec") {
  for (const auto& d : network_drivers()) {
    INFO("driver ", label(d));
    pair_fixture p(d);
    const std::size_t n = 8 << 20;
    const std::size_t guard = 64;
    auto src = make_bytes(n, 11);
    // Receive regions: 1 MiB+3, 4 MiB-7, the rest, separated by guard gaps.
    const std::size_t r0 = (1 << 20) + 3, r1 = (4 << 20) - 7, r2 = n - r0 - r1;
    std::vector<std::byte> dst(n + 4 * guard, std::byte{0xEE});
    iovec riov[3] = {iov_of(&dst[guard], r0), iov_of(&dst[2 * guard + r0], r1),
                     iov_of(&dst[3 * guard + r0 + r1], r2)};
    // Send from a different split: 5 bytes, 6 MiB, the rest.
    iovec siov[3] = {iov_of(&src[0], 5), iov_of(&src[5], 6 << 20),
                     iov_of(&src[5 + (6 << 20)], n - 5 - (6 << 20))};
    const std::uint64_t cookie = 0xC0FFEE0000000001ull;
    REQUIRE(post_retry(p.both(), [&] { return p.a->post_recv_data(p.a2b, cookie, riov, tok(1)); }));
    REQUIRE(post_retry(p.both(), [&] { return p.b->post_send_data(p.b2a, cookie, siov, tok(2)); }));
    REQUIRE(poll_until(p.both(), [&] {
      return !p.ea.recvs_done.empty() && !p.eb.sends_done.empty();
    }));
    CHECK(p.ea.recvs_done[0] == std::pair<void*, std::size_t>(tok(1), n));
    CHECK(p.eb.sends_done[0] == tok(2));
    std::vector<std::byte> got;
    for (const iovec& v : riov) {
      auto* b = static_cast<std::byte*>(v.iov_base);
      got.insert(got.end(), b, b + v.iov_len);
    }
    CHECK(got == src);
    std::size_t bad_guards = 0;
    for (std::size_t g : {std::size_t{0}, guard + r0, 2 * guard + r0 + r1, 3 * guard + n})
      for (std::size_t i = 0; i < guard; ++i) bad_guards += dst[g + i] != std::byte{0xEE};
    CHECK(bad_guards == 0);
  }
}

// rdma_get is advertised exactly when post_get works: the receiver copies
// the peer's bytes itself (into a scattered list) at the address and key
// the peer's expose() gave, the completion comes from poll(), the peer's
// engine takes no part (ofi's peer driver is polled: with manual progress
// its provider serves the read only then; it reports nothing). Drivers
// without it refuse post_get.
TEST_CASE("rdma_get: post_get pulls the peer's memory into a scattered iovec, or is refused") {
  for (const auto& d : network_drivers()) {
    INFO("driver ", label(d));
    pair_fixture p(d);
    const std::size_t n = (3 << 20) + 5;
    auto src = make_bytes(n, 23);
    std::vector<std::byte> dst(n + 64, std::byte{0xEE});
    iovec riov[2] = {iov_of(&dst[0], 1000), iov_of(&dst[1032], n - 1000)};
    std::uint64_t remote = reinterpret_cast<std::uintptr_t>(src.data());
    std::uint32_t key = 0;
    if (p.b->caps().rdma_get) REQUIRE(p.b->expose(src.data(), n, remote, key));
    const std::size_t peer_events = p.eb.total();
    const post_result r = p.a->post_get(p.a2b, remote, key, riov, tok(9));
    if (!p.a->caps().rdma_get) {
      CHECK(r == post_result::failed);
      continue;
    }
    REQUIRE(r == post_result::posted);
    const drivers pollers = d.name == "ofi" ? p.both() : drivers{p.a.get()};
    REQUIRE(poll_until(pollers, [&] { return !p.ea.recvs_done.empty(); }));
    p.b->unexpose(src.data(), n);
    CHECK(p.ea.recvs_done[0] == std::pair<void*, std::size_t>(tok(9), n));
    std::vector<std::byte> got(dst.begin(), dst.begin() + 1000);
    got.insert(got.end(), dst.begin() + 1032, dst.begin() + 1032 + static_cast<std::ptrdiff_t>(n - 1000));
    CHECK(got == src);
    std::size_t bad_guard = 0;
    for (std::size_t i = 1000; i < 1032; ++i) bad_guard += dst[i] != std::byte{0xEE};
    CHECK(bad_guard == 0);
    CHECK(p.eb.total() == peer_events);  // the peer took no part
  }
}

TEST_CASE("several cookies posted out of order, mixed with packets") {
  for (const auto& d : network_drivers()) {
    INFO("driver ", label(d));
    pair_fixture p(d);
    const std::uint64_t cookies[] = {7, 3, 11, 5, 0};
    const std::size_t sizes[] = {100000, 1, 300000, 65536 * 3 + 1, 0};
    std::vector<std::vector<std::byte>> src, dst;
    std::vector<iovec> riov, siov;
    for (int i = 0; i < 5; ++i) {
      src.push_back(make_bytes(sizes[i], 20 + i));
      dst.emplace_back(sizes[i] + 10);  // posted room exceeds what comes
    }
    for (int i = 0; i < 5; ++i) {
      riov.push_back(iov_of(dst[i].data(), dst[i].size()));
      siov.push_back(iov_of(src[i].data(), src[i].size()));
    }
    for (int i = 0; i < 5; ++i)
      REQUIRE(p.a->post_recv_data(p.a2b, cookies[i], {&riov[i], 1}, tok(100 + i)) ==
              post_result::posted);
    CHECK(p.a->post_recv_data(p.a2b, cookies[0], {&riov[0], 1}, nullptr) ==
          post_result::failed);  // already posted
    std::byte marker{0x42};
    iovec m = iov_of(&marker, 1);
    for (int i : {1, 2, 4, 0, 3}) {
      REQUIRE(post_retry(p.both(), [&] {
        return p.b->post_send_data(p.b2a, cookies[i], {&siov[i], 1}, tok(200 + i));
      }));
      REQUIRE(post_retry(p.both(), [&] { return p.b->post_send_packet(p.b2a, {&m, 1}, tok(300)); }));
    }
    REQUIRE(poll_until(p.both(), [&] {
      return p.ea.recvs_done.size() == 5 && p.eb.sends_done.size() == 10 &&
             p.ea.packets.size() == 5;
    }));
    for (auto [token, n] : p.ea.recvs_done) {
      int i = static_cast<int>(reinterpret_cast<std::uintptr_t>(token)) - 100;
      REQUIRE(i >= 0);
      REQUIRE(i < 5);
      CHECK(n == sizes[i]);
      CHECK(std::equal(src[i].begin(), src[i].end(), dst[i].begin()));
    }
    CHECK(p.ea.failed.empty());
  }
}
