// Collective schedules (//mpi_layer/coll).
//
// 1. Pure unit cases: select_algorithm() thresholds, schedule structure,
//    and an in-process SIMULATOR that executes the schedules of every rank
//    of a group (2..17 ranks) against each other with rendezvous semantics
//    (a send completes only when a matching receive is posted, matching in
//    posting order per (source, destination, tag)), checking data results
//    exactly and detecting deadlocks and unmatched messages.
// 2. Multi-process cases: tests/workers/coll_worker.cpp started by nmad-run
//    with 1..5 processes over the real engine, one case per family.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "mpi_layer/coll/algorithms.hpp"
#include "mpi_layer/coll/hierarchy.hpp"
#include "tests/test_paths.hpp"

using namespace nmad::coll;

namespace {

// ---- simulator -----------------------------------------------------------------

struct sim_result {
  bool ok = true;
  std::string why;
};

// Runs one schedule per rank to completion, or reports a deadlock.
sim_result simulate(std::vector<schedule>& scheds) {
  const int n = static_cast<int>(scheds.size());
  struct posted {
    const step* st;
    int rank;
    bool* done;
  };
  using key = std::tuple<int, int, std::uint32_t>;  // src, dst, tag
  std::map<key, std::deque<posted>> sends, recvs;
  std::vector<std::size_t> round(n, 0);
  std::vector<bool> posted_round(n, false);
  std::vector<std::vector<char>> done(n);  // per comm step of the current round (char: bool* stays valid)
  sim_result res;
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < n; ++r) {
      const auto& rounds = scheds[r].rounds();
      while (round[r] < rounds.size()) {
        const auto& rd = rounds[round[r]];
        if (!posted_round[r]) {
          posted_round[r] = true;
          progress = true;
          done[r].assign(rd.comm.size(), 0);
          for (std::size_t i = 0; i < rd.comm.size(); ++i) {
            const step& s = rd.comm[i];
            if (s.peer < 0 || s.peer >= n || s.peer == r) return {false, "bad peer"};
            bool* d = reinterpret_cast<bool*>(&done[r][i]);
            if (s.k == step::kind::send) sends[{r, s.peer, s.tag}].push_back({&s, r, d});
            else recvs[{s.peer, r, s.tag}].push_back({&s, r, d});
          }
          // Match everything that can match now.
          for (auto& [k, sq] : sends) {
            auto& rq = recvs[k];
            while (!sq.empty() && !rq.empty()) {
              const posted a = sq.front(), b = rq.front();
              sq.pop_front();
              rq.pop_front();
              if (a.st->bytes > b.st->bytes) return {false, "truncation"};
              if (a.st->bytes != b.st->bytes) return {false, "size mismatch " + std::to_string(a.st->bytes) + " vs " + std::to_string(b.st->bytes)};
              if (a.st->bytes) std::memcpy(b.st->dst, a.st->src, a.st->bytes);
              *a.done = true;
              *b.done = true;
              progress = true;
            }
          }
        }
        bool all = true;
        for (char d : done[r]) all &= d != 0;
        if (!all) break;
        for (const step& s : rd.local) run_local_step(s);
        ++round[r];
        posted_round[r] = false;
        progress = true;
      }
    }
  }
  for (int r = 0; r < n; ++r)
    if (round[r] < scheds[r].rounds().size())
      return {false, "deadlock: rank " + std::to_string(r) + " stuck in round " + std::to_string(round[r]) + "\n" +
                         scheds[r].describe()};
  for (auto& [k, q] : sends)
    if (!q.empty()) return {false, "unmatched send"};
  for (auto& [k, q] : recvs)
    if (!q.empty()) return {false, "unmatched receive"};
  return res;
}

std::int32_t val(int r, std::size_t i) { return static_cast<std::int32_t>((r + 1) * 1000 + static_cast<int>(i % 997)); }

struct sum_i32 final : reducer {
  void apply(const void* in, void* inout, std::size_t n) override {
    auto a = static_cast<const std::int32_t*>(in);
    auto b = static_cast<std::int32_t*>(inout);
    for (std::size_t i = 0; i < n; ++i) b[i] += a[i];
  }
};
// "Concatenation" of rank ids as base-(n+1) digits mod 2^32: associative,
// not commutative; the result encodes the exact operand order.
struct concat final : reducer {
  std::uint32_t base = 0;
  void apply(const void* in, void* inout, std::size_t n) override {
    auto a = static_cast<const std::uint64_t*>(in);  // (value, base^len)
    auto b = static_cast<std::uint64_t*>(inout);
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint64_t av = a[2 * i], ap = a[2 * i + 1], bv = b[2 * i], bp = b[2 * i + 1];
      b[2 * i] = av * bp + bv;
      b[2 * i + 1] = ap * bp;
    }
  }
  bool commutative() const override { return false; }
};

using builder = std::function<schedule(int rank, int n, int root)>;

const std::vector<int> kSizes = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 17};

}  // namespace

// ---- selection ---------------------------------------------------------------------

