// Multi-process checks of the collective schedules (//mpi_layer/coll),
// started by nmad-run from tests/coll_test.cpp. Every collective runs over
// the native API (session_transport on nmad::session) with several sizes
// (0 elements, small, > 32 KiB so the engine uses rendezvous), every root,
// every algorithm that applies and in-place variants; results are integer
// data checked exactly. The first discrepancy exits non-zero with a message.
//
//   coll_worker FAMILY     FAMILY: barrier bcast reduce allreduce gather
//                          scatter allgather alltoall reduce_scatter scan
//                          noncommutative concurrent background groups errors
// Prints "coll_worker rank R: FAMILY ok (N checks)" on success.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "api/nmad/nmad.hpp"
#include "tests/workers/worker_util.hpp"
#include "mpi_layer/coll/algorithms.hpp"
#include "mpi_layer/coll/progress_hook.hpp"
#include "mpi_layer/coll/session_transport.hpp"

using namespace nmad;
using nmad_test::worker::fail;
using nmad_test::worker::g_rank;
using coll::algorithm;

namespace {

long g_checks = 0;

void expect(bool cond, const std::string& what) {
  ++g_checks;
  if (!cond) fail(what);
}

std::string show(std::int32_t v) { return std::to_string(v); }
std::string show(double v) { return std::to_string(v); }
struct mat;
std::string show(const mat& m);

template <class T>
void expect_eq(const std::vector<T>& got, const std::vector<T>& want, const std::string& what) {
  ++g_checks;
  if (got.size() != want.size()) fail(what + ": size " + std::to_string(got.size()) + " != " + std::to_string(want.size()));
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(got[i] == want[i]))
      fail(what + ": element " + std::to_string(i) + " differs (got " + show(got[i]) + ", want " + show(want[i]) +
           ")");
}

std::string alg_name(algorithm a) { return std::string(coll::to_string(a)); }

// The data rank r contributes at index i (salt varies per call).
std::int32_t val(int r, std::size_t i, int salt = 0) {
  return static_cast<std::int32_t>((static_cast<std::uint64_t>(r + 1) * 1000003u + i * 7919u +
                                    static_cast<std::uint64_t>(salt) * 104729u) % 200001u) - 100000;
}

// ---- reducers ---------------------------------------------------------------
struct sum_i32 final : coll::reducer {
  void apply(const void* in, void* inout, std::size_t n) override {
    auto a = static_cast<const std::int32_t*>(in);
    auto b = static_cast<std::int32_t*>(inout);
    for (std::size_t i = 0; i < n; ++i) b[i] += a[i];
  }
};
struct max_i32 final : coll::reducer {
  void apply(const void* in, void* inout, std::size_t n) override {
    auto a = static_cast<const std::int32_t*>(in);
    auto b = static_cast<std::int32_t*>(inout);
    for (std::size_t i = 0; i < n; ++i) b[i] = std::max(a[i], b[i]);
  }
};
struct sum_f64 final : coll::reducer {
  void apply(const void* in, void* inout, std::size_t n) override {
    auto a = static_cast<const double*>(in);
    auto b = static_cast<double*>(inout);
    for (std::size_t i = 0; i < n; ++i) b[i] += a[i];
  }
};
// 2x2 matrices of uint32 (mod 2^32): associative, not commutative.
struct mat {
  std::uint32_t a, b, c, d;
  bool operator==(const mat&) const = default;
};
mat mul(const mat& x, const mat& y) {
  return {x.a * y.a + x.b * y.c, x.a * y.b + x.b * y.d, x.c * y.a + x.d * y.c, x.c * y.b + x.d * y.d};
}
struct matmul final : coll::reducer {
  void apply(const void* in, void* inout, std::size_t n) override {
    auto x = static_cast<const mat*>(in);
    auto y = static_cast<mat*>(inout);
    for (std::size_t i = 0; i < n; ++i) y[i] = mul(x[i], y[i]);  // inout = in * inout
  }
  bool commutative() const override { return false; }
};
mat mval(int r, std::size_t i) {
  return {1u + static_cast<std::uint32_t>((r + i) % 3), static_cast<std::uint32_t>((r * 7 + i) % 5),
          static_cast<std::uint32_t>((i * 3 + r) % 4), 1u + static_cast<std::uint32_t>((r + 2 * i) % 2)};
}
std::string show(const mat& m) {
  return "[" + std::to_string(m.a) + " " + std::to_string(m.b) + "; " + std::to_string(m.c) + " " +
         std::to_string(m.d) + "]";
}

const std::vector<std::size_t> kCounts = {0, 1, 5, 300, 9000};  // int32: 9000 = 36 KB (rendezvous)

struct ctx {
  session& s;
  coll::session_transport& tr;
  int rank, n;
  void run(coll::schedule&& sch, const std::string& what) {
    std::string msg;
    errc e = coll::run(std::move(sch), tr, tr.next_sequence(), &msg);
    if (e != errc::ok) fail(what + ": " + std::string(to_string(e)) + " " + msg);
  }
};

