/* Every rank works on its neighbour's window while its other neighbour
 * works on its own, at the same time, with operations whose data does not
 * fit in one request message (the data follows in a second message on the
 * operation's tag, and answers come back on that tag): exclusive
 * lock/Get_accumulate/unlock, Put, Get and Accumulate of 1000 doubles, on
 * a window made by MPI_Win_create (the message path) and by
 * MPI_Win_allocate. Every value is checked. Then a rank polling its own
 * window with lock/get/unlock while the others put into it. */
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

/* Rank 0 polls its own window (lock, get from itself, unlock) until every
 * other rank's put has landed: its synchronisation calls on itself must
 * keep serving the others' requests (a Win_create window: the message
 * path), or it polls forever. */
static void self_poll(void) {
  int* mem = malloc(mt_size * sizeof(int));
  for (int i = 0; i < mt_size; ++i) mem[i] = -1;
  MPI_Win win;
  MPI_Win_create(mem, mt_size * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
  MPI_Barrier(MPI_COMM_WORLD);
  if (mt_rank == 0) {
    int got[64];
    const int n = mt_size < 64 ? mt_size : 64;
    for (long spins = 0;; ++spins) {
      MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
      MPI_Get(got, n, MPI_INT, 0, 0, n, MPI_INT, win);
      MPI_Win_unlock(0, win);
      int all = 1;
      for (int i = 1; i < n; ++i) all &= got[i] == 1000 + i;
      if (all) break;
      CHECK(spins < 50000000, "the others' puts never landed");
    }
  } else {
    const int v = 1000 + mt_rank;
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
    MPI_Put(&v, 1, MPI_INT, 0, mt_rank, 1, MPI_INT, win);
    MPI_Win_unlock(0, win);
  }
  MPI_Win_free(&win);
  free(mem);
}

/* A large get is taken out of the target's memory after the target has
 * served it: the target's epoch (fence, PSCW wait, the origin's unlock)
 * ends only once the data has left, so a store the target makes right
 * after it is never seen by the get. */
#define BIG (256 * 1024)
static void late_store(void) {
  if (mt_size < 2) return;
  int* mem = malloc(BIG * sizeof(int));
  int* got = malloc(BIG * sizeof(int));
  MPI_Win win;
  MPI_Win_create(mem, BIG * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
  MPI_Group world, g0, g1;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  const int zero = 0, one = 1;
  MPI_Group_incl(world, 1, &zero, &g0);
  MPI_Group_incl(world, 1, &one, &g1);
  for (int mode = 0; mode < 3; ++mode) {
    for (int i = 0; i < BIG; ++i) mem[i] = 1, got[i] = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    if (mt_rank == 0) {
      if (mode == 0) MPI_Win_fence(MPI_MODE_NOPRECEDE, win);
      if (mode == 1) MPI_Win_start(g1, 0, win);
      if (mode == 2) {
        /* Holding the lock (the first get is served under it), tell rank
         * 1 to ask for its own exclusive lock: it is granted at the
         * unlock. */
        int probe = 0;
        MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win);
        MPI_Get(&probe, 1, MPI_INT, 1, 0, 1, MPI_INT, win);
        MPI_Win_flush(1, win);
        MPI_Send(&probe, 1, MPI_INT, 1, 77, MPI_COMM_WORLD);
      }
      MPI_Get(got, BIG, MPI_INT, 1, 0, BIG, MPI_INT, win);
      if (mode == 0) MPI_Win_fence(MPI_MODE_NOSUCCEED, win);
      if (mode == 1) MPI_Win_complete(win);
      if (mode == 2) MPI_Win_unlock(1, win);
      for (int i = 0; i < BIG; ++i) CHECK(got[i] == 1, "mode %d: got[%d] = %d (a store after the epoch)", mode, i, got[i]);
    } else if (mt_rank == 1) {
      if (mode == 0) {
        MPI_Win_fence(MPI_MODE_NOPRECEDE, win);
        MPI_Win_fence(MPI_MODE_NOSUCCEED, win);
      }
      if (mode == 1) {
        MPI_Win_post(g0, 0, win);
        MPI_Win_wait(win);
      }
      if (mode == 2) MPI_Recv(&got[0], 1, MPI_INT, 0, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, win); /* (mode 2: granted at rank 0's unlock) */
      mem[BIG - 1] = 2;
      MPI_Win_unlock(1, win);
    } else if (mode == 0) {
      MPI_Win_fence(MPI_MODE_NOPRECEDE, win);
      MPI_Win_fence(MPI_MODE_NOSUCCEED, win);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  MPI_Group_free(&g0);
  MPI_Group_free(&g1);
  MPI_Group_free(&world);
  MPI_Win_free(&win);
  free(mem);
  free(got);
}

/* A put spanning two adjacent regions attached to a dynamic window. */
static void dynamic_span(void) {
  static int region[2048];
  MPI_Win win;
  MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win);
  MPI_Win_attach(win, &region[0], 1024 * sizeof(int));
  MPI_Win_attach(win, &region[1024], 1024 * sizeof(int));
  for (int i = 0; i < 2048; ++i) region[i] = -1;
  MPI_Aint* addr = malloc(mt_size * sizeof(MPI_Aint));
  MPI_Get_address(&region[0], &addr[mt_rank]);
  MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, addr, 1, MPI_AINT, MPI_COMM_WORLD);
  const int next = (mt_rank + 1) % mt_size, prev = (mt_rank + mt_size - 1) % mt_size;
  int v[1536];
  for (int i = 0; i < 1536; ++i) v[i] = mt_rank * 100000 + i;
  MPI_Win_lock_all(0, win);
  CHECK(MPI_Put(v, 1536, MPI_INT, next, addr[next] + 256 * sizeof(int), 1536, MPI_INT, win) == MPI_SUCCESS,
        "put across two attached regions");
  MPI_Win_flush(next, win);
  MPI_Win_unlock_all(win);
  MPI_Barrier(MPI_COMM_WORLD);
  for (int i = 0; i < 2048; ++i)
    CHECK(region[i] == (i >= 256 && i < 1792 ? prev * 100000 + (i - 256) : -1), "dynamic: [%d] = %d", i, region[i]);
  MPI_Win_detach(win, &region[0]);
  MPI_Win_detach(win, &region[1024]);
  MPI_Win_free(&win);
  free(addr);
}

int main(int argc, char** argv) {
  mt_start("rma_symmetric", &argc, &argv);
  run(0);
  run(1);
  self_poll();
  late_store();
  dynamic_span();
  return mt_pass();
}
