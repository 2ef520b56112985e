/* A blocking collective during which a member dies: rank 2 enters it too,
 * and a timer ($MPITEST_DIE_AFTER_US microseconds, default 0) kills it
 * there (_exit from the signal handler, no MPI_Finalize). $MPITEST_COLL
 * chooses the collective: "allreduce" (MPI_SUM of 16 MiB of doubles, the
 * default), "bcast" (16 MiB from rank 0), "alltoall" (16 MiB per rank,
 * split in equal blocks), "scatter" / "gather" (root 0, 16 MiB in equal
 * blocks), "barrier" or "ibarrier"
 * (MPI_Ibarrier, then MPI_Wait), "iallreduce" (MPI_Iallreduce, then
 * MPI_Wait) or "pallreduce" (MPI_Allreduce_init, MPI_Start, MPI_Wait:
 * the replayed schedule, or at 8 doubles the shared-memory state
 * machine); $MPITEST_COLL_DOUBLES
 * (default 2M) changes the size (8: the shared-memory collectives' path
 * when the ranks share a host). With MPI_ERRORS_RETURN every
 * survivor either gets MPI_ERR_PROC_FAILED, whose string names the rank
 * that died (also when what it waited for was a survivor that gave up
 * because of the death and closed its connections), or - if what it
 * needed was all in before the death - completes with the right data. No
 * survivor waits forever. */
#include <signal.h>
#include <sys/time.h>
#include <unistd.h>

#include "mpitest.h"

static long N = 2L << 20; /* doubles: 16 MiB */
#define DYING 2

static void die(int sig) {
  (void)sig;
  _exit(3);
}

