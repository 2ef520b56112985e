// nmad::mpi datatype engine: MPI-3.1 derived datatypes, their flattened
// (offset, length) block representation, MPI_Pack/MPI_Unpack semantics,
// gather-style block iteration and partial (pipelined) pack/unpack.
//
// CONTRACT
// --------
// * Ownership. `Datatype` is a cheap, copyable handle (shared ownership of an
//   internal node). A derived type keeps the types it was built from alive, so
//   the binding may "free" (drop) an input type right after using it in a
//   constructor, as MPI_Type_free allows. A default-constructed Datatype is
//   the null handle; every operation on it throws DatatypeError{invalid_datatype}.
// * Commit. Constructors return UNCOMMITTED types (basic types are always
//   committed; dup() of a committed type is committed, as in MPI). Size /
//   extent / bounds / element-count queries work on any type. pack, unpack,
//   pack_range, unpack_range, blocks, block_count and for_each_block require a
//   committed type and throw DatatypeError{uncommitted} otherwise. commit()
//   builds the flattened representation once; it is idempotent.
// * Thread safety. A type is immutable after commit() and may then be shared
//   read-only by any number of threads without locking. commit() itself is
//   internally synchronized (std::call_once), but the binding should commit a
//   type before publishing its handle to other threads.
// * Memory addressing. An element i of a buffer `buf` lives at
//   buf + i * extent(); its bytes are at buf + i * extent() + block.offset for
//   each block. Offsets may be negative (negative strides, negative lb) and
//   `buf` may be nullptr (MPI_BOTTOM) with absolute displacements: all address
//   arithmetic is done on uintptr_t.
// * Packed format. The packed image of `count` elements is the concatenation,
//   in type-map order, of all data bytes: exactly count * size() bytes, no
//   header, native representation (homogeneous clusters only).
// * Bounds rules (MPI-3.1 4.1.6/4.1.7). create_resized() sets "sticky" lb/ub
//   markers. In any derived type, if some component carries a marker, lb (ub)
//   is the min (max) over markers only; otherwise over data. create_struct()
//   pads the extent of a marker-free type up to the largest member alignment
//   (the epsilon rule); other constructors do not pad (as MPICH does).
//
// * Cost. Constructors are O(number of displacements) (vector/hvector O(1):
//   a (count, stride, sub-type) loop node). commit() is O(number of tree
//   nodes and parts), never O(count): a type whose flattened form needs at
//   most flat_block_limit() blocks per element (default 65536) is flattened
//   into (offset, length) blocks, which is the fastest to pack; a larger one
//   (vector(INT_MAX/2, 1, 2, MPI_INT)) stays a tree, and packing walks it
//   lazily, visiting only the loop iterations the requested byte range
//   touches. blocks() is only available for flattened types (for_each_block
//   works on both). element_runs() materializes its list on first use.
//
// Errors are reported by throwing DatatypeError; suggested MPI error classes
// are given next to each DatatypeErrc value.
//
// MPI MAPPING (binding cheat sheet; MPI_Datatype handle <-> Datatype table is
// the binding's):
//   MPI_Type_contiguous/vector/create_hvector/indexed/create_hindexed/
//   create_indexed_block/create_hindexed_block/create_struct/create_resized/
//   create_subarray/create_darray/dup -> the static constructors / dup()
//   MPI_Type_commit / MPI_Type_free -> commit() / drop the handle
//   MPI_Type_size(_x)              -> size()           (int overflow -> MPI_UNDEFINED)
//   MPI_Type_get_extent(_x)        -> lb(), extent()
//   MPI_Type_get_true_extent(_x)   -> true_lb(), true_extent()
//   MPI_Type_get_envelope/contents -> contents() (ints/addresses/types sizes =
//                                     num_integers/num_addresses/num_datatypes;
//                                     Named -> MPI_COMBINER_NAMED; subarray
//                                     order int: 0 = C, 1 = Fortran)
//   MPI_Get_count / MPI_Get_elements(_x) -> get_count() / get_elements() on
//                                     the received byte count
//   MPI_Pack / MPI_Unpack / MPI_Pack_size -> pack() / unpack() / packed_size()
//   MPI_Pack_external(_size) / MPI_Unpack_external -> external32.hpp
//   p2p send/recv of non-contiguous data  -> for_each_block(_range) (iovecs)
//                                     or pack_range()/unpack_range() (eager
//                                     copies, fragments arriving in pieces)
#pragma once

