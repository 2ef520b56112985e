/* MPI_Ibarrier's semantics on a communicator that already has its
 * shared-memory area (the blocking collectives set it up) and on one that
 * has none yet (a fresh dup: the schedule serves), with blocking
 * collectives interleaved:
 *  1. nobody completes before the last rank arrives: rank 0 sleeps 150 ms
 *     before its Ibarrier; every other rank, polling MPI_Test from the
 *     start, must see it take that long;
 *  2. 300 Ibarriers pending at once (more than a ring of slots), then
 *     Waitall, with 8-byte bcasts started between them whose data is
 *     checked;
 *  3. one Ibarrier pending while 600 blocking bcasts (two rings of slots)
 *     and allreduces run, then Wait;
 *  4. MPI_Request_free on a pending Ibarrier, then a blocking barrier and
 *     more Ibarriers. */
#include <time.h>

#include "mpitest.h"

static void sleep_ms(int ms) {
  struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

static void late_root(MPI_Comm comm, const char* what) {
  int rank;
  MPI_Comm_rank(comm, &rank);
  MPI_Barrier(MPI_COMM_WORLD); /* start together */
  if (rank == 0) sleep_ms(150);
  const double t0 = MPI_Wtime();
  MPI_Request r;
  CHECK(MPI_Ibarrier(comm, &r) == MPI_SUCCESS, "%s: MPI_Ibarrier", what);
  int done = 0;
  long polls = 0;
  while (!done) {
    CHECK(MPI_Test(&r, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS, "%s: MPI_Test", what);
    ++polls;
  }
  CHECK(r == MPI_REQUEST_NULL, "%s: request not freed", what);
  const double waited = MPI_Wtime() - t0;
  if (rank != 0) CHECK(waited >= 0.120, "%s: rank %d left the barrier after %.3f s, before rank 0 arrived (150 ms)", what, rank, waited);
}

static void many_pending(MPI_Comm comm, const char* what) {
  enum { N = 300 };
  static MPI_Request reqs[N];
  int rank;
  MPI_Comm_rank(comm, &rank);
  for (int i = 0; i < N; ++i) {
    CHECK(MPI_Ibarrier(comm, &reqs[i]) == MPI_SUCCESS, "%s: MPI_Ibarrier %d", what, i);
    if (i % 10 == 0) {
      long v = rank == i % 2 ? 1000L + i : -1;
      CHECK(MPI_Bcast(&v, 1, MPI_LONG, i % 2, comm) == MPI_SUCCESS, "%s: MPI_Bcast %d", what, i);
      CHECK(v == 1000L + i, "%s: bcast %d gave %ld", what, i, v);
    }
  }
  CHECK(MPI_Waitall(N, reqs, MPI_STATUSES_IGNORE) == MPI_SUCCESS, "%s: MPI_Waitall", what);
  for (int i = 0; i < N; ++i) CHECK(reqs[i] == MPI_REQUEST_NULL, "%s: request %d not freed", what, i);
}

static void pending_across_rings(MPI_Comm comm, const char* what) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  MPI_Request r;
  CHECK(MPI_Ibarrier(comm, &r) == MPI_SUCCESS, "%s: MPI_Ibarrier", what);
  for (int i = 0; i < 600; ++i) {
    int v = rank == 0 ? i * 3 : -1;
    CHECK(MPI_Bcast(&v, 1, MPI_INT, 0, comm) == MPI_SUCCESS, "%s: MPI_Bcast %d", what, i);
    CHECK(v == i * 3, "%s: bcast %d gave %d", what, i, v);
    if (i % 50 == 0) {
      int s = 0, one = rank + 1;
      CHECK(MPI_Allreduce(&one, &s, 1, MPI_INT, MPI_SUM, comm) == MPI_SUCCESS, "%s: MPI_Allreduce", what);
      CHECK(s == size * (size + 1) / 2, "%s: allreduce gave %d", what, s);
    }
  }
  CHECK(MPI_Wait(&r, MPI_STATUS_IGNORE) == MPI_SUCCESS, "%s: MPI_Wait", what);
}

static void freed_pending(MPI_Comm comm, const char* what) {
  MPI_Request r;
  CHECK(MPI_Ibarrier(comm, &r) == MPI_SUCCESS, "%s: MPI_Ibarrier", what);
  CHECK(MPI_Request_free(&r) == MPI_SUCCESS, "%s: MPI_Request_free", what);
  CHECK(r == MPI_REQUEST_NULL, "%s: freed request not null", what);
  CHECK(MPI_Barrier(comm) == MPI_SUCCESS, "%s: MPI_Barrier", what);
  MPI_Request rs[3];
  for (int i = 0; i < 3; ++i) CHECK(MPI_Ibarrier(comm, &rs[i]) == MPI_SUCCESS, "%s: MPI_Ibarrier", what);
  CHECK(MPI_Waitall(3, rs, MPI_STATUSES_IGNORE) == MPI_SUCCESS, "%s: MPI_Waitall", what);
}

int main(int argc, char** argv) {
  mt_start("coll_ibarrier", &argc, &argv);
  MPI_Barrier(MPI_COMM_WORLD); /* the world's area, when it can have one */
  late_root(MPI_COMM_WORLD, "world");
  many_pending(MPI_COMM_WORLD, "world");
  pending_across_rings(MPI_COMM_WORLD, "world");
  freed_pending(MPI_COMM_WORLD, "world");
  /* A fresh communicator: no area until its first blocking collective. */
  MPI_Comm fresh;
  MPI_Comm_dup(MPI_COMM_WORLD, &fresh);
  late_root(fresh, "fresh dup");
  many_pending(fresh, "fresh dup"); /* its bcasts set the area up midway */
  late_root(fresh, "dup with an area");
  MPI_Comm_free(&fresh);
  return mt_pass();
}
