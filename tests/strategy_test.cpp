// Strategies: what each built-in one makes of the same window of chunks.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <vector>

#include "core/strategy/strategy.hpp"

using namespace nmad;

namespace {

struct window {
  std::vector<char> data = std::vector<char>(1 << 20, 'z');
  std::vector<chunk_entry> entries;
  collect_list list;
  explicit window(std::vector<std::size_t> sizes) : entries(sizes.size()) {
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      chunk_entry& e = entries[i];
      e.kind = chunk_kind::data;
      e.flags = chunk_flag::last;
      e.ptr = reinterpret_cast<const std::byte*>(data.data());
      e.len = sizes[i];
      e.msg_len = sizes[i];
      e.seq = static_cast<std::uint32_t>(i);
      list.push_back(e);
    }
  }
  ~window() { list.clear(); }
};

// Builds packets until the window is empty; returns chunks per packet.
std::vector<std::size_t> drain(strategy& s, window& w, std::size_t max_packet = 65536) {
  std::vector<std::size_t> out;
  while (!w.list.empty()) {
    packet_wrapper pw;
    pw.staging = std::make_unique<std::byte[]>(max_packet);
    pw.staging_capacity = max_packet;
    packet_builder pb(pw, max_packet, 64, 256);
    REQUIRE(s.build_packet(w.list, pb));
    REQUIRE(!pb.empty());
    out.push_back(pw.nchunks);
  }
  return out;
}

}  // namespace

TEST_CASE("registry lists default and aggreg; unknown names are not found") {
  CHECK(find_strategy("default") != nullptr);
  CHECK(find_strategy("aggreg") != nullptr);
  CHECK(find_strategy("nope") == nullptr);
  CHECK(strategy_registry().size() >= 2);
  for (const auto& d : strategy_registry()) CHECK(d.create()->name() == d.name);
}

TEST_CASE("default sends one chunk per packet") {
  window w({8, 8, 8, 8, 8});
  auto s = find_strategy("default")->create();
  CHECK(drain(*s, w) == std::vector<std::size_t>{1, 1, 1, 1, 1});
}

TEST_CASE("aggreg packs the whole window of small chunks into one packet") {
  window w({8, 8, 8, 8, 8});
  auto s = find_strategy("aggreg")->create();
  CHECK(drain(*s, w) == std::vector<std::size_t>{5});
}

TEST_CASE("aggreg stops at the packet limit and never splits a chunk to fill a tail") {
  window w({20000, 20000, 20000, 20000});
  auto s = find_strategy("aggreg")->create();
  auto packets = drain(*s, w);
  CHECK(packets == std::vector<std::size_t>{3, 1});
}

TEST_CASE("strategies leave an empty window alone") {
  window w({});
  for (const auto& d : strategy_registry()) {
    auto s = d.create();
    packet_wrapper pw;
    pw.staging = std::make_unique<std::byte[]>(1024);
    pw.staging_capacity = 1024;
    packet_builder pb(pw, 1024, 64, 256);
    CHECK_FALSE(s->build_packet(w.list, pb));
  }
}

// ---- the strategies of the tactics library ------------------------------------------

#include <algorithm>
#include <map>
#include <random>

#include "core/strategy/tactics.hpp"

namespace {

driver_caps caps_of(double latency_us, double bandwidth_mbps, std::string name = "test") {
  driver_caps c;
  c.name = std::move(name);
  c.max_packet_size = 65536;
  c.latency_us = latency_us;
  c.bandwidth_mbps = bandwidth_mbps;
  return c;
}

track_view view(std::uint32_t rail, const driver_caps& c, std::uint32_t outstanding = 0) {
  track_view t;
  t.rail = rail;
  t.caps = &c;
  t.outstanding = outstanding;
  t.connected = true;
  return t;
}

struct packet {
  std::vector<const chunk_entry*> chunks;  // in packet order
};

// One packet from s for track t (tracks: all of the gate's).
bool build_one(strategy& s, collect_list& q, const track_view& t, std::span<const track_view> tracks, packet& out,
               std::size_t max_packet = 65536) {
  packet_wrapper pw;
  pw.staging = std::make_unique<std::byte[]>(max_packet);
  pw.staging_capacity = max_packet;
  packet_builder pb(pw, max_packet, 64, 256);
  const bool built = s.build_packet(q, pb, t, tracks);
  for (std::size_t i = 0; i < pw.ncarried; ++i) out.chunks.push_back(pw.carried[i]);
  CHECK(built == !pb.empty());
  return built;
}

}  // namespace