std::string tagline(const char* coll_name, algorithm a, std::size_t count, int root = -1, bool inplace = false) {
  std::string s = std::string(coll_name) + " alg=" + alg_name(a) + " count=" + std::to_string(count);
  if (root >= 0) s += " root=" + std::to_string(root);
  if (inplace) s += " in-place";
  return s;
}

// ---- families ------------------------------------------------------------------

void barrier(ctx& c) {
  // Barrier semantics: the last rank arrives late; nobody leaves before.
  using clk = std::chrono::steady_clock;
  for (algorithm a : {algorithm::linear, algorithm::dissemination})
    for (int it = 0; it < 2; ++it) {
      const int late = (c.n - 1 + it) % c.n;
      c.run(coll::build_barrier(c.rank, c.n), "barrier (start together)");
      auto t0 = clk::now();
      if (c.rank == late) std::this_thread::sleep_for(std::chrono::milliseconds(400));
      c.run(coll::build_barrier(c.rank, c.n, a), tagline("barrier", a, 0));
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(clk::now() - t0).count();
      if (c.n > 1 && c.rank != late)
        expect(ms >= 150, tagline("barrier", a, 0) + " returned after " + std::to_string(ms) +
                              " ms, before the late rank arrived");
    }
  for (algorithm a : {algorithm::linear, algorithm::dissemination})
    for (int i = 0; i < 30; ++i) c.run(coll::build_barrier(c.rank, c.n, a), "barrier loop");
}

void bcast(ctx& c) {
  std::vector<std::size_t> counts = kCounts;
  counts.push_back(70000);  // 280 KB
  for (algorithm a : {algorithm::automatic, algorithm::binomial, algorithm::scatter_allgather, algorithm::chain})
    for (std::size_t count : counts)
      for (int root = 0; root < c.n; ++root) {
        std::vector<std::int32_t> buf(count), want(count);
        for (std::size_t i = 0; i < count; ++i) want[i] = val(root, i, 1);
        if (c.rank == root) buf = want;
        else std::fill(buf.begin(), buf.end(), -1);
        const auto what = tagline("bcast", a, count, root);
        c.run(coll::build_bcast(c.rank, c.n, buf.data(), count * 4, root, a), what);
        expect_eq(buf, want, what);
      }
}

// value(0) op value(1) op ... op value(n-1), element by element (MPI's
// rank order, which non-commutative ops must get).
template <class T, class R, class F>
std::vector<T> reduced_over_ranks(R& op, F value, std::size_t count, int n, int salt) {
  std::vector<T> want(count);
  for (std::size_t i = 0; i < count; ++i) {
    want[i] = value(0, i, salt);
    for (int r = 1; r < n; ++r) {
      T x = value(r, i, salt);
      op.apply(&want[i], &x, 1);
      want[i] = x;
    }
  }
  return want;
}

template <class R, class T, class F>
void reduce_family(ctx& c, R& op, const char* name, F value, int salt) {
  for (std::size_t count : kCounts)
    for (int root = 0; root < c.n; ++root)
      for (bool inplace : {false, true}) {
        std::vector<T> in(count), out(count, T{});
        for (std::size_t i = 0; i < count; ++i) in[i] = value(c.rank, i, salt);
        const std::vector<T> want = reduced_over_ranks<T>(op, value, count, c.n, salt);
        const bool ip = inplace && c.rank == root;
        if (ip) out = in;
        const auto what = tagline(name, algorithm::binomial, count, root, inplace);
        c.run(coll::build_reduce(c.rank, c.n, ip ? nullptr : in.data(), out.data(), count, sizeof(T), op, root), what);
        if (c.rank == root) expect_eq(out, want, what);
        std::vector<T> again(count);
        for (std::size_t i = 0; i < count; ++i) again[i] = value(c.rank, i, salt);
        if (!ip) expect_eq(in, again, what + " (send buffer untouched)");
      }
}

void reduce(ctx& c) {
  sum_i32 sum;
  max_i32 mx;
  sum_f64 dsum;
  auto iv = [](int r, std::size_t i, int salt) { return val(r, i, salt); };
  auto dv = [](int r, std::size_t i, int salt) { return static_cast<double>(val(r, i, salt)); };
  reduce_family<sum_i32, std::int32_t>(c, sum, "reduce(sum)", iv, 2);
  reduce_family<max_i32, std::int32_t>(c, mx, "reduce(max)", iv, 3);
  reduce_family<sum_f64, double>(c, dsum, "reduce(dsum)", dv, 4);
}

