// MPI reduction ops: every predefined op on every type family the standard
// allows, exact results (wrap-around, complex products, MINLOC/MAXLOC ties),
// rejected combinations, commutativity and user-defined ops.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <climits>
#include <complex>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "mpi_layer/datatype/datatype.hpp"
#include "mpi_layer/op/op.hpp"

using namespace nmad::mpi;

namespace {

template <class V>
V run(PredefinedOp op, V in, V inout, BasicType t) {
  apply(op, in.data(), inout.data(), static_cast<Count>(in.size()), t);
  return inout;
}

constexpr BasicType kCIntegers[] = {
    BasicType::SignedChar, BasicType::UnsignedChar, BasicType::Short,    BasicType::UnsignedShort,
    BasicType::Int,        BasicType::Unsigned,     BasicType::Long,     BasicType::UnsignedLong,
    BasicType::LongLong,   BasicType::UnsignedLongLong, BasicType::Int8, BasicType::Int16,
    BasicType::Int32,      BasicType::Int64,        BasicType::UInt8,    BasicType::UInt16,
    BasicType::UInt32,     BasicType::UInt64};
constexpr BasicType kMultiLang[] = {BasicType::Aint, BasicType::Offset, BasicType::Count};
// Every type the integer ops take: C integers, multi-language types and
// MPI_CHAR (an extension: MPICH and Open MPI reduce it as a C char).
std::vector<BasicType> all_integers() {
  std::vector<BasicType> all(std::begin(kCIntegers), std::end(kCIntegers));
  all.insert(all.end(), std::begin(kMultiLang), std::end(kMultiLang));
  all.push_back(BasicType::Char);
  return all;
}
constexpr BasicType kFloating[] = {BasicType::Float, BasicType::Double, BasicType::LongDouble};
constexpr BasicType kComplex[] = {BasicType::CFloatComplex, BasicType::CDoubleComplex,
                                  BasicType::CLongDoubleComplex};
constexpr BasicType kPairs[] = {BasicType::FloatInt, BasicType::DoubleInt, BasicType::LongInt,
                                BasicType::TwoInt,   BasicType::ShortInt,  BasicType::LongDoubleInt};

// Runs f.template operator()<T>(t) with T the C type behind integer type t.
template <class F>
void with_int_type(BasicType t, F&& f) {
  switch (t) {
    case BasicType::Char: return f.template operator()<char>(t);
    case BasicType::SignedChar: return f.template operator()<signed char>(t);
    case BasicType::UnsignedChar: return f.template operator()<unsigned char>(t);
    case BasicType::Short: return f.template operator()<short>(t);
    case BasicType::UnsignedShort: return f.template operator()<unsigned short>(t);
    case BasicType::Int: return f.template operator()<int>(t);
    case BasicType::Unsigned: return f.template operator()<unsigned>(t);
    case BasicType::Long: return f.template operator()<long>(t);
    case BasicType::UnsignedLong: return f.template operator()<unsigned long>(t);
    case BasicType::LongLong: return f.template operator()<long long>(t);
    case BasicType::UnsignedLongLong: return f.template operator()<unsigned long long>(t);
    case BasicType::Int8: return f.template operator()<std::int8_t>(t);
    case BasicType::Int16: return f.template operator()<std::int16_t>(t);
    case BasicType::Int32: return f.template operator()<std::int32_t>(t);
    case BasicType::Int64: return f.template operator()<std::int64_t>(t);
    case BasicType::UInt8: return f.template operator()<std::uint8_t>(t);
    case BasicType::UInt16: return f.template operator()<std::uint16_t>(t);
    case BasicType::UInt32: return f.template operator()<std::uint32_t>(t);
    case BasicType::UInt64: return f.template operator()<std::uint64_t>(t);
    case BasicType::Aint: return f.template operator()<AintT>(t);
    case BasicType::Offset: return f.template operator()<OffsetT>(t);
    case BasicType::Count: return f.template operator()<CountT>(t);
    default: FAIL("not an integer type");
  }
}

}  // namespace

TEST_CASE("SUM/PROD/MAX/MIN on every C integer, multi-language type and MPI_CHAR") {
  for (BasicType t : all_integers()) {
    CAPTURE(basic_type_info(t).name);
    with_int_type(t, []<class T>(BasicType bt) {
      using L = std::numeric_limits<T>;
      const std::vector<T> a = {T(3), T(7), T(0), L::max(), T(5)};
      const std::vector<T> b = {T(4), T(2), T(9), T(1), T(5)};
      CHECK(run(PredefinedOp::Sum, a, b, bt) == std::vector<T>{T(7), T(9), T(9), L::min(), T(10)});
      CHECK(run(PredefinedOp::Prod, a, b, bt) ==
            std::vector<T>{T(12), T(14), T(0), L::max(), T(25)});
      CHECK(run(PredefinedOp::Max, a, b, bt) == std::vector<T>{T(4), T(7), T(9), L::max(), T(5)});
      CHECK(run(PredefinedOp::Min, a, b, bt) == std::vector<T>{T(3), T(2), T(0), T(1), T(5)});
      if constexpr (L::is_signed) {
        const std::vector<T> n = {T(-3), L::min(), T(-1)};
        const std::vector<T> m = {T(2), T(-1), T(-1)};
        CHECK(run(PredefinedOp::Sum, n, m, bt) == std::vector<T>{T(-1), L::max(), T(-2)});
        CHECK(run(PredefinedOp::Max, n, m, bt) == std::vector<T>{T(2), T(-1), T(-1)});
        CHECK(run(PredefinedOp::Min, n, m, bt) == std::vector<T>{T(-3), L::min(), T(-1)});
        CHECK(run(PredefinedOp::Prod, n, m, bt) == std::vector<T>{T(-6), L::min(), T(1)});  // min*-1 wraps
      }
    });
  }
}

