// Multi-process scenarios for the engine, started by nmad-run from
// tests/multiprocess_test.cpp. Each scenario checks its own results and
// exits non-zero with a message on the first discrepancy.
//
//   engine_worker stress MSGS_PER_PAIR SEED   random sizes (0 B..8 MiB) and
//                                             tags, any-source receives mixed in
//   engine_worker pingpong ITERS
//   engine_worker aggregation N               N sends while the track is busy
//   engine_worker pack ROUNDS                 request/answer with pack/unpack
//   engine_worker truncate
//   engine_worker killed                      rank 1 dies; others see errors
//   engine_worker intruder                    strangers knock on rank 1's port
//   engine_worker threads ITERS               two threads per process
//   engine_worker wrongkey                    rank 1 presents another job key
//   engine_worker killed_rdv                  rank 1 dies with a rendezvous matched
//                                             by rank 0 and another one unexpected
//   engine_worker killed_unpack               rank 1 dies while rank 0 is between two
//                                             unpacks of its packed message
//   engine_worker pull EXPECT                 rank 1 sends 4 MiB and pauses outside
//                                             the library; EXPECT 1: its send is
//                                             done by then (the receiver pulled)
//   engine_worker sleeper MS                  rank 0 waits MS ms for rank 1's
//                                             message; reports its CPU time
//   engine_worker destroy_pending             rank 1 destroys pending requests (a
//                                             receive, an unanswered rendezvous, a
//                                             matched one); then rank 0 dies and
//                                             rank 1 destroys pending requests of
//                                             the dead rank before progressing
//   engine_worker partitioned ROUNDS THREADS  partitioned messages, pieces handed
//                                             over by THREADS threads in random
//                                             order, checked part by part
//   engine_worker partitioned_packets N       N ready pieces: packets used
//   engine_worker flood NOFILE PER_ADDR MS    rank 1 (descriptor limit NOFILE)
//                                             waits for a message while rank 0
//                                             holds PER_ADDR idle connections
//                                             from each of 127.0.0.1-5 to its tcp
//                                             listener for MS ms; reports rank 1's
//                                             CPU time, then 100 exchanges
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <atomic>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "api/nmad/nmad.hpp"
#include "tests/workers/worker_util.hpp"
#include "drivers/tcp/tcp_wire.hpp"

using namespace nmad;
using namespace nmad_test::worker;