template <class R, class T, class F>
void allreduce_family(ctx& c, R& op, const char* name, F value, int salt, std::vector<algorithm> algs) {
  for (algorithm a : algs)
    for (std::size_t count : kCounts)
      for (bool inplace : {false, true}) {
        std::vector<T> in(count), out(count, T{});
        for (std::size_t i = 0; i < count; ++i) in[i] = value(c.rank, i, salt);
        const std::vector<T> want = reduced_over_ranks<T>(op, value, count, c.n, salt);
        if (inplace) out = in;
        const auto what = tagline(name, a, count, -1, inplace);
        c.run(coll::build_allreduce(c.rank, c.n, inplace ? nullptr : in.data(), out.data(), count, sizeof(T), op, a), what);
        expect_eq(out, want, what);
      }
}

void allreduce(ctx& c) {
  sum_i32 sum;
  max_i32 mx;
  sum_f64 dsum;
  auto iv = [](int r, std::size_t i, int salt) { return val(r, i, salt); };
  auto dv = [](int r, std::size_t i, int salt) { return static_cast<double>(val(r, i, salt)); };
  const std::vector<algorithm> all = {algorithm::automatic, algorithm::recursive_doubling, algorithm::rabenseifner};
  allreduce_family<sum_i32, std::int32_t>(c, sum, "allreduce(sum)", iv, 5, all);
  allreduce_family<max_i32, std::int32_t>(c, mx, "allreduce(max)", iv, 6, all);
  allreduce_family<sum_f64, double>(c, dsum, "allreduce(dsum)", dv, 7, all);
}

void gather(ctx& c) {
  for (algorithm a : {algorithm::automatic, algorithm::binomial, algorithm::linear})
    for (std::size_t count : kCounts)
      for (int root = 0; root < c.n; ++root)
        for (bool inplace : {false, true}) {
          std::vector<std::int32_t> in(count), out, want;
          for (std::size_t i = 0; i < count; ++i) in[i] = val(c.rank, i, 8);
          if (c.rank == root) {
            out.assign(count * c.n, -1);
            for (int r = 0; r < c.n; ++r)
              for (std::size_t i = 0; i < count; ++i) want.push_back(val(r, i, 8));
          }
          const bool ip = inplace && c.rank == root;
          if (ip) std::copy(in.begin(), in.end(), out.begin() + static_cast<long>(count * root));
          const auto what = tagline("gather", a, count, root, inplace);
          c.run(coll::build_gather(c.rank, c.n, ip ? nullptr : in.data(), out.data(), count * 4, root, a), what);
          if (c.rank == root) expect_eq(out, want, what);
        }
  // gatherv: rank r sends base + 3r elements (rank 1: none); the root places
  // them in reverse rank order with gaps.
  for (std::size_t base : {std::size_t{0}, std::size_t{2}, std::size_t{9000}})
    for (int root = 0; root < c.n; ++root) {
      auto cnt = [&](int r) { return r == 1 ? std::size_t{0} : base + 3 * static_cast<std::size_t>(r); };
      std::vector<std::size_t> rb(c.n), displs(c.n);
      std::size_t off = 0;
      for (int r = c.n - 1; r >= 0; --r) {
        rb[r] = cnt(r) * 4;
        displs[r] = off * 4;
        off += cnt(r) + 1;  // one-element gap
      }
      std::vector<std::int32_t> in(cnt(c.rank)), out(c.rank == root ? off : 0, -7), want(out.size(), -7);
      for (std::size_t i = 0; i < in.size(); ++i) in[i] = val(c.rank, i, 9);
      if (c.rank == root)
        for (int r = 0; r < c.n; ++r)
          for (std::size_t i = 0; i < cnt(r); ++i) want[displs[r] / 4 + i] = val(r, i, 9);
      const auto what = tagline("gatherv", algorithm::linear, base, root);
      c.run(coll::build_gatherv(c.rank, c.n, in.data(), in.size() * 4, out.data(), rb, displs, root), what);
      if (c.rank == root) expect_eq(out, want, what);
    }
}

