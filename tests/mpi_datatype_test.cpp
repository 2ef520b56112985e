// The MPI datatype engine: constructor bounds against hand-computed values and
// the C compiler's struct layouts, flattening, pack/unpack (full, positioned,
// ranged), block iteration and element counting.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <climits>
#include <cstring>
#include <numeric>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "mpi_layer/datatype/datatype.hpp"
#include "mpi_layer/datatype/external32.hpp"

using namespace nmad::mpi;

namespace {

Datatype T(BasicType t) { return Datatype::basic(t); }

std::vector<std::pair<Aint, Aint>> block_list(const Datatype& d) {
  std::vector<std::pair<Aint, Aint>> v;
  for (const Block& b : d.blocks()) v.emplace_back(b.offset, b.length);
  return v;
}

// Blocks reported by for_each_block as (offset from buf, length).
std::vector<std::pair<std::ptrdiff_t, std::size_t>> iter_blocks(const Datatype& d, const void* buf,
                                                                Count count) {
  std::vector<std::pair<std::ptrdiff_t, std::size_t>> v;
  d.for_each_block(buf, count, [&](const void* p, std::size_t n) {
    v.emplace_back(static_cast<const char*>(p) - static_cast<const char*>(buf), n);
  });
  return v;
}

template <class E>
std::vector<E> pack_all(const Datatype& d, const void* buf, Count count) {
  std::vector<unsigned char> out(static_cast<std::size_t>(d.packed_size(count)));
  Count pos = 0;
  d.pack(buf, count, out.data(), static_cast<Count>(out.size()), pos);
  REQUIRE(pos == static_cast<Count>(out.size()));
  std::vector<E> r(out.size() / sizeof(E));
  if (!r.empty()) std::memcpy(r.data(), out.data(), r.size() * sizeof(E));
  return r;
}

using BL = std::vector<std::pair<Aint, Aint>>;

}  // namespace

TEST_CASE("basic scalar types match the C compiler's sizes") {
  struct Expect { BasicType t; std::size_t size, align; };
  const Expect ex[] = {
      {BasicType::Char, sizeof(char), alignof(char)},
      {BasicType::SignedChar, 1, 1},
      {BasicType::UnsignedChar, 1, 1},
      {BasicType::Byte, 1, 1},
      {BasicType::Short, sizeof(short), alignof(short)},
      {BasicType::UnsignedShort, sizeof(unsigned short), alignof(unsigned short)},
      {BasicType::Int, sizeof(int), alignof(int)},
      {BasicType::Unsigned, sizeof(unsigned), alignof(unsigned)},
      {BasicType::Long, sizeof(long), alignof(long)},
      {BasicType::UnsignedLong, sizeof(unsigned long), alignof(unsigned long)},
      {BasicType::LongLong, sizeof(long long), alignof(long long)},
      {BasicType::UnsignedLongLong, sizeof(unsigned long long), alignof(unsigned long long)},
      {BasicType::Float, sizeof(float), alignof(float)},
      {BasicType::Double, sizeof(double), alignof(double)},
      {BasicType::LongDouble, sizeof(long double), alignof(long double)},
      {BasicType::WChar, sizeof(wchar_t), alignof(wchar_t)},
      {BasicType::CBool, sizeof(bool), alignof(bool)},
      {BasicType::Int8, 1, 1},
      {BasicType::Int16, 2, 2},
      {BasicType::Int32, 4, 4},
      {BasicType::Int64, 8, alignof(std::int64_t)},
      {BasicType::UInt8, 1, 1},
      {BasicType::UInt16, 2, 2},
      {BasicType::UInt32, 4, 4},
      {BasicType::UInt64, 8, alignof(std::uint64_t)},
      {BasicType::CFloatComplex, 2 * sizeof(float), alignof(float)},
      {BasicType::CDoubleComplex, 2 * sizeof(double), alignof(double)},
      {BasicType::CLongDoubleComplex, 2 * sizeof(long double), alignof(long double)},
      {BasicType::Aint, sizeof(std::ptrdiff_t), alignof(std::ptrdiff_t)},
      {BasicType::Offset, sizeof(long long), alignof(long long)},
      {BasicType::Count, sizeof(long long), alignof(long long)},
      {BasicType::Packed, 1, 1},
  };
  for (const Expect& e : ex) {
    CAPTURE(basic_type_info(e.t).name);
    const Datatype d = T(e.t);
    CHECK(d.is_committed());
    CHECK(d.combiner() == Combiner::Named);
    CHECK(d.basic_type() == e.t);
    CHECK(d.size() == static_cast<Count>(e.size));
    CHECK(d.extent() == static_cast<Aint>(e.size));
    CHECK(d.lb() == 0);
    CHECK(d.true_extent() == static_cast<Aint>(e.size));
    CHECK(d.alignment() == e.align);
    CHECK(d.num_basic_elements() == 1);
    CHECK(d.is_contiguous());
    CHECK(block_list(d) == BL{{0, static_cast<Aint>(e.size)}});
    CHECK(!is_pair_type(e.t));
  }
}

TEST_CASE("pair types have the exact C struct layouts") {
  // What a C compiler does with these structs; C++ lays them out identically.
  struct FI { float v; int i; };
  struct DI { double v; int i; };
  struct LI { long v; int i; };
  struct II { int v; int i; };
  struct SI { short v; int i; };
  struct LDI { long double v; int i; };
  struct Expect { BasicType t; std::size_t vsize, ioff, extent, align; };
  const Expect ex[] = {
      {BasicType::FloatInt, sizeof(float), offsetof(FI, i), sizeof(FI), alignof(FI)},
      {BasicType::DoubleInt, sizeof(double), offsetof(DI, i), sizeof(DI), alignof(DI)},
      {BasicType::LongInt, sizeof(long), offsetof(LI, i), sizeof(LI), alignof(LI)},
      {BasicType::TwoInt, sizeof(int), offsetof(II, i), sizeof(II), alignof(II)},
      {BasicType::ShortInt, sizeof(short), offsetof(SI, i), sizeof(SI), alignof(SI)},
      {BasicType::LongDoubleInt, sizeof(long double), offsetof(LDI, i), sizeof(LDI), alignof(LDI)},
  };
  for (const Expect& e : ex) {
    CAPTURE(basic_type_info(e.t).name);
    const Datatype d = T(e.t);
    CHECK(is_pair_type(e.t));
    CHECK(d.size() == static_cast<Count>(e.vsize + sizeof(int)));
    CHECK(d.extent() == static_cast<Aint>(e.extent));
    CHECK(d.lb() == 0);
    CHECK(d.true_lb() == 0);
    CHECK(d.true_extent() == static_cast<Aint>(e.ioff + sizeof(int)));
    CHECK(d.alignment() == e.align);
    CHECK(d.num_basic_elements() == 2);
    // value and index blocks; merged when there is no padding between them
    if (e.ioff == e.vsize) {
      CHECK(block_list(d) == BL{{0, static_cast<Aint>(e.vsize + sizeof(int))}});
    } else {
      CHECK(block_list(d) == BL{{0, static_cast<Aint>(e.vsize)}, {static_cast<Aint>(e.ioff), 4}});
    }
    CHECK(d.is_contiguous() == (e.vsize + sizeof(int) == e.extent));
  }
  // x86-64 values, spelled out
  if (sizeof(long) == 8 && sizeof(long double) == 16) {
    CHECK(T(BasicType::DoubleInt).size() == 12);
    CHECK(T(BasicType::DoubleInt).extent() == 16);
    CHECK(T(BasicType::ShortInt).size() == 6);
    CHECK(T(BasicType::ShortInt).extent() == 8);
    CHECK(block_list(T(BasicType::ShortInt)) == BL{{0, 2}, {4, 4}});
    CHECK(T(BasicType::LongDoubleInt).extent() == 32);
    CHECK(T(BasicType::LongDoubleInt).size() == 20);
  }
  // pack of 2 MPI_SHORT_INT drops the padding: 2 * 6 bytes
  ShortIntPair si[2] = {{7, 70}, {-3, 30}};
  const Datatype d = T(BasicType::ShortInt);
  std::vector<unsigned char> out(12);
  Count pos = 0;
  d.pack(si, 2, out.data(), 12, pos);
  CHECK(pos == 12);
  short s;
  int i;
  std::memcpy(&s, &out[6], 2);
  std::memcpy(&i, &out[8], 4);
  CHECK(s == -3);
  CHECK(i == 30);
}

