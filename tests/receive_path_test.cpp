// The receive path (core/receive/receive_path.hpp) on its own: a gate to
// one peer whose track sits on a fake driver, and a host that records what
// the session would be asked. Packets are built here byte by byte, as the
// peer's engine would send them. A compact small message goes straight into
// a matching receive, or waits as an unexpected one a later receive takes;
// a chunk that overtook an earlier message of its domain is parked until
// that one came; a message in pieces completes with its last byte; a
// rendezvous request posts the bulk receive with the driver and queues the
// ready-to-receive, and the data's arrival completes the receive; credit
// is charged and released, and a peer beyond it breaks the protocol; the
// peer's answers for the send side go to the host; a withdrawn rendezvous
// is answered; a failed gate fails what waited for it.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/receive/receive_path.hpp"

using namespace nmad;

// ---- what the session would be asked (receive_path::host) ------------------

struct test_host final : receive_path::host {
  std::vector<request_state*> completed;
  std::vector<std::string> violations, gate_failures;
  std::vector<chunk_kind> send_side;
  int busy = 0;
};

void receive_path::host::complete(request_state& r) {
  static_cast<test_host&>(*this).completed.push_back(&r);
  r.done.store(true);
}
void receive_path::host::fail_request(request_state& r, errc e, std::string message) {
  if (r.finished()) return;
  if (r.error == errc::ok) {
    r.error = e;
    r.error_message = std::move(message);
  }
  complete(r);
}
void receive_path::host::protocol_violation(gate& g, const std::string& what) {
  static_cast<test_host&>(*this).violations.push_back(what);
  g.failed.store(true);
}
void receive_path::host::fail_gate(gate& g, std::string reason) {
  static_cast<test_host&>(*this).gate_failures.push_back(reason);
  g.failed.store(true);
}
std::string receive_path::host::failure_text(const gate& g) { return "rank " + std::to_string(g.rank) + " failed"; }
void receive_path::host::driver_busy(gate&) { ++static_cast<test_host&>(*this).busy; }
void receive_path::host::send_side_chunk(gate&, const wire::chunk_header& h) {
  static_cast<test_host&>(*this).send_side.push_back(static_cast<chunk_kind>(h.kind));
}

// The driver slots' event adapter is the engine's; nothing here polls.
void driver_slot::on_connected(connection_id, int) {}
void driver_slot::on_packet(connection_id, std::span<const std::byte>) {}
void driver_slot::on_send_done(void*) {}
void driver_slot::on_recv_data_done(void*, std::size_t) {}
void driver_slot::on_connection_failed(connection_id, std::string_view) {}

namespace {

// Records the bulk receives posted with it.
class fake_driver final : public driver {
 public:
  driver_caps c;
  struct recv_post {
    std::uint64_t cookie;
    std::vector<iovec> iov;
    void* token;
  };
  std::vector<recv_post> recvs;
  fake_driver() {
    c.name = "fake";
    c.max_packet_size = 1 << 20;
  }
  void open(const driver_config&) override {}
  const driver_caps& caps() const override { return c; }
  std::string local_address() const override { return "fake"; }
  connection_id connect(int, std::string_view) override { return 0; }
  post_result post_send_packet(connection_id, std::span<const iovec>, void*) override { return post_result::posted; }
  post_result post_send_data(connection_id, std::uint64_t, std::span<const iovec>, void*) override {
    return post_result::posted;
  }
  post_result post_recv_data(connection_id, std::uint64_t cookie, std::span<const iovec> iov, void* token) override {
    recvs.push_back({cookie, {iov.begin(), iov.end()}, token});
    return post_result::posted;
  }
  int poll() override { return 0; }
  void close_connection(connection_id) override {}
};

struct no_scheduler_host final : scheduler::host {
  void driver_busy(gate&) override {}
  void posted() override {}
  void send_refused(gate&, std::string) override {}
  void entry_sent(gate&, chunk_entry&) override {}
};

constexpr tag_t all = full_mask;

// Rank 0 (this process) and its peer, rank 1, whose track is not connected:
// what the receive path queues for the peer stays on the collect list.
struct rig {
  std::atomic<std::uint32_t> rounds{1};
  no_scheduler_host sched_host;
  scheduler sched{sched_host, rounds};
  driver_slot slot;
  fake_driver* drv;
  std::vector<std::unique_ptr<gate>> gates;
  test_host host;
  receive_path rx{host, sched, gates, /*threaded=*/false};
  gate& peer() { return *gates[1]; }

