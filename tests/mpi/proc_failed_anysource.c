/* Any-source receives and probes when peers die (three processes; ranks 1
 * and 2 die, one after the other, without MPI_Finalize).
 *
 * While some peer is still alive, an any-source receive stays posted: a
 * live rank may still send a matching message, so the death of rank 1
 * alone does not complete it (MPI_Test keeps saying "not yet"). Once every
 * other rank of the communicator is dead, nothing can match it any more:
 * pending and new any-source receives, and any-source probes, fail with
 * MPI_ERR_PROC_FAILED (MPI_ERRORS_RETURN) instead of waiting forever. */
#include <time.h>
#include <unistd.h>

#include "mpitest.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* err must be of class MPI_ERR_PROC_FAILED, its string naming `name`. */
static void expect_failed(int err, const char* name, const char* what) {
  char text[MPI_MAX_ERROR_STRING];
  const int cls = mt_error(err, text);
  printf("rank %d: %s: %s\n", mt_rank, what, text);
  CHECK(cls == MPI_ERR_PROC_FAILED, "%s: error %d (class %d): %s", what, err, cls, text);
  CHECK(strstr(text, name) != NULL, "%s: '%s' does not name %s", what, text, name);
}

int main(int argc, char** argv) {
  mt_start("proc_failed_anysource", &argc, &argv);
  CHECK(mt_size == 3, "needs 3 processes");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int v = 0;
  MPI_Barrier(MPI_COMM_WORLD);  /* everyone connected before anyone dies */
  if (mt_rank != 0) {
    MPI_Recv(&v, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);  /* "die" */
    fflush(stdout);
    _exit(3);
  }
  int any = -1;
  MPI_Request r;
  MPI_Irecv(&any, 1, MPI_INT, MPI_ANY_SOURCE, 5, MPI_COMM_WORLD, &r);

  /* Rank 1 dies; rank 0 knows once a receive from it fails. */
  MPI_Send(&v, 1, MPI_INT, 1, 0, MPI_COMM_WORLD);
  int err = MPI_Recv(&v, 1, MPI_INT, 1, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  expect_failed(err, "rank 1", "MPI_Recv(1)");
  /* Rank 2 lives: the any-source receive stays posted. */
  int flag = 1;
  for (double end = now_s() + 0.2; now_s() < end;) {
    err = MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
    CHECK(err == MPI_SUCCESS && !flag, "any-source receive completed (err %d) while rank 2 lives", err);
  }
  flag = 1;
  err = MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
  CHECK(err == MPI_SUCCESS && !flag, "any-source Iprobe: err %d flag %d", err, flag);

  /* Rank 2 dies while rank 0 is blocked in an any-source MPI_Recv. */
  MPI_Send(&v, 1, MPI_INT, 2, 0, MPI_COMM_WORLD);
  MPI_Status st;
  err = MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 6, MPI_COMM_WORLD, &st);
  expect_failed(err, "rank 2", "MPI_Recv(MPI_ANY_SOURCE) as the last peer dies");
  /* The receive posted while rank 2 lived fails too now. */
  err = MPI_Wait(&r, MPI_STATUS_IGNORE);
  expect_failed(err, "rank", "MPI_Wait(any-source MPI_Irecv)");
  CHECK(r == MPI_REQUEST_NULL, "request not freed");

  /* Every peer is dead: new any-source receives and probes fail at once. */
  err = MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
  expect_failed(err, "rank", "MPI_Recv(MPI_ANY_SOURCE) after");
  err = MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
  expect_failed(err, "rank 1, rank 2", "MPI_Probe(MPI_ANY_SOURCE)");
  MPI_Message msg = MPI_MESSAGE_NULL;
  err = MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &msg, &st);
  expect_failed(err, "rank 1, rank 2", "MPI_Mprobe(MPI_ANY_SOURCE)");
  /* Messages to itself still work, even from any source: this process is
   * alive (the message may still be on its way through the engine). */
  MPI_Request self;
  int out = 42, in = 0;
  MPI_Isend(&out, 1, MPI_INT, 0, 9, MPI_COMM_WORLD, &self);
  err = MPI_Recv(&in, 1, MPI_INT, MPI_ANY_SOURCE, 9, MPI_COMM_WORLD, &st);
  CHECK(err == MPI_SUCCESS && in == 42 && st.MPI_SOURCE == 0, "message to self: err %d value %d", err, in);
  MPI_Wait(&self, MPI_STATUS_IGNORE);
  return mt_pass();
}