TEST_CASE("SUM/PROD/MAX/MIN on floating point") {
  CHECK(run(PredefinedOp::Sum, std::vector<float>{1.5f, -2.f}, std::vector<float>{0.25f, 8.f},
            BasicType::Float) == std::vector<float>{1.75f, 6.f});
  CHECK(run(PredefinedOp::Prod, std::vector<double>{1.5, -2.0, 1e300},
            std::vector<double>{4.0, 8.0, 1e10}, BasicType::Double) ==
        std::vector<double>{6.0, -16.0, std::numeric_limits<double>::infinity()});
  CHECK(run(PredefinedOp::Max, std::vector<long double>{1.0L, -3.0L}, std::vector<long double>{2.0L, -4.0L},
            BasicType::LongDouble) == std::vector<long double>{2.0L, -3.0L});
  CHECK(run(PredefinedOp::Min, std::vector<double>{-0.5, 3.0}, std::vector<double>{0.5, 2.0},
            BasicType::Double) == std::vector<double>{-0.5, 2.0});
  // the long double value is exact beyond double precision
  const long double big = 1.0L + 1.0L / 4096.0L / 4096.0L / 4096.0L / 4096.0L / 4096.0L;  // 1 + 2^-60
  CHECK(run(PredefinedOp::Sum, std::vector<long double>{big}, std::vector<long double>{1.0L},
            BasicType::LongDouble)[0] == 1.0L + big);
}

TEST_CASE("SUM/PROD on C complex types") {
  using CF = std::complex<float>;
  using CD = std::complex<double>;
  using CL = std::complex<long double>;
  CHECK(run(PredefinedOp::Sum, std::vector<CF>{{1, 2}, {-1, 0.5f}}, std::vector<CF>{{3, -4}, {1, 1}},
            BasicType::CFloatComplex) == std::vector<CF>{{4, -2}, {0, 1.5f}});
  // (1+2i)(3-4i) = 3 - 4i + 6i + 8 = 11 + 2i ; (0+1i)(0+1i) = -1
  CHECK(run(PredefinedOp::Prod, std::vector<CD>{{1, 2}, {0, 1}}, std::vector<CD>{{3, -4}, {0, 1}},
            BasicType::CDoubleComplex) == std::vector<CD>{{11, 2}, {-1, 0}});
  CHECK(run(PredefinedOp::Prod, std::vector<CL>{{2, 0}}, std::vector<CL>{{0.5L, -3}},
            BasicType::CLongDoubleComplex) == std::vector<CL>{{1, -6}});
  for (BasicType t : kComplex) {
    CAPTURE(basic_type_info(t).name);
    CHECK(op_allowed(PredefinedOp::Sum, t));
    CHECK(op_allowed(PredefinedOp::Prod, t));
    CHECK(!op_allowed(PredefinedOp::Max, t));
    CHECK(!op_allowed(PredefinedOp::Min, t));
    CHECK(!op_allowed(PredefinedOp::Land, t));
    CHECK(!op_allowed(PredefinedOp::Band, t));
  }
}

TEST_CASE("LAND/LOR/LXOR on every integer type (MPI_AINT/OFFSET/COUNT, MPI_CHAR too): results are 0/1") {
  for (BasicType t : all_integers()) {
    CAPTURE(basic_type_info(t).name);
    with_int_type(t, []<class T>(BasicType bt) {
      const std::vector<T> a = {T(0), T(0), T(5), T(2)};
      const std::vector<T> b = {T(0), T(3), T(0), T(6)};
      CHECK(run(PredefinedOp::Land, a, b, bt) == std::vector<T>{T(0), T(0), T(0), T(1)});
      CHECK(run(PredefinedOp::Lor, a, b, bt) == std::vector<T>{T(0), T(1), T(1), T(1)});
      CHECK(run(PredefinedOp::Lxor, a, b, bt) == std::vector<T>{T(0), T(1), T(1), T(0)});
    });
  }
  for (BasicType t : kMultiLang)
    for (PredefinedOp op : {PredefinedOp::Land, PredefinedOp::Lor, PredefinedOp::Lxor}) CHECK(op_allowed(op, t));
}

TEST_CASE("LAND/LOR/LXOR on C bool, including non-canonical true bytes") {
  // raw bytes as they may arrive from the wire: 2 and 0xff mean true
  std::vector<unsigned char> a = {0, 0, 1, 2, 0xff};
  std::vector<unsigned char> b = {0, 1, 0, 1, 7};
  CHECK(run(PredefinedOp::Land, a, b, BasicType::CBool) == std::vector<unsigned char>{0, 0, 0, 1, 1});
  CHECK(run(PredefinedOp::Lor, a, b, BasicType::CBool) == std::vector<unsigned char>{0, 1, 1, 1, 1});
  CHECK(run(PredefinedOp::Lxor, a, b, BasicType::CBool) == std::vector<unsigned char>{0, 1, 1, 0, 0});
  bool x[2] = {true, false}, y[2] = {true, true};
  apply(PredefinedOp::Land, x, y, 2, BasicType::CBool);
  CHECK(y[0]);
  CHECK(!y[1]);
  for (PredefinedOp op : {PredefinedOp::Max, PredefinedOp::Min, PredefinedOp::Sum, PredefinedOp::Prod,
                          PredefinedOp::Band, PredefinedOp::Bor, PredefinedOp::Bxor, PredefinedOp::Maxloc})
    CHECK(!op_allowed(op, BasicType::CBool));
}

