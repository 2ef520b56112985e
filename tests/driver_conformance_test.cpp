// Conformance test of every network driver of the build (those
// drivers/builtin.cpp registers, but the loopback one): two (or three)
// driver instances live in this one process, each with its own event
// recorder, and are polled in turn from one thread. Every wait is bounded
// (kLimit): a driver that hangs fails a check instead of hanging the test.
//
// The "tcp:" cases at the end talk to the tcp driver over raw sockets, using
// its wire format (drivers/tcp/tcp_wire.hpp), to play a foreign or malicious
// peer.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/common/random.hpp"
#include "core/transfer/driver.hpp"
#include "drivers/builtin.hpp"
#include "drivers/ofi/ofi_driver.hpp"
#include "drivers/ofi/ofi_shm_segment.hpp"
#include "drivers/tcp/tcp_wire.hpp"

namespace {

using namespace std::chrono_literals;
using nmad::connection_id;
using nmad::driver;
using nmad::post_result;
using steady = std::chrono::steady_clock;
namespace wire = nmad::tcp_wire;

// Registered before any test runs, as libnmad's session::create would.
const bool kRegistered = (nmad::register_builtin_drivers(), true);

// The ofi driver runs once per provider: tcp;ofi_rxm and shm must open
// here; udp;ofi_rxd runs where it opens (the description names the provider).
std::unique_ptr<driver> ofi_tcp() { return nmad::make_ofi_driver_for("tcp;ofi_rxm"); }
std::unique_ptr<driver> ofi_shm() { return nmad::make_ofi_driver_for("shm"); }
std::unique_ptr<driver> ofi_udp() { return nmad::make_ofi_driver_for("udp;ofi_rxd"); }

struct null_events final : nmad::driver_events {
  void on_connected(connection_id, int) override {}
  void on_packet(connection_id, std::span<const std::byte>) override {}
  void on_send_done(void*) override {}
  void on_recv_data_done(void*, std::size_t) override {}
  void on_connection_failed(connection_id, std::string_view) override {}
};

bool opens(std::unique_ptr<driver> (*make)(), std::string* why = nullptr) {
  null_events ev;
  try {
    make()->open({0, 2, "probe", &ev});
    return true;
  } catch (const std::exception& e) {
    if (why) *why = e.what();
    return false;
  }
}

// The drivers under test: the registered network drivers (the loopback one
// reaches only its own process, so pairs of it cannot be formed), ofi once
// per provider.
std::vector<nmad::driver_descriptor> network_drivers() {
  static const bool udp_works = [] {
    std::string why;
    const bool ok = opens(&ofi_udp, &why);
    if (!ok) MESSAGE("ofi over udp;ofi_rxd left out: " << why);
    return ok;
  }();
  std::vector<nmad::driver_descriptor> out;
  for (const auto& d : nmad::driver_registry()) {
    if (d.loopback) continue;
    if (d.name == "ofi") {
      out.push_back({"ofi", "tcp;ofi_rxm", &ofi_tcp});
      out.push_back({"ofi", "shm", &ofi_shm});
      if (udp_works) out.push_back({"ofi", "udp;ofi_rxd", &ofi_udp});
      continue;
    }
    out.push_back(d);
  }
  return out;
}

// What INFO prints for a driver under test.
std::string label(const nmad::driver_descriptor& d) {
  return d.name == "ofi" ? "ofi over " + std::string(d.description) : std::string(d.name);
}

constexpr auto kLimit = 10s;
const std::string kKey = "conformance-job-key-0123456789";

struct recorder final : nmad::driver_events {
  std::vector<std::pair<connection_id, int>> connected;
  std::vector<std::pair<connection_id, std::vector<std::byte>>> packets;
  std::vector<void*> sends_done;
  std::vector<std::pair<void*, std::size_t>> recvs_done;
  std::vector<std::pair<connection_id, std::string>> failed;
  std::function<void(connection_id, std::span<const std::byte>)> packet_hook;
  std::function<void(void*)> send_hook;

  void on_connected(connection_id c, int rank) override { connected.emplace_back(c, rank); }
  void on_packet(connection_id c, std::span<const std::byte> p) override {
    packets.emplace_back(c, std::vector<std::byte>(p.begin(), p.end()));
    if (packet_hook) packet_hook(c, p);
  }
  void on_send_done(void* token) override {
    sends_done.push_back(token);
    if (send_hook) send_hook(token);
  }
  void on_recv_data_done(void* token, std::size_t n) override { recvs_done.emplace_back(token, n); }
  void on_connection_failed(connection_id c, std::string_view why) override {
    failed.emplace_back(c, std::string(why));
  }
  std::size_t total() const {
    return connected.size() + packets.size() + sends_done.size() + recvs_done.size() +
           failed.size();
  }
};

using drivers = std::vector<driver*>;

// Polls every driver until pred() holds; false if `limit` passed first.
template <class Pred>
bool poll_until(const drivers& ds, Pred pred, std::chrono::milliseconds limit = kLimit) {
  const auto end = steady::now() + limit;
  while (!pred()) {
    if (steady::now() > end) return false;
    for (driver* d : ds) d->poll();
  }
  return true;
}

void poll_for(const drivers& ds, std::chrono::milliseconds d) {
  poll_until(ds, [] { return false; }, d);
}

// Calls post() until it is not `retry`, polling in between. True if posted.
template <class Post>
bool post_retry(const drivers& ds, Post post) {
  const auto end = steady::now() + kLimit;
  for (;;) {
    post_result r = post();
    if (r != post_result::retry) return r == post_result::posted;
    if (steady::now() > end) return false;
    for (driver* d : ds) d->poll();
  }
}

std::unique_ptr<driver> open_driver(const nmad::driver_descriptor& d, int rank, int size,
                                    recorder& ev, const std::string& key = kKey) {
  auto drv = d.create();
  REQUIRE(drv);
  drv->open({rank, size, key, &ev});
  return drv;
}

// Rank 0 (a) and rank 1 (b); b connects to a, as the engine does (j < own).
struct pair_fixture {
  recorder ea, eb;
  std::unique_ptr<driver> a, b;
  connection_id a2b = nmad::invalid_connection, b2a = nmad::invalid_connection;

