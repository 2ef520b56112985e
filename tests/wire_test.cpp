// The wire format and the packet builder: every malformed packet is refused
// with a reason, and built packets respect the track's limits.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "core/protocol/wire.hpp"
#include "core/transfer/packet_builder.hpp"

using namespace nmad;

namespace {

std::vector<std::byte> flatten(const packet_wrapper& pw) {
  std::vector<std::byte> out;
  for (std::size_t i = 0; i < pw.niov; ++i) {
    auto* p = static_cast<const std::byte*>(pw.iov[i].iov_base);
    out.insert(out.end(), p, p + pw.iov[i].iov_len);
  }
  return out;
}

packet_wrapper make_wrapper(std::size_t cap = 65536) {
  packet_wrapper pw;
  pw.staging = std::make_unique<std::byte[]>(cap);
  pw.staging_capacity = cap;
  return pw;
}

chunk_entry data_entry(const void* p, std::size_t n, std::uint64_t tag, std::uint32_t seq) {
  chunk_entry e;
  e.kind = chunk_kind::data;
  e.flags = chunk_flag::last;
  e.ptr = static_cast<const std::byte*>(p);
  e.len = n;
  e.msg_len = n;
  e.tag = tag;
  e.seq = seq;
  return e;
}

}  // namespace

TEST_CASE("packet builder: chunks round-trip through the reader with contents intact") {
  packet_wrapper pw = make_wrapper();
  std::vector<char> small(10, 'a'), big(5000, 'b');
  chunk_entry e1 = data_entry(small.data(), small.size(), 7, 0);
  chunk_entry e2 = data_entry(big.data(), big.size(), 9, 3);
  collect_list list;
  list.push_back(e1);
  list.push_back(e2);
  packet_builder pb(pw, 65536, 64, 256);
  CHECK(pb.add(list, e1));
  CHECK(pb.add(list, e2));
  CHECK(list.empty());
  pb.finish();
  // The small payload was copied, the big one is gathered from the user buffer.
  bool gathered = false;
  for (std::size_t i = 0; i < pw.niov; ++i) gathered |= pw.iov[i].iov_base == big.data();
  CHECK(gathered);
  auto bytes = flatten(pw);
  wire::packet_reader rd(bytes);
  std::string err;
  REQUIRE(rd.begin(err));
  wire::chunk_view cv;
  REQUIRE(rd.next(cv, err));
  CHECK(cv.header.tag == 7);
  CHECK(cv.payload.size() == 10);
  CHECK(std::memcmp(cv.payload.data(), small.data(), 10) == 0);
  REQUIRE(rd.next(cv, err));
  CHECK(cv.header.tag == 9);
  CHECK(cv.header.seq == 3);
  CHECK(std::memcmp(cv.payload.data(), big.data(), big.size()) == 0);
  CHECK_FALSE(rd.next(cv, err));
  CHECK(err.empty());
  list.clear();
}

TEST_CASE("packet builder: a data entry larger than the packet is split, last flag on the tail") {
  packet_wrapper pw = make_wrapper(4096);
  std::vector<char> big(10000, 'x');
  chunk_entry e = data_entry(big.data(), big.size(), 1, 0);
  collect_list list;
  list.push_back(e);
  packet_builder pb(pw, 4096, 64, 256);
  CHECK(pb.add(list, e));
  CHECK(pw.length <= 4096);
  CHECK(e.len > 0);
  CHECK(!list.empty());  // the rest waits for the next packet
  pb.finish();
  auto bytes = flatten(pw);
  wire::packet_reader rd(bytes);
  std::string err;
  REQUIRE(rd.begin(err));
  wire::chunk_view cv;
  REQUIRE(rd.next(cv, err));
  CHECK((cv.header.flags & chunk_flag::last) == 0);
  CHECK(cv.header.offset == 0);
  list.clear();
}

TEST_CASE("packet builder: without gather support every payload is copied") {
  packet_wrapper pw = make_wrapper();
  std::vector<char> big(3000, 'q');
  chunk_entry e = data_entry(big.data(), big.size(), 1, 0);
  collect_list list;
  list.push_back(e);
  packet_builder pb(pw, 65536, 1, 0);
  CHECK(pb.add(list, e));
  pb.finish();
  CHECK(pw.niov == 1);
  CHECK(pw.length == sizeof(wire::packet_header) + sizeof(wire::chunk_header) + 3000);
}

