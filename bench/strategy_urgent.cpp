// Scenario: a latency-critical small message sent while bulk traffic fills
// the track. Rank 0 keeps WINDOW bulk messages (tag 1, BULK bytes, eager)
// queued towards rank 1 and, every so often, sends an 8-byte urgent message
// (tag 2, send_options::priority 9) that rank 1 answers at once (tag 3,
// priority 9); the urgent round trip is timed. Each listed strategy runs in
// turn in the same job (session::set_strategy on both ranks between
// phases, rounds interleaved), so their figures are side by side.
//   nmad-run -n 2 strategy_urgent [--strategies aggreg,prio,default] [--bulk 4096]
//       [--window 64] [--samples 300] [--rounds 3] [--json]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "api/nmad/nmad.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos <= s.size()) {
    std::size_t next = s.find(',', pos);
    if (next == std::string::npos) next = s.size();
    if (next > pos) out.push_back(s.substr(pos, next - pos));
    pos = next + 1;
  }
  return out;
}

void barrier(nmad::session& s) {
  const int peer = 1 - s.rank();
  char a = 0, b = 0;
  nmad::request r1, r2;
  s.irecv(peer, 9, &b, 1, r1);
  s.isend(peer, 9, &a, 1, r2);
  s.wait(r2);
  s.wait(r1);
}

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "strategy_urgent: %s\n", what.c_str());
  std::exit(1);
}

// Rank 0: `samples` urgent round trips while keeping `window` bulk sends
// queued. Returns the round-trip times (µs). Stop message: urgent value 0.
std::vector<double> sender(nmad::session& s, std::size_t bulk, int window, int samples) {
  std::vector<unsigned char> data(bulk, 0x5a);
  std::vector<nmad::request> reqs(static_cast<std::size_t>(window));
  std::vector<bool> busy(static_cast<std::size_t>(window), false);
  std::uint64_t sent = 0;
  auto refill = [&] {
    for (int i = 0; i < window; ++i) {
      auto k = static_cast<std::size_t>(i);
      if (busy[k] && !s.test(reqs[k])) continue;
      busy[k] = true;
      s.isend(1, 1, data.data(), bulk, reqs[k]);
      ++sent;
    }
  };
  std::vector<double> rtt;
  nmad::send_options urgent;
  urgent.priority = 9;
  for (int k = 0; k < samples; ++k) {
    refill();  // the queue is full of bulk
    std::uint64_t v = static_cast<std::uint64_t>(k) + 1, back = 0;
    nmad::request us, ur;
    s.irecv(1, 3, &back, sizeof back, ur);
    const auto t0 = clock_type::now();
    s.isend(1, 2, &v, sizeof v, us, urgent);
    while (!s.test(ur)) {
    }
    rtt.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
    s.wait(us);
    if (back != v + 1) die("wrong urgent answer");
  }
  for (int i = 0; i < window; ++i)
    if (busy[static_cast<std::size_t>(i)]) s.wait(reqs[static_cast<std::size_t>(i)]);
  std::uint64_t stop[2] = {0, sent};
  nmad::request r;
  s.isend(1, 2, stop, sizeof stop, r, urgent);
  s.wait(r);
  return rtt;
}