#include <complex>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace nmad::mpi {

using Aint = std::ptrdiff_t;  // same as MPI_Aint
using Count = long long;      // same as MPI_Count

// ---------------------------------------------------------------- errors --
enum class DatatypeErrc {
  invalid_count = 1,     // negative/overflowing count          -> MPI_ERR_COUNT
  negative_blocklength,  // blocklength < 0                      -> MPI_ERR_ARG
  invalid_argument,      // mismatched arrays, bad position, ... -> MPI_ERR_ARG
  invalid_datatype,      // null handle                          -> MPI_ERR_TYPE
  uncommitted,           // communication with uncommitted type  -> MPI_ERR_TYPE
  buffer_too_small,      // pack: MPI_ERR_NO_SPACE (or OTHER); unpack: MPI_ERR_TRUNCATE
};

class DatatypeError : public std::runtime_error {
 public:
  DatatypeError(DatatypeErrc code, const std::string& what)
      : std::runtime_error(what), code_(code) {}
  DatatypeErrc code() const noexcept { return code_; }

 private:
  DatatypeErrc code_;
};

// ---------------------------------------------------------- basic types --
// One value per predefined MPI C datatype (MPI name in the comment).
enum class BasicType : std::uint8_t {
  Char,                 // MPI_CHAR
  SignedChar,           // MPI_SIGNED_CHAR
  UnsignedChar,         // MPI_UNSIGNED_CHAR
  Byte,                 // MPI_BYTE
  Short,                // MPI_SHORT
  UnsignedShort,        // MPI_UNSIGNED_SHORT
  Int,                  // MPI_INT
  Unsigned,             // MPI_UNSIGNED
  Long,                 // MPI_LONG
  UnsignedLong,         // MPI_UNSIGNED_LONG
  LongLong,             // MPI_LONG_LONG_INT / MPI_LONG_LONG
  UnsignedLongLong,     // MPI_UNSIGNED_LONG_LONG
  Float,                // MPI_FLOAT
  Double,               // MPI_DOUBLE
  LongDouble,           // MPI_LONG_DOUBLE
  WChar,                // MPI_WCHAR
  CBool,                // MPI_C_BOOL
  Int8,                 // MPI_INT8_T
  Int16,                // MPI_INT16_T
  Int32,                // MPI_INT32_T
  Int64,                // MPI_INT64_T
  UInt8,                // MPI_UINT8_T
  UInt16,               // MPI_UINT16_T
  UInt32,               // MPI_UINT32_T
  UInt64,               // MPI_UINT64_T
  CFloatComplex,        // MPI_C_FLOAT_COMPLEX (= MPI_C_COMPLEX)
  CDoubleComplex,       // MPI_C_DOUBLE_COMPLEX
  CLongDoubleComplex,   // MPI_C_LONG_DOUBLE_COMPLEX
  Aint,                 // MPI_AINT   (MPI_Aint = ptrdiff_t)
  Offset,               // MPI_OFFSET (MPI_Offset = long long)
  Count,                // MPI_COUNT  (MPI_Count = long long)
  Packed,               // MPI_PACKED
  FloatInt,             // MPI_FLOAT_INT       struct { float v; int i; }
  DoubleInt,            // MPI_DOUBLE_INT      struct { double v; int i; }
  LongInt,              // MPI_LONG_INT        struct { long v; int i; }
  TwoInt,               // MPI_2INT            struct { int v; int i; }
  ShortInt,             // MPI_SHORT_INT       struct { short v; int i; }
  LongDoubleInt,        // MPI_LONG_DOUBLE_INT struct { long double v; int i; }
};
inline constexpr int kNumBasicTypes = static_cast<int>(BasicType::LongDoubleInt) + 1;