TEST_CASE("packet reader: malformed packets are refused with a reason") {
  std::string err;
  SUBCASE("too short") {
    std::vector<std::byte> b(3);
    wire::packet_reader rd(b);
    CHECK_FALSE(rd.begin(err));
    CHECK(err.find("shorter") != std::string::npos);
  }
  SUBCASE("foreign magic") {
    std::vector<std::byte> b(64, std::byte{0x41});
    wire::packet_reader rd(b);
    CHECK_FALSE(rd.begin(err));
    CHECK(err.find("magic") != std::string::npos);
  }
  wire::packet_header ph{wire::packet_magic, wire::protocol_version, 1, 0, 0};
  wire::chunk_header ch{};
  ch.kind = static_cast<std::uint8_t>(chunk_kind::data);
  auto build = [&](std::size_t extra) {
    std::vector<std::byte> b(sizeof ph + sizeof ch + extra);
    ph.length = static_cast<std::uint32_t>(b.size());
    std::memcpy(b.data(), &ph, sizeof ph);
    std::memcpy(b.data() + sizeof ph, &ch, sizeof ch);
    return b;
  };
  wire::chunk_view cv;
  SUBCASE("payload past the end") {
    ch.payload = 100;
    ch.len = 100;
    auto b = build(10);
    wire::packet_reader rd(b);
    REQUIRE(rd.begin(err));
    CHECK_FALSE(rd.next(cv, err));
    CHECK(err.find("past the packet end") != std::string::npos);
  }
  SUBCASE("unknown chunk kind") {
    ch.kind = 77;
    auto b = build(0);
    wire::packet_reader rd(b);
    REQUIRE(rd.begin(err));
    CHECK_FALSE(rd.next(cv, err));
    CHECK(err.find("unknown chunk kind") != std::string::npos);
  }
  SUBCASE("range beyond message length") {
    ch.payload = 8;
    ch.len = 8;
    ch.offset = 10;
    ch.msg_len = 12;
    auto b = build(8);
    wire::packet_reader rd(b);
    REQUIRE(rd.begin(err));
    CHECK_FALSE(rd.next(cv, err));
    CHECK(err.find("beyond") != std::string::npos);
  }
  SUBCASE("length field disagrees") {
    auto b = build(0);
    b.push_back(std::byte{0});
    wire::packet_reader rd(b);
    CHECK_FALSE(rd.begin(err));
  }
}

TEST_CASE("credits: a credit chunk round-trips; a data entry and its chunks cost the same") {
  packet_wrapper pw = make_wrapper();
  chunk_entry c;
  c.kind = chunk_kind::credit;
  c.offset = (std::uint64_t{1} << 40) + 12345;  // cumulative extra credit
  c.msg_len = chunk_entry::unknown_length;
  collect_list list;
  list.push_back(c);
  packet_builder pb(pw, 65536, 64, 256);
  CHECK(pb.add(list, c));
  pb.finish();
  const auto bytes = flatten(pw);
  wire::packet_reader rd(bytes);
  std::string err;
  REQUIRE(rd.begin(err));
  wire::chunk_view cv;
  REQUIRE(rd.next(cv, err));
  CHECK(cv.header.kind == static_cast<std::uint8_t>(chunk_kind::credit));
  CHECK(cv.header.offset == c.offset);
  CHECK(cv.payload.empty());
  CHECK_FALSE(rd.next(cv, err));
  CHECK(err.empty());

  // A 5000-byte entry that opens its message, split over packets of 2 KiB:
  // the chunks' credits sum to the entry's (the message's own credit
  // travels on the first chunk only).
  std::vector<char> big(5000, 'x');
  chunk_entry e = data_entry(big.data(), big.size(), 3, 1);
  e.flags |= chunk_flag::opens;
  const std::uint64_t entry_cost = wire::chunk_credit(e.kind, e.len, e.flags, e.msg_len);
  CHECK(entry_cost == 5000 + wire::message_credit);
  collect_list l2;
  l2.push_back(e);
  std::uint64_t sum = 0;
  int opening_chunks = 0;
  while (!l2.empty()) {
    packet_wrapper p2 = make_wrapper(2048);
    packet_builder b2(p2, 2048, 64, 256);
    REQUIRE(b2.add(l2, e));
    b2.finish();
    const auto pb2 = flatten(p2);
    wire::packet_reader r2(pb2);
    REQUIRE(r2.begin(err));
    REQUIRE(r2.next(cv, err));
    sum += wire::chunk_credit(static_cast<chunk_kind>(cv.header.kind), cv.header.payload, cv.header.flags, cv.header.msg_len);
    opening_chunks += (cv.header.flags & chunk_flag::opens) ? 1 : 0;
  }
  CHECK(sum == entry_cost);
  CHECK(opening_chunks == 1);
  // Every unexpected entry costs: an empty message, a rendezvous request
  // that opens its message; later pieces and control chunks do not.
  const std::uint64_t unknown = chunk_entry::unknown_length;
  CHECK(wire::chunk_credit(chunk_kind::data, 0, chunk_flag::last | chunk_flag::opens, unknown) == wire::message_credit);
  CHECK(wire::chunk_credit(chunk_kind::data, 0, chunk_flag::last, unknown) == 0);
  CHECK(wire::chunk_credit(chunk_kind::rdv_req, 0, chunk_flag::opens, unknown) == wire::message_credit);
  CHECK(wire::chunk_credit(chunk_kind::rdv_req, 0, chunk_flag::opens | chunk_flag::last, 0) == wire::message_credit);
  CHECK(wire::chunk_credit(chunk_kind::rdv_req, 0, 0, 0) == 0);
  CHECK(wire::chunk_credit(chunk_kind::rdv_req, 0, chunk_flag::offer, 8) == 0);
  for (chunk_kind k : {chunk_kind::rtr, chunk_kind::cancel_req, chunk_kind::cancel_ack, chunk_kind::credit,
                       chunk_kind::want, chunk_kind::offer_ack, chunk_kind::failure_notice})
    CHECK(wire::chunk_credit(k, 0, chunk_flag::opens, 0) == 0);
  // A small message (eager, announced at most small_message_max bytes)
  // costs small_message_credit in all, payload included; one byte more and
  // it is an ordinary one; a synchronous (rendezvous) one is ordinary too.
  for (std::uint64_t n = 0; n <= wire::small_message_max; ++n)
    CHECK(wire::chunk_credit(chunk_kind::data, n, chunk_flag::last | chunk_flag::opens, n) == wire::small_message_credit);
  const std::uint64_t over = wire::small_message_max + 1;
  CHECK(wire::chunk_credit(chunk_kind::data, over, chunk_flag::last | chunk_flag::opens, over) ==
        over + wire::message_credit);
  CHECK(wire::chunk_credit(chunk_kind::rdv_req, 0, chunk_flag::last | chunk_flag::opens, 8) == wire::message_credit);
}