namespace {

std::uint64_t splitmix(std::uint64_t& x) {
  std::uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void fill(std::vector<unsigned char>& buf, std::uint64_t seed) {
  std::uint64_t x = seed;
  std::size_t i = 0;
  for (; i + 8 <= buf.size(); i += 8) {
    std::uint64_t v = splitmix(x);
    std::memcpy(buf.data() + i, &v, 8);
  }
  std::uint64_t v = splitmix(x);
  for (; i < buf.size(); ++i) buf[i] = static_cast<unsigned char>(v >> (8 * (i % 8)));
}

std::uint64_t fnv(const unsigned char* p, std::size_t n) {
  std::uint64_t h = 1469598103934665603ULL;
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}

// ---- stress ------------------------------------------------------------------

struct msg_spec {
  std::size_t size;
  tag_t tag;
};

// The messages src sends to dst, identical on both sides.
std::vector<msg_spec> plan(int src, int dst, int count, std::uint64_t seed) {
  std::mt19937_64 rng(seed * 1000003 + static_cast<std::uint64_t>(src) * 1009 + static_cast<std::uint64_t>(dst));
  std::vector<msg_spec> v(count);
  for (int i = 0; i < count; ++i) {
    double u = std::uniform_real_distribution<double>(0, 1)(rng);
    std::size_t size;
    if (u < 0.80) size = std::uniform_int_distribution<std::size_t>(0, 1024)(rng);
    else if (u < 0.97) size = std::uniform_int_distribution<std::size_t>(1025, 128 * 1024)(rng);
    else size = static_cast<std::size_t>(std::exp(std::uniform_real_distribution<double>(std::log(128e3), std::log(8388608.0))(rng)));
    v[i] = {std::min<std::size_t>(size, 8 << 20), std::uniform_int_distribution<tag_t>(0, 5)(rng)};
  }
  if (count > 2) {
    v[0].size = 0;
    v[1].size = 8 << 20;  // the extremes, every run
  }
  return v;
}

std::uint64_t content_seed(int src, int dst, int idx) {
  return (static_cast<std::uint64_t>(src) << 48) ^ (static_cast<std::uint64_t>(dst) << 32) ^ static_cast<std::uint64_t>(idx);
}

int stress(session& s, int per_pair, std::uint64_t seed) {
  const int me = s.rank(), n = s.size();
  // What this rank sends, interleaved across peers.
  std::vector<std::vector<msg_spec>> out(n), in(n);
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    out[p] = plan(me, p, per_pair, seed);
    in[p] = plan(p, me, per_pair, seed);
  }
  // Per (source, tag): expected sizes and content seeds in send order.
  std::map<std::pair<int, tag_t>, std::vector<std::pair<std::size_t, int>>> expected;
  std::size_t total_in = 0;
  for (int p = 0; p < n; ++p)
    for (int i = 0; i < static_cast<int>(in[p].size()); ++i) {
      expected[{p, in[p][i].tag}].push_back({in[p][i].size, i});
      ++total_in;
    }

  struct send_slot {
    request req;
    std::vector<unsigned char> buf;
    bool busy = false;
  };
  struct recv_slot {
    request req;
    std::vector<unsigned char> buf = std::vector<unsigned char>(8 << 20);
    bool busy = false;
    bool wildcard = false;
    int src = -1;
    tag_t tag = 0;
    std::size_t order = 0;
  };
  constexpr int send_window = 16, recv_window = 8;
  std::vector<send_slot> sends(send_window);
  std::vector<recv_slot> recvs(recv_window);
  struct got_msg {
    std::size_t order;
    std::size_t size;
    std::uint64_t hash;
  };
  std::map<std::pair<int, tag_t>, std::vector<got_msg>> got;
  std::map<std::pair<int, tag_t>, int> specific_out, received;
  int wildcard_out = 0;
  std::size_t posted = 0, done_in = 0;
  std::vector<int> next_out(n, 0);
  int peer_rr = 0;
  std::size_t total_out = 0, sent_done = 0;
  for (int p = 0; p < n; ++p) total_out += out[p].size();
  std::size_t started_out = 0;
  std::mt19937_64 rng(seed ^ (0x5151ULL * (me + 1)));
  std::vector<std::pair<int, tag_t>> keys;
  for (auto& [k, v] : expected) keys.push_back(k);

  const long limit_s = std::getenv("STRESS_TIME_LIMIT") ? std::atol(std::getenv("STRESS_TIME_LIMIT")) : 200;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(limit_s);
  while (done_in < total_in || sent_done < total_out) {
    if (std::chrono::steady_clock::now() > deadline)
      fail("stress: not finished within " + std::to_string(limit_s) + " s: received " + std::to_string(done_in) +
           "/" + std::to_string(total_in) + ", sends completed " + std::to_string(sent_done) + "/" +
           std::to_string(total_out) + ", posted receives " + std::to_string(posted) + ", wildcards out " +
           std::to_string(wildcard_out));
    // Start sends while there is room.
    for (auto& sl : sends) {
      if (sl.busy || started_out == total_out) continue;
      int p = -1;
      for (int k = 0; k < n; ++k) {
        int q = (peer_rr + k) % n;
        if (q != me && next_out[q] < static_cast<int>(out[q].size())) { p = q; break; }
      }
      peer_rr = (peer_rr + 1) % n;
      if (p < 0) break;
      const int idx = next_out[p]++;
      sl.buf.resize(out[p][idx].size);
      fill(sl.buf, content_seed(me, p, idx));
      expect_ok(s.isend(p, out[p][idx].tag, sl.buf.data(), sl.buf.size(), sl.req), sl.req, "isend");
      sl.busy = true;
      ++started_out;
    }
    // Post receives: specific ones only where enough messages are left.
    // Two slots always hold any-source receives: a specific receive may wait
    // for a message its sender has not started yet (rendezvous sends need a
    // matching receive), and only a wildcard is sure to drain what is sent.
    for (std::size_t slot = 0; slot < recvs.size(); ++slot) {
      auto& rs = recvs[slot];
      if (rs.busy || posted == total_in) continue;
      const std::size_t unclaimed = total_in - done_in - static_cast<std::size_t>(std::count_if(
          recvs.begin(), recvs.end(), [](const recv_slot& r) { return r.busy; }));
      if (unclaimed == 0) break;
      bool specific = slot >= 2 && (rng() % 3) != 0;
      std::pair<int, tag_t> key{};
      if (specific) {
        specific = false;
        for (int attempt = 0; attempt < 4 && !specific; ++attempt) {
          key = keys[rng() % keys.size()];
          const int left = static_cast<int>(expected[key].size()) - received[key] - specific_out[key] - wildcard_out;
          specific = left > 0;
        }
      }
      rs.wildcard = !specific;
      rs.order = posted++;
      if (specific) {
        rs.src = key.first;
        rs.tag = key.second;
        ++specific_out[key];
        expect_ok(s.irecv(key.first, key.second, rs.buf.data(), rs.buf.size(), rs.req), rs.req, "irecv");
      } else {
        ++wildcard_out;
        expect_ok(s.irecv(any_source, 0, rs.buf.data(), rs.buf.size(), rs.req, 0), rs.req, "irecv any");
      }
      rs.busy = true;
    }
    s.progress();
    for (auto& sl : sends)
      if (sl.busy && s.test(sl.req)) {
        expect_ok(sl.req.error(), sl.req, "send completion");
        sl.busy = false;
        ++sent_done;
      }
    for (auto& rs : recvs)
      if (rs.busy && s.test(rs.req)) {
        expect_ok(rs.req.error(), rs.req, "receive completion");
        const recv_status st = rs.req.status();
        std::pair<int, tag_t> key{st.source, st.tag};
        if (rs.wildcard) --wildcard_out;
        else {
          expect(key == std::make_pair(rs.src, rs.tag), "specific receive matched the wrong source/tag");
          --specific_out[key];
        }
        expect(expected.count(key) > 0, "message from an unexpected (source, tag)");
        got[key].push_back({rs.order, st.length, fnv(rs.buf.data(), st.length)});
        ++received[key];
        ++done_in;
        rs.busy = false;
      }
  }
  // Per (source, tag), in the order the receives were posted, the messages
  // must be exactly the ones sent, in send order, byte for byte.
  std::size_t bytes = 0;
  for (auto& [key, list] : got) {
    std::sort(list.begin(), list.end(), [](const got_msg& a, const got_msg& b) { return a.order < b.order; });
    const auto& exp = expected[key];
    expect(list.size() == exp.size(), "message count per (source, tag)");
    for (std::size_t i = 0; i < list.size(); ++i) {
      const auto [size, idx] = exp[i];
      if (list[i].size != size)
        fail("from rank " + std::to_string(key.first) + " tag " + std::to_string(key.second) + " message #" +
             std::to_string(i) + ": size " + std::to_string(list[i].size) + " != " + std::to_string(size) +
             " (order broken?)");
      std::vector<unsigned char> ref(size);
      fill(ref, content_seed(key.first, me, idx));
      expect(fnv(ref.data(), size) == list[i].hash, "content mismatch from rank " + std::to_string(key.first));
      bytes += size;
    }
  }
  std::printf("stress rank %d: sent %zu, received %zu messages (%zu bytes) in order, strategy %s\n", me,
              total_out, total_in, bytes, std::string(s.strategy_name()).c_str());
  // What each track of the gates carried (several with NMAD_DRIVERS=a+b).
  const session_stats st = s.stats();
  std::printf("stress rank %d: drivers %s, rail sends %llu %llu %llu %llu\n", me, s.driver_name().c_str(),
              static_cast<unsigned long long>(st.rail_sends[0]), static_cast<unsigned long long>(st.rail_sends[1]),
              static_cast<unsigned long long>(st.rail_sends[2]), static_cast<unsigned long long>(st.rail_sends[3]));
  return 0;
}

// ---- many threads per process --------------------------------------------------
//
// `mt_stress THREADS PER_STREAM SEED`: every process runs THREADS threads;
// thread t of every rank sends PER_STREAM messages to thread t of every
// other rank (random sizes 0 B - 8 MiB, random tags of t's own family) and
// receives theirs, all at once through one session. Tags 0-2 of a family
// are received by source, tag 3 (messages of at most 64 KiB) by any-source
// receives. Receives are posted up front in a random interleaving (each
// stream's in its order), sends go out in windows. Checked: every size,
// every byte, the source and tag of each wildcard match, and that each
// (peer, tag) stream was matched in its sending order.
namespace mt {

tag_t family(int t) { return static_cast<tag_t>(t + 1) << 20; }

std::vector<msg_spec> plan(int src, int dst, int t, int count, std::uint64_t seed) {
  std::mt19937_64 rng(seed * 7919 + static_cast<std::uint64_t>(src) * 131 + static_cast<std::uint64_t>(dst) * 17 +
                      static_cast<std::uint64_t>(t));
  std::vector<msg_spec> v(count);
  for (int i = 0; i < count; ++i) {
    const tag_t tag = std::uniform_int_distribution<tag_t>(0, 3)(rng);
    const double u = std::uniform_real_distribution<double>(0, 1)(rng);
    std::size_t size = u < 0.85   ? std::uniform_int_distribution<std::size_t>(0, 512)(rng)
                       : u < 0.99 ? std::uniform_int_distribution<std::size_t>(513, 64 * 1024)(rng)
                                  : std::uniform_int_distribution<std::size_t>(64 * 1024, 8 << 20)(rng);
    if (tag == 3) size = std::min<std::size_t>(size, 64 * 1024);
    v[i] = {size, family(t) + tag};
  }
  if (src == 0 && t == 0 && count > 1) v[0] = {std::size_t{8} << 20, family(t)};  // the largest, every run
  return v;
}

std::uint64_t seed_of(int src, int dst, int t, int idx) {
  return (static_cast<std::uint64_t>(src) << 56) ^ (static_cast<std::uint64_t>(dst) << 48) ^
         (static_cast<std::uint64_t>(t) << 40) ^ static_cast<std::uint64_t>(idx);
}

struct recv_item {
  request req;
  std::vector<unsigned char> buf;
  int source = -1;  // any_source for tag 3
  tag_t tag = 0;
  int stream_index = -1;  // specific: which message of (source, tag) it must get
};

void run_thread(session& s, int t, int per_stream, std::uint64_t seed, std::atomic<int>& done_threads) {
  const int me = s.rank(), n = s.size();
  std::mt19937_64 rng(seed ^ (static_cast<std::uint64_t>(me) << 8) ^ static_cast<std::uint64_t>(t));
  // Receives: per peer, that peer's stream; specific ones keep stream order.
  std::vector<std::vector<msg_spec>> in(n);
  std::size_t wildcard = 0;
  std::vector<std::unique_ptr<recv_item>> recvs;
  std::vector<std::size_t> next(n, 0);
  std::vector<int> left;
  for (int p = 0; p < n; ++p)
    if (p != me) {
      in[p] = plan(p, me, t, per_stream, seed);
      left.push_back(p);
    }
  while (!left.empty()) {  // a random interleaving of the peers' streams
    const std::size_t k = std::uniform_int_distribution<std::size_t>(0, left.size() - 1)(rng);
    const int p = left[k];
    const msg_spec& m = in[p][next[p]];
    auto r = std::make_unique<recv_item>();
    if (m.tag == family(t) + 3) {
      r->source = any_source;
      r->buf.resize(64 * 1024);
      ++wildcard;
    } else {
      r->source = p;
      r->buf.resize(m.size);
      r->stream_index = static_cast<int>(next[p]);
    }
    r->tag = m.tag;
    expect(s.irecv(r->source, r->tag, r->buf.data(), r->buf.size(), r->req) == errc::ok, "mt irecv");
    recvs.push_back(std::move(r));
    if (++next[p] == in[p].size()) left.erase(left.begin() + static_cast<std::ptrdiff_t>(k));
  }
  // Sends: to every peer in turn, a window of 4 in flight.
  std::vector<std::vector<msg_spec>> out(n);
  for (int p = 0; p < n; ++p)
    if (p != me) out[p] = plan(me, p, t, per_stream, seed);
  struct send_item {
    request req;
    std::vector<unsigned char> buf;
  };
  std::vector<send_item> window(4);
  std::size_t slot = 0;
  for (int i = 0; i < per_stream; ++i)
    for (int p = 0; p < n; ++p) {
      if (p == me) continue;
      send_item& w = window[slot++ % window.size()];
      expect_ok(s.wait(w.req), w.req, "mt send");  // the slot's previous send
      w.buf.resize(out[p][i].size);
      fill(w.buf, seed_of(me, p, t, i));
      expect(s.isend(p, out[p][i].tag, w.buf.data(), w.buf.size(), w.req) == errc::ok, "mt isend");
    }
  for (send_item& w : window) expect_ok(s.wait(w.req), w.req, "mt send");
  // Check: specific receives got their stream's message; the wildcard
  // ones, per (source, tag), the stream's messages in posting order.
  std::map<std::pair<int, tag_t>, std::vector<std::size_t>> stream_positions;  // (p, tag) -> stream indices
  for (int p = 0; p < n; ++p)
    for (std::size_t i = 0; i < in[p].size(); ++i) stream_positions[{p, in[p][i].tag}].push_back(i);
  std::map<std::pair<int, tag_t>, std::size_t> consumed;
  for (auto& r : recvs) {
    expect_ok(s.wait(r->req), r->req, "mt recv");
    const recv_status st = r->req.status();
    expect(st.tag == r->tag, "mt: wrong tag");
    expect(st.source >= 0 && st.source < n && st.source != me, "mt: bad source");
    if (r->source != any_source) expect(st.source == r->source, "mt: wrong source");
    // The message this receive got: the next of its (source, tag) stream.
    auto& pos = stream_positions[{st.source, st.tag}];
    std::size_t& c = consumed[{st.source, st.tag}];
    expect(c < pos.size(), "mt: more messages than sent on a stream");
    const std::size_t idx = pos[c++];
    if (r->stream_index >= 0)
      expect(static_cast<std::size_t>(r->stream_index) == idx, "mt: stream matched out of order");
    const std::size_t size = in[st.source][idx].size;
    expect(st.length == size, "mt: size " + std::to_string(st.length) + " != " + std::to_string(size) +
                                  " (order broken?)");
    std::vector<unsigned char> ref(size);
    fill(ref, seed_of(st.source, me, t, static_cast<int>(idx)));
    expect(size == 0 || std::memcmp(ref.data(), r->buf.data(), size) == 0, "mt: content mismatch");
  }
  (void)wildcard;
  done_threads.fetch_add(1);
}

}  // namespace mt

int mt_stress(session& s, int threads, int per_stream, std::uint64_t seed) {
  std::atomic<int> done{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] { mt::run_thread(s, t, per_stream, seed, done); });
  for (auto& th : pool) th.join();
  expect(done.load() == threads, "mt: a thread did not finish");
  std::printf("mt_stress rank %d: %d threads x %d peers x %d messages in order\n", s.rank(), threads,
              s.size() - 1, per_stream);
  return 0;
}