// The exact C layouts of the MINLOC/MAXLOC pair types (C and C++ lay these
// out identically on every ABI we target).
struct FloatIntPair { float v; int i; };
struct DoubleIntPair { double v; int i; };
struct LongIntPair { long v; int i; };
struct TwoIntPair { int v; int i; };
struct ShortIntPair { short v; int i; };
struct LongDoubleIntPair { long double v; int i; };

// Machine types backing the basic types that are not plain C scalars.
using CFloatComplexT = std::complex<float>;            // layout of float _Complex
using CDoubleComplexT = std::complex<double>;          // layout of double _Complex
using CLongDoubleComplexT = std::complex<long double>;  // layout of long double _Complex
using AintT = std::ptrdiff_t;
using OffsetT = long long;
using CountT = long long;

struct BasicTypeInfo {
  const char* name;        // "MPI_INT", ...
  std::size_t size;        // MPI_Type_size: data bytes (pairs: sizeof(v)+sizeof(int))
  std::size_t extent;      // sizeof the C object (pairs include padding)
  std::size_t alignment;   // alignof the C object
  int num_members;         // 1, or 2 for pair types
  struct Member { std::size_t offset, size; } members[2];
};
const BasicTypeInfo& basic_type_info(BasicType t);
bool is_pair_type(BasicType t);

// ------------------------------------------------------------- datatype --
enum class Combiner {  // MPI_COMBINER_*
  Named, Dup, Contiguous, Vector, Hvector, Indexed, Hindexed,
  IndexedBlock, HindexedBlock, Struct, Resized, Subarray, Darray,
  F90Real, F90Complex, F90Integer,
};

// One contiguous run of data bytes of ONE element, relative to the element's
// start address. Blocks are in type-map (packing) order; adjacent ones merged.
struct Block {
  Aint offset;
  Aint length;
};

// For types whose data entries all have one basic type B: `count`
// consecutive B objects (stride = basic extent of B, i.e. sizeof the C object,
// so pair types keep their padding) starting `offset` bytes from the element
// start. This is what reductions with predefined ops walk.
struct ElementRun {
  Aint offset;
  Count count;
};

class Datatype;

// MPI_Type_get_envelope / MPI_Type_get_contents, in the standard's order
// (e.g. indexed: ints = {count, blocklengths..., displacements...}).
// large_counts: a type built by a large-count constructor (MPI_Type_*_c)
// carries its MPI_Count arguments there, in the order of MPI 4.0 sec. 5.1.13
// (the binding sets them with relabel()); empty for every other type.
struct TypeContents {
  Combiner combiner;
  std::vector<Count> ints;
  std::vector<Aint> addresses;
  std::vector<Datatype> types;
  std::vector<Count> large_counts;
};

struct TypeImpl;  // internal

class Datatype {
 public:
  Datatype() = default;  // null handle
  explicit operator bool() const noexcept { return impl_ != nullptr; }
  friend bool operator==(const Datatype& a, const Datatype& b) noexcept { return a.impl_ == b.impl_; }