TEST_CASE("select_algorithm: thresholds, one function") {
  tunables t;  // defaults
  CHECK(select_algorithm(collective::barrier, 2, 0, true, t) == algorithm::dissemination);
  CHECK(select_algorithm(collective::barrier, 3, 0, true, t) == algorithm::linear);
  CHECK(select_algorithm(collective::barrier, 8, 0, true, t) == algorithm::linear);
  CHECK(select_algorithm(collective::barrier, 9, 0, true, t) == algorithm::dissemination);
  CHECK(select_algorithm(collective::bcast, 8, 100, true, t) == algorithm::binomial);
  CHECK(select_algorithm(collective::bcast, 2, 1 << 20, true, t) == algorithm::binomial);
  CHECK(select_algorithm(collective::bcast, 8, t.bcast_small, true, t) == algorithm::scatter_allgather);
  CHECK(select_algorithm(collective::bcast, 8, t.bcast_large - 1, true, t) == algorithm::scatter_allgather);
  CHECK(select_algorithm(collective::bcast, 8, t.bcast_large, true, t) == algorithm::chain);
  CHECK(select_algorithm(collective::bcast, 4, 64 * 1024, true, t) == algorithm::binomial);  // < bcast_min_procs
  CHECK(select_algorithm(collective::bcast, 7, t.bcast_large - 1, true, t) == algorithm::binomial);
  CHECK(select_algorithm(collective::bcast, 4, t.bcast_large, true, t) == algorithm::chain);
  CHECK(select_algorithm(collective::reduce, 8, 1 << 20, false, t) == algorithm::binomial);
  CHECK(select_algorithm(collective::allreduce, 8, 64, true, t) == algorithm::recursive_doubling);
  CHECK(select_algorithm(collective::allreduce, 8, t.allreduce_small, true, t) == algorithm::rabenseifner);
  CHECK(select_algorithm(collective::allreduce, 8, 1 << 20, false, t) == algorithm::recursive_doubling);
  CHECK(select_algorithm(collective::allreduce, 2, t.allreduce_pair_large - 1, true, t) ==
        algorithm::recursive_doubling);
  CHECK(select_algorithm(collective::allreduce, 2, t.allreduce_pair_large, true, t) == algorithm::rabenseifner);
  CHECK(select_algorithm(collective::allreduce, 2, t.allreduce_pair_large, false, t) ==
        algorithm::recursive_doubling);
  CHECK(select_algorithm(collective::gather, 4, 1000, true, t) == algorithm::binomial);
  CHECK(select_algorithm(collective::gather, 4, t.gather_large, true, t) == algorithm::linear);
  CHECK(select_algorithm(collective::scatter, 4, 1000, true, t) == algorithm::binomial);
  CHECK(select_algorithm(collective::gatherv, 4, 10, true, t) == algorithm::linear);
  CHECK(select_algorithm(collective::scatterv, 4, 10, true, t) == algorithm::linear);
  CHECK(select_algorithm(collective::allgather, 8, 1000, true, t) == algorithm::recursive_doubling);
  CHECK(select_algorithm(collective::allgather, 6, 1000, true, t) == algorithm::bruck);
  CHECK(select_algorithm(collective::allgather, 8, t.allgather_small, true, t) == algorithm::ring);
  CHECK(select_algorithm(collective::allgatherv, 8, 10, true, t) == algorithm::ring);
  CHECK(select_algorithm(collective::alltoall, 8, t.alltoall_small, true, t) == algorithm::linear);
  CHECK(select_algorithm(collective::alltoall, 8, t.alltoall_bruck, true, t) == algorithm::bruck);
  CHECK(select_algorithm(collective::alltoall, 7, t.alltoall_bruck, true, t) == algorithm::linear);
  CHECK(select_algorithm(collective::alltoallv, 8, 8, true, t) == algorithm::linear);
  CHECK(select_algorithm(collective::alltoall, 8, t.alltoall_small + 1, true, t) == algorithm::pairwise);
  CHECK(select_algorithm(collective::reduce_scatter, 8, 1 << 20, true, t) == algorithm::pairwise);
  CHECK(select_algorithm(collective::reduce_scatter, 8, 1 << 20, false, t) == algorithm::reduce_scatterv);
  CHECK(select_algorithm(collective::reduce_scatter_block, 8, 100, true, t) == algorithm::reduce_scatterv);
  CHECK(select_algorithm(collective::scan, 8, 100, false, t) == algorithm::recursive_doubling);
  CHECK(select_algorithm(collective::exscan, 8, t.scan_large, false, t) == algorithm::chain);
}

TEST_CASE("select_algorithm: tunables change the choice; never automatic") {
  tunables t;
  t.bcast_small = 10;
  t.bcast_large = 100;
  t.bcast_min_procs = 0;
  CHECK(select_algorithm(collective::bcast, 4, 50, true, t) == algorithm::scatter_allgather);
  CHECK(select_algorithm(collective::bcast, 4, 100, true, t) == algorithm::chain);
  for (int c = 0; c <= static_cast<int>(collective::exscan); ++c)
    for (int n : {1, 2, 3, 8, 100})
      for (std::size_t b : {std::size_t{0}, std::size_t{100}, std::size_t{1} << 30})
        for (bool comm : {true, false})
          CHECK(select_algorithm(static_cast<collective>(c), n, b, comm) != algorithm::automatic);
}

// ---- schedule structure -------------------------------------------------------------