// `callbacks N`: rank 1 answers N pings from completion callbacks: each
// receive's callback sends the echo and posts the next receive (requests
// started from callbacks, outside the engine's locks); its main thread only
// waits for the count.
int callbacks(session& s, int n) {
  if (s.rank() > 1) return 0;
  if (s.rank() == 0) {
    for (int i = 0; i < n; ++i) {
      int v = i, back = -1;
      request sr, rr;
      expect(s.irecv(1, 2, &back, sizeof back, rr) == errc::ok, "cb irecv");
      expect(s.isend(1, 1, &v, sizeof v, sr) == errc::ok, "cb isend");
      expect_ok(s.wait(sr), sr, "cb send");
      expect_ok(s.wait(rr), rr, "cb recv");
      expect(back == i + 1000, "cb: wrong echo");
    }
    std::printf("callbacks rank 0: %d echoes from callbacks\n", n);
    return 0;
  }
  struct state {
    session* s;
    int n;
    std::atomic<int> answered{0};
    int got[2] = {-1, -1};
    int reply[2] = {0, 0};
    request rr[2], sr[2];
    static void on_recv(request& r, void* arg) {
      auto* st = static_cast<state*>(arg);
      const int k = &r == &st->rr[0] ? 0 : 1;
      expect(r.error() == errc::ok, "cb: receive failed in callback");
      const int i = st->got[k];
      // Answer from the callback (the previous send on this slot is done:
      // the peer waited for its echo before sending again).
      if (!st->sr[k].completed()) expect_ok(st->s->wait(st->sr[k]), st->sr[k], "cb previous send");
      st->reply[k] = i + 1000;
      expect(st->s->isend(0, 2, &st->reply[k], sizeof(int), st->sr[k]) == errc::ok, "cb: isend from callback");
      const int seen = st->answered.fetch_add(1) + 1;
      if (seen < st->n) {
        // The next ping lands in the other slot (this one is still completing).
        const int o = 1 - k;
        st->rr[o].on_complete(&state::on_recv, st);
        expect(st->s->irecv(0, 1, &st->got[o], sizeof(int), st->rr[o]) == errc::ok, "cb: irecv from callback");
      }
    }
  };
  auto st = std::make_unique<state>();
  st->s = &s;
  st->n = n;
  st->rr[0].on_complete(&state::on_recv, st.get());
  expect(s.irecv(0, 1, &st->got[0], sizeof(int), st->rr[0]) == errc::ok, "cb first irecv");
  s.wait_until([&] { return st->answered.load() == n; });
  for (auto& r : st->sr) expect_ok(s.wait(r), r, "cb last sends");
  for (auto& r : st->rr) s.wait(r);
  std::printf("callbacks rank 1: %d receives answered from callbacks\n", n);
  return 0;
}

// ---- smaller scenarios -----------------------------------------------------------

int pingpong(session& s, int iters) {
  if (s.size() < 2) fail("pingpong needs 2 ranks");
  if (s.rank() > 1) return 0;
  const int peer = 1 - s.rank();
  for (int i = 0; i < iters; ++i) {
    int v = i, got = -1;
    request r;
    if (s.rank() == 0) {
      expect_ok(s.isend(peer, 1, &v, sizeof v, r), r, "isend");
      expect_ok(s.wait(r), r, "send");
      expect_ok(s.irecv(peer, 1, &got, sizeof got, r), r, "irecv");
      expect_ok(s.wait(r), r, "recv");
    } else {
      expect_ok(s.irecv(peer, 1, &got, sizeof got, r), r, "irecv");
      expect_ok(s.wait(r), r, "recv");
      expect_ok(s.isend(peer, 1, &got, sizeof got, r), r, "isend");
      expect_ok(s.wait(r), r, "send");
      got = i;
    }
    expect(got == i, "pingpong value");
  }
  std::printf("pingpong rank %d: %d round trips ok\n", s.rank(), iters);
  return 0;
}

int aggregation(session& s, int n) {
  if (s.rank() > 1) return 0;
  int token = 0;
  request r;
  if (s.rank() == 1) {
    std::vector<int> got(n, -1);
    std::vector<request> rr(n);
    for (int i = 0; i < n; ++i) expect_ok(s.irecv(0, 7, &got[i], sizeof(int), rr[i]), rr[i], "irecv");
    expect_ok(s.isend(0, 8, &token, sizeof token, r), r, "ready");
    expect_ok(s.wait(r), r, "ready");
    for (int i = 0; i < n; ++i) {
      expect_ok(s.wait(rr[i]), rr[i], "recv");
      expect(got[i] == i, "aggregated message order/content");
    }
    std::printf("aggregation rank 1: %d messages in order\n", n);
    return 0;
  }
  expect_ok(s.irecv(1, 8, &token, sizeof token, r), r, "ready");
  expect_ok(s.wait(r), r, "ready");
  std::vector<int> vals(n);
  std::vector<request> rs(n);
  const auto before = s.stats().packets_sent;
  for (int i = 0; i < n; ++i) {  // no progress in between: the track is busy
    vals[i] = i;
    expect_ok(s.isend(1, 7, &vals[i], sizeof(int), rs[i]), rs[i], "isend");
  }
  for (int i = 0; i < n; ++i) expect_ok(s.wait(rs[i]), rs[i], "send");
  const auto packets = s.stats().packets_sent - before;
  std::printf("aggregation: strategy %s sent %d messages in %llu packets\n", std::string(s.strategy_name()).c_str(),
              n, static_cast<unsigned long long>(packets));
  if (s.strategy_name() == "default") expect(packets == static_cast<unsigned>(n), "default must not aggregate");
  if (s.strategy_name() == "aggreg") expect(packets < static_cast<unsigned>(n), "aggreg must aggregate");
  return 0;
}

