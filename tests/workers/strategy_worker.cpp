// Multi-process traffic through a strategy, started by nmad-run from
// tests/strategy_traffic_test.cpp (NMAD_STRATEGY, NMAD_DRIVER(S) set by
// the test). Each scenario checks its own results and exits non-zero with
// a message on the first discrepancy.
//
//   strategy_worker flows SEED N     every rank sends N messages to every
//       other rank over 6 tags (random sizes from 0 B to 300 KiB: eager and
//       rendezvous; random priorities), then a packed request/answer phase
//       (express header, cheaper body). Checks every byte and the order
//       inside each (peer, tag) flow.
//   strategy_worker threads SEED N   the same with two threads per rank, each
//       on its own tags (session at thread level multiple).
//   strategy_worker ratio SEED N     multirail (NMAD_DRIVERS=a+b, split_balance,
//       NMAD_RAIL_BANDWIDTH forcing a split ratio): the flows above, then
//       rendezvous messages of random sizes (256 KiB to 4 MiB, unaligned)
//       both ways at once on 3 tags (every byte and the order checked), then
//       rank 0 sends N/20+4 messages of 1-4 MiB to rank 1 one at a time and
//       prints the rendezvous bytes each of its rails carried in that phase
//       ("rail bytes R0 R1").
//   strategy_worker loop SECONDS     ranks 0 and 1 exchange 1 MiB messages
//       (both ways at once, contents checked) until SECONDS have passed;
//       prints "looping" after the first round (a test then takes a link
//       down) and "loop ok" at the end.
//   strategy_worker overtake BULK SIZE  rank 0 sends BULK eager messages of SIZE
//       bytes on tag 1 while rank 1 is not receiving (more than the driver can
//       buffer: the rest waits in rank 0's queue), then one of priority 9 on tag 2; rank 1
//       receives them all with any-tag receives and prints the arrival position
//       of the priority message ("priority message arrived at P of BULK+1").
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "api/nmad/nmad.hpp"
#include "tests/workers/worker_util.hpp"

using namespace nmad;
using namespace nmad_test::worker;