  explicit pair_fixture(const nmad::driver_descriptor& d) {
    a = open_driver(d, 0, 2, ea);
    b = open_driver(d, 1, 2, eb);
    b2a = b->connect(0, a->local_address());
    REQUIRE(poll_until({a.get(), b.get()},
                       [&] { return !ea.connected.empty() && !eb.connected.empty(); }));
    a2b = ea.connected[0].first;
  }
  drivers both() { return {a.get(), b.get()}; }
};

std::byte pattern(std::size_t i, unsigned seed) {
  return static_cast<std::byte>((i * 131 + (i >> 11) + seed * 7) & 0xff);
}

std::vector<std::byte> make_bytes(std::size_t n, unsigned seed) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = pattern(i, seed);
  return v;
}

iovec iov_of(const void* p, std::size_t n) { return {const_cast<void*>(p), n}; }

void* tok(std::uintptr_t n) { return reinterpret_cast<void*>(n); }

// Sends one packet made of `parts` from `from` and returns what `to` got.
std::vector<std::byte> round_trip(pair_fixture& p, driver& from, connection_id conn,
                                  recorder& from_ev, recorder& to_ev,
                                  std::vector<std::vector<std::byte>>& parts) {
  std::vector<iovec> iov;
  for (auto& part : parts) iov.push_back(iov_of(part.data(), part.size()));
  const std::size_t before = to_ev.packets.size(), sends = from_ev.sends_done.size();
  REQUIRE(post_retry(p.both(), [&] { return from.post_send_packet(conn, iov, tok(77)); }));
  REQUIRE(poll_until(p.both(), [&] {
    return to_ev.packets.size() > before && from_ev.sends_done.size() > sends;
  }));
  CHECK(from_ev.sends_done.back() == tok(77));
  return to_ev.packets.back().second;
}

}  // namespace

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

// ---- tcp: foreign and malicious peers over raw sockets ----------------------

namespace {

struct env_guard {
  std::string name;
  env_guard(std::string n, const char* value) : name(std::move(n)) {
    ::setenv(name.c_str(), value, 1);
  }
  ~env_guard() { ::unsetenv(name.c_str()); }
};

sockaddr_in parse(const std::string& addr) {
  auto colon = addr.rfind(':');
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<std::uint16_t>(std::stoi(addr.substr(colon + 1))));
  REQUIRE(inet_pton(AF_INET, addr.substr(0, colon).c_str(), &sa.sin_addr) == 1);
  return sa;
}

// A blocking client socket playing a foreign peer.
struct raw_client {
  int fd = -1;
  std::vector<char> in;  // bytes received so far

  explicit raw_client(const std::string& addr) {
    sockaddr_in sa = parse(addr);
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
  }
  ~raw_client() { ::close(fd); }

  void send(const void* p, std::size_t n) {  // errors ignored: peer may be gone
    (void)::send(fd, p, n, MSG_NOSIGNAL);
  }
  template <class T>
  void send(const T& v) { send(&v, sizeof v); }

  void hello(int rank, const std::string& key) {
    wire::hello h;
    h.rank = rank;
    h.key_len = static_cast<std::uint32_t>(key.size());
    std::string bytes(reinterpret_cast<const char*>(&h), sizeof h);
    bytes += key;
    send(bytes.data(), bytes.size());
  }

  // Reads what is there; true once the peer closed (EOF or reset).
  bool closed_by_peer() {
    char buf[4096];
    for (;;) {
      ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n == 0) return true;
      if (n < 0) return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
      in.insert(in.end(), buf, buf + n);
    }
  }
};

// A tcp driver at rank 0 of 2 that refuses what a raw client sends, reports
// nothing, and still accepts a proper peer afterwards.
void expect_refused(const std::function<void(raw_client&)>& misbehave) {
  const auto* tcp = nmad::find_driver("tcp");
  REQUIRE(tcp);
  recorder ea, eb;
  auto a = open_driver(*tcp, 0, 2, ea);
  {
    raw_client raw(a->local_address());
    misbehave(raw);
    REQUIRE(poll_until({a.get()}, [&] { return raw.closed_by_peer(); }));
    CHECK(raw.in.empty());  // not even an ack
  }
  poll_for({a.get()}, 50ms);
  CHECK(ea.total() == 0);

  auto b = open_driver(*tcp, 1, 2, eb);
  connection_id c = b->connect(0, a->local_address());
  REQUIRE(poll_until({a.get(), b.get()},
                     [&] { return ea.connected.size() == 1 && eb.connected.size() == 1; }));
  CHECK(ea.connected[0].second == 1);
  std::uint32_t x = 0xABCD;
  iovec v = iov_of(&x, sizeof x);
  REQUIRE(b->post_send_packet(c, {&v, 1}, nullptr) == post_result::posted);
  REQUIRE(poll_until({a.get(), b.get()}, [&] { return ea.packets.size() == 1; }));
  CHECK(ea.failed.empty());
}

}  // namespace