int pack_rpc(session& s, int rounds) {
  if (s.rank() > 1) return 0;
  std::mt19937 rng(42);
  const std::uint32_t service = 0xCAFE;
  if (s.rank() == 0) {  // client
    for (int i = 0; i < rounds; ++i) {
      std::uint64_t len = (i % 5 == 4) ? (1u << 20) + i : rng() % 5000;
      std::vector<unsigned char> body(len);
      fill(body, 1000 + i);
      {
        pack_connection p(s, 1, 50);
        expect(p.pack(&service, sizeof service, pack_mode::express) == errc::ok, "pack service");
        expect(p.pack(&len, sizeof len, pack_mode::express) == errc::ok, "pack len");
        expect(p.pack(body.data(), len, pack_mode::cheaper) == errc::ok, "pack body");
        expect(p.end() == errc::ok, "pack end");
      }
      unpack_connection u(s, 1, 51);
      std::uint64_t rlen = 0;
      expect(u.unpack(&rlen, sizeof rlen, pack_mode::express) == errc::ok, "unpack answer length");
      expect(rlen == len, "answer length (express piece readable after unpack)");
      std::vector<unsigned char> answer(rlen);
      expect(u.unpack(answer.data(), rlen, pack_mode::cheaper) == errc::ok, "unpack answer");
      expect(u.end() == errc::ok, "unpack end");
      for (std::size_t k = 0; k < len; ++k) expect(answer[k] == static_cast<unsigned char>(~body[k]), "answer bytes");
    }
    std::printf("pack client: %d calls answered correctly\n", rounds);
  } else {  // server
    for (int i = 0; i < rounds; ++i) {
      unpack_connection u(s, any_source, 50);
      std::uint32_t svc = 0;
      std::uint64_t len = 0;
      expect(u.unpack(&svc, sizeof svc, pack_mode::express) == errc::ok, "unpack service");
      expect(svc == service, "service id readable right after an express unpack");
      expect(u.unpack(&len, sizeof len, pack_mode::express) == errc::ok, "unpack len");
      expect(len <= (2u << 20), "length readable right after an express unpack");
      std::vector<unsigned char> body(len);
      expect(u.unpack(body.data(), len, pack_mode::cheaper) == errc::ok, "unpack body");
      expect(u.end() == errc::ok, "unpack end");
      std::vector<unsigned char> ref(len);
      fill(ref, 1000 + i);
      expect(body == ref, "cheaper piece complete after unpack_end");
      expect(u.source() == 0, "source of the request");
      for (auto& b : body) b = static_cast<unsigned char>(~b);
      pack_connection p(s, 0, 51);
      p.pack(&len, sizeof len, pack_mode::express);
      p.pack(body.data(), len, pack_mode::cheaper);
      expect(p.end() == errc::ok, "answer end");
    }
    std::printf("pack server: %d calls served\n", rounds);
  }
  return 0;
}

int truncate(session& s) {
  if (s.rank() > 1) return 0;
  if (s.rank() == 0) {
    std::vector<unsigned char> a(100), b(1 << 20);
    fill(a, 1);
    fill(b, 2);
    int ok = 1234;
    request r1, r2, r3;
    expect_ok(s.isend(1, 1, a.data(), a.size(), r1), r1, "isend");
    expect_ok(s.isend(1, 1, b.data(), b.size(), r2), r2, "isend");
    expect_ok(s.isend(1, 2, &ok, sizeof ok, r3), r3, "isend");
    expect_ok(s.wait(r1), r1, "send small (receiver truncates)");
    expect_ok(s.wait(r2), r2, "send large (receiver truncates)");
    expect_ok(s.wait(r3), r3, "send");
    std::printf("truncate sender: all sends completed normally\n");
    return 0;
  }
  std::vector<unsigned char> a(50), b(100 * 1024);
  request r;
  expect_ok(s.irecv(0, 1, a.data(), a.size(), r), r, "irecv");
  expect(s.wait(r) == errc::truncated, "small message into a smaller buffer must be truncated");
  std::printf("truncate receiver: %s\n", r.error_message().c_str());
  std::vector<unsigned char> ref(100);
  fill(ref, 1);
  expect(std::memcmp(a.data(), ref.data(), 50) == 0, "truncated prefix content");
  expect_ok(s.irecv(0, 1, b.data(), b.size(), r), r, "irecv");
  expect(s.wait(r) == errc::truncated, "rendezvous into a smaller buffer must be truncated");
  std::printf("truncate receiver: %s\n", r.error_message().c_str());
  std::vector<unsigned char> ref2(1 << 20);
  fill(ref2, 2);
  expect(std::memcmp(b.data(), ref2.data(), b.size()) == 0, "truncated rendezvous prefix content");
  int ok = 0;
  expect_ok(s.irecv(0, 2, &ok, sizeof ok, r), r, "irecv");
  expect_ok(s.wait(r), r, "message after truncations");
  expect(ok == 1234, "message after truncations");
  std::printf("truncate receiver: the process went on\n");
  return 0;
}

int killed(session& s) {
  const int me = s.rank();
  int token = 0;
  request r;
  // Everybody says hello to everybody first, so the failure happens mid-run.
  for (int p = 0; p < s.size(); ++p) {
    if (p == me) continue;
    request a, b;
    int in = -1;
    expect_ok(s.isend(p, 1, &me, sizeof me, a), a, "hello");
    expect_ok(s.irecv(p, 1, &in, sizeof in, b), b, "hello");
    expect_ok(s.wait(a), a, "hello");
    expect_ok(s.wait(b), b, "hello");
  }
  if (me == 1) {
    std::fflush(stdout);
    ::raise(SIGKILL);
  }
  std::vector<unsigned char> big(4 << 20);
  request rs, rr;
  s.irecv(1, 2, &token, sizeof token, rr);
  s.isend(1, 3, big.data(), big.size(), rs);  // rendezvous: waits for rank 1
  const errc er = s.wait(rr);
  const errc es = s.wait(rs);
  expect(er == errc::peer_failed, "pending receive from the dead rank must fail");
  expect(es == errc::peer_failed, "pending send to the dead rank must fail");
  expect(rr.error_message().find("rank 1") != std::string::npos, "error names the peer: " + rr.error_message());
  expect(rs.error_message().find("rank 1") != std::string::npos, "error names the peer: " + rs.error_message());
  expect(!s.peer_alive(1), "peer_alive(1) must be false");
  // New operations towards the dead rank fail at once.
  expect(s.isend(1, 4, &token, sizeof token, r) == errc::peer_failed, "isend to a dead rank");
  expect(s.probe(1, 77).error == errc::peer_failed, "a blocking probe of a dead rank returns an error");
  std::printf("rank %d saw: %s\n", me, rr.error_message().c_str());
  // The survivors can still talk to each other.
  if (s.size() > 2 && me != 1) {
    const int other = me == 0 ? 2 : 0;
    int v = 99, got = 0;
    request a, b;
    expect_ok(s.isend(other, 5, &v, sizeof v, a), a, "survivor send");
    expect_ok(s.irecv(other, 5, &got, sizeof got, b), b, "survivor recv");
    expect_ok(s.wait(a), a, "survivor send");
    expect_ok(s.wait(b), b, "survivor recv");
    expect(got == 99, "survivors exchange");
    std::printf("rank %d: survivors still exchange messages\n", me);
  }
  std::fflush(stdout);
  return 0;
}

