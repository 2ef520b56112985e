// external32 conversion: the native packed image (Datatype::pack) is
// converted object by object along the type signature
// (Datatype::for_each_basic_run), and back for unpacking.
#include "mpi_layer/datatype/external32.hpp"

#include <bit>
#include <cfloat>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

namespace nmad::mpi::external32 {

static_assert(std::endian::native == std::endian::little, "external32 conversion assumes a little-endian host");

namespace {

enum class Kind : std::uint8_t {
  raw,         // bytes as they are (chars, bytes, bool)
  sint,        // two's complement, sign-extended when widened
  uint,        // unsigned, zero-extended when widened
  real,        // IEEE float/double: byte order only
  long_double  // native long double <-> IEEE binary128
};
struct Component {
  std::uint8_t native, ext;
  Kind kind;
};
struct Repr {
  int n;
  Component c[2];
};

template <class T>
constexpr Component integer(std::uint8_t ext) {
  return {sizeof(T), ext, std::is_signed_v<T> ? Kind::sint : Kind::uint};
}
constexpr Component kRaw1{1, 1, Kind::raw};
constexpr Component kFloat{4, 4, Kind::real};
constexpr Component kDouble{8, 8, Kind::real};
constexpr Component kLongDouble{sizeof(long double), 16, Kind::long_double};
constexpr Component kInt = integer<int>(4);

const Repr& repr(BasicType b) {
  static const Repr table[kNumBasicTypes] = {
      {1, {kRaw1}},                               // Char
      {1, {kRaw1}},                               // SignedChar
      {1, {kRaw1}},                               // UnsignedChar
      {1, {kRaw1}},                               // Byte
      {1, {integer<short>(2)}},                   // Short
      {1, {integer<unsigned short>(2)}},          // UnsignedShort
      {1, {kInt}},                                // Int
      {1, {integer<unsigned>(4)}},                // Unsigned
      {1, {integer<long>(4)}},                    // Long
      {1, {integer<unsigned long>(4)}},           // UnsignedLong
      {1, {integer<long long>(8)}},               // LongLong
      {1, {integer<unsigned long long>(8)}},      // UnsignedLongLong
      {1, {kFloat}},                              // Float
      {1, {kDouble}},                             // Double
      {1, {kLongDouble}},                         // LongDouble
      {1, {integer<wchar_t>(4)}},                 // WChar
      {1, {{sizeof(bool), 1, Kind::uint}}},       // CBool
      {1, {integer<std::int8_t>(1)}},             // Int8
      {1, {integer<std::int16_t>(2)}},            // Int16
      {1, {integer<std::int32_t>(4)}},            // Int32
      {1, {integer<std::int64_t>(8)}},            // Int64
      {1, {integer<std::uint8_t>(1)}},            // UInt8
      {1, {integer<std::uint16_t>(2)}},           // UInt16
      {1, {integer<std::uint32_t>(4)}},           // UInt32
      {1, {integer<std::uint64_t>(8)}},           // UInt64
      {2, {kFloat, kFloat}},                      // CFloatComplex
      {2, {kDouble, kDouble}},                    // CDoubleComplex
      {2, {kLongDouble, kLongDouble}},            // CLongDoubleComplex
      {1, {integer<AintT>(8)}},                   // Aint
      {1, {integer<OffsetT>(8)}},                 // Offset
      {1, {integer<CountT>(8)}},                  // Count
      {1, {kRaw1}},                               // Packed
      {2, {kFloat, kInt}},                        // FloatInt
      {2, {kDouble, kInt}},                       // DoubleInt
      {2, {integer<long>(4), kInt}},              // LongInt
      {2, {kInt, kInt}},                          // TwoInt
      {2, {integer<short>(2), kInt}},             // ShortInt
      {2, {kLongDouble, kInt}},                   // LongDoubleInt
  };
  return table[static_cast<int>(b)];
}

std::uint64_t load_le(const unsigned char* p, int n) {
  std::uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
void store_le(unsigned char* p, int n, std::uint64_t v) {
  for (int i = 0; i < n; ++i, v >>= 8) p[i] = static_cast<unsigned char>(v);
}
std::uint64_t load_be(const unsigned char* p, int n) {
  std::uint64_t v = 0;
  for (int i = 0; i < n; ++i) v = (v << 8) | p[i];
  return v;
}
void store_be(unsigned char* p, int n, std::uint64_t v) {
  for (int i = n - 1; i >= 0; --i, v >>= 8) p[i] = static_cast<unsigned char>(v);
}

using u128 = unsigned __int128;

// Native long double bytes -> binary128 (as a 128-bit integer) and back.
#if LDBL_MANT_DIG == 64  // x87 extended: 64-bit significand with explicit integer bit, 15-bit exponent
u128 ld_to_quad(const unsigned char* p) {
  const std::uint64_t mant = load_le(p, 8);
  const std::uint64_t se = load_le(p + 8, 2);  // sign and exponent
  const u128 frac = static_cast<u128>(mant & 0x7fffffffffffffffULL) << 49;
  return (static_cast<u128>(se) << 112) | frac;
}
void quad_to_ld(u128 q, unsigned char* p) {
  const std::uint64_t se = static_cast<std::uint64_t>(q >> 112) & 0xffff;
  const std::uint64_t exp = se & 0x7fff;
  std::uint64_t mant = static_cast<std::uint64_t>(q >> 49) & 0x7fffffffffffffffULL;
  if (exp != 0) mant |= 0x8000000000000000ULL;  // normal numbers, infinities, NaNs
  std::memset(p, 0, sizeof(long double));
  store_le(p, 8, mant);
  store_le(p + 8, 2, se);
}
#elif LDBL_MANT_DIG == 113  // already binary128
u128 ld_to_quad(const unsigned char* p) { return (static_cast<u128>(load_le(p + 8, 8)) << 64) | load_le(p, 8); }
void quad_to_ld(u128 q, unsigned char* p) {
  store_le(p, 8, static_cast<std::uint64_t>(q));
  store_le(p + 8, 8, static_cast<std::uint64_t>(q >> 64));
}
#else
#error "external32: unsupported long double format"
#endif

void to_external(const Component& c, const unsigned char* in, unsigned char* out) {
  switch (c.kind) {
    case Kind::raw: std::memcpy(out, in, c.ext); return;
    case Kind::sint:
    case Kind::uint:
    case Kind::real: store_be(out, c.ext, load_le(in, c.native)); return;  // narrowing keeps the low bytes
    case Kind::long_double: {
      const u128 q = ld_to_quad(in);
      store_be(out, 8, static_cast<std::uint64_t>(q >> 64));
      store_be(out + 8, 8, static_cast<std::uint64_t>(q));
      return;
    }
  }
}

void from_external(const Component& c, const unsigned char* in, unsigned char* out) {
  switch (c.kind) {
    case Kind::raw: std::memcpy(out, in, c.native); return;
    case Kind::sint: {
      std::uint64_t v = load_be(in, c.ext);
      if (c.ext < 8 && (v >> (8 * c.ext - 1)) & 1) v |= ~std::uint64_t{0} << (8 * c.ext);  // sign-extend
      store_le(out, c.native, v);
      return;
    }
    case Kind::uint:
    case Kind::real: store_le(out, c.native, load_be(in, c.ext)); return;
    case Kind::long_double:
      quad_to_ld((static_cast<u128>(load_be(in, 8)) << 64) | load_be(in + 8, 8), out);
      return;
  }
}

}  // namespace

std::size_t basic_size(BasicType b) {
  basic_type_info(b);  // validates b
  const Repr& r = repr(b);
  std::size_t n = 0;
  for (int i = 0; i < r.n; ++i) n += r.c[i].ext;
  return n;
}

Count size(const Datatype& t, Count count) {
  Count n = 0;
  t.for_each_basic_run(count, [&](BasicType b, Count k) {
    Count add;
    if (__builtin_mul_overflow(k, static_cast<Count>(basic_size(b)), &add) || __builtin_add_overflow(n, add, &n))
      throw DatatypeError(DatatypeErrc::invalid_count, "nmad::mpi datatype: external32 size overflows");
  });
  return n;
}

void pack(const Datatype& t, const void* inbuf, Count count, void* outbuf, Count outsize, Count& position) {
  const Count need = size(t, count);
  if (outsize < 0 || position < 0 || position > outsize)
    throw DatatypeError(DatatypeErrc::invalid_argument, "nmad::mpi datatype: pack position outside the output buffer");
  if (need > outsize - position)
    throw DatatypeError(DatatypeErrc::buffer_too_small, "nmad::mpi datatype: external32 pack needs " +
                                                            std::to_string(need) + " bytes, " +
                                                            std::to_string(outsize - position) + " left");
  std::vector<unsigned char> native(static_cast<std::size_t>(t.packed_size(count)));
  Count npos = 0;
  t.pack(inbuf, count, native.data(), static_cast<Count>(native.size()), npos);
  const unsigned char* in = native.data();
  unsigned char* out = static_cast<unsigned char*>(outbuf) + position;
  t.for_each_basic_run(count, [&](BasicType b, Count k) {
    const Repr& r = repr(b);
    for (Count i = 0; i < k; ++i)
      for (int m = 0; m < r.n; ++m) {
        to_external(r.c[m], in, out);
        in += r.c[m].native;
        out += r.c[m].ext;
      }
  });
  position += need;
}

void unpack(const Datatype& t, const void* inbuf, Count insize, Count& position, void* outbuf, Count count) {
  const Count need = size(t, count);
  if (insize < 0 || position < 0 || position > insize)
    throw DatatypeError(DatatypeErrc::invalid_argument, "nmad::mpi datatype: unpack position outside the input buffer");
  if (need > insize - position)
    throw DatatypeError(DatatypeErrc::buffer_too_small, "nmad::mpi datatype: external32 unpack needs " +
                                                            std::to_string(need) + " bytes, " +
                                                            std::to_string(insize - position) + " left");
  if (!t.is_committed())
    throw DatatypeError(DatatypeErrc::uncommitted, "nmad::mpi datatype: datatype is not committed");
  std::vector<unsigned char> native(static_cast<std::size_t>(t.packed_size(count)));
  const unsigned char* in = static_cast<const unsigned char*>(inbuf) + position;
  unsigned char* out = native.data();
  t.for_each_basic_run(count, [&](BasicType b, Count k) {
    const Repr& r = repr(b);
    for (Count i = 0; i < k; ++i)
      for (int m = 0; m < r.n; ++m) {
        from_external(r.c[m], in, out);
        in += r.c[m].ext;
        out += r.c[m].native;
      }
  });
  Count npos = 0;
  t.unpack(native.data(), static_cast<Count>(native.size()), npos, outbuf, count);
  position += need;
}


namespace {
std::vector<int> ints_of(const std::vector<Count>& v, std::size_t from, std::size_t n) {
  std::vector<int> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<int>(v[from + i]);
  return out;
}
std::span<const Aint> addrs(const TypeContents& c, std::size_t from, std::size_t n) {
  return std::span<const Aint>(c.addresses).subspan(from, n);
}
}  // namespace

Datatype file_layout(const Datatype& t) {
  const TypeContents c = t.contents();
  const Datatype byte = Datatype::basic(BasicType::Byte);
  switch (c.combiner) {
    case Combiner::Named:
    case Combiner::F90Real:
    case Combiner::F90Complex:
    case Combiner::F90Integer: {
      // One basic object (a pair type is one block of both members).
      const Count n = size(t, 1);
      return n == 1 ? byte : Datatype::contiguous(n, byte);
    }
    case Combiner::Dup:
      return file_layout(c.types[0]);
    case Combiner::Contiguous:
      return Datatype::contiguous(c.ints[0], file_layout(c.types[0]));
    case Combiner::Vector:
      return Datatype::vector(c.ints[0], c.ints[1], c.ints[2], file_layout(c.types[0]));
    case Combiner::Hvector:
      return Datatype::hvector(c.ints[0], c.ints[1], c.addresses[0], file_layout(c.types[0]));
    case Combiner::Indexed: {
      const auto n = static_cast<std::size_t>(c.ints[0]);
      return Datatype::indexed(ints_of(c.ints, 1, n), ints_of(c.ints, 1 + n, n), file_layout(c.types[0]));
    }
    case Combiner::Hindexed: {
      const auto n = static_cast<std::size_t>(c.ints[0]);
      return Datatype::hindexed(ints_of(c.ints, 1, n), addrs(c, 0, n), file_layout(c.types[0]));
    }
    case Combiner::IndexedBlock: {
      const auto n = static_cast<std::size_t>(c.ints[0]);
      return Datatype::indexed_block(c.ints[1], ints_of(c.ints, 2, n), file_layout(c.types[0]));
    }
    case Combiner::HindexedBlock: {
      const auto n = static_cast<std::size_t>(c.ints[0]);
      return Datatype::hindexed_block(c.ints[1], addrs(c, 0, n), file_layout(c.types[0]));
    }
    case Combiner::Struct: {
      const auto n = static_cast<std::size_t>(c.ints[0]);
      std::vector<Datatype> types;
      types.reserve(n);
      for (const Datatype& m : c.types) types.push_back(file_layout(m));
      return Datatype::create_struct(ints_of(c.ints, 1, n), addrs(c, 0, n), types);
    }
    case Combiner::Resized:
      return Datatype::create_resized(file_layout(c.types[0]), c.addresses[0], c.addresses[1]);
    case Combiner::Subarray: {
      const auto nd = static_cast<std::size_t>(c.ints[0]);
      return Datatype::create_subarray(ints_of(c.ints, 1, nd), ints_of(c.ints, 1 + nd, nd),
                                       ints_of(c.ints, 1 + 2 * nd, nd),
                                       c.ints[1 + 3 * nd] == 0 ? Datatype::Order::C : Datatype::Order::Fortran,
                                       file_layout(c.types[0]));
    }
    case Combiner::Darray: {
      const auto nd = static_cast<std::size_t>(c.ints[2]);
      std::vector<Datatype::Distribution> distribs(nd);
      for (std::size_t i = 0; i < nd; ++i)
        distribs[i] = static_cast<Datatype::Distribution>(c.ints[3 + nd + i]);
      return Datatype::create_darray(static_cast<int>(c.ints[0]), static_cast<int>(c.ints[1]),
                                     ints_of(c.ints, 3, nd), distribs, ints_of(c.ints, 3 + 2 * nd, nd),
                                     ints_of(c.ints, 3 + 3 * nd, nd),
                                     c.ints[3 + 4 * nd] == 0 ? Datatype::Order::C : Datatype::Order::Fortran,
                                     file_layout(c.types[0]));
    }
  }
  throw DatatypeError(DatatypeErrc::invalid_argument, "nmad::mpi datatype: unknown combiner in file_layout");
}

}  // namespace nmad::mpi::external32
