/* MPI_Abort from one rank ends the job with its error code. */
#include "mpitest.h"

int main(int argc, char** argv) {
  mt_start("abort", &argc, &argv);
  if (mt_rank == mt_size - 1) {
    printf("rank %d aborting\n", mt_rank);
    fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, 7);
  }
  int v;
  /* The others block until the launcher ends them. */
  MPI_Recv(&v, 1, MPI_INT, mt_size - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  printf("FAIL abort: rank %d went on\n", mt_rank);
  return 1;
}