TEST_CASE("schedule: rounds, local steps after communication, tags, describe") {
  schedule s;
  int a = 0, b = 0;
  s.send(1, 0, &a, 4);
  s.recv(1, 0, &b, 4);
  s.copy(&b, &a, 4);
  CHECK_THROWS_AS(s.send(1, 1, &a, 4), std::logic_error);  // local step already in this round
  s.new_round();
  s.new_round();  // no empty rounds
  s.copy(&a, &b, 4);
  s.copy(&a, &a, 4);  // no-op
  CHECK(s.rounds().size() == 2);
  CHECK(s.rounds()[0].comm.size() == 2);
  CHECK(s.rounds()[0].local.size() == 1);
  CHECK(s.rounds()[1].local.size() == 1);
  CHECK(s.max_comm_per_round() == 2);
  CHECK(s.describe().find("round 1") != std::string::npos);
  CHECK(schedule::make_tag(2, 5) == ((2u << schedule::tag_step_bits) | 5u));
  CHECK(schedule::make_tag(1, (std::size_t{1} << schedule::tag_step_bits) + 3) == ((1u << schedule::tag_step_bits) | 3u));
  std::byte* t = s.temp(100);
  CHECK(t != nullptr);
  CHECK(s.temp_bytes() == 100);
}

TEST_CASE("schedule shapes: dissemination barrier is ceil(log2 n) rounds, linear 2 at rank 0 and 1 elsewhere; n = 1 "
          "needs no communication") {
  for (int n : {1, 2, 3, 4, 5, 8, 9, 16, 17}) {
    int lg = 0;
    while ((1 << lg) < n) ++lg;
    for (int r = 0; r < n; ++r)
      CHECK(build_barrier(r, n, algorithm::dissemination).rounds().size() == static_cast<std::size_t>(lg));
    for (int r = 0; r < n; ++r) {
      const schedule s = build_barrier(r, n, algorithm::linear);
      CHECK(s.rounds().size() == (n == 1 ? 0u : r == 0 ? 2u : 1u));
      if (n > 1 && r == 0) CHECK(s.rounds()[0].comm.size() == static_cast<std::size_t>(n - 1));
      if (n > 1 && r != 0) CHECK(s.rounds()[0].comm.size() == 2u);
    }
  }
  int x = 0;
  sum_i32 sum;
  CHECK(build_bcast(0, 1, &x, 4, 0).rounds().empty());
  CHECK(build_allreduce(0, 1, &x, &x, 1, 4, sum).max_comm_per_round() == 0);
  CHECK(build_bcast(0, 4, &x, 0, 0).rounds().empty());  // zero bytes: nothing to do
}

// ---- simulated execution of every algorithm on 1..17 ranks -----------------------------

namespace {

void sim_check(const std::string& what, int n, const builder& build, const std::function<void(int)>& check, int root = 0) {
  std::vector<schedule> s;
  for (int r = 0; r < n; ++r) s.push_back(build(r, n, root));
  auto res = simulate(s);
  INFO(what << " n=" << n << " root=" << root << ": " << res.why);
  REQUIRE(res.ok);
  for (int r = 0; r < n; ++r) check(r);
}

}  // namespace

TEST_CASE("simulated: bcast (binomial, scatter_allgather, chain), every root") {
  for (algorithm a : {algorithm::binomial, algorithm::scatter_allgather, algorithm::chain})
    for (int n : kSizes)
      for (std::size_t count : {std::size_t{1}, std::size_t{3}, std::size_t{50000}})
        for (int root : {0, n / 2, n - 1}) {
          std::vector<std::vector<std::int32_t>> buf(n, std::vector<std::int32_t>(count, -1));
          for (std::size_t i = 0; i < count; ++i) buf[root][i] = val(root, i);
          sim_check(std::string(to_string(a)), n,
                    [&](int r, int nn, int rt) { return build_bcast(r, nn, buf[r].data(), count * 4, rt, a); },
                    [&](int r) { CHECK(buf[r] == buf[root]); }, root);
        }
}

TEST_CASE("reducer::apply_into keeps the operand order whichever buffer receives the result") {
  concat cat;
  cat.base = 10;
  // Operands (value, base^len): a = "12", b = "3"; a op b = "123".
  const std::uint64_t a[2] = {12, 100}, b[2] = {3, 10};
  for (int where = 0; where < 3; ++where) {
    std::uint64_t x[2] = {a[0], a[1]}, y[2] = {b[0], b[1]}, z[2] = {0, 0};
    std::uint64_t* out = where == 0 ? z : where == 1 ? x : y;
    cat.apply_into(x, y, out, 1, sizeof x);
    CHECK(out[0] == 123);
    CHECK(out[1] == 1000);
    if (where != 1) CHECK(x[0] == 12);
    if (where != 2) CHECK(y[0] == 3);
  }
}