TEST_CASE("tcp: a hello with a wrong job key is refused, the job is unaffected") {
  SUBCASE("same length") {
    std::string wrong = kKey;
    wrong.back() ^= 1;
    expect_refused([&](raw_client& r) { r.hello(1, wrong); });
  }
  SUBCASE("shorter") { expect_refused([](raw_client& r) { r.hello(1, "conformance"); }); }
  SUBCASE("empty") { expect_refused([](raw_client& r) { r.hello(1, ""); }); }
  SUBCASE("right key, rank out of range") {
    expect_refused([](raw_client& r) { r.hello(2, kKey); });
  }
  SUBCASE("right key, own rank") { expect_refused([](raw_client& r) { r.hello(0, kKey); }); }
  SUBCASE("right key, wrong protocol version") {
    expect_refused([](raw_client& r) {
      wire::hello h;
      h.version = wire::protocol_version + 1;
      h.rank = 1;
      h.key_len = static_cast<std::uint32_t>(kKey.size());
      r.send(h);
      r.send(kKey.data(), kKey.size());
    });
  }
}

TEST_CASE("tcp: garbage, silence and half hellos are refused") {
  SUBCASE("random bytes") {
    expect_refused([](raw_client& r) {
      std::vector<unsigned char> junk(4096);
      unsigned x = 12345;
      for (auto& c : junk) c = static_cast<unsigned char>((x = x * 1103515245 + 12345) >> 16);
      junk[0] = 'G';  // not the hello magic
      r.send(junk.data(), junk.size());
    });
  }
  SUBCASE("huge key length") {
    expect_refused([](raw_client& r) {
      wire::hello h;
      h.rank = 1;
      h.key_len = 0xFFFFFFF0u;
      r.send(h);
    });
  }
  SUBCASE("silence until the handshake timeout") {
    env_guard t("NMAD_TCP_HANDSHAKE_TIMEOUT_MS", "200");
    expect_refused([](raw_client&) {});
  }
  SUBCASE("half a hello until the handshake timeout") {
    env_guard t("NMAD_TCP_HANDSHAKE_TIMEOUT_MS", "200");
    expect_refused([](raw_client& r) {
      wire::hello h;
      h.rank = 1;
      h.key_len = static_cast<std::uint32_t>(kKey.size());
      r.send(h);
      r.send(kKey.data(), 3);
    });
  }
}