TEST_CASE("packet builder: a small message is never split over packets (its credit assumes it whole)") {
  // Room for one more header and 3 payload bytes only: the 8-byte message
  // that opens its message waits for the next packet; a longer one is split.
  std::vector<char> filler(2048 - sizeof(wire::packet_header) - 2 * sizeof(wire::chunk_header) - 3, 'f');
  std::vector<char> small(8, 's'), longer(20, 'l');
  for (bool is_small : {true, false}) {
    packet_wrapper pw = make_wrapper(2048);
    packet_builder b(pw, 2048, 64, 4096);
    collect_list l;
    chunk_entry f = data_entry(filler.data(), filler.size(), 1, 0);
    chunk_entry e = is_small ? data_entry(small.data(), small.size(), 2, 0) : data_entry(longer.data(), longer.size(), 2, 0);
    e.flags |= chunk_flag::opens;
    l.push_back(f);
    l.push_back(e);
    REQUIRE(b.add(l, f));
    CHECK(b.room() == 3);
    if (is_small) {
      CHECK_FALSE(b.add(l, e));
      CHECK(e.len == 8);
      CHECK((e.flags & chunk_flag::opens) != 0);
      CHECK(b.chunks() == 1);
      l.clear();
    } else {
      CHECK(b.add(l, e));
      CHECK(e.len == 17);
      CHECK(b.chunks() == 2);
      l.clear();
    }
  }
}

TEST_CASE("control chunks: want, offer_ack and failure_notice round-trip; a payload on them is refused") {
  for (chunk_kind k : {chunk_kind::want, chunk_kind::offer_ack, chunk_kind::failure_notice}) {
    std::vector<std::byte> pkt(sizeof(wire::packet_header) + sizeof(wire::chunk_header));
    wire::packet_header ph{wire::packet_magic, wire::protocol_version, 1, static_cast<std::uint32_t>(pkt.size()), 0};
    wire::chunk_header ch{};
    ch.kind = static_cast<std::uint8_t>(k);
    ch.tag = 42;
    ch.cookie = 0xffff0000;
    ch.cookie2 = 7;
    ch.msg_len = chunk_entry::unknown_length;
    std::memcpy(pkt.data(), &ph, sizeof ph);
    std::memcpy(pkt.data() + sizeof ph, &ch, sizeof ch);
    wire::packet_reader rd(pkt);
    std::string err;
    wire::chunk_view cv;
    REQUIRE(rd.begin(err));
    REQUIRE(rd.next(cv, err));
    CHECK(cv.header.cookie2 == 7);
    // With a payload: refused.
    std::vector<std::byte> bad(pkt.size() + 8);
    ph.length = static_cast<std::uint32_t>(bad.size());
    ch.payload = 8;
    ch.len = 8;
    std::memcpy(bad.data(), &ph, sizeof ph);
    std::memcpy(bad.data() + sizeof ph, &ch, sizeof ch);
    wire::packet_reader rb(bad);
    REQUIRE(rb.begin(err));
    CHECK_FALSE(rb.next(cv, err));
    CHECK(err.find("payload") != std::string::npos);
  }
}

TEST_CASE("credits: a credit chunk with a payload is refused") {
  std::vector<std::byte> pkt(sizeof(wire::packet_header) + sizeof(wire::chunk_header) + 8);
  wire::packet_header ph{wire::packet_magic, wire::protocol_version, 1, static_cast<std::uint32_t>(pkt.size()), 0};
  wire::chunk_header ch{};
  ch.kind = static_cast<std::uint8_t>(chunk_kind::credit);
  ch.payload = 8;
  ch.len = 8;
  ch.msg_len = chunk_entry::unknown_length;
  std::memcpy(pkt.data(), &ph, sizeof ph);
  std::memcpy(pkt.data() + sizeof ph, &ch, sizeof ch);
  wire::packet_reader rd(pkt);
  std::string err;
  REQUIRE(rd.begin(err));
  wire::chunk_view cv;
  CHECK_FALSE(rd.next(cv, err));
  CHECK(err == "control chunk with payload");
}