TEST_CASE("contiguous") {
  Datatype c = Datatype::contiguous(5, T(BasicType::Double));
  CHECK(!c.is_committed());
  CHECK(c.size() == 40);
  CHECK(c.extent() == 40);
  CHECK(c.lb() == 0);
  CHECK(c.true_extent() == 40);
  CHECK(c.num_basic_elements() == 5);
  CHECK(c.combiner() == Combiner::Contiguous);
  CHECK_THROWS_AS(c.blocks(), DatatypeError);
  c.commit();
  CHECK(c.is_committed());
  CHECK(c.is_contiguous());
  CHECK(block_list(c) == BL{{0, 40}});
  double a[10];
  std::iota(a, a + 10, 0.0);
  CHECK(iter_blocks(c, a, 2) == std::vector<std::pair<std::ptrdiff_t, std::size_t>>{{0, 80}});
  CHECK(c.block_count(2) == 1);
  CHECK(pack_all<double>(c, a, 2) == std::vector<double>(a, a + 10));

  // huge contiguous types flatten to one block without expanding
  Datatype big = Datatype::contiguous(Count{1} << 40, T(BasicType::Char));
  big.commit();
  CHECK(big.size() == (Count{1} << 40));
  CHECK(block_list(big) == BL{{0, Aint{1} << 40}});
}

TEST_CASE("vector: size, extent, blocks, packed bytes") {
  // 3 blocks of 2 ints, stride 4 ints
  Datatype v = Datatype::vector(3, 2, 4, T(BasicType::Int));
  v.commit();
  CHECK(v.size() == 24);
  CHECK(v.extent() == 40);  // (2*4 + 2) ints
  CHECK(v.lb() == 0);
  CHECK(v.true_lb() == 0);
  CHECK(v.true_extent() == 40);
  CHECK(v.num_basic_elements() == 6);
  CHECK(!v.is_contiguous());
  CHECK(block_list(v) == BL{{0, 8}, {16, 8}, {32, 8}});
  int a[20];
  std::iota(a, a + 20, 0);
  CHECK(pack_all<int>(v, a, 1) == std::vector<int>{0, 1, 4, 5, 8, 9});
  // count 2: second element starts at extent = 10 ints
  CHECK(pack_all<int>(v, a, 2) == std::vector<int>{0, 1, 4, 5, 8, 9, 10, 11, 14, 15, 18, 19});
  // stride == blocklength collapses to one block
  Datatype dense = Datatype::vector(4, 2, 2, T(BasicType::Int));
  dense.commit();
  CHECK(dense.is_contiguous());
  CHECK(block_list(dense) == BL{{0, 32}});
}

TEST_CASE("vector and hvector with negative strides") {
  Datatype v = Datatype::vector(3, 1, -2, T(BasicType::Int));
  v.commit();
  CHECK(v.size() == 12);
  CHECK(v.lb() == -16);
  CHECK(v.ub() == 4);
  CHECK(v.extent() == 20);
  CHECK(v.true_lb() == -16);
  CHECK(v.true_extent() == 20);
  CHECK(block_list(v) == BL{{0, 4}, {-8, 4}, {-16, 4}});
  int a[10];
  std::iota(a, a + 10, 100);
  // buffer points into the middle: element 0 reads a[4], a[2], a[0]
  CHECK(pack_all<int>(v, a + 4, 1) == std::vector<int>{104, 102, 100});
  // count 2: element 1 at +extent (5 ints) -> a[9], a[7], a[5]
  CHECK(pack_all<int>(v, a + 4, 2) == std::vector<int>{104, 102, 100, 109, 107, 105});
  // round trip
  const std::vector<int> packed = pack_all<int>(v, a + 4, 2);
  int b[10] = {};
  Count pos = 0;
  v.unpack(packed.data(), 24, pos, b + 4, 2);
  CHECK(pos == 24);
  CHECK(std::vector<int>(b, b + 10) == std::vector<int>{100, 0, 102, 0, 104, 105, 0, 107, 0, 109});

  // hvector with a negative byte stride of 2-double blocks
  Datatype h = Datatype::hvector(2, 2, -24, T(BasicType::Double));
  h.commit();
  CHECK(h.size() == 32);
  CHECK(h.lb() == -24);
  CHECK(h.ub() == 16);
  CHECK(h.extent() == 40);
  CHECK(block_list(h) == BL{{0, 16}, {-24, 16}});
}

TEST_CASE("hvector: no epsilon padding outside struct") {
  Datatype h = Datatype::hvector(2, 1, 12, T(BasicType::Double));
  h.commit();
  CHECK(h.size() == 16);
  CHECK(h.extent() == 20);
  CHECK(h.true_extent() == 20);
  CHECK(block_list(h) == BL{{0, 8}, {12, 8}});
  CHECK(h.combiner() == Combiner::Hvector);
  const TypeContents c = h.contents();
  CHECK(c.ints == std::vector<Count>{2, 1});
  CHECK(c.addresses == std::vector<Aint>{12});
  CHECK(c.types.size() == 1);
  CHECK(c.types[0] == T(BasicType::Double));
}

