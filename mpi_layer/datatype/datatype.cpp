// Datatype engine implementation: type tree, bounds computation at
// construction, flattening into (offset, length) blocks at commit.
#include "mpi_layer/datatype/datatype.hpp"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <functional>
#include <limits>
#include <mutex>

namespace nmad::mpi {

namespace {

[[noreturn]] void fail(DatatypeErrc c, const std::string& what) {
  throw DatatypeError(c, "nmad::mpi datatype: " + what);
}

template <class T>
constexpr BasicTypeInfo scalar(const char* name) {
  return BasicTypeInfo{name, sizeof(T), sizeof(T), alignof(T), 1, {{0, sizeof(T)}, {0, 0}}};
}
template <class P>
constexpr BasicTypeInfo pair(const char* name) {
  return BasicTypeInfo{name,
                       sizeof(P::v) + sizeof(P::i),
                       sizeof(P),
                       alignof(P),
                       2,
                       {{offsetof(P, v), sizeof(P::v)}, {offsetof(P, i), sizeof(P::i)}}};
}

const BasicTypeInfo kBasicInfo[kNumBasicTypes] = {
    scalar<char>("MPI_CHAR"),
    scalar<signed char>("MPI_SIGNED_CHAR"),
    scalar<unsigned char>("MPI_UNSIGNED_CHAR"),
    scalar<unsigned char>("MPI_BYTE"),
    scalar<short>("MPI_SHORT"),
    scalar<unsigned short>("MPI_UNSIGNED_SHORT"),
    scalar<int>("MPI_INT"),
    scalar<unsigned>("MPI_UNSIGNED"),
    scalar<long>("MPI_LONG"),
    scalar<unsigned long>("MPI_UNSIGNED_LONG"),
    scalar<long long>("MPI_LONG_LONG_INT"),
    scalar<unsigned long long>("MPI_UNSIGNED_LONG_LONG"),
    scalar<float>("MPI_FLOAT"),
    scalar<double>("MPI_DOUBLE"),
    scalar<long double>("MPI_LONG_DOUBLE"),
    scalar<wchar_t>("MPI_WCHAR"),
    scalar<bool>("MPI_C_BOOL"),
    scalar<std::int8_t>("MPI_INT8_T"),
    scalar<std::int16_t>("MPI_INT16_T"),
    scalar<std::int32_t>("MPI_INT32_T"),
    scalar<std::int64_t>("MPI_INT64_T"),
    scalar<std::uint8_t>("MPI_UINT8_T"),
    scalar<std::uint16_t>("MPI_UINT16_T"),
    scalar<std::uint32_t>("MPI_UINT32_T"),
    scalar<std::uint64_t>("MPI_UINT64_T"),
    scalar<CFloatComplexT>("MPI_C_FLOAT_COMPLEX"),
    scalar<CDoubleComplexT>("MPI_C_DOUBLE_COMPLEX"),
    scalar<CLongDoubleComplexT>("MPI_C_LONG_DOUBLE_COMPLEX"),
    scalar<AintT>("MPI_AINT"),
    scalar<OffsetT>("MPI_OFFSET"),
    scalar<CountT>("MPI_COUNT"),
    scalar<unsigned char>("MPI_PACKED"),
    pair<FloatIntPair>("MPI_FLOAT_INT"),
    pair<DoubleIntPair>("MPI_DOUBLE_INT"),
    pair<LongIntPair>("MPI_LONG_INT"),
    pair<TwoIntPair>("MPI_2INT"),
    pair<ShortIntPair>("MPI_SHORT_INT"),
    pair<LongDoubleIntPair>("MPI_LONG_DOUBLE_INT"),
};

Count checked_mul(Count a, Count b, const char* what) {
  Count r;
  if (__builtin_mul_overflow(a, b, &r)) fail(DatatypeErrc::invalid_count, std::string(what) + " overflows");
  return r;
}
Count checked_add(Count a, Count b, const char* what) {
  Count r;
  if (__builtin_add_overflow(a, b, &r)) fail(DatatypeErrc::invalid_count, std::string(what) + " overflows");
  return r;
}

}  // namespace

const BasicTypeInfo& basic_type_info(BasicType t) {
  const int i = static_cast<int>(t);
  if (i < 0 || i >= kNumBasicTypes) fail(DatatypeErrc::invalid_datatype, "unknown basic type");
  return kBasicInfo[i];
}

bool is_pair_type(BasicType t) { return basic_type_info(t).num_members == 2; }

// Types whose flattened form would exceed this many blocks per element stay
// in tree form (see "Cost" in datatype.hpp).
std::atomic<Count> g_flat_block_limit{Count{1} << 16};

struct TypeImpl {
  // One component: `repeat` groups (group r at byte displacement
  // disp + r * stride), each group `blocklength` consecutive copies of `child`
  // (copy k at + k * child extent). vector/hvector use one part with
  // repeat = count, so construction is O(1) whatever the count: this is the
  // (count, stride, sub-type) loop node packing evaluates lazily.
  struct Part {
    std::shared_ptr<TypeImpl> child;
    Count blocklength;
    Aint disp;
    Count repeat = 1;
    Aint stride = 0;
  };

