/* Blocking probes on a rank that dies while nothing from it is queued:
 * MPI_Probe and MPI_Mprobe return MPI_ERR_PROC_FAILED (with
 * MPI_ERRORS_RETURN) and the error string names the dead rank, instead of
 * waiting forever. Three processes: rank 1 dies while rank 0 is in
 * MPI_Probe, then rank 2 dies while rank 0 is in MPI_Mprobe. */
#include <unistd.h>

#include "mpitest.h"

/* Checks that err is of class MPI_ERR_PROC_FAILED and that its string
 * names `rank` ("rank N" as a whole word). */
static void expect_failed(int err, int rank, const char* what) {
  char text[MPI_MAX_ERROR_STRING];
  const int cls = mt_error(err, text);
  printf("rank %d: %s: %s\n", mt_rank, what, text);
  CHECK(cls == MPI_ERR_PROC_FAILED, "%s: error %d (class %d): %s", what, err, cls, text);
  char name[32];
  snprintf(name, sizeof name, "rank %d", rank);
  const char* p = strstr(text, name);
  CHECK(p && (p[strlen(name)] < '0' || p[strlen(name)] > '9'), "%s: '%s' does not name %s", what, text, name);
}

int main(int argc, char** argv) {
  mt_start("proc_failed_probe", &argc, &argv);
  CHECK(mt_size == 3, "needs 3 processes");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int v = 0;
  /* Every rank is past MPI_Init (connected to the others) before one dies. */
  MPI_Barrier(MPI_COMM_WORLD);
  if (mt_rank != 0) {
    /* Rank 1 dies as soon as rank 0 said it is about to probe; rank 2 a
     * moment after rank 0 said so (rank 0 is then blocked in MPI_Mprobe). */
    MPI_Recv(&v, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (mt_rank == 2) usleep(100 * 1000);
    fflush(stdout);
    _exit(3);
  }
  MPI_Status st;
  MPI_Send(&v, 1, MPI_INT, 1, 0, MPI_COMM_WORLD);
  int err = MPI_Probe(1, 7, MPI_COMM_WORLD, &st);
  expect_failed(err, 1, "MPI_Probe(1)");
  /* Once the rank is known dead, probes fail at once too. */
  err = MPI_Probe(1, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
  expect_failed(err, 1, "MPI_Probe(1) again");
  int flag = 1;
  err = MPI_Iprobe(1, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
  CHECK(err == MPI_SUCCESS && flag == 0, "MPI_Iprobe of the dead rank: err %d flag %d", err, flag);

  MPI_Send(&v, 1, MPI_INT, 2, 0, MPI_COMM_WORLD);
  MPI_Message msg = MPI_MESSAGE_NULL;
  err = MPI_Mprobe(2, 7, MPI_COMM_WORLD, &msg, &st);
  expect_failed(err, 2, "MPI_Mprobe(2)");
  CHECK(msg == MPI_MESSAGE_NULL, "MPI_Mprobe failed but set a message %d", (int)msg);
  err = MPI_Mprobe(1, MPI_ANY_TAG, MPI_COMM_WORLD, &msg, &st);
  expect_failed(err, 1, "MPI_Mprobe(1)");
  return mt_pass();
}
