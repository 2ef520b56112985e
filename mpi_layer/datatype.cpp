// Basic (predefined, contiguous) datatypes: sizes, MPI_Type_size,
// MPI_Get_count, MPI_Get_elements. Derived datatypes come later.

#include "mpi_layer/mpi_impl.hpp"

namespace nmad::mpi {

namespace {

// Sizes of the predefined types, by handle (no lock on the hot path).
struct size_table {
  int size[kLastPredefinedType + 1];
  size_table() {
    size[0] = -1;
    for (int h = 1; h <= kLastPredefinedType; ++h)
      size[h] = static_cast<int>(basic_type_info(static_cast<BasicType>(h - 1)).size);
  }
};
const size_table& sizes() {
  static const size_table t;
  return t;
}

}  // namespace

int type_size(MPI_Datatype t) {
  if (t < 1 || t > kLastPredefinedType) return -1;
  return sizes().size[t];
}

Datatype type_of(MPI_Datatype t) {
  if (auto b = basic_of(t)) return Datatype::basic(*b);
  return {};
}

}  // namespace nmad::mpi

using namespace nmad::mpi;

extern "C" {

int PMPI_Type_size(MPI_Datatype datatype, int* size) {
  const int n = type_size(datatype);
  if (n < 0) return mpi_raise("MPI_Type_size", nullptr, MPI_ERR_TYPE, "invalid datatype " + std::to_string(datatype));
  if (!size) return mpi_raise("MPI_Type_size", nullptr, MPI_ERR_ARG, "null size");
  *size = n;
  return MPI_SUCCESS;
}

int PMPI_Get_count(const MPI_Status* status, MPI_Datatype datatype, int* count) {
  const int n = type_size(datatype);
  if (n < 0) return mpi_raise("MPI_Get_count", nullptr, MPI_ERR_TYPE, "invalid datatype " + std::to_string(datatype));
  if (!status || !count) return mpi_raise("MPI_Get_count", nullptr, MPI_ERR_ARG, "null status or count");
  if (status->nmad_count % n != 0) *count = MPI_UNDEFINED;
  else *count = static_cast<int>(status->nmad_count / n);
  return MPI_SUCCESS;
}

int PMPI_Get_elements(const MPI_Status* status, MPI_Datatype datatype, int* count) {
  // Basic datatypes: one element per datatype item.
  const int n = type_size(datatype);
  if (n < 0) return mpi_raise("MPI_Get_elements", nullptr, MPI_ERR_TYPE, "invalid datatype " + std::to_string(datatype));
  if (!status || !count) return mpi_raise("MPI_Get_elements", nullptr, MPI_ERR_ARG, "null status or count");
  if (status->nmad_count % n != 0) *count = MPI_UNDEFINED;
  else *count = static_cast<int>(status->nmad_count / n);
  return MPI_SUCCESS;
}

}  // extern "C"

// The public names: weak aliases, so profiling tools can interpose.
#pragma weak MPI_Type_size = PMPI_Type_size
#pragma weak MPI_Get_count = PMPI_Get_count
#pragma weak MPI_Get_elements = PMPI_Get_elements