TEST_CASE("the registry lists the five built-in strategies") {
  for (const char* n : {"default", "aggreg", "aggreg_autoextended", "prio", "split_balance"}) {
    INFO(n);
    REQUIRE(find_strategy(n) != nullptr);
    CHECK(find_strategy(n)->create()->name() == n);
  }
}

TEST_CASE("randomized windows: every strategy delivers every chunk, in order within each tag") {
  std::mt19937 rng(12345);
  const driver_caps c = caps_of(1, 1000);
  for (const auto& d : strategy_registry()) {
    INFO(std::string(d.name));
    for (int round = 0; round < 50; ++round) {
      const int n = 1 + static_cast<int>(rng() % 40);
      std::vector<std::size_t> sizes;
      for (int i = 0; i < n; ++i) sizes.push_back(rng() % 3 == 0 ? rng() % 30000 : rng() % 200);
      window w(sizes);
      std::map<std::uint64_t, std::uint32_t> next_seq;
      for (auto& e : w.entries) {
        e.tag = rng() % 4;
        e.priority = static_cast<std::uint8_t>(rng() % 3);
        e.seq = next_seq[e.tag]++;
      }
      auto s = d.create();
      const track_view t = view(0, c);
      std::map<std::uint64_t, std::uint32_t> expect;  // per tag: next seq whose bytes end
      std::map<const chunk_entry*, std::uint64_t> sent;
      int packets = 0;
      while (!w.list.empty()) {
        packet p;
        REQUIRE(build_one(*s, w.list, t, std::span<const track_view>(&t, 1), p));
        REQUIRE(++packets < 10000);
        for (const chunk_entry* e : p.chunks) {
          // Within a tag, chunks leave in sequence order.
          CHECK(e->seq >= expect[e->tag]);
          expect[e->tag] = e->seq;
          sent[e] = e->len;
        }
      }
      for (const auto& e : w.entries) CHECK(e.len == 0);  // every byte went
    }
  }
}

TEST_CASE("prio: a higher-priority chunk overtakes lower ones of other tags, never its own tag") {
  window w({100, 100, 100, 100, 100});
  // tag 1: seq 0 (prio 0), seq 1 (prio 9); tag 2: prio 0; tag 3: prio 5; tag 4: prio 0
  const std::uint64_t tags[] = {1, 1, 2, 3, 4};
  const std::uint8_t prios[] = {0, 9, 0, 5, 0};
  for (int i = 0; i < 5; ++i) {
    w.entries[i].tag = tags[i];
    w.entries[i].priority = prios[i];
    w.entries[i].seq = i == 1 ? 1 : 0;
  }
  auto s = find_strategy("prio")->create();
  const driver_caps c = caps_of(1, 1000);
  const track_view t = view(0, c);
  packet p;
  REQUIRE(build_one(*s, w.list, t, std::span<const track_view>(&t, 1), p));
  REQUIRE(p.chunks.size() == 5);
  // tag 3 (5) first; tag 1's prio-9 chunk must wait for tag 1 seq 0.
  CHECK(p.chunks[0]->tag == 3);
  std::vector<std::uint64_t> order;
  for (auto* e : p.chunks) order.push_back(e->tag * 10 + e->seq);
  const auto pos = [&](std::uint64_t k) { return std::find(order.begin(), order.end(), k) - order.begin(); };
  CHECK(pos(10) < pos(11));
}

