// Driver conformance, the shm driver: peers on another host are not
// reachable (connecting to one fails, naming why), and without
// cross-memory attach data streams through the ring intact.
#include <doctest/doctest.h>

#include <cstddef>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "tests/driver_conformance/conformance.hpp"

using namespace nmad_test::conformance;

TEST_CASE("shm: peers on another host are not reachable, and connecting to one fails") {
  const auto* shm = nmad::find_driver("shm");
  REQUIRE(shm != nullptr);
  recorder ea;
  auto a = open_driver(*shm, 1, 2, ea);
  const std::string other = "shm:some-other-host/12345678:/nmad-db-1-0-00000000";
  CHECK_FALSE(a->reachable(other));
  CHECK_FALSE(a->reachable("127.0.0.1:5000"));
  connection_id c = a->connect(0, other);
  REQUIRE(poll_until({a.get()}, [&] { return !ea.failed.empty(); }));
  CHECK(ea.failed[0].first == c);
  CHECK(ea.failed[0].second.find("another host") != std::string::npos);
}

TEST_CASE("shm: without cross-memory attach, data streams through the ring intact") {
  const auto* shm = nmad::find_driver("shm");
  REQUIRE(shm != nullptr);
  ::setenv("NMAD_SHM_CMA", "0", 1);
  pair_fixture p(*shm);
  ::unsetenv("NMAD_SHM_CMA");
  const std::size_t n = (8 << 20) + 3;
  auto src = make_bytes(n, 61);
  std::vector<std::byte> d1(1000), d2(n - 1000 - 5), d3(5 + 7);
  iovec r[3] = {iov_of(d1.data(), d1.size()), iov_of(d2.data(), d2.size()), iov_of(d3.data(), d3.size())};
  iovec s = iov_of(src.data(), n);
  REQUIRE(p.a->post_recv_data(p.a2b, 9, {r, 3}, tok(1)) == post_result::posted);
  REQUIRE(post_retry(p.both(), [&] { return p.b->post_send_data(p.b2a, 9, {&s, 1}, tok(2)); }));
  REQUIRE(poll_until(p.both(), [&] { return !p.ea.recvs_done.empty() && !p.eb.sends_done.empty(); }));
  CHECK(p.ea.recvs_done[0] == std::pair<void*, std::size_t>(tok(1), n));
  std::vector<std::byte> got(d1);
  got.insert(got.end(), d2.begin(), d2.end());
  got.insert(got.end(), d3.begin(), d3.begin() + 5);
  CHECK(got == src);
  CHECK(p.ea.failed.empty());
}
