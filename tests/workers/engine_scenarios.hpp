// The scenarios of engine_worker (the command of each is listed in
// engine_worker.cpp, which picks one by name), each defined in the
// engine_*.cpp file of its topic, and what several of them share: seeded
// message contents (fill), their hash (fnv) and the size and tag of a
// planned message. A scenario returns the process's exit status; a failed
// check exits at once (worker_util.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "api/nmad/nmad.hpp"

namespace nmad_test::engine {

inline std::uint64_t splitmix(std::uint64_t& x) {
  std::uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

inline void fill(std::vector<unsigned char>& buf, std::uint64_t seed) {
  std::uint64_t x = seed;
  std::size_t i = 0;
  for (; i + 8 <= buf.size(); i += 8) {
    std::uint64_t v = splitmix(x);
    std::memcpy(buf.data() + i, &v, 8);
  }
  std::uint64_t v = splitmix(x);
  for (; i < buf.size(); ++i) buf[i] = static_cast<unsigned char>(v >> (8 * (i % 8)));
}

inline std::uint64_t fnv(const unsigned char* p, std::size_t n) {
  std::uint64_t h = 1469598103934665603ULL;
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}

struct msg_spec {
  std::size_t size;
  nmad::tag_t tag;
};

// Random traffic between every pair of ranks (engine_stress.cpp).
int stress(nmad::session& s, int per_pair, std::uint64_t seed);
int mt_stress(nmad::session& s, int threads, int per_stream, std::uint64_t seed);

// Exchanges between ranks 0 and 1 (engine_exchanges.cpp).
int pingpong(nmad::session& s, int iters);
int aggregation(nmad::session& s, int n);
int pack_rpc(nmad::session& s, int rounds);
int truncate(nmad::session& s);
int pull(nmad::session& s, bool expect_pulled);
int sleeper(nmad::session& s, int ms);
int threads(nmad::session& s, int iters);
int callbacks(nmad::session& s, int n);

// Peers that die, strangers and floods (engine_failures.cpp).
int killed(nmad::session& s);
int killed_rdv(nmad::session& s);
int killed_unpack(nmad::session& s);
int intruder(nmad::session& s);
int flood(nmad::session& s, int per_addr, int hold_ms);

// Partitioned messages (engine_partitioned.cpp).
int partitioned(nmad::session& s, int rounds, int threads);
int partitioned_packets(nmad::session& s, int n);

// Destroying pending requests (engine_request_lifetime.cpp).
int destroy_pending(nmad::session& s);

}  // namespace nmad_test::engine