  rig() {
    auto d = std::make_unique<fake_driver>();
    drv = d.get();
    slot.drv = std::move(d);
    slot.caps = drv->c;
    for (int r = 0; r < 2; ++r) {
      auto g = std::make_unique<gate>();
      g->rank = r;
      g->rounds = &rounds;
      g->flow_control = r == 1;
      if (r == 1) {
        g->tracks.resize(1);
        track& t = g->tracks[0];
        t.slot = &slot;
        t.caps = &slot.caps;
        t.conn = 0;
      }
      gates.push_back(std::move(g));
    }
    rx.set_up(0, 2, all);
  }
  ~rig() {
    for (auto& g : gates) {
      while (!g->collect.empty()) {
        chunk_entry& e = g->collect.front();
        g->collect.pop_front();
        if (e.pooled) g->entry_pool.put(&e);
      }
      for (auto& [cookie, rr] : g->rdv_in) delete rr;
    }
  }
  void arrive(const std::vector<std::byte>& packet) { rx.packet_arrived(peer(), packet); }
  // The control chunks queued for the peer, oldest first.
  std::vector<chunk_entry*> queued() {
    std::vector<chunk_entry*> out;
    for (chunk_entry& e : peer().collect) out.push_back(&e);
    return out;
  }
};

// A receive set up as the session does (session_impl::setup_recv).
struct receive {
  request_state r;
  std::vector<std::byte> buf;
  receive(int source, tag_t tag, std::size_t len) : buf(len, std::byte{0}) {
    r.type = request_state::kind::recv;
    r.done.store(false);
    r.source_filter = source;
    r.tag_filter = tag;
    r.tag_mask = all;
    r.segments.push_back({buf.data(), len, 0});
    r.capacity = len;
    r.recv_sealed = true;
    r.msg.reset();
  }
  std::string text(std::size_t n) const { return std::string(reinterpret_cast<const char*>(buf.data()), n); }
};

std::vector<std::byte> bytes_of(std::string_view s) {
  std::vector<std::byte> b(s.size());
  std::memcpy(b.data(), s.data(), s.size());
  return b;
}

std::vector<std::byte> short_packet(tag_t tag, std::uint32_t seq, std::string_view payload) {
  const wire::short_header h = wire::short_form(tag, seq);
  std::vector<std::byte> p(sizeof h + payload.size());
  std::memcpy(p.data(), &h, sizeof h);
  std::memcpy(p.data() + sizeof h, payload.data(), payload.size());
  return p;
}

struct chunk {
  wire::chunk_header h{};
  std::vector<std::byte> payload;
};

chunk data(tag_t tag, std::uint32_t seq, std::uint64_t offset, std::string_view bytes, std::uint64_t msg_len,
           bool last) {
  chunk c;
  c.h.kind = static_cast<std::uint8_t>(chunk_kind::data);
  c.h.flags = static_cast<std::uint8_t>((last ? chunk_flag::last : 0) | (offset == 0 ? chunk_flag::opens : 0));
  c.h.payload = static_cast<std::uint32_t>(bytes.size());
  c.h.tag = tag;
  c.h.seq = seq;
  c.h.offset = offset;
  c.h.len = bytes.size();
  c.h.msg_len = msg_len;
  c.payload = bytes_of(bytes);
  return c;
}

chunk control(chunk_kind kind) {
  chunk c;
  c.h.kind = static_cast<std::uint8_t>(kind);
  c.h.msg_len = unknown_msg_length;
  return c;
}

std::vector<std::byte> packet(const std::vector<chunk>& chunks) {
  std::vector<std::byte> p(sizeof(wire::packet_header));
  for (const chunk& c : chunks) {
    const auto* h = reinterpret_cast<const std::byte*>(&c.h);
    p.insert(p.end(), h, h + sizeof c.h);
    p.insert(p.end(), c.payload.begin(), c.payload.end());
  }
  const wire::packet_header ph{wire::packet_magic, wire::protocol_version, static_cast<std::uint16_t>(chunks.size()),
                               static_cast<std::uint32_t>(p.size()), 0};
  std::memcpy(p.data(), &ph, sizeof ph);
  return p;
}

}  // namespace