TEST_CASE("simulated: reduce and allreduce, commutative and non-commutative order") {
  sum_i32 sum;
  for (int n : kSizes)
    for (std::size_t count : {std::size_t{1}, std::size_t{7}, std::size_t{1000}}) {
      std::vector<std::vector<std::int32_t>> in(n, std::vector<std::int32_t>(count)), out(n, std::vector<std::int32_t>(count, 0));
      std::vector<std::int32_t> want(count, 0);
      for (int r = 0; r < n; ++r)
        for (std::size_t i = 0; i < count; ++i) {
          in[r][i] = val(r, i);
          want[i] += val(r, i);
        }
      for (int root : {0, n - 1}) {
        for (auto& o : out) std::fill(o.begin(), o.end(), 0);
        sim_check("reduce", n, [&](int r, int nn, int rt) { return build_reduce(r, nn, in[r].data(), out[r].data(), count, 4, sum, rt); },
                  [&](int r) { if (r == root) CHECK(out[r] == want); }, root);
      }
      for (algorithm a : {algorithm::recursive_doubling, algorithm::rabenseifner}) {
        for (auto& o : out) std::fill(o.begin(), o.end(), 0);
        sim_check(std::string("allreduce ") + std::string(to_string(a)), n,
                  [&](int r, int nn, int) { return build_allreduce(r, nn, in[r].data(), out[r].data(), count, 4, sum, a); },
                  [&](int r) { CHECK(out[r] == want); });
      }
    }
  // Non-commutative: every rank's digit appears in rank order.
  concat cat;
  for (int n : kSizes) {
    const std::size_t count = 3;
    std::vector<std::vector<std::uint64_t>> in(n, std::vector<std::uint64_t>(2 * count)), out(n, std::vector<std::uint64_t>(2 * count));
    std::vector<std::uint64_t> want(2 * count);
    for (std::size_t i = 0; i < count; ++i) {
      std::uint64_t v = 0, p = 1;
      for (int r = 0; r < n; ++r) {
        in[r][2 * i] = static_cast<std::uint64_t>(r + 1 + i);
        in[r][2 * i + 1] = 100;
        v = v * 100 + static_cast<std::uint64_t>(r + 1 + i);
        p *= 100;
      }
      want[2 * i] = v;
      want[2 * i + 1] = p;
    }
    for (int root : {0, n / 2, n - 1})
      sim_check("reduce(concat)", n, [&](int r, int nn, int rt) { return build_reduce(r, nn, in[r].data(), out[r].data(), count, 16, cat, rt); },
                [&](int r) { if (r == root) CHECK(out[r] == want); }, root);
    sim_check("allreduce(concat)", n, [&](int r, int nn, int) { return build_allreduce(r, nn, in[r].data(), out[r].data(), count, 16, cat); },
              [&](int r) { CHECK(out[r] == want); });
    {  // reduce_scatter_block(concat): rank r's block of the rank-ordered product
      std::vector<std::vector<std::uint64_t>> rin(n, std::vector<std::uint64_t>(2 * count * n)),
          rout(n, std::vector<std::uint64_t>(2 * count));
      for (int r = 0; r < n; ++r)
        for (std::size_t j = 0; j < count * n; ++j) {
          rin[r][2 * j] = static_cast<std::uint64_t>(r + 1);
          rin[r][2 * j + 1] = 100;
        }
      std::uint64_t v = 0, p = 1;
      for (int r = 0; r < n; ++r) { v = v * 100 + static_cast<std::uint64_t>(r + 1); p *= 100; }
      sim_check("reduce_scatter_block(concat)", n,
                [&](int r, int nn, int) { return build_reduce_scatter_block(r, nn, rin[r].data(), rout[r].data(), count, 16, cat); },
                [&](int r) {
                  for (std::size_t i = 0; i < count; ++i) {
                    CHECK(rout[r][2 * i] == v);
                    CHECK(rout[r][2 * i + 1] == p);
                  }
                });
    }
    // scan / exscan
    for (algorithm a : {algorithm::recursive_doubling, algorithm::chain})
      for (bool ex : {false, true}) {
        for (auto& o : out) std::fill(o.begin(), o.end(), 7);
        sim_check("scan(concat)", n,
                  [&](int r, int nn, int) {
                    return ex ? build_exscan(r, nn, in[r].data(), out[r].data(), count, 16, cat, a)
                              : build_scan(r, nn, in[r].data(), out[r].data(), count, 16, cat, a);
                  },
                  [&](int r) {
                    const int last = ex ? r - 1 : r;
                    for (std::size_t i = 0; i < count; ++i) {
                      if (last < 0) { CHECK(out[r][2 * i] == 7); continue; }
                      std::uint64_t v = 0, p = 1;
                      for (int q = 0; q <= last; ++q) { v = v * 100 + static_cast<std::uint64_t>(q + 1 + i); p *= 100; }
                      CHECK(out[r][2 * i] == v);
                      CHECK(out[r][2 * i + 1] == p);
                    }
                  });
      }
  }
}

TEST_CASE("simulated: gather, scatter, allgather (all algorithms), every root") {
  for (int n : kSizes)
    for (std::size_t count : {std::size_t{1}, std::size_t{5}}) {
      std::vector<std::vector<std::int32_t>> in(n), out(n);
      std::vector<std::int32_t> all;
      for (int r = 0; r < n; ++r)
        for (std::size_t i = 0; i < count; ++i) all.push_back(val(r, i));
      for (int r = 0; r < n; ++r) in[r].assign(all.begin() + static_cast<long>(r * count), all.begin() + static_cast<long>((r + 1) * count));
      for (int root = 0; root < n; ++root) {
        for (algorithm a : {algorithm::binomial, algorithm::linear}) {
          for (int r = 0; r < n; ++r) out[r].assign(count * n, -1);
          sim_check("gather", n, [&](int r, int nn, int rt) { return build_gather(r, nn, in[r].data(), out[r].data(), count * 4, rt, a); },
                    [&](int r) { if (r == root) CHECK(out[r] == all); }, root);
          std::vector<std::vector<std::int32_t>> got(n, std::vector<std::int32_t>(count, -1));
          sim_check("scatter", n, [&](int r, int nn, int rt) { return build_scatter(r, nn, all.data(), got[r].data(), count * 4, rt, a); },
                    [&](int r) { CHECK(got[r] == in[r]); }, root);
        }
      }
      for (algorithm a : {algorithm::recursive_doubling, algorithm::bruck, algorithm::ring}) {
        for (int r = 0; r < n; ++r) out[r].assign(count * n, -1);
        sim_check(std::string("allgather ") + std::string(to_string(a)), n,
                  [&](int r, int nn, int) { return build_allgather(r, nn, in[r].data(), out[r].data(), count * 4, a); },
                  [&](int r) { CHECK(out[r] == all); });
      }
    }
}

