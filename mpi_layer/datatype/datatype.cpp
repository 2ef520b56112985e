// Datatype engine: the basic types, the constructors (each builds a
// type_tree.hpp node and computes its bounds), commit (flattening) and the
// queries. Packing is in pack.cpp.
#include "mpi_layer/datatype/type_tree.hpp"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <functional>
#include <limits>
#include <mutex>

namespace nmad::mpi {

namespace {

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

namespace {
std::vector<Count> widen(std::span<const int> v) { return {v.begin(), v.end()}; }
}  // namespace

Datatype Datatype::hindexed(std::span<const int> blocklengths, std::span<const Aint> displacements,
                            const Datatype& old) {
  return hindexed(std::span<const Count>(widen(blocklengths)), displacements, old);
}
Datatype Datatype::hindexed(std::span<const Count> blocklengths, std::span<const Aint> displacements,
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
  return indexed(std::span<const Count>(widen(blocklengths)), std::span<const Count>(widen(displacements)), old);
}
Datatype Datatype::indexed(std::span<const Count> blocklengths, std::span<const Count> displacements,
                           const Datatype& old) {
  const TypeImpl& o = old.checked();
  if (blocklengths.size() != displacements.size())
    fail(DatatypeErrc::invalid_argument, "blocklengths and displacements differ in length");
  const Aint ext = o.ub - o.lb;
  std::vector<Aint> bytes;
  bytes.reserve(displacements.size());
  for (Count d : displacements) bytes.push_back(checked_mul(d, ext, "displacement"));
  Datatype r = hindexed(blocklengths, bytes, old);
  r.impl_->combiner = Combiner::Indexed;
  r.impl_->contents.combiner = Combiner::Indexed;
  r.impl_->contents.addresses.clear();
  for (Count d : displacements) r.impl_->contents.ints.push_back(d);
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
  return indexed_block(blocklength, std::span<const Count>(widen(displacements)), old);
}
Datatype Datatype::indexed_block(Count blocklength, std::span<const Count> displacements,
                                 const Datatype& old) {
  const TypeImpl& o = old.checked();
  const Aint ext = o.ub - o.lb;
  std::vector<Aint> bytes;
  for (Count d : displacements) bytes.push_back(checked_mul(d, ext, "displacement"));
  Datatype r = hindexed_block(blocklength, bytes, old);
  r.impl_->combiner = Combiner::IndexedBlock;
  r.impl_->contents.combiner = Combiner::IndexedBlock;
  r.impl_->contents.addresses.clear();
  for (Count d : displacements) r.impl_->contents.ints.push_back(d);
  return r;
}

Datatype Datatype::create_struct(std::span<const int> blocklengths, std::span<const Aint> displacements,
                                 std::span<const Datatype> types) {
  return create_struct(std::span<const Count>(widen(blocklengths)), displacements, types);
}
Datatype Datatype::create_struct(std::span<const Count> blocklengths, std::span<const Aint> displacements,
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
  return create_subarray(std::span<const Count>(widen(sizes)), std::span<const Count>(widen(subsizes)),
                         std::span<const Count>(widen(starts)), order, old);
}
Datatype Datatype::create_subarray(std::span<const Count> sizes, std::span<const Count> subsizes,
                                   std::span<const Count> starts, Order order, const Datatype& old) {
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
  for (Count v : sizes) c.ints.push_back(v);
  for (Count v : subsizes) c.ints.push_back(v);
  for (Count v : starts) c.ints.push_back(v);
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

}  // namespace nmad::mpi
