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
