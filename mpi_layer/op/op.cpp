// Predefined MPI reduction kernels and user-op dispatch.
#include "mpi_layer/op/op.hpp"

#include <climits>
#include <complex>
#include <cstdint>
#include <optional>
#include <span>
#include <cstring>
#include <vector>
#include <type_traits>

namespace nmad::mpi {

namespace {

// CharInteger: MPI_CHAR, which MPI-3.1 5.9.2 leaves out of "C integer"
// (a printable character) but which MPICH and Open MPI reduce as a small
// integer, and programs rely on it (e.g. benchmarks reducing MPI_CHAR with
// MPI_SUM): accepted wherever C integers are.
enum class Family { CInteger, CharInteger, MultiLang, Floating, Complex, Logical, Byte, Pair, Other };

Family family(BasicType t) {
  switch (t) {
    case BasicType::SignedChar:
    case BasicType::UnsignedChar:
    case BasicType::Short:
    case BasicType::UnsignedShort:
    case BasicType::Int:
    case BasicType::Unsigned:
    case BasicType::Long:
    case BasicType::UnsignedLong:
    case BasicType::LongLong:
    case BasicType::UnsignedLongLong:
    case BasicType::Int8:
    case BasicType::Int16:
    case BasicType::Int32:
    case BasicType::Int64:
    case BasicType::UInt8:
    case BasicType::UInt16:
    case BasicType::UInt32:
    case BasicType::UInt64:
      return Family::CInteger;
    case BasicType::Aint:
    case BasicType::Offset:
    case BasicType::Count:
      return Family::MultiLang;
    case BasicType::Float:
    case BasicType::Double:
    case BasicType::LongDouble:
      return Family::Floating;
    case BasicType::CFloatComplex:
    case BasicType::CDoubleComplex:
    case BasicType::CLongDoubleComplex:
      return Family::Complex;
    case BasicType::CBool:
      return Family::Logical;
    case BasicType::Byte:
      return Family::Byte;
    case BasicType::FloatInt:
    case BasicType::DoubleInt:
    case BasicType::LongInt:
    case BasicType::TwoInt:
    case BasicType::ShortInt:
    case BasicType::LongDoubleInt:
      return Family::Pair;
    case BasicType::Char:
      return Family::CharInteger;
    case BasicType::WChar:
    case BasicType::Packed:
      return Family::Other;
  }
  return Family::Other;
}

template <class T>
T load(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
template <class T>
void store(unsigned char* p, const T& v) {
  std::memcpy(p, &v, sizeof(T));
}

// Each predefined (op, type) pair is one loop over the elements with the
// operation fixed at compile time: no per-element dispatch, and a body the
// compiler turns into vector instructions (this file is built with -O3).
// Loads and stores go through memcpy: buffers need not be aligned (packed
// data, user buffers), and the compiler emits unaligned vector moves.
template <class T, class F>
[[gnu::always_inline]] inline void map2(const unsigned char* in, unsigned char* io, Count n, F f) {
  for (Count k = 0; k < n; ++k) {
    const std::size_t o = static_cast<std::size_t>(k) * sizeof(T);
    T a, b;
    std::memcpy(&a, in + o, sizeof(T));
    std::memcpy(&b, io + o, sizeof(T));
    const T r = f(a, b);
    std::memcpy(io + o, &r, sizeof(T));
  }
}

// out[k] = f(a[k], b[k]) into a third buffer that overlaps neither operand.
template <class T, class F>
[[gnu::always_inline]] inline void map3(const unsigned char* __restrict a, const unsigned char* __restrict b,
                                        unsigned char* __restrict out, Count n, F f) {
  for (Count k = 0; k < n; ++k) {
    const std::size_t o = static_cast<std::size_t>(k) * sizeof(T);
    T x, y;
    std::memcpy(&x, a + o, sizeof(T));
    std::memcpy(&y, b + o, sizeof(T));
    const T r = f(x, y);
    std::memcpy(out + o, &r, sizeof(T));
  }
}

// out[k] = f(a[k], b[k]) where out is b (the MPI in/inout form), a, or a
// buffer of its own: each case gets a loop without aliasing checks.
template <class T, class F>
[[gnu::always_inline]] inline void map_into(const unsigned char* a, const unsigned char* b, unsigned char* out,
                                            Count n, F f) {
  if (out == b) map2<T>(a, out, n, f);
  else if (out == a) map2<T>(b, out, n, [f](T y, T x) { return f(x, y); });
  else map3<T>(a, b, out, n, f);
}

// Integer arithmetic wraps modulo 2^N: done in the unsigned type of the
// same width, widened to unsigned int first (unsigned short * unsigned
// short would otherwise promote to int and could overflow).
template <class T>
using wrap_t = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

// Built for the widest vector unit at hand, chosen once when the library
// loads (GNU ifunc): AVX-512, AVX2 or the x86-64 baseline (SSE2).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__) && \
    !defined(__SANITIZE_ADDRESS__)
#define NMAD_OP_CLONES [[gnu::target_clones("avx512f", "avx2", "default")]]
#else
#define NMAD_OP_CLONES
#endif

template <class T>
NMAD_OP_CLONES void elementwise(PredefinedOp op, const unsigned char* in, const unsigned char* b, unsigned char* io,
                                Count n) {
  if constexpr (std::is_arithmetic_v<T>) {
    switch (op) {
      case PredefinedOp::Max: return map_into<T>(in, b, io, n, [](T a, T b) { return a > b ? a : b; });
      case PredefinedOp::Min: return map_into<T>(in, b, io, n, [](T a, T b) { return a < b ? a : b; });
      default: break;
    }
    if constexpr (std::is_integral_v<T>) {
      using W = wrap_t<T>;
      switch (op) {
        case PredefinedOp::Sum: return map_into<T>(in, b, io, n, [](T a, T b) { return static_cast<T>(W(a) + W(b)); });
        case PredefinedOp::Prod: return map_into<T>(in, b, io, n, [](T a, T b) { return static_cast<T>(W(a) * W(b)); });
        case PredefinedOp::Land: return map_into<T>(in, b, io, n, [](T a, T b) { return static_cast<T>((a != 0) & (b != 0)); });
        case PredefinedOp::Lor: return map_into<T>(in, b, io, n, [](T a, T b) { return static_cast<T>((a != 0) | (b != 0)); });
        case PredefinedOp::Lxor: return map_into<T>(in, b, io, n, [](T a, T b) { return static_cast<T>((a != 0) != (b != 0)); });
        case PredefinedOp::Band: return map_into<T>(in, b, io, n, [](T a, T b) { return static_cast<T>(a & b); });
        case PredefinedOp::Bor: return map_into<T>(in, b, io, n, [](T a, T b) { return static_cast<T>(a | b); });
        case PredefinedOp::Bxor: return map_into<T>(in, b, io, n, [](T a, T b) { return static_cast<T>(a ^ b); });
        default: break;
      }
    } else {
      switch (op) {
        case PredefinedOp::Sum: return map_into<T>(in, b, io, n, [](T a, T b) { return a + b; });
        case PredefinedOp::Prod: return map_into<T>(in, b, io, n, [](T a, T b) { return a * b; });
        default: break;
      }
    }
  } else {  // std::complex
    switch (op) {
      case PredefinedOp::Sum: return map_into<T>(in, b, io, n, [](T a, T b) { return a + b; });
      case PredefinedOp::Prod: return map_into<T>(in, b, io, n, [](T a, T b) { return a * b; });
      default: break;
    }
  }
  // Unreachable: combinations are validated before.
}

// MAXLOC/MINLOC on struct { V v; int i; }: ties keep the smaller index.
template <class P>
void loc(PredefinedOp op, const unsigned char* in, unsigned char* io, Count n) {
  for (Count k = 0; k < n; ++k) {
    const std::size_t o = static_cast<std::size_t>(k) * sizeof(P);
    const P a = load<P>(in + o);
    P b = load<P>(io + o);
    const bool a_wins = op == PredefinedOp::Maxloc ? a.v > b.v : a.v < b.v;
    if (a_wins) {
      b.v = a.v;
      b.i = a.i;
    } else if (a.v == b.v && a.i < b.i) {
      b.i = a.i;
    }
    store<P>(io + o, b);
  }
}

// MAXLOC/MINLOC on packed pairs: value then int, no padding.
template <class P>
void loc_packed(PredefinedOp op, const unsigned char* in, unsigned char* io, Count n) {
  using V = decltype(P::v);
  constexpr std::size_t stride = sizeof(V) + sizeof(int);
  for (Count k = 0; k < n; ++k) {
    const std::size_t o = static_cast<std::size_t>(k) * stride;
    const V av = load<V>(in + o), bv = load<V>(io + o);
    const int ai = load<int>(in + o + sizeof(V)), bi = load<int>(io + o + sizeof(V));
    const bool a_wins = op == PredefinedOp::Maxloc ? av > bv : av < bv;
    if (a_wins) {
      store<V>(io + o, av);
      store<int>(io + o + sizeof(V), ai);
    } else if (av == bv && ai < bi) {
      store<int>(io + o + sizeof(V), ai);
    }
  }
}

void logical_bool(PredefinedOp op, const unsigned char* in, unsigned char* io, Count n) {
  using B = unsigned char;
  switch (op) {
    case PredefinedOp::Land: return map2<B>(in, io, n, [](B a, B b) { return B((a != 0) & (b != 0)); });
    case PredefinedOp::Lor: return map2<B>(in, io, n, [](B a, B b) { return B((a != 0) | (b != 0)); });
    case PredefinedOp::Lxor: return map2<B>(in, io, n, [](B a, B b) { return B((a != 0) != (b != 0)); });
    default: break;
  }
}

// Types whose kernels take a separate output (elementwise); the others
// (logical bool, pairs) reduce in place only.
bool has_kernel_into(BasicType t) {
  return family(t) == Family::CInteger || family(t) == Family::CharInteger || family(t) == Family::MultiLang ||
         family(t) == Family::Floating ||
         family(t) == Family::Complex || t == BasicType::Byte;
}

void dispatch(PredefinedOp op, const unsigned char* in, const unsigned char* b, unsigned char* io, Count n,
              BasicType t) {
  switch (t) {
    case BasicType::Char: return elementwise<char>(op, in, b, io, n);
    case BasicType::SignedChar: return elementwise<signed char>(op, in, b, io, n);
    case BasicType::UnsignedChar: return elementwise<unsigned char>(op, in, b, io, n);
    case BasicType::Byte: return elementwise<unsigned char>(op, in, b, io, n);
    case BasicType::Short: return elementwise<short>(op, in, b, io, n);
    case BasicType::UnsignedShort: return elementwise<unsigned short>(op, in, b, io, n);
    case BasicType::Int: return elementwise<int>(op, in, b, io, n);
    case BasicType::Unsigned: return elementwise<unsigned>(op, in, b, io, n);
    case BasicType::Long: return elementwise<long>(op, in, b, io, n);
    case BasicType::UnsignedLong: return elementwise<unsigned long>(op, in, b, io, n);
    case BasicType::LongLong: return elementwise<long long>(op, in, b, io, n);
    case BasicType::UnsignedLongLong: return elementwise<unsigned long long>(op, in, b, io, n);
    case BasicType::Int8: return elementwise<std::int8_t>(op, in, b, io, n);
    case BasicType::Int16: return elementwise<std::int16_t>(op, in, b, io, n);
    case BasicType::Int32: return elementwise<std::int32_t>(op, in, b, io, n);
    case BasicType::Int64: return elementwise<std::int64_t>(op, in, b, io, n);
    case BasicType::UInt8: return elementwise<std::uint8_t>(op, in, b, io, n);
    case BasicType::UInt16: return elementwise<std::uint16_t>(op, in, b, io, n);
    case BasicType::UInt32: return elementwise<std::uint32_t>(op, in, b, io, n);
    case BasicType::UInt64: return elementwise<std::uint64_t>(op, in, b, io, n);
    case BasicType::Aint: return elementwise<AintT>(op, in, b, io, n);
    case BasicType::Offset: return elementwise<OffsetT>(op, in, b, io, n);
    case BasicType::Count: return elementwise<CountT>(op, in, b, io, n);
    case BasicType::Float: return elementwise<float>(op, in, b, io, n);
    case BasicType::Double: return elementwise<double>(op, in, b, io, n);
    case BasicType::LongDouble: return elementwise<long double>(op, in, b, io, n);
    case BasicType::CFloatComplex: return elementwise<CFloatComplexT>(op, in, b, io, n);
    case BasicType::CDoubleComplex: return elementwise<CDoubleComplexT>(op, in, b, io, n);
    case BasicType::CLongDoubleComplex: return elementwise<CLongDoubleComplexT>(op, in, b, io, n);
    case BasicType::CBool: return logical_bool(op, in, io, n);
    case BasicType::FloatInt: return loc<FloatIntPair>(op, in, io, n);
    case BasicType::DoubleInt: return loc<DoubleIntPair>(op, in, io, n);
    case BasicType::LongInt: return loc<LongIntPair>(op, in, io, n);
    case BasicType::TwoInt: return loc<TwoIntPair>(op, in, io, n);
    case BasicType::ShortInt: return loc<ShortIntPair>(op, in, io, n);
    case BasicType::LongDoubleInt: return loc<LongDoubleIntPair>(op, in, io, n);
    case BasicType::WChar:
    case BasicType::Packed:
      break;
  }
  throw OpError(OpErrc::unsupported_type, "nmad::mpi op: no kernel for this type");
}

}  // namespace

const char* op_name(PredefinedOp op) {
  static const char* const names[kNumPredefinedOps] = {
      "MPI_MAX", "MPI_MIN",  "MPI_SUM",  "MPI_PROD",   "MPI_LAND",    "MPI_LOR",     "MPI_LXOR",
      "MPI_BAND", "MPI_BOR", "MPI_BXOR", "MPI_MAXLOC", "MPI_MINLOC", "MPI_REPLACE", "MPI_NO_OP"};
  const int i = static_cast<int>(op);
  if (i < 0 || i >= kNumPredefinedOps) return "MPI_OP_NULL";
  return names[i];
}

bool op_allowed(PredefinedOp op, BasicType type) {
  const int ti = static_cast<int>(type);
  if (ti < 0 || ti >= kNumBasicTypes) return false;
  const Family f = family(type);
  // Every integer the ops reduce: the C integers, MPI_CHAR and the
  // multi-language MPI_AINT/OFFSET/COUNT (integers of C too, accepted for
  // the logical ops as well).
  const bool integer = f == Family::CInteger || f == Family::CharInteger || f == Family::MultiLang;
  switch (op) {
    case PredefinedOp::Max:
    case PredefinedOp::Min:
      return integer || f == Family::Floating;
    case PredefinedOp::Sum:
    case PredefinedOp::Prod:
      return integer || f == Family::Floating || f == Family::Complex;
    case PredefinedOp::Land:
    case PredefinedOp::Lor:
    case PredefinedOp::Lxor:
      return integer || f == Family::Logical;
    case PredefinedOp::Band:
    case PredefinedOp::Bor:
    case PredefinedOp::Bxor:
      return integer || f == Family::Byte;
    case PredefinedOp::Maxloc:
    case PredefinedOp::Minloc:
      return f == Family::Pair;
    case PredefinedOp::Replace:
    case PredefinedOp::NoOp:
      return true;
  }
  return false;
}

bool op_is_commutative(PredefinedOp op) { return op != PredefinedOp::Replace; }

namespace {
// Throws the standard errors for an op/type/count that cannot be reduced.
void check_reduction(PredefinedOp op, Count count, BasicType type) {
  const int oi = static_cast<int>(op);
  if (oi < 0 || oi >= kNumPredefinedOps) throw OpError(OpErrc::invalid_op, "nmad::mpi op: unknown op");
  if (!op_allowed(op, type)) {
    const int ti = static_cast<int>(type);
    throw OpError(OpErrc::unsupported_type,
                  std::string("nmad::mpi op: ") + op_name(op) + " is not defined on " +
                      (ti >= 0 && ti < kNumBasicTypes ? basic_type_info(type).name : "an unknown type"));
  }
  if (count < 0) throw OpError(OpErrc::invalid_count, "nmad::mpi op: negative count");
}

// out = a op b for the types without a separate-output kernel: b is copied
// to out first (a saved aside when out is a), then reduced in place.
template <class InPlace>
void into_by_copy(const void* a, const void* b, void* out, std::size_t bytes, InPlace in_place) {
  if (out == b) return in_place(a, out);
  std::vector<unsigned char> saved;
  if (out == a) {
    saved.assign(static_cast<const unsigned char*>(a), static_cast<const unsigned char*>(a) + bytes);
    a = saved.data();
  }
  std::memmove(out, b, bytes);
  in_place(a, out);
}
}  // namespace

void apply(PredefinedOp op, const void* in, void* inout, Count count, BasicType type) {
  check_reduction(op, count, type);
  if (count == 0 || op == PredefinedOp::NoOp) return;
  if (op == PredefinedOp::Replace) {
    std::memmove(inout, in, static_cast<std::size_t>(count) * basic_type_info(type).extent);
    return;
  }
  dispatch(op, static_cast<const unsigned char*>(in), static_cast<const unsigned char*>(inout),
           static_cast<unsigned char*>(inout), count, type);
}

void apply_into(PredefinedOp op, const void* a, const void* b, void* out, Count count, BasicType type) {
  check_reduction(op, count, type);
  if (count == 0) return;
  if (has_kernel_into(type) && op != PredefinedOp::Replace && op != PredefinedOp::NoOp) {
    dispatch(op, static_cast<const unsigned char*>(a), static_cast<const unsigned char*>(b),
             static_cast<unsigned char*>(out), count, type);
    return;
  }
  into_by_copy(a, b, out, static_cast<std::size_t>(count) * basic_type_info(type).extent,
               [&](const void* x, void* io) { apply(op, x, io, count, type); });
}

void apply(PredefinedOp op, const void* in, void* inout, Count count, const Datatype& type) {
  const std::optional<BasicType> b = type.uniform_basic_type();
  if (!b) {
    if (type.size() == 0) return;  // nothing to reduce
    throw OpError(OpErrc::unsupported_type,
                  std::string("nmad::mpi op: ") + op_name(op) +
                      " needs a datatype built from a single basic type");
  }
  const std::span<const ElementRun> runs = type.element_runs();  // checks commit
  if (count < 0) throw OpError(OpErrc::invalid_count, "nmad::mpi op: negative count");
  if (type.is_contiguous() && runs.size() == 1) {
    // count elements are one array of the basic type
    const std::uintptr_t off = static_cast<std::uintptr_t>(runs[0].offset);
    apply(op, reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(in) + off),
          reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(inout) + off), count * runs[0].count, *b);
    return;
  }
  if (!op_allowed(op, *b)) apply(op, in, inout, 0, *b);  // throws the standard message
  const Aint ext = type.extent();
  for (Count e = 0; e < count; ++e) {
    for (const ElementRun& r : runs) {
      const std::uintptr_t off = static_cast<std::uintptr_t>(static_cast<Aint>(e) * ext + r.offset);
      apply(op, reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(in) + off),
            reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(inout) + off), r.count, *b);
    }
  }
}