TEST_CASE("BAND/BOR/BXOR on integers, multi-language types, MPI_CHAR and MPI_BYTE") {
  for (BasicType t : all_integers()) {
    CAPTURE(basic_type_info(t).name);
    with_int_type(t, []<class T>(BasicType bt) {
      const std::vector<T> a = {T(0x5a), T(0x0f), static_cast<T>(~T(0))};
      const std::vector<T> b = {T(0x3c), T(0x70), T(0x11)};
      CHECK(run(PredefinedOp::Band, a, b, bt) == std::vector<T>{T(0x18), T(0x00), T(0x11)});
      CHECK(run(PredefinedOp::Bor, a, b, bt) == std::vector<T>{T(0x7e), T(0x7f), static_cast<T>(~T(0))});
      CHECK(run(PredefinedOp::Bxor, a, b, bt) ==
            std::vector<T>{T(0x66), T(0x7f), static_cast<T>(~T(0) ^ T(0x11))});
    });
  }
  const std::vector<unsigned char> a = {0xf0, 0xaa, 0x00};
  const std::vector<unsigned char> b = {0x3c, 0x55, 0xff};
  CHECK(run(PredefinedOp::Band, a, b, BasicType::Byte) == std::vector<unsigned char>{0x30, 0x00, 0x00});
  CHECK(run(PredefinedOp::Bor, a, b, BasicType::Byte) == std::vector<unsigned char>{0xfc, 0xff, 0xff});
  CHECK(run(PredefinedOp::Bxor, a, b, BasicType::Byte) == std::vector<unsigned char>{0xcc, 0xff, 0xff});
  for (PredefinedOp op : {PredefinedOp::Max, PredefinedOp::Sum, PredefinedOp::Land, PredefinedOp::Minloc})
    CHECK(!op_allowed(op, BasicType::Byte));
}

TEST_CASE("MAXLOC/MINLOC on every pair type, ties keep the smaller index") {
  auto test_pair = [](auto tag, BasicType t) {
    using P = decltype(tag);
    using V = decltype(P::v);
    CAPTURE(basic_type_info(t).name);
    // in, inout: (value, index)
    P in[4] = {{V(5), 1}, {V(2), 7}, {V(3), 9}, {V(3), 2}};
    P io[4] = {{V(4), 0}, {V(6), 3}, {V(3), 4}, {V(3), 8}};
    P mx[4], mn[4];
    std::memcpy(mx, io, sizeof io);
    std::memcpy(mn, io, sizeof io);
    apply(PredefinedOp::Maxloc, in, mx, 4, t);
    apply(PredefinedOp::Minloc, in, mn, 4, t);
    const V mxv[4] = {V(5), V(6), V(3), V(3)};
    const int mxi[4] = {1, 3, 4, 2};  // ties: min(9,4)=4, min(2,8)=2
    const V mnv[4] = {V(4), V(2), V(3), V(3)};
    const int mni[4] = {0, 7, 4, 2};
    for (int k = 0; k < 4; ++k) {
      CAPTURE(k);
      CHECK(mx[k].v == mxv[k]);
      CHECK(mx[k].i == mxi[k]);
      CHECK(mn[k].v == mnv[k]);
      CHECK(mn[k].i == mni[k]);
    }
    // negative values and a reduction chain across 3 "ranks"
    P r0{V(-1), 0}, r1{V(-1), 1}, r2{V(-7), 2};
    P acc = r2;
    apply(PredefinedOp::Maxloc, &r1, &acc, 1, t);
    apply(PredefinedOp::Maxloc, &r0, &acc, 1, t);
    CHECK(acc.v == V(-1));
    CHECK(acc.i == 0);
  };
  test_pair(FloatIntPair{}, BasicType::FloatInt);
  test_pair(DoubleIntPair{}, BasicType::DoubleInt);
  test_pair(LongIntPair{}, BasicType::LongInt);
  test_pair(TwoIntPair{}, BasicType::TwoInt);
  test_pair(ShortIntPair{}, BasicType::ShortInt);
  test_pair(LongDoubleIntPair{}, BasicType::LongDoubleInt);
  for (BasicType t : kPairs) {
    for (PredefinedOp op : {PredefinedOp::Max, PredefinedOp::Sum, PredefinedOp::Land, PredefinedOp::Band})
      CHECK(!op_allowed(op, t));
  }
}

