/* Every rank works on its neighbour's window while its other neighbour
 * works on its own, at the same time, with operations whose data does not
 * fit in one request message (the data follows in a second message on the
 * operation's tag, and answers come back on that tag): exclusive
 * lock/Get_accumulate/unlock, Put, Get and Accumulate of 1000 doubles, on
 * a window made by MPI_Win_create (the message path) and by
 * MPI_Win_allocate. Every value is checked. */
#include "mpitest.h"

#define N 1000
#define ITER 20

static void run(int allocate) {
  double *mem, val[N], res[N];
  MPI_Win win;
  if (allocate) {
    CHECK(MPI_Win_allocate(N * sizeof(double), sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win) ==
              MPI_SUCCESS,
          "Win_allocate");
  } else {
    mem = malloc(N * sizeof(double));
    CHECK(MPI_Win_create(mem, N * sizeof(double), sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &win) ==
              MPI_SUCCESS,
          "Win_create");
  }
  const int next = (mt_rank + 1) % mt_size, prev = (mt_rank + mt_size - 1) % mt_size;
  MPI_Win_lock(MPI_LOCK_EXCLUSIVE, mt_rank, 0, win);
  for (int i = 0; i < N; ++i) mem[i] = 0;
  MPI_Win_unlock(mt_rank, win);
  MPI_Barrier(MPI_COMM_WORLD);
  for (int i = 0; i < N; ++i) val[i] = i + 1;
  for (int it = 0; it < ITER; ++it) {
    CHECK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, next, 0, win) == MPI_SUCCESS, "lock");
    CHECK(MPI_Get_accumulate(val, N, MPI_DOUBLE, res, N, MPI_DOUBLE, next, 0, N, MPI_DOUBLE, MPI_SUM, win) ==
              MPI_SUCCESS,
          "Get_accumulate");
    CHECK(MPI_Win_unlock(next, win) == MPI_SUCCESS, "unlock");
    for (int i = 0; i < N; ++i) CHECK(res[i] == (double)(i + 1) * it, "iteration %d: old[%d] = %g", it, i, res[i]);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Win_lock(MPI_LOCK_SHARED, mt_rank, 0, win);
  for (int i = 0; i < N; ++i) CHECK(mem[i] == (double)(i + 1) * ITER, "after get_accumulates: [%d] = %g", i, mem[i]);
  MPI_Win_unlock(mt_rank, win);
  MPI_Barrier(MPI_COMM_WORLD);
  /* Put, then Accumulate, then Get back, in one fence epoch each. */
  for (int i = 0; i < N; ++i) val[i] = mt_rank * 10000 + i;
  MPI_Win_fence(0, win);
  MPI_Put(val, N, MPI_DOUBLE, next, 0, N, MPI_DOUBLE, win);
  MPI_Win_fence(0, win);
  MPI_Accumulate(val, N, MPI_DOUBLE, next, 0, N, MPI_DOUBLE, MPI_SUM, win);
  MPI_Win_fence(0, win);
  MPI_Get(res, N, MPI_DOUBLE, prev, 0, N, MPI_DOUBLE, win);
  MPI_Win_fence(MPI_MODE_NOSUCCEED, win);
  const int pp = (prev + mt_size - 1) % mt_size;
  for (int i = 0; i < N; ++i)
    CHECK(res[i] == 2.0 * (pp * 10000 + i), "%s: get from %d [%d] = %g", allocate ? "allocate" : "create", prev, i,
          res[i]);
  MPI_Win_free(&win);
  if (!allocate) free(mem);
}

int main(int argc, char** argv) {
  mt_start("rma_symmetric", &argc, &argv);
  run(0);
  run(1);
  return mt_pass();
}
