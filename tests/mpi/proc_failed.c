/* A rank that dies: with MPI_ERRORS_RETURN the others' receives from it
 * fail with MPI_ERR_PROC_FAILED (the launcher reports the dead rank and the
 * job's exit status is the dead rank's). */
#include <unistd.h>

#include "mpitest.h"

int main(int argc, char** argv) {
  mt_start("proc_failed", &argc, &argv);
  CHECK(mt_size >= 2, "needs 2+ processes");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int v = 0;
  if (mt_rank == 1) {
    /* Hear from everyone (so every rank is past MPI_Init and connected to
     * us), then die without MPI_Finalize. */
    for (int p = 0; p < mt_size; ++p)
      if (p != 1) MPI_Recv(&v, 1, MPI_INT, p, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    fflush(stdout);
    _exit(3);
  }
  MPI_Send(&v, 1, MPI_INT, 1, 0, MPI_COMM_WORLD);
  MPI_Status st;
  int err = MPI_Recv(&v, 1, MPI_INT, 1, 1, MPI_COMM_WORLD, &st);
  int cls = -1;
  MPI_Error_class(err, &cls);
  CHECK(cls == MPI_ERR_PROC_FAILED, "receive from the dead rank: error %d", err);
  char text[MPI_MAX_ERROR_STRING];
  int len;
  MPI_Error_string(err, text, &len);
  printf("rank %d saw: %s\n", mt_rank, text);
  CHECK(strstr(text, "rank 1 ") != NULL, "the error string '%s' does not name rank 1", text);
  return mt_pass();
}