TEST_CASE("tcp: a peer that accepts but never answers times out") {
  env_guard t("NMAD_TCP_CONNECT_TIMEOUT_MS", "300");
  recorder eb;
  auto b = open_driver(*nmad::find_driver("tcp"), 1, 2, eb);
  int l = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa = parse("127.0.0.1:0");
  REQUIRE(::bind(l, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
  REQUIRE(::listen(l, 4) == 0);
  socklen_t len = sizeof sa;
  ::getsockname(l, reinterpret_cast<sockaddr*>(&sa), &len);
  connection_id c = b->connect(0, "127.0.0.1:" + std::to_string(ntohs(sa.sin_port)));
  REQUIRE(poll_until({b.get()}, [&] { return !eb.failed.empty(); }));
  CHECK(eb.failed[0].first == c);
  CHECK(eb.connected.empty());
  ::close(l);
}

TEST_CASE("tcp: malformed frames after a valid handshake fail the connection once") {
  const auto* tcp = nmad::find_driver("tcp");
  REQUIRE(tcp);
  recorder ea;
  auto a = open_driver(*tcp, 0, 2, ea);
  raw_client raw(a->local_address());
  raw.hello(1, kKey);
  REQUIRE(poll_until({a.get()}, [&] { return !ea.connected.empty(); }));
  REQUIRE(ea.connected[0].second == 1);
  const connection_id c = ea.connected[0].first;
  REQUIRE(poll_until({a.get()}, [&] {
    raw.closed_by_peer();
    return raw.in.size() >= sizeof(wire::ack);
  }));
  wire::ack ack;
  std::memcpy(&ack, raw.in.data(), sizeof ack);
  CHECK(std::memcmp(ack.magic, wire::ack{}.magic, 4) == 0);
  CHECK(ack.rank == 0);

  // A well-formed packet first: the raw peer speaks the format correctly.
  wire::frame_header h;
  h.kind = wire::kind_packet;
  h.length = 3;
  raw.send(h);
  raw.send("abc", 3);
  REQUIRE(poll_until({a.get()}, [&] { return ea.packets.size() == 1; }));
  CHECK(ea.packets[0].second.size() == 3);

  std::vector<std::byte> room(16);
  iovec r = iov_of(room.data(), room.size());
  REQUIRE(a->post_recv_data(c, 9, {&r, 1}, tok(1)) == post_result::posted);

  SUBCASE("data frame for an unknown cookie") {
    h = {};
    h.kind = wire::kind_data;
    h.length = 4;
    h.cookie = 10;
    raw.send(h);
    raw.send("abcd", 4);
  }
  SUBCASE("data frame larger than the posted iovec") {
    h = {};
    h.kind = wire::kind_data;
    h.length = room.size() + 1;
    h.cookie = 9;
    raw.send(h);
  }
  SUBCASE("packet larger than max_packet_size") {
    h = {};
    h.length = a->caps().max_packet_size + 1;
    raw.send(h);
  }
  SUBCASE("fragments adding up to more than the posted iovec") {
    h = {};
    h.kind = wire::kind_data_more;
    h.length = 10;
    h.cookie = 9;
    raw.send(h);
    raw.send("0123456789", 10);
    h.kind = wire::kind_data;
    h.length = 7;
    raw.send(h);
  }
  SUBCASE("bad frame magic") {
    h = {};
    h.magic ^= 1;
    raw.send(h);
  }
  SUBCASE("unknown frame kind") {
    h = {};
    h.kind = 7;
    raw.send(h);
  }
  REQUIRE(poll_until({a.get()}, [&] { return !ea.failed.empty(); }));
  REQUIRE(poll_until({a.get()}, [&] { return raw.closed_by_peer(); }));
  poll_for({a.get()}, 50ms);
  CHECK(ea.failed.size() == 1);
  CHECK(ea.failed[0].first == c);
  CHECK(ea.failed[0].second.find("protocol error") != std::string::npos);
  CHECK(ea.recvs_done.empty());
  CHECK(a->post_send_packet(c, {&r, 1}, nullptr) == post_result::failed);
}

// Bulk data in fragments (NMAD_TCP_FRAGMENT, here its smallest, 4 KiB):
// transfers around the fragment boundaries, all in flight at once in both
// directions with packets between them; every byte lands in place, each
// transfer is reported once with its length, and a packet posted behind a
// large transfer passes the fragments not sent yet.
TEST_CASE("tcp: fragmented transfers, many in flight, both directions") {
  const auto* tcp = nmad::find_driver("tcp");
  REQUIRE(tcp);
  env_guard frag("NMAD_TCP_FRAGMENT", "4K");
  env_guard buf("NMAD_TCP_SOCKBUF", "64K");
  pair_fixture p(*tcp);
  const std::size_t f = 4096;
  const std::vector<std::size_t> sizes = {0, 1, f - 1, f, f + 1, 2 * f - 1, 2 * f, 2 * f + 1,
                                          3 * f + 17, (1 << 20) + 5, 8 << 20};
  struct xfer {
    std::vector<std::byte> src, dst;
    iovec siov[2], riov[2];
  };
  // Both directions: a -> b with cookies 100+i, b -> a with 200+i.
  std::vector<xfer> ab(sizes.size()), ba(sizes.size());
  auto prepare = [&](std::vector<xfer>& xs, unsigned seed) {
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      xfer& x = xs[i];
      x.src = make_bytes(sizes[i], seed + static_cast<unsigned>(i));
      x.dst.assign(sizes[i] + 3, std::byte{0xEE});  // 3 bytes more room than sent
      const std::size_t cut = sizes[i] / 3;  // split differently on each side
      x.siov[0] = iov_of(x.src.data(), cut);
      x.siov[1] = iov_of(x.src.data() + cut, sizes[i] - cut);
      const std::size_t rcut = std::min(sizes[i], f + 1);
      x.riov[0] = iov_of(x.dst.data(), rcut);
      x.riov[1] = iov_of(x.dst.data() + rcut, x.dst.size() - rcut);
    }
  };
  prepare(ab, 30);
  prepare(ba, 60);
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    REQUIRE(post_retry(p.both(), [&] { return p.b->post_recv_data(p.b2a, 100 + i, ab[i].riov, tok(100 + i)); }));
    REQUIRE(post_retry(p.both(), [&] { return p.a->post_recv_data(p.a2b, 200 + i, ba[i].riov, tok(200 + i)); }));
  }
  // Largest first, so the packets and small transfers queue behind it.
  const std::uint32_t packet = 0x5EED;  // lives until its send is done
  std::size_t recvs_when_packet = ~std::size_t{0};
  p.eb.packet_hook = [&](connection_id, std::span<const std::byte>) {
    if (recvs_when_packet == ~std::size_t{0}) recvs_when_packet = p.eb.recvs_done.size();
  };
  for (std::size_t k = sizes.size(); k-- > 0;) {
    REQUIRE(post_retry(p.both(), [&] { return p.a->post_send_data(p.a2b, 100 + k, ab[k].siov, tok(1000 + k)); }));
    REQUIRE(post_retry(p.both(), [&] { return p.b->post_send_data(p.b2a, 200 + k, ba[k].siov, tok(2000 + k)); }));
    if (k == sizes.size() - 1) {
      iovec v = iov_of(&packet, sizeof packet);
      REQUIRE(post_retry(p.both(), [&] { return p.a->post_send_packet(p.a2b, {&v, 1}, tok(3)); }));
    }
  }
  REQUIRE(poll_until(p.both(), [&] {
    return p.ea.recvs_done.size() == sizes.size() && p.eb.recvs_done.size() == sizes.size() &&
           p.ea.sends_done.size() == sizes.size() + 1 && p.eb.sends_done.size() == sizes.size();
  }));
  // The packet passed the 8 MiB transfer (at most the bytes the sockets
  // held were ahead of it): it came before any transfer a sent completed.
  CHECK(recvs_when_packet == 0);
  auto check_side = [&](std::vector<xfer>& xs, recorder& rx, std::uintptr_t base) {
    std::map<void*, std::size_t> got(rx.recvs_done.begin(), rx.recvs_done.end());
    CHECK(got.size() == sizes.size());  // each reported once
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      INFO("size ", sizes[i]);
      CHECK(got[tok(base + i)] == sizes[i]);
      CHECK(std::equal(xs[i].src.begin(), xs[i].src.end(), xs[i].dst.begin()));
      CHECK(std::all_of(xs[i].dst.begin() + static_cast<std::ptrdiff_t>(sizes[i]), xs[i].dst.end(),
                        [](std::byte b) { return b == std::byte{0xEE}; }));
    }
  };
  check_side(ab, p.eb, 100);
  check_side(ba, p.ea, 200);
  std::set<void*> sent_a(p.ea.sends_done.begin(), p.ea.sends_done.end());
  std::set<void*> sent_b(p.eb.sends_done.begin(), p.eb.sends_done.end());
  CHECK(sent_a.size() == sizes.size() + 1);
  CHECK(sent_b.size() == sizes.size());
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    CHECK(sent_a.count(tok(1000 + i)) == 1);
    CHECK(sent_b.count(tok(2000 + i)) == 1);
  }
  CHECK(p.ea.failed.empty());
  CHECK(p.eb.failed.empty());
}

