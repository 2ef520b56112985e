// The array-distribution constructors: create_subarray in C and Fortran
// order, and create_darray checked against every rank's elements by the HPF
// distribution rules (block, cyclic, none), its bounds, a large cyclic
// distribution built in O(ndims), and its argument errors.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "tests/mpi_datatype/datatype_helpers.hpp"

using namespace nmad_test::datatype;

TEST_CASE("create_subarray in C and Fortran order") {
  // 4 x 5 int matrix (C order), the 2 x 3 block starting at (1, 1)
  const int sizes[] = {4, 5}, subsizes[] = {2, 3}, starts[] = {1, 1};
  Datatype s = Datatype::create_subarray(sizes, subsizes, starts, Datatype::Order::C, T(BasicType::Int));
  s.commit();
  CHECK(s.size() == 24);
  CHECK(s.lb() == 0);
  CHECK(s.extent() == 80);
  CHECK(s.true_lb() == 24);
  CHECK(s.true_extent() == 32);
  CHECK(s.combiner() == Combiner::Subarray);
  CHECK(s.contents().ints == std::vector<Count>{2, 4, 5, 2, 3, 1, 1, 0});
  CHECK(block_list(s) == BL{{24, 12}, {44, 12}});
  int m[2][4][5];
  std::iota(&m[0][0][0], &m[0][0][0] + 40, 0);
  // two matrices back to back: the second subarray is one extent later
  CHECK(pack_all<int>(s, m, 2) ==
        std::vector<int>{6, 7, 8, 11, 12, 13, 26, 27, 28, 31, 32, 33});

  // Fortran order: first index fastest; 3-D, 2 x 3 x 2 sub-box of 4 x 3 x 2
  const int fs[] = {4, 3, 2}, fsub[] = {2, 3, 1}, fst[] = {2, 0, 1};
  Datatype f = Datatype::create_subarray(fs, fsub, fst, Datatype::Order::Fortran, T(BasicType::Double));
  f.commit();
  CHECK(f.size() == 6 * 8);
  CHECK(f.extent() == 24 * 8);
  double a[24];  // a(i,j,k) = a[i + 4 j + 12 k]
  std::iota(a, a + 24, 0.0);
  CHECK(pack_all<double>(f, a, 1) == std::vector<double>{14, 15, 18, 19, 22, 23});

  const int bad_start[] = {3, 1};
  CHECK_THROWS_AS(Datatype::create_subarray(sizes, subsizes, bad_start, Datatype::Order::C, T(BasicType::Int)),
                  DatatypeError);
  const int zero_sub[] = {0, 3};
  Datatype z = Datatype::create_subarray(sizes, zero_sub, starts, Datatype::Order::C, T(BasicType::Int));
  CHECK(z.size() == 0);
  CHECK(z.extent() == 80);
}

namespace {
using Dist = Datatype::Distribution;
struct DarrayCase {
  std::vector<int> gsizes;
  std::vector<Dist> distribs;
  std::vector<int> dargs, psizes;
  Datatype::Order order;
};

// The owner coordinate of global index i along one dimension (HPF rules).
int owner(int i, int g, Dist d, int darg, int p) {
  switch (d) {
    case Dist::None: return 0;
    case Dist::Block: return i / (darg == Datatype::kDefaultDarg ? (g + p - 1) / p : darg);
    case Dist::Cyclic: return (i / (darg == Datatype::kDefaultDarg ? 1 : darg)) % p;
  }
  return -1;
}

// Linear (memory) indices of the elements `rank` owns, in increasing order.
std::vector<int> owned(const DarrayCase& c, int rank) {
  const int nd = static_cast<int>(c.gsizes.size());
  std::vector<int> coord(nd);
  for (int r = rank, d = nd - 1; d >= 0; --d) coord[d] = r % c.psizes[d], r /= c.psizes[d];
  int total = 1;
  for (int g : c.gsizes) total *= g;
  std::vector<int> out;
  for (int lin = 0; lin < total; ++lin) {
    // indices of lin: C order -> last dimension fastest; Fortran -> first
    int rest = lin;
    bool mine = true;
    for (int k = 0; k < nd; ++k) {
      const int d = c.order == Datatype::Order::C ? nd - 1 - k : k;
      const int i = rest % c.gsizes[d];
      rest /= c.gsizes[d];
      if (owner(i, c.gsizes[d], c.distribs[d], c.dargs[d], c.psizes[d]) != coord[d]) mine = false;
    }
    if (mine) out.push_back(lin);
  }
  return out;
}
}  // namespace