TEST_CASE("a compact small message goes straight into the receive it matches") {
  rig t;
  receive a(1, 5, 16);
  t.rx.post(a.r);
  t.arrive(short_packet(5, 0, "8 bytes!"));
  REQUIRE(t.host.completed.size() == 1);
  CHECK(a.r.is_complete());
  CHECK(a.r.error == errc::ok);
  CHECK(a.text(8) == "8 bytes!");
  CHECK(a.r.msg.total == 8);
  CHECK(t.rx.unexpected_messages() == 0);
  CHECK(t.rx.packets_received() == 1);
  // Charged and released at once: nothing of it stays here.
  CHECK(t.peer().rx_charged == 8 + wire::own_credit(chunk_kind::data, 8));
  CHECK(t.peer().rx_released == t.peer().rx_charged);
  CHECK_FALSE(t.rx.any_posted());
}

TEST_CASE("an unexpected small message waits in its compact record, then a receive takes it") {
  rig t;
  t.arrive(short_packet(9, 0, "early"));
  CHECK(t.host.completed.empty());
  CHECK(t.rx.unexpected_messages() == 1);
  CHECK(t.peer().rx_released == 0);
  recv_status st;
  REQUIRE(t.rx.find_unexpected(1, 9, all, st) != nullptr);
  CHECK(st.length == 5);
  receive a(1, 9, 8);
  unexpected_message* u = t.rx.take_first_unexpected(1, 9, all);
  REQUIRE(u != nullptr);
  CHECK(static_cast<bool>(u->small));
  t.rx.take_unexpected(a.r, *u);
  CHECK(a.r.is_complete());
  CHECK(a.text(5) == "early");
  CHECK(t.peer().rx_released == t.peer().rx_charged);  // its whole credit is back
  CHECK(t.rx.take_first_unexpected(1, 9, all) == nullptr);
}

TEST_CASE("a message that overtook an earlier one of its domain waits for it") {
  rig t;
  receive first(1, 7, 8), second(1, 7, 8);
  t.rx.post(first.r);
  t.rx.post(second.r);
  t.arrive(packet({data(7, 1, 0, "second", 6, true)}));
  CHECK(t.host.completed.empty());
  CHECK(t.peer().early.size() == 1);
  t.arrive(packet({data(7, 0, 0, "first", 5, true)}));
  REQUIRE(t.host.completed.size() == 2);
  CHECK(first.text(5) == "first");
  CHECK(second.text(6) == "second");
  CHECK(t.peer().early.empty());
  CHECK(t.host.violations.empty());
}

TEST_CASE("a message in pieces completes with its last byte") {
  rig t;
  receive a(1, 3, 16);
  t.rx.post(a.r);
  t.arrive(packet({data(3, 0, 0, "head ", 10, false)}));
  CHECK_FALSE(a.r.is_complete());
  CHECK(t.peer().active.size() == 1);
  t.arrive(packet({data(3, 0, 5, "tail!", 10, true)}));
  CHECK(a.r.is_complete());
  CHECK(a.text(10) == "head tail!");
  CHECK(t.peer().active.empty());
}

TEST_CASE("a longer message than the receive completes truncated") {
  rig t;
  receive a(1, 4, 3);
  t.rx.post(a.r);
  t.arrive(short_packet(4, 0, "eight!!!"));
  CHECK(a.r.is_complete());
  CHECK(a.r.error == errc::truncated);
  CHECK(a.text(3) == "eig");
}