// Rank 1 announces two rendezvous messages to rank 0, then stops calling
// the library and dies. Rank 0's receive of the first is matched (its
// ready-to-receive is never answered); the second waits unexpected. Every
// receive and probe involving rank 1 must fail, naming it, once it is dead.
int killed_rdv(session& s) {
  const int me = s.rank();
  std::vector<unsigned char> big(4 << 20, 0x5a);
  if (me == 1) {
    request a, b;
    expect_ok(s.isend(0, 8, big.data(), big.size(), a), a, "rendezvous send 8");
    expect_ok(s.isend(0, 9, big.data(), big.size(), b), b, "rendezvous send 9");
    // Both drivers write a packet out when it is posted: no progress call
    // here, so the ready-to-receives are never seen.
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // never answers the ready-to-receive
    ::raise(SIGKILL);
  }
  if (me != 0) return 0;
  const auto t0 = std::chrono::steady_clock::now();
  request r8;
  expect_ok(s.irecv(1, 8, big.data(), big.size(), r8), r8, "irecv 8");
  const errc e8 = s.wait(r8);
  expect(e8 == errc::peer_failed, "matched rendezvous receive from a dead rank must fail, got " +
                                      std::string(to_string(e8)));
  expect(r8.error_message().find("rank 1") != std::string::npos, "error names the peer: " + r8.error_message());
  request r9;
  s.irecv(1, 9, big.data(), big.size(), r9);
  const errc e9 = s.wait(r9);
  expect(e9 == errc::peer_failed, "receive of an unexpected rendezvous from a dead rank must fail, got " +
                                      std::string(to_string(e9)));
  request ra;
  s.irecv(any_source, 10, big.data(), 8, ra);
  expect(s.wait(ra) == errc::peer_failed, "any-source receive with every other rank dead must fail");
  expect(s.probe(any_source, 10).error == errc::peer_failed, "any-source probe with every other rank dead");
  expect(s.probe(1, 10).error == errc::peer_failed, "probe of a dead rank");
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("rank 0 saw every failure (%s) after %.2f s\n", r8.error_message().c_str(), secs);
  std::fflush(stdout);
  return 0;
}

// Rank 1 packs an express length and a 4 MiB cheaper body (a rendezvous)
// to rank 0 and dies while blocked in end(). Rank 0 unpacks the length,
// then, once rank 1 is dead, the body: its rendezvous had no destination
// until that unpack, so it waited on no list but its gate's; the unpack
// and end() must fail naming rank 1, not wait.
int killed_unpack(session& s) {
  const int me = s.rank();
  std::vector<unsigned char> big(4 << 20, 0x3c);
  if (me == 1) {
    std::thread killer([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      ::raise(SIGKILL);
    });
    killer.detach();
    pack_connection p(s, 0, 11);
    const std::uint64_t n = big.size();
    p.pack(&n, sizeof n, pack_mode::express);
    p.pack(big.data(), big.size(), pack_mode::cheaper);
    p.end();  // the body is never asked for before the kill
    return 1;
  }
  if (me != 0) return 0;
  unpack_connection u(s, 1, 11);
  std::uint64_t n = 0;
  expect(u.unpack(&n, sizeof n, pack_mode::express) == errc::ok && n == big.size(), "express length");
  while (s.peer_alive(1)) {
    s.progress();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const auto t0 = std::chrono::steady_clock::now();
  const errc e = u.unpack(big.data(), big.size(), pack_mode::express);
  const errc end = u.end();
  expect(e == errc::peer_failed, "unpack of a dead rank's rendezvous piece must fail, got " +
                                     std::string(to_string(e)));
  expect(end == errc::peer_failed, "end() of a dead rank's message must fail, got " + std::string(to_string(end)));
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("rank 0: unpack from the dead rank failed after %.2f s\n", secs);
  std::fflush(stdout);
  return 0;
}

int pull(session& s, bool expect_pulled) {
  if (s.size() < 2 || s.rank() > 1) return 0;
  std::vector<unsigned char> buf(4 << 20);
  request r;
  if (s.rank() == 1) {
    fill(buf, 99);
    expect_ok(s.isend(0, 4, buf.data(), buf.size(), r), r, "isend");
    std::this_thread::sleep_for(std::chrono::milliseconds(400));  // "computing"
    const bool done = s.test(r);
    std::printf("pull: first test after the sender's pause: %s\n", done ? "complete" : "pending");
    // Pushing, one progress round may still move everything (the receiver
    // drains the ring meanwhile), so only the pulled case is asserted.
    if (expect_pulled) expect(done, "the receiver should have pulled the data");
    expect_ok(s.wait(r), r, "send");
    return 0;
  }
  expect_ok(s.irecv(1, 4, buf.data(), buf.size(), r), r, "irecv");
  expect_ok(s.wait(r), r, "recv");
  std::vector<unsigned char> want(buf.size());
  fill(want, 99);
  expect(buf == want, "pulled bytes differ");
  std::printf("pull: %zu bytes verified\n", buf.size());
  return 0;
}

// Rank 0 waits for a message rank 1 sends after `ms` milliseconds; with a
// blocking wait policy it must sleep, not spin: its CPU time is printed.
int sleeper(session& s, int ms) {
  if (s.size() < 2 || s.rank() > 1) return 0;
  int v = 0;
  request r;
  if (s.rank() == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    v = 4242;
    expect_ok(s.isend(0, 3, &v, sizeof v, r), r, "isend");
    expect_ok(s.wait(r), r, "send");
    return 0;
  }
  rusage before{}, after{};
  ::getrusage(RUSAGE_SELF, &before);
  const auto t0 = std::chrono::steady_clock::now();
  expect_ok(s.irecv(1, 3, &v, sizeof v, r), r, "irecv");
  expect_ok(s.wait(r), r, "recv");
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ::getrusage(RUSAGE_SELF, &after);
  auto secs = [](const timeval& a, const timeval& b) { return (b.tv_sec - a.tv_sec) + (b.tv_usec - a.tv_usec) / 1e6; };
  const double cpu = secs(before.ru_utime, after.ru_utime) + secs(before.ru_stime, after.ru_stime);
  expect(v == 4242, "received value");
  const wait_policy wp = s.get_wait_policy();
  std::printf("sleeper: waited %.3f s using %.3f s of CPU (%s)\n", wall, cpu,
              wp == wait_policy::busy ? "busy" : wp == wait_policy::block ? "block" : "fixed-spin");
  std::fflush(stdout);
  return 0;
}

int knock(const std::string& address, const std::string& bytes) {
  const auto colon = address.rfind(':');
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<std::uint16_t>(std::stoi(address.substr(colon + 1))));
  ::inet_pton(AF_INET, address.substr(0, colon).c_str(), &sa.sin_addr);
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) fail("intruder could not connect");
  (void)!::write(fd, bytes.data(), bytes.size());
  // The engine must close on us; wait (bounded) for EOF.
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char c;
  ssize_t n;
  do {
    n = ::read(fd, &c, 1);
  } while (n > 0);
  const int err = errno;
  ::close(fd);
  // Closed on us: EOF, or a reset when our unread bytes were discarded.
  return (n == 0 || err == ECONNRESET) ? 0 : -1;
}

std::string hello_with_key(int rank, const std::string& key) {
  tcp_wire::hello h;
  h.rank = rank;
  h.key_len = static_cast<std::uint32_t>(key.size());
  std::string bytes(reinterpret_cast<const char*>(&h), sizeof h);
  return bytes + key;
}

int intruder(session& s) {
  if (s.rank() > 1) return 0;
  char addr[256] = {};
  request r;
  if (s.rank() == 1) {
    std::string a = s.local_address("tcp");
    std::snprintf(addr, sizeof addr, "%s", a.c_str());
    expect_ok(s.isend(0, 1, addr, sizeof addr, r), r, "address");
    expect_ok(s.wait(r), r, "address");
  } else {
    expect_ok(s.irecv(1, 1, addr, sizeof addr, r), r, "address");
    expect_ok(s.wait(r), r, "address");
    std::string garbage(4096, '\0');
    std::mt19937 rng(7);
    for (auto& c : garbage) c = static_cast<char>(rng());
    const char* key = std::getenv("NMAD_JOB_KEY");
    expect(knock(addr, hello_with_key(0, "not-the-job-key")) == 0, "wrong key must be refused (closed)");
    expect(knock(addr, garbage) == 0, "random bytes must be refused (closed)");
    // The right key, but claiming a rank that is already connected.
    if (key) expect(knock(addr, hello_with_key(0, key)) == 0, "duplicate rank must be refused");
    std::printf("intruder: three foreign connections were refused\n");
  }
  // The job itself is unaffected.
  for (int i = 0; i < 100; ++i) {
    int v = i, got = -1;
    request a, b;
    expect_ok(s.isend(1 - s.rank(), 2, &v, sizeof v, a), a, "after intrusion");
    expect_ok(s.irecv(1 - s.rank(), 2, &got, sizeof got, b), b, "after intrusion");
    expect_ok(s.wait(a), a, "after intrusion");
    expect_ok(s.wait(b), b, "after intrusion");
    expect(got == i, "exchange after intrusion");
  }
  std::printf("intruder rank %d: job unaffected\n", s.rank());
  return 0;
}