TEST_CASE("simulated: alltoall, reduce_scatter (pairwise and reduce+scatterv)") {
  sum_i32 sum;
  for (int n : kSizes) {
    const std::size_t count = 3;
    std::vector<std::vector<std::int32_t>> in(n, std::vector<std::int32_t>(count * n)), out(n, std::vector<std::int32_t>(count * n));
    for (int r = 0; r < n; ++r)
      for (int p = 0; p < n; ++p)
        for (std::size_t i = 0; i < count; ++i) in[r][p * count + i] = val(r * 100 + p, i);
    for (algorithm a : {algorithm::linear, algorithm::pairwise, algorithm::bruck}) {
      sim_check("alltoall", n, [&](int r, int nn, int) { return build_alltoall(r, nn, in[r].data(), out[r].data(), count * 4, a); },
                [&](int r) {
                  for (int p = 0; p < n; ++p)
                    for (std::size_t i = 0; i < count; ++i) CHECK(out[r][p * count + i] == val(p * 100 + r, i));
                });
    }
    for (algorithm a : {algorithm::pairwise, algorithm::reduce_scatterv}) {
      std::vector<std::vector<std::int32_t>> res(n, std::vector<std::int32_t>(count, 0));
      sim_check("reduce_scatter_block", n,
                [&](int r, int nn, int) { return build_reduce_scatter_block(r, nn, in[r].data(), res[r].data(), count, 4, sum, a); },
                [&](int r) {
                  for (std::size_t i = 0; i < count; ++i) {
                    std::int32_t w = 0;
                    for (int q = 0; q < n; ++q) w += in[q][r * count + i];
                    CHECK(res[r][i] == w);
                  }
                });
    }
  }
}

namespace {
// A transport whose every operation fails to start (a dead peer): the
// executor must finish at once with that error, naming the peer.
struct failing_transport final : transport {
  int posts = 0;
  int rank() const override { return 0; }
  int size() const override { return 4; }
  errc isend(int, nmad::tag_t, const void*, std::size_t, nmad::request&) override { ++posts; return errc::peer_failed; }
  errc irecv(int, nmad::tag_t, void*, std::size_t, nmad::request&) override { ++posts; return errc::peer_failed; }
  bool test(nmad::request&) override { return true; }
};
}  // namespace

TEST_CASE("executor: a step that fails to start ends the schedule with a clear error, no hang") {
  failing_transport t;
  sum_i32 sum;
  std::vector<std::int32_t> in(10, 1), out(10, 0);
  executor ex(build_allreduce(0, 4, in.data(), out.data(), 10, 4, sum), t, 7);
  CHECK(ex.sequence() == 7);
  CHECK_FALSE(ex.done());
  CHECK(ex.advance());
  CHECK(ex.done());
  CHECK(ex.error() == errc::peer_failed);
  CHECK(ex.error_message().find("group rank 1") != std::string::npos);
  CHECK(t.posts == 1);  // nothing more was started after the failure
  CHECK(ex.advance());  // stays done
  std::string why;
  CHECK(run(build_barrier(0, 4), t, 8, &why) == errc::peer_failed);
  CHECK(why.find("failed to start") != std::string::npos);
  // An empty schedule is done from the start.
  executor empty(schedule{}, t, 9);
  CHECK(empty.done());
}

namespace {
// Posts succeed but nothing ever completes, except receives once cancelled:
// a peer that never joins the collective.
struct silent_transport final : transport {
  std::map<const nmad::request*, bool> cancelled;
  int rank() const override { return 0; }
  int size() const override { return 2; }
  errc isend(int, nmad::tag_t, const void*, std::size_t, nmad::request& r) override {
    cancelled[&r] = false;
    return errc::ok;
  }
  errc irecv(int, nmad::tag_t, void*, std::size_t, nmad::request& r) override {
    cancelled[&r] = false;
    return errc::ok;
  }
  bool test(nmad::request& r) override { return cancelled[&r]; }
  bool cancel(nmad::request& r) override { return cancelled[&r] = true; }
};
}  // namespace

TEST_CASE("schedule: call steps run in order after the round's communication; a throwing step fails it") {
  failing_transport t;  // never used: no communication
  std::vector<int> log;
  int src = 5, dst = 0;
  schedule s;
  s.copy(&src, &dst, sizeof src);
  s.call([&] { log.push_back(dst); });
  s.new_round();
  s.call([&] { log.push_back(2); });
  CHECK(s.describe().find("call()") != std::string::npos);
  CHECK(run(std::move(s), t, 1) == errc::ok);
  CHECK(log == std::vector<int>{5, 2});

  schedule bad;
  bad.call([] { throw std::runtime_error("unpack failed"); });
  bad.new_round();
  bad.call([&] { log.push_back(99); });
  std::string why;
  CHECK(run(std::move(bad), t, 2, &why) == errc::internal);
  CHECK(why.find("unpack failed") != std::string::npos);
  CHECK(log.size() == 2);  // the later round never ran
}