  // ---- constructors (MPI_Type_*); all return uncommitted types ----
  static Datatype basic(BasicType t);  // committed predefined type
  static Datatype contiguous(Count count, const Datatype& old);
  static Datatype vector(Count count, Count blocklength, Count stride, const Datatype& old);
  static Datatype hvector(Count count, Count blocklength, Aint stride_bytes, const Datatype& old);
  // The array constructors take int arrays (the MPI int bindings) or Count
  // ones (the large-count _c bindings); the int forms widen and build the
  // same type.
  static Datatype indexed(std::span<const int> blocklengths, std::span<const int> displacements,
                          const Datatype& old);
  static Datatype indexed(std::span<const Count> blocklengths, std::span<const Count> displacements,
                          const Datatype& old);
  static Datatype hindexed(std::span<const int> blocklengths, std::span<const Aint> displacements,
                           const Datatype& old);
  static Datatype hindexed(std::span<const Count> blocklengths, std::span<const Aint> displacements,
                           const Datatype& old);
  static Datatype indexed_block(Count blocklength, std::span<const int> displacements,
                                const Datatype& old);
  static Datatype indexed_block(Count blocklength, std::span<const Count> displacements,
                                const Datatype& old);
  static Datatype hindexed_block(Count blocklength, std::span<const Aint> displacements,
                                 const Datatype& old);
  static Datatype create_struct(std::span<const int> blocklengths, std::span<const Aint> displacements,
                                std::span<const Datatype> types);
  static Datatype create_struct(std::span<const Count> blocklengths, std::span<const Aint> displacements,
                                std::span<const Datatype> types);
  static Datatype create_resized(const Datatype& old, Aint lb, Aint extent);
  enum class Order { C, Fortran };  // MPI_ORDER_C / MPI_ORDER_FORTRAN
  // MPI_Type_create_subarray: lb 0, extent = prod(sizes) * extent(old).
  // Requires sizes[i] >= 1, subsizes[i] >= 0, 0 <= starts[i] <= sizes[i] - subsizes[i].
  static Datatype create_subarray(std::span<const int> sizes, std::span<const int> subsizes,
                                  std::span<const int> starts, Order order, const Datatype& old);
  static Datatype create_subarray(std::span<const Count> sizes, std::span<const Count> subsizes,
                                  std::span<const Count> starts, Order order, const Datatype& old);
  // MPI_Type_create_darray (MPI-3.1 4.1.4, darray.cpp): the part of a
  // global array (gsizes, in `order`) that process `rank` of `size` owns in
  // a row-major process grid psizes, each dimension distributed by HPF rules:
  // Block (block size darg, default ceil(gsize / psize)), Cyclic (cycles of
  // darg elements, default 1) or None (whole dimension, psize 1). The type
  // map lists the owned elements in increasing address order; lb 0, extent
  // prod(gsizes) * extent(old). Cost is O(ndims), whatever the sizes.
  // Contents ints: size, rank, ndims, gsizes, distribs (0 block, 1 cyclic,
  // 2 none), dargs (kDefaultDarg for the default), psizes, order (0 C, 1
  // Fortran).
  enum class Distribution { Block = 0, Cyclic = 1, None = 2 };
  static constexpr int kDefaultDarg = -1;
  static Datatype create_darray(int size, int rank, std::span<const int> gsizes,
                                std::span<const Distribution> distribs, std::span<const int> dargs,
                                std::span<const int> psizes, Order order, const Datatype& old);
  static Datatype create_darray(int size, int rank, std::span<const Count> gsizes,
                                std::span<const Distribution> distribs, std::span<const int> dargs,
                                std::span<const int> psizes, Order order, const Datatype& old);
  Datatype dup() const;  // MPI_Type_dup: same type map, committed iff *this is
  // MPI_Type_create_f90_real/complex/integer: the type map of `of`,
  // committed, under combiner F90Real, F90Complex or F90Integer; contents
  // ints = params (p and r; r alone for an integer), no addresses or types.
  static Datatype f90(Combiner combiner, const Datatype& of, std::span<const int> params);

  void commit();  // MPI_Type_commit (idempotent)
  bool is_committed() const;