TEST_CASE("prio: a ready-to-receive answer goes before any data") {
  window w({100, 100});
  w.entries[0].priority = 7;
  w.entries[1].kind = chunk_kind::rtr;
  w.entries[1].len = 4096;
  w.entries[1].tag = 99;
  auto s = find_strategy("prio")->create();
  const driver_caps c = caps_of(1, 1000);
  const track_view t = view(0, c);
  packet p;
  REQUIRE(build_one(*s, w.list, t, std::span<const track_view>(&t, 1), p));
  CHECK(p.chunks[0]->kind == chunk_kind::rtr);
}

TEST_CASE("aggreg_autoextended holds small packs on a busy track until idle, flush, express or the limit") {
  const driver_caps c = caps_of(1, 1000);
  auto s = find_strategy("aggreg_autoextended")->create();
  const track_view busy = view(0, c, 1), idle = view(0, c, 0);
  {
    window w({8, 8, 8});
    packet p;
    CHECK_FALSE(build_one(*s, w.list, busy, std::span<const track_view>(&busy, 1), p));  // held
    CHECK(p.chunks.empty());
    REQUIRE(build_one(*s, w.list, idle, std::span<const track_view>(&idle, 1), p));  // idle: all go
    CHECK(p.chunks.size() == 3);
  }
  {
    window w({8, 8});
    s->flush();
    packet p;
    REQUIRE(build_one(*s, w.list, busy, std::span<const track_view>(&busy, 1), p));
    CHECK(p.chunks.size() == 2);
    window w2({8});  // the flush was used up with the queue
    packet p2;
    CHECK_FALSE(build_one(*s, w2.list, busy, std::span<const track_view>(&busy, 1), p2));
  }
  {
    window w({8, 8});
    w.entries[1].hints = chunk_hint::express;
    s->on_submit(w.list, w.entries[1]);
    packet p;
    REQUIRE(build_one(*s, w.list, busy, std::span<const track_view>(&busy, 1), p));
    CHECK(p.chunks.size() == 2);
  }
  {
    std::vector<std::size_t> sizes(40, 600);  // 40 x (600 + header) > 16 KiB: the aggregate closes
    window w(sizes);
    packet p;
    REQUIRE(build_one(*s, w.list, busy, std::span<const track_view>(&busy, 1), p));
  }
  {
    window w({100000});  // not small: no hold
    packet p;
    REQUIRE(build_one(*s, w.list, busy, std::span<const track_view>(&busy, 1), p));
  }
}

TEST_CASE("split_balance: small messages on the lowest-latency track with room") {
  const driver_caps fast = caps_of(1, 3000, "fast"), slow = caps_of(20, 1000, "slow");
  auto s = find_strategy("split_balance")->create();
  std::array<track_view, 2> tracks{view(0, slow), view(1, fast)};
  {
    window w({8, 8});
    packet p;
    CHECK_FALSE(build_one(*s, w.list, tracks[0], tracks, p));  // the slow track leaves them
    REQUIRE(build_one(*s, w.list, tracks[1], tracks, p));
    CHECK(p.chunks.size() == 2);
  }
  {
    tracks[1].outstanding = 2;  // the fast one is full: the slow one takes them
    window w({8});
    packet p;
    REQUIRE(build_one(*s, w.list, tracks[0], tracks, p));
  }
}