namespace {

// Byte i of message `index` of flow (src, dst, tag).
std::uint8_t byte_of(int src, int dst, std::uint64_t tag, std::size_t index, std::size_t i) {
  return static_cast<std::uint8_t>((src * 131 + dst * 71 + tag * 31 + index * 17 + i * 7 + (i >> 8)) & 0xff);
}

struct message {
  std::uint64_t tag;
  std::size_t index;  // within its (src, dst, tag) flow
  std::size_t size;
  std::uint8_t priority;
};

// The messages src sends dst, in send order (both sides compute it).
std::vector<message> plan(std::uint64_t seed, int src, int dst, int n, std::uint64_t tag_base, int ntags) {
  std::mt19937_64 rng(seed * 1000003 + static_cast<std::uint64_t>(src) * 1009 + static_cast<std::uint64_t>(dst));
  std::vector<message> out;
  std::vector<std::size_t> next(static_cast<std::size_t>(ntags), 0);
  for (int i = 0; i < n; ++i) {
    const int t = static_cast<int>(rng() % static_cast<std::uint64_t>(ntags));
    const std::uint64_t r = rng() % 100;
    std::size_t size = r < 60 ? rng() % 64 : r < 85 ? rng() % 4096 : r < 95 ? rng() % 40000 : rng() % (300 * 1024);
    out.push_back({tag_base + static_cast<std::uint64_t>(t), next[static_cast<std::size_t>(t)]++, size,
                   static_cast<std::uint8_t>(rng() % 4 == 0 ? rng() % 10 : 0)});
  }
  return out;
}

// Exchanges N messages with every other rank on tags [tag_base, tag_base+ntags).
std::size_t flows(session& s, std::uint64_t seed, int n, std::uint64_t tag_base, int ntags) {
  const int me = s.rank(), np = s.size();
  std::vector<std::unique_ptr<request>> reqs;
  std::vector<std::vector<std::uint8_t>> bufs;
  struct expect {
    int src;
    message m;
    std::size_t buf;
    request* req;
  };
  std::vector<expect> expects;
  // Receives first, per flow in order (a tag's k-th receive must get its
  // k-th message).
  for (int src = 0; src < np; ++src) {
    if (src == me) continue;
    for (const message& m : plan(seed, src, me, n, tag_base, ntags)) {
      bufs.emplace_back(m.size + 16);
      reqs.push_back(std::make_unique<request>());
      if (s.irecv(src, m.tag, bufs.back().data(), bufs.back().size(), *reqs.back()) != errc::ok)
        fail("irecv refused");
      expects.push_back({src, m, bufs.size() - 1, reqs.back().get()});
    }
  }
  std::vector<std::vector<std::uint8_t>> out;
  std::vector<std::unique_ptr<request>> sends;
  std::size_t bytes = 0;
  for (int dst = 0; dst < np; ++dst) {
    if (dst == me) continue;
    for (const message& m : plan(seed, me, dst, n, tag_base, ntags)) {
      out.emplace_back(m.size);
      for (std::size_t i = 0; i < m.size; ++i) out.back()[i] = byte_of(me, dst, m.tag, m.index, i);
      sends.push_back(std::make_unique<request>());
      send_options o;
      o.priority = m.priority;
      if (s.isend(dst, m.tag, out.back().data(), m.size, *sends.back(), o) != errc::ok) fail("isend refused");
      bytes += m.size;
    }
  }
  for (auto& r : sends)
    if (s.wait(*r) != errc::ok) fail("send failed: " + r->error_message());
  for (const expect& e : expects) {
    if (s.wait(*e.req) != errc::ok) fail("receive failed: " + e.req->error_message());
    const recv_status st = e.req->status();
    if (st.length != e.m.size)
      fail("flow (" + std::to_string(e.src) + ", tag " + std::to_string(e.m.tag) + ") message " +
           std::to_string(e.m.index) + ": " + std::to_string(st.length) + " bytes, expected " +
           std::to_string(e.m.size) + " (reordered inside its flow?)");
    const auto& b = bufs[e.buf];
    for (std::size_t i = 0; i < e.m.size; ++i)
      if (b[i] != byte_of(e.src, me, e.m.tag, e.m.index, i))
        fail("flow (" + std::to_string(e.src) + ", tag " + std::to_string(e.m.tag) + ") message " +
             std::to_string(e.m.index) + ": byte " + std::to_string(i) + " differs (reordered or corrupted)");
    bytes += e.m.size;
  }
  return bytes;
}

// Packed request/answer between ranks 0 and 1: express header, cheaper
// body (hints to the strategy), then the answer the other way.
void packed(session& s, std::uint64_t seed, int rounds) {
  const int me = s.rank();
  if (me > 1) return;
  std::mt19937 rng(static_cast<unsigned>(seed));
  for (int k = 0; k < rounds; ++k) {
    const std::uint64_t len = rng() % 70000;
    std::vector<std::uint8_t> body(len);
    const bool sender = (k % 2) == me;
    if (sender) {
      for (std::size_t i = 0; i < len; ++i) body[i] = byte_of(me, 1 - me, 500, k, i);
      send_options o;
      o.priority = static_cast<std::uint8_t>(k % 3);
      pack_connection p(s, 1 - me, 500, o);
      p.pack(&len, sizeof len, pack_mode::express);
      p.pack(body.data(), len, pack_mode::cheaper);
      if (p.end() != errc::ok) fail("pack end failed");
    } else {
      unpack_connection u(s, 1 - me, 500);
      std::uint64_t got = 0;
      if (u.unpack(&got, sizeof got, pack_mode::express) != errc::ok) fail("unpack failed");
      if (got != len) fail("packed header " + std::to_string(got) + ", expected " + std::to_string(len));
      u.unpack(body.data(), got, pack_mode::cheaper);
      if (u.end() != errc::ok) fail("unpack end failed");
      for (std::size_t i = 0; i < len; ++i)
        if (body[i] != byte_of(1 - me, me, 500, k, i)) fail("packed body byte " + std::to_string(i) + " differs");
    }
  }
}

// Rendezvous messages only, both ways at once: ranks 0 and 1 each send n
// messages of 256 KiB to 4 MiB (random, unaligned) over 3 tags.
std::size_t large_flows(session& s, std::uint64_t seed, int n) {
  const int me = s.rank();
  if (me > 1) return 0;
  const int peer = 1 - me;
  auto sizes = [&](int src) {
    std::mt19937_64 rng(seed * 7919 + static_cast<std::uint64_t>(src));
    std::vector<message> out;
    std::size_t next[3] = {0, 0, 0};
    for (int i = 0; i < n; ++i) {
      const std::uint64_t t = rng() % 3;
      out.push_back({200 + t, next[t]++, 256 * 1024 + rng() % (4 * 1024 * 1024 - 256 * 1024), 0});
    }
    return out;
  };
  const std::vector<message> in_plan = sizes(peer), out_plan = sizes(me);
  std::vector<std::vector<std::uint8_t>> in(in_plan.size()), out(out_plan.size());
  std::vector<request> rr(in_plan.size()), sr(out_plan.size());
  for (std::size_t k = 0; k < in_plan.size(); ++k) {
    in[k].assign(in_plan[k].size + 64, 0);
    if (s.irecv(peer, in_plan[k].tag, in[k].data(), in[k].size(), rr[k]) != errc::ok) fail("irecv refused");
  }
  for (std::size_t k = 0; k < out_plan.size(); ++k) {
    const message& m = out_plan[k];
    out[k].resize(m.size);
    for (std::size_t i = 0; i < m.size; ++i) out[k][i] = byte_of(me, peer, m.tag, m.index, i);
    if (s.isend(peer, m.tag, out[k].data(), m.size, sr[k]) != errc::ok) fail("isend refused");
  }
  std::size_t bytes = 0;
  for (auto& r : sr)
    if (s.wait(r) != errc::ok) fail("send failed: " + r.error_message());
  for (std::size_t k = 0; k < in_plan.size(); ++k) {
    const message& m = in_plan[k];
    if (s.wait(rr[k]) != errc::ok) fail("receive failed: " + rr[k].error_message());
    if (rr[k].status().length != m.size)
      fail("large flow tag " + std::to_string(m.tag) + " message " + std::to_string(m.index) + ": " +
           std::to_string(rr[k].status().length) + " bytes, expected " + std::to_string(m.size) +
           " (reordered inside its flow?)");
    for (std::size_t i = 0; i < m.size; ++i)
      if (in[k][i] != byte_of(peer, me, m.tag, m.index, i))
        fail("large flow tag " + std::to_string(m.tag) + " message " + std::to_string(m.index) + ": byte " +
             std::to_string(i) + " differs (a piece misplaced or corrupted)");
    for (std::size_t i = m.size; i < in[k].size(); ++i)
      if (in[k][i] != 0) fail("large flow: bytes written past the message's end");
    bytes += m.size;
  }
  return bytes;
}

// Rendezvous bytes each rail of the gate to `peer` has sent so far.
std::vector<std::uint64_t> rail_rdv_bytes(session& s, int peer) {
  std::vector<std::uint64_t> out;
  for (const gate_stats& g : s.peer_stats())
    if (g.peer == peer)
      for (const track_stats& t : g.tracks) out.push_back(t.rdv_bytes);
  return out;
}

void barrier(session& s);

// Rank 0 sends rank 1 `n` messages of 1-4 MiB, one at a time; prints what
// each rail carried of them.
void sequential_split(session& s, std::uint64_t seed, int n) {
  const int me = s.rank();
  if (me > 1) return;
  std::mt19937_64 rng(seed * 104729);
  std::vector<std::uint8_t> buf(4 * 1024 * 1024);
  const std::vector<std::uint64_t> before = rail_rdv_bytes(s, 1);
  for (int k = 0; k < n; ++k) {
    const std::size_t len = 1024 * 1024 + rng() % (3 * 1024 * 1024);
    request r;
    if (me == 0) {
      for (std::size_t i = 0; i < len; ++i) buf[i] = byte_of(0, 1, 300, static_cast<std::size_t>(k), i);
      if (s.isend(1, 300, buf.data(), len, r) != errc::ok || s.wait(r) != errc::ok) fail("sequential send failed");
    } else {
      if (s.irecv(0, 300, buf.data(), buf.size(), r) != errc::ok || s.wait(r) != errc::ok)
        fail("sequential receive failed");
      if (r.status().length != len) fail("sequential message of the wrong length");
      for (std::size_t i = 0; i < len; ++i)
        if (buf[i] != byte_of(0, 1, 300, static_cast<std::size_t>(k), i))
          fail("sequential message " + std::to_string(k) + ": byte " + std::to_string(i) + " differs");
    }
    barrier(s);  // the next starts on idle rails
  }
  if (me == 0) {
    const std::vector<std::uint64_t> after = rail_rdv_bytes(s, 1);
    std::printf("rail bytes");
    for (std::size_t i = 0; i < after.size(); ++i) std::printf(" %llu", static_cast<unsigned long long>(after[i] - before[i]));
    std::printf("\n");
  }
}

void loop(session& s, double seconds) {
  const int me = s.rank();
  if (me > 1) return;
  const int peer = 1 - me;
  constexpr std::size_t kLen = 1024 * 1024;
  std::vector<std::uint8_t> out(kLen), in(kLen);
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (std::size_t k = 0; std::chrono::steady_clock::now() < end; ++k) {
    for (std::size_t i = 0; i < kLen; ++i) out[i] = byte_of(me, peer, 400, k, i);
    request rr, rs;
    if (s.irecv(peer, 400, in.data(), kLen, rr) != errc::ok) fail("irecv refused");
    if (s.isend(peer, 400, out.data(), kLen, rs) != errc::ok) fail("isend refused");
    if (s.wait(rs) != errc::ok) fail("send of round " + std::to_string(k) + " failed: " + rs.error_message());
    if (s.wait(rr) != errc::ok) fail("receive of round " + std::to_string(k) + " failed: " + rr.error_message());
    for (std::size_t i = 0; i < kLen; ++i)
      if (in[i] != byte_of(peer, me, 400, k, i)) fail("round " + std::to_string(k) + ": byte " + std::to_string(i) + " differs");
    if (k == 0) {
      std::printf("rank %d: looping\n", me);
      std::fflush(stdout);
    }
  }
}

void barrier(session& s) {
  const int me = s.rank(), np = s.size();
  char c = 0;
  for (int p = 0; p < np; ++p) {
    if (p == me) continue;
    request r1, r2;
    char in = 0;
    s.irecv(p, 999, &in, 1, r1);
    s.isend(p, 999, &c, 1, r2);
    s.wait(r2);
    s.wait(r1);
  }
}

int overtake(session& s, int bulk, std::size_t kBulk) {
  const int me = s.rank();
  if (me == 0) {
    std::vector<std::uint8_t> data(kBulk, 0xab);
    std::vector<request> reqs(static_cast<std::size_t>(bulk) + 1);
    for (int i = 0; i < bulk; ++i)
      if (s.isend(1, 1, data.data(), kBulk, reqs[static_cast<std::size_t>(i)]) != errc::ok) fail("isend");
    std::uint64_t urgent = 0x5eed;
    send_options o;
    o.priority = 9;
    if (s.isend(1, 2, &urgent, sizeof urgent, reqs.back(), o) != errc::ok) fail("isend");
    for (auto& r : reqs)
      if (s.wait(r) != errc::ok) fail("send failed");
  } else if (me == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the sender's queue fills
    std::vector<std::uint8_t> buf(kBulk);
    int position = -1;
    for (int i = 0; i <= bulk; ++i) {
      request r;
      s.irecv(0, 0, buf.data(), buf.size(), r, /*mask: tags 0 to 3*/ ~tag_t{3});
      if (s.wait(r) != errc::ok) fail("receive failed");
      const recv_status st = r.status();
      if (st.tag == 2) {
        if (position >= 0) fail("two priority messages");
        position = i;
        std::uint64_t v;
        std::memcpy(&v, buf.data(), sizeof v);
        if (st.length != sizeof v || v != 0x5eed) fail("priority message corrupted");
      } else if (st.length != kBulk || buf[0] != 0xab || buf[kBulk - 1] != 0xab) {
        fail("bulk message corrupted");
      }
    }
    if (position < 0) fail("the priority message never came");
    std::printf("priority message arrived at %d of %d\n", position, bulk + 1);
  }
  barrier(s);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string scenario = argc > 1 ? argv[1] : "";
    const std::uint64_t a = argc > 2 ? std::strtoull(argv[2], nullptr, 0) : 1;
    const int b = argc > 3 ? std::atoi(argv[3]) : 200;
    session_options o;
    if (scenario != "threads") o.threads = thread_level::single;
    auto s = session::create(o);
    g_rank = s->rank();
    if (scenario == "flows") {
      const std::size_t bytes = flows(*s, a, b, 10, 6);
      packed(*s, a, 20);
      barrier(*s);
      std::printf("rank %d: flows ok with strategy %s (%zu bytes checked)\n", s->rank(),
                  std::string(s->strategy_name()).c_str(), bytes);
    } else if (scenario == "ratio") {
      std::size_t bytes = flows(*s, a, b, 10, 6);
      bytes += large_flows(*s, a, b / 20 + 4);
      barrier(*s);
      sequential_split(*s, a, b / 20 + 4);
      barrier(*s);
      std::printf("rank %d: ratio ok with strategy %s (%zu bytes checked)\n", s->rank(),
                  std::string(s->strategy_name()).c_str(), bytes);
    } else if (scenario == "loop") {
      loop(*s, static_cast<double>(a));
      barrier(*s);
      std::printf("rank %d: loop ok\n", s->rank());
    } else if (scenario == "threads") {
      std::size_t bytes[2] = {0, 0};
      std::thread t1([&] { bytes[1] = flows(*s, a + 1, b, 40, 3); });
      bytes[0] = flows(*s, a, b, 10, 3);
      t1.join();
      barrier(*s);
      std::printf("rank %d: threads ok with strategy %s (%zu bytes checked)\n", s->rank(),
                  std::string(s->strategy_name()).c_str(), bytes[0] + bytes[1]);
    } else if (scenario == "overtake") {
      overtake(*s, static_cast<int>(a), static_cast<std::size_t>(b));
    } else {
      std::fprintf(stderr, "usage: strategy_worker flows|threads|ratio SEED N | loop SECONDS | overtake BULK SIZE\n");
      return 2;
    }
    std::fflush(stdout);
    return 0;
  } catch (const std::exception& e) {
    fail(e.what());
  }
}