// A sender dying half-way through a fragmented transfer: the receiver's
// connection fails once with a reason, the transfer is never reported.
TEST_CASE("tcp: a peer dying mid-way through a fragmented transfer") {
  const auto* tcp = nmad::find_driver("tcp");
  REQUIRE(tcp);
  env_guard frag("NMAD_TCP_FRAGMENT", "64K");
  env_guard buf("NMAD_TCP_SOCKBUF", "64K");
  pair_fixture p(*tcp);
  const std::size_t n = 16 << 20;
  std::vector<std::byte> room(n), bytes = make_bytes(n, 5);
  iovec r = iov_of(room.data(), n), s = iov_of(bytes.data(), n);
  REQUIRE(p.a->post_recv_data(p.a2b, 1, {&r, 1}, tok(1)) == post_result::posted);
  REQUIRE(post_retry(p.both(), [&] { return p.b->post_send_data(p.b2a, 1, {&s, 1}, tok(2)); }));
  // Some fragments across (a's buffer starts filling), then b goes away.
  REQUIRE(poll_until(p.both(), [&] { return room[64 << 10] == bytes[64 << 10]; }));
  CHECK(p.ea.recvs_done.empty());
  p.b.reset();
  REQUIRE(poll_until({p.a.get()}, [&] { return !p.ea.failed.empty(); }));
  poll_for({p.a.get()}, 100ms);
  REQUIRE(p.ea.failed.size() == 1);
  CHECK(p.ea.failed[0].first == p.a2b);
  CHECK(!p.ea.failed[0].second.empty());
  CHECK(p.ea.recvs_done.empty());
}

TEST_CASE("tcp: a bad NMAD_TCP_FRAGMENT or NMAD_TCP_SOCKBUF stops open, naming it") {
  const auto* tcp = nmad::find_driver("tcp");
  REQUIRE(tcp);
  for (const char* name : {"NMAD_TCP_FRAGMENT", "NMAD_TCP_SOCKBUF"}) {
    for (const char* bad : {"abc", "12Q", "100", "-4096", "2G"}) {
      INFO(name, "=", bad);
      env_guard g(name, bad);
      recorder ev;
      auto drv = tcp->create();
      try {
        drv->open({0, 2, kKey, &ev});
        FAIL("open accepted it");
      } catch (const std::exception& e) {
        CHECK(std::string(e.what()).find(name) != std::string::npos);
      }
    }
    for (const char* good : {"0", "4096", "256K", "1M"}) {
      INFO(name, "=", good);
      env_guard g(name, good);
      recorder ev;
      auto drv = tcp->create();
      CHECK_NOTHROW(drv->open({0, 2, kKey, &ev}));
    }
  }
}

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

// ---- ofi: start-up errors and reach -------------------------------------------

