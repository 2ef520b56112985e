// What the datatype engine's tests share: a basic type by name, a committed
// type's flattened blocks, the blocks for_each_block reports, and a packed
// image read back as elements of one type.
#pragma once

#include <doctest/doctest.h>

#include <cstddef>
#include <cstring>
#include <utility>
#include <vector>

#include "mpi_layer/datatype/datatype.hpp"

namespace nmad_test::datatype {

using namespace nmad::mpi;

inline Datatype T(BasicType t) { return Datatype::basic(t); }

inline std::vector<std::pair<Aint, Aint>> block_list(const Datatype& d) {
  std::vector<std::pair<Aint, Aint>> v;
  for (const Block& b : d.blocks()) v.emplace_back(b.offset, b.length);
  return v;
}

// Blocks reported by for_each_block as (offset from buf, length).
inline std::vector<std::pair<std::ptrdiff_t, std::size_t>> iter_blocks(const Datatype& d, const void* buf,
                                                                       Count count) {
  std::vector<std::pair<std::ptrdiff_t, std::size_t>> v;
  d.for_each_block(buf, count, [&](const void* p, std::size_t n) {
    v.emplace_back(static_cast<const char*>(p) - static_cast<const char*>(buf), n);
  });
  return v;
}

template <class E>
std::vector<E> pack_all(const Datatype& d, const void* buf, Count count) {
  std::vector<unsigned char> out(static_cast<std::size_t>(d.packed_size(count)));
  Count pos = 0;
  d.pack(buf, count, out.data(), static_cast<Count>(out.size()), pos);
  REQUIRE(pos == static_cast<Count>(out.size()));
  std::vector<E> r(out.size() / sizeof(E));
  if (!r.empty()) std::memcpy(r.data(), out.data(), r.size() * sizeof(E));
  return r;
}

using BL = std::vector<std::pair<Aint, Aint>>;

}  // namespace nmad_test::datatype