TEST_CASE("executor::abandon: cancels receives; an unfinished send keeps it pending") {
  silent_transport t;
  int a = 1, b = 0;
  {
    schedule s;
    s.recv(1, 0, &b, sizeof b);
    executor ex(std::move(s), t, 3);
    CHECK_FALSE(ex.advance());
    CHECK(ex.abandon());
    CHECK(ex.done());
    CHECK(ex.error() == errc::cancelled);
  }
  schedule s;
  s.send(1, 0, &a, sizeof a);
  s.recv(1, 0, &b, sizeof b);
  executor ex(std::move(s), t, 4);
  CHECK_FALSE(ex.advance());
  CHECK_FALSE(ex.abandon());  // the send cannot be withdrawn
  CHECK_FALSE(ex.done());     // (MPI_Finalize keeps such an executor forever)
  for (auto& [req, done] : t.cancelled) done = true;  // the send drains after all
  CHECK(ex.advance());
  CHECK(ex.error() == errc::cancelled);
}

TEST_CASE("bad arguments are refused with std::invalid_argument") {
  int x = 0;
  sum_i32 sum;
  concat cat;
  CHECK_THROWS_AS(build_bcast(0, 4, &x, 4, 4), std::invalid_argument);
  CHECK_THROWS_AS(build_bcast(4, 4, &x, 4, 0), std::invalid_argument);
  CHECK_THROWS_AS(build_allreduce(0, 4, &x, &x, 1, 4, cat, algorithm::rabenseifner), std::invalid_argument);
  CHECK_THROWS_AS(build_reduce(0, 4, &x, &x, 1, 4, sum, 0, algorithm::ring), std::invalid_argument);
  std::vector<std::size_t> v(2);
  CHECK_THROWS_AS(build_allgatherv(0, 4, &x, 4, &x, v, v), std::invalid_argument);
}

// ---- multi-process, over the real engine ---------------------------------------------------