void scatter(ctx& c) {
  for (algorithm a : {algorithm::automatic, algorithm::binomial, algorithm::linear})
    for (std::size_t count : kCounts)
      for (int root = 0; root < c.n; ++root)
        for (bool inplace : {false, true}) {
          std::vector<std::int32_t> in, out(count, -1), want(count);
          if (c.rank == root)
            for (int r = 0; r < c.n; ++r)
              for (std::size_t i = 0; i < count; ++i) in.push_back(val(r, i, 10));
          for (std::size_t i = 0; i < count; ++i) want[i] = val(c.rank, i, 10);
          const bool ip = inplace && c.rank == root;
          const auto what = tagline("scatter", a, count, root, inplace);
          c.run(coll::build_scatter(c.rank, c.n, in.data(), ip ? nullptr : out.data(), count * 4, root, a), what);
          if (!ip) expect_eq(out, want, what);
          else expect(std::equal(want.begin(), want.end(), in.begin() + static_cast<long>(count * root)), what);
        }
  for (std::size_t base : {std::size_t{0}, std::size_t{2}, std::size_t{9000}})
    for (int root = 0; root < c.n; ++root) {
      auto cnt = [&](int r) { return r == 1 ? std::size_t{0} : base + 3 * static_cast<std::size_t>(r); };
      std::vector<std::size_t> sb(c.n), displs(c.n);
      std::size_t off = 0;
      for (int r = c.n - 1; r >= 0; --r) {
        sb[r] = cnt(r) * 4;
        displs[r] = off * 4;
        off += cnt(r) + 1;
      }
      std::vector<std::int32_t> in(c.rank == root ? off : 0, -7), out(cnt(c.rank), -1), want(cnt(c.rank));
      if (c.rank == root)
        for (int r = 0; r < c.n; ++r)
          for (std::size_t i = 0; i < cnt(r); ++i) in[displs[r] / 4 + i] = val(r, i, 11);
      for (std::size_t i = 0; i < want.size(); ++i) want[i] = val(c.rank, i, 11);
      const auto what = tagline("scatterv", algorithm::linear, base, root);
      c.run(coll::build_scatterv(c.rank, c.n, in.data(), sb, displs, out.data(), out.size() * 4, root), what);
      expect_eq(out, want, what);
    }
}

void allgather(ctx& c) {
  for (algorithm a : {algorithm::automatic, algorithm::recursive_doubling, algorithm::bruck, algorithm::ring})
    for (std::size_t count : kCounts)
      for (bool inplace : {false, true}) {
        std::vector<std::int32_t> in(count), out(count * c.n, -1), want;
        for (std::size_t i = 0; i < count; ++i) in[i] = val(c.rank, i, 12);
        for (int r = 0; r < c.n; ++r)
          for (std::size_t i = 0; i < count; ++i) want.push_back(val(r, i, 12));
        if (inplace) std::copy(in.begin(), in.end(), out.begin() + static_cast<long>(count * c.rank));
        const auto what = tagline("allgather", a, count, -1, inplace);
        c.run(coll::build_allgather(c.rank, c.n, inplace ? nullptr : in.data(), out.data(), count * 4, a), what);
        expect_eq(out, want, what);
      }
  for (std::size_t base : {std::size_t{0}, std::size_t{2}, std::size_t{9000}})
    for (bool inplace : {false, true}) {
      auto cnt = [&](int r) { return r == 1 ? std::size_t{0} : base + 3 * static_cast<std::size_t>(r); };
      std::vector<std::size_t> rb(c.n), displs(c.n);
      std::size_t off = 0;
      for (int r = c.n - 1; r >= 0; --r) {
        rb[r] = cnt(r) * 4;
        displs[r] = off * 4;
        off += cnt(r) + 1;
      }
      std::vector<std::int32_t> in(cnt(c.rank)), out(off, -7), want(off, -7);
      for (std::size_t i = 0; i < in.size(); ++i) in[i] = val(c.rank, i, 13);
      for (int r = 0; r < c.n; ++r)
        for (std::size_t i = 0; i < cnt(r); ++i) want[displs[r] / 4 + i] = val(r, i, 13);
      if (inplace) std::copy(in.begin(), in.end(), out.begin() + static_cast<long>(displs[c.rank] / 4));
      const auto what = tagline("allgatherv", algorithm::ring, base, -1, inplace);
      c.run(coll::build_allgatherv(c.rank, c.n, inplace ? nullptr : in.data(), in.size() * 4, out.data(), rb, displs), what);
      expect_eq(out, want, what);
    }
}

// Element i of the block rank `from` sends to rank `to`.
std::int32_t a2a(int from, int to, std::size_t i) { return val(from * 16 + to, i, 14); }