TEST_CASE("indexed and hindexed keep type-map order") {
  const int bl[] = {2, 1, 3};
  const int disp[] = {5, 0, 8};
  Datatype x = Datatype::indexed(bl, disp, T(BasicType::Int));
  x.commit();
  CHECK(x.size() == 24);
  CHECK(x.lb() == 0);
  CHECK(x.ub() == 44);
  CHECK(x.extent() == 44);
  CHECK(x.num_basic_elements() == 6);
  CHECK(block_list(x) == BL{{20, 8}, {0, 4}, {32, 12}});
  int a[11];
  std::iota(a, a + 11, 0);
  CHECK(pack_all<int>(x, a, 1) == std::vector<int>{5, 6, 0, 8, 9, 10});
  const TypeContents c = x.contents();
  CHECK(c.combiner == Combiner::Indexed);
  CHECK(c.ints == std::vector<Count>{3, 2, 1, 3, 5, 0, 8});
  CHECK(c.addresses.empty());

  // hindexed: zero-length blocks add nothing to the type map or the bounds
  const int hbl[] = {0, 1, 1};
  const Aint hdisp[] = {-100, 6, 2};
  Datatype h = Datatype::hindexed(hbl, hdisp, T(BasicType::Short));
  h.commit();
  CHECK(h.size() == 4);
  CHECK(h.lb() == 2);
  CHECK(h.ub() == 8);
  CHECK(h.extent() == 6);
  CHECK(block_list(h) == BL{{6, 2}, {2, 2}});
  // adjacent blocks in type-map order are merged
  const int mbl[] = {1, 2};
  const Aint mdisp[] = {0, 4};
  Datatype m = Datatype::hindexed(mbl, mdisp, T(BasicType::Int));
  m.commit();
  CHECK(block_list(m) == BL{{0, 12}});
  CHECK(m.is_contiguous());
}

TEST_CASE("indexed_block and hindexed_block") {
  const int disp[] = {4, 1};
  Datatype x = Datatype::indexed_block(2, disp, T(BasicType::Double));
  x.commit();
  CHECK(x.size() == 32);
  CHECK(x.lb() == 8);
  CHECK(x.ub() == 48);
  CHECK(x.extent() == 40);
  CHECK(block_list(x) == BL{{32, 16}, {8, 16}});
  CHECK(x.contents().ints == std::vector<Count>{2, 2, 4, 1});

  const Aint hd[] = {0, 10, 3};
  Datatype h = Datatype::hindexed_block(3, hd, T(BasicType::Char));
  h.commit();
  CHECK(h.size() == 9);
  CHECK(h.extent() == 13);
  CHECK(block_list(h) == BL{{0, 3}, {10, 3}, {3, 3}});
  const char* s = "abcdefghijklm";
  CHECK(pack_all<char>(h, s, 1) == std::vector<char>{'a', 'b', 'c', 'k', 'l', 'm', 'd', 'e', 'f'});
}

TEST_CASE("struct follows the C compiler's layout (epsilon rule)") {
  struct S1 { char c; double d; int i; };
  const int bl[] = {1, 1, 1};
  const Aint disp[] = {offsetof(S1, c), offsetof(S1, d), offsetof(S1, i)};
  const Datatype types[] = {T(BasicType::Char), T(BasicType::Double), T(BasicType::Int)};
  Datatype s = Datatype::create_struct(bl, disp, types);
  s.commit();
  CHECK(s.size() == 13);
  CHECK(s.lb() == 0);
  CHECK(s.extent() == static_cast<Aint>(sizeof(S1)));  // 24: 20 padded to 8
  CHECK(s.true_extent() == static_cast<Aint>(offsetof(S1, i) + sizeof(int)));
  CHECK(s.alignment() == alignof(S1));
  CHECK(s.num_basic_elements() == 3);
  CHECK(block_list(s) == BL{{0, 1}, {8, 12}});  // d and i adjacent -> merged

  S1 arr[3] = {{'x', 1.5, 7}, {'y', -2.25, 8}, {'z', 1e300, -9}};
  std::vector<unsigned char> buf(static_cast<std::size_t>(s.packed_size(3)));
  Count pos = 0;
  s.pack(arr, 3, buf.data(), static_cast<Count>(buf.size()), pos);
  CHECK(pos == 39);
  S1 back[3] = {};
  pos = 0;
  s.unpack(buf.data(), 39, pos, back, 3);
  for (int k = 0; k < 3; ++k) {
    CHECK(back[k].c == arr[k].c);
    CHECK(back[k].d == arr[k].d);
    CHECK(back[k].i == arr[k].i);
  }

  // { double; char } : extent 16, true extent 9
  struct S2 { double d; char c; };
  const int bl2[] = {1, 1};
  const Aint disp2[] = {offsetof(S2, d), offsetof(S2, c)};
  const Datatype types2[] = {T(BasicType::Double), T(BasicType::Char)};
  Datatype s2 = Datatype::create_struct(bl2, disp2, types2);
  CHECK(s2.extent() == static_cast<Aint>(sizeof(S2)));
  CHECK(s2.true_extent() == 9);
  // { short; char[3] } : align 2 -> extent 6 == sizeof
  struct S3 { short s; char c[3]; };
  const int bl3[] = {1, 3};
  const Aint disp3[] = {offsetof(S3, s), offsetof(S3, c)};
  const Datatype types3[] = {T(BasicType::Short), T(BasicType::Char)};
  Datatype s3 = Datatype::create_struct(bl3, disp3, types3);
  CHECK(s3.extent() == static_cast<Aint>(sizeof(S3)));
  // { long double; int } matches MPI_LONG_DOUBLE_INT's extent
  const int bl4[] = {1, 1};
  const Aint disp4[] = {offsetof(LongDoubleIntPair, v), offsetof(LongDoubleIntPair, i)};
  const Datatype types4[] = {T(BasicType::LongDouble), T(BasicType::Int)};
  CHECK(Datatype::create_struct(bl4, disp4, types4).extent() == T(BasicType::LongDoubleInt).extent());

  const TypeContents c = s.contents();
  CHECK(c.combiner == Combiner::Struct);
  CHECK(c.ints == std::vector<Count>{3, 1, 1, 1});
  CHECK(c.addresses == std::vector<Aint>(disp, disp + 3));
  CHECK(c.types.size() == 3);
  CHECK(c.types[1] == T(BasicType::Double));
}