TEST_CASE("a rendezvous request posts the bulk receive and asks for the data") {
  rig t;
  receive a(1, 11, 64);
  t.rx.post(a.r);
  chunk req = control(chunk_kind::rdv_req);
  req.h.flags = chunk_flag::last | chunk_flag::opens;
  req.h.tag = 11;
  req.h.len = 64;
  req.h.msg_len = 64;
  req.h.cookie = 42;
  t.arrive(packet({req}));
  REQUIRE(t.drv->recvs.size() == 1);
  const fake_driver::recv_post& post = t.drv->recvs[0];
  REQUIRE(post.iov.size() == 1);
  CHECK(post.iov[0].iov_base == a.buf.data());
  CHECK(post.iov[0].iov_len == 64);
  // The ready-to-receive waits on the collect list, naming both cookies.
  const std::vector<chunk_entry*> q = t.queued();
  REQUIRE(q.size() == 1);
  CHECK(q[0]->kind == chunk_kind::rtr);
  CHECK(q[0]->cookie == 42);
  CHECK(q[0]->cookie2 == post.cookie);
  CHECK(q[0]->len == 64);
  CHECK_FALSE(a.r.is_complete());
  // The driver placed the bytes: the receive completes.
  std::memset(a.buf.data(), 'x', 64);
  t.rx.recv_data_done(static_cast<rdv_recv*>(post.token), 64);
  CHECK(a.r.is_complete());
  CHECK(a.r.error == errc::ok);
  CHECK(a.r.segments[0].received == 64);
  CHECK(t.peer().rdv_in.empty());
}

TEST_CASE("a peer beyond its credit breaks the protocol") {
  rig t;
  const std::string big(wire::initial_credit, 'b');
  t.arrive(packet({data(2, 0, 0, big, big.size(), true)}));
  REQUIRE(t.host.violations.size() == 1);
  CHECK(t.host.violations[0].find("more than the credit granted") != std::string::npos);
  CHECK(t.rx.unexpected_messages() == 0);
}

TEST_CASE("the peer's answers for the send side go to the session") {
  rig t;
  t.arrive(packet({control(chunk_kind::rtr), control(chunk_kind::credit), control(chunk_kind::want),
                   control(chunk_kind::offer_ack), control(chunk_kind::cancel_ack)}));
  CHECK(t.host.send_side == std::vector<chunk_kind>{chunk_kind::rtr, chunk_kind::credit, chunk_kind::want,
                                                    chunk_kind::offer_ack, chunk_kind::cancel_ack});
  CHECK(t.host.violations.empty());
  CHECK(t.peer().rx_charged == 0);  // control chunks cost nothing
}

TEST_CASE("an unmatched rendezvous is withdrawn when its sender cancels it") {
  rig t;
  chunk req = control(chunk_kind::rdv_req);
  req.h.flags = chunk_flag::last | chunk_flag::opens;
  req.h.tag = 6;
  req.h.len = 1000;
  req.h.msg_len = 1000;
  req.h.cookie = 77;
  t.arrive(packet({req}));
  CHECK(t.rx.unexpected_messages() == 1);
  chunk cancel = control(chunk_kind::cancel_req);
  cancel.h.tag = 6;
  cancel.h.cookie = 77;
  t.arrive(packet({cancel}));
  recv_status st;
  CHECK(t.rx.find_unexpected(1, 6, all, st) == nullptr);
  const std::vector<chunk_entry*> q = t.queued();
  REQUIRE(q.size() == 1);
  CHECK(q[0]->kind == chunk_kind::cancel_ack);
  CHECK(q[0]->flags == chunk_flag::cancel_ok);
  CHECK(t.peer().rx_released == t.peer().rx_charged);
}

TEST_CASE("a failed gate fails the receives that waited for its peer") {
  rig t;
  receive posted(1, 1, 8), arriving(1, 2, 16);
  t.rx.post(posted.r);
  t.rx.post(arriving.r);
  t.arrive(packet({data(2, 0, 0, "half", 10, false)}));
  CHECK_FALSE(arriving.r.is_complete());
  t.peer().failed.store(true);
  t.rx.gate_failed(t.peer(), "rank 1 failed: gone", /*none_alive=*/true);
  CHECK(posted.r.is_complete());
  CHECK(posted.r.error == errc::peer_failed);
  CHECK(arriving.r.is_complete());
  CHECK(arriving.r.error == errc::peer_failed);
  CHECK(arriving.r.error_message == "rank 1 failed: gone");
  CHECK_FALSE(t.rx.any_posted());
}
