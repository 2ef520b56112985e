// Datatype engine: packing. The signature and packed size of a count of
// elements, and the walk over a byte range of their packed image (block
// list for flat types, lazy descent for tree-form ones) behind pack,
// unpack, pack_range and walk_range_raw.
#include <cstdint>
#include <cstring>
#include <functional>

#include "mpi_layer/datatype/type_tree.hpp"

namespace nmad::mpi {

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