void alltoall(ctx& c) {
  for (algorithm a : {algorithm::automatic, algorithm::linear, algorithm::pairwise, algorithm::bruck})
    for (std::size_t count : kCounts)
      for (bool inplace : {false, true}) {
        std::vector<std::int32_t> in(count * c.n), out(count * c.n, -1), want(count * c.n);
        for (int p = 0; p < c.n; ++p)
          for (std::size_t i = 0; i < count; ++i) {
            in[p * count + i] = a2a(c.rank, p, i);
            want[p * count + i] = a2a(p, c.rank, i);
          }
        if (inplace) out = in;
        const auto what = tagline("alltoall", a, count, -1, inplace);
        c.run(coll::build_alltoall(c.rank, c.n, inplace ? nullptr : in.data(), out.data(), count * 4, a), what);
        expect_eq(out, want, what);
      }
  // alltoallv: rank f sends (base + f + 2t) % 7 * scale elements to t (some zero).
  for (std::size_t scale : {std::size_t{1}, std::size_t{3000}})
    for (algorithm a : {algorithm::automatic, algorithm::linear, algorithm::pairwise}) {
      auto cnt = [&](int f, int t) { return static_cast<std::size_t>((f + 2 * t) % 7) * scale; };
      std::vector<std::size_t> sb(c.n), sd(c.n), rb(c.n), rd(c.n);
      std::size_t so = 0, ro = 0;
      for (int p = 0; p < c.n; ++p) {
        sb[p] = cnt(c.rank, p) * 4;
        sd[p] = so * 4;
        so += cnt(c.rank, p);
      }
      for (int p = c.n - 1; p >= 0; --p) {  // receive layout in reverse order, with gaps
        rb[p] = cnt(p, c.rank) * 4;
        rd[p] = ro * 4;
        ro += cnt(p, c.rank) + 2;
      }
      std::vector<std::int32_t> in(so), out(ro, -7), want(ro, -7);
      for (int p = 0; p < c.n; ++p)
        for (std::size_t i = 0; i < cnt(c.rank, p); ++i) in[sd[p] / 4 + i] = a2a(c.rank, p, i);
      for (int p = 0; p < c.n; ++p)
        for (std::size_t i = 0; i < cnt(p, c.rank); ++i) want[rd[p] / 4 + i] = a2a(p, c.rank, i);
      const auto what = tagline("alltoallv", a, scale);
      c.run(coll::build_alltoallv(c.rank, c.n, in.data(), sb, sd, out.data(), rb, rd, a), what);
      expect_eq(out, want, what);
    }
}

void reduce_scatter(ctx& c) {
  sum_i32 sum;
  for (algorithm a : {algorithm::automatic, algorithm::pairwise, algorithm::reduce_scatterv})
    for (std::size_t base : kCounts)
      for (bool inplace : {false, true}) {
        // reduce_scatter: rank r gets base + r elements (rank 1: none).
        std::vector<std::size_t> counts(c.n), offs(c.n + 1, 0);
        for (int r = 0; r < c.n; ++r) {
          counts[r] = r == 1 ? 0 : base + static_cast<std::size_t>(r);
          offs[r + 1] = offs[r] + counts[r];
        }
        const std::size_t total = offs[c.n];
        std::vector<std::int32_t> in(total), out(inplace ? total : counts[c.rank], -1), want(counts[c.rank]);
        for (std::size_t i = 0; i < total; ++i) in[i] = val(c.rank, i, 15);
        for (std::size_t i = 0; i < counts[c.rank]; ++i) {
          std::int32_t s = 0;
          for (int r = 0; r < c.n; ++r) s += val(r, offs[c.rank] + i, 15);
          want[i] = s;
        }
        if (inplace) out = in;
        const auto what = tagline("reduce_scatter", a, base, -1, inplace);
        c.run(coll::build_reduce_scatter(c.rank, c.n, inplace ? nullptr : in.data(), out.data(), counts, 4, sum, a), what);
        out.resize(counts[c.rank]);
        expect_eq(out, want, what);

        // reduce_scatter_block: everyone gets `base` elements.
        std::vector<std::int32_t> bin(base * c.n), bout(inplace ? base * c.n : base, -1), bwant(base);
        for (std::size_t i = 0; i < bin.size(); ++i) bin[i] = val(c.rank, i, 16);
        for (std::size_t i = 0; i < base; ++i) {
          std::int32_t s = 0;
          for (int r = 0; r < c.n; ++r) s += val(r, base * c.rank + i, 16);
          bwant[i] = s;
        }
        if (inplace) bout = bin;
        const auto bwhat = tagline("reduce_scatter_block", a, base, -1, inplace);
        c.run(coll::build_reduce_scatter_block(c.rank, c.n, inplace ? nullptr : bin.data(), bout.data(), base, 4, sum, a), bwhat);
        bout.resize(base);
        expect_eq(bout, bwant, bwhat);
      }
}

template <class T, class R, class F>
void scan_check(ctx& c, R& op, F value, const char* name, algorithm a, std::size_t count, bool exclusive, bool inplace) {
  std::vector<T> in(count), out(count), want(count);
  const T sentinel = value(99, 0);
  for (std::size_t i = 0; i < count; ++i) {
    in[i] = value(c.rank, i);
    out[i] = sentinel;
    const int last = exclusive ? c.rank - 1 : c.rank;
    if (last < 0) { want[i] = inplace ? in[i] : sentinel; continue; }
    T acc = value(0, i);
    for (int r = 1; r <= last; ++r) {
      T x = value(r, i);
      op.apply(&acc, &x, 1);
      acc = x;
    }
    want[i] = acc;
  }
  if (inplace) out = in;
  const auto what = tagline(name, a, count, -1, inplace);
  if (exclusive) c.run(coll::build_exscan(c.rank, c.n, inplace ? nullptr : in.data(), out.data(), count, sizeof(T), op, a), what);
  else c.run(coll::build_scan(c.rank, c.n, inplace ? nullptr : in.data(), out.data(), count, sizeof(T), op, a), what);
  expect_eq(out, want, what);
}

