/* MPI-IO atomic mode: set/get_atomicity; every rank writes the same
 * non-contiguous region (a vector filetype: many separate blocks) with its
 * own byte, many times, while other ranks read it; with atomicity on, each
 * write is seen whole: the region always holds one rank's byte everywhere,
 * in every read and at the end. The same with collective writes. */
#include "mpitest.h"

enum { BLOCKS = 256, BL = 16, ITER = 20 };

static int uniform(const unsigned char* p, int n) {
  for (int i = 1; i < n; ++i)
    if (p[i] != p[0]) return 0;
  return 1;
}

int main(int argc, char** argv) {
  mt_start("io_atomic", &argc, &argv);
  char name[512];
  mt_tmpname(MPI_COMM_WORLD, "atomic", name, sizeof name);
  MPI_File fh;
  MPI_Status st;
  CHECK(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_RDWR | MPI_MODE_CREATE | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL,
                      &fh) == MPI_SUCCESS, "open");
  int flag = -1;
  CHECK(MPI_File_get_atomicity(fh, &flag) == MPI_SUCCESS && flag == 0, "atomicity off by default");
  CHECK(MPI_File_set_atomicity(fh, 1) == MPI_SUCCESS, "set_atomicity");
  CHECK(MPI_File_get_atomicity(fh, &flag) == MPI_SUCCESS && flag == 1, "atomicity on");
  MPI_Datatype ft;
  MPI_Type_vector(BLOCKS, BL, 2 * BL, MPI_BYTE, &ft);
  MPI_Type_commit(&ft);
  CHECK(MPI_File_set_view(fh, 0, MPI_BYTE, ft, "native", MPI_INFO_NULL) == MPI_SUCCESS, "view");
  static unsigned char mine[BLOCKS * BL], seen[BLOCKS * BL];
  memset(mine, 'A' + mt_rank, sizeof mine);
  for (int it = 0; it < ITER; ++it) {
    CHECK(MPI_File_write_at(fh, 0, mine, sizeof mine, MPI_BYTE, &st) == MPI_SUCCESS, "atomic write");
    CHECK(MPI_File_read_at(fh, 0, seen, sizeof seen, MPI_BYTE, &st) == MPI_SUCCESS, "atomic read");
    CHECK(uniform(seen, sizeof seen), "iteration %d: a read saw a mixed region", it);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK(MPI_File_read_at(fh, 0, seen, sizeof seen, MPI_BYTE, &st) == MPI_SUCCESS, "final read");
  CHECK(uniform(seen, sizeof seen) && seen[0] >= 'A' && seen[0] < 'A' + mt_size, "final region is one rank's");
  /* Collective writes in atomic mode (each access locked). */
  for (int it = 0; it < 5; ++it)
    CHECK(MPI_File_write_at_all(fh, 0, mine, sizeof mine, MPI_BYTE, &st) == MPI_SUCCESS, "atomic write_at_all");
  CHECK(MPI_File_read_at_all(fh, 0, seen, sizeof seen, MPI_BYTE, &st) == MPI_SUCCESS, "read_at_all");
  CHECK(uniform(seen, sizeof seen), "collective: region is one rank's");
  /* Atomicity must be the same on every rank. */
  if (mt_size > 1) {
    char text[MPI_MAX_ERROR_STRING];
    CHECK(mt_error(MPI_File_set_atomicity(fh, mt_rank == 0), text) == MPI_ERR_NOT_SAME, "different flags");
  }
  CHECK(MPI_File_set_atomicity(fh, 0) == MPI_SUCCESS, "atomicity off");
  MPI_Type_free(&ft);
  CHECK(MPI_File_close(&fh) == MPI_SUCCESS, "close");
  return mt_pass();
}