  // ---- queries (any type, committed or not) ----
  Count size() const;        // MPI_Type_size_x
  Aint extent() const;       // MPI_Type_get_extent
  Aint lb() const;
  Aint ub() const;           // lb + extent
  Aint true_lb() const;      // MPI_Type_get_true_extent
  Aint true_extent() const;
  Aint true_ub() const;
  std::size_t alignment() const;      // used by the struct epsilon rule
  Count num_basic_elements() const;   // basic elements in one element (pairs count 2)
  bool is_contiguous() const;  // count elements = one block at buf + true_lb() of count*size() bytes
  std::optional<BasicType> basic_type() const;  // set for predefined (named) types only
  Combiner combiner() const;
  TypeContents contents() const;  // Named: empty arrays
  // Replaces the combiner and contents a constructor recorded (the
  // large-count bindings record their MPI_Count arguments this way).
  void relabel(TypeContents contents);

  // MPI_Get_count: nullopt = MPI_UNDEFINED (nbytes is not a whole number of
  // elements). A zero-size type gives 0.
  std::optional<Count> get_count(Count nbytes) const;
  // MPI_Get_elements: basic elements in the first nbytes of a packed stream;
  // nullopt = MPI_UNDEFINED (nbytes ends inside a basic element).
  std::optional<Count> get_elements(Count nbytes) const;

  // ---- flattened representation (committed types) ----
  // Blocks of ONE element; throws invalid_argument for a type kept in tree
  // form (more than flat_block_limit() blocks).
  std::span<const Block> blocks() const;
  Count block_count(Count count) const;   // blocks for_each_block will report for `count`

  // Set when every data entry of the type map has the same basic type (e.g.
  // vector of MPI_INT, contiguous of MPI_DOUBLE_INT): predefined reduction
  // ops accept exactly these derived types.
  std::optional<BasicType> uniform_basic_type() const;
  // Runs of that basic type for ONE element, in type-map order (committed,
  // uniform types only; throws invalid_argument otherwise).
  std::span<const ElementRun> element_runs() const;

  // Type signature of `count` elements, in type-map order, as runs:
  // fn(basic, n) for n consecutive basic objects (a pair type counts one
  // per pair); consecutive runs of one basic type are merged. Any type,
  // committed or not. Cost: O(parts) for single-basic-type subtrees, else
  // proportional to the signature's length.
  template <class Fn>
  void for_each_basic_run(Count count, Fn&& fn) const {
    auto adapt = [&](BasicType b, Count n) { fn(b, n); };
    signature_raw(count, &sig_trampoline<decltype(adapt)>, &adapt);
  }

  // ---- packing (committed types) ----
  Count packed_size(Count count) const;  // MPI_Pack_size (exact: count * size())
  // MPI_Pack: appends count elements at outbuf + position, advances position.
  void pack(const void* inbuf, Count count, void* outbuf, Count outsize, Count& position) const;
  // MPI_Unpack: reads count elements from inbuf + position, advances position.
  void unpack(const void* inbuf, Count insize, Count& position, void* outbuf, Count count) const;
  // Bytes [byte_offset, byte_offset + len) of the packed image of `count`
  // elements of `buf`: produce them (send side) or scatter them (receive side,
  // message arriving in pieces). Range must lie within count * size().
  void pack_range(const void* inbuf, Count count, Count byte_offset, Count len, void* out) const;
  void unpack_range(const void* inbytes, Count byte_offset, Count len, void* outbuf, Count count) const;

  // Calls fn(ptr, len) for every contiguous memory block of `count` elements
  // at buf, in packing order, merging blocks adjacent in memory (also across
  // element boundaries). Zero-length blocks are never reported.
  template <class Fn>
  void for_each_block(const void* buf, Count count, Fn&& fn) const {
    walk_blocks(buf, count, [&](std::uintptr_t p, std::size_t n) {
      fn(reinterpret_cast<const void*>(p), n);
    });
  }
  template <class Fn>
  void for_each_block(void* buf, Count count, Fn&& fn) const {
    walk_blocks(buf, count, [&](std::uintptr_t p, std::size_t n) {
      fn(reinterpret_cast<void*>(p), n);
    });
  }

