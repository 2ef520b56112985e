// Native ping-pong latency and bandwidth between ranks 0 and 1.
//   nmad-run -n 2 nmad_pingpong [--sizes 0,8,1024,...] [--reps R] [--driver D] [--strategy S] [--json]
// Latency is one-way (round trip / 2), per round trip; the table shows the
// median and min-max of the samples, bandwidth = size / median latency.
// Received bytes are verified on the first round trip of every size.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "api/nmad/nmad.hpp"

namespace {

std::vector<std::size_t> default_sizes() {
  std::vector<std::size_t> v = {0};
  for (std::size_t s = 1; s <= (8u << 20); s *= 2) v.push_back(s);
  return v;
}

std::vector<std::size_t> parse_sizes(const std::string& arg) {
  std::vector<std::size_t> v;
  std::size_t pos = 0;
  while (pos < arg.size()) {
    std::size_t next = arg.find(',', pos);
    if (next == std::string::npos) next = arg.size();
    v.push_back(std::strtoull(arg.substr(pos, next - pos).c_str(), nullptr, 0));
    pos = next + 1;
  }
  return v;
}

int reps_for(std::size_t size, int requested) {
  if (requested > 0) return requested;
  if (size <= 4096) return 2000;
  if (size <= 65536) return 500;
  if (size <= (1u << 20)) return 100;
  return 30;
}

int run(int argc, char** argv) {
  std::vector<std::size_t> sizes = default_sizes();
  int reps = 0;
  bool json = false;
  nmad::session_options opts;  // driver/strategy: options, else NMAD_DRIVER / NMAD_STRATEGY
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--sizes" && i + 1 < argc) sizes = parse_sizes(argv[++i]);
    else if (a == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (a == "--json") json = true;
    else if (a == "--driver" && i + 1 < argc) opts.driver = argv[++i];
    else if (a == "--strategy" && i + 1 < argc) opts.strategy = argv[++i];
    else {
      std::fprintf(stderr, "usage: nmad_pingpong [--sizes LIST] [--reps R] [--driver NAME] [--strategy NAME] [--json]\n");
      return 2;
    }
  }
  auto s = nmad::session::create(opts);
  if (s->size() < 2) {
    std::fprintf(stderr, "nmad_pingpong needs 2 processes (nmad-run -n 2 ...)\n");
    return 2;
  }
  if (s->rank() > 1) return 0;
  const int me = s->rank(), peer = 1 - me;
  const std::size_t max = *std::max_element(sizes.begin(), sizes.end());
  std::vector<unsigned char> out(max), in(max);
  struct point {
    std::size_t size;
    int reps;
    std::vector<double> samples;
  };
  std::vector<point> results;
  for (std::size_t size : sizes) {
    const int n = reps_for(size, reps);
    const int warmup = std::max(2, n / 10);
    point p{size, n, {}};
    p.samples.reserve(n);
    for (int it = -warmup; it < n; ++it) {
      for (std::size_t k = 0; k < std::min<std::size_t>(size, 64); ++k) out[k] = static_cast<unsigned char>(k + it);
      nmad::request rs, rr;
      auto t0 = std::chrono::steady_clock::now();
      if (me == 0) {
        s->irecv(peer, 1, in.data(), size, rr);
        s->isend(peer, 1, out.data(), size, rs);
        s->wait(rs);
        if (s->wait(rr) != nmad::errc::ok) {
          std::fprintf(stderr, "nmad_pingpong: %s\n", rr.error_message().c_str());
          return 1;
        }
      } else {
        s->irecv(peer, 1, in.data(), size, rr);
        if (s->wait(rr) != nmad::errc::ok) return 1;
        std::memcpy(out.data(), in.data(), std::min<std::size_t>(size, 64));
        s->isend(peer, 1, out.data(), size, rs);
        s->wait(rs);
      }
      double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      if (me == 0 && it == -warmup) {
        for (std::size_t k = 0; k < std::min<std::size_t>(size, 64); ++k)
          if (in[k] != static_cast<unsigned char>(k + it)) {
            std::fprintf(stderr, "nmad_pingpong: wrong data at size %zu byte %zu\n", size, k);
            return 1;
          }
      }
      if (it >= 0) p.samples.push_back(us / 2);
    }
    results.push_back(std::move(p));
  }
  if (me != 0) return 0;
  auto stats = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const double med = v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
    return std::array<double, 3>{med, v.front(), v.back()};
  };
  if (json) {
    std::printf("{\"benchmark\":\"nmad_pingpong\",\"driver\":\"%s\",\"strategy\":\"%s\",\"results\":[",
                s->driver_name().c_str(), std::string(s->strategy_name()).c_str());
    for (std::size_t i = 0; i < results.size(); ++i) {
      const auto& p = results[i];
      auto [med, lo, hi] = stats(p.samples);
      std::printf("%s{\"size\":%zu,\"reps\":%d,\"latency_us\":{\"median\":%.4f,\"min\":%.4f,\"max\":%.4f},"
                  "\"bandwidth_MBps\":%.2f,\"samples_us\":[",
                  i ? "," : "", p.size, p.reps, med, lo, hi, med > 0 ? p.size / med : 0.0);
      for (std::size_t k = 0; k < p.samples.size(); ++k) std::printf("%s%.4f", k ? "," : "", p.samples[k]);
      std::printf("]}");
    }
    std::printf("]}\n");
  } else {
    std::printf("# nmad native ping-pong, driver %s, strategy %s (one-way latency)\n", s->driver_name().c_str(),
                std::string(s->strategy_name()).c_str());
    std::printf("%10s %8s %12s %12s %12s %12s\n", "size(B)", "reps", "median(us)", "min(us)", "max(us)", "MB/s");
    for (const auto& p : results) {
      auto [med, lo, hi] = stats(p.samples);
      std::printf("%10zu %8d %12.2f %12.2f %12.2f %12.1f\n", p.size, p.reps, med, lo, hi, med > 0 ? p.size / med : 0.0);
    }
  }
  return 0;
}

}  // namespace

// A session that cannot start (bad NMAD_STRATEGY or NMAD_DRIVER, no
// launcher, a peer that failed) says why and exits 1.
int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nmad_pingpong: %s\n", e.what());
    return 1;
  }
}
