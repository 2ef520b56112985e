/* Erroneous programs must not hang or crash MPI_Finalize: rank 0 starts an
 * MPI_Iallreduce and an MPI_Ibarrier that no other rank ever joins and
 * finalizes with them pending (MPI_Finalize gives up after
 * NMAD_COLL_FINALIZE_TIMEOUT_MS and abandons them); every rank also leaves
 * a correctly started MPI_Ibcast pending, which Finalize completes. */
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"

int main(int argc, char** argv) {
  mt_start("coll_finalize_pending", &argc, &argv);
  static int v[4], s[4], b[1000];
  MPI_Request q[3];
  for (int i = 0; i < 1000; ++i) b[i] = mt_rank == 0 ? i : -1;
  CHECK(MPI_Ibcast(b, 1000, MPI_INT, 0, MPI_COMM_WORLD, &q[0]) == MPI_SUCCESS, "ibcast");
  if (mt_rank == 0 && mt_size > 1) {
    CHECK(MPI_Iallreduce(v, s, 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[1]) == MPI_SUCCESS, "lonely iallreduce");
    CHECK(MPI_Ibarrier(MPI_COMM_WORLD, &q[2]) == MPI_SUCCESS, "lonely ibarrier");
  }
  MPI_Finalize();
  for (int i = 0; i < 1000; ++i)
    if (b[i] != i) {
      printf("FAIL %s: rank %d: ibcast left pending at MPI_Finalize: [%d] = %d\n", mt_name, mt_rank, i, b[i]);
      return 1;
    }
  printf("PASS %s rank %d\n", mt_name, mt_rank);
  return 0;
}
