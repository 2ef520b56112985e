// Moving data with a committed type: block iteration (whole messages and
// fragments), pack/unpack with a position and too little room, packing and
// unpacking a message in pieces, absolute addresses from MPI_BOTTOM,
// counting elements of a partial message, and the element runs reductions
// walk.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <numeric>
#include <utility>
#include <vector>

#include "tests/mpi_datatype/datatype_helpers.hpp"

using namespace nmad_test::datatype;

TEST_CASE("for_each_block: order and merging across elements") {
  // element = [0,4) and [8,12), extent 12 -> neighbouring elements touch
  const int bl[] = {1, 1};
  const Aint disp[] = {0, 8};
  Datatype h = Datatype::hindexed(bl, disp, T(BasicType::Int));
  Datatype r = Datatype::create_resized(h, 0, 12);
  r.commit();
  int a[9] = {};
  const auto got = iter_blocks(r, a, 3);
  CHECK(got == std::vector<std::pair<std::ptrdiff_t, std::size_t>>{{0, 4}, {8, 8}, {20, 8}, {32, 4}});
  CHECK(r.block_count(3) == static_cast<Count>(got.size()));
  CHECK(r.block_count(0) == 0);

  // reversed order blocks are never merged (packing order matters)
  const Aint rdisp[] = {4, 0};
  Datatype rev = Datatype::hindexed(bl, rdisp, T(BasicType::Int));
  rev.commit();
  CHECK(iter_blocks(rev, a, 2) ==
        std::vector<std::pair<std::ptrdiff_t, std::size_t>>{{4, 4}, {0, 4}, {12, 4}, {8, 4}});
  CHECK(rev.block_count(2) == 4);

  // mutable overload gives writable pointers; gather == pack
  Datatype v = Datatype::vector(3, 2, 3, T(BasicType::Int));
  v.commit();
  int b[18];
  std::iota(b, b + 18, 0);
  std::vector<int> gathered;
  v.for_each_block(static_cast<void*>(b), 2, [&](void* p, std::size_t n) {
    const int* ip = static_cast<int*>(p);
    gathered.insert(gathered.end(), ip, ip + n / sizeof(int));
  });
  CHECK(gathered == pack_all<int>(v, b, 2));
  CHECK(iter_blocks(v, b, 2).size() == static_cast<std::size_t>(v.block_count(2)));

  // zero count / empty type: no callbacks
  CHECK(iter_blocks(v, b, 0).empty());
  Datatype empty = Datatype::contiguous(0, T(BasicType::Int));
  empty.commit();
  CHECK(iter_blocks(empty, b, 5).empty());
}

TEST_CASE("unpack_range / pack_range: message arriving in pieces") {
  // struct { char; vector(3,1,2,short) ; double } -> blocks cut mid-element
  Datatype sv = Datatype::vector(3, 1, 2, T(BasicType::Short));
  const int bl[] = {1, 1, 1};
  const Aint disp[] = {0, 2, 16};
  const Datatype types[] = {T(BasicType::Char), sv, T(BasicType::Double)};
  Datatype s = Datatype::create_struct(bl, disp, types);
  s.commit();
  CHECK(s.size() == 15);
  CHECK(s.extent() == 24);
  const Count n = 5;
  std::vector<unsigned char> src(24 * n);
  for (std::size_t k = 0; k < src.size(); ++k) src[k] = static_cast<unsigned char>(k * 7 + 1);
  std::vector<unsigned char> packed(static_cast<std::size_t>(s.packed_size(n)));
  Count pos = 0;
  s.pack(src.data(), n, packed.data(), static_cast<Count>(packed.size()), pos);

  std::vector<unsigned char> full(24 * n, 0);
  pos = 0;
  s.unpack(packed.data(), static_cast<Count>(packed.size()), pos, full.data(), n);

  for (Count piece : {1, 2, 3, 5, 7, 11, 16, 75}) {
    CAPTURE(piece);
    std::vector<unsigned char> dst(24 * n, 0);
    std::vector<unsigned char> repacked(packed.size(), 0);
    for (Count off = 0; off < static_cast<Count>(packed.size()); off += piece) {
      const Count len = std::min<Count>(piece, static_cast<Count>(packed.size()) - off);
      s.unpack_range(packed.data() + off, off, len, dst.data(), n);
      s.pack_range(src.data(), n, off, len, repacked.data() + off);
    }
    CHECK(dst == full);
    CHECK(repacked == packed);
  }
  // only bytes covered by the type were written
  for (Count e = 0; e < n; ++e) CHECK(full[static_cast<std::size_t>(24 * e + 1)] == 0);
  // out of range
  std::vector<unsigned char> dst(24 * n);
  CHECK_THROWS_AS(s.unpack_range(packed.data(), 70, 6, dst.data(), n), DatatypeError);
  CHECK_THROWS_AS(s.unpack_range(packed.data(), -1, 1, dst.data(), n), DatatypeError);
  s.unpack_range(packed.data(), 75, 0, dst.data(), n);  // empty piece at the end is fine
}