  Combiner combiner = Combiner::Named;
  std::optional<BasicType> basic;
  std::vector<Part> parts;
  TypeContents contents{Combiner::Named, {}, {}, {}};

  // Computed at construction.
  Count size = 0;
  Count nelements = 0;
  Aint lb = 0, ub = 0, true_lb = 0, true_ub = 0;
  bool has_entries = false;   // type map non-empty (data or markers)
  bool lb_sticky = false, ub_sticky = false;
  std::size_t align = 1;
  std::optional<BasicType> uniform;  // every data entry has this basic type

  // Built once (ensure_flat, at commit): either the flat block list (small
  // types) or, when that list would exceed g_flat_block_limit blocks,
  // nothing but `part_start` (tree form, walked by walk_tree).
  std::once_flag flat_once;
  bool tree = false;         // not flattened: pack by walking `parts`
  std::vector<Block> flat;   // when !tree
  std::vector<Aint> prefix;  // packed offset of each flat block
  std::vector<Count> part_start;  // packed offset of each part in one element
  std::atomic<bool> committed{false};
  // Built on first use (element_runs, for reductions; only when `uniform`).
  std::once_flag eruns_once;
  std::vector<ElementRun> eruns;

  void ensure_flat() {
    std::call_once(flat_once, [this] { build_flat(); });
  }
  void ensure_eruns() {
    std::call_once(eruns_once, [this] { build_eruns(); });
  }

  static void emit(std::vector<Block>& out, Aint off, Aint len) {
    if (len == 0) return;
    if (!out.empty() && out.back().offset + out.back().length == off) {
      out.back().length += len;
    } else {
      out.push_back(Block{off, len});
    }
  }
  static void emit_erun(std::vector<ElementRun>& out, Aint off, Count n, Aint bext) {
    if (n == 0) return;
    if (!out.empty() && out.back().offset + static_cast<Aint>(out.back().count) * bext == off) {
      out.back().count += n;
    } else {
      out.push_back(ElementRun{off, n});
    }
  }
  static Count sat_add(Count a, Count b) {
    Count r;
    return __builtin_add_overflow(a, b, &r) ? std::numeric_limits<Count>::max() : r;
  }
  static Count sat_mul(Count a, Count b) {
    Count r;
    return __builtin_mul_overflow(a, b, &r) ? std::numeric_limits<Count>::max() : r;
  }
  bool dense() const {  // one block exactly one extent long: copies abut
    return !tree && flat.size() == 1 && flat[0].length == ub - lb;
  }

  // Upper bound of the flat block count, from the children's flat forms
  // (infinite if a child stayed a tree). Prepares every child (ensure_flat).
  // O(number of parts).
  Count estimate_blocks() {
    Count est = 0;
    for (const Part& p : parts) {
      if (p.blocklength == 0 || p.repeat == 0) continue;
      TypeImpl& c = *p.child;
      c.ensure_flat();
      if (c.size == 0) continue;
      if (c.tree) {  // (every child is still prepared: packing may reach it)
        est = std::numeric_limits<Count>::max();
        continue;
      }
      const Aint ext = c.ub - c.lb;
      Count n;
      if (c.dense())
        n = (p.repeat == 1 || p.stride == static_cast<Aint>(p.blocklength) * ext) ? 1 : p.repeat;
      else
        n = sat_mul(sat_mul(p.repeat, p.blocklength), static_cast<Count>(c.flat.size()));
      est = sat_add(est, n);
    }
    return est;
  }

  void build_flat() {
    if (basic) {
      const BasicTypeInfo& bi = basic_type_info(*basic);
      for (int m = 0; m < bi.num_members; ++m)
        emit(flat, static_cast<Aint>(bi.members[m].offset), static_cast<Aint>(bi.members[m].size));
    } else {
      Count at = 0;
      part_start.reserve(parts.size());
      for (const Part& p : parts) {
        part_start.push_back(at);
        at += p.blocklength * p.repeat * p.child->size;
      }
      if (estimate_blocks() > g_flat_block_limit.load(std::memory_order_relaxed)) {
        tree = true;
        return;
      }
      for (const Part& p : parts) {
        if (p.blocklength == 0 || p.repeat == 0) continue;
        const TypeImpl& c = *p.child;
        if (c.size == 0) continue;
        const Aint ext = c.ub - c.lb;
        if (c.dense() && (p.repeat == 1 || p.stride == static_cast<Aint>(p.blocklength) * ext)) {
          emit(flat, p.disp + c.flat[0].offset, static_cast<Aint>(p.blocklength * p.repeat) * ext);
          continue;
        }
        for (Count r = 0; r < p.repeat; ++r) {
          const Aint gbase = p.disp + static_cast<Aint>(r) * p.stride;
          if (c.dense()) {
            emit(flat, gbase + c.flat[0].offset, static_cast<Aint>(p.blocklength) * ext);
            continue;
          }
          for (Count k = 0; k < p.blocklength; ++k) {
            const Aint base = gbase + static_cast<Aint>(k) * ext;
            for (const Block& b : c.flat) emit(flat, base + b.offset, b.length);
          }
        }
      }
    }
    prefix.reserve(flat.size());
    Aint acc = 0;
    for (const Block& b : flat) {
      prefix.push_back(acc);
      acc += b.length;
    }
  }