TEST_CASE("nested struct of vectors: round trip over an array") {
  // C layout: struct P { double xyz[3]; int tag; float w[4]; } ; send xyz[0], xyz[2],
  // tag and w[1], w[3] only.
  struct P { double xyz[3]; int tag; float w[4]; };
  Datatype dv = Datatype::vector(2, 1, 2, T(BasicType::Double));     // xyz[0], xyz[2]
  Datatype fv = Datatype::vector(2, 1, 2, T(BasicType::Float));      // w[k], w[k+2]
  const int bl[] = {1, 1, 1};
  const Aint disp[] = {offsetof(P, xyz), offsetof(P, tag), offsetof(P, w) + sizeof(float)};
  const Datatype types[] = {dv, T(BasicType::Int), fv};
  Datatype s = Datatype::create_struct(bl, disp, types);
  // the struct ends at w[3] (offset 40): ub 44 -> epsilon pads to 48 = sizeof(P)
  CHECK(s.extent() == static_cast<Aint>(sizeof(P)));
  CHECK(s.size() == 16 + 4 + 8);
  CHECK(s.num_basic_elements() == 5);
  s.commit();
  CHECK(block_list(s) == BL{{0, 8}, {16, 12}, {32, 4}, {40, 4}});  // xyz[2] and tag merge

  P src[4];
  for (int k = 0; k < 4; ++k) {
    src[k] = P{{k + 0.5, k + 1.5, k + 2.5}, 10 * k, {k * 1.f, k * 2.f, k * 3.f, k * 4.f}};
  }
  std::vector<unsigned char> packed(static_cast<std::size_t>(s.packed_size(4)));
  Count pos = 0;
  s.pack(src, 4, packed.data(), static_cast<Count>(packed.size()), pos);
  CHECK(pos == 112);
  P dst[4];
  std::memset(dst, 0, sizeof dst);
  pos = 0;
  s.unpack(packed.data(), pos + 112, pos, dst, 4);
  for (int k = 0; k < 4; ++k) {
    CHECK(dst[k].xyz[0] == src[k].xyz[0]);
    CHECK(dst[k].xyz[1] == 0.0);  // not part of the type
    CHECK(dst[k].xyz[2] == src[k].xyz[2]);
    CHECK(dst[k].tag == src[k].tag);
    CHECK(dst[k].w[0] == 0.f);
    CHECK(dst[k].w[1] == src[k].w[1]);
    CHECK(dst[k].w[2] == 0.f);
    CHECK(dst[k].w[3] == src[k].w[3]);
  }
  // and a vector of that struct (every other P)
  Datatype every_other = Datatype::vector(2, 1, 2, s);
  every_other.commit();
  CHECK(every_other.size() == 56);
  CHECK(every_other.extent() == static_cast<Aint>(3 * sizeof(P)));
  const std::vector<unsigned char> p2 = pack_all<unsigned char>(every_other, src, 1);
  std::vector<unsigned char> expect(packed.begin(), packed.begin() + 28);
  expect.insert(expect.end(), packed.begin() + 56, packed.begin() + 84);
  CHECK(p2 == expect);
}

TEST_CASE("create_resized: arrays of resized types and sticky bounds") {
  // one int per 3-int slot, starting at the middle one: lb -4, extent 12
  Datatype r = Datatype::create_resized(T(BasicType::Int), -4, 12);
  CHECK(r.size() == 4);
  CHECK(r.lb() == -4);
  CHECK(r.ub() == 8);
  CHECK(r.extent() == 12);
  CHECK(r.true_lb() == 0);
  CHECK(r.true_extent() == 4);
  r.commit();
  CHECK(!r.is_contiguous());
  int a[12];
  std::iota(a, a + 12, 0);
  CHECK(pack_all<int>(r, a + 1, 4) == std::vector<int>{1, 4, 7, 10});
  CHECK(r.block_count(4) == 4);

  // contiguous of the resized type: extent count*12, lb stays -4
  Datatype c = Datatype::contiguous(3, r);
  CHECK(c.lb() == -4);
  CHECK(c.extent() == 36);
  CHECK(c.true_lb() == 0);
  CHECK(c.true_extent() == 28);
  c.commit();
  CHECK(pack_all<int>(c, a + 1, 1) == std::vector<int>{1, 4, 7});

  // struct containing a marker: bounds come from markers only, no epsilon
  Datatype tiny = Datatype::create_resized(T(BasicType::Double), 0, 4);
  const int bl[] = {1, 1};
  const Aint disp[] = {0, 100};
  const Datatype types[] = {tiny, T(BasicType::Char)};
  Datatype s = Datatype::create_struct(bl, disp, types);
  CHECK(s.lb() == 0);
  CHECK(s.ub() == 4);  // the char at 100 is data, not a marker
  CHECK(s.extent() == 4);
  CHECK(s.true_extent() == 101);
  CHECK(s.size() == 9);

  // resizing a negative-stride vector to a tight extent for arrays
  Datatype v = Datatype::vector(2, 1, -1, T(BasicType::Short));  // a[0], a[-1]
  Datatype vr = Datatype::create_resized(v, 0, 4);
  vr.commit();
  short sa[8];
  std::iota(sa, sa + 8, short{0});
  CHECK(pack_all<short>(vr, sa + 1, 3) == std::vector<short>{1, 0, 3, 2, 5, 4});
  CHECK(vr.contents().addresses == std::vector<Aint>{0, 4});
}

TEST_CASE("dup copies the type map and the commit state") {
  Datatype v = Datatype::vector(2, 1, 3, T(BasicType::Int));
  Datatype d1 = v.dup();
  CHECK(!d1.is_committed());
  v.commit();
  Datatype d2 = v.dup();
  CHECK(d2.is_committed());
  CHECK(d2.combiner() == Combiner::Dup);
  CHECK(d2.size() == v.size());
  CHECK(d2.extent() == v.extent());
  CHECK(block_list(d2) == block_list(v));
  CHECK(d2.contents().types[0] == v);
  CHECK(T(BasicType::Int).dup().is_committed());
  // a derived type keeps its inputs alive
  Datatype keep;
  {
    Datatype inner = Datatype::vector(2, 1, 2, T(BasicType::Double));
    keep = Datatype::contiguous(2, inner);
  }
  keep.commit();
  CHECK(block_list(keep) == BL{{0, 8}, {16, 16}, {40, 8}});
}

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

