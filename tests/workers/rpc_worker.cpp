// Multi-process scenarios for tests/rpc_test.cpp, started by nmad-run:
//   rpc_worker stats              per-gate/per-track statistics against known traffic
//   rpc_worker many N             every client rank makes N concurrent calls to rank 0
//                                 (and rank 0 calls them back), contents checked
//   rpc_worker unknown            a call of a service nobody registered, a throwing handler
//   rpc_worker killed             the server dies with calls under way
// Each process prints what it checked; a failed check prints "FAIL ..." and
// exits 1.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "api/nmad/nmad.hpp"
#include "api/nmad/rpc.hpp"

using namespace nmad;

namespace {

int g_rank = -1;

[[noreturn]] void fail(const std::string& what) {
  std::printf("FAIL rank %d: %s\n", g_rank, what.c_str());
  std::fflush(stdout);
  std::exit(1);
}

void expect(bool cond, const std::string& what) {
  if (!cond) fail(what);
}

std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

void fill(std::vector<std::byte>& v, std::uint64_t seed) {
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::byte>(mix(seed + i / 8) >> (8 * (i % 8)));
}

bool check_pattern(std::span<const std::byte> v, std::uint64_t seed) {
  for (std::size_t i = 0; i < v.size(); ++i)
    if (v[i] != static_cast<std::byte>(mix(seed + i / 8) >> (8 * (i % 8)))) return false;
  return true;
}

std::span<const std::byte> bytes_of(const auto& v) { return std::as_bytes(std::span(&v, 1)); }

// ---- statistics ------------------------------------------------------------------

// Rank 0 sends a burst of small messages (the track busy with the first:
// aggreg aggregates the rest) and `large` rendezvous messages to rank 1,
// then checks its counters.
int stats(session& s) {
  if (s.size() != 2) fail("stats wants 2 ranks");
  // The burst stays within the initial flow-control credit (64 KiB at
  // 8 + 320 bytes a message: see wire::chunk_credit), so none of it is
  // turned into a rendezvous and the count below is exactly `large`.
  constexpr int burst = 150, large = 5;
  constexpr std::size_t large_len = 1 << 20;
  int token = 0;
  request r;
  if (s.rank() == 1) {
    std::vector<std::uint64_t> got(burst);
    std::vector<request> rr(burst), lr(large);
    std::vector<std::vector<std::byte>> big(large, std::vector<std::byte>(large_len));
    for (int i = 0; i < burst; ++i) s.irecv(0, 7, &got[i], sizeof got[i], rr[i]);
    for (int i = 0; i < large; ++i) s.irecv(0, 8, big[i].data(), large_len, lr[i]);
    expect(s.isend(0, 9, &token, sizeof token, r) == errc::ok, "ready");
    s.wait(r);
    for (int i = 0; i < burst; ++i) {
      expect(s.wait(rr[i]) == errc::ok, "burst receive");
      expect(got[i] == static_cast<std::uint64_t>(i) * 3, "burst contents");
    }
    for (int i = 0; i < large; ++i) {
      expect(s.wait(lr[i]) == errc::ok, "large receive");
      expect(check_pattern(big[i], 100 + i), "large contents");
    }
    const gate_stats g = s.peer_stats().at(0);
    expect(g.peer == 0 && g.rdv_requests == 0, "rank 1 sent no rendezvous");
    expect(s.isend(0, 10, &token, sizeof token, r) == errc::ok, "done");
    s.wait(r);
    std::printf("stats rank 1: ok\n");
    return 0;
  }
  expect(s.irecv(1, 9, &token, sizeof token, r) == errc::ok, "ready");
  s.wait(r);
  const std::vector<gate_stats> before = s.peer_stats();
  std::vector<std::uint64_t> vals(burst);
  std::vector<request> rs(burst);
  for (int i = 0; i < burst; ++i) {  // no progress in between
    vals[i] = static_cast<std::uint64_t>(i) * 3;
    expect(s.isend(1, 7, &vals[i], sizeof vals[i], rs[i]) == errc::ok, "burst send");
  }
  for (auto& q : rs) expect(s.wait(q) == errc::ok, "burst send");
  const std::vector<gate_stats> mid = s.peer_stats();
  std::vector<std::vector<std::byte>> big(large, std::vector<std::byte>(large_len));
  std::vector<request> ls(large);
  for (int i = 0; i < large; ++i) {
    fill(big[i], 100 + i);
    expect(s.isend(1, 8, big[i].data(), large_len, ls[i]) == errc::ok, "large send");
  }
  for (auto& q : ls) expect(s.wait(q) == errc::ok, "large send");
  expect(s.irecv(1, 10, &token, sizeof token, r) == errc::ok, "done");
  s.wait(r);
  const std::vector<gate_stats> after = s.peer_stats();

  expect(after.size() == 2 && after[1].peer == 1 && after[1].alive, "one gate per rank, in rank order");
  const track_stats& t0 = before[1].tracks.at(0);
  const track_stats& t1 = mid[1].tracks.at(0);
  const track_stats& t2 = after[1].tracks.at(0);
  const std::uint64_t packets = t1.packets - t0.packets, chunks = t1.chunks - t0.chunks;
  std::printf("stats rank 0: strategy %s driver %s: burst of %d in %llu packets, %llu chunks, max %llu per packet\n",
              std::string(s.strategy_name()).c_str(), t2.driver.c_str(), burst,
              static_cast<unsigned long long>(packets), static_cast<unsigned long long>(chunks),
              static_cast<unsigned long long>(t1.chunks_max));
  expect(chunks == static_cast<std::uint64_t>(burst), "one chunk per small message");
  expect(t1.bytes - t0.bytes >= burst * sizeof(std::uint64_t), "bytes cover the payload");
  if (s.strategy_name() == "aggreg") {
    expect(packets < static_cast<std::uint64_t>(burst) && t1.chunks_max > 1, "aggreg must aggregate the burst");
    expect(static_cast<double>(chunks) / static_cast<double>(packets) > 1.0, "chunks per packet > 1");
  }
  if (s.strategy_name() == "default") {
    expect(packets == static_cast<std::uint64_t>(burst) && t1.chunks_max == 1, "default sends one chunk per packet");
  }
  std::uint64_t hist = 0;
  for (std::uint64_t h : t2.chunks_histogram) hist += h;
  expect(hist == t2.packets, "the histogram counts every packet");
  // Rendezvous: one request per large message; its data in bulk transfers
  // (over tcp the sender posts them; over shm the receiver pulls).
  expect(after[1].rdv_requests - before[1].rdv_requests == large,
         "rendezvous count " + std::to_string(after[1].rdv_requests - before[1].rdv_requests) + " for " +
             std::to_string(large) + " large sends");
  if (t2.driver == "tcp") {
    expect(t2.rdv_transfers - t0.rdv_transfers >= large, "bulk transfers for each rendezvous");
    expect(t2.rdv_bytes - t0.rdv_bytes == large * large_len, "bulk bytes = the large messages");
  }
  const session_stats st = s.stats();
  std::uint64_t sum = 0;
  for (const gate_stats& g : after)
    for (const track_stats& t : g.tracks) sum += t.packets;
  expect(st.packets_sent >= sum && st.packets_sent - sum < 8, "session totals are the tracks' sums");
  std::printf("stats rank 0: ok (rendezvous %llu, idle with work queued %llu ns)\n",
              static_cast<unsigned long long>(after[1].rdv_requests), static_cast<unsigned long long>(t2.idle_ns));
  return 0;
}

// ---- rpc -----------------------------------------------------------------------

constexpr rpc::service_id echo_service = 1, sum_service = 2, throw_service = 3;

struct call_spec {
  std::uint64_t seed;
  std::size_t header_len, body_len;
};

call_spec spec_of(int rank, int i) {
  const std::uint64_t seed = (static_cast<std::uint64_t>(rank) << 32) | static_cast<std::uint64_t>(i);
  const std::uint64_t m = mix(seed);
  // Mostly small bodies, every 7th a rendezvous-sized one.
  const std::size_t body = i % 7 == 6 ? 100000 + m % 200000 : m % 3000;
  return {seed, 8 + (m >> 20) % 40, body};
}

// echo: answers the header reversed and the body as it came (a view of
// the request body: valid until the answer is sent, see below).
void register_services(rpc::endpoint& ep, std::vector<std::vector<std::byte>>& keep) {
  ep.register_service(echo_service, [&keep](const rpc::incoming& in, rpc::reply& out) {
    std::vector<std::byte> h(in.header.rbegin(), in.header.rend());
    out.set_header(h.data(), h.size());
    auto& b = out.body_buffer();
    b.assign(in.body.begin(), in.body.end());
  });
  ep.register_service(sum_service, [](const rpc::incoming& in, rpc::reply& out) {
    std::uint64_t sum = 0;
    for (std::byte b : in.body) sum += static_cast<std::uint64_t>(b);
    sum += static_cast<std::uint64_t>(in.source) << 48;
    out.set_header(&sum, sizeof sum);
  });
  ep.register_service(throw_service, [](const rpc::incoming&, rpc::reply&) {
    throw std::runtime_error("the handler refused on purpose");
  });
  (void)keep;
}

struct client_call {
  call_spec spec;
  std::vector<std::byte> header, body;
  rpc::call c;
  bool callback_ran = false;
};

void check_echo(client_call& k, const std::string& what) {
  expect(k.c.done() && k.c.error() == errc::ok, what + ": " + k.c.error_message());
  expect(k.c.status() == rpc::status::ok, what + ": status");
  const auto h = k.c.reply_header();
  expect(h.size() == k.header.size() && std::equal(h.begin(), h.end(), k.header.rbegin()), what + ": header");
  const auto b = k.c.reply_body();
  expect(b.size() == k.body.size() && check_pattern(b, k.spec.seed + 1), what + ": body");
}

// Rank 0 serves; every other rank starts n calls at once (half of them
// with a reply buffer), checks every answer, and meanwhile serves calls
// rank 0 makes to it (sum service), then makes n synchronous ones.
int many(session& s, int n) {
  std::vector<std::vector<std::byte>> keep;
  rpc::endpoint ep(s);
  register_services(ep, keep);
  int token = 0;
  if (s.rank() == 0) {
    // Calls back every client while serving theirs.
    std::vector<std::unique_ptr<client_call>> back;
    for (int p = 1; p < s.size(); ++p) {
      auto k = std::make_unique<client_call>();
      k->body.resize(5000 + static_cast<std::size_t>(p));
      fill(k->body, 77);
      expect(ep.call_async(p, sum_service, {}, k->body, k->c) == errc::ok, "call back");
      back.push_back(std::move(k));
    }
    for (auto& k : back) {
      expect(ep.wait(k->c) == errc::ok, "call back: " + k->c.error_message());
      std::uint64_t sum = 0, want = static_cast<std::uint64_t>(0) << 48;
      for (std::byte b : k->body) want += static_cast<std::uint64_t>(b);
      expect(k->c.reply_header().size() == sizeof sum, "sum answer size");
      std::memcpy(&sum, k->c.reply_header().data(), sizeof sum);
      expect(sum == want, "sum answer");
    }
    // Serve until every client said it is done.
    int done = 0;
    std::vector<request> dr(s.size());
    std::vector<int> dv(s.size());
    for (int p = 1; p < s.size(); ++p) s.irecv(p, 5, &dv[p], sizeof dv[p], dr[p]);
    ep.serve_until([&] {
      done = 0;
      for (int p = 1; p < s.size(); ++p) done += dr[p].completed();
      return done == s.size() - 1;
    });
    const std::uint64_t want = static_cast<std::uint64_t>(s.size() - 1) * 2 * n;
    expect(ep.served() == want, "served " + std::to_string(ep.served()) + " calls, expected " + std::to_string(want));
    std::printf("rpc server: served %llu calls\n", static_cast<unsigned long long>(ep.served()));
    return 0;
  }
  std::vector<std::unique_ptr<client_call>> calls;
  std::vector<std::vector<std::byte>> buffers(n);
  int callbacks = 0;
  for (int i = 0; i < n; ++i) {
    auto k = std::make_unique<client_call>();
    k->spec = spec_of(s.rank(), i);
    k->header.resize(k->spec.header_len);
    k->body.resize(k->spec.body_len);
    fill(k->header, k->spec.seed);
    fill(k->body, k->spec.seed + 1);
    k->c.on_complete([&callbacks, kp = k.get()](rpc::call&) {
      kp->callback_ran = true;
      ++callbacks;
    });
    std::span<std::byte> rb;
    if (i % 2) {
      buffers[i].resize(k->spec.body_len + 16);
      rb = buffers[i];
    }
    expect(ep.call_async(0, echo_service, k->header, k->body, k->c, rb) == errc::ok, "call_async");
    calls.push_back(std::move(k));
  }
  for (int i = 0; i < n; ++i) {
    expect(ep.wait(calls[i]->c) == errc::ok, "wait: " + calls[i]->c.error_message());
    check_echo(*calls[i], "async call " + std::to_string(i));
    if (i % 2) expect(calls[i]->c.reply_body().data() == reinterpret_cast<std::byte*>(buffers[i].data()),
                      "answer body in the caller's buffer");
    expect(calls[i]->callback_ran, "completion callback ran");
  }
  expect(callbacks == n, "one callback per call");
  for (int i = 0; i < n; ++i) {  // synchronous, reusing the call objects
    client_call& k = *calls[i];
    k.c.on_complete(nullptr);
    expect(ep.call_sync(0, echo_service, k.header, k.body, k.c) == errc::ok, "call_sync: " + k.c.error_message());
    check_echo(k, "sync call " + std::to_string(i));
  }
  // Rank 0's call back to us may still be coming: serve until it was.
  ep.serve_until([&] { return ep.served() >= 1; });
  request r;
  s.isend(0, 5, &token, sizeof token, r);
  s.wait(r);
  std::printf("rpc client %d: %d async and %d sync calls checked\n", s.rank(), n, n);
  return 0;
}

int unknown(session& s) {
  std::vector<std::vector<std::byte>> keep;
  rpc::endpoint ep(s);
  register_services(ep, keep);
  int token = 0;
  request r;
  if (s.rank() == 0) {
    s.irecv(1, 5, &token, sizeof token, r);
    ep.serve_until([&] { return r.completed(); });
    std::printf("rpc server: served %llu calls\n", static_cast<unsigned long long>(ep.served()));
    return 0;
  }
  rpc::call c;
  const std::uint32_t x = 42;
  const errc e = ep.call_sync(0, 99, bytes_of(x), {}, c);
  expect(e == errc::invalid_argument && c.status() == rpc::status::unknown_service, "unknown service status");
  expect(c.error_message().find("service 99") != std::string::npos && c.error_message().find("rank 0") != std::string::npos,
         "message names the service and the rank: " + c.error_message());
  std::printf("unknown service: %s\n", c.error_message().c_str());
  const errc t = ep.call_sync(0, throw_service, bytes_of(x), {}, c);
  expect(t == errc::internal && c.status() == rpc::status::handler_failed, "handler failure status");
  expect(c.error_message().find("refused on purpose") != std::string::npos, "handler's text: " + c.error_message());
  std::printf("handler failed: %s\n", c.error_message().c_str());
  // The server goes on.
  client_call k;
  k.spec = spec_of(1, 3);
  k.header.resize(16);
  k.body.resize(1000);
  fill(k.header, k.spec.seed);
  fill(k.body, k.spec.seed + 1);
  expect(ep.call_sync(0, echo_service, k.header, k.body, k.c) == errc::ok, "call after errors");
  check_echo(k, "call after errors");
  expect(ep.call_sync(7, echo_service, k.header, k.body, k.c) == errc::invalid_argument, "bad rank");
  s.isend(0, 5, &token, sizeof token, r);
  s.wait(r);
  std::printf("rpc unknown: ok\n");
  return 0;
}

// Rank 1 serves and dies after answering a few calls; rank 0's calls
// under way (small and rendezvous bodies) fail naming rank 1, and calls
// started after fail at once.
int killed(session& s) {
  std::vector<std::vector<std::byte>> keep;
  rpc::endpoint ep(s);
  register_services(ep, keep);
  if (s.rank() == 1) {
    ep.serve_until([&] { return ep.served() >= 3; });
    std::fflush(stdout);
    ::raise(SIGKILL);
  }
  if (s.rank() != 0) return 0;
  constexpr int n = 20;
  std::vector<std::unique_ptr<client_call>> calls;
  for (int i = 0; i < n; ++i) {
    auto k = std::make_unique<client_call>();
    k->spec = spec_of(0, i);
    k->header.resize(k->spec.header_len);
    k->body.resize(i % 2 ? 400000 : 100);
    fill(k->header, k->spec.seed);
    fill(k->body, k->spec.seed + 1);
    ep.call_async(1, echo_service, k->header, k->body, k->c);
    calls.push_back(std::move(k));
  }
  int ok = 0, failed = 0;
  for (auto& k : calls) {
    const errc e = ep.wait(k->c);
    if (e == errc::ok) {
      check_echo(*k, "answered before the death");
      ++ok;
    } else {
      expect(e == errc::peer_failed, std::string("failed call: ") + std::string(to_string(e)));
      expect(k->c.error_message().find("rank 1") != std::string::npos, "names the peer: " + k->c.error_message());
      ++failed;
    }
  }
  expect(failed > 0, "calls under way must fail");
  rpc::call c;
  expect(ep.call_sync(1, echo_service, {}, {}, c) == errc::peer_failed, "a call to a dead rank fails at once");
  std::printf("rpc killed: %d answered, %d failed: %s\n", ok, failed, c.error_message().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: rpc_worker stats|many N|unknown|killed\n");
    return 2;
  }
  const std::string scenario = argv[1];
  try {
    session_options o;
    if (const char* level = std::getenv("RPC_WORKER_THREADS"); level && std::string(level) == "single")
      o.threads = thread_level::single;
    auto s = session::create(o);
    g_rank = s->rank();
    int rc = 2;
    if (scenario == "stats") rc = stats(*s);
    else if (scenario == "many") rc = many(*s, argc > 2 ? std::atoi(argv[2]) : 50);
    else if (scenario == "unknown") rc = unknown(*s);
    else if (scenario == "killed") rc = killed(*s);
    else std::fprintf(stderr, "rpc_worker: unknown scenario '%s'\n", scenario.c_str());
    std::fflush(stdout);
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rpc_worker: %s\n", e.what());
    return 1;
  }
}