// Idle connections to rank 1's tcp listener from 5 loopback addresses
// (each bound to 127.0.0.k before connecting), more than rank 1 has
// descriptors; rank 1 meanwhile waits for one message and measures the
// CPU time it spends waiting.
int flood(session& s, int per_addr, int hold_ms) {
  if (s.rank() > 1) return 0;
  char addr[256] = {};
  request r;
  if (s.rank() == 1) {
    std::string a = s.local_address("tcp");
    std::snprintf(addr, sizeof addr, "%s", a.c_str());
    expect_ok(s.isend(0, 1, addr, sizeof addr, r), r, "address");
    expect_ok(s.wait(r), r, "address");
    int go = 0;
    rusage before{}, after{};
    ::getrusage(RUSAGE_SELF, &before);
    const auto t0 = std::chrono::steady_clock::now();
    expect_ok(s.irecv(0, 2, &go, sizeof go, r), r, "irecv go");
    expect_ok(s.wait(r), r, "go");
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ::getrusage(RUSAGE_SELF, &after);
    auto secs = [](const timeval& a, const timeval& b) { return (b.tv_sec - a.tv_sec) + (b.tv_usec - a.tv_usec) / 1e6; };
    const double cpu = secs(before.ru_utime, after.ru_utime) + secs(before.ru_stime, after.ru_stime);
    expect(go == 77, "go message");
    std::printf("flood: rank 1 waited %.3f s using %.3f s of CPU\n", wall, cpu);
    std::fflush(stdout);
  } else {
    expect_ok(s.irecv(1, 1, addr, sizeof addr, r), r, "address");
    expect_ok(s.wait(r), r, "address");
    rlimit rl{};
    ::getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < static_cast<rlim_t>(5 * per_addr + 64)) {
      rl.rlim_cur = std::min<rlim_t>(rl.rlim_max, 5 * per_addr + 64);
      ::setrlimit(RLIMIT_NOFILE, &rl);
    }
    const std::string a(addr);
    const auto colon = a.rfind(':');
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<std::uint16_t>(std::stoi(a.substr(colon + 1))));
    ::inet_pton(AF_INET, a.substr(0, colon).c_str(), &to.sin_addr);
    std::vector<int> held;
    for (int k = 1; k <= 5; ++k)
      for (int i = 0; i < per_addr; ++i) {
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) break;
        sockaddr_in from{};
        from.sin_family = AF_INET;
        from.sin_addr.s_addr = htonl(0x7f000000u + static_cast<std::uint32_t>(k));
        if (::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0 ||
            (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0 && errno != EINPROGRESS)) {
          ::close(fd);
          continue;
        }
        held.push_back(fd);
      }
    std::printf("flood: %zu idle connections held for %d ms\n", held.size(), hold_ms);
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));
    const int go = 77;
    expect_ok(s.isend(1, 2, &go, sizeof go, r), r, "isend go");
    expect_ok(s.wait(r), r, "go");
    for (int fd : held) ::close(fd);
  }
  // The job itself goes on.
  for (int i = 0; i < 100; ++i) {
    int v = i, got = -1;
    request a, b;
    expect_ok(s.isend(1 - s.rank(), 3, &v, sizeof v, a), a, "after the flood");
    expect_ok(s.irecv(1 - s.rank(), 3, &got, sizeof got, b), b, "after the flood");
    expect_ok(s.wait(a), a, "after the flood");
    expect_ok(s.wait(b), b, "after the flood");
    expect(got == i, "exchange after the flood");
  }
  std::printf("flood rank %d: job unaffected\n", s.rank());
  return 0;
}

int threads(session& s, int iters) {
  if (s.rank() > 1) return 0;
  const int peer = 1 - s.rank();
  auto body = [&](int t) {
    std::vector<unsigned char> buf(t == 0 ? 8 : 100000), in(buf.size());
    for (int i = 0; i < iters; ++i) {
      fill(buf, static_cast<std::uint64_t>(i * 2 + t));
      request a, b;
      expect_ok(s.irecv(peer, 100 + t, in.data(), in.size(), b), b, "thread irecv");
      expect_ok(s.isend(peer, 100 + t, buf.data(), buf.size(), a), a, "thread isend");
      expect_ok(s.wait(a), a, "thread send");
      expect_ok(s.wait(b), b, "thread recv");
      expect(in == buf, "thread message content");
    }
  };
  std::thread t1(body, 0), t2(body, 1);
  t1.join();
  t2.join();
  std::printf("threads rank %d: 2 threads x %d exchanges ok\n", s.rank(), iters);
  return 0;
}


// ---- request lifetime: destroying a pending request cancels it ----------------

// Takes the memory destroyed requests left, filled with a pattern (an
// application reusing it): a stale reference to it then breaks visibly.
std::vector<std::unique_ptr<unsigned char[]>> reuse_freed_requests(std::size_t n = 16) {
  std::vector<std::unique_ptr<unsigned char[]>> blocks;
  for (std::size_t i = 0; i < n; ++i) {
    blocks.emplace_back(new unsigned char[sizeof(request)]);
    std::memset(blocks.back().get(), 0xa5, sizeof(request));
  }
  return blocks;
}

// Rank `from` tells rank `to` it may go on (one byte on `tag`).
void signal_step(session& s, int from, int to, tag_t tag) {
  char c = 1;
  request r;
  if (s.rank() == from) {
    expect_ok(s.isend(to, tag, &c, 1, r), r, "step send");
    expect_ok(s.wait(r), r, "step send");
  } else if (s.rank() == to) {
    expect_ok(s.irecv(from, tag, &c, 1, r), r, "step recv");
    expect_ok(s.wait(r), r, "step recv");
  }
}

bool all_bytes(const std::vector<unsigned char>& v, unsigned char c) {
  return std::all_of(v.begin(), v.end(), [c](unsigned char x) { return x == c; });
}

// ---- partitioned messages ---------------------------------------------------------

// The byte at `off` of round `round`'s message.
unsigned char part_byte(int round, std::uint64_t off) {
  return static_cast<unsigned char>((off * 131 + static_cast<std::uint64_t>(round) * 17 + (off >> 9)) & 0xff);
}

// Rank 0 sends `rounds` partitioned messages to rank 1: random lengths (0 B
// to 2 MiB), 1-64 pieces handed over in random order by `threads`
// threads, received as 1-64 parts of another size. The receiver checks
// each part as soon as parrived() says it is there, then the whole
// message, then that every part was reported. Round 0 also checks the
// argument errors; the last two rounds a longer (truncated) and a shorter
// message than the receive.
void partitioned_side(session& s, int rounds, int threads, bool sending);

int partitioned(session& s, int rounds, int threads) {
  if (s.rank() > 1) return 0;
  // Alone: rank 0 sends to itself, the sender in a thread of its own.
  if (s.size() == 1) {
    std::thread sender([&] { partitioned_side(s, rounds, threads, true); });
    partitioned_side(s, rounds, threads, false);
    sender.join();
  } else {
    partitioned_side(s, rounds, threads, s.rank() == 0);
  }
  if (s.rank() == 0 && s.size() == 1) std::printf("partitioned: %d messages checked part by part\n", rounds);
  if (s.rank() == 1) std::printf("partitioned: %d messages checked part by part\n", rounds);
  return 0;
}