TEST_CASE("REPLACE and NO_OP on every basic type") {
  for (int ti = 0; ti < kNumBasicTypes; ++ti) {
    const BasicType t = static_cast<BasicType>(ti);
    CAPTURE(basic_type_info(t).name);
    CHECK(op_allowed(PredefinedOp::Replace, t));
    CHECK(op_allowed(PredefinedOp::NoOp, t));
    const std::size_t ext = basic_type_info(t).extent;
    std::vector<unsigned char> in(3 * ext), io(3 * ext);
    for (std::size_t k = 0; k < in.size(); ++k) {
      in[k] = static_cast<unsigned char>(k + 1);
      io[k] = static_cast<unsigned char>(200 - k);
    }
    const std::vector<unsigned char> before = io;
    apply(PredefinedOp::NoOp, in.data(), io.data(), 3, t);
    CHECK(io == before);
    apply(PredefinedOp::Replace, in.data(), io.data(), 3, t);
    CHECK(io == in);
  }
}

TEST_CASE("the allowed-combination matrix: MPI-3.1 5.9.2 plus MPI_CHAR and logical ops on MPI_AINT/OFFSET/COUNT") {
  using O = PredefinedOp;
  for (int ti = 0; ti < kNumBasicTypes; ++ti) {
    const BasicType t = static_cast<BasicType>(ti);
    CAPTURE(basic_type_info(t).name);
    auto in = [t](auto& arr) {
      for (BasicType x : arr)
        if (x == t) return true;
      return false;
    };
    const bool fl = in(kFloating), cx = in(kComplex), pr = in(kPairs), lg = t == BasicType::CBool,
               by = t == BasicType::Byte;
    const bool integer = in(kCIntegers) || in(kMultiLang) || t == BasicType::Char;
    CHECK(op_allowed(O::Max, t) == (integer || fl));
    CHECK(op_allowed(O::Min, t) == (integer || fl));
    CHECK(op_allowed(O::Sum, t) == (integer || fl || cx));
    CHECK(op_allowed(O::Prod, t) == (integer || fl || cx));
    CHECK(op_allowed(O::Land, t) == (integer || lg));
    CHECK(op_allowed(O::Lor, t) == (integer || lg));
    CHECK(op_allowed(O::Lxor, t) == (integer || lg));
    CHECK(op_allowed(O::Band, t) == (integer || by));
    CHECK(op_allowed(O::Bor, t) == (integer || by));
    CHECK(op_allowed(O::Bxor, t) == (integer || by));
    CHECK(op_allowed(O::Maxloc, t) == pr);
    CHECK(op_allowed(O::Minloc, t) == pr);
  }
  // the non-numeric types only take REPLACE / NO_OP
  for (BasicType t : {BasicType::WChar, BasicType::Packed})
    for (int oi = 0; oi < kNumPredefinedOps; ++oi) {
      const PredefinedOp op = static_cast<PredefinedOp>(oi);
      CHECK(op_allowed(op, t) == (op == O::Replace || op == O::NoOp));
    }
}

TEST_CASE("disallowed combinations and bad counts throw OpError") {
  float f[2] = {1, 2}, g[2] = {3, 4};
  auto code_of = [](auto&& fn) {
    try {
      fn();
    } catch (const OpError& e) {
      return e.code();
    }
    return OpErrc{};
  };
  CHECK(code_of([&] { apply(PredefinedOp::Land, f, g, 2, BasicType::Float); }) == OpErrc::unsupported_type);
  CHECK(code_of([&] { apply(PredefinedOp::Bxor, f, g, 2, BasicType::Float); }) == OpErrc::unsupported_type);
  CHECK(code_of([&] { apply(PredefinedOp::Maxloc, f, g, 1, BasicType::Double); }) == OpErrc::unsupported_type);
  CHECK(code_of([&] { apply(PredefinedOp::Sum, f, g, 2, BasicType::WChar); }) == OpErrc::unsupported_type);
  CHECK(code_of([&] { apply(PredefinedOp::Sum, f, g, 1, BasicType::DoubleInt); }) == OpErrc::unsupported_type);
  CHECK(code_of([&] { apply(PredefinedOp::Max, f, g, 0, BasicType::CFloatComplex); }) ==
        OpErrc::unsupported_type);
  CHECK(code_of([&] { apply(PredefinedOp::Sum, f, g, -1, BasicType::Float); }) == OpErrc::invalid_count);
  CHECK(code_of([&] { apply(static_cast<PredefinedOp>(99), f, g, 1, BasicType::Float); }) ==
        OpErrc::invalid_op);
  // nothing was modified by the failed calls
  CHECK(g[0] == 3);
  CHECK(g[1] == 4);
  try {
    apply(PredefinedOp::Land, f, g, 2, BasicType::Float);
  } catch (const OpError& e) {
    CHECK(std::string(e.what()).find("MPI_LAND") != std::string::npos);
    CHECK(std::string(e.what()).find("MPI_FLOAT") != std::string::npos);
  }
  CHECK(code_of([&] { Op::user(nullptr, true); }) == OpErrc::invalid_op);
}

TEST_CASE("commutativity flags") {
  for (int oi = 0; oi < kNumPredefinedOps; ++oi) {
    const PredefinedOp op = static_cast<PredefinedOp>(oi);
    CAPTURE(op_name(op));
    CHECK(Op(op).is_predefined());
    CHECK(Op(op).is_commutative() == (op != PredefinedOp::Replace));
  }
  CHECK(std::string(op_name(PredefinedOp::Minloc)) == "MPI_MINLOC");
}

