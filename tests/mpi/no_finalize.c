/* A rank that returns from main (status 0) without MPI_Finalize: the
 * launcher must report it, naming the rank, and fail the job. */
#include <stdio.h>
#include <stdlib.h>

#include <mpi.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Barrier(MPI_COMM_WORLD);
  printf("NO_FINALIZE_STARTED rank %d\n", rank);
  fflush(stdout);
  if (rank == 1) return 0; /* forgets MPI_Finalize */
  MPI_Finalize();
  return 0;
}
