// MPI_Alloc_mem / MPI_Free_mem. The engine registers no memory (shm and tcp
// need none), so this is an aligned allocation; info hints are accepted and
// ignored. Memory from MPI_Alloc_mem must be released with MPI_Free_mem.
#include <cstdlib>

#include "mpi_layer/mpi_impl.hpp"

using namespace nmad::mpi;

extern "C" {

int PMPI_Alloc_mem(MPI_Aint size, MPI_Info info, void* baseptr) {
  (void)info;
  if (!check_initialized("MPI_Alloc_mem")) return MPI_ERR_OTHER;
  if (size < 0) return mpi_raise("MPI_Alloc_mem", nullptr, MPI_ERR_ARG, "negative size " + std::to_string(size));
  if (!baseptr) return mpi_raise("MPI_Alloc_mem", nullptr, MPI_ERR_ARG, "null baseptr");
  void* p = nullptr;
  // 64-byte alignment: a cache line, and enough for any vector type.
  if (posix_memalign(&p, 64, size > 0 ? static_cast<std::size_t>(size) : 1) != 0)
    return mpi_raise("MPI_Alloc_mem", nullptr, MPI_ERR_NO_MEM, "cannot allocate " + std::to_string(size) + " bytes");
  *static_cast<void**>(baseptr) = p;
  return MPI_SUCCESS;
}

int PMPI_Free_mem(void* base) {
  if (!check_initialized("MPI_Free_mem")) return MPI_ERR_OTHER;
  std::free(base);
  return MPI_SUCCESS;
}

}  // extern "C"

#pragma weak MPI_Alloc_mem = PMPI_Alloc_mem
#pragma weak MPI_Free_mem = PMPI_Free_mem