namespace {
int g_last_len = -1;
int g_last_handle = -1;
// non-commutative user op: inout = in * 10 + inout  (element = int)
void concat_digits(void* in, void* inout, int* len, int* dt) {
  g_last_len = *len;
  g_last_handle = *dt;
  const int* a = static_cast<const int*>(in);
  int* b = static_cast<int*>(inout);
  for (int k = 0; k < *len; ++k) b[k] = a[k] * 10 + b[k];
}
}  // namespace

TEST_CASE("user-defined ops: signature, handle pass-through, commute flag") {
  const Op u = Op::user(&concat_digits, false);
  CHECK(!u.is_predefined());
  CHECK(!u.is_commutative());
  CHECK((u.user_function() == &concat_digits));
  CHECK(Op::user(&concat_digits, true).is_commutative());
  int in[3] = {1, 2, 3}, io[3] = {4, 5, 6};
  u.reduce(in, io, 3, BasicType::Int, /*datatype_handle=*/0x4c00'0405);
  CHECK(io[0] == 14);
  CHECK(io[1] == 25);
  CHECK(io[2] == 36);
  CHECK(g_last_len == 3);
  CHECK(g_last_handle == 0x4c00'0405);
  u.reduce_user(in, io, 2, 77);
  CHECK(io[0] == 24);
  CHECK(g_last_handle == 77);
  CHECK(g_last_len == 2);
  CHECK_THROWS_AS(u.reduce_user(in, io, Count{INT_MAX} + 1, 1), OpError);
  CHECK_THROWS_AS(Op(PredefinedOp::Sum).reduce_user(in, io, 1, 1), OpError);
  // predefined through the same entry point
  Op(PredefinedOp::Sum).reduce(in, io, 3, BasicType::Int, 0);
  CHECK(io[2] == 39);
}

TEST_CASE("unaligned buffers and reducing a derived type block by block") {
  // doubles at odd addresses (e.g. inside a packed receive buffer)
  alignas(8) unsigned char raw_in[1 + 3 * sizeof(double)];
  alignas(8) unsigned char raw_io[1 + 3 * sizeof(double)];
  const double a[3] = {1.0, 2.0, 3.0}, b[3] = {0.5, 0.25, 0.125};
  std::memcpy(raw_in + 1, a, sizeof a);
  std::memcpy(raw_io + 1, b, sizeof b);
  apply(PredefinedOp::Sum, raw_in + 1, raw_io + 1, 3, BasicType::Double);
  double r[3];
  std::memcpy(r, raw_io + 1, sizeof r);
  CHECK(r[0] == 1.5);
  CHECK(r[1] == 2.25);
  CHECK(r[2] == 3.125);

  // MPI_SUM over vector(3, 1, 2, MPI_INT): walk matching blocks of both buffers
  Datatype v = Datatype::vector(3, 1, 2, Datatype::basic(BasicType::Int));
  v.commit();
  int x[5] = {1, 100, 2, 100, 3}, y[5] = {10, -1, 20, -1, 30};
  std::vector<std::pair<const void*, std::size_t>> xb;
  v.for_each_block(static_cast<const void*>(x), 1, [&](const void* p, std::size_t n) { xb.emplace_back(p, n); });
  std::size_t k = 0;
  v.for_each_block(static_cast<void*>(y), 1, [&](void* p, std::size_t n) {
    REQUIRE(xb[k].second == n);
    apply(PredefinedOp::Sum, xb[k].first, p, static_cast<Count>(n / sizeof(int)), BasicType::Int);
    ++k;
  });
  CHECK(std::vector<int>(y, y + 5) == std::vector<int>{11, -1, 22, -1, 33});
}

TEST_CASE("predefined ops on derived datatypes built from one basic type") {
  const Datatype i32 = Datatype::basic(BasicType::Int);
  // vector(3, 2, 3, int): 2 of every 3 ints, count 2
  Datatype v = Datatype::vector(3, 2, 3, i32);
  v.commit();
  CHECK(v.uniform_basic_type() == BasicType::Int);
  int in[16], io[16];
  for (int k = 0; k < 16; ++k) {
    in[k] = k;
    io[k] = 100 * k;
  }
  apply(PredefinedOp::Sum, in, io, 2, v);
  for (int k = 0; k < 16; ++k) {
    CAPTURE(k);
    // element 1 starts at extent = 8 ints: the holes are 2, 5 and 10, 13
    const bool skipped = k == 2 || k == 5 || k == 10 || k == 13;
    CHECK(io[k] == (skipped ? 100 * k : 101 * k));
  }

  // contiguous of a pair type keeps the pair stride (padding included)
  Datatype c = Datatype::contiguous(2, Datatype::basic(BasicType::DoubleInt));
  c.commit();
  DoubleIntPair a[4] = {{1.0, 5}, {2.0, 1}, {3.0, 3}, {-1.0, 0}};
  DoubleIntPair b[4] = {{1.0, 2}, {9.0, 0}, {0.0, 7}, {-1.0, 4}};
  Op(PredefinedOp::Maxloc).reduce(a, b, 2, c, /*handle=*/0);
  CHECK(b[0].v == 1.0);
  CHECK(b[0].i == 2);
  CHECK(b[1].v == 9.0);
  CHECK(b[1].i == 0);
  CHECK(b[2].v == 3.0);
  CHECK(b[2].i == 3);
  CHECK(b[3].v == -1.0);
  CHECK(b[3].i == 0);

  // negative stride, resized: fast paths and slow paths agree with a scalar loop
  Datatype r = Datatype::create_resized(Datatype::vector(2, 1, -1, Datatype::basic(BasicType::Double)), 0, 16);
  r.commit();
  double x[8], y[8], z[8];
  for (int k = 0; k < 8; ++k) {
    x[k] = k + 1;
    y[k] = 10.0 * (k + 1);
    z[k] = y[k];
  }
  apply(PredefinedOp::Prod, x + 1, y + 1, 3, r);  // touches [0..5]
  for (int k = 0; k < 6; ++k) z[k] *= x[k];
  CHECK(std::vector<double>(y, y + 8) == std::vector<double>(z, z + 8));

  // contiguous types go through one call
  Datatype cc = Datatype::contiguous(4, Datatype::basic(BasicType::UInt8));
  cc.commit();
  std::uint8_t p[8] = {1, 2, 3, 4, 5, 6, 7, 8}, q[8] = {8, 7, 6, 5, 4, 3, 2, 1};
  apply(PredefinedOp::Max, p, q, 2, cc);
  CHECK(std::vector<int>(q, q + 8) == std::vector<int>{8, 7, 6, 5, 5, 6, 7, 8});
}

TEST_CASE("derived-type reductions reject mixed, disallowed and uncommitted types") {
  const int bl[] = {1, 1};
  const Aint disp[] = {0, 8};
  const Datatype types[] = {Datatype::basic(BasicType::Int), Datatype::basic(BasicType::Double)};
  Datatype mixed = Datatype::create_struct(bl, disp, types);
  mixed.commit();
  CHECK(!mixed.uniform_basic_type());
  CHECK_THROWS_AS(mixed.element_runs(), DatatypeError);
  unsigned char in[16] = {}, io[16] = {};
  try {
    apply(PredefinedOp::Sum, in, io, 1, mixed);
    FAIL("expected OpError");
  } catch (const OpError& e) {
    CHECK(e.code() == OpErrc::unsupported_type);
  }
  Datatype fv = Datatype::vector(2, 1, 2, Datatype::basic(BasicType::Float));
  CHECK_THROWS_AS(apply(PredefinedOp::Sum, in, io, 1, fv), DatatypeError);  // uncommitted
  fv.commit();
  CHECK_THROWS_AS(apply(PredefinedOp::Bor, in, io, 1, fv), OpError);
  CHECK_THROWS_AS(apply(PredefinedOp::Sum, in, io, -1, fv), OpError);
  // user ops accept any datatype: only the handle is passed on
  const Op u = Op::user(&concat_digits, true);
  int a[2] = {1, 2}, b[2] = {3, 4};
  u.reduce(a, b, 2, mixed, 9);
  CHECK(g_last_handle == 9);
  CHECK(b[1] == 24);
}

TEST_CASE("apply_packed: reductions on packed operands (pair types without padding)") {
  // pack two MPI_DOUBLE_INT operands (12 bytes each), reduce packed, unpack:
  // same result as reducing the C structs in place
  const Datatype di = Datatype::basic(BasicType::DoubleInt);
  DoubleIntPair a[3] = {{1.0, 4}, {5.0, 2}, {-2.0, 9}};
  DoubleIntPair b[3] = {{1.0, 3}, {4.0, 8}, {-1.0, 1}};
  std::vector<unsigned char> pa(36), pb(36);
  Count pos = 0;
  di.pack(a, 3, pa.data(), 36, pos);
  pos = 0;
  di.pack(b, 3, pb.data(), 36, pos);
  apply_packed(PredefinedOp::Minloc, pa.data(), pb.data(), 3, di);
  DoubleIntPair out[3] = {};
  pos = 0;
  di.unpack(pb.data(), 36, pos, out, 3);
  apply(PredefinedOp::Minloc, a, b, 3, BasicType::DoubleInt);
  for (int k = 0; k < 3; ++k) {
    CAPTURE(k);
    CHECK(out[k].v == b[k].v);
    CHECK(out[k].i == b[k].i);
  }
  CHECK(out[0].i == 3);   // tie -> smaller index
  CHECK(out[1].v == 4.0);
  CHECK(out[2].v == -2.0);

  // every pair type, MAXLOC with a tie, packed by hand: value bytes then int
  auto check_pair = [](auto tag, BasicType t) {
    using V = decltype(decltype(tag)::v);
    CAPTURE(basic_type_info(t).name);
    constexpr std::size_t w = sizeof(V) + sizeof(int);
    unsigned char x[2 * w], y[2 * w];
    auto put = [&](unsigned char* p, V v, int i) {
      std::memcpy(p, &v, sizeof v);
      std::memcpy(p + sizeof v, &i, sizeof i);
    };
    put(x, V(7), 5);
    put(x + w, V(1), 0);
    put(y, V(7), 2);
    put(y + w, V(3), 6);
    apply_packed(PredefinedOp::Maxloc, x, y, 2, t);
    V v0, v1;
    int i0, i1;
    std::memcpy(&v0, y, sizeof v0);
    std::memcpy(&i0, y + sizeof(V), 4);
    std::memcpy(&v1, y + w, sizeof v1);
    std::memcpy(&i1, y + w + sizeof(V), 4);
    CHECK(v0 == V(7));
    CHECK(i0 == 2);
    CHECK(v1 == V(3));
    CHECK(i1 == 6);
    // REPLACE copies exactly the packed bytes
    unsigned char z[2 * w + 1];
    z[2 * w] = 0xab;
    apply_packed(PredefinedOp::Replace, x, z, 2, t);
    CHECK(std::memcmp(z, x, 2 * w) == 0);
    CHECK(z[2 * w] == 0xab);
  };
  check_pair(FloatIntPair{}, BasicType::FloatInt);
  check_pair(DoubleIntPair{}, BasicType::DoubleInt);
  check_pair(LongIntPair{}, BasicType::LongInt);
  check_pair(TwoIntPair{}, BasicType::TwoInt);
  check_pair(ShortIntPair{}, BasicType::ShortInt);
  check_pair(LongDoubleIntPair{}, BasicType::LongDoubleInt);

  // derived type: packed vector(2, 1, 3, int) is just 2 ints per element
  Datatype v = Datatype::vector(2, 1, 3, Datatype::basic(BasicType::Int));
  v.commit();
  int p[4] = {1, 2, 3, 4}, q[4] = {10, 20, 30, 40};
  Op(PredefinedOp::Prod).reduce_packed(p, q, 2, v);
  CHECK(std::vector<int>(q, q + 4) == std::vector<int>{10, 40, 90, 160});
  CHECK_THROWS_AS(Op::user(&concat_digits, true).reduce_packed(p, q, 2, v), OpError);
  CHECK_THROWS_AS(apply_packed(PredefinedOp::Sum, p, q, 1, BasicType::TwoInt), OpError);
  CHECK_THROWS_AS(apply_packed(PredefinedOp::Maxloc, p, q, -1, BasicType::TwoInt), OpError);
}

namespace {
// Reference for the vector kernels: one element at a time, in 64-bit
// (wrap-around) integer or double arithmetic.
template <class T>
T reference(PredefinedOp op, T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
      case PredefinedOp::Max: return a > b ? a : b;
      case PredefinedOp::Min: return a < b ? a : b;
      case PredefinedOp::Sum: return static_cast<T>(static_cast<double>(a) + static_cast<double>(b));
      case PredefinedOp::Prod: return static_cast<T>(static_cast<double>(a) * static_cast<double>(b));
      default: return b;
    }
  } else {
    const std::uint64_t x = static_cast<std::uint64_t>(a), y = static_cast<std::uint64_t>(b);
    switch (op) {
      case PredefinedOp::Max: return a > b ? a : b;
      case PredefinedOp::Min: return a < b ? a : b;
      case PredefinedOp::Sum: return static_cast<T>(x + y);
      case PredefinedOp::Prod: return static_cast<T>(x * y);
      case PredefinedOp::Land: return static_cast<T>(a != 0 && b != 0);
      case PredefinedOp::Lor: return static_cast<T>(a != 0 || b != 0);
      case PredefinedOp::Lxor: return static_cast<T>((a != 0) != (b != 0));
      case PredefinedOp::Band: return static_cast<T>(x & y);
      case PredefinedOp::Bor: return static_cast<T>(x | y);
      case PredefinedOp::Bxor: return static_cast<T>(x ^ y);
      default: return b;
    }
  }
}

// Lengths around vector widths, both buffers misaligned by `skew` bytes;
// every element of the result compared, and the bytes after the last one
// untouched.
template <class T>
void check_long_runs(BasicType t) {
  const PredefinedOp ops[] = {PredefinedOp::Max,  PredefinedOp::Min,  PredefinedOp::Sum,  PredefinedOp::Prod,
                              PredefinedOp::Land, PredefinedOp::Lor,  PredefinedOp::Lxor, PredefinedOp::Band,
                              PredefinedOp::Bor,  PredefinedOp::Bxor};
  for (PredefinedOp op : ops) {
    if (!op_allowed(op, t)) continue;
    for (std::size_t n : {1u, 7u, 16u, 33u, 64u, 255u, 1000u}) {
      for (std::size_t skew : {0u, 1u, 3u}) {
        std::vector<unsigned char> in(n * sizeof(T) + 8), io(n * sizeof(T) + 8 + sizeof(T));
        std::vector<T> a(n), b(n);
        for (std::size_t k = 0; k < n; ++k) {
          // Mixed signs, zeros and large magnitudes (products wrap).
          const long long v = static_cast<long long>((k * 2654435761u) % 2001) - 1000;
          a[k] = static_cast<T>(k % 5 == 0 ? 0 : v * (k % 3 == 0 ? 1000003 : 1));
          b[k] = static_cast<T>(k % 7 == 0 ? 0 : (v ^ 0x55) - 17);
        }
        std::memcpy(in.data() + skew, a.data(), n * sizeof(T));
        std::memcpy(io.data() + skew, b.data(), n * sizeof(T));
        const unsigned char guard = 0xA5;
        std::memset(io.data() + skew + n * sizeof(T), guard, sizeof(T));
        apply(op, in.data() + skew, io.data() + skew, static_cast<Count>(n), t);
        for (std::size_t k = 0; k < n; ++k) {
          T got;
          std::memcpy(&got, io.data() + skew + k * sizeof(T), sizeof(T));
          const T want = reference(op, a[k], b[k]);
          if (std::memcmp(&got, &want, sizeof(T)) != 0) {
            FAIL_CHECK(op_name(op) << " on " << basic_type_info(t).name << ", n " << n << ", skew " << skew
                                   << ": element " << k << " differs");
            break;
          }
        }
        for (std::size_t k = 0; k < sizeof(T); ++k) CHECK(io[skew + n * sizeof(T) + k] == guard);
        // apply_into: out = a op b into a buffer of its own, into a's
        // buffer, and into b's; the operands not written stay intact.
        for (int where = 0; where < 3; ++where) {
          std::vector<unsigned char> x(n * sizeof(T) + 8 + sizeof(T)), y(n * sizeof(T) + 8 + sizeof(T)),
              z(n * sizeof(T) + 8 + sizeof(T), guard);
          std::memcpy(x.data() + skew, a.data(), n * sizeof(T));
          std::memcpy(y.data() + skew, b.data(), n * sizeof(T));
          std::vector<unsigned char>& out = where == 0 ? z : where == 1 ? x : y;
          apply_into(op, x.data() + skew, y.data() + skew, out.data() + skew, static_cast<Count>(n), t);
          for (std::size_t k = 0; k < n; ++k) {
            T got;
            std::memcpy(&got, out.data() + skew + k * sizeof(T), sizeof(T));
            const T want = reference(op, a[k], b[k]);
            if (std::memcmp(&got, &want, sizeof(T)) != 0) {
              FAIL_CHECK("apply_into (output " << where << ") " << op_name(op) << " on " << basic_type_info(t).name
                                               << ", n " << n << ", skew " << skew << ": element " << k << " differs");
              break;
            }
          }
          if (where != 1) CHECK(std::memcmp(x.data() + skew, a.data(), n * sizeof(T)) == 0);
          if (where != 2) CHECK(std::memcmp(y.data() + skew, b.data(), n * sizeof(T)) == 0);
          if (where == 0) CHECK(z[skew + n * sizeof(T)] == guard);
        }
      }
    }
  }
}
}  // namespace