TEST_CASE("darray: every rank's elements by HPF rules, in address order; lb 0, extent the array") {
  const int D = Datatype::kDefaultDarg;
  const std::vector<DarrayCase> cases = {
      {{8, 6}, {Dist::Block, Dist::Block}, {D, D}, {2, 3}, Datatype::Order::C},
      {{8, 6}, {Dist::Block, Dist::Block}, {D, D}, {2, 3}, Datatype::Order::Fortran},
      {{7, 5}, {Dist::Cyclic, Dist::Cyclic}, {2, D}, {3, 2}, Datatype::Order::C},
      {{7, 5}, {Dist::Cyclic, Dist::Block}, {2, 3}, {3, 2}, Datatype::Order::Fortran},
      {{10, 3}, {Dist::Cyclic, Dist::None}, {3, D}, {4, 1}, Datatype::Order::C},
      {{5, 4, 6}, {Dist::Block, Dist::Cyclic, Dist::Cyclic}, {D, 1, 4}, {2, 2, 2}, Datatype::Order::C},
      {{5, 4, 6}, {Dist::Cyclic, Dist::None, Dist::Block}, {2, D, 4}, {3, 1, 2}, Datatype::Order::Fortran},
      {{9}, {Dist::Block}, {2}, {5}, Datatype::Order::C},  // the last ranks own 1 and 0 elements
      {{3}, {Dist::Cyclic}, {2}, {4}, Datatype::Order::C},  // ranks 2, 3 own nothing
  };
  for (std::size_t ci = 0; ci < cases.size(); ++ci) {
    const DarrayCase& c = cases[ci];
    CAPTURE(ci);
    int size = 1, total = 1;
    for (int p : c.psizes) size *= p;
    for (int g : c.gsizes) total *= g;
    std::vector<int> array(static_cast<std::size_t>(total));
    std::iota(array.begin(), array.end(), 0);
    std::vector<int> seen(static_cast<std::size_t>(total), 0);
    for (int rank = 0; rank < size; ++rank) {
      CAPTURE(rank);
      Datatype t = Datatype::create_darray(size, rank, c.gsizes, c.distribs, c.dargs, c.psizes, c.order,
                                           T(BasicType::Int));
      t.commit();
      CHECK(t.lb() == 0);
      CHECK(t.extent() == static_cast<Aint>(total) * 4);
      CHECK(t.combiner() == Combiner::Darray);
      const std::vector<int> want = owned(c, rank);
      CHECK(t.size() == static_cast<Count>(want.size()) * 4);
      const std::vector<int> got = pack_all<int>(t, array.data(), 1);
      CHECK(got == want);
      for (int i : got) seen[static_cast<std::size_t>(i)]++;
      // count 2: the second element is the next whole array
      std::vector<int> two(static_cast<std::size_t>(2 * total));
      std::iota(two.begin(), two.end(), 0);
      const std::vector<int> got2 = pack_all<int>(t, two.data(), 2);
      REQUIRE(got2.size() == 2 * want.size());
      for (std::size_t k = 0; k < want.size(); ++k) CHECK(got2[want.size() + k] == want[k] + total);
    }
    CHECK(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));  // a partition
  }
}

TEST_CASE("darray: a large cyclic distribution costs O(ndims); argument errors") {
  const int gs[] = {1 << 30, 4};
  const Dist ds[] = {Dist::Cyclic, Dist::Block};
  const int da[] = {1, Datatype::kDefaultDarg}, ps[] = {4, 2};
  Datatype t = Datatype::create_darray(8, 5, gs, ds, da, ps, Datatype::Order::C, T(BasicType::Char));
  t.commit();
  CHECK(t.size() == (Count{1} << 28) * 2);
  CHECK(t.extent() == (Aint{1} << 32));

  const int g1[] = {10}, p2[] = {2}, p1[] = {1}, d3[] = {3}, dd[] = {Datatype::kDefaultDarg};
  const Dist block[] = {Dist::Block}, none[] = {Dist::None};
  const Datatype i32 = T(BasicType::Int);
  // blocks of 3 on 2 processes cannot hold 10
  CHECK_THROWS_AS(Datatype::create_darray(2, 0, g1, block, d3, p2, Datatype::Order::C, i32), DatatypeError);
  // NONE over 2 processes
  CHECK_THROWS_AS(Datatype::create_darray(2, 0, g1, none, dd, p2, Datatype::Order::C, i32), DatatypeError);
  // grid of 1 process for size 2; rank out of range
  CHECK_THROWS_AS(Datatype::create_darray(2, 0, g1, block, dd, p1, Datatype::Order::C, i32), DatatypeError);
  CHECK_THROWS_AS(Datatype::create_darray(2, 2, g1, block, dd, p2, Datatype::Order::C, i32), DatatypeError);
}
