// Basic (predefined, contiguous) datatypes: sizes, MPI_Type_size,
// MPI_Get_count, MPI_Get_elements. Derived datatypes come later.
#include <cwchar>

#include "mpi_layer/mpi_impl.hpp"

namespace nmad::mpi {

int type_size(MPI_Datatype t) {
  switch (t) {
    case MPI_CHAR: return sizeof(char);
    case MPI_SIGNED_CHAR: return sizeof(signed char);
    case MPI_UNSIGNED_CHAR: return sizeof(unsigned char);
    case MPI_BYTE: return 1;
    case MPI_SHORT: return sizeof(short);
    case MPI_UNSIGNED_SHORT: return sizeof(unsigned short);
    case MPI_INT: return sizeof(int);
    case MPI_UNSIGNED: return sizeof(unsigned);
    case MPI_LONG: return sizeof(long);
    case MPI_UNSIGNED_LONG: return sizeof(unsigned long);
    case MPI_LONG_LONG_INT: return sizeof(long long);
    case MPI_UNSIGNED_LONG_LONG: return sizeof(unsigned long long);
    case MPI_FLOAT: return sizeof(float);
    case MPI_DOUBLE: return sizeof(double);
    case MPI_LONG_DOUBLE: return sizeof(long double);
    case MPI_WCHAR: return sizeof(wchar_t);
    case MPI_C_BOOL: return sizeof(bool);  // C _Bool and C++ bool agree on our ABIs
    case MPI_INT8_T: return 1;
    case MPI_INT16_T: return 2;
    case MPI_INT32_T: return 4;
    case MPI_INT64_T: return 8;
    case MPI_UINT8_T: return 1;
    case MPI_UINT16_T: return 2;
    case MPI_UINT32_T: return 4;
    case MPI_UINT64_T: return 8;
    case MPI_AINT: return sizeof(MPI_Aint);
    case MPI_COUNT: return sizeof(MPI_Count);
    default: return -1;
  }
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
