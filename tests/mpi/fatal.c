/* MPI_ERRORS_ARE_FATAL (the default): a truncated receive prints an error
 * naming MPI_Recv and MPI_ERR_TRUNCATE, and ends the whole job. */
#include "mpitest.h"

int main(int argc, char** argv) {
  mt_start("fatal", &argc, &argv);
  CHECK(mt_size == 2, "needs 2 processes");
  int big[100] = {0}, small[2];
  if (mt_rank == 0) {
    MPI_Send(big, 100, MPI_INT, 1, 0, MPI_COMM_WORLD);
    /* Rank 1 dies in MPI_Recv; this receive never completes: the launcher
       ends this rank too. */
    MPI_Recv(small, 2, MPI_INT, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else {
    MPI_Recv(small, 2, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  printf("FAIL fatal: rank %d survived a fatal error\n", mt_rank);
  return 1;
}
