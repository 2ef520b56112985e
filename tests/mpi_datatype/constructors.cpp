// The MPI datatype engine's constructors: sizes, bounds and flattened blocks
// of every kind (contiguous, vector, indexed, struct, resized, dup) against
// hand-computed values and the C compiler's struct layouts, empty and
// zero-blocklength types, huge vectors built in O(1), and the errors each
// constructor and an uncommitted type raise. The other files of this
// directory make up the rest of //tests:mpi_datatype_test.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <utility>
#include <vector>

#include "tests/mpi_datatype/datatype_helpers.hpp"

using namespace nmad_test::datatype;

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
