// The external32 representation (MPI-IO's portable data format): the
// standard's size of every basic type, the file layout derived types get in
// it, big-endian bytes, and round trips through derived types with the
// narrowing of long.
#include <doctest/doctest.h>

#include <complex>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "mpi_layer/datatype/external32.hpp"
#include "tests/mpi_datatype/datatype_helpers.hpp"

using namespace nmad_test::datatype;

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