void scan(ctx& c) {
  sum_i32 sum;
  auto iv = [](int r, std::size_t i) { return val(r, i, 17); };
  for (algorithm a : {algorithm::automatic, algorithm::recursive_doubling, algorithm::chain})
    for (std::size_t count : kCounts)
      for (bool inplace : {false, true}) {
        scan_check<std::int32_t>(c, sum, iv, "scan(sum)", a, count, false, inplace);
        scan_check<std::int32_t>(c, sum, iv, "exscan(sum)", a, count, true, inplace);
      }
}

// Non-commutative op: results must be r0 * r1 * ... in rank order.
void noncommutative(ctx& c) {
  matmul op;
  const std::vector<std::size_t> counts = {0, 1, 3, 2500};  // 2500 * 16 B = 40 KB
  auto mv = [](int r, std::size_t i, int) { return mval(r, i); };
  auto product = [&](int first, int last, std::size_t i) {
    mat acc = mval(first, i);
    for (int r = first + 1; r <= last; ++r) acc = mul(acc, mval(r, i));
    return acc;
  };
  for (std::size_t count : counts) {
    std::vector<mat> in(count);
    for (std::size_t i = 0; i < count; ++i) in[i] = mv(c.rank, i, 0);
    std::vector<mat> full(count);
    for (std::size_t i = 0; i < count; ++i) full[i] = product(0, c.n - 1, i);
    for (int root = 0; root < c.n; ++root) {
      std::vector<mat> out(count, mat{0, 0, 0, 0});
      const auto what = tagline("reduce(matmul)", algorithm::binomial, count, root);
      c.run(coll::build_reduce(c.rank, c.n, in.data(), out.data(), count, sizeof(mat), op, root), what);
      if (c.rank == root) expect_eq(out, full, what);
    }
    for (algorithm a : {algorithm::automatic, algorithm::recursive_doubling}) {
      std::vector<mat> out(count);
      const auto what = tagline("allreduce(matmul)", a, count);
      c.run(coll::build_allreduce(c.rank, c.n, in.data(), out.data(), count, sizeof(mat), op, a), what);
      expect_eq(out, full, what);
    }
    bool refused = false;
    try {
      std::vector<mat> out(count);
      (void)coll::build_allreduce(c.rank, c.n, in.data(), out.data(), count, sizeof(mat), op, algorithm::rabenseifner);
    } catch (const std::invalid_argument&) {
      refused = true;
    }
    expect(refused, "rabenseifner must refuse a non-commutative op");
    auto mv2 = [](int r, std::size_t i) { return mval(r, i); };
    for (algorithm a : {algorithm::automatic, algorithm::recursive_doubling, algorithm::chain}) {
      scan_check<mat>(c, op, mv2, "scan(matmul)", a, count, false, false);
      scan_check<mat>(c, op, mv2, "exscan(matmul)", a, count, true, false);
    }
    // reduce_scatter with a non-commutative op (automatic must pick an
    // order-preserving algorithm).
    std::vector<std::size_t> rc(c.n, count);
    std::vector<mat> rin(count * c.n), rout(count), rwant(count);
    for (std::size_t i = 0; i < rin.size(); ++i) rin[i] = mval(c.rank, i);
    for (std::size_t i = 0; i < count; ++i) rwant[i] = product(0, c.n - 1, count * c.rank + i);
    const auto what = tagline("reduce_scatter(matmul)", algorithm::automatic, count);
    c.run(coll::build_reduce_scatter(c.rank, c.n, rin.data(), rout.data(), rc, sizeof(mat), op), what);
    expect_eq(rout, rwant, what);
  }
}