TEST_CASE("ofi: a forced provider libfabric does not offer stops open, naming it") {
  recorder ev;
  {
    auto d = nmad::make_ofi_driver_for("no-such-provider");
    std::string what;
    try {
      d->open({0, 2, kKey, &ev});
    } catch (const std::runtime_error& e) {
      what = e.what();
    }
    CHECK(what.find("provider 'no-such-provider'") != std::string::npos);
    CHECK(what.find("not available") != std::string::npos);
  }
  {
    env_guard g("NMAD_OFI_PROVIDER", "bogus;ofi_rxm");
    auto d = nmad::find_driver("ofi")->create();
    std::string what;
    try {
      d->open({0, 2, kKey, &ev});
    } catch (const std::runtime_error& e) {
      what = e.what();
    }
    CHECK(what.find("'bogus;ofi_rxm' (NMAD_OFI_PROVIDER)") != std::string::npos);
  }
  {
    env_guard g("NMAD_OFI_CONNECT_TIMEOUT_MS", "soon");
    auto d = nmad::make_ofi_driver_for("tcp;ofi_rxm");
    CHECK_THROWS_WITH_AS(d->open({0, 2, kKey, &ev}), doctest::Contains("NMAD_OFI_CONNECT_TIMEOUT_MS=\"soon\""),
                         std::runtime_error);
  }
  CHECK(ev.total() == 0);
}

TEST_CASE("ofi: shm reaches this host only; providers do not mix") {
  recorder ea, eb;
  auto shm = nmad::make_ofi_driver_for("shm");
  auto tcp = nmad::make_ofi_driver_for("tcp;ofi_rxm");
  shm->open({1, 2, kKey, &ea});
  tcp->open({0, 2, kKey, &eb});
  CHECK(shm->caps().node_local);
  CHECK_FALSE(tcp->caps().node_local);
  const std::string addr = shm->local_address();
  CHECK(shm->reachable(addr));
  // The same endpoint name published from another host.
  const auto c2 = addr.find(':', 4), c3 = addr.find(':', c2 + 1);
  REQUIRE(c3 != std::string::npos);
  const std::string elsewhere = addr.substr(0, c2 + 1) + "some-other-host" + addr.substr(c3);
  CHECK_FALSE(shm->reachable(elsewhere));
  CHECK_FALSE(shm->reachable(tcp->local_address()));
  CHECK_FALSE(tcp->reachable(addr));
  CHECK_FALSE(shm->reachable("127.0.0.1:5000"));
  connection_id c = shm->connect(0, elsewhere);
  REQUIRE(poll_until({shm.get()}, [&] { return !ea.failed.empty(); }));
  CHECK(ea.failed[0].first == c);
  CHECK(ea.failed[0].second.find("another host") != std::string::npos);
}

// RMA read rendezvous over ofi, forced on and off, and the registration
// cache (NMAD_OFI_MR_CACHE=2): a range inside a registered region is a hit,
// a new one a miss; unused regions beyond 2 are closed, least recently used
// first, once their exposures are released (applied by the next poll).
TEST_CASE("ofi: RMA read on and off (NMAD_OFI_RMA), registration cache hits, misses and evictions") {
  for (const auto& d : network_drivers()) {
    if (d.name != "ofi" || d.description == "udp;ofi_rxd") continue;
    INFO("driver ", label(d));
    {
      env_guard on("NMAD_OFI_RMA", "on");
      env_guard cache("NMAD_OFI_MR_CACHE", "2");
      pair_fixture p(d);
      REQUIRE(p.a->caps().rdma_get);
      REQUIRE(p.b->caps().rdma_get);
      const std::size_t n = 8 << 20;
      auto src = make_bytes(n, 31);
      // The whole buffer, then 1 MiB inside it (a hit on the same region).
      struct read_case {
        std::size_t offset, len;
      };
      for (const read_case rc : {read_case{0, n}, read_case{4096 + 3, 1 << 20}}) {
        CAPTURE(rc.offset);
        std::uint64_t remote = 0;
        std::uint32_t key = 0;
        REQUIRE(p.b->expose(src.data() + rc.offset, rc.len, remote, key));
        std::vector<std::byte> dst(rc.len);
        iovec riov = iov_of(dst.data(), rc.len);
        const std::size_t before = p.ea.recvs_done.size(), peer_events = p.eb.total();
        REQUIRE(p.a->post_get(p.a2b, remote, key, {&riov, 1}, tok(40 + rc.offset)) == post_result::posted);
        REQUIRE(poll_until(p.both(), [&] { return p.ea.recvs_done.size() > before; }));
        CHECK(p.ea.recvs_done.back() == std::pair<void*, std::size_t>(tok(40 + rc.offset), rc.len));
        CHECK(std::equal(dst.begin(), dst.end(), src.begin() + static_cast<std::ptrdiff_t>(rc.offset)));
        CHECK(p.eb.total() == peer_events);
      }
      auto st = nmad::ofi_driver_rma_stats(*p.b);
      CHECK(st.rma);
      CHECK(st.misses == 1);
      CHECK(st.hits == 1);
      CHECK(st.exposed == 2);
      CHECK(nmad::ofi_driver_rma_stats(*p.a).reads == 2);
      p.b->unexpose(src.data(), n);
      p.b->unexpose(src.data() + 4096 + 3, 1 << 20);
      p.b->poll();
      st = nmad::ofi_driver_rma_stats(*p.b);
      CHECK(st.exposed == 0);
      CHECK(st.cached == 1);  // kept for the next send from that buffer
      // Three more buffers exposed at once, then released: 4 unused regions,
      // the 2 least recently used go (the first buffer's, then the second's).
      std::vector<std::byte> more[3] = {make_bytes(1 << 16, 1), make_bytes(1 << 16, 2), make_bytes(1 << 16, 3)};
      for (auto& m : more) {
        std::uint64_t remote = 0;
        std::uint32_t key = 0;
        REQUIRE(p.b->expose(m.data(), m.size(), remote, key));
      }
      st = nmad::ofi_driver_rma_stats(*p.b);
      CHECK(st.misses == 4);
      CHECK(st.cached == 4);  // in use: never closed
      CHECK(st.evictions == 0);
      for (auto& m : more) p.b->unexpose(m.data(), m.size());
      p.b->poll();
      st = nmad::ofi_driver_rma_stats(*p.b);
      CHECK(st.cached == 2);
      CHECK(st.evictions == 2);
      // The most recent survive: exposing the last buffer again is a hit.
      std::uint64_t remote = 0;
      std::uint32_t key = 0;
      REQUIRE(p.b->expose(more[2].data(), more[2].size(), remote, key));
      CHECK(nmad::ofi_driver_rma_stats(*p.b).hits == 2);
      p.b->unexpose(more[2].data(), more[2].size());
      CHECK(p.ea.failed.empty());
      CHECK(p.eb.failed.empty());
    }
    {
      env_guard off("NMAD_OFI_RMA", "off");
      pair_fixture p(d);
      CHECK_FALSE(p.a->caps().rdma_get);
      std::vector<std::byte> buf(4096);
      std::uint64_t remote = 0;
      std::uint32_t key = 0;
      CHECK_FALSE(p.b->expose(buf.data(), buf.size(), remote, key));
      iovec riov = iov_of(buf.data(), buf.size());
      CHECK(p.a->post_get(p.a2b, 4096, 1, {&riov, 1}, tok(5)) == post_result::failed);
      CHECK_FALSE(nmad::ofi_driver_rma_stats(*p.a).rma);
      // Large data still moves, as tagged messages.
      const std::size_t n = 4 << 20;
      auto src = make_bytes(n, 8);
      std::vector<std::byte> dst(n);
      iovec s = iov_of(src.data(), n), r = iov_of(dst.data(), n);
      REQUIRE(p.a->post_recv_data(p.a2b, 7, {&r, 1}, tok(1)) == post_result::posted);
      REQUIRE(post_retry(p.both(), [&] { return p.b->post_send_data(p.b2a, 7, {&s, 1}, tok(2)); }));
      REQUIRE(poll_until(p.both(), [&] { return !p.ea.recvs_done.empty(); }));
      CHECK(dst == src);
    }
  }
}

