/* A matched receive of a large (rendezvous) message whose sender dies
 * during the transfer. Rank 0 posts MPI_Irecv of 64 MiB first, then tells
 * rank 1 to go; rank 1 starts MPI_Isend of the 64 MiB, drives it for
 * $MPITEST_DIE_AFTER_US microseconds (default 0) and dies (_exit, no
 * MPI_Finalize). Whether the data was all pulled before the death depends
 * on timing, so the receive either completes with the right data or fails
 * with MPI_ERR_PROC_FAILED naming rank 1; it never waits forever. */
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "mpitest.h"

#define BIG (64L << 20)

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  mt_start("proc_failed_rdv", &argc, &argv);
  CHECK(mt_size == 2, "needs 2 processes");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const char* d = getenv("MPITEST_DIE_AFTER_US");
  const long die_after_us = d ? atol(d) : 0;
  unsigned char* buf = malloc(BIG);
  CHECK(buf != NULL, "out of memory");
  int go = 1;
  MPI_Barrier(MPI_COMM_WORLD);
  if (mt_rank == 1) {
    mt_fill(buf, BIG, 5);
    MPI_Recv(&go, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Request r;
    MPI_Isend(buf, (int)BIG, MPI_BYTE, 0, 1, MPI_COMM_WORLD, &r);
    const double end = now_s() + (double)die_after_us * 1e-6;
    int done = 0;
    while (!done && now_s() < end) MPI_Test(&r, &done, MPI_STATUS_IGNORE);
    printf("rank 1: dies, send %s\n", done ? "complete" : "pending");
    fflush(stdout);
    _exit(3);
  }
  memset(buf, 0, BIG);
  MPI_Request r;
  MPI_Irecv(buf, (int)BIG, MPI_BYTE, 1, 1, MPI_COMM_WORLD, &r);
  MPI_Send(&go, 1, MPI_INT, 1, 0, MPI_COMM_WORLD);
  MPI_Status st;
  st.MPI_ERROR = -12345;
  int err = MPI_Wait(&r, &st);
  CHECK(r == MPI_REQUEST_NULL, "the request was not freed");
  if (err == MPI_SUCCESS) {
    int n = -1;
    MPI_Get_count(&st, MPI_BYTE, &n);
    CHECK(n == (int)BIG && st.MPI_SOURCE == 1 && st.MPI_TAG == 1, "status: count %d source %d tag %d", n,
          st.MPI_SOURCE, st.MPI_TAG);
    long bad = mt_check(buf, BIG, 5);
    CHECK(bad < 0, "completed, but byte %ld is wrong", bad);
    printf("rank 0: receive completed with the right data\n");
  } else {
    char text[MPI_MAX_ERROR_STRING];
    const int cls = mt_error(err, text);
    printf("rank 0: receive failed: %s\n", text);
    CHECK(cls == MPI_ERR_PROC_FAILED, "receive: error %d (class %d): %s", err, cls, text);
    CHECK(strstr(text, "rank 1") != NULL, "'%s' does not name rank 1", text);
    CHECK(st.MPI_ERROR == -12345, "MPI_Wait changed MPI_ERROR to %d", st.MPI_ERROR);
  }
  /* Either way the rank is dead now: a new receive from it fails. */
  int v;
  err = MPI_Recv(&v, 1, MPI_INT, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  int cls = -1;
  MPI_Error_class(err, &cls);
  CHECK(cls == MPI_ERR_PROC_FAILED, "receive after the death: error %d", err);
  free(buf);
  return mt_pass();
}