// Two non-blocking collectives of the same kind and sizes in flight at once,
// advanced interleaved (in opposite orders on even and odd ranks): only the
// sequence number tells their messages apart.
void concurrent(ctx& c) {
  sum_i32 sum;
  for (std::size_t count : {std::size_t{1}, std::size_t{300}, std::size_t{9000}})
    for (algorithm a : {algorithm::recursive_doubling, algorithm::rabenseifner}) {
      std::vector<std::int32_t> in1(count), in2(count), out1(count), out2(count), w1(count, 0), w2(count, 0);
      for (std::size_t i = 0; i < count; ++i) {
        in1[i] = val(c.rank, i, 20);
        in2[i] = val(c.rank, i, 21);
        for (int r = 0; r < c.n; ++r) {
          w1[i] += val(r, i, 20);
          w2[i] += val(r, i, 21);
        }
      }
      std::vector<std::int32_t> b1(count), b2(count), bw1(count), bw2(count);
      for (std::size_t i = 0; i < count; ++i) {
        bw1[i] = val(0, i, 22);
        bw2[i] = val(0, i, 23);
      }
      if (c.rank == 0) { b1 = bw1; b2 = bw2; }
      std::vector<std::unique_ptr<coll::executor>> ex;
      ex.push_back(std::make_unique<coll::executor>(
          coll::build_allreduce(c.rank, c.n, in1.data(), out1.data(), count, 4, sum, a), c.tr, c.tr.next_sequence()));
      ex.push_back(std::make_unique<coll::executor>(
          coll::build_allreduce(c.rank, c.n, in2.data(), out2.data(), count, 4, sum, a), c.tr, c.tr.next_sequence()));
      ex.push_back(std::make_unique<coll::executor>(coll::build_bcast(c.rank, c.n, b1.data(), count * 4, 0),
                                                    c.tr, c.tr.next_sequence()));
      ex.push_back(std::make_unique<coll::executor>(coll::build_bcast(c.rank, c.n, b2.data(), count * 4, 0),
                                                    c.tr, c.tr.next_sequence()));
      if (c.rank % 2) std::reverse(ex.begin(), ex.end());
      for (bool all = false; !all;) {
        all = true;
        for (auto& e : ex) all &= e->advance();
      }
      for (auto& e : ex) expect(e->error() == errc::ok, "concurrent: " + e->error_message());
      const auto what = tagline("concurrent allreduce+bcast", a, count);
      expect_eq(out1, w1, what + " (first allreduce)");
      expect_eq(out2, w2, what + " (second allreduce)");
      expect_eq(b1, bw1, what + " (first bcast)");
      expect_eq(b2, bw2, what + " (second bcast)");
    }
  // A non-blocking allreduce advanced by a second thread while this one
  // runs blocking barriers on another context (one thread per executor).
  {
    coll::session_transport other(c.s, tag_t{2} << 56);
    std::vector<std::int32_t> in(9000), out(9000), want(9000, 0);
    for (std::size_t i = 0; i < in.size(); ++i) {
      in[i] = val(c.rank, i, 24);
      for (int r = 0; r < c.n; ++r) want[i] += val(r, i, 24);
    }
    coll::executor ex(coll::build_allreduce(c.rank, c.n, in.data(), out.data(), in.size(), 4, sum), other,
                      other.next_sequence());
    std::thread t([&] {
      while (!ex.advance()) {
      }
    });
    for (int i = 0; i < 20; ++i) c.run(coll::build_barrier(c.rank, c.n), "barrier while a thread advances");
    // Also poke the executor from this thread: the try-lock makes it safe.
    while (!ex.advance()) {
    }
    t.join();
    expect(ex.error() == errc::ok, "threaded executor: " + ex.error_message());
    expect_eq(out, want, "allreduce advanced by another thread");
  }
}

// Non-blocking collectives advanced only by engine progress (a session
// progress task installed by coll::progress_hook): the owner never calls
// advance(); it runs blocking barriers on another context, then only calls
// session::progress() until the executors report done.
void background(ctx& c) {
  sum_i32 sum;
  coll::progress_hook hook(c.s);
  coll::session_transport other(c.s, tag_t{5} << 56);
  for (std::size_t count : {std::size_t{0}, std::size_t{7}, std::size_t{9000}}) {
    std::vector<std::int32_t> in(count), out(count, -1), want(count, 0);
    for (std::size_t i = 0; i < count; ++i) {
      in[i] = val(c.rank, i, 40);
      for (int r = 0; r < c.n; ++r) want[i] += val(r, i, 40);
    }
    std::vector<std::int32_t> a_in(count * c.n), a_out(count * c.n, -1), a_want(count * c.n);
    for (int p = 0; p < c.n; ++p)
      for (std::size_t i = 0; i < count; ++i) {
        a_in[p * count + i] = a2a(c.rank, p, i);
        a_want[p * count + i] = a2a(p, c.rank, i);
      }
    auto ex1 = std::make_shared<coll::executor>(coll::build_allreduce(c.rank, c.n, in.data(), out.data(), count, 4, sum),
                                                c.tr, c.tr.next_sequence());
    auto ex2 = std::make_shared<coll::executor>(coll::build_alltoall(c.rank, c.n, a_in.data(), a_out.data(), count * 4),
                                                c.tr, c.tr.next_sequence());
    hook.add(ex1);
    hook.add(ex2);
    std::string msg;
    for (int i = 0; i < 5; ++i) {
      errc e = coll::run(coll::build_barrier(c.rank, c.n), other, other.next_sequence(), &msg);
      expect(e == errc::ok, "barrier on the other context: " + msg);
    }
    while (!ex1->done() || !ex2->done()) c.s.progress();
    expect(ex1->error() == errc::ok && ex2->error() == errc::ok, "background executors failed");
    const auto what = tagline("background allreduce+alltoall", algorithm::automatic, count);
    if (count) {
      expect_eq(out, want, what + " (allreduce)");
      expect_eq(a_out, a_want, what + " (alltoall)");
    }
  }
  c.s.progress();
  expect(hook.pending() == 0, "the hook drops finished executors");
}