TEST_CASE("ofi: bad NMAD_OFI_RMA and NMAD_OFI_MR_CACHE values stop open, naming them") {
  recorder ev;
  {
    env_guard g("NMAD_OFI_RMA", "maybe");
    auto d = nmad::make_ofi_driver_for("tcp;ofi_rxm");
    CHECK_THROWS_WITH_AS(d->open({0, 2, kKey, &ev}), doctest::Contains("NMAD_OFI_RMA=\"maybe\""), std::runtime_error);
  }
  {
    env_guard g("NMAD_OFI_MR_CACHE", "-1");
    auto d = nmad::make_ofi_driver_for("shm");
    CHECK_THROWS_WITH_AS(d->open({0, 2, kKey, &ev}), doctest::Contains("NMAD_OFI_MR_CACHE=\"-1\""), std::runtime_error);
  }
  CHECK(ev.total() == 0);
}

// ---- ofi over shm: the provider's segments in /dev/shm ------------------------

namespace {

// The segment file behind an ofi shm address ("ofi:shm:<host>:<hex name>").
std::string segment_of(const std::string& address) {
  const std::string hexname = address.substr(address.rfind(':') + 1);
  std::string name;
  for (std::size_t i = 0; i + 1 < hexname.size(); i += 2)
    name += static_cast<char>(std::stoi(hexname.substr(i, 2), nullptr, 16));
  return nmad::ofi_shm::segment_file(name);
}

bool in_dev_shm(const std::string& file) {
  struct stat st{};
  return !file.empty() && ::stat(("/dev/shm/" + file).c_str(), &st) == 0;
}

// A pid no process has any more (a child that ended and was reaped).
int dead_pid() {
  const pid_t p = ::fork();
  if (p == 0) ::_exit(0);
  int st = 0;
  ::waitpid(p, &st, 0);
  return static_cast<int>(p);
}

// A file in /dev/shm like a segment, last written `age` ago.
void plant(const std::string& file, std::chrono::seconds age) {
  const int fd = ::shm_open(("/" + file).c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  REQUIRE(fd >= 0);
  REQUIRE(::ftruncate(fd, 4096) == 0);
  ::close(fd);
  const timespec when[2] = {{std::time(nullptr) - age.count(), 0}, {std::time(nullptr) - age.count(), 0}};
  REQUIRE(::utimensat(AT_FDCWD, ("/dev/shm/" + file).c_str(), when, 0) == 0);
}

}  // namespace

// The shm provider leaves its segment (16 MiB) in /dev/shm when its process
// dies by a signal it cannot catch. The driver withdraws its own name once
// wire-up is over (wireup_complete), and a peer killed before that is
// noticed by the survivor (nobody holds its segment's lock any more), which
// reports the connection failed and removes the name. The peer runs in a
// child process, killed with SIGKILL.
TEST_CASE("ofi over shm: a peer killed by SIGKILL is noticed and its segment removed; wireup_complete withdraws ours") {
  recorder ea;
  auto a = nmad::make_ofi_driver_for("shm");
  a->open({0, 2, kKey, &ea});
  const std::string mine = segment_of(a->local_address());
  REQUIRE(nmad::ofi_shm::is_driver_segment(mine));
  CHECK(in_dev_shm(mine));
  CHECK(nmad::ofi_driver_flow_stats(*a).segment_held);
  int pipefd[2];
  REQUIRE(::pipe(pipefd) == 0);
  const std::string a_address = a->local_address();
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // The peer: connects, tells its address, then serves until killed
    // (never withdrawing its name). No doctest here.
    ::close(pipefd[0]);
    try {
      recorder eb;
      auto b = nmad::make_ofi_driver_for("shm");
      b->open({1, 2, kKey, &eb});
      b->connect(0, a_address);
      const auto end = steady::now() + kLimit;
      while (eb.connected.empty() && eb.failed.empty() && steady::now() < end) b->poll();
      if (eb.connected.empty()) ::_exit(3);
      const std::string addr = b->local_address() + "\n";
      if (::write(pipefd[1], addr.data(), addr.size()) != static_cast<ssize_t>(addr.size())) ::_exit(4);
      for (;;) b->poll();
    } catch (...) {
      ::_exit(2);
    }
  }
  ::close(pipefd[1]);
  REQUIRE(poll_until({a.get()}, [&] { return !ea.connected.empty() || !ea.failed.empty(); }));
  REQUIRE(ea.connected.size() == 1);
  std::string b_address;
  char c = 0;
  while (::read(pipefd[0], &c, 1) == 1 && c != '\n') b_address += c;
  ::close(pipefd[0]);
  const std::string theirs = segment_of(b_address);
  REQUIRE(nmad::ofi_shm::is_driver_segment(theirs));
  CHECK(in_dev_shm(theirs));
  poll_for({a.get()}, 100ms);
  CHECK(ea.failed.empty());  // alive: its segment is held
  REQUIRE(::kill(child, SIGKILL) == 0);
  int st = 0;
  REQUIRE(::waitpid(child, &st, 0) == child);
  CHECK(WIFSIGNALED(st));
  REQUIRE(poll_until({a.get()}, [&] { return !ea.failed.empty(); }, 2s));
  CHECK(ea.failed[0].first == ea.connected[0].first);
  CHECK(ea.failed[0].second.find("peer process died") != std::string::npos);
  CHECK_FALSE(in_dev_shm(theirs));  // the survivor removed it
  // Our own name goes at wireup_complete; the endpoint lives on.
  CHECK(in_dev_shm(mine));
  a->wireup_complete();
  CHECK_FALSE(in_dev_shm(mine));
  CHECK_FALSE(nmad::ofi_driver_flow_stats(*a).segment_held);
  CHECK(a->poll() >= 0);
  a.reset();
  CHECK_FALSE(in_dev_shm(mine));
}