TEST_CASE("pack/unpack: position argument and insufficient space") {
  Datatype v = Datatype::vector(2, 1, 2, T(BasicType::Int));
  v.commit();
  const int a[4] = {1, 2, 3, 4};
  const double d = 2.5;
  unsigned char buf[32];
  Count pos = 0;
  v.pack(a, 1, buf, sizeof buf, pos);
  CHECK(pos == 8);
  T(BasicType::Double).pack(&d, 1, buf, sizeof buf, pos);
  CHECK(pos == 16);
  v.pack(a + 1, 1, buf, sizeof buf, pos);
  CHECK(pos == 24);
  // 8 bytes left, 16 needed: error and position untouched
  try {
    v.pack(a, 2, buf, sizeof buf, pos);
    FAIL("expected buffer_too_small");
  } catch (const DatatypeError& e) {
    CHECK(e.code() == DatatypeErrc::buffer_too_small);
  }
  CHECK(pos == 24);
  CHECK_THROWS_AS(v.pack(a, 1, buf, sizeof buf, pos = 40), DatatypeError);

  int out[4] = {};
  double dout = 0;
  pos = 0;
  v.unpack(buf, 24, pos, out, 1);
  T(BasicType::Double).unpack(buf, 24, pos, &dout, 1);
  v.unpack(buf, 24, pos, out + 1, 1);
  CHECK(pos == 24);
  CHECK(std::vector<int>(out, out + 4) == std::vector<int>{1, 2, 3, 4});
  CHECK(dout == 2.5);
  pos = 16;
  try {
    v.unpack(buf, 20, pos, out, 1);  // truncated input
    FAIL("expected buffer_too_small");
  } catch (const DatatypeError& e) {
    CHECK(e.code() == DatatypeErrc::buffer_too_small);
  }
  CHECK(v.packed_size(0) == 0);
  v.pack(a, 0, buf, 0, pos = 0);
  CHECK(pos == 0);
}

TEST_CASE("get_count and get_elements with partial elements") {
  // struct { int; double } packed = 12 bytes, 2 basic elements
  const int bl[] = {1, 1};
  const Aint disp[] = {0, 8};
  const Datatype types[] = {T(BasicType::Int), T(BasicType::Double)};
  Datatype s = Datatype::create_struct(bl, disp, types);
  s.commit();
  CHECK(s.get_count(0) == 0);
  CHECK(s.get_count(12) == 1);
  CHECK(s.get_count(36) == 3);
  CHECK(s.get_count(16) == std::nullopt);  // MPI_UNDEFINED
  CHECK(s.get_elements(12) == 2);
  CHECK(s.get_elements(4) == 1);
  CHECK(s.get_elements(16) == 3);   // one struct + one int
  CHECK(s.get_elements(24) == 4);
  CHECK(s.get_elements(6) == std::nullopt);   // ends inside the double
  CHECK(s.get_elements(2) == std::nullopt);   // ends inside the int

  // vector of 3 x (2 doubles): elements counted per double
  Datatype v = Datatype::vector(3, 2, 5, T(BasicType::Double));
  CHECK(v.get_elements(48) == 6);
  CHECK(v.get_elements(40) == 5);
  CHECK(v.get_elements(44) == std::nullopt);
  CHECK(v.get_count(48) == 1);
  CHECK(v.get_count(40) == std::nullopt);

  // pair types count value and index separately
  const Datatype di = T(BasicType::DoubleInt);
  CHECK(di.get_elements(24) == 4);
  CHECK(di.get_elements(20) == 3);
  CHECK(di.get_count(24) == 2);
  CHECK(di.get_count(20) == std::nullopt);

  // zero-size type
  Datatype z = Datatype::contiguous(0, T(BasicType::Int));
  CHECK(z.get_count(0) == 0);
  CHECK(z.get_elements(0) == 0);
  CHECK_THROWS_AS(s.get_count(-1), DatatypeError);
}

TEST_CASE("absolute addresses with a null base (MPI_BOTTOM)") {
  int x = 11;
  double y = 22.5;
  const int bl[] = {1, 1};
  const Aint disp[] = {reinterpret_cast<Aint>(&x), reinterpret_cast<Aint>(&y)};
  const Datatype types[] = {T(BasicType::Int), T(BasicType::Double)};
  Datatype s = Datatype::create_struct(bl, disp, types);
  s.commit();
  unsigned char buf[12];
  Count pos = 0;
  s.pack(nullptr, 1, buf, 12, pos);
  int xo;
  double yo;
  std::memcpy(&xo, buf, 4);
  std::memcpy(&yo, buf + 4, 8);
  CHECK(xo == 11);
  CHECK(yo == 22.5);
  x = 0;
  y = 0;
  pos = 0;
  s.unpack(buf, 12, pos, nullptr, 1);
  CHECK(x == 11);
  CHECK(y == 22.5);
  std::vector<const void*> ptrs;
  s.for_each_block(static_cast<const void*>(nullptr), 1,
                   [&](const void* p, std::size_t) { ptrs.push_back(p); });
  REQUIRE(ptrs.size() >= 1);
  CHECK(ptrs[0] == static_cast<const void*>(&x));
}