// Group translation: the same collectives over the reversed rank order and
// over the even ranks only (two contexts with different base tags).
void groups(ctx& c) {
  sum_i32 sum;
  std::vector<int> rev(c.n);
  for (int i = 0; i < c.n; ++i) rev[i] = c.n - 1 - i;
  coll::session_transport trev(c.s, rev, tag_t{3} << 56);
  expect(trev.rank() == c.n - 1 - c.rank, "reversed group rank");
  {
    const int gr = trev.rank();
    std::vector<std::int32_t> in(300), out(300 * c.n, -1), want;
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = val(gr, i, 30);
    for (int r = 0; r < c.n; ++r)
      for (std::size_t i = 0; i < in.size(); ++i) want.push_back(val(r, i, 30));
    std::string msg;
    errc e = coll::run(coll::build_allgather(gr, c.n, in.data(), out.data(), in.size() * 4), trev, trev.next_sequence(), &msg);
    expect(e == errc::ok, "reversed allgather: " + msg);
    expect_eq(out, want, "allgather over the reversed group");
  }
  std::vector<int> evens;
  for (int i = 0; i < c.n; i += 2) evens.push_back(i);
  if (c.rank % 2 == 0) {
    coll::session_transport tev(c.s, evens, tag_t{4} << 56);
    const int gn = tev.size(), gr = tev.rank();
    expect(gr == c.rank / 2, "even group rank");
    std::vector<std::int32_t> in(9000), out(9000), want(9000, 0);
    for (std::size_t i = 0; i < in.size(); ++i) {
      in[i] = val(gr, i, 31);
      for (int r = 0; r < gn; ++r) want[i] += val(r, i, 31);
    }
    std::string msg;
    errc e = coll::run(coll::build_allreduce(gr, gn, in.data(), out.data(), in.size(), 4, sum), tev, tev.next_sequence(), &msg);
    expect(e == errc::ok, "even allreduce: " + msg);
    expect_eq(out, want, "allreduce over the even ranks");
  }
  c.run(coll::build_barrier(c.rank, c.n), "final barrier");
}

// Bad arguments are refused with clear exceptions (no communication).
void errors(ctx& c) {
  auto throws = [&](const std::function<void()>& f, const std::string& what) {
    bool t = false;
    try {
      f();
    } catch (const std::invalid_argument& e) {
      t = std::string(e.what()).find("coll::") != std::string::npos;
    }
    expect(t, what + " must throw std::invalid_argument naming coll::");
  };
  int x = 0;
  throws([&] { (void)coll::build_bcast(c.rank, c.n, &x, 4, c.n); }, "bcast root out of range");
  throws([&] { (void)coll::build_barrier(c.n, c.n); }, "rank out of range");
  throws([&] { (void)coll::build_bcast(c.rank, c.n, &x, 4, 0, algorithm::ring); }, "bcast with ring");
  throws([&] { coll::session_transport t(c.s, tag_t{1}); }, "base tag with low bits");
  throws([&] { coll::session_transport t(c.s, std::vector<int>{c.n}, tag_t{1} << 63); }, "group outside the session");
  std::vector<std::size_t> shortv(0);
  throws([&] { (void)coll::build_allgatherv(c.rank, c.n, &x, 4, &x, shortv, shortv); }, "allgatherv short arrays");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: coll_worker FAMILY\n");
    return 2;
  }
  const std::string family = argv[1];
  try {
    auto s = session::create();
    g_rank = s->rank();
    coll::session_transport tr(*s, tag_t{1} << 63);
    ctx c{*s, tr, s->rank(), s->size()};
    if (family == "barrier") barrier(c);
    else if (family == "bcast") bcast(c);
    else if (family == "reduce") reduce(c);
    else if (family == "allreduce") allreduce(c);
    else if (family == "gather") gather(c);
    else if (family == "scatter") scatter(c);
    else if (family == "allgather") allgather(c);
    else if (family == "alltoall") alltoall(c);
    else if (family == "reduce_scatter") reduce_scatter(c);
    else if (family == "scan") scan(c);
    else if (family == "noncommutative") noncommutative(c);
    else if (family == "concurrent") concurrent(c);
    else if (family == "groups") groups(c);
    else if (family == "background") background(c);
    else if (family == "errors") errors(c);
    else {
      std::fprintf(stderr, "coll_worker: unknown family '%s'\n", family.c_str());
      return 2;
    }
    // Nobody leaves (closing connections) while others still need it.
    c.run(coll::build_barrier(c.rank, c.n), "exit barrier");
    std::printf("coll_worker rank %d: %s ok (%ld checks)\n", g_rank, family.c_str(), g_checks);
    std::fflush(stdout);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "coll_worker rank %d: %s\n", g_rank, e.what());
    return 1;
  }
}
