// Scenario 1 of NewMadeleine's evaluation: two parallel ping-pong flows
// between ranks 0 and 1, each ping and pong a packed message of n packs.
// Per (strategy, n, pack size): mean time per pack = round-trip time /
// (2 flows x 2 directions x n packs), median over the timed rounds.
//
//   nmad-run -n 2 nmad_multipack --strategies default,aggreg [--counts 1,2,4,8,16,32]
//       [--sizes 4,64,1024,4096] [--rounds R] [--json]
//
// Every strategy runs in the same processes (session::set_strategy on
// both ranks between points). Each round's contents are checked (every
// pack carries its flow, round and index).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "api/nmad/nmad.hpp"

namespace {

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

std::vector<std::size_t> numbers(const std::string& s) {
  std::vector<std::size_t> out;
  for (const auto& t : split(s)) {
    std::size_t v = std::stoul(t);
    if (!t.empty() && (t.back() == 'K' || t.back() == 'k')) v *= 1024;
    out.push_back(v);
  }
  return out;
}

constexpr nmad::tag_t flow_tag[2] = {101, 102};
constexpr nmad::tag_t sync_tag = 103;

void stamp(std::byte* p, std::size_t len, int flow, int round, int idx) {
  const std::uint32_t v = static_cast<std::uint32_t>(flow << 28 ^ round << 8 ^ idx);
  for (std::size_t i = 0; i < len; ++i) p[i] = static_cast<std::byte>(v >> (8 * (i % 4)));
}

bool stamped(const std::byte* p, std::size_t len, int flow, int round, int idx) {
  const std::uint32_t v = static_cast<std::uint32_t>(flow << 28 ^ round << 8 ^ idx);
  for (std::size_t i = 0; i < len; ++i)
    if (p[i] != static_cast<std::byte>(v >> (8 * (i % 4)))) return false;
  return true;
}

// Both flows: open both packed messages, pack their pieces interleaved,
// end both (the engine sees 2n pieces queued at once).
void send_both(nmad::session& s, int peer, std::vector<std::byte>* bufs, std::size_t n, std::size_t size) {
  nmad::pack_connection a(s, peer, flow_tag[0]);
  nmad::pack_connection b(s, peer, flow_tag[1]);
  for (std::size_t i = 0; i < n; ++i) {
    a.pack(bufs[0].data() + i * size, size, nmad::pack_mode::cheaper);
    b.pack(bufs[1].data() + i * size, size, nmad::pack_mode::cheaper);
  }
  if (a.end() != nmad::errc::ok || b.end() != nmad::errc::ok) throw std::runtime_error("pack failed");
}

void recv_both(nmad::session& s, int peer, std::vector<std::byte>* bufs, std::size_t n, std::size_t size) {
  nmad::unpack_connection a(s, peer, flow_tag[0]);
  nmad::unpack_connection b(s, peer, flow_tag[1]);
  for (std::size_t i = 0; i < n; ++i) {
    a.unpack(bufs[0].data() + i * size, size, nmad::pack_mode::cheaper);
    b.unpack(bufs[1].data() + i * size, size, nmad::pack_mode::cheaper);
  }
  if (a.end() != nmad::errc::ok || b.end() != nmad::errc::ok) throw std::runtime_error("unpack failed");
}

void sync(nmad::session& s, int peer) {
  int t = 0, u = 0;
  nmad::request a, b;
  s.isend(peer, sync_tag, &t, sizeof t, a);
  s.irecv(peer, sync_tag, &u, sizeof u, b);
  s.wait(a);
  s.wait(b);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> strategies = {"default", "aggreg"};
  std::vector<std::size_t> counts = {1, 2, 4, 8, 16, 32}, sizes = {4, 64, 1024, 4096};
  int rounds = 300;
  bool json = false;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      auto next = [&]() -> std::string {
        if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
        return argv[++i];
      };
      if (a == "--strategies") strategies = split(next());
      else if (a == "--counts") counts = numbers(next());
      else if (a == "--sizes") sizes = numbers(next());
      else if (a == "--rounds") rounds = std::stoi(next());
      else if (a == "--json") json = true;
      else throw std::invalid_argument("unknown option " + a);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nmad_multipack: %s\n", e.what());
    return 2;
  }
  auto s = nmad::session::create();
  if (s->size() != 2) {
    std::fprintf(stderr, "nmad_multipack: run with 2 ranks\n");
    return 2;
  }
  const int me = s->rank(), peer = 1 - me;
  const std::size_t max_n = *std::max_element(counts.begin(), counts.end());
  const std::size_t max_size = *std::max_element(sizes.begin(), sizes.end());
  std::vector<std::byte> out[2], in[2];
  for (int f = 0; f < 2; ++f) {
    out[f].resize(max_n * max_size);
    in[f].resize(max_n * max_size);
  }
  if (!json && me == 0)
    std::printf("# two ping-pong flows, n packs per message, driver %s: mean us per pack\n", s->driver_name().c_str());
  for (const auto& strat : strategies) {
    sync(*s, peer);
    nmad::errc se = s->set_strategy(strat);
    for (int tries = 0; se == nmad::errc::no_resource && tries < 1000; ++tries) {  // a send still queued
      s->progress();
      se = s->set_strategy(strat);
    }
    if (se != nmad::errc::ok) {
      std::fprintf(stderr, "nmad_multipack: unknown strategy '%s'\n", strat.c_str());
      return 2;
    }
    sync(*s, peer);
    for (std::size_t size : sizes)
      for (std::size_t n : counts) {
        const int warmup = std::max(10, rounds / 10);
        std::vector<double> times;
        times.reserve(static_cast<std::size_t>(rounds));
        sync(*s, peer);
        for (int r = -warmup; r < rounds; ++r) {
          const bool check = r == -warmup || r == rounds - 1;
          if (check && me == 0)
            for (int f = 0; f < 2; ++f)
              for (std::size_t i = 0; i < n; ++i) stamp(out[f].data() + i * size, size, f, r & 0xff, static_cast<int>(i));
          const auto t0 = std::chrono::steady_clock::now();
          if (me == 0) {
            send_both(*s, peer, out, n, size);
            recv_both(*s, peer, in, n, size);
          } else {
            recv_both(*s, peer, in, n, size);
            send_both(*s, peer, in, n, size);  // echo
          }
          const auto t1 = std::chrono::steady_clock::now();
          if (check && me == 0)
            for (int f = 0; f < 2; ++f)
              for (std::size_t i = 0; i < n; ++i)
                if (!stamped(in[f].data() + i * size, size, f, r & 0xff, static_cast<int>(i))) {
                  std::fprintf(stderr, "nmad_multipack: flow %d pack %zu came back wrong\n", f, i);
                  return 1;
                }
          if (r >= 0) times.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
        }
        if (me != 0) continue;
        std::sort(times.begin(), times.end());
        const double median = times[times.size() / 2];
        const double per_pack = median / static_cast<double>(4 * n);
        if (json)
          std::printf("{\"bench\": \"multipack\", \"strategy\": \"%s\", \"driver\": \"%s\", \"flows\": 2, \"n\": %zu, "
                      "\"size\": %zu, \"rounds\": %d, \"round_trip_us\": %.3f, \"us_per_pack\": %.4f, \"verified\": true}\n",
                      strat.c_str(), s->driver_name().c_str(), n, size, rounds, median, per_pack);
        else
          std::printf("%-10s size %5zu n %3zu: round trip %9.2f us, %8.3f us per pack\n", strat.c_str(), size, n,
                      median, per_pack);
        std::fflush(stdout);
      }
  }
  sync(*s, peer);
  return 0;
}