void apply_packed(PredefinedOp op, const void* in, void* inout, Count count, BasicType type) {
  const int ti = static_cast<int>(type);
  const bool pair = ti >= 0 && ti < kNumBasicTypes && is_pair_type(type);
  if (!pair || !op_allowed(op, type)) {
    apply(op, in, inout, count, type);  // identical layouts (or the error)
    return;
  }
  if (count < 0) throw OpError(OpErrc::invalid_count, "nmad::mpi op: negative count");
  if (count == 0 || op == PredefinedOp::NoOp) return;
  if (op == PredefinedOp::Replace) {
    std::memmove(inout, in, static_cast<std::size_t>(count) * basic_type_info(type).size);
    return;
  }
  const auto* a = static_cast<const unsigned char*>(in);
  auto* b = static_cast<unsigned char*>(inout);
  switch (type) {
    case BasicType::FloatInt: return loc_packed<FloatIntPair>(op, a, b, count);
    case BasicType::DoubleInt: return loc_packed<DoubleIntPair>(op, a, b, count);
    case BasicType::LongInt: return loc_packed<LongIntPair>(op, a, b, count);
    case BasicType::TwoInt: return loc_packed<TwoIntPair>(op, a, b, count);
    case BasicType::ShortInt: return loc_packed<ShortIntPair>(op, a, b, count);
    case BasicType::LongDoubleInt: return loc_packed<LongDoubleIntPair>(op, a, b, count);
    default: break;
  }
  throw OpError(OpErrc::unsupported_type, "nmad::mpi op: not a pair type");
}

