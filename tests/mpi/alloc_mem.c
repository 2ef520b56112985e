/* MPI_Alloc_mem/MPI_Free_mem: aligned memory usable as communication
 * buffers; a negative size is MPI_ERR_ARG. */
#include <stdint.h>

#include "mpitest.h"

int main(int argc, char** argv) {
  mt_start("alloc_mem", &argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const long n = 1 << 20;
  unsigned char* buf = NULL;
  CHECK(MPI_Alloc_mem(n, MPI_INFO_NULL, &buf) == MPI_SUCCESS && buf, "Alloc_mem 1 MiB");
  CHECK(((uintptr_t)buf % 64) == 0, "64-byte aligned (%p)", (void*)buf);
  void* empty = NULL;
  CHECK(MPI_Alloc_mem(0, MPI_INFO_NULL, &empty) == MPI_SUCCESS, "Alloc_mem 0 bytes");
  CHECK(MPI_Free_mem(empty) == MPI_SUCCESS, "Free_mem of the 0-byte block");
  void* bad = NULL;
  CHECK(MPI_Alloc_mem(-1, MPI_INFO_NULL, &bad) == MPI_ERR_ARG, "negative size");
  /* A ring pass through the allocated buffers. */
  const int next = (mt_rank + 1) % mt_size, prev = (mt_rank + mt_size - 1) % mt_size;
  unsigned char* out = NULL;
  MPI_Alloc_mem(n, MPI_INFO_NULL, &out);
  mt_fill(out, n, mt_rank);
  MPI_Sendrecv(out, (int)n, MPI_BYTE, next, 3, buf, (int)n, MPI_BYTE, prev, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  long bad_at = mt_check(buf, n, prev);
  CHECK(bad_at < 0, "ring data from rank %d wrong at byte %ld", prev, bad_at);
  MPI_Free_mem(out);
  MPI_Free_mem(buf);
  return mt_pass();
}