  // Same, restricted to bytes [byte_offset, byte_offset + len) of the packed
  // image of `count` elements: the memory pieces making up one fragment of a
  // message (zero-copy send/receive of a non-contiguous message in several
  // packets). Blocks adjacent in memory are merged. Range as for pack_range.
  template <class Fn>
  void for_each_block_range(const void* buf, Count count, Count byte_offset, Count len, Fn&& fn) const {
    auto adapt = [&](std::uintptr_t p, std::size_t n) { fn(reinterpret_cast<const void*>(p), n); };
    walk_range_raw(buf, count, byte_offset, len, &trampoline<decltype(adapt)>, &adapt);
  }
  template <class Fn>
  void for_each_block_range(void* buf, Count count, Count byte_offset, Count len, Fn&& fn) const {
    auto adapt = [&](std::uintptr_t p, std::size_t n) { fn(reinterpret_cast<void*>(p), n); };
    walk_range_raw(buf, count, byte_offset, len, &trampoline<decltype(adapt)>, &adapt);
  }

 private:
  explicit Datatype(std::shared_ptr<TypeImpl> impl) : impl_(std::move(impl)) {}
  const TypeImpl& checked() const;
  // The flat block list, or nullptr for a type in tree form; throws if
  // uncommitted.
  const std::vector<Block>* flat_blocks() const;
  template <class Emit>
  void walk_blocks(const void* buf, Count count, Emit&& emit) const {
    const std::vector<Block>* fb = flat_blocks();
    check_count(count);
    if (!fb) {
      walk_range_raw(buf, count, 0, packed_size(count), &trampoline<std::remove_reference_t<Emit>>, &emit);
      return;
    }
    const std::span<const Block> b = *fb;
    if (count == 0 || b.empty()) return;
    const std::uintptr_t base = reinterpret_cast<std::uintptr_t>(buf);
    if (is_contiguous()) {
      emit(base + static_cast<std::uintptr_t>(b[0].offset),
           static_cast<std::size_t>(count) * static_cast<std::size_t>(b[0].length));
      return;
    }
    const Aint ext = extent();
    std::uintptr_t cur = 0;
    std::size_t curlen = 0;
    bool have = false;
    for (Count e = 0; e < count; ++e) {
      const std::uintptr_t ebase = base + static_cast<std::uintptr_t>(static_cast<Aint>(e) * ext);
      for (const Block& blk : b) {
        const std::uintptr_t p = ebase + static_cast<std::uintptr_t>(blk.offset);
        if (have && cur + curlen == p) {
          curlen += static_cast<std::size_t>(blk.length);
          continue;
        }
        if (have) emit(cur, curlen);
        cur = p;
        curlen = static_cast<std::size_t>(blk.length);
        have = true;
      }
    }
    if (have) emit(cur, curlen);
  }
  static void check_count(Count count);
  using RawBlockFn = void (*)(void* ctx, std::uintptr_t p, std::size_t n);
  template <class F>
  static void trampoline(void* ctx, std::uintptr_t p, std::size_t n) {
    (*static_cast<F*>(ctx))(p, n);
  }
  void walk_range_raw(const void* buf, Count count, Count byte_offset, Count len, RawBlockFn fn,
                      void* ctx) const;
  using RawSigFn = void (*)(void* ctx, BasicType b, Count n);
  template <class F>
  static void sig_trampoline(void* ctx, BasicType b, Count n) {
    (*static_cast<F*>(ctx))(b, n);
  }
  void signature_raw(Count count, RawSigFn fn, void* ctx) const;

  std::shared_ptr<TypeImpl> impl_;
  friend struct TypeImpl;
};

// Flattening threshold (blocks per element) applied by later commits; types
// above it stay in tree form. Exposed for tests, which compare both forms.
Count flat_block_limit();
void set_flat_block_limit(Count blocks);

}  // namespace nmad::mpi