  void build_eruns() {
    if (!uniform) return;
    if (basic) {
      eruns.push_back(ElementRun{0, 1});
      return;
    }
    const Aint bext = static_cast<Aint>(basic_type_info(*uniform).extent);
    for (const Part& p : parts) {
      if (p.blocklength == 0 || p.repeat == 0) continue;
      TypeImpl& c = *p.child;
      if (c.size == 0) continue;
      c.ensure_eruns();
      const Aint ext = c.ub - c.lb;
      const bool edense = c.eruns.size() == 1 && static_cast<Aint>(c.eruns[0].count) * bext == ext;
      if (edense && (p.repeat == 1 || p.stride == static_cast<Aint>(p.blocklength) * ext)) {
        emit_erun(eruns, p.disp + c.eruns[0].offset, c.eruns[0].count * p.blocklength * p.repeat, bext);
        continue;
      }
      for (Count r = 0; r < p.repeat; ++r) {
        const Aint gbase = p.disp + static_cast<Aint>(r) * p.stride;
        if (edense) {
          emit_erun(eruns, gbase + c.eruns[0].offset, c.eruns[0].count * p.blocklength, bext);
          continue;
        }
        for (Count k = 0; k < p.blocklength; ++k) {
          const Aint base = gbase + static_cast<Aint>(k) * ext;
          for (const ElementRun& e : c.eruns) emit_erun(eruns, base + e.offset, e.count, bext);
        }
      }
    }
  }

  // MPI_Get_elements on the first nbytes of a packed stream of these
  // elements, by descending the tree: O(depth * parts), no flat form needed.
  std::optional<Count> elements_in(Count nbytes) const {
    if (size == 0) return nbytes == 0 ? std::optional<Count>(0) : std::nullopt;
    Count elems = (nbytes / size) * nelements;
    Count rem = nbytes % size;
    if (rem == 0) return elems;
    if (basic) {  // inside one basic object: only a pair's first member ends cleanly
      const BasicTypeInfo& bi = basic_type_info(*basic);
      if (bi.num_members == 2 && rem == static_cast<Count>(bi.members[0].size)) return elems + 1;
      return std::nullopt;
    }
    for (const Part& p : parts) {
      const TypeImpl& c = *p.child;
      const Count copies = p.blocklength * p.repeat;
      const Count psize = copies * c.size;
      if (rem >= psize) {
        elems += copies * c.nelements;
        rem -= psize;
        continue;
      }
      const std::optional<Count> sub = c.elements_in(rem);
      if (!sub) return std::nullopt;
      return elems + *sub;
    }
    return rem == 0 ? std::optional<Count>(elems) : std::nullopt;
  }

