#pragma once
// What the collective entry points (coll.cpp, coll_neighbor.cpp) need of a
// user buffer and datatype: the datatype's layout in one struct, and
// addresses computed without pointer arithmetic on a possibly null buffer.
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

struct tinfo {
  Datatype t;
  MPI_Datatype h = MPI_DATATYPE_NULL;
  bool contig = true;
  Aint true_lb = 0, extent = 0;
  std::size_t size = 0;
};

// The layout of committed datatype h, or an MPI error code with detail
// (check_datatype's: invalid or uncommitted).
inline int describe_type(MPI_Datatype h, tinfo& ti, std::string& detail) {
  if (int e = check_datatype(h, ti.t, detail)) return e;
  ti.h = h;
  ti.contig = ti.t.is_contiguous();
  ti.true_lb = ti.t.true_lb();
  ti.extent = ti.t.extent();
  ti.size = static_cast<std::size_t>(ti.t.size());
  return MPI_SUCCESS;
}

}  // namespace nmad::mpi