void apply_packed_into(PredefinedOp op, const void* a, const void* b, void* out, Count count, BasicType type) {
  const int ti = static_cast<int>(type);
  if (!(ti >= 0 && ti < kNumBasicTypes && is_pair_type(type))) return apply_into(op, a, b, out, count, type);
  check_reduction(op, count, type);
  if (count == 0) return;
  into_by_copy(a, b, out, static_cast<std::size_t>(count) * basic_type_info(type).size,
               [&](const void* x, void* io) { apply_packed(op, x, io, count, type); });
}

void apply_packed(PredefinedOp op, const void* in, void* inout, Count count, const Datatype& type) {
  const std::optional<BasicType> b = type.uniform_basic_type();
  const Count bytes = type.packed_size(count);  // checks count, null type
  if (!b) {
    if (type.size() == 0) return;
    throw OpError(OpErrc::unsupported_type,
                  std::string("nmad::mpi op: ") + op_name(op) +
                      " needs a datatype built from a single basic type");
  }
  apply_packed(op, in, inout, bytes / static_cast<Count>(basic_type_info(*b).size), *b);
}

Op Op::user(UserFunction* fn, bool commute) {
  if (fn == nullptr) throw OpError(OpErrc::invalid_op, "nmad::mpi op: null user function");
  Op o;
  o.is_predefined_ = false;
  o.fn_ = fn;
  o.commute_ = commute;
  return o;
}