  // Computes size/bounds/alignment from `parts`; `pad_epsilon` for structs.
  void compute_bounds(bool pad_epsilon) {
    size = 0;
    nelements = 0;
    align = 1;
    uniform.reset();
    bool mixed = false;
    bool any_sticky_lb = false, any_sticky_ub = false, any_entry = false, any_data = false;
    Aint slb = std::numeric_limits<Aint>::max(), sub = std::numeric_limits<Aint>::min();
    Aint dlb = std::numeric_limits<Aint>::max(), dub = std::numeric_limits<Aint>::min();
    Aint tlb = std::numeric_limits<Aint>::max(), tub = std::numeric_limits<Aint>::min();
    for (const Part& p : parts) {
      const TypeImpl& c = *p.child;
      if (p.blocklength == 0 || p.repeat == 0 || !c.has_entries) continue;
      align = std::max(align, c.align);
      const Count copies = checked_mul(p.blocklength, p.repeat, "type size");
      size = checked_add(size, checked_mul(copies, c.size, "type size"), "type size");
      nelements = checked_add(nelements, checked_mul(copies, c.nelements, "element count"),
                              "element count");
      const Aint ext = c.ub - c.lb;
      const Aint last = checked_mul(p.blocklength - 1, ext, "displacement");
      const Aint lastr = checked_mul(p.repeat - 1, p.stride, "displacement");
      const Aint lo = p.disp + std::min<Aint>(0, last) + std::min<Aint>(0, lastr);
      const Aint hi = p.disp + std::max<Aint>(0, last) + std::max<Aint>(0, lastr);
      any_entry = true;
      if (c.lb_sticky) {
        any_sticky_lb = true;
        slb = std::min(slb, lo + c.lb);
      } else {
        dlb = std::min(dlb, lo + c.lb);
      }
      if (c.ub_sticky) {
        any_sticky_ub = true;
        sub = std::max(sub, hi + c.ub);
      } else {
        dub = std::max(dub, hi + c.ub);
      }
      if (c.size > 0) {
        any_data = true;
        tlb = std::min(tlb, lo + c.true_lb);
        tub = std::max(tub, hi + c.true_ub);
        if (!c.uniform || (uniform && *uniform != *c.uniform)) mixed = true;
        if (!uniform) uniform = c.uniform;
      }
    }
    if (mixed) uniform.reset();
    has_entries = any_entry;
    lb_sticky = any_sticky_lb;
    ub_sticky = any_sticky_ub;
    if (!any_entry) {
      lb = ub = true_lb = true_ub = 0;
      return;
    }
    lb = any_sticky_lb ? slb : dlb;
    ub = any_sticky_ub ? sub : dub;
    if (any_data) {
      true_lb = tlb;
      true_ub = tub;
    } else {
      true_lb = true_ub = 0;
    }
    if (pad_epsilon && !any_sticky_lb && !any_sticky_ub && align > 1) {
      const Aint ext = ub - lb;
      const Aint a = static_cast<Aint>(align);
      const Aint rem = ((ext % a) + a) % a;
      if (rem != 0) ub += a - rem;
    }
  }
};

namespace {

std::shared_ptr<TypeImpl> make_basic_impl(BasicType t) {
  auto impl = std::make_shared<TypeImpl>();
  const BasicTypeInfo& bi = basic_type_info(t);
  impl->combiner = Combiner::Named;
  impl->basic = t;
  impl->uniform = t;
  impl->size = static_cast<Count>(bi.size);
  impl->nelements = bi.num_members;
  impl->lb = 0;
  impl->ub = static_cast<Aint>(bi.extent);
  impl->true_lb = 0;
  impl->true_ub = static_cast<Aint>(bi.members[bi.num_members - 1].offset + bi.members[bi.num_members - 1].size);
  impl->has_entries = true;
  impl->align = bi.alignment;
  impl->ensure_flat();
  impl->committed.store(true, std::memory_order_release);
  return impl;
}

const std::shared_ptr<TypeImpl>& basic_impl(BasicType t) {
  static const std::vector<std::shared_ptr<TypeImpl>> table = [] {
    std::vector<std::shared_ptr<TypeImpl>> v;
    for (int i = 0; i < kNumBasicTypes; ++i) v.push_back(make_basic_impl(static_cast<BasicType>(i)));
    return v;
  }();
  const int i = static_cast<int>(t);
  if (i < 0 || i >= kNumBasicTypes) fail(DatatypeErrc::invalid_datatype, "unknown basic type");
  return table[i];
}

void check_nonneg_count(Count c) {
  if (c < 0) fail(DatatypeErrc::invalid_count, "negative count " + std::to_string(c));
}
void check_blocklength(Count b) {
  if (b < 0) fail(DatatypeErrc::negative_blocklength, "negative blocklength " + std::to_string(b));
}

}  // namespace

// ------------------------------------------------------------- Datatype --

void Datatype::check_count(Count count) { check_nonneg_count(count); }

const TypeImpl& Datatype::checked() const {
  if (!impl_) fail(DatatypeErrc::invalid_datatype, "null datatype handle");
  return *impl_;
}

Datatype Datatype::basic(BasicType t) { return Datatype(basic_impl(t)); }

namespace {
struct Builder {
  std::shared_ptr<TypeImpl> impl = std::make_shared<TypeImpl>();
  Builder(Combiner c) {
    impl->combiner = c;
    impl->contents.combiner = c;
  }
};
}  // namespace

Datatype Datatype::contiguous(Count count, const Datatype& old) {
  const TypeImpl& o = old.checked();
  (void)o;
  check_nonneg_count(count);
  Builder b(Combiner::Contiguous);
  b.impl->parts.push_back({old.impl_, count, 0});
  b.impl->contents.ints = {count};
  b.impl->contents.types = {old};
  b.impl->compute_bounds(false);
  return Datatype(b.impl);
}

Datatype Datatype::hvector(Count count, Count blocklength, Aint stride_bytes, const Datatype& old) {
  old.checked();
  check_nonneg_count(count);
  check_blocklength(blocklength);
  Builder b(Combiner::Hvector);
  b.impl->parts.push_back({old.impl_, blocklength, 0, count, stride_bytes});
  b.impl->contents.ints = {count, blocklength};
  b.impl->contents.addresses = {stride_bytes};
  b.impl->contents.types = {old};
  b.impl->compute_bounds(false);
  return Datatype(b.impl);
}

Datatype Datatype::vector(Count count, Count blocklength, Count stride, const Datatype& old) {
  const TypeImpl& o = old.checked();
  Datatype d = hvector(count, blocklength, checked_mul(stride, o.ub - o.lb, "stride"), old);
  d.impl_->combiner = Combiner::Vector;
  d.impl_->contents.combiner = Combiner::Vector;
  d.impl_->contents.ints = {count, blocklength, stride};
  d.impl_->contents.addresses.clear();
  return d;
}

Datatype Datatype::hindexed(std::span<const int> blocklengths, std::span<const Aint> displacements,
                            const Datatype& old) {
  old.checked();
  if (blocklengths.size() != displacements.size())
    fail(DatatypeErrc::invalid_argument, "blocklengths and displacements differ in length");
  Builder b(Combiner::Hindexed);
  const Count n = static_cast<Count>(blocklengths.size());
  b.impl->contents.ints.push_back(n);
  for (std::size_t i = 0; i < blocklengths.size(); ++i) {
    check_blocklength(blocklengths[i]);
    b.impl->parts.push_back({old.impl_, blocklengths[i], displacements[i]});
    b.impl->contents.ints.push_back(blocklengths[i]);
    b.impl->contents.addresses.push_back(displacements[i]);
  }
  b.impl->contents.types = {old};
  b.impl->compute_bounds(false);
  return Datatype(b.impl);
}

Datatype Datatype::indexed(std::span<const int> blocklengths, std::span<const int> displacements,
                           const Datatype& old) {
  const TypeImpl& o = old.checked();
  if (blocklengths.size() != displacements.size())
    fail(DatatypeErrc::invalid_argument, "blocklengths and displacements differ in length");
  const Aint ext = o.ub - o.lb;
  std::vector<Aint> bytes;
  bytes.reserve(displacements.size());
  for (int d : displacements) bytes.push_back(checked_mul(d, ext, "displacement"));
  Datatype r = hindexed(blocklengths, bytes, old);
  r.impl_->combiner = Combiner::Indexed;
  r.impl_->contents.combiner = Combiner::Indexed;
  r.impl_->contents.addresses.clear();
  for (int d : displacements) r.impl_->contents.ints.push_back(d);
  return r;
}

Datatype Datatype::hindexed_block(Count blocklength, std::span<const Aint> displacements,
                                  const Datatype& old) {
  old.checked();
  check_blocklength(blocklength);
  Builder b(Combiner::HindexedBlock);
  for (Aint d : displacements) b.impl->parts.push_back({old.impl_, blocklength, d});
  b.impl->contents.ints = {static_cast<Count>(displacements.size()), blocklength};
  b.impl->contents.addresses.assign(displacements.begin(), displacements.end());
  b.impl->contents.types = {old};
  b.impl->compute_bounds(false);
  return Datatype(b.impl);
}

Datatype Datatype::indexed_block(Count blocklength, std::span<const int> displacements,
                                 const Datatype& old) {
  const TypeImpl& o = old.checked();
  const Aint ext = o.ub - o.lb;
  std::vector<Aint> bytes;
  for (int d : displacements) bytes.push_back(checked_mul(d, ext, "displacement"));
  Datatype r = hindexed_block(blocklength, bytes, old);
  r.impl_->combiner = Combiner::IndexedBlock;
  r.impl_->contents.combiner = Combiner::IndexedBlock;
  r.impl_->contents.addresses.clear();
  for (int d : displacements) r.impl_->contents.ints.push_back(d);
  return r;
}

Datatype Datatype::create_struct(std::span<const int> blocklengths, std::span<const Aint> displacements,
                                 std::span<const Datatype> types) {
  if (blocklengths.size() != displacements.size() || blocklengths.size() != types.size())
    fail(DatatypeErrc::invalid_argument, "struct arrays differ in length");
  Builder b(Combiner::Struct);
  b.impl->contents.ints.push_back(static_cast<Count>(blocklengths.size()));
  for (std::size_t i = 0; i < blocklengths.size(); ++i) {
    types[i].checked();
    check_blocklength(blocklengths[i]);
    b.impl->parts.push_back({types[i].impl_, blocklengths[i], displacements[i]});
    b.impl->contents.ints.push_back(blocklengths[i]);
  }
  b.impl->contents.addresses.assign(displacements.begin(), displacements.end());
  b.impl->contents.types.assign(types.begin(), types.end());
  b.impl->compute_bounds(true);
  return Datatype(b.impl);
}

Datatype Datatype::create_resized(const Datatype& old, Aint lb, Aint extent) {
  const TypeImpl& o = old.checked();
  Builder b(Combiner::Resized);
  b.impl->parts.push_back({old.impl_, 1, 0});
  b.impl->compute_bounds(false);  // size, nelements, true bounds, align
  b.impl->has_entries = true;
  b.impl->lb = lb;
  b.impl->ub = lb + extent;
  b.impl->lb_sticky = b.impl->ub_sticky = true;
  b.impl->align = o.align;
  b.impl->contents.addresses = {lb, extent};
  b.impl->contents.types = {old};
  return Datatype(b.impl);
}

Datatype Datatype::create_subarray(std::span<const int> sizes, std::span<const int> subsizes,
                                   std::span<const int> starts, Order order, const Datatype& old) {
  const TypeImpl& o = old.checked();
  const std::size_t nd = sizes.size();
  if (nd == 0 || subsizes.size() != nd || starts.size() != nd)
    fail(DatatypeErrc::invalid_argument, "subarray needs ndims >= 1 and equal-length arrays");
  for (std::size_t d = 0; d < nd; ++d) {
    if (sizes[d] < 1) fail(DatatypeErrc::invalid_argument, "subarray size < 1");
    if (subsizes[d] < 0) fail(DatatypeErrc::invalid_count, "negative subarray subsize");
    if (starts[d] < 0 || starts[d] > sizes[d] - subsizes[d])
      fail(DatatypeErrc::invalid_argument, "subarray start out of range");
  }
  // dims from the fastest-varying one outwards
  std::vector<std::size_t> dims(nd);
  for (std::size_t k = 0; k < nd; ++k) dims[k] = order == Order::C ? nd - 1 - k : k;
  const Aint ext = o.ub - o.lb;
  Datatype t = contiguous(subsizes[dims[0]], old);
  Aint stride = checked_mul(ext, sizes[dims[0]], "subarray size");
  Aint disp = checked_mul(starts[dims[0]], ext, "subarray displacement");
  for (std::size_t k = 1; k < nd; ++k) {
    const std::size_t d = dims[k];
    t = hvector(subsizes[d], 1, stride, t);
    disp = checked_add(disp, checked_mul(starts[d], stride, "subarray displacement"), "subarray displacement");
    stride = checked_mul(stride, sizes[d], "subarray size");
  }
  const Aint one_disp[] = {disp};
  Datatype r = create_resized(hindexed_block(1, one_disp, t), 0, stride);
  r.impl_->combiner = Combiner::Subarray;
  TypeContents& c = r.impl_->contents;
  c.combiner = Combiner::Subarray;
  c.ints.clear();
  c.addresses.clear();
  c.ints.push_back(static_cast<Count>(nd));
  for (int v : sizes) c.ints.push_back(v);
  for (int v : subsizes) c.ints.push_back(v);
  for (int v : starts) c.ints.push_back(v);
  c.ints.push_back(order == Order::C ? 0 : 1);
  c.types = {old};
  return r;
}

void Datatype::relabel(TypeContents contents) {
  checked();
  impl_->combiner = contents.combiner;
  impl_->contents = std::move(contents);
}

Datatype Datatype::dup() const {
  const TypeImpl& o = checked();
  Builder b(Combiner::Dup);
  b.impl->parts.push_back({impl_, 1, 0});
  b.impl->compute_bounds(false);
  b.impl->has_entries = o.has_entries;
  b.impl->lb = o.lb;
  b.impl->ub = o.ub;
  b.impl->lb_sticky = o.lb_sticky;
  b.impl->ub_sticky = o.ub_sticky;
  b.impl->true_lb = o.true_lb;
  b.impl->true_ub = o.true_ub;
  b.impl->contents.types = {*this};
  Datatype d(b.impl);
  if (is_committed()) d.commit();
  return d;
}

Datatype Datatype::f90(Combiner combiner, const Datatype& of, std::span<const int> params) {
  if (combiner != Combiner::F90Real && combiner != Combiner::F90Complex && combiner != Combiner::F90Integer)
    fail(DatatypeErrc::invalid_argument, "not an F90 combiner");
  Datatype d = of.dup();
  d.commit();
  d.relabel({combiner, std::vector<Count>(params.begin(), params.end()), {}, {}});
  return d;
}

void Datatype::commit() {
  checked();
  impl_->ensure_flat();
  impl_->committed.store(true, std::memory_order_release);
}

bool Datatype::is_committed() const { return checked().committed.load(std::memory_order_acquire); }

Count Datatype::size() const { return checked().size; }
Aint Datatype::extent() const { return checked().ub - impl_->lb; }
Aint Datatype::lb() const { return checked().lb; }
Aint Datatype::ub() const { return checked().ub; }
Aint Datatype::true_lb() const { return checked().true_lb; }
Aint Datatype::true_extent() const { return checked().true_ub - impl_->true_lb; }
Aint Datatype::true_ub() const { return checked().true_ub; }
std::size_t Datatype::alignment() const { return checked().align; }
Count Datatype::num_basic_elements() const { return checked().nelements; }
std::optional<BasicType> Datatype::basic_type() const { return checked().basic; }
Combiner Datatype::combiner() const { return checked().combiner; }
TypeContents Datatype::contents() const { return checked().contents; }

bool Datatype::is_contiguous() const {
  checked();
  if (impl_->size == 0) return true;
  impl_->ensure_flat();
  return !impl_->tree && impl_->flat.size() == 1 && impl_->flat[0].length == impl_->ub - impl_->lb;
}

std::optional<Count> Datatype::get_count(Count nbytes) const {
  const TypeImpl& t = checked();
  if (nbytes < 0) fail(DatatypeErrc::invalid_count, "negative byte count");
  if (t.size == 0) return 0;
  if (nbytes % t.size != 0) return std::nullopt;
  return nbytes / t.size;
}

std::optional<Count> Datatype::get_elements(Count nbytes) const {
  const TypeImpl& t = checked();
  if (nbytes < 0) fail(DatatypeErrc::invalid_count, "negative byte count");
  return t.elements_in(nbytes);
}

const std::vector<Block>* Datatype::flat_blocks() const {
  const TypeImpl& t = checked();
  if (!t.committed.load(std::memory_order_acquire))
    fail(DatatypeErrc::uncommitted, "datatype is not committed");
  return t.tree ? nullptr : &t.flat;
}

std::span<const Block> Datatype::blocks() const {
  const std::vector<Block>* b = flat_blocks();
  if (!b)
    fail(DatatypeErrc::invalid_argument,
         "datatype has more than " + std::to_string(flat_block_limit()) +
             " blocks per element and is kept in tree form (use for_each_block)");
  return *b;
}

std::optional<BasicType> Datatype::uniform_basic_type() const { return checked().uniform; }

std::span<const ElementRun> Datatype::element_runs() const {
  flat_blocks();  // checks commit
  if (!impl_->uniform) fail(DatatypeErrc::invalid_argument, "datatype mixes several basic types");
  impl_->ensure_eruns();
  return impl_->eruns;
}

Count Datatype::block_count(Count count) const {
  const std::vector<Block>* fb = flat_blocks();
  check_nonneg_count(count);
  if (!fb) {  // tree form: count what for_each_block reports
    Count n = 0;
    for_each_block(static_cast<const void*>(nullptr), count, [&](const void*, std::size_t) { ++n; });
    return n;
  }
  const std::span<const Block> b = *fb;
  if (count == 0 || b.empty()) return 0;
  const Count n = static_cast<Count>(b.size());
  const Aint ext = extent();
  const bool joins = b.front().offset + ext == b.back().offset + b.back().length;
  return joins ? checked_mul(count, n, "block count") - (count - 1) : checked_mul(count, n, "block count");
}

Count flat_block_limit() { return g_flat_block_limit.load(std::memory_order_relaxed); }
void set_flat_block_limit(Count blocks) { g_flat_block_limit.store(blocks, std::memory_order_relaxed); }

namespace {
// Signature runs of `copies` consecutive elements of t (see for_each_basic_run).
void signature(const TypeImpl& t, Count copies, const std::function<void(BasicType, Count)>& out) {
  if (copies == 0 || t.size == 0) return;
  if (t.uniform) {
    out(*t.uniform, copies * (t.size / static_cast<Count>(basic_type_info(*t.uniform).size)));
    return;
  }
  for (Count k = 0; k < copies; ++k)
    for (const TypeImpl::Part& p : t.parts) signature(*p.child, p.blocklength * p.repeat, out);
}
}  // namespace

void Datatype::signature_raw(Count count, RawSigFn fn, void* ctx) const {
  const TypeImpl& t = checked();
  check_nonneg_count(count);
  std::optional<BasicType> cur;
  Count n = 0;
  signature(t, count, [&](BasicType b, Count k) {
    if (k == 0) return;
    if (cur && *cur == b) {
      n += k;
      return;
    }
    if (cur) fn(ctx, *cur, n);
    cur = b;
    n = k;
  });
  if (cur) fn(ctx, *cur, n);
}

Count Datatype::packed_size(Count count) const {
  const TypeImpl& t = checked();
  check_nonneg_count(count);
  return checked_mul(count, t.size, "packed size");
}

namespace {

// Walks bytes [off, off + len) of the packed image of the elements laid out
// at `base` (element i at base + i * extent); fn(mem_address, packed_pos, n)
// with packed_pos starting at `pos` (advanced). Flat types use their block
// list; tree-form types descend their parts (walk_tree_element), evaluating
// each (repeat, stride, child) loop only for the groups the range touches.
template <class Fn>
void walk_seq(const TypeImpl& t, std::uintptr_t base, Count off, Count len, Count& pos, Fn& fn);

template <class Fn>
void walk_tree_element(const TypeImpl& t, std::uintptr_t ebase, Count off, Count len, Count& pos, Fn& fn) {
  std::size_t i = static_cast<std::size_t>(
      std::upper_bound(t.part_start.begin(), t.part_start.end(), off) - t.part_start.begin() - 1);
  off -= t.part_start[i];
  for (; len > 0 && i < t.parts.size(); ++i, off = 0) {
    const TypeImpl::Part& p = t.parts[i];
    const TypeImpl& c = *p.child;
    const Count gsize = p.blocklength * c.size;
    if (gsize == 0 || p.repeat == 0) continue;
    Count r = off / gsize;
    Count w = off % gsize;
    if (c.dense()) {  // each group is one run of memory: no descent
      const std::uintptr_t first = ebase + static_cast<std::uintptr_t>(p.disp + c.flat[0].offset);
      for (; r < p.repeat && len > 0; ++r, w = 0) {
        const Count n = std::min(len, gsize - w);
        fn(first + static_cast<std::uintptr_t>(static_cast<Aint>(r) * p.stride + w), pos, n);
        pos += n;
        len -= n;
      }
      continue;
    }
    for (; r < p.repeat && len > 0; ++r, w = 0) {
      const Count n = std::min(len, gsize - w);
      walk_seq(c, ebase + static_cast<std::uintptr_t>(p.disp + static_cast<Aint>(r) * p.stride), w, n, pos, fn);
      len -= n;
    }
  }
}

template <class Fn>
void walk_seq(const TypeImpl& t, std::uintptr_t base, Count off, Count len, Count& pos, Fn& fn) {
  if (len == 0) return;
  const Aint ext = t.ub - t.lb;
  if (t.tree) {
    Count e = off / t.size;
    Count within = off % t.size;
    while (len > 0) {
      const Count n = std::min(len, t.size - within);
      walk_tree_element(t, base + static_cast<std::uintptr_t>(static_cast<Aint>(e) * ext), within, n, pos, fn);
      len -= n;
      within = 0;
      ++e;
    }
    return;
  }
  if (t.flat.size() == 1 && t.flat[0].length == ext) {  // contiguous
    fn(base + static_cast<std::uintptr_t>(t.flat[0].offset + off), pos, len);
    pos += len;
    return;
  }
  Count e = off / t.size;
  const Aint within = off % t.size;
  std::size_t bi = static_cast<std::size_t>(
      std::upper_bound(t.prefix.begin(), t.prefix.end(), within) - t.prefix.begin() - 1);
  Aint inblk = within - t.prefix[bi];
  while (len > 0) {
    const Block& b = t.flat[bi];
    const Count n = std::min<Count>(b.length - inblk, len);
    fn(base + static_cast<std::uintptr_t>(static_cast<Aint>(e) * ext + b.offset + inblk), pos, n);
    pos += n;
    len -= n;
    inblk = 0;
    if (++bi == t.flat.size()) {
      bi = 0;
      ++e;
    }
  }
}

template <class Fn>
void walk_range(const TypeImpl& t, std::uintptr_t base, Count off, Count len, Fn&& fn) {
  Count pos = off;
  walk_seq(t, base, off, len, pos, fn);
}

}  // namespace

void Datatype::walk_range_raw(const void* buf, Count count, Count byte_offset, Count len, RawBlockFn fn,
                              void* ctx) const {
  flat_blocks();
  const Count total = packed_size(count);
  if (byte_offset < 0 || len < 0 || byte_offset > total || len > total - byte_offset)
    fail(DatatypeErrc::buffer_too_small, "block range outside the packed image");
  std::uintptr_t cur = 0;
  std::size_t curlen = 0;
  walk_range(*impl_, reinterpret_cast<std::uintptr_t>(buf), byte_offset, len,
             [&](std::uintptr_t mem, Count, Count n) {
               if (curlen != 0 && cur + curlen == mem) {
                 curlen += static_cast<std::size_t>(n);
                 return;
               }
               if (curlen != 0) fn(ctx, cur, curlen);
               cur = mem;
               curlen = static_cast<std::size_t>(n);
             });
  if (curlen != 0) fn(ctx, cur, curlen);
}

void Datatype::pack(const void* inbuf, Count count, void* outbuf, Count outsize, Count& position) const {
  flat_blocks();
  const Count need = packed_size(count);
  if (outsize < 0 || position < 0 || position > outsize)
    fail(DatatypeErrc::invalid_argument, "pack position outside the output buffer");
  if (need > outsize - position)
    fail(DatatypeErrc::buffer_too_small, "pack needs " + std::to_string(need) + " bytes, " +
                                             std::to_string(outsize - position) + " left");
  auto* out = static_cast<unsigned char*>(outbuf) + position;
  walk_range(*impl_, reinterpret_cast<std::uintptr_t>(inbuf), 0, need,
             [&](std::uintptr_t mem, Count pos, Count n) {
               std::memcpy(out + pos, reinterpret_cast<const void*>(mem), static_cast<std::size_t>(n));
             });
  position += need;
}

void Datatype::unpack(const void* inbuf, Count insize, Count& position, void* outbuf, Count count) const {
  flat_blocks();
  const Count need = packed_size(count);
  if (insize < 0 || position < 0 || position > insize)
    fail(DatatypeErrc::invalid_argument, "unpack position outside the input buffer");
  if (need > insize - position)
    fail(DatatypeErrc::buffer_too_small, "unpack needs " + std::to_string(need) + " bytes, " +
                                             std::to_string(insize - position) + " left");
  const auto* in = static_cast<const unsigned char*>(inbuf) + position;
  walk_range(*impl_, reinterpret_cast<std::uintptr_t>(outbuf), 0, need,
             [&](std::uintptr_t mem, Count pos, Count n) {
               std::memcpy(reinterpret_cast<void*>(mem), in + pos, static_cast<std::size_t>(n));
             });
  position += need;
}

void Datatype::pack_range(const void* inbuf, Count count, Count byte_offset, Count len, void* out) const {
  flat_blocks();
  const Count total = packed_size(count);
  if (byte_offset < 0 || len < 0 || byte_offset > total || len > total - byte_offset)
    fail(DatatypeErrc::buffer_too_small, "pack_range outside the packed image");
  auto* o = static_cast<unsigned char*>(out);
  walk_range(*impl_, reinterpret_cast<std::uintptr_t>(inbuf), byte_offset, len,
             [&](std::uintptr_t mem, Count pos, Count n) {
               std::memcpy(o + (pos - byte_offset), reinterpret_cast<const void*>(mem),
                           static_cast<std::size_t>(n));
             });
}

void Datatype::unpack_range(const void* inbytes, Count byte_offset, Count len, void* outbuf,
                            Count count) const {
  flat_blocks();
  const Count total = packed_size(count);
  if (byte_offset < 0 || len < 0 || byte_offset > total || len > total - byte_offset)
    fail(DatatypeErrc::buffer_too_small, "unpack_range outside the receive buffer (truncation)");
  const auto* in = static_cast<const unsigned char*>(inbytes);
  walk_range(*impl_, reinterpret_cast<std::uintptr_t>(outbuf), byte_offset, len,
             [&](std::uintptr_t mem, Count pos, Count n) {
               std::memcpy(reinterpret_cast<void*>(mem), in + (pos - byte_offset),
                           static_cast<std::size_t>(n));
             });
}

}  // namespace nmad::mpi