// What processes killed before they withdrew their names left: removed by
// the next ofi shm driver to open, but only files of our pattern that no
// live process holds, whose pid is gone, and not written for 2 s.
TEST_CASE("ofi over shm: at open, segments of gone processes are removed; held, recent or other files stay") {
  const std::string gone = std::to_string(dead_pid());
  const std::string stale = "nmad_" + nmad::random_hex(16) + "_" + gone;
  const std::string held = "nmad_" + nmad::random_hex(16) + "_" + gone;
  const std::string recent = "nmad_" + nmad::random_hex(16) + "_" + gone;
  const std::string alive = "nmad_" + nmad::random_hex(16) + "_" + std::to_string(::getppid());
  const std::string other = "nmad_" + nmad::random_hex(15) + "_" + gone;  // not our pattern
  plant(stale, std::chrono::hours(1));
  plant(held, std::chrono::hours(1));
  plant(recent, std::chrono::seconds(0));
  plant(alive, std::chrono::hours(1));
  plant(other, std::chrono::hours(1));
  // Held as its owner would: a shared lock on an open descriptor.
  const int hold = ::shm_open(("/" + held).c_str(), O_RDONLY, 0);
  REQUIRE(hold >= 0);
  REQUIRE(::flock(hold, LOCK_SH) == 0);
  {
    recorder ev;
    auto d = nmad::make_ofi_driver_for("shm");
    d->open({0, 2, kKey, &ev});
    CHECK_FALSE(in_dev_shm(stale));
    CHECK(in_dev_shm(held));
    CHECK(in_dev_shm(recent));
    CHECK(in_dev_shm(alive));
    CHECK(in_dev_shm(other));
    CHECK(in_dev_shm(segment_of(d->local_address())));  // its own, of course
  }
  // Without the age limit the recent one goes too; the held one never.
  const auto removed = nmad::ofi_shm::reap_abandoned_segments(std::chrono::seconds(0));
  CHECK(std::find(removed.begin(), removed.end(), recent) != removed.end());
  CHECK(std::find(removed.begin(), removed.end(), held) == removed.end());
  CHECK(in_dev_shm(held));
  ::close(hold);
  for (const std::string& f : {held, recent, alive, other}) ::shm_unlink(("/" + f).c_str());
}
