// engine_worker's random traffic. `stress`: every rank sends every other
// one messages of random sizes (0 B - 8 MiB, the extremes every run) and
// tags, received partly by source, partly by any-source receives; contents,
// sizes and per-(source, tag) order are checked. `mt_stress`: the same from
// several threads per process through one session.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "api/nmad/nmad.hpp"
#include "tests/workers/engine_scenarios.hpp"
#include "tests/workers/worker_util.hpp"

using namespace nmad;
using namespace nmad_test::worker;

namespace nmad_test::engine {

namespace {

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

}  // namespace

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

namespace {

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

}  // namespace

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

}  // namespace nmad_test::engine