TEST_CASE("uniform basic type and element runs (for reductions)") {
  Datatype v = Datatype::vector(3, 2, 3, T(BasicType::Int));
  v.commit();
  CHECK(v.uniform_basic_type() == BasicType::Int);
  std::vector<std::pair<Aint, Count>> runs;
  for (const ElementRun& r : v.element_runs()) runs.emplace_back(r.offset, r.count);
  CHECK(runs == std::vector<std::pair<Aint, Count>>{{0, 2}, {12, 2}, {24, 2}});
  // pair types keep their C stride: 3 MPI_SHORT_INT = one run of 3 (extent 8 each)
  Datatype c = Datatype::contiguous(3, T(BasicType::ShortInt));
  c.commit();
  CHECK(c.uniform_basic_type() == BasicType::ShortInt);
  REQUIRE(c.element_runs().size() == 1);
  CHECK(c.element_runs()[0].count == 3);
  CHECK(block_list(c) == BL{{0, 2}, {4, 6}, {12, 6}, {20, 4}});
  // MPI_BYTE and MPI_UNSIGNED_CHAR are different basic types
  const Datatype two[] = {T(BasicType::Byte), T(BasicType::UnsignedChar)};
  const int bl[] = {1, 1};
  const Aint disp[] = {0, 1};
  CHECK(!Datatype::create_struct(bl, disp, two).uniform_basic_type());
  // empty members do not break uniformity
  const Datatype with_empty[] = {Datatype::contiguous(0, T(BasicType::Char)), T(BasicType::Float)};
  CHECK(Datatype::create_struct(bl, disp, with_empty).uniform_basic_type() == BasicType::Float);
  CHECK(Datatype::create_resized(v, 0, 100).uniform_basic_type() == BasicType::Int);
}

TEST_CASE("for_each_block_range: memory pieces of one message fragment") {
  // vector(4, 3, 5, short): blocks of 6 bytes at 0, 10, 20, 30; extent 36
  Datatype v = Datatype::vector(4, 3, 5, T(BasicType::Short));
  v.commit();
  short buf[40];
  std::iota(buf, buf + 40, short{0});
  const Count count = 2;
  const Count total = v.packed_size(count);  // 48
  using Pieces = std::vector<std::pair<std::ptrdiff_t, std::size_t>>;
  auto pieces = [&](Count off, Count len) {
    Pieces p;
    v.for_each_block_range(static_cast<const void*>(buf), count, off, len, [&](const void* q, std::size_t n) {
      p.emplace_back(static_cast<const char*>(q) - reinterpret_cast<const char*>(buf), n);
    });
    return p;
  };
  CHECK(pieces(0, 6) == Pieces{{0, 6}});
  CHECK(pieces(4, 10) == Pieces{{4, 2}, {10, 6}, {20, 2}});
  // crossing the element boundary: element 0's last block [30,36) abuts element 1's first [36,42)
  CHECK(pieces(20, 10) == Pieces{{32, 10}});
  CHECK(pieces(0, 0).empty());
  // concatenating the pieces of every fragment gives the packed image
  std::vector<unsigned char> packed(static_cast<std::size_t>(total));
  Count pos = 0;
  v.pack(buf, count, packed.data(), total, pos);
  std::vector<unsigned char> gathered;
  for (Count off = 0; off < total; off += 7) {
    const Count len = std::min<Count>(7, total - off);
    v.for_each_block_range(static_cast<const void*>(buf), count, off, len, [&](const void* q, std::size_t n) {
      gathered.insert(gathered.end(), static_cast<const unsigned char*>(q),
                      static_cast<const unsigned char*>(q) + n);
    });
  }
  CHECK(gathered == packed);
  CHECK_THROWS_AS(pieces(40, 9), DatatypeError);
  // the mutable overload scatters a fragment in place
  short dst[40] = {};
  v.for_each_block_range(static_cast<void*>(dst), count, 6, 6, [&](void* q, std::size_t n) {
    std::memset(q, 0x11, n);
  });
  CHECK(dst[5] == 0x1111);
  CHECK(dst[7] == 0x1111);
  CHECK(dst[8] == 0);
  CHECK(dst[4] == 0);
}
