// Driver conformance, the tcp driver: foreign and malicious peers played
// over raw sockets with its wire format (drivers/tcp/tcp_wire.hpp): wrong
// job keys, garbage, silence, half hellos and malformed frames are refused
// without harm to the job; bulk data in fragments, many transfers in
// flight both ways, a sender dying half-way; bad NMAD_TCP_* values stop
// open.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "drivers/tcp/tcp_wire.hpp"
#include "tests/driver_conformance/conformance.hpp"

using namespace nmad_test::conformance;
namespace wire = nmad::tcp_wire;

namespace {

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
