#pragma once
// What the collective entry points (collectives.cpp, neighbor.cpp) need of a
// user buffer and datatype: the datatype's layout in one struct, and
// addresses computed without pointer arithmetic on a possibly null buffer.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "mpi_layer/mpi_impl.hpp"

namespace nmad::mpi {

// buf + off computed on addresses: buf may be null (MPI_BOTTOM with a
// datatype of absolute displacements).
inline std::byte* addr_at(const void* buf, Aint off) {
  return reinterpret_cast<std::byte*>(reinterpret_cast<std::uintptr_t>(buf) + static_cast<std::uintptr_t>(off));
}

// A per-process array of counts or displacements as a binding received it:
// int (the MPI-3 forms) or MPI_Count / MPI_Aint (the large-count _c forms of
// MPI 4.0), read as Count without truncation. Null when none was given.
class count_array {
 public:
  count_array() = default;
  count_array(std::nullptr_t) {}
  count_array(const int* a) : _int(a) {}
  count_array(const MPI_Count* a) : _count(a) {}
  count_array(const MPI_Aint* a) : _aint(a) {}
  explicit operator bool() const { return _int || _count || _aint; }
  Count operator[](std::size_t k) const {
    if (_int) return _int[k];
    return _count ? _count[k] : static_cast<Count>(_aint[k]);
  }

 private:
  const int* _int = nullptr;
  const MPI_Count* _count = nullptr;
  const MPI_Aint* _aint = nullptr;
};

// A predefined datatype by handle (h: 1..kLastPredefinedType), made once.
inline const Datatype& predefined_datatype(MPI_Datatype h) {
  static const auto table = [] {
    std::array<Datatype, kLastPredefinedType + 1> t{};
    for (int i = 1; i <= kLastPredefinedType; ++i) t[static_cast<std::size_t>(i)] = Datatype::basic(*basic_of(i));
    return t;
  }();
  return table[static_cast<std::size_t>(h)];
}

struct tinfo {
  // The datatype: held here for a derived type; a predefined one is read
  // from the table (copying a tinfo then touches no reference count, a
  // small collective's hot path).
  Datatype own;
  MPI_Datatype h = MPI_DATATYPE_NULL;
  bool contig = true;
  Aint true_lb = 0, extent = 0;
  std::size_t size = 0;
  const Datatype& type() const { return own ? own : predefined_datatype(h); }
};

// The layout of predefined type h, described once; null for any other handle.
inline const tinfo* predefined_tinfo(MPI_Datatype h) {
  if (!basic_of(h)) return nullptr;
  static const auto table = [] {
    std::array<tinfo, kLastPredefinedType + 1> t{};
    for (int i = 1; i <= kLastPredefinedType; ++i) {
      tinfo& e = t[static_cast<std::size_t>(i)];
      const Datatype& d = predefined_datatype(i);
      e.h = i;
      e.contig = d.is_contiguous();
      e.true_lb = d.true_lb();
      e.extent = d.extent();
      e.size = static_cast<std::size_t>(d.size());
    }
    return t;
  }();
  return &table[static_cast<std::size_t>(h)];
}

// The layout of committed datatype h, or an MPI error code with detail
// (check_datatype's: invalid or uncommitted).
inline int describe_type(MPI_Datatype h, tinfo& ti, std::string& detail) {
  if (const tinfo* p = predefined_tinfo(h)) {
    ti = *p;
    return MPI_SUCCESS;
  }
  if (int e = check_datatype(h, ti.own, detail)) return e;
  ti.h = h;
  ti.contig = ti.own.is_contiguous();
  ti.true_lb = ti.own.true_lb();
  ti.extent = ti.own.extent();
  ti.size = static_cast<std::size_t>(ti.own.size());
  return MPI_SUCCESS;
}

}  // namespace nmad::mpi
