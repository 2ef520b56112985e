/* A synchronous send completes only once the receiver matched it; a
 * standard small send completes without a receive. */
#include <time.h>

#include "mpitest.h"

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

int main(int argc, char** argv) {
  mt_start("ssend_sync", &argc, &argv);
  CHECK(mt_size == 2, "needs 2 processes");
  int v = 42, got = 0, flag = 0;
  for (int n = 0; n < 2; ++n) { /* empty and non-empty messages */
    if (mt_rank == 0) {
      MPI_Request r;
      MPI_Issend(&v, n, MPI_INT, 1, 5, MPI_COMM_WORLD, &r);
      double t0 = MPI_Wtime();
      while (MPI_Wtime() - t0 < 0.2) {
        MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
        CHECK(!flag, "Issend of %d int(s) completed before the receive was posted", n);
      }
      MPI_Send(&v, 1, MPI_INT, 1, 6, MPI_COMM_WORLD); /* "post it now" */
      MPI_Wait(&r, MPI_STATUS_IGNORE);
      /* A small standard send does not wait for its receive. */
      MPI_Send(&v, 1, MPI_INT, 1, 7, MPI_COMM_WORLD);
      MPI_Recv(&got, 1, MPI_INT, 1, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(&got, 1, MPI_INT, 0, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Status st;
      got = 0;
      MPI_Recv(&got, n, MPI_INT, 0, 5, MPI_COMM_WORLD, &st);
      int count = -1;
      MPI_Get_count(&st, MPI_INT, &count);
      CHECK(count == n && (n == 0 || got == 42), "count %d got %d", count, got);
      sleep_ms(100); /* the standard send below completed meanwhile */
      MPI_Recv(&got, 1, MPI_INT, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(&v, 1, MPI_INT, 0, 8, MPI_COMM_WORLD);
    }
  }
  return mt_pass();
}
