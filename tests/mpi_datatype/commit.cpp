// Committed types used at scale and from several threads: huge counts stay
// in tree form (commit in O(1), exact sizes and extents, a prefix packed
// from a small buffer), concurrent commits and first uses agree, and a
// committed type is shared read-only by threads packing with it.
#include <doctest/doctest.h>

#include <climits>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <thread>
#include <vector>

#include "tests/mpi_datatype/datatype_helpers.hpp"

using namespace nmad_test::datatype;

TEST_CASE("committed types are shareable read-only across threads") {
  Datatype v = Datatype::vector(64, 3, 5, T(BasicType::Int));
  v.commit();
  std::vector<int> src(64 * 5 * 4);
  std::iota(src.begin(), src.end(), 0);
  const std::vector<int> expect = pack_all<int>(v, src.data(), 4);
  std::vector<std::thread> ts;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&, t] {
      bool good = true;
      for (int rep = 0; rep < 50; ++rep) {
        std::vector<int> out(expect.size());
        Count pos = 0;
        v.pack(src.data(), 4, out.data(), static_cast<Count>(out.size() * sizeof(int)), pos);
        good = good && out == expect;
      }
      ok[t] = good;
    });
  }
  for (auto& t : ts) t.join();
  CHECK(ok == std::vector<int>(4, 1));
}

TEST_CASE("huge counts: commit is O(1), sizes and extents exact, packing a prefix works") {
  const Datatype i32 = T(BasicType::Int);
  const Count n = INT_MAX / 2;
  Datatype v = Datatype::vector(n, 1, 2, i32);
  v.commit();  // would need n blocks if flattened
  CHECK(v.size() == n * 4);
  CHECK(v.lb() == 0);
  CHECK(v.extent() == (2 * n - 1) * 4);
  CHECK(v.true_lb() == 0);
  CHECK(v.true_extent() == (2 * n - 1) * 4);
  CHECK(!v.is_contiguous());
  CHECK(v.get_elements(v.size()) == n);
  CHECK(v.get_elements(4 * 1000 + 2) == std::nullopt);
  CHECK_THROWS_AS(v.blocks(), DatatypeError);
  CHECK(v.uniform_basic_type() == BasicType::Int);

  Datatype hv = Datatype::hvector(n, 3, -40, T(BasicType::Double));
  hv.commit();
  CHECK(hv.size() == n * 24);
  CHECK(hv.lb() == -40 * (n - 1));
  CHECK(hv.extent() == 40 * (n - 1) + 24);

  // vector(n, 1, 1) is contiguous: it stays flat, one block
  Datatype dense = Datatype::vector(n, 1, 1, i32);
  dense.commit();
  CHECK(dense.is_contiguous());
  CHECK(dense.blocks().size() == 1);

  const int disp[] = {0, 3};
  Datatype ib = Datatype::indexed_block(2, disp, v);
  ib.commit();
  CHECK(ib.size() == 4 * n * 4);
  CHECK(ib.extent() == 5 * v.extent());

  // the first bytes of the packed image, from a small buffer that holds them
  std::vector<int> mem(64);
  std::iota(mem.begin(), mem.end(), 0);
  std::vector<int> out(8, -1);
  v.pack_range(mem.data(), 1, 0, 32, out.data());
  CHECK(out == std::vector<int>{0, 2, 4, 6, 8, 10, 12, 14});
  v.pack_range(mem.data(), 1, 12, 8, out.data());  // elements 3 and 4 of the packed image
  CHECK(out[0] == 6);
  CHECK(out[1] == 8);
  std::vector<int> back(64, -1);
  const int in[] = {100, 101, 102};
  v.unpack_range(in, 8, 12, back.data(), 1);  // packed elements 2..4
  CHECK(back[4] == 100);
  CHECK(back[6] == 101);
  CHECK(back[8] == 102);
  CHECK(back[5] == -1);
  // the memory blocks of a fragment in the middle of a count-3 message
  std::vector<std::ptrdiff_t> offs;
  ib.for_each_block_range(static_cast<const void*>(nullptr), 3, 4 * n * 4 + 8, 12,
                          [&](const void* p, std::size_t len) {
                            CHECK(len == 4);
                            offs.push_back(reinterpret_cast<std::intptr_t>(p));
                          });
  // element 1 starts at one extent; its first block (displacement 0, copy 0)
  // holds v at 0: bytes 8..20 of it are ints 2, 3, 4 of v, at 16, 24, 32
  CHECK(offs == std::vector<std::ptrdiff_t>{ib.extent() + 16, ib.extent() + 24, ib.extent() + 32});
  Count pos = 0;
  unsigned char none[1];
  v.pack(mem.data(), 0, none, 0, pos);
  CHECK(pos == 0);
}

TEST_CASE("concurrent commit and first use are race-free") {
  for (int rep = 0; rep < 20; ++rep) {
    const int disp[] = {7, 0, 3};
    Datatype t = Datatype::indexed_block(2, disp, Datatype::vector(3, 1, 2, T(BasicType::Double)));
    std::vector<std::thread> ts;
    std::vector<Count> blocks(4), elems(4);
    for (int k = 0; k < 4; ++k) {
      ts.emplace_back([&, k] {
        if (k % 2 == 0) t.commit();
        elems[k] = *t.get_elements(t.size());  // builds the flat form on first use
        if (k % 2 == 0) blocks[k] = t.block_count(1);
      });
    }
    for (auto& th : ts) th.join();
    CHECK(elems == std::vector<Count>(4, 18));
    CHECK(blocks[0] == blocks[2]);
    CHECK(blocks[0] == static_cast<Count>(t.blocks().size()));
  }
}