Op Op::user_c(UserFunctionC* fn, bool commute) {
  if (fn == nullptr) throw OpError(OpErrc::invalid_op, "nmad::mpi op: null user function");
  Op o;
  o.is_predefined_ = false;
  o.fn_c_ = fn;
  o.commute_ = commute;
  return o;
}

bool Op::is_commutative() const noexcept {
  return is_predefined_ ? op_is_commutative(predefined_) : commute_;
}

void Op::reduce_user(const void* in, void* inout, Count count, int datatype_handle) const {
  if (is_predefined_) throw OpError(OpErrc::invalid_op, "nmad::mpi op: reduce_user on a predefined op");
  if (fn_c_) {
    if (count < 0) throw OpError(OpErrc::invalid_count, "nmad::mpi op: negative count");
    long long len = count;
    int handle = datatype_handle;
    fn_c_(const_cast<void*>(in), inout, &len, &handle);
    return;
  }
  if (count < 0 || count > INT_MAX) throw OpError(OpErrc::invalid_count, "nmad::mpi op: count out of int range");
  int len = static_cast<int>(count);
  int handle = datatype_handle;
  fn_(const_cast<void*>(in), inout, &len, &handle);
}

void Op::reduce_packed(const void* in, void* inout, Count count, const Datatype& type) const {
  if (!is_predefined_)
    throw OpError(OpErrc::invalid_op, "nmad::mpi op: user ops need the datatype's layout, not packed data");
  apply_packed(predefined_, in, inout, count, type);
}

void Op::reduce(const void* in, void* inout, Count count, const Datatype& type, int datatype_handle) const {
  if (is_predefined_) {
    apply(predefined_, in, inout, count, type);
  } else {
    reduce_user(in, inout, count, datatype_handle);
  }
}

void Op::reduce(const void* in, void* inout, Count count, BasicType type, int datatype_handle) const {
  if (is_predefined_) {
    apply(predefined_, in, inout, count, type);
  } else {
    reduce_user(in, inout, count, datatype_handle);
  }
}

}  // namespace nmad::mpi
