// Collective algorithms as schedules: names, selection and the builders
// (argument checks, algorithm choice). The algorithms' steps are in
// movement_steps.cpp and reduction_steps.cpp (steps.hpp). See algorithms.hpp.
#include "mpi_layer/coll/algorithms.hpp"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "api/nmad/services/config.hpp"
#include "mpi_layer/coll/steps.hpp"

namespace nmad::coll {

using byte = std::byte;
using namespace steps;  // the algorithms' steps (steps.hpp)

std::string_view to_string(collective c) {
  switch (c) {
    case collective::barrier: return "barrier";
    case collective::bcast: return "bcast";
    case collective::reduce: return "reduce";
    case collective::allreduce: return "allreduce";
    case collective::gather: return "gather";
    case collective::gatherv: return "gatherv";
    case collective::scatter: return "scatter";
    case collective::scatterv: return "scatterv";
    case collective::allgather: return "allgather";
    case collective::allgatherv: return "allgatherv";
    case collective::alltoall: return "alltoall";
    case collective::alltoallv: return "alltoallv";
    case collective::reduce_scatter: return "reduce_scatter";
    case collective::reduce_scatter_block: return "reduce_scatter_block";
    case collective::scan: return "scan";
    case collective::exscan: return "exscan";
  }
  return "?";
}

std::string_view to_string(algorithm a) {
  switch (a) {
    case algorithm::automatic: return "automatic";
    case algorithm::dissemination: return "dissemination";
    case algorithm::binomial: return "binomial";
    case algorithm::scatter_allgather: return "scatter_allgather";
    case algorithm::chain: return "chain";
    case algorithm::recursive_doubling: return "recursive_doubling";
    case algorithm::rabenseifner: return "rabenseifner";
    case algorithm::linear: return "linear";
    case algorithm::bruck: return "bruck";
    case algorithm::ring: return "ring";
    case algorithm::pairwise: return "pairwise";
    case algorithm::reduce_scatterv: return "reduce_scatterv";
  }
  return "?";
}

// ---- selection -------------------------------------------------------------

namespace {
// Through the configuration reader (the knobs, their defaults and ranges
// are in core/common/config_knobs.cpp; MPI_Init has checked them).
void env_size(const char* name, std::size_t& v) { v = static_cast<std::size_t>(nmad::config::size(name)); }
void env_count(const char* name, std::size_t& v) { v = static_cast<std::size_t>(nmad::config::integer(name)); }
bool is_pow2(int n) { return n > 0 && (n & (n - 1)) == 0; }
}  // namespace

// Each tunable, its knob, and whether it counts processes (else bytes).
struct tunable_field {
  const char* knob;
  std::size_t tunables::*member;
  bool count;
};
constexpr tunable_field kFields[] = {
    {"NMAD_COLL_BCAST_SMALL", &tunables::bcast_small, false},
    {"NMAD_COLL_BCAST_LARGE", &tunables::bcast_large, false},
    {"NMAD_COLL_BCAST_MIN_PROCS", &tunables::bcast_min_procs, true},
    {"NMAD_COLL_CHAIN_SEGMENT", &tunables::chain_segment, false},
    {"NMAD_COLL_ALLREDUCE_SMALL", &tunables::allreduce_small, false},
    {"NMAD_COLL_ALLREDUCE_PAIR_LARGE", &tunables::allreduce_pair_large, false},
    {"NMAD_COLL_GATHER_LARGE", &tunables::gather_large, false},
    {"NMAD_COLL_ALLGATHER_SMALL", &tunables::allgather_small, false},
    {"NMAD_COLL_ALLTOALL_SMALL", &tunables::alltoall_small, false},
    {"NMAD_COLL_ALLTOALL_BRUCK", &tunables::alltoall_bruck, false},
    {"NMAD_COLL_ALLTOALL_BRUCK_PROCS", &tunables::alltoall_bruck_procs, true},
    {"NMAD_COLL_REDUCE_SCATTER_LARGE", &tunables::reduce_scatter_large, false},
    {"NMAD_COLL_SCAN_LARGE", &tunables::scan_large, false},
};
constexpr std::size_t kNumFields = sizeof kFields / sizeof kFields[0];

tunables tunables::from_env() {
  tunables t;
  for (const tunable_field& f : kFields)
    if (f.count) env_count(f.knob, t.*f.member);
    else env_size(f.knob, t.*f.member);
  if (t.chain_segment == 0) t.chain_segment = 64 * 1024;
  return t;
}

namespace {
// The process-wide values: from the environment on first use, then
// changed by set_tunable (MPI_T_cvar_write) at any time; each read as a
// relaxed atomic (a collective sees each field old or new).
std::atomic<std::size_t>* live_values() {
  static std::atomic<std::size_t> v[kNumFields];
  static std::once_flag once;
  std::call_once(once, [] {
    const tunables t = tunables::from_env();
    for (std::size_t i = 0; i < kNumFields; ++i) v[i].store(t.*kFields[i].member, std::memory_order_relaxed);
  });
  return v;
}

int field_of(std::string_view knob) {
  for (std::size_t i = 0; i < kNumFields; ++i)
    if (knob == kFields[i].knob) return static_cast<int>(i);
  return -1;
}
}  // namespace

tunables default_tunables() {
  std::atomic<std::size_t>* v = live_values();
  tunables t;
  for (std::size_t i = 0; i < kNumFields; ++i) t.*kFields[i].member = v[i].load(std::memory_order_relaxed);
  return t;
}

bool is_tunable(std::string_view knob) { return field_of(knob) >= 0; }

std::optional<std::size_t> get_tunable(std::string_view knob) {
  const int i = field_of(knob);
  if (i < 0) return std::nullopt;
  return live_values()[i].load(std::memory_order_relaxed);
}

bool set_tunable(std::string_view knob, std::size_t value) {
  const int i = field_of(knob);
  if (i < 0) return false;
  if (kFields[i].member == &tunables::chain_segment && value == 0) return false;  // a segment has bytes
  live_values()[i].store(value, std::memory_order_relaxed);
  return true;
}

algorithm select_algorithm(collective c, int n, std::size_t bytes, bool commutative, const tunables& t) {
  switch (c) {
    // 3 to 8 ranks: two hops either way, and linear needs each rank
    // scheduled twice at most; 2 ranks: one exchange beats two hops.
    case collective::barrier: return n >= 3 && n <= kBarrierLinearMax ? algorithm::linear : algorithm::dissemination;
    case collective::bcast:
      if (n <= 2 || bytes < t.bcast_small) return algorithm::binomial;
      if (static_cast<std::size_t>(n) < t.bcast_min_procs && bytes < t.bcast_large) return algorithm::binomial;
      return bytes < t.bcast_large ? algorithm::scatter_allgather : algorithm::chain;
    case collective::reduce: return algorithm::binomial;
    case collective::allreduce:
      // Two processes: one exchange of everything beats halving + doubling
      // until the reduction of the whole vector costs more than a second
      // round trip (measured crossover on shm: about 512 KiB).
      if (!commutative || n < 2 || bytes < t.allreduce_small || (n == 2 && bytes < t.allreduce_pair_large))
        return algorithm::recursive_doubling;
      return algorithm::rabenseifner;
    case collective::gather:
    case collective::scatter: return bytes < t.gather_large ? algorithm::binomial : algorithm::linear;
    case collective::gatherv:
    case collective::scatterv: return algorithm::linear;
    case collective::allgather:
      if (bytes < t.allgather_small) return is_pow2(n) ? algorithm::recursive_doubling : algorithm::bruck;
      return algorithm::ring;
    case collective::allgatherv: return algorithm::ring;
    case collective::alltoall:
      if (bytes <= t.alltoall_bruck && static_cast<std::size_t>(n) >= t.alltoall_bruck_procs) return algorithm::bruck;
      return bytes <= t.alltoall_small ? algorithm::linear : algorithm::pairwise;
    case collective::alltoallv: return bytes <= t.alltoall_small ? algorithm::linear : algorithm::pairwise;
    case collective::reduce_scatter:
    case collective::reduce_scatter_block:
      return (commutative && bytes >= t.reduce_scatter_large) ? algorithm::pairwise : algorithm::reduce_scatterv;
    case collective::scan:
    case collective::exscan: return bytes >= t.scan_large ? algorithm::chain : algorithm::recursive_doubling;
  }
  throw std::invalid_argument("coll::select_algorithm: unknown collective");
}

// ---- helpers ---------------------------------------------------------------

namespace {

void check_group(int rank, int n, const char* what) {
  if (n <= 0 || rank < 0 || rank >= n)
    throw std::invalid_argument(std::string("coll::") + what + ": rank " + std::to_string(rank) +
                                " outside a group of " + std::to_string(n));
}
void check_root(int root, int n, const char* what) {
  if (root < 0 || root >= n)
    throw std::invalid_argument(std::string("coll::") + what + ": root " + std::to_string(root) +
                                " outside a group of " + std::to_string(n));
}
void check_span(std::span<const std::size_t> s, int n, const char* what, const char* name) {
  if (s.size() < static_cast<std::size_t>(n))
    throw std::invalid_argument(std::string("coll::") + what + ": " + name + " has " + std::to_string(s.size()) +
                                " entries for a group of " + std::to_string(n));
}
void unsupported(const char* what, algorithm a) {
  throw std::invalid_argument(std::string("coll::") + what + ": algorithm " + std::string(to_string(a)) +
                              " does not apply");
}

const byte* input_of(const void* sendbuf, void* recvbuf) { return sendbuf ? CB(sendbuf) : CB(recvbuf); }

algorithm pick(algorithm a, collective c, int n, std::size_t bytes, bool commutative) {
  return a == algorithm::automatic ? select_algorithm(c, n, bytes, commutative, default_tunables()) : a;
}

std::vector<std::size_t> prefix(std::span<const std::size_t> v, int n) {
  std::vector<std::size_t> p(static_cast<std::size_t>(n) + 1, 0);
  for (int i = 0; i < n; ++i) p[i + 1] = p[i] + v[i];
  return p;
}

}  // namespace

// ---- builders ----------------------------------------------------------------

schedule build_barrier(int rank, int n, algorithm a) {
  check_group(rank, n, "barrier");
  a = pick(a, collective::barrier, n, 0, true);
  if (a != algorithm::dissemination && a != algorithm::linear) unsupported("barrier", a);
  schedule s;
  if (n == 1) return s;
  if (a == algorithm::linear) add_barrier_linear(s, rank, n);
  else add_barrier(s, rank, n);
  return s;
}

schedule build_bcast(int rank, int n, void* buf, std::size_t bytes, int root, algorithm a) {
  check_group(rank, n, "bcast");
  check_root(root, n, "bcast");
  a = pick(a, collective::bcast, n, bytes, true);
  if (a != algorithm::binomial && a != algorithm::scatter_allgather && a != algorithm::chain) unsupported("bcast", a);
  schedule s;
  if (n == 1 || bytes == 0) return s;
  switch (a) {
    case algorithm::binomial: add_bcast_binomial(s, rank, n, B(buf), bytes, root); break;
    case algorithm::scatter_allgather: add_bcast_scatter_allgather(s, rank, n, B(buf), bytes, root); break;
    case algorithm::chain: {
      std::size_t seg = default_tunables().chain_segment;
      // Keep the segment count within one phase's tag space.
      const std::size_t max_seg = (std::size_t{1} << schedule::tag_step_bits) - 1;
      if ((bytes + seg - 1) / seg > max_seg) seg = (bytes + max_seg - 1) / max_seg;
      add_bcast_chain(s, rank, n, B(buf), bytes, root, seg);
      break;
    }
    default: unsupported("bcast", a);
  }
  return s;
}

schedule build_reduce(int rank, int n, const void* sendbuf, void* recvbuf, std::size_t count, std::size_t es,
                      reducer& op, int root, algorithm a) {
  check_group(rank, n, "reduce");
  check_root(root, n, "reduce");
  a = pick(a, collective::reduce, n, count * es, op.commutative());
  if (a != algorithm::binomial) unsupported("reduce", a);
  schedule s;
  if (count == 0) return s;
  add_reduce_binomial(s, rank, n, input_of(sendbuf, recvbuf), B(recvbuf), count, es, op, root);
  return s;
}

schedule build_allreduce(int rank, int n, const void* sendbuf, void* recvbuf, std::size_t count, std::size_t es,
                         reducer& op, algorithm a) {
  check_group(rank, n, "allreduce");
  a = pick(a, collective::allreduce, n, count * es, op.commutative());
  if (a != algorithm::recursive_doubling && !(a == algorithm::rabenseifner && op.commutative()))
    unsupported("allreduce", a);
  schedule s;
  if (count == 0) return s;
  const byte* in = input_of(sendbuf, recvbuf);
  if (a == algorithm::recursive_doubling) add_allreduce_rd(s, rank, n, in, B(recvbuf), count, es, op);
  else add_allreduce_rabenseifner(s, rank, n, in, B(recvbuf), count, es, op);
  return s;
}

schedule build_gather(int rank, int n, const void* sendbuf, void* recvbuf, std::size_t b, int root, algorithm a) {
  check_group(rank, n, "gather");
  check_root(root, n, "gather");
  a = pick(a, collective::gather, n, b * n, true);
  if (a != algorithm::binomial && a != algorithm::linear) unsupported("gather", a);
  schedule s;
  if (b == 0) return s;
  const byte* own = sendbuf ? CB(sendbuf) : CB(recvbuf) + static_cast<std::size_t>(rank) * b;
  if (a == algorithm::binomial) add_gather_binomial(s, rank, n, own, B(recvbuf), b, root);
  else if (a == algorithm::linear) {
    std::vector<std::size_t> sizes(n, b), displs(n);
    for (int i = 0; i < n; ++i) displs[i] = static_cast<std::size_t>(i) * b;
    add_gatherv_linear(s, rank, n, sendbuf ? CB(sendbuf) : nullptr, b, B(recvbuf), sizes, displs, root);
  } else unsupported("gather", a);
  return s;
}

schedule build_gatherv(int rank, int n, const void* sendbuf, std::size_t send_bytes, void* recvbuf,
                       std::span<const std::size_t> rb, std::span<const std::size_t> displs, int root) {
  check_group(rank, n, "gatherv");
  check_root(root, n, "gatherv");
  schedule s;
  if (rank == root) {
    check_span(rb, n, "gatherv", "recv_bytes");
    check_span(displs, n, "gatherv", "displs");
  }
  add_gatherv_linear(s, rank, n, CB(sendbuf), send_bytes, B(recvbuf), rb, displs, root);
  return s;
}

schedule build_scatter(int rank, int n, const void* sendbuf, void* recvbuf, std::size_t b, int root, algorithm a) {
  check_group(rank, n, "scatter");
  check_root(root, n, "scatter");
  a = pick(a, collective::scatter, n, b * n, true);
  if (a != algorithm::binomial && a != algorithm::linear) unsupported("scatter", a);
  schedule s;
  if (b == 0) return s;
  if (a == algorithm::binomial) add_scatter_binomial(s, rank, n, CB(sendbuf), B(recvbuf), b, root);
  else if (a == algorithm::linear) {
    std::vector<std::size_t> sizes(n, b), displs(n);
    for (int i = 0; i < n; ++i) displs[i] = static_cast<std::size_t>(i) * b;
    add_scatterv_linear(s, rank, n, CB(sendbuf), sizes, displs, B(recvbuf), b, root);
  } else unsupported("scatter", a);
  return s;
}

schedule build_scatterv(int rank, int n, const void* sendbuf, std::span<const std::size_t> sb,
                        std::span<const std::size_t> displs, void* recvbuf, std::size_t recv_bytes, int root) {
  check_group(rank, n, "scatterv");
  check_root(root, n, "scatterv");
  if (rank == root) {
    check_span(sb, n, "scatterv", "send_bytes");
    check_span(displs, n, "scatterv", "displs");
  }
  schedule s;
  add_scatterv_linear(s, rank, n, CB(sendbuf), sb, displs, B(recvbuf), recv_bytes, root);
  return s;
}

schedule build_allgather(int rank, int n, const void* sendbuf, void* recvbuf, std::size_t b, algorithm a) {
  check_group(rank, n, "allgather");
  a = pick(a, collective::allgather, n, b * n, true);
  if (a != algorithm::recursive_doubling && a != algorithm::bruck && a != algorithm::ring) unsupported("allgather", a);
  schedule s;
  if (b == 0) return s;
  const byte* own = CB(sendbuf);
  if (a == algorithm::recursive_doubling && !is_pow2(n)) a = algorithm::bruck;
  switch (a) {
    case algorithm::recursive_doubling: add_allgather_rd(s, rank, n, own, B(recvbuf), b); break;
    case algorithm::bruck: add_allgather_bruck(s, rank, n, own, B(recvbuf), b); break;
    case algorithm::ring: {
      std::vector<std::size_t> sizes(n, b), displs(n);
      for (int i = 0; i < n; ++i) displs[i] = static_cast<std::size_t>(i) * b;
      add_allgatherv_ring(s, rank, n, own, b, B(recvbuf), sizes, displs);
      break;
    }
    default: unsupported("allgather", a);
  }
  return s;
}

schedule build_allgatherv(int rank, int n, const void* sendbuf, std::size_t send_bytes, void* recvbuf,
                          std::span<const std::size_t> rb, std::span<const std::size_t> displs) {
  check_group(rank, n, "allgatherv");
  check_span(rb, n, "allgatherv", "recv_bytes");
  check_span(displs, n, "allgatherv", "displs");
  schedule s;
  add_allgatherv_ring(s, rank, n, CB(sendbuf), send_bytes, B(recvbuf), rb, displs);
  return s;
}

schedule build_alltoall(int rank, int n, const void* sendbuf, void* recvbuf, std::size_t b, algorithm a) {
  check_group(rank, n, "alltoall");
  std::vector<std::size_t> sizes(n, b), displs(n);
  for (int i = 0; i < n; ++i) displs[i] = static_cast<std::size_t>(i) * b;
  a = pick(a, collective::alltoall, n, b, true);
  if (a != algorithm::linear && a != algorithm::pairwise && a != algorithm::bruck) unsupported("alltoall", a);
  if (b == 0) return schedule{};
  if (a == algorithm::bruck) {
    schedule s;
    const byte* src = CB(sendbuf);
    if (!sendbuf) {  // in place
      byte* t = s.temp(static_cast<std::size_t>(n) * b);
      s.copy(recvbuf, t, static_cast<std::size_t>(n) * b);
      src = t;
    }
    add_alltoall_bruck(s, rank, n, src, B(recvbuf), b);
    return s;
  }
  return build_alltoallv(rank, n, sendbuf, sizes, displs, recvbuf, sizes, displs, a);
}

schedule build_alltoallv(int rank, int n, const void* sendbuf, std::span<const std::size_t> sb,
                         std::span<const std::size_t> sd, void* recvbuf, std::span<const std::size_t> rb,
                         std::span<const std::size_t> rd, algorithm a) {
  check_group(rank, n, "alltoallv");
  check_span(rb, n, "alltoallv", "recv_bytes");
  check_span(rd, n, "alltoallv", "rdispls");
  schedule s;
  const byte* src = CB(sendbuf);
  if (!sendbuf) {  // in place: send what recvbuf holds, with the receive layout
    sb = rb;
    sd = rd;
    std::size_t extent = 0;
    for (int i = 0; i < n; ++i) extent = std::max(extent, rd[i] + rb[i]);
    byte* t = s.temp(extent);
    s.copy(recvbuf, t, extent);
    src = t;
  }
  check_span(sb, n, "alltoallv", "send_bytes");
  check_span(sd, n, "alltoallv", "sdispls");
  std::size_t total = 0;
  for (int i = 0; i < n; ++i) total += sb[i];
  a = pick(a, collective::alltoallv, n, total / static_cast<std::size_t>(n), true);
  if (a != algorithm::linear && a != algorithm::pairwise) unsupported("alltoallv", a);
  add_alltoallv(s, rank, n, src, sb, sd, B(recvbuf), rb, rd, a == algorithm::pairwise);
  return s;
}

schedule build_reduce_scatter(int rank, int n, const void* sendbuf, void* recvbuf,
                              std::span<const std::size_t> counts, std::size_t es, reducer& op, algorithm a) {
  check_group(rank, n, "reduce_scatter");
  check_span(counts, n, "reduce_scatter", "recv_counts");
  const std::vector<std::size_t> offs = prefix(counts, n);
  const std::size_t total = offs[n];
  a = pick(a, collective::reduce_scatter, n, total * es, op.commutative());
  if (a != algorithm::reduce_scatterv && !(a == algorithm::pairwise && op.commutative()))
    unsupported("reduce_scatter", a);
  schedule s;
  if (total == 0) return s;
  const byte* in = input_of(sendbuf, recvbuf);
  if (!sendbuf) {  // in place: the result overwrites the input's start; work on a copy
    byte* t = s.temp(total * es);
    s.copy(recvbuf, t, total * es);
    in = t;
  }
  if (a == algorithm::pairwise && op.commutative()) {
    add_reduce_scatter_pairwise(s, rank, n, in, B(recvbuf), counts, offs, es, op);
  } else if (a == algorithm::reduce_scatterv) {
    byte* full = rank == 0 ? s.temp(total * es) : nullptr;
    add_reduce_binomial(s, rank, n, in, full, total, es, op, 0);
    std::vector<std::size_t> sb(n), displs(n);
    for (int i = 0; i < n; ++i) {
      sb[i] = counts[i] * es;
      displs[i] = offs[i] * es;
    }
    add_scatterv_linear(s, rank, n, full, sb, displs, B(recvbuf), counts[rank] * es, 0);
  } else {
    unsupported("reduce_scatter", a);
  }
  return s;
}

schedule build_reduce_scatter_block(int rank, int n, const void* sendbuf, void* recvbuf, std::size_t count,
                                    std::size_t es, reducer& op, algorithm a) {
  check_group(rank, n, "reduce_scatter_block");
  std::vector<std::size_t> counts(n, count);
  if (a == algorithm::automatic)
    a = select_algorithm(collective::reduce_scatter_block, n, count * n * es, op.commutative(), default_tunables());
  return build_reduce_scatter(rank, n, sendbuf, recvbuf, counts, es, op, a);
}

schedule build_scan(int rank, int n, const void* sendbuf, void* recvbuf, std::size_t count, std::size_t es,
                    reducer& op, algorithm a) {
  check_group(rank, n, "scan");
  a = pick(a, collective::scan, n, count * es, op.commutative());
  if (a != algorithm::recursive_doubling && a != algorithm::chain) unsupported("scan", a);
  schedule s;
  if (count == 0) return s;
  const byte* in = input_of(sendbuf, recvbuf);
  if (a == algorithm::recursive_doubling) add_scan_rd(s, rank, n, in, B(recvbuf), count, es, op, false);
  else if (a == algorithm::chain) add_scan_chain(s, rank, n, in, B(recvbuf), count, es, op, false);
  else unsupported("scan", a);
  return s;
}

schedule build_exscan(int rank, int n, const void* sendbuf, void* recvbuf, std::size_t count, std::size_t es,
                      reducer& op, algorithm a) {
  check_group(rank, n, "exscan");
  a = pick(a, collective::exscan, n, count * es, op.commutative());
  if (a != algorithm::recursive_doubling && a != algorithm::chain) unsupported("exscan", a);
  schedule s;
  if (count == 0) return s;
  const byte* in = input_of(sendbuf, recvbuf);
  if (a == algorithm::recursive_doubling) add_scan_rd(s, rank, n, in, B(recvbuf), count, es, op, true);
  else if (a == algorithm::chain) add_scan_chain(s, rank, n, in, B(recvbuf), count, es, op, true);
  else unsupported("exscan", a);
  return s;
}

}  // namespace nmad::coll