TEST_CASE("split_balance: rendezvous data in proportion to bandwidth, a busy track charged its release time") {
  const driver_caps a = caps_of(0, 1000), b = caps_of(0, 3000);
  auto s = find_strategy("split_balance")->create();
  std::array<track_view, 2> tracks{view(0, a), view(1, b)};
  std::uint64_t len = 4 << 20;
  CHECK(s->choose_rdv_track({1, 0, 0, len}, tracks, len) == 1);
  CHECK(len == 3 << 20);  // 3/4 of it on the 3x faster track
  // Track 1 still has 3 MB to move (1 ms at 3000 MB/s): both finish at
  // T = (4 MiB + 3000 * 1000) / 4000 = 1798.6 us, track 1 taking
  // (T - 1000) * 3000 = 2.4 MB instead of 3 MiB, track 0 the other 1.8 MB.
  tracks[1].incoming = 3000000;
  len = 4 << 20;
  CHECK(s->choose_rdv_track({1, 0, 0, len}, tracks, len) == 1);
  CHECK(len == 2396160);
  tracks[1].incoming += len;  // (the engine counts what it asked for)
  len = (4 << 20) - len;
  CHECK(s->choose_rdv_track({1, 0, 0, len}, tracks, len) == 0);
  CHECK(len == 1798144);
  // Small ranges go whole to the track that finishes them first.
  len = 64 * 1024;
  CHECK(s->choose_rdv_track({1, 0, 0, len}, tracks, len) == 0);
  CHECK(len == 64 * 1024);
}

TEST_CASE("the default rendezvous choice cuts big ranges in equal pieces, in turn") {
  const driver_caps a = caps_of(0, 1000);
  auto s = find_strategy("default")->create();
  std::array<track_view, 2> tracks{view(0, a), view(1, a)};
  std::uint64_t len = 1 << 20;
  CHECK(s->choose_rdv_track({}, tracks, len) == 0);
  CHECK(len == 512 * 1024);
  len = 512 * 1024;
  CHECK(s->choose_rdv_track({}, tracks, len) == 1);
  tracks[0].connected = false;
  len = 100;
  CHECK(s->choose_rdv_track({}, tracks, len) == 1);
  // The rest of a range keeps the first piece's size: 3 MiB in two halves
  // (not 1.5 MiB, then 768 KiB, ...), then 5 MiB over three tracks.
  tracks[0].connected = true;
  len = 3 << 20;
  const std::uint32_t first = s->choose_rdv_track({7, 4, 0, len}, tracks, len);
  CHECK(len == 3 << 19);
  std::uint64_t rest = 3 << 19;
  CHECK(s->choose_rdv_track({7, 4, 3 << 19, rest}, tracks, rest) == 1 - first);
  CHECK(rest == 3 << 19);
  std::array<track_view, 3> three{view(0, a), view(1, a), view(2, a)};
  std::uint64_t off = 0, total = 5 << 20;
  std::array<std::uint64_t, 3> got{};
  while (off < total) {
    std::uint64_t n = total - off;
    got[s->choose_rdv_track({8, 1, off, n}, three, n)] += n;
    off += n;
  }
  CHECK(got[0] > 0);
  CHECK(got[0] + got[1] + got[2] == total);
  CHECK(std::max({got[0], got[1], got[2]}) - std::min({got[0], got[1], got[2]}) <= 8192);
}

TEST_CASE("prio: a priority chunk submitted behind a deep queue of bulk leaves in the next packet") {
  std::vector<std::size_t> sizes(300, 1000);
  sizes.push_back(8);
  window w(sizes);
  for (std::size_t i = 0; i < 300; ++i) {
    w.entries[i].tag = 1;
    w.entries[i].seq = static_cast<std::uint32_t>(i);
  }
  w.entries[300].tag = 2;
  w.entries[300].priority = 9;
  auto s = find_strategy("prio")->create();
  for (auto& e : w.entries) s->on_submit(w.list, e);
  const driver_caps c = caps_of(1, 1000);
  const track_view t = view(0, c);
  packet p;
  REQUIRE(build_one(*s, w.list, t, std::span<const track_view>(&t, 1), p));
  CHECK(p.chunks[0] == &w.entries[300]);
  CHECK(p.chunks[1] == &w.entries[0]);  // then the bulk, in order
}
