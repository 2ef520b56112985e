// A singleton session whose self connection also delivers packets the test
// writes (a peer that breaks the protocol): a receive matched by, or posted
// for, the message of a failing peer completes with peer_failed naming the
// peer and the error, instead of waiting. No progress thread
// (NMAD_PROGRESS=none): every step runs on the test's thread, in order.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "api/nmad/nmad.hpp"
#include "core/collect/chunk_entry.hpp"
#include "core/protocol/wire.hpp"
#include "tests/support/inject_driver.hpp"

using namespace nmad;

namespace {

nmad_test::packet_injector& g_inj = nmad_test::injected();

std::unique_ptr<session> make() {
  static const bool registered = [] {
    ::setenv("NMAD_PROGRESS", "none", 1);
    ::setenv("NMAD_LOG", "error", 0);  // the protocol errors are expected
    return nmad_test::register_inject_driver("test-inject-self");
  }();
  REQUIRE(registered);
  g_inj = nmad_test::packet_injector{};
  session_options o;
  o.threads = thread_level::single;
  o.wait = "busy";
  auto s = session::create(o);
  REQUIRE(s->progress_description().rfind("none", 0) == 0);
  REQUIRE(g_inj.conn != invalid_connection);
  return s;
}

// One packet of one chunk (data chunks carry `payload`).
std::vector<std::byte> packet(chunk_kind kind, std::uint8_t flags, std::uint64_t tag, std::uint32_t seq,
                              std::uint64_t offset, std::uint64_t len, std::uint64_t msg_len,
                              std::uint64_t cookie = 0, std::size_t payload = 0) {
  wire::packet_header ph{};
  ph.magic = wire::packet_magic;
  ph.version = wire::protocol_version;
  ph.nchunks = 1;
  ph.length = static_cast<std::uint32_t>(sizeof ph + sizeof(wire::chunk_header) + payload);
  wire::chunk_header ch{};
  ch.kind = static_cast<std::uint8_t>(kind);
  ch.flags = flags;
  ch.payload = static_cast<std::uint32_t>(payload);
  ch.tag = tag;
  ch.seq = seq;
  ch.offset = offset;
  ch.len = len;
  ch.msg_len = msg_len;
  ch.cookie = cookie;
  std::vector<std::byte> p(ph.length);
  std::memcpy(p.data(), &ph, sizeof ph);
  std::memcpy(p.data() + sizeof ph, &ch, sizeof ch);
  for (std::size_t i = 0; i < payload; ++i) p[sizeof ph + sizeof ch + i] = std::byte(i);
  return p;
}

void rounds(session& s, int n = 8) {
  for (int i = 0; i < n; ++i) s.progress();
}

bool names(const request& r, const std::string& what) {
  const std::string& m = r.error_message();
  return m.find("rank 0") != std::string::npos && m.find(what) != std::string::npos;
}

}  // namespace

TEST_CASE("protocol error: a posted receive matched by a message whose last chunk contradicts its length fails") {
  auto s = make();
  rounds(*s);  // the self connection is up
  std::vector<unsigned char> buf(256);
  request r;
  REQUIRE(s->irecv(0, 1, buf.data(), buf.size(), r) == errc::ok);
  // 8 bytes at offset 0, flagged last, in a message announced as 16 bytes.
  g_inj.queue.push_back(packet(chunk_kind::data, chunk_flag::last, 1, 0, 0, 8, 16, 0, 8));
  rounds(*s);
  REQUIRE(r.completed());
  CHECK(r.error() == errc::peer_failed);
  CHECK(names(r, "last chunk does not end at the message length"));
  CHECK_FALSE(s->peer_alive(0));

  // After that failure of the gate: a new receive from rank 0 fails at once.
  request later;
  CHECK(s->irecv(0, 1, buf.data(), 0, later) == errc::peer_failed);
  REQUIRE(later.completed());
  CHECK(later.error() == errc::peer_failed);
  CHECK(names(later, "last chunk does not end at the message length"));
}

TEST_CASE("protocol error: a zero-capacity receive posted after the message failed its gate fails") {
  auto s = make();
  rounds(*s);
  g_inj.queue.push_back(packet(chunk_kind::data, chunk_flag::last, 1, 0, 0, 8, 16, 0, 8));
  rounds(*s);
  // It takes the failed message from the unexpected queue (irecv itself
  // succeeds): the request carries the failure.
  request r;
  CHECK(s->irecv(0, 1, nullptr, 0, r) == errc::ok);
  REQUIRE(r.completed());
  CHECK(r.error() == errc::peer_failed);
  CHECK(names(r, "last chunk does not end at the message length"));
}

TEST_CASE("protocol error: a receive whose rendezvous data was asked for fails when the peer breaks the protocol") {
  auto s = make();
  rounds(*s);
  // A whole rendezvous of 100000 bytes from a sender cookie no send of this
  // process owns: the ready-to-receive this process answers with comes back
  // to itself over the self connection and is refused as a protocol error,
  // while the receive waits for the 314 bytes it asked for.
  g_inj.queue.push_back(packet(chunk_kind::rdv_req, chunk_flag::last, 6, 0, 0, 100000, 100000, 4660));
  rounds(*s, 1);
  std::vector<unsigned char> buf(314);
  request r;
  REQUIRE(s->irecv(0, 4, buf.data(), buf.size(), r, tag_t{0}) == errc::ok);  // mask 0: any tag
  rounds(*s);
  REQUIRE(r.completed());
  CHECK(r.error() == errc::peer_failed);
  CHECK(names(r, "ready-to-receive for unknown cookie 4660"));
}

TEST_CASE("protocol error: a failure notice that names no third rank fails its gate") {
  // In a 1-process session the only peer is this process: a notice naming
  // it, or a rank beyond the job, cannot be true.
  for (std::uint64_t named : {std::uint64_t{0}, std::uint64_t{5}, ~std::uint64_t{0}}) {
    CAPTURE(named);
    auto s = make();
    rounds(*s);
    std::vector<unsigned char> buf(16);
    request r;
    REQUIRE(s->irecv(0, 1, buf.data(), buf.size(), r) == errc::ok);
    g_inj.queue.push_back(packet(chunk_kind::failure_notice, 0, named, 0, 0, 0, chunk_entry::unknown_length));
    rounds(*s);
    REQUIRE(r.completed());
    CHECK(r.error() == errc::peer_failed);
    CHECK(names(r, "failure notice names rank " + std::to_string(named)));
  }
}