void receiver(nmad::session& s, std::size_t bulk, int window) {
  std::vector<std::vector<unsigned char>> bufs(static_cast<std::size_t>(window), std::vector<unsigned char>(bulk));
  std::vector<nmad::request> reqs(static_cast<std::size_t>(window));
  for (int i = 0; i < window; ++i) s.irecv(0, 1, bufs[static_cast<std::size_t>(i)].data(), bulk, reqs[static_cast<std::size_t>(i)]);
  std::uint64_t received = 0, total = ~std::uint64_t{0};
  std::uint64_t msg[2] = {0, 0};
  nmad::request ur;
  s.irecv(0, 2, msg, sizeof msg, ur);
  nmad::send_options urgent;
  urgent.priority = 9;
  bool stopped = false;
  while (!stopped || received < total) {
    if (!stopped && s.test(ur)) {
      if (msg[0] == 0) {
        stopped = true;
        total = msg[1];
      } else {
        std::uint64_t answer = msg[0] + 1;
        nmad::request ar;
        s.isend(0, 3, &answer, sizeof answer, ar, urgent);
        s.wait(ar);
        s.irecv(0, 2, msg, sizeof msg, ur);
      }
    }
    for (int i = 0; i < window && received < total; ++i) {
      auto k = static_cast<std::size_t>(i);
      if (!s.test(reqs[k])) continue;
      ++received;
      if (bufs[k][0] != 0x5a || bufs[k][bulk - 1] != 0x5a) die("bulk message corrupted");
      if (received + static_cast<std::uint64_t>(window) <= total || !stopped)
        s.irecv(0, 1, bufs[k].data(), bulk, reqs[k]);
    }
  }
  // Receives posted beyond the total stay pending: cancel them.
  for (auto& r : reqs)
    if (!r.completed()) s.cancel(r);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> strategies = {"aggreg", "prio", "default"};
  std::size_t bulk = 4096;
  int window = 64, samples = 300, rounds = 3;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--strategies" && i + 1 < argc) strategies = split(argv[++i]);
    else if (a == "--bulk" && i + 1 < argc) bulk = std::strtoull(argv[++i], nullptr, 0);
    else if (a == "--window" && i + 1 < argc) window = std::atoi(argv[++i]);
    else if (a == "--samples" && i + 1 < argc) samples = std::atoi(argv[++i]);
    else if (a == "--rounds" && i + 1 < argc) rounds = std::atoi(argv[++i]);
    else if (a == "--json") json = true;
    else {
      std::fprintf(stderr,
                   "usage: strategy_urgent [--strategies LIST] [--bulk BYTES] [--window N] [--samples N] "
                   "[--rounds N] [--json]\n");
      return 2;
    }
  }
  if (bulk < 1 || window < 1 || samples < 1 || rounds < 1) die("bad arguments");
  auto s = nmad::session::create();
  if (s->size() != 2) die("needs exactly 2 processes (nmad-run -n 2 ...)");
  std::map<std::string, std::vector<double>> rtt;
  for (int round = 0; round < rounds; ++round)
    for (const std::string& name : strategies) {
      barrier(*s);
      if (s->set_strategy(name) != nmad::errc::ok) die("cannot select strategy '" + name + "'");
      barrier(*s);
      if (s->rank() == 0) {
        auto v = sender(*s, bulk, window, samples);
        rtt[name].insert(rtt[name].end(), v.begin(), v.end());
      } else {
        receiver(*s, bulk, window);
      }
    }
  barrier(*s);
  if (s->rank() != 0) return 0;
  if (json) {
    std::printf("{\"benchmark\":\"strategy_urgent\",\"driver\":\"%s\",\"bulk\":%zu,\"window\":%d,\"results\":[",
                s->driver_name().c_str(), bulk, window);
    for (std::size_t i = 0; i < strategies.size(); ++i) {
      const auto& v = rtt[strategies[i]];
      std::printf("%s{\"strategy\":\"%s\",\"samples\":%zu,\"urgent_rtt_us\":{\"median\":%.2f,\"min\":%.2f,\"max\":%.2f}}",
                  i ? "," : "", strategies[i].c_str(), v.size(), median(v), *std::min_element(v.begin(), v.end()),
                  *std::max_element(v.begin(), v.end()));
    }
    std::printf("]}\n");
  } else {
    std::printf("# urgent 8 B round trip under bulk traffic (%zu B x %d queued), driver %s\n", bulk, window,
                s->driver_name().c_str());
    std::printf("# %-20s %12s %12s\n", "strategy", "median us", "min us");
    for (const std::string& n : strategies)
      std::printf("  %-20s %12.2f %12.2f\n", n.c_str(), median(rtt[n]), *std::min_element(rtt[n].begin(), rtt[n].end()));
  }
  return 0;
}