TEST_CASE("vectorised kernels: long runs, odd lengths, misaligned buffers, every integer width and float; apply_into "
          "into a third buffer or either operand's") {
  check_long_runs<signed char>(BasicType::SignedChar);
  check_long_runs<unsigned char>(BasicType::UnsignedChar);
  check_long_runs<short>(BasicType::Short);
  check_long_runs<unsigned short>(BasicType::UnsignedShort);
  check_long_runs<int>(BasicType::Int);
  check_long_runs<unsigned>(BasicType::Unsigned);
  check_long_runs<long>(BasicType::Long);
  check_long_runs<unsigned long>(BasicType::UnsignedLong);
  check_long_runs<std::int8_t>(BasicType::Int8);
  check_long_runs<std::uint16_t>(BasicType::UInt16);
  check_long_runs<std::int64_t>(BasicType::Int64);
  check_long_runs<std::uint64_t>(BasicType::UInt64);
  check_long_runs<float>(BasicType::Float);
  check_long_runs<double>(BasicType::Double);
}

TEST_CASE("apply_into on the types reduced in place only (pairs, C bool, REPLACE, NO_OP)") {
  // MAXLOC on MPI_2INT: (value, index) pairs, packed and C layouts equal.
  struct two_int {
    int v, i;
  };
  const two_int a[3] = {{5, 1}, {2, 0}, {7, 3}}, b[3] = {{4, 0}, {2, 1}, {9, 2}};
  for (int where = 0; where < 3; ++where) {
    two_int x[3], y[3], z[3] = {};
    std::memcpy(x, a, sizeof a);
    std::memcpy(y, b, sizeof b);
    two_int* out = where == 0 ? z : where == 1 ? x : y;
    apply_packed_into(PredefinedOp::Maxloc, x, y, out, 3, BasicType::TwoInt);
    CHECK(out[0].v == 5);
    CHECK(out[0].i == 1);
    CHECK(out[1].v == 2);
    CHECK(out[1].i == 0);  // tie: the smaller index
    CHECK(out[2].v == 9);
    CHECK(out[2].i == 2);
    if (where != 1) CHECK(std::memcmp(x, a, sizeof a) == 0);
    if (where != 2) CHECK(std::memcmp(y, b, sizeof b) == 0);
  }
  // C bool: any non-zero byte is true, results 0/1.
  const unsigned char p[4] = {0, 3, 0, 200}, q[4] = {0, 0, 9, 1};
  unsigned char r[4];
  apply_into(PredefinedOp::Lxor, p, q, r, 4, BasicType::CBool);
  CHECK(r[0] == 0);
  CHECK(r[1] == 1);
  CHECK(r[2] == 1);
  CHECK(r[3] == 0);
  // REPLACE: out = a; NO_OP: out = b.
  const int u[2] = {1, 2}, w[2] = {3, 4};
  int o[2] = {0, 0};
  apply_into(PredefinedOp::Replace, u, w, o, 2, BasicType::Int);
  CHECK(o[0] == 1);
  CHECK(o[1] == 2);
  apply_into(PredefinedOp::NoOp, u, w, o, 2, BasicType::Int);
  CHECK(o[0] == 3);
  CHECK(o[1] == 4);
  CHECK_THROWS_AS(apply_into(PredefinedOp::Sum, u, w, o, -1, BasicType::Int), OpError);
  CHECK_THROWS_AS(apply_into(PredefinedOp::Maxloc, u, w, o, 1, BasicType::Int), OpError);
}