void partitioned_side(session& s, int rounds, int threads, bool sending) {
  constexpr tag_t kTag = 90;
  const int peer = s.size() == 1 ? 0 : 1 - s.rank();
  for (int round = 0; round < rounds; ++round) {
    std::mt19937_64 rng(static_cast<std::uint64_t>(round) * 7919 + 1);
    const int kind = static_cast<int>(rng() % 8);
    std::uint64_t len = kind == 0 ? 0 : kind < 5 ? 1 + rng() % 4096 : 1 + rng() % (2u << 20);
    const std::uint64_t pieces = 1 + rng() % std::min<std::uint64_t>(64, std::max<std::uint64_t>(len, 1));
    const std::uint64_t parts = 1 + rng() % std::min<std::uint64_t>(64, std::max<std::uint64_t>(len, 1));
    // Last two rounds: the sender's message is longer, then shorter.
    std::uint64_t send_len = len;
    if (round == rounds - 2) send_len = len + 100;
    if (round == rounds - 1) send_len = len / 2;
    if (sending) {
      std::vector<unsigned char> buf(send_len);
      for (std::uint64_t k = 0; k < send_len; ++k) buf[k] = part_byte(round, k);
      const std::uint64_t piece_len = send_len == 0 ? 0 : (send_len + pieces - 1) / pieces;
      request r;
      if (round == 0)
        expect(s.psend_piece(r, 0, buf.data(), 1) == errc::invalid_argument, "a piece of a request never opened");
      expect_ok(s.psend_begin(peer, kTag, send_len, r), r, "psend_begin");
      if (round == 0 && send_len >= 2) {
        expect(s.psend_piece(r, send_len, buf.data(), 1) == errc::invalid_argument, "a piece beyond the message");
        expect(s.psend_piece(r, send_len - 1, buf.data(), 2) == errc::invalid_argument, "a piece crossing the end");
        expect(s.psend_piece(r, 0, buf.data(), 0) == errc::invalid_argument, "an empty piece");
        expect(s.psend_piece(r, 0, nullptr, 1) == errc::invalid_argument, "a null piece");
      }
      std::vector<std::uint64_t> order;
      for (std::uint64_t off = 0; off < send_len; off += piece_len) order.push_back(off);
      std::shuffle(order.begin(), order.end(), rng);
      std::atomic<std::size_t> next{0};
      auto hand_over = [&] {
        for (std::size_t i; (i = next.fetch_add(1)) < order.size();) {
          const std::uint64_t off = order[i], n = std::min(piece_len, send_len - off);
          expect(s.psend_piece(r, off, buf.data() + off, n) == errc::ok, "psend_piece");
        }
      };
      std::vector<std::thread> ts;
      for (int t = 1; t < threads; ++t) ts.emplace_back(hand_over);
      hand_over();
      for (auto& t : ts) t.join();
      expect_ok(s.wait(r), r, "partitioned send");
      if (send_len > 0)
        expect(s.psend_piece(r, 0, buf.data(), 1) == errc::invalid_argument, "a piece of a completed message");
    } else {
      std::vector<unsigned char> buf(len, 0xEE);
      const std::uint64_t part_len = len == 0 ? 0 : (len + parts - 1) / parts;
      const std::uint64_t nparts = len == 0 ? 1 : (len + part_len - 1) / part_len;
      request r;
      expect_ok(s.precv(peer, kTag, buf.data(), len, part_len, r), r, "precv");
      std::vector<bool> seen(nparts, false);
      std::uint64_t seen_count = 0;
      auto check_part = [&](std::uint64_t p, const char* when) {
        const std::uint64_t lo = p * part_len, hi = std::min(len, lo + part_len);
        for (std::uint64_t k = lo; k < hi && k < send_len; ++k)
          if (buf[k] != part_byte(round, k))
            fail("round " + std::to_string(round) + ": byte " + std::to_string(k) + " of part " + std::to_string(p) +
                 " wrong " + when);
      };
      bool done = false;
      while (!done) {
        done = s.test(r);
        for (std::uint64_t p = 0; p < nparts; ++p)
          if (!seen[p] && s.parrived(r, p)) {
            check_part(p, "when parrived said it was there");
            seen[p] = true;
            ++seen_count;
          }
      }
      if (round == rounds - 2) {
        expect(r.error() == errc::truncated, "a longer message truncates: " + std::string(to_string(r.error())));
      } else {
        expect_ok(r.error(), r, "partitioned receive");
      }
      expect(r.status().length == std::min(len, send_len) || round == rounds - 2, "received length");
      for (std::uint64_t p = 0; p < nparts; ++p) check_part(p, "at completion");
      // Every part the message covers was reported arrived; none beyond.
      for (std::uint64_t p = 0; p < nparts; ++p) {
        const bool covered = std::min(len, (p + 1) * part_len) <= send_len;
        if (covered != seen[p])
          fail("round " + std::to_string(round) + ": part " + std::to_string(p) + (covered ? " never reported" : " reported but not sent"));
      }
      expect(!s.parrived(r, nparts, 1), "a part beyond the receive");
      (void)seen_count;
      for (std::uint64_t k = send_len; k < len; ++k) expect(buf[k] == 0xEE, "bytes beyond a shorter message untouched");
    }
  }
}

// Rank 0 hands over the n pieces of one message (64 B each) without
// progress in between, then waits; reports how many packets carried them.
int partitioned_packets(session& s, int n) {
  if (s.rank() > 1) return 0;
  const std::uint64_t piece = 64, len = piece * static_cast<std::uint64_t>(n);
  int token = 0;
  request t;
  if (s.rank() == 1) {
    std::vector<unsigned char> buf(len);
    request r;
    expect_ok(s.precv(0, 91, buf.data(), len, piece, r), r, "precv");
    expect_ok(s.isend(0, 92, &token, sizeof token, t), t, "ready");
    expect_ok(s.wait(t), t, "ready");
    expect_ok(s.wait(r), r, "partitioned receive");
    for (std::uint64_t k = 0; k < len; ++k) expect(buf[k] == part_byte(5, k), "partitioned bytes");
    return 0;
  }
  expect_ok(s.irecv(1, 92, &token, sizeof token, t), t, "ready");
  expect_ok(s.wait(t), t, "ready");
  std::vector<unsigned char> buf(len);
  for (std::uint64_t k = 0; k < len; ++k) buf[k] = part_byte(5, k);
  request r;
  expect_ok(s.psend_begin(1, 91, len, r), r, "psend_begin");
  const auto before = s.stats().packets_sent;
  for (int i = n - 1; i >= 0; --i)  // last first: any order goes
    expect(s.psend_piece(r, static_cast<std::uint64_t>(i) * piece, buf.data() + i * piece, piece) == errc::ok,
           "psend_piece");
  expect_ok(s.wait(r), r, "partitioned send");
  const auto packets = s.stats().packets_sent - before;
  std::printf("partitioned: strategy %s sent %d pieces in %llu packets\n", std::string(s.strategy_name()).c_str(), n,
              static_cast<unsigned long long>(packets));
  if (s.strategy_name() == "default") expect(packets == static_cast<unsigned>(n), "default sends each piece alone");
  if (s.strategy_name() == "aggreg") expect(packets < static_cast<unsigned>(n) / 2, "aggreg groups ready pieces");
  return 0;
}