namespace {

int count_of(const std::string& hay, const std::string& needle) {
  int n = 0;
  for (auto p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

void run_family(const std::string& family, std::vector<std::pair<std::string, std::string>> env = {},
                std::vector<int> nprocs = {1, 2, 3, 4, 5}) {
  for (int n : nprocs) {
    const double timeout = 200;
    std::vector<std::string> argv = {nmad_test::runfile("tools/nmad-run"), "-n", std::to_string(n), "--timeout",
                                     std::to_string(static_cast<int>(timeout)),
                                     nmad_test::runfile("tests/workers/coll_worker"), family};
    nmad_test::run_options o;
    o.timeout_s = timeout + 30;
    o.env = env;
    auto r = nmad_test::run(argv, o);
    INFO(family << " with " << n << " processes (" << r.seconds << " s)\nstdout:\n" << r.out << "\nstderr:\n" << r.err);
    CHECK(r.status == 0);
    CHECK(count_of(r.out, ": " + family + " ok") == n);
  }
}

}  // namespace

TEST_CASE("processes: barrier (linear, dissemination) waits for the last rank") { run_family("barrier"); }
TEST_CASE("processes: bcast, every algorithm and root, 0 B .. 280 KB") {
  run_family("bcast", {{"NMAD_COLL_CHAIN_SEGMENT", "16384"}});
}
TEST_CASE("processes: reduce (sum, max, double sum), every root, in place") { run_family("reduce"); }
TEST_CASE("processes: allreduce (recursive doubling, Rabenseifner), in place") { run_family("allreduce"); }
TEST_CASE("processes: gather and gatherv (binomial, linear), in place") { run_family("gather"); }
TEST_CASE("processes: scatter and scatterv (binomial, linear), in place") { run_family("scatter"); }
TEST_CASE("processes: allgather (recursive doubling, Bruck, ring) and allgatherv") { run_family("allgather"); }
TEST_CASE("processes: alltoall and alltoallv (linear, pairwise), in place") { run_family("alltoall"); }
TEST_CASE("processes: reduce_scatter and reduce_scatter_block") { run_family("reduce_scatter"); }
TEST_CASE("processes: scan and exscan (recursive doubling, chain)") { run_family("scan"); }
TEST_CASE("processes: non-commutative reductions keep rank order") { run_family("noncommutative"); }
TEST_CASE("processes: concurrent non-blocking schedules never cross-match; threaded advance") {
  run_family("concurrent");
}
TEST_CASE("processes: non-blocking schedules advanced only by engine progress (progress_hook)") {
  run_family("background");
}
TEST_CASE("processes: sub-groups and reordered groups (rank translation, base tags)") { run_family("groups"); }
TEST_CASE("processes: bad arguments are refused before any communication") { run_family("errors", {}, {1, 3}); }
TEST_CASE("processes: everything rendezvous (threshold 64 B), 3 and 4 processes") {
  for (const char* f : {"bcast", "allreduce", "gather", "alltoall", "scan", "concurrent"})
    run_family(f, {{"NMAD_RDV_THRESHOLD", "64"}, {"NMAD_COLL_CHAIN_SEGMENT", "4096"}}, {3, 4});
}
TEST_CASE("processes: another strategy (aggreg) and another driver (shm)") {
  for (const char* f : {"allreduce", "alltoall", "concurrent", "background"}) {
    run_family(f, {{"NMAD_STRATEGY", "aggreg"}}, {4});
    run_family(f, {{"NMAD_DRIVER", "shm"}}, {4});
  }
}

// ---- hierarchical collectives ------------------------------------------------

namespace {
// Hierarchies of n ranks: hosts of consecutive ranks, hosts dealt round
// robin (parts that are not rank ranges), two levels (host, then NUMA node
// inside it), uneven random parts, and one host holding everyone.
std::vector<std::pair<std::string, hierarchy>> sample_hierarchies(int n) {
  std::vector<std::pair<std::string, hierarchy>> out;
  std::vector<int> block(n), rr(n), numa(n), rnd(n), rnd2(n), one(n, 7);
  std::uint32_t x = 12345u + static_cast<std::uint32_t>(n);
  for (int r = 0; r < n; ++r) {
    block[r] = r / 3;
    rr[r] = r % 3;
    numa[r] = (r / 2) % 2;
    x = x * 1103515245u + 12345u;
    rnd[r] = static_cast<int>((x >> 16) % 4);
    rnd2[r] = static_cast<int>((x >> 8) % 3);
  }
  out.emplace_back("hosts of 3 consecutive ranks", hierarchy(n, {block}));
  out.emplace_back("3 hosts round robin", hierarchy(n, {rr}));
  out.emplace_back("hosts of 3, NUMA pairs", hierarchy(n, {block, numa}));
  out.emplace_back("round robin hosts, NUMA pairs", hierarchy(n, {rr, numa}));
  out.emplace_back("random hosts, random NUMA", hierarchy(n, {rnd, rnd2}));
  out.emplace_back("one host", hierarchy(n, {one}));
  out.emplace_back("no levels", hierarchy(n, {}));
  return out;
}
}  // namespace

TEST_CASE("hierarchy: parts, leaders' sub-groups, splits()") {
  const hierarchy h(5, {{0, 0, 1, 1, 1}, {0, 1, 0, 0, 1}});
  CHECK(h.levels() == 2);
  CHECK(h.part(0, 3) == std::vector<int>{0, 1, 2, 3, 4});
  CHECK(h.part(1, 3) == std::vector<int>{2, 3, 4});
  CHECK(h.part(2, 3) == std::vector<int>{2, 3});
  CHECK(h.part(2, 4) == std::vector<int>{4});
  CHECK(h.splits());
  CHECK_FALSE(hierarchy(3, {{5, 5, 5}}).splits());     // one part: flat
  CHECK_FALSE(hierarchy(3, {{0, 1, 2}}).splits());     // one rank per part: flat
  CHECK_THROWS_AS(hierarchy(2, {{0, 1}, {0}}), std::invalid_argument);
  sum_i32 sum;
  concat cat;
  int x = 0;
  CHECK_THROWS_AS(build_hier_allreduce(h, 0, &x, &x, 1, 4, cat), std::invalid_argument);
  CHECK_THROWS_AS(build_hier_reduce(h, 0, &x, &x, 1, 4, cat, 0), std::invalid_argument);
  CHECK_THROWS_AS(build_hier_bcast(h, 5, &x, 4, 0), std::invalid_argument);
  CHECK_THROWS_AS(build_hier_bcast(h, 0, &x, 4, 5), std::invalid_argument);
  (void)sum;
}

TEST_CASE("choose_levels: hosts, packages, NUMA nodes kept only where they divide the group") {
  // 2 hosts x 2 packages x 2 NUMA nodes, 2 ranks per NUMA node (16 ranks):
  // every level divides. Package and NUMA labels repeat on both hosts.
  std::vector<int> host(16), pack(16), numa(16);
  for (int r = 0; r < 16; ++r) host[r] = r / 8, pack[r] = (r / 4) % 2, numa[r] = (r / 2) % 4;
  auto c = choose_levels(16, {host, pack, numa});
  CHECK(c.index == std::vector<int>{0, 1, 2});
  REQUIRE(c.keys.size() == 3);
  const hierarchy h(16, c.keys);
  CHECK(h.part(1, 9) == std::vector<int>{8, 9, 10, 11, 12, 13, 14, 15});
  CHECK(h.part(2, 9) == std::vector<int>{8, 9, 10, 11});  // not ranks 0-3, which share its package label
  CHECK(h.part(3, 9) == std::vector<int>{8, 9});
  CHECK(h.splits());
  // One rank per NUMA node: that level only separates single ranks.
  std::vector<int> h8(8), p8(8), n8(8);
  for (int r = 0; r < 8; ++r) h8[r] = r / 4, p8[r] = (r / 2) % 2, n8[r] = r % 4;
  CHECK(choose_levels(8, {h8, p8, n8}).index == std::vector<int>{0, 1});
  // One host (a single node with 2 packages x 2 NUMA, 2 ranks each).
  std::vector<int> one(8, 0), p1(8), n1(8);
  for (int r = 0; r < 8; ++r) p1[r] = r / 4, n1[r] = r / 2;
  c = choose_levels(8, {one, p1, n1});
  CHECK(c.index == std::vector<int>{1, 2});
  CHECK(hierarchy(8, c.keys).part(2, 5) == std::vector<int>{4, 5});
  // A rank bound to no single package (negative key) leaves that level out,
  // and the NUMA level too when it spans NUMA nodes.
  std::vector<int> p_span = p1, n_span = n1;
  p_span[3] = -1;
  n_span[3] = -1;
  CHECK(choose_levels(8, {one, p_span, n1}).index == std::vector<int>{2});
  CHECK(choose_levels(8, {one, p_span, n_span}).index.empty());
  // A package per host (package level divides nothing more), NUMA pairs.
  std::vector<int> hh(8), pp(8, 0), nn(8);
  for (int r = 0; r < 8; ++r) hh[r] = r / 4, nn[r] = (r / 2) % 2;
  CHECK(choose_levels(8, {hh, pp, nn}).index == std::vector<int>{0, 2});
  // Every rank on its own host: nothing to keep.
  CHECK(choose_levels(4, {{0, 1, 2, 3}, {0, 0, 0, 0}, {0, 0, 0, 0}}).index.empty());
  CHECK_THROWS_AS(choose_levels(4, {{0, 1, 2}}), std::invalid_argument);
}

TEST_CASE("simulated: hierarchical bcast, reduce, allreduce (in place too) and barrier on several hierarchies") {
  sum_i32 sum;
  for (int n : kSizes) {
    for (auto& [name, h] : sample_hierarchies(n)) {
      for (std::size_t count : {std::size_t{1}, std::size_t{7}, std::size_t{5000}}) {
        std::vector<std::vector<std::int32_t>> in(n, std::vector<std::int32_t>(count)),
            out(n, std::vector<std::int32_t>(count, 0));
        std::vector<std::int32_t> want(count, 0);
        for (int r = 0; r < n; ++r)
          for (std::size_t i = 0; i < count; ++i) {
            in[r][i] = val(r, i);
            want[i] += val(r, i);
          }
        const std::string what = name + ", count " + std::to_string(count);
        for (int root : {0, n / 2, n - 1}) {
          std::vector<std::vector<std::int32_t>> buf(n, std::vector<std::int32_t>(count, -1));
          for (std::size_t i = 0; i < count; ++i) buf[root][i] = val(root, i);
          sim_check("hier bcast, " + what, n,
                    [&](int r, int, int rt) { return build_hier_bcast(h, r, buf[r].data(), count * 4, rt); },
                    [&](int r) { CHECK(buf[r] == buf[root]); }, root);
          for (auto& o : out) std::fill(o.begin(), o.end(), 0);
          sim_check("hier reduce, " + what, n,
                    [&](int r, int, int rt) {
                      return build_hier_reduce(h, r, in[r].data(), out[r].data(), count, 4, sum, rt);
                    },
                    [&](int r) {
                      if (r == root) CHECK(out[r] == want);
                      else CHECK(out[r] == std::vector<std::int32_t>(count, 0));  // untouched
                      CHECK(in[r][0] == val(r, 0));
                    },
                    root);
          // In place at the root.
          std::vector<std::vector<std::int32_t>> io = in;
          sim_check("hier reduce in place, " + what, n,
                    [&](int r, int, int rt) {
                      return build_hier_reduce(h, r, r == rt ? nullptr : io[r].data(), io[r].data(), count, 4, sum,
                                               rt);
                    },
                    [&](int r) { if (r == root) CHECK(io[r] == want); }, root);
        }
        for (auto& o : out) std::fill(o.begin(), o.end(), 0);
        sim_check("hier allreduce, " + what, n,
                  [&](int r, int, int) { return build_hier_allreduce(h, r, in[r].data(), out[r].data(), count, 4, sum); },
                  [&](int r) {
                    CHECK(out[r] == want);
                    CHECK(in[r][count - 1] == val(r, count - 1));  // the input is never written
                  });
        std::vector<std::vector<std::int32_t>> io = in;
        sim_check("hier allreduce in place, " + what, n,
                  [&](int r, int, int) { return build_hier_allreduce(h, r, nullptr, io[r].data(), count, 4, sum); },
                  [&](int r) { CHECK(io[r] == want); });
      }
      sim_check("hier barrier, " + name, n, [&](int r, int, int) { return build_hier_barrier(h, r); }, [](int) {});
    }
  }
}

TEST_CASE("hierarchical schedules: one message per host pair level, sub-groups only") {
  // 8 ranks on 2 hosts of 4 (block): in a hierarchical bcast from 0 only
  // rank 0 sends to the other host (to its leader, rank 4); a flat binomial
  // tree crosses hosts from ranks 0..3.
  std::vector<int> host(8);
  for (int r = 0; r < 8; ++r) host[r] = r / 4;
  const hierarchy h(8, {host});
  std::vector<char> buf(100);
  int crossing = 0;
  for (int r = 0; r < 8; ++r) {
    const schedule s = build_hier_bcast(h, r, buf.data(), buf.size(), 0);
    for (const auto& rd : s.rounds())
      for (const auto& st : rd.comm)
        if (st.k == step::kind::send && host[st.peer] != host[r]) {
          ++crossing;
          CHECK(r == 0);
          CHECK(st.peer == 4);
        }
  }
  CHECK(crossing == 1);
}
