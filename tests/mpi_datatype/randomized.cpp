// Randomized cross-check of the datatype engine against a reference
// type-map interpreter: random derived types (the constructors but subarray
// and darray, nested up to depth 4) are packed, unpacked, iterated, cut into
// ranges and counted, both flattened and kept in tree form, and must agree
// byte for byte with the type map their envelope and contents describe.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "tests/mpi_datatype/datatype_helpers.hpp"

using namespace nmad_test::datatype;

// The reference interpreter uses only the public envelope/contents API:
// every derived type is expanded into its list of basic entries (offset,
// size) in type-map order.
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