int destroy_pending(session& s) {
  if (s.size() != 2) fail("run with 2 ranks");
  const int me = s.rank();
  std::vector<unsigned char> big(4 << 20);
  // 1. A destroyed receive never takes a message: the next receive does.
  std::vector<unsigned char> stale(4096, 0xee);
  if (me == 1) {
    auto r = std::make_unique<request>();
    expect_ok(s.irecv(0, 30, stale.data(), stale.size(), *r), *r, "irecv 30");
    r.reset();
  }
  auto reused = reuse_freed_requests();
  signal_step(s, 1, 0, 31);
  if (me == 0) {
    std::vector<unsigned char> out(4096);
    fill(out, 30);
    request r;
    expect_ok(s.isend(1, 30, out.data(), out.size(), r), r, "isend 30");
    expect_ok(s.wait(r), r, "send 30");
  } else {
    std::vector<unsigned char> in(4096), want(4096);
    fill(want, 30);
    request r;
    expect_ok(s.irecv(0, 30, in.data(), in.size(), r), r, "irecv 30 again");
    expect_ok(s.wait(r), r, "receive 30");
    expect(in == want, "message 30 went to the later receive intact");
    expect(all_bytes(stale, 0xee), "the destroyed receive's buffer was written");
  }
  // 2. A destroyed unanswered rendezvous send is withdrawn: the receiver
  //    gets the next message on its tag instead.
  if (me == 1) {
    fill(big, 32);
    auto r = std::make_unique<request>();
    expect_ok(s.isend(0, 32, big.data(), big.size(), *r), *r, "isend 32 (rendezvous)");
    r.reset();  // rank 0 is waiting in step 33 meanwhile: it answers the withdrawal
    reused = reuse_freed_requests();
    std::fill(big.begin(), big.end(), 0);
    std::uint64_t v = 0x3232;
    request r2;
    expect_ok(s.isend(0, 32, &v, sizeof v, r2), r2, "isend 32 (8 bytes)");
    expect_ok(s.wait(r2), r2, "send 32");
  }
  signal_step(s, 1, 0, 33);
  if (me == 0) {
    request r;
    expect_ok(s.irecv(1, 32, big.data(), big.size(), r), r, "irecv 32");
    expect_ok(s.wait(r), r, "receive 32");
    std::uint64_t v = 0;
    std::memcpy(&v, big.data(), sizeof v);
    expect(r.status().length == 8 && v == 0x3232,
           "the withdrawn rendezvous was received (length " + std::to_string(r.status().length) + ")");
    recv_status st;
    expect(!s.iprobe(1, 32, st), "a withdrawn message is still there");
  }
  // 3. A destroyed receive matched to a rendezvous: its bytes are in before
  //    the destructor returns; the next message goes to the next receive.
  if (me == 0) {
    fill(big, 34);
    request r;
    expect_ok(s.isend(1, 34, big.data(), big.size(), r), r, "isend 34");
    expect_ok(s.wait(r), r, "send 34");
    std::uint64_t v = 0x3434;
    expect_ok(s.isend(1, 34, &v, sizeof v, r), r, "isend 34 (8 bytes)");
    expect_ok(s.wait(r), r, "send 34 (8 bytes)");
  } else {
    // The rendezvous request is here first: the receive matches it at once.
    expect(s.probe(0, 34).length == big.size(), "probe 34");
    auto r = std::make_unique<request>();
    expect_ok(s.irecv(0, 34, big.data(), big.size(), *r), *r, "irecv 34");
    r.reset();
    std::vector<unsigned char> want(big.size());
    fill(want, 34);
    expect(big == want, "a matched receive destroyed before its bytes were in");
    std::uint64_t v = 0;
    request r2;
    expect_ok(s.irecv(0, 34, &v, sizeof v, r2), r2, "irecv 34 (8 bytes)");
    expect_ok(s.wait(r2), r2, "receive 34 (8 bytes)");
    expect(v == 0x3434, "the message after the destroyed receive's");
  }
  std::printf("rank %d: destroyed live requests cancelled, withdrawn or completed\n", me);
  std::fflush(stdout);
  // 4. Rank 0 dies; rank 1 destroys requests pending on it before any call
  //    noticed, then progresses (no progress thread: NMAD_PROGRESS=none).
  std::vector<unsigned char> small(64, 0xee);
  std::vector<std::unique_ptr<request>> pending;
  for (int i = 0; i < 5; ++i) pending.push_back(std::make_unique<request>());
  signal_step(s, 1, 0, 35);
  // Rank 1 says it posted everything through a file (rank 0 must make no
  // call meanwhile: a call would answer the ready-to-receive).
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string posted_flag = std::string(tmp && *tmp ? tmp : "/tmp") + "/nmad-destroy-pending-" +
                                  std::to_string(::getppid());
  if (me == 0) {
    fill(big, 36);
    request r;
    expect_ok(s.isend(1, 36, big.data(), big.size(), r), r, "isend 36");
    // The request goes out when posted; no more calls: its ready-to-receive
    // is never answered.
    for (int i = 0; i < 6000 && ::access(posted_flag.c_str(), F_OK) != 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ::raise(SIGKILL);
  }
  // Receive 36 matched at once (its request is here) and asked for.
  expect(s.probe(0, 36).length == big.size(), "probe 36");
  expect_ok(s.irecv(0, 36, big.data(), big.size(), *pending[0]), *pending[0], "irecv 36");
  std::vector<unsigned char> big2(4 << 20, 0x39);
  expect_ok(s.irecv(0, 37, small.data(), small.size(), *pending[1]), *pending[1], "irecv 37");
  expect_ok(s.irecv(any_source, 38, small.data(), small.size(), *pending[2]), *pending[2], "irecv any 38");
  expect_ok(s.isend(0, 39, big2.data(), big2.size(), *pending[3]), *pending[3], "isend 39 (rendezvous)");
  std::uint64_t v = 40;
  const errc e40 = s.isend(0, 40, &v, sizeof v, *pending[4]);
  expect(e40 == errc::ok, "isend 40");
  if (FILE* f = std::fopen(posted_flag.c_str(), "w")) std::fclose(f);
  std::this_thread::sleep_for(std::chrono::milliseconds(700));  // rank 0 is dead; nobody noticed yet
  std::remove(posted_flag.c_str());
  expect(s.peer_alive(0), "the failure was noticed without a call");
  pending.clear();
  reused = reuse_freed_requests(64);
  std::fill(big.begin(), big.end(), 0x11);
  std::fill(big2.begin(), big2.end(), 0x22);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (s.peer_alive(0)) {
    s.progress();
    expect(std::chrono::steady_clock::now() < deadline, "rank 0's death was never noticed");
  }
  for (int i = 0; i < 10; ++i) s.progress();
  expect(all_bytes(small, 0xee), "a destroyed receive's buffer was written");
  expect(all_bytes(big, 0x11), "a destroyed rendezvous receive's buffer was written after its destruction");
  request r;
  expect(s.irecv(0, 41, small.data(), small.size(), r) == errc::peer_failed, "a receive from the dead rank fails");
  std::printf("rank 1: pending requests destroyed after rank 0 failed; the session went on\n");
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: engine_worker SCENARIO [ARGS]\n");
    return 2;
  }
  const std::string scenario = argv[1];
  auto arg = [&](int i, long def) { return argc > i ? std::atol(argv[i]) : def; };
  // `wrongkey`: rank 1 joins with another job key, so its peers refuse it.
  if (scenario == "wrongkey" && std::getenv("PMI_RANK") && std::string(std::getenv("PMI_RANK")) == "1")
    ::setenv("NMAD_JOB_KEY", "not-this-job", 1);
  // `flood`: rank 1's descriptor table is NOFILE entries, from the start.
  if (scenario == "flood" && std::getenv("PMI_RANK") && std::string(std::getenv("PMI_RANK")) == "1") {
    rlimit rl{};
    ::getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = std::min<rlim_t>(rl.rlim_max, static_cast<rlim_t>(arg(2, 256)));
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
  try {
    // The suite runs every single-threaded scenario at thread level single
    // (no locks in the engine) and multiple (ENGINE_WORKER_THREADS).
    session_options o;
    const char* level = std::getenv("ENGINE_WORKER_THREADS");
    const bool multi_threaded = scenario == "threads" || scenario == "mt_stress" || scenario == "partitioned";
    if (level && std::string(level) == "single" && !multi_threaded) o.threads = thread_level::single;
    auto s = session::create(o);
    g_rank = s->rank();
    int rc = 2;
    if (scenario == "stress") rc = stress(*s, static_cast<int>(arg(2, 1000)), static_cast<std::uint64_t>(arg(3, 1)));
    else if (scenario == "pingpong") rc = pingpong(*s, static_cast<int>(arg(2, 1000)));
    else if (scenario == "aggregation") rc = aggregation(*s, static_cast<int>(arg(2, 100)));
    else if (scenario == "pack") rc = pack_rpc(*s, static_cast<int>(arg(2, 20)));
    else if (scenario == "truncate") rc = truncate(*s);
    else if (scenario == "killed") rc = killed(*s);
    else if (scenario == "intruder") rc = intruder(*s);
    else if (scenario == "wrongkey") rc = pingpong(*s, 10);
    else if (scenario == "threads") rc = threads(*s, static_cast<int>(arg(2, 200)));
    else if (scenario == "killed_rdv") rc = killed_rdv(*s);
    else if (scenario == "killed_unpack") rc = killed_unpack(*s);
    else if (scenario == "pull") rc = pull(*s, arg(2, 1) != 0);
    else if (scenario == "sleeper") rc = sleeper(*s, static_cast<int>(arg(2, 500)));
    else if (scenario == "flood") rc = flood(*s, static_cast<int>(arg(3, 100)), static_cast<int>(arg(4, 1500)));
    else if (scenario == "mt_stress")
      rc = mt_stress(*s, static_cast<int>(arg(2, 8)), static_cast<int>(arg(3, 30)), static_cast<std::uint64_t>(arg(4, 1)));
    else if (scenario == "callbacks") rc = callbacks(*s, static_cast<int>(arg(2, 100)));
    else if (scenario == "destroy_pending") rc = destroy_pending(*s);
    else if (scenario == "partitioned") rc = partitioned(*s, static_cast<int>(arg(2, 40)), static_cast<int>(arg(3, 4)));
    else if (scenario == "partitioned_packets") rc = partitioned_packets(*s, static_cast<int>(arg(2, 64)));
    else std::fprintf(stderr, "engine_worker: unknown scenario '%s'\n", scenario.c_str());
    std::fflush(stdout);
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "engine_worker: %s\n", e.what());
    return 1;
  }
}