int main(int argc, char** argv) {
  mt_start("proc_failed_coll", &argc, &argv);
  CHECK(mt_size >= 3, "needs 3+ processes");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const char* d = getenv("MPITEST_DIE_AFTER_US");
  const long die_after_us = d ? atol(d) : 0;
  const char* coll = getenv("MPITEST_COLL");
  const int bcast = coll && strcmp(coll, "bcast") == 0;
  const int alltoall = coll && strcmp(coll, "alltoall") == 0;
  const int scatter = coll && strcmp(coll, "scatter") == 0;
  const int gather = coll && strcmp(coll, "gather") == 0;
  const int ibarrier = coll && strcmp(coll, "ibarrier") == 0;
  const int barrier = ibarrier || (coll && strcmp(coll, "barrier") == 0);
  const int iallreduce = coll && strcmp(coll, "iallreduce") == 0;
  const int pallreduce = coll && strcmp(coll, "pallreduce") == 0;
  const char* nd = getenv("MPITEST_COLL_DOUBLES");
  if (nd && atol(nd) > 0) N = atol(nd);
  double* in = malloc(N * sizeof(double));
  double* out = malloc(N * sizeof(double));
  CHECK(in && out, "out of memory");
  for (long i = 0; i < N; ++i) {
    in[i] = (double)(mt_rank + 1) * (double)(i % 1000);
    out[i] = -1;
  }
  MPI_Barrier(MPI_COMM_WORLD); /* everyone connected before the death */
  if (mt_rank == DYING) {
    signal(SIGALRM, die);
    struct itimerval t = {{0, 0}, {die_after_us / 1000000, die_after_us % 1000000}};
    if (t.it_value.tv_sec == 0 && t.it_value.tv_usec == 0) t.it_value.tv_usec = 1;
    setitimer(ITIMER_REAL, &t, NULL);
  }
  MPI_Request ireq = MPI_REQUEST_NULL;
  int err = ibarrier ? MPI_Ibarrier(MPI_COMM_WORLD, &ireq) : MPI_SUCCESS;
  if (iallreduce) err = MPI_Iallreduce(in, out, (int)N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &ireq);
  if (pallreduce) {
    err = MPI_Allreduce_init(in, out, (int)N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &ireq);
    if (err == MPI_SUCCESS) err = MPI_Start(&ireq);
  }
  if ((ibarrier || iallreduce || pallreduce) && err == MPI_SUCCESS) err = MPI_Wait(&ireq, MPI_STATUS_IGNORE);
  const long blk = N / mt_size; /* alltoall: doubles per peer */
  if (!ibarrier && !iallreduce && !pallreduce)
    err = barrier    ? MPI_Barrier(MPI_COMM_WORLD)
          : bcast    ? MPI_Bcast(mt_rank == 0 ? in : out, (int)N, MPI_DOUBLE, 0, MPI_COMM_WORLD)
          : alltoall ? MPI_Alltoall(in, (int)blk, MPI_DOUBLE, out, (int)blk, MPI_DOUBLE, MPI_COMM_WORLD)
          : scatter  ? MPI_Scatter(in, (int)blk, MPI_DOUBLE, out, (int)blk, MPI_DOUBLE, 0, MPI_COMM_WORLD)
          : gather   ? MPI_Gather(in, (int)blk, MPI_DOUBLE, out, (int)blk, MPI_DOUBLE, 0, MPI_COMM_WORLD)
                     : MPI_Allreduce(in, out, (int)N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  if (mt_rank == DYING)
    for (;;) pause(); /* done before the timer: die anyway */
  const char* what = ibarrier     ? "MPI_Ibarrier"
                     : iallreduce ? "MPI_Iallreduce"
                     : pallreduce ? "MPI_Allreduce_init"
                     : barrier  ? "MPI_Barrier"
                     : bcast    ? "MPI_Bcast"
                     : alltoall ? "MPI_Alltoall"
                     : scatter  ? "MPI_Scatter"
                     : gather   ? "MPI_Gather"
                                : "MPI_Allreduce";
  if (err == MPI_SUCCESS && barrier) {
    printf("rank %d: %s completed\n", mt_rank, what);
  } else if (err == MPI_SUCCESS) {
    /* Possible only when this rank got all it needed before the death. */
    const double sum = (double)mt_size * (mt_size + 1) / 2;
    for (long i = 0; alltoall && i < blk * mt_size; ++i) {
      /* block r came from rank r: its block mt_rank of (r + 1) * (k % 1000) */
      const long r = i / blk, k = mt_rank * blk + i % blk;
      CHECK(out[i] == (double)(r + 1) * (double)(k % 1000), "%s succeeded but element %ld is %g", what, i, out[i]);
    }
    /* scatter: block mt_rank of rank 0's in; gather at rank 0: block r of rank r's in */
    for (long i = 0; scatter && i < blk; ++i) {
      const long k = mt_rank * blk + i;
      CHECK(out[i] == (double)(k % 1000), "%s succeeded but element %ld is %g", what, i, out[i]);
    }
    for (long i = 0; gather && mt_rank == 0 && i < blk * mt_size; ++i) {
      const long r = i / blk, k = i % blk;
      CHECK(out[i] == (double)(r + 1) * (double)(k % 1000), "%s succeeded but element %ld is %g", what, i, out[i]);
    }
    for (long i = 0; !alltoall && !scatter && !gather && i < N; ++i) {
      const double want = bcast ? (mt_rank == 0 ? in[i] : (double)(i % 1000)) : sum * (double)(i % 1000);
      CHECK((bcast && mt_rank == 0 ? in[i] : out[i]) == want, "%s succeeded but element %ld is %g, not %g", what, i,
            out[i], want);
    }
    printf("rank %d: %s completed\n", mt_rank, what);
  } else {
    char text[MPI_MAX_ERROR_STRING];
    const int cls = mt_error(err, text);
    printf("rank %d: %s failed: %s\n", mt_rank, what, text);
    CHECK(cls == MPI_ERR_PROC_FAILED, "%s: error %d (class %d): %s", what, err, cls, text);
    char dead[32];
    snprintf(dead, sizeof dead, "rank %d failed", DYING);
    CHECK(strstr(text, dead) != NULL, "%s: '%s' does not name rank %d, the one that died", what, text, DYING);
  }
  free(in);
  free(out);
  return mt_pass();
}
