/* A failure seen only through the process it made give up: rank 2 talks
 * with rank 1 only, then dies; rank 1's receive from it fails, and rank 1
 * ends (MPI_Finalize), closing its connections. Rank 0 never talked with
 * rank 2: all it sees is rank 1 closing while it waits for a message from
 * it. Its error must still name rank 2, the rank that died (rank 1 tells
 * its peers which failure it ends for before it closes), and the job's
 * status is rank 2's. Needs exactly 3 processes. */
#include <unistd.h>

#include "mpitest.h"

int main(int argc, char** argv) {
  mt_start("proc_failed_relay", &argc, &argv);
  CHECK(mt_size == 3, "needs 3 processes");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int v = 0;
  char text[MPI_MAX_ERROR_STRING];
  if (mt_rank == 2) {
    MPI_Recv(&v, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    fflush(stdout);
    _exit(3);
  }
  if (mt_rank == 1) {
    MPI_Send(&v, 1, MPI_INT, 2, 0, MPI_COMM_WORLD);
    MPI_Send(&v, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
    const int err = MPI_Recv(&v, 1, MPI_INT, 2, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    const int cls = mt_error(err, text);
    printf("rank 1: receive from rank 2 failed: %s\n", text);
    CHECK(cls == MPI_ERR_PROC_FAILED, "receive from the dead rank: class %d: %s", cls, text);
    CHECK(strstr(text, "rank 2 failed") != NULL, "'%s' does not name rank 2", text);
    return mt_pass();
  }
  MPI_Recv(&v, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  /* Rank 1 never sends this one: it ends once rank 2 is dead. */
  const int err = MPI_Recv(&v, 1, MPI_INT, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  const int cls = mt_error(err, text);
  printf("rank 0: receive from rank 1 failed: %s\n", text);
  CHECK(cls == MPI_ERR_PROC_FAILED, "receive from the rank that ended: class %d: %s", cls, text);
  CHECK(strstr(text, "rank 2 failed") != NULL, "'%s' does not name rank 2, the one that died", text);
  return mt_pass();
}