TEST_CASE("errors: counts, blocklengths, arrays, uncommitted, null") {
  auto code_of = [](auto&& fn) {
    try {
      fn();
    } catch (const DatatypeError& e) {
      return e.code();
    }
    return DatatypeErrc{};
  };
  const Datatype i = T(BasicType::Int);
  CHECK(code_of([&] { Datatype::contiguous(-1, i); }) == DatatypeErrc::invalid_count);
  CHECK(code_of([&] { Datatype::vector(-2, 1, 1, i); }) == DatatypeErrc::invalid_count);
  CHECK(code_of([&] { Datatype::vector(2, -1, 1, i); }) == DatatypeErrc::negative_blocklength);
  CHECK(code_of([&] { Datatype::hvector(2, -1, 8, i); }) == DatatypeErrc::negative_blocklength);
  const int bl[] = {1, -1};
  const int disp[] = {0, 4};
  CHECK(code_of([&] { Datatype::indexed(bl, disp, i); }) == DatatypeErrc::negative_blocklength);
  const int disp1[] = {0};
  const int bl2[] = {1, 1};
  CHECK(code_of([&] { Datatype::indexed(bl2, disp1, i); }) == DatatypeErrc::invalid_argument);
  CHECK(code_of([&] { Datatype::indexed_block(-3, disp1, i); }) == DatatypeErrc::negative_blocklength);
  const Aint adisp[] = {0, 8};
  const Datatype types1[] = {i};
  CHECK(code_of([&] { Datatype::create_struct(bl2, adisp, types1); }) == DatatypeErrc::invalid_argument);
  const Datatype with_null[] = {i, Datatype()};
  CHECK(code_of([&] { Datatype::create_struct(bl2, adisp, with_null); }) == DatatypeErrc::invalid_datatype);
  CHECK(code_of([&] { Datatype().size(); }) == DatatypeErrc::invalid_datatype);
  CHECK(code_of([&] { Datatype::contiguous(1, Datatype()); }) == DatatypeErrc::invalid_datatype);

  Datatype v = Datatype::vector(2, 1, 2, i);
  int a[4] = {};
  unsigned char buf[16];
  Count pos = 0;
  CHECK(code_of([&] { v.pack(a, 1, buf, 16, pos); }) == DatatypeErrc::uncommitted);
  CHECK(code_of([&] { v.unpack(buf, 16, pos, a, 1); }) == DatatypeErrc::uncommitted);
  CHECK(code_of([&] { v.unpack_range(buf, 0, 4, a, 1); }) == DatatypeErrc::uncommitted);
  CHECK(code_of([&] { v.for_each_block(a, 1, [](const void*, std::size_t) {}); }) ==
        DatatypeErrc::uncommitted);
  v.commit();
  v.commit();  // idempotent
  CHECK(code_of([&] { v.pack(a, -1, buf, 16, pos); }) == DatatypeErrc::invalid_count);
  CHECK(code_of([&] { v.packed_size(-1); }) == DatatypeErrc::invalid_count);
  CHECK(code_of([&] { v.for_each_block(a, -1, [](const void*, std::size_t) {}); }) ==
        DatatypeErrc::invalid_count);
  CHECK(code_of([&] { v.packed_size(Count{1} << 62); }) == DatatypeErrc::invalid_count);
  // queries work on uncommitted types
  CHECK(Datatype::vector(2, 1, 2, i).size() == 8);
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

TEST_CASE("empty and zero-blocklength types") {
  Datatype e = Datatype::contiguous(0, T(BasicType::Double));
  CHECK(e.size() == 0);
  CHECK(e.extent() == 0);
  CHECK(e.true_extent() == 0);
  e.commit();
  CHECK(e.blocks().empty());
  CHECK(e.is_contiguous());
  // an empty member does not move the struct bounds
  const int bl[] = {1, 1};
  const Aint disp[] = {-50, 8};
  const Datatype types[] = {e, T(BasicType::Int)};
  Datatype s = Datatype::create_struct(bl, disp, types);
  CHECK(s.lb() == 8);
  CHECK(s.extent() == 4);
  Datatype zv = Datatype::vector(3, 0, 2, T(BasicType::Int));
  CHECK(zv.size() == 0);
  CHECK(zv.extent() == 0);
  unsigned char buf[1];
  Count pos = 0;
  zv.commit();
  zv.pack(nullptr, 10, buf, 0, pos);
  CHECK(pos == 0);
}

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

TEST_CASE("huge vectors are built in O(1) and sized exactly") {
  const Count n = Count{1} << 40;
  Datatype v = Datatype::vector(n, 1, 2, T(BasicType::Double));
  CHECK(v.size() == 8 * n);
  CHECK(v.extent() == 16 * (n - 1) + 8);
  CHECK(v.num_basic_elements() == n);
  CHECK(v.contents().ints == std::vector<Count>{n, 1, 2});
  Datatype dense = Datatype::hvector(n, 2, 16, T(BasicType::Double));
  CHECK(dense.size() == 16 * n);
  CHECK(dense.extent() == 16 * n);
  // dense vector of a dense type flattens to one block even for a big count
  Datatype mid = Datatype::hvector(1 << 20, 4, 32, T(BasicType::Double));
  mid.commit();
  CHECK(block_list(mid) == BL{{0, Aint{32} << 20}});
  CHECK(mid.is_contiguous());
  CHECK(mid.get_elements(Count{32} << 20) == Count{4} << 20);
}

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

// ---------------------------------------------------------------------------
// Randomized cross-check against a reference type-map interpreter that only
// uses the public envelope/contents API: every derived type is expanded into
// its list of basic entries (offset, size) in type-map order.
namespace {

struct Entry {
  Aint off;
  Aint size;
};

void expand(const Datatype& t, Aint base, std::vector<Entry>& out) {
  const TypeContents c = t.contents();
  auto rep = [&](const Datatype& child, Aint disp, Count bl) {
    for (Count k = 0; k < bl; ++k) expand(child, base + disp + static_cast<Aint>(k) * child.extent(), out);
  };
  switch (c.combiner) {
    case Combiner::Named: {
      const BasicTypeInfo& bi = basic_type_info(*t.basic_type());
      for (int m = 0; m < bi.num_members; ++m)
        out.push_back({base + static_cast<Aint>(bi.members[m].offset), static_cast<Aint>(bi.members[m].size)});
      return;
    }
    case Combiner::Dup:
    case Combiner::Resized:
      expand(c.types[0], base, out);
      return;
    case Combiner::Contiguous:
      rep(c.types[0], 0, c.ints[0]);
      return;
    case Combiner::Vector:
      for (Count i = 0; i < c.ints[0]; ++i) rep(c.types[0], i * c.ints[2] * c.types[0].extent(), c.ints[1]);
      return;
    case Combiner::Hvector:
      for (Count i = 0; i < c.ints[0]; ++i) rep(c.types[0], i * c.addresses[0], c.ints[1]);
      return;
    case Combiner::Indexed: {
      const Count n = c.ints[0];
      for (Count i = 0; i < n; ++i) rep(c.types[0], c.ints[1 + n + i] * c.types[0].extent(), c.ints[1 + i]);
      return;
    }
    case Combiner::Hindexed:
      for (Count i = 0; i < c.ints[0]; ++i) rep(c.types[0], c.addresses[i], c.ints[1 + i]);
      return;
    case Combiner::IndexedBlock:
      for (Count i = 0; i < c.ints[0]; ++i) rep(c.types[0], c.ints[2 + i] * c.types[0].extent(), c.ints[1]);
      return;
    case Combiner::HindexedBlock:
      for (Count i = 0; i < c.ints[0]; ++i) rep(c.types[0], c.addresses[i], c.ints[1]);
      return;
    case Combiner::Struct:
      for (Count i = 0; i < c.ints[0]; ++i) rep(c.types[i], c.addresses[i], c.ints[1 + i]);
      return;
    case Combiner::Subarray:
      FAIL("not generated");
  }
}

struct Gen {
  std::uint32_t state;
  int next(int lo, int hi) {  // inclusive, xorshift
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    return lo + static_cast<int>(state % static_cast<std::uint32_t>(hi - lo + 1));
  }
  Datatype basic() {
    static const BasicType pool[] = {BasicType::Char, BasicType::Short, BasicType::Int, BasicType::Double,
                                     BasicType::LongDouble, BasicType::ShortInt, BasicType::DoubleInt,
                                     BasicType::CFloatComplex, BasicType::CBool, BasicType::Int64};
    return Datatype::basic(pool[next(0, 9)]);
  }
  Datatype make(int depth) {
    if (depth == 0) return basic();
    const Datatype old = make(depth - 1);
    switch (next(0, 9)) {
      case 0: return Datatype::contiguous(next(0, 3), old);
      case 1: return Datatype::vector(next(0, 3), next(0, 3), next(-4, 4), old);
      case 2: return Datatype::hvector(next(0, 3), next(0, 2), next(-40, 40), old);
      case 3: {
        const int n = next(0, 3);
        std::vector<int> bl(n), d(n);
        for (int i = 0; i < n; ++i) bl[i] = next(0, 2), d[i] = next(-5, 5);
        return Datatype::indexed(bl, d, old);
      }
      case 4: {
        const int n = next(0, 3);
        std::vector<int> bl(n);
        std::vector<Aint> d(n);
        for (int i = 0; i < n; ++i) bl[i] = next(0, 2), d[i] = next(-30, 30);
        return Datatype::hindexed(bl, d, old);
      }
      case 5: {
        const int n = next(1, 3);
        std::vector<int> d(n);
        for (int i = 0; i < n; ++i) d[i] = next(-4, 4);
        return Datatype::indexed_block(next(0, 2), d, old);
      }
      case 6: {
        const int n = next(1, 3);
        std::vector<Aint> d(n);
        for (int i = 0; i < n; ++i) d[i] = next(-20, 20);
        return Datatype::hindexed_block(next(0, 2), d, old);
      }
      case 7: {
        const int n = next(1, 3);
        std::vector<int> bl(n);
        std::vector<Aint> d(n);
        std::vector<Datatype> ts(n);
        for (int i = 0; i < n; ++i) {
          bl[i] = next(0, 2);
          d[i] = next(-24, 24);
          ts[i] = i == 0 ? old : make(next(0, depth - 1));
        }
        return Datatype::create_struct(bl, d, ts);
      }
      case 8: return Datatype::create_resized(old, next(-16, 16), next(1, 48));
      default: return old.dup();
    }
  }
};

}  // namespace

namespace {
void randomized_against_type_map(unsigned seed) {
  Gen g{seed};
  int nonempty = 0;
  for (int iter = 0; iter < 400; ++iter) {
    CAPTURE(iter);
    Datatype t = g.make(g.next(1, 4));
    t.commit();
    std::vector<Entry> map;
    expand(t, 0, map);
    Count size = 0;
    for (const Entry& e : map) size += e.size;
    REQUIRE(t.size() == size);
    CHECK(t.num_basic_elements() == static_cast<Count>(map.size()));
    if (map.empty()) continue;
    ++nonempty;
    Aint lo = map[0].off, hi = map[0].off + map[0].size;
    for (const Entry& e : map) lo = std::min(lo, e.off), hi = std::max(hi, e.off + e.size);
    CHECK(t.true_lb() == lo);
    CHECK(t.true_ub() == hi);

    const Aint count = g.next(1, 3);
    const Aint ext = t.extent();
    Aint blo = lo, bhi = hi;  // memory span of count elements
    for (Aint e = 0; e < count; ++e) blo = std::min(blo, lo + e * ext), bhi = std::max(bhi, hi + e * ext);
    std::vector<unsigned char> mem(static_cast<std::size_t>(bhi - blo));
    for (std::size_t k = 0; k < mem.size(); ++k) mem[k] = static_cast<unsigned char>(k * 31 + 7);
    unsigned char* buf = mem.data() - blo;  // element 0 address (may lie outside mem; never dereferenced there)

    // reference packing
    std::vector<unsigned char> ref;
    for (Aint e = 0; e < count; ++e)
      for (const Entry& en : map)
        for (Aint b = 0; b < en.size; ++b) ref.push_back(buf[e * ext + en.off + b]);
    std::vector<unsigned char> packed(ref.size() + 3, 0xee);
    Count pos = 3;
    t.pack(buf, count, packed.data(), static_cast<Count>(packed.size()), pos);
    CHECK(pos == static_cast<Count>(packed.size()));
    CHECK(std::equal(ref.begin(), ref.end(), packed.begin() + 3));

    // gather through for_each_block, checking block_count
    std::vector<unsigned char> gathered;
    Count nblocks = 0;
    t.for_each_block(static_cast<const void*>(buf), count, [&](const void* p, std::size_t n) {
      ++nblocks;
      gathered.insert(gathered.end(), static_cast<const unsigned char*>(p), static_cast<const unsigned char*>(p) + n);
    });
    CHECK(gathered == ref);
    CHECK(nblocks == t.block_count(count));

    // reference unpack (type-map order, last writer wins on overlaps)
    std::vector<unsigned char> want(mem.size(), 0);
    unsigned char* wbuf = want.data() - blo;
    std::size_t r = 0;
    for (Aint e = 0; e < count; ++e)
      for (const Entry& en : map)
        for (Aint b = 0; b < en.size; ++b) wbuf[e * ext + en.off + b] = ref[r++];
    std::vector<unsigned char> got(mem.size(), 0);
    pos = 0;
    t.unpack(ref.data(), static_cast<Count>(ref.size()), pos, got.data() - blo, count);
    CHECK(got == want);

    // the same message arriving in random pieces, and packed in random pieces
    std::vector<unsigned char> pieces(mem.size(), 0), repacked(ref.size(), 0);
    for (Count off = 0; off < static_cast<Count>(ref.size());) {
      const Count len = std::min<Count>(g.next(1, 13), static_cast<Count>(ref.size()) - off);
      t.unpack_range(ref.data() + off, off, len, pieces.data() - blo, count);
      t.pack_range(buf, count, off, len, repacked.data() + off);
      off += len;
    }
    CHECK(pieces == want);
    CHECK(repacked == ref);

    // element counting at every byte boundary
    Count elems = 0;
    Aint at = 0;
    for (Aint e = 0; e < count; ++e)
      for (const Entry& en : map) {
        for (Aint b = 1; b < en.size; ++b) CHECK(!t.get_elements(at + b).has_value());
        at += en.size;
        ++elems;
        CHECK(t.get_elements(at) == elems);
      }
    CHECK(t.get_count(at) == count);
  }
  CHECK(nonempty > 200);
}

// Restores the default flattening threshold when a test ends.
struct flat_limit_guard {
  Count saved = flat_block_limit();
  explicit flat_limit_guard(Count limit) { set_flat_block_limit(limit); }
  ~flat_limit_guard() { set_flat_block_limit(saved); }
};
}  // namespace

TEST_CASE("randomized: pack/unpack/blocks/ranges/elements agree with the reference type map") {
  randomized_against_type_map(0x9e3779b9u);
}

// The same checks with types kept in tree form (packing walks the loop
// nodes lazily): everything derived (limit 0), or only the types with more
// than 1 / 3 blocks, so flat children sit under tree parents.
TEST_CASE("randomized: tree-form types pack exactly like flattened ones") {
  for (Count limit : {0, 1, 3}) {
    CAPTURE(limit);
    flat_limit_guard g(limit);
    randomized_against_type_map(0x9e3779b9u);
  }
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

// ------------------------------------------------------------ external32 --

namespace {
std::vector<unsigned> ext_bytes(const Datatype& t, const void* buf, Count count) {
  std::vector<unsigned char> out(static_cast<std::size_t>(external32::size(t, count)));
  Count pos = 0;
  external32::pack(t, buf, count, out.data(), static_cast<Count>(out.size()), pos);
  REQUIRE(pos == static_cast<Count>(out.size()));
  return {out.begin(), out.end()};
}
}  // namespace

TEST_CASE("external32: the standard's sizes for every basic type") {
  const std::pair<BasicType, std::size_t> sizes[] = {
      {BasicType::Char, 1},          {BasicType::SignedChar, 1},     {BasicType::UnsignedChar, 1},
      {BasicType::Byte, 1},          {BasicType::Short, 2},          {BasicType::UnsignedShort, 2},
      {BasicType::Int, 4},           {BasicType::Unsigned, 4},       {BasicType::Long, 4},
      {BasicType::UnsignedLong, 4},  {BasicType::LongLong, 8},       {BasicType::UnsignedLongLong, 8},
      {BasicType::Float, 4},         {BasicType::Double, 8},         {BasicType::LongDouble, 16},
      {BasicType::WChar, 4},         {BasicType::CBool, 1},          {BasicType::Int8, 1},
      {BasicType::Int16, 2},         {BasicType::Int32, 4},          {BasicType::Int64, 8},
      {BasicType::UInt8, 1},         {BasicType::UInt16, 2},         {BasicType::UInt32, 4},
      {BasicType::UInt64, 8},        {BasicType::CFloatComplex, 8},  {BasicType::CDoubleComplex, 16},
      {BasicType::CLongDoubleComplex, 32}, {BasicType::Aint, 8},     {BasicType::Offset, 8},
      {BasicType::Count, 8},         {BasicType::Packed, 1},         {BasicType::FloatInt, 8},
      {BasicType::DoubleInt, 12},    {BasicType::LongInt, 8},        {BasicType::TwoInt, 8},
      {BasicType::ShortInt, 6},      {BasicType::LongDoubleInt, 20},
  };
  static_assert(std::size(sizes) == kNumBasicTypes);
  for (auto [b, n] : sizes) {
    const std::string name = basic_type_info(b).name;
    CAPTURE(name);
    CHECK(external32::basic_size(b) == n);
    CHECK(external32::size(T(b), 3) == static_cast<Count>(3 * n));
  }
}

namespace {
std::vector<std::pair<Aint, Aint>> blocks_of(Datatype t) {
  t.commit();
  std::vector<std::pair<Aint, Aint>> out;
  for (const Block& b : t.blocks()) out.emplace_back(b.offset, b.length);
  return out;
}
}  // namespace

TEST_CASE("external32: file layout scales counts by external32 extents and keeps byte displacements") {
  using P = std::vector<std::pair<Aint, Aint>>;
  const Datatype lng = T(BasicType::Long);  // 8 bytes here, 4 in external32
  SUBCASE("basic and pair types: one block of their external32 size") {
    CHECK(external32::file_layout(lng).size() == 4);
    CHECK(external32::file_layout(lng).extent() == 4);
    CHECK(external32::file_layout(T(BasicType::DoubleInt)).extent() == 12);
    CHECK(external32::file_layout(T(BasicType::Byte)).extent() == 1);
  }
  SUBCASE("vector: the stride counts external32 elements") {
    const Datatype l = external32::file_layout(Datatype::vector(3, 1, 2, lng));
    CHECK(l.size() == 12);
    CHECK(l.extent() == 20);
    CHECK(blocks_of(l) == P{{0, 4}, {8, 4}, {16, 4}});
  }
  SUBCASE("hvector, hindexed and resized: bytes as given") {
    CHECK(blocks_of(external32::file_layout(Datatype::hvector(2, 1, 16, lng))) == P{{0, 4}, {16, 4}});
    const int bl[] = {1, 2};
    const Aint disp[] = {0, 10};
    CHECK(blocks_of(external32::file_layout(Datatype::hindexed(bl, disp, lng))) == P{{0, 4}, {10, 8}});
    const Datatype r = external32::file_layout(Datatype::create_resized(lng, 0, 12));
    CHECK(r.size() == 4);
    CHECK(r.extent() == 12);
  }
  SUBCASE("indexed and indexed_block count in elements") {
    const int bl[] = {2, 1};
    const int disp[] = {0, 5};
    CHECK(blocks_of(external32::file_layout(Datatype::indexed(bl, disp, lng))) == P{{0, 8}, {20, 4}});
    const int d2[] = {1, 3};
    CHECK(blocks_of(external32::file_layout(Datatype::indexed_block(1, d2, lng))) == P{{4, 4}, {12, 4}});
  }
  SUBCASE("struct: byte displacements as given, no alignment padding") {
    const int bl[] = {1, 1};
    const Aint disp[] = {0, 8};
    const Datatype m[] = {T(BasicType::Int), T(BasicType::Double)};
    const Datatype l = external32::file_layout(Datatype::create_struct(bl, disp, m));
    CHECK(blocks_of(l) == P{{0, 4}, {8, 8}});
    CHECK(l.extent() == 16);
    const Aint packed[] = {0, 4};
    const Datatype d = external32::file_layout(Datatype::create_struct(bl, packed, m));
    CHECK(blocks_of(d) == P{{0, 12}});
    CHECK(d.extent() == 12);
  }
  SUBCASE("subarray and darray: element counts, size equals the external32 size") {
    const int sizes[] = {4, 6}, sub[] = {2, 3}, starts[] = {1, 2};
    const Datatype s = Datatype::create_subarray(sizes, sub, starts, Datatype::Order::C, lng);
    const Datatype l = external32::file_layout(s);
    CHECK(l.extent() == 4 * 6 * 4);
    CHECK(blocks_of(l) == P{{(1 * 6 + 2) * 4, 12}, {(2 * 6 + 2) * 4, 12}});
    const int gs[] = {8}, dargs[] = {Datatype::kDefaultDarg}, ps[] = {2};
    const Datatype::Distribution dist[] = {Datatype::Distribution::Block};
    Datatype da = Datatype::create_darray(2, 1, gs, dist, dargs, ps, Datatype::Order::C, lng);
    da.commit();
    const Datatype dl = external32::file_layout(da);
    CHECK(dl.size() == external32::size(da, 1));
    CHECK(blocks_of(dl) == P{{16, 16}});
    CHECK(dl.extent() == 32);
  }
  SUBCASE("dup and contiguous follow their old type") {
    Datatype c = Datatype::contiguous(3, lng);
    CHECK(external32::file_layout(c.dup()).extent() == 12);
  }
}

TEST_CASE("external32: big-endian bytes") {
  const int i = 1;
  CHECK(ext_bytes(T(BasicType::Int), &i, 1) == std::vector<unsigned>{0, 0, 0, 1});
  const int m = -2;
  CHECK(ext_bytes(T(BasicType::Int), &m, 1) == std::vector<unsigned>{0xff, 0xff, 0xff, 0xfe});
  const double d = 1.0;
  CHECK(ext_bytes(T(BasicType::Double), &d, 1) == std::vector<unsigned>{0x3f, 0xf0, 0, 0, 0, 0, 0, 0});
  const float f = -2.5f;  // 0xc0200000
  CHECK(ext_bytes(T(BasicType::Float), &f, 1) == std::vector<unsigned>{0xc0, 0x20, 0, 0});
  const short s = 0x1234;
  CHECK(ext_bytes(T(BasicType::Short), &s, 1) == std::vector<unsigned>{0x12, 0x34});
  const long l = -3;  // 4 bytes in external32
  CHECK(ext_bytes(T(BasicType::Long), &l, 1) == std::vector<unsigned>{0xff, 0xff, 0xff, 0xfd});
  const long long ll = 0x0102030405060708LL;
  CHECK(ext_bytes(T(BasicType::LongLong), &ll, 1) == std::vector<unsigned>{1, 2, 3, 4, 5, 6, 7, 8});
  const long double ld = 1.0L;  // binary128: 3fff 0000...
  std::vector<unsigned> want_ld(16, 0);
  want_ld[0] = 0x3f, want_ld[1] = 0xff;
  CHECK(ext_bytes(T(BasicType::LongDouble), &ld, 1) == want_ld);
  const long double ldm = -0.75L;  // sign, exponent 3ffe, fraction .1 -> 0x8000 in the top fraction bits
  std::vector<unsigned> want_ldm(16, 0);
  want_ldm[0] = 0xbf, want_ldm[1] = 0xfe, want_ldm[2] = 0x80;
  CHECK(ext_bytes(T(BasicType::LongDouble), &ldm, 1) == want_ldm);
  const DoubleIntPair di{1.0, 7};  // no padding: 8 + 4 bytes
  CHECK(ext_bytes(T(BasicType::DoubleInt), &di, 1) ==
        std::vector<unsigned>{0x3f, 0xf0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7});
  const std::complex<float> cf(1.0f, -2.0f);
  CHECK(ext_bytes(T(BasicType::CFloatComplex), &cf, 1) ==
        std::vector<unsigned>{0x3f, 0x80, 0, 0, 0xc0, 0, 0, 0});
}

TEST_CASE("external32: round trips, derived types, narrowing of long") {
  // every basic type: bytes packed then unpacked come back identical
  // (long double: values exactly representable in 64 bits)
  for (int k = 0; k < kNumBasicTypes; ++k) {
    const BasicType b = static_cast<BasicType>(k);
    const std::string name = basic_type_info(b).name;
    CAPTURE(name);
    const BasicTypeInfo& bi = basic_type_info(b);
    std::vector<unsigned char> in(bi.extent * 4, 0), out(bi.extent * 4, 0);
    for (int e = 0; e < 4; ++e)
      for (int m = 0; m < bi.num_members; ++m)
        for (std::size_t j = 0; j < bi.members[m].size; ++j)
          in[e * bi.extent + bi.members[m].offset + j] = static_cast<unsigned char>(e * 37 + j * 11 + m + 1);
    if (b == BasicType::LongDouble || b == BasicType::CLongDoubleComplex || b == BasicType::LongDoubleInt) {
      for (int e = 0; e < 4; ++e)
        for (int h = 0; h < (b == BasicType::CLongDoubleComplex ? 2 : 1); ++h) {
          const long double x = -1.5L * (e + 1) + h * 1e300L;
          unsigned char* at = in.data() + e * bi.extent + h * sizeof(long double);
          std::memset(at, 0, sizeof(long double));  // x87: 10 data bytes, the padding stays 0
          std::memcpy(at, &x, 10);
        }
    }
    if (b == BasicType::CBool)
      for (int e = 0; e < 4; ++e) in[e] = e % 2;
    if (b == BasicType::Long || b == BasicType::UnsignedLong || b == BasicType::LongInt) {
      for (int e = 0; e < 4; ++e) {  // values that fit 32 bits
        long v = (b == BasicType::UnsignedLong) ? 4000000000L - e : -2000000000L + e;
        std::memcpy(in.data() + e * bi.extent, &v, sizeof v);
      }
    }
    const Datatype t = T(b);
    std::vector<unsigned char> ext(static_cast<std::size_t>(external32::size(t, 4)));
    Count pos = 0;
    external32::pack(t, in.data(), 4, ext.data(), static_cast<Count>(ext.size()), pos);
    pos = 0;
    external32::unpack(t, ext.data(), static_cast<Count>(ext.size()), pos, out.data(), 4);
    CHECK(pos == static_cast<Count>(ext.size()));
    for (int e = 0; e < 4; ++e)
      for (int m = 0; m < bi.num_members; ++m) {
        const std::size_t at = e * bi.extent + bi.members[m].offset;
        CHECK(std::memcmp(in.data() + at, out.data() + at, bi.members[m].size) == 0);
      }
  }
  // a long outside 32 bits keeps its low bits; negative values sign-extend back
  const long big = 0x123456789L, neg = -5;
  long back = 0;
  const Datatype lt = T(BasicType::Long);
  CHECK(ext_bytes(lt, &big, 1) == std::vector<unsigned>{0x23, 0x45, 0x67, 0x89});
  unsigned char e4[4];
  Count pos = 0;
  external32::pack(lt, &neg, 1, e4, 4, pos);
  pos = 0;
  external32::unpack(lt, e4, 4, pos, &back, 1);
  CHECK(back == -5);

  // a derived type mixing sizes: struct {char c; long l; double d[2];} in a vector
  struct S { char c; long l; double d[2]; };
  const int bl[] = {1, 1, 2};
  const Aint disp[] = {offsetof(S, c), offsetof(S, l), offsetof(S, d)};
  const Datatype types[] = {T(BasicType::Char), T(BasicType::Long), T(BasicType::Double)};
  Datatype st = Datatype::create_struct(bl, disp, types);
  Datatype v = Datatype::vector(2, 1, 2, st);
  v.commit();
  CHECK(external32::size(v, 1) == 2 * (1 + 4 + 16));
  S a[3] = {{'x', 1, {1.0, 2.0}}, {'?', 99, {9, 9}}, {'y', -2, {3.0, -4.0}}};
  const std::vector<unsigned> got = ext_bytes(v, a, 1);
  const std::vector<unsigned> want = {'x', 0, 0, 0, 1, 0x3f, 0xf0, 0, 0, 0, 0, 0, 0, 0x40, 0, 0, 0, 0, 0, 0, 0,
                                      'y', 0xff, 0xff, 0xff, 0xfe, 0x40, 0x08, 0, 0, 0, 0, 0, 0,
                                      0xc0, 0x10, 0, 0, 0, 0, 0, 0};
  CHECK(got == want);
  S b[3] = {};
  std::vector<unsigned char> raw(got.begin(), got.end());
  pos = 0;
  external32::unpack(v, raw.data(), static_cast<Count>(raw.size()), pos, b, 1);
  CHECK(b[0].c == 'x');
  CHECK(b[0].l == 1);
  CHECK(b[0].d[1] == 2.0);
  CHECK(b[1].l == 0);  // the hole between the two vector blocks
  CHECK(b[2].l == -2);
  CHECK(b[2].d[1] == -4.0);
  // too little room
  unsigned char small[10];
  pos = 0;
  CHECK_THROWS_AS(external32::pack(v, a, 1, small, 10, pos), DatatypeError);
  pos = 0;
  CHECK_THROWS_AS(external32::unpack(v, small, 10, pos, b, 1), DatatypeError);
}

// ------------------------------------------------------------------ darray --

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
