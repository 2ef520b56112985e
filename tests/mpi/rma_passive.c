/* Passive target communication (MPI 4.1 12.5.3-12.5.5, 12.3.5):
 *  - an exclusive lock gives mutual exclusion: every rank increments one
 *    counter on rank 0 by Get, flush, Put under MPI_LOCK_EXCLUSIVE; exact;
 *  - shared locks held at once by every rank, reading one value;
 *  - lock_all/unlock_all; flush and flush_all (remote completion: seen by
 *    the target after a barrier and Win_sync), flush_local and
 *    flush_local_all (the origin buffer may be reused: the first value
 *    lands, not the one stored afterwards);
 *  - Win_sync with loads and stores on a shared-memory window;
 *  - Rput/Rget/Raccumulate/Rget_accumulate completed by MPI_Wait, MPI_Test
 *    loops and MPI_Waitall, and requests still pending at unlock (complete
 *    when it returns);
 *  - a target computing for ~0.5 s without calling MPI while the others
 *    lock, put (a few ints, and 4 MiB shared among them) and unlock (only
 *    the result is checked, not the time). */
#include <time.h>

#include "mpitest.h"

#define LEN 64
#define LOCKED_ITERS 50
enum { COUNTER = 0, SHARED_VAL = 1, FLUSH = 8, REQ = 24, COMPUTE = 40 }; /* int offsets; per-rank slots follow */

static int* mem;
static MPI_Win win;

/* The window's memory as the target sees it after others' flushes and a barrier. */
static void sync_after_barrier(void) {
  MPI_Win_lock(MPI_LOCK_SHARED, mt_rank, 0, win);
  MPI_Win_sync(win);
  MPI_Win_unlock(mt_rank, win);
}

static void test_exclusive(void) {
  for (int i = 0; i < LOCKED_ITERS; ++i) {
    int v = -1;
    CHECK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win) == MPI_SUCCESS, "Win_lock exclusive");
    CHECK(MPI_Get(&v, 1, MPI_INT, 0, COUNTER, 1, MPI_INT, win) == MPI_SUCCESS, "Get");
    CHECK(MPI_Win_flush(0, win) == MPI_SUCCESS, "Win_flush");
    CHECK(v >= i && v < LOCKED_ITERS * mt_size, "counter %d at my iteration %d", v, i);
    ++v;
    CHECK(MPI_Put(&v, 1, MPI_INT, 0, COUNTER, 1, MPI_INT, win) == MPI_SUCCESS, "Put");
    CHECK(MPI_Win_unlock(0, win) == MPI_SUCCESS, "Win_unlock");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (mt_rank == 0) {
    sync_after_barrier();
    CHECK(mem[COUNTER] == LOCKED_ITERS * mt_size, "counter under the exclusive lock: %d, expected %d", mem[COUNTER],
          LOCKED_ITERS * mt_size);
  }
}

static void test_shared_locks(void) {
  /* Everyone holds a shared lock on rank 0 across a barrier: they coexist. */
  if (mt_rank == 0) {
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
    mem[SHARED_VAL] = 4242;
    MPI_Win_unlock(0, win);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  int v = -1;
  CHECK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win) == MPI_SUCCESS, "Win_lock shared");
  MPI_Get(&v, 1, MPI_INT, 0, SHARED_VAL, 1, MPI_INT, win);
  MPI_Win_flush(0, win);
  MPI_Barrier(MPI_COMM_WORLD); /* would deadlock if the shared locks excluded each other */
  CHECK(MPI_Win_unlock(0, win) == MPI_SUCCESS, "Win_unlock shared");
  CHECK(v == 4242, "read under a shared lock: %d", v);
}

static void test_flushes(void) {
  const int next = (mt_rank + 1) % mt_size, prev = (mt_rank + mt_size - 1) % mt_size;
  CHECK(MPI_Win_lock_all(0, win) == MPI_SUCCESS, "Win_lock_all");
  /* flush_local: the buffer may change at once; the first value lands. */
  int buf = 100 + mt_rank;
  MPI_Put(&buf, 1, MPI_INT, next, FLUSH, 1, MPI_INT, win);
  CHECK(MPI_Win_flush_local(next, win) == MPI_SUCCESS, "Win_flush_local");
  buf = -5;
  CHECK(MPI_Win_flush(next, win) == MPI_SUCCESS, "Win_flush");
  /* flush_local_all and flush_all: one int to every rank, slot FLUSH + 1 + my rank. */
  int* vals = malloc(mt_size * sizeof(int));
  for (int r = 0; r < mt_size; ++r) {
    vals[r] = 1000 * mt_rank + r;
    MPI_Put(&vals[r], 1, MPI_INT, r, FLUSH + 1 + mt_rank % 15, 1, MPI_INT, win);
  }
  CHECK(MPI_Win_flush_local_all(win) == MPI_SUCCESS, "Win_flush_local_all");
  for (int r = 0; r < mt_size; ++r) vals[r] = -7;
  CHECK(MPI_Win_flush_all(win) == MPI_SUCCESS, "Win_flush_all");
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK(MPI_Win_sync(win) == MPI_SUCCESS, "Win_sync");
  CHECK(mem[FLUSH] == 100 + prev, "flush_local: %d landed, expected %d", mem[FLUSH], 100 + prev);
  for (int r = 0; r < mt_size && r < 15; ++r)
    CHECK(mem[FLUSH + 1 + r] == 1000 * r + mt_rank, "flush_all: slot of rank %d holds %d", r, mem[FLUSH + 1 + r]);
  MPI_Barrier(MPI_COMM_WORLD); /* everyone has read before the window is reused */
  CHECK(MPI_Win_unlock_all(win) == MPI_SUCCESS, "Win_unlock_all");
  free(vals);
}

static void test_requests(void) {
  const int next = (mt_rank + 1) % mt_size, prev = (mt_rank + mt_size - 1) % mt_size;
  MPI_Win_lock_all(0, win);
  /* Rput completed by Wait (local), then flush (remote). */
  int a[4] = {mt_rank, mt_rank + 1, mt_rank + 2, mt_rank + 3}, one = 1, res[4] = {-1, -1, -1, -1}, flag = 0;
  MPI_Request rq[4];
  CHECK(MPI_Rput(a, 4, MPI_INT, next, REQ, 4, MPI_INT, win, &rq[0]) == MPI_SUCCESS && rq[0] != MPI_REQUEST_NULL,
        "Rput");
  CHECK(MPI_Wait(&rq[0], MPI_STATUS_IGNORE) == MPI_SUCCESS && rq[0] == MPI_REQUEST_NULL, "Wait Rput");
  a[0] = -9; /* reusable after the wait */
  MPI_Win_flush(next, win);
  /* Rget by a Test loop: the data is there once it completes. */
  CHECK(MPI_Rget(res, 4, MPI_INT, next, REQ, 4, MPI_INT, win, &rq[1]) == MPI_SUCCESS, "Rget");
  while (!flag) CHECK(MPI_Test(&rq[1], &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS, "Test Rget");
  CHECK(rq[1] == MPI_REQUEST_NULL, "a completed Rget request is not freed");
  for (int i = 0; i < 4; ++i) CHECK(res[i] == mt_rank + i, "Rget: int %d = %d", i, res[i]);
  /* Raccumulate and Rget_accumulate by Waitall: +1 to each, old values fetched. */
  int olds[4] = {-1, -1, -1, -1}, ones[4] = {1, 1, 1, 1};
  CHECK(MPI_Raccumulate(&one, 1, MPI_INT, next, REQ, 1, MPI_INT, MPI_SUM, win, &rq[2]) == MPI_SUCCESS, "Racc");
  MPI_Win_flush(next, win);
  CHECK(MPI_Rget_accumulate(ones, 4, MPI_INT, olds, 4, MPI_INT, next, REQ, 4, MPI_INT, MPI_SUM, win, &rq[3]) ==
            MPI_SUCCESS, "Rget_accumulate");
  CHECK(MPI_Waitall(2, &rq[2], MPI_STATUSES_IGNORE) == MPI_SUCCESS, "Waitall");
  CHECK(olds[0] == mt_rank + 1 && olds[1] == mt_rank + 1 && olds[3] == mt_rank + 3, "Rget_accumulate fetched %d %d %d",
        olds[0], olds[1], olds[3]);
  MPI_Win_unlock_all(win);
  MPI_Barrier(MPI_COMM_WORLD);
  sync_after_barrier();
  CHECK(mem[REQ] == prev + 2 && mem[REQ + 1] == prev + 2 && mem[REQ + 3] == prev + 4, "after the requests: %d %d %d",
        mem[REQ], mem[REQ + 1], mem[REQ + 3]);
  MPI_Barrier(MPI_COMM_WORLD);
  /* Requests not waited for before the unlock: complete when it returns. */
  int got[2] = {-1, -1}, put = 77 + mt_rank;
  MPI_Win_lock(MPI_LOCK_SHARED, next, 0, win);
  MPI_Rput(&put, 1, MPI_INT, next, REQ + 8, 1, MPI_INT, win, &rq[0]);
  MPI_Rget(got, 2, MPI_INT, next, REQ, 2, MPI_INT, win, &rq[1]);
  MPI_Win_unlock(next, win);
  int flags = 0;
  CHECK(MPI_Testall(2, rq, &flags, MPI_STATUSES_IGNORE) == MPI_SUCCESS && flags,
        "requests of an unlocked epoch are not complete");
  CHECK(got[0] == mt_rank + 2 && got[1] == mt_rank + 2, "Rget completed by unlock: %d %d", got[0], got[1]);
  MPI_Barrier(MPI_COMM_WORLD);
  sync_after_barrier();
  CHECK(mem[REQ + 8] == 77 + prev, "Rput completed by unlock: %d", mem[REQ + 8]);
}

static void test_shared_window_sync(void) {
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int nr, ns, *mine;
  MPI_Comm_rank(node, &nr);
  MPI_Comm_size(node, &ns);
  MPI_Win sw;
  CHECK(MPI_Win_allocate_shared(4 * sizeof(int), sizeof(int), MPI_INFO_NULL, node, &mine, &sw) == MPI_SUCCESS,
        "Win_allocate_shared");
  MPI_Win_lock_all(0, sw);
  for (int round = 0; round < 3; ++round) {
    mine[0] = 10 * round + nr; /* store */
    MPI_Win_sync(sw);
    MPI_Barrier(node);
    MPI_Win_sync(sw);
    const int peer = (nr + 1) % ns;
    MPI_Aint sz;
    int du, *theirs;
    MPI_Win_shared_query(sw, peer, &sz, &du, &theirs);
    CHECK(theirs[0] == 10 * round + peer, "round %d: load of rank %d's int: %d", round, peer, theirs[0]);
    MPI_Win_sync(sw);
    MPI_Barrier(node); /* loads done before the next round's stores */
  }
  MPI_Win_unlock_all(sw);
  MPI_Win_free(&sw);
  MPI_Comm_free(&node);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

#define BIG (1 << 20) /* ints of rank 0's large window: 4 MiB */
static void test_computing_target(void) {
  /* A large window on rank 0 only (the others expose nothing): each origin
   * fills its share of it, 1 MiB or more, while rank 0 computes. */
  int* big;
  MPI_Win bwin;
  CHECK(MPI_Win_allocate(mt_rank == 0 ? BIG * sizeof(int) : 0, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &big,
                         &bwin) == MPI_SUCCESS, "Win_allocate large");
  const int share = mt_size > 1 ? BIG / (mt_size - 1) : 0;
  int* src = malloc((share + 1) * sizeof(int));
  for (int i = 0; i < share; ++i) src[i] = mt_rank * 3 + i;
  MPI_Barrier(MPI_COMM_WORLD);
  if (mt_rank == 0) {
    volatile double x = 0;
    const double t0 = now();
    while (now() - t0 < 0.5) x += 1e-9; /* no MPI call */
  } else {
    for (int i = 0; i < 4; ++i) {
      int v = 1000 * mt_rank + i;
      MPI_Win_lock(i % 2 ? MPI_LOCK_SHARED : MPI_LOCK_EXCLUSIVE, 0, 0, win);
      MPI_Put(&v, 1, MPI_INT, 0, COMPUTE + mt_rank % 24, 1, MPI_INT, win);
      MPI_Win_unlock(0, win);
    }
    MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, bwin);
    CHECK(MPI_Put(src, share, MPI_INT, 0, (MPI_Aint)(mt_rank - 1) * share, share, MPI_INT, bwin) == MPI_SUCCESS,
          "large put");
    MPI_Win_unlock(0, bwin);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (mt_rank == 0) {
    sync_after_barrier();
    for (int r = 1; r < mt_size && r < 24; ++r)
      CHECK(mem[COMPUTE + r] == 1000 * r + 3, "computing target: rank %d's slot %d", r, mem[COMPUTE + r]);
    MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, bwin);
    MPI_Win_sync(bwin);
    for (int r = 1; r < mt_size; ++r)
      for (int i = 0; i < share; ++i)
        if (big[(r - 1) * share + i] != r * 3 + i)
          CHECK(0, "large put from rank %d: int %d = %d", r, i, big[(r - 1) * share + i]);
    MPI_Win_unlock(0, bwin);
  }
  free(src);
  MPI_Win_free(&bwin);
}

int main(int argc, char** argv) {
  mt_start("rma_passive", &argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  CHECK(MPI_Win_allocate(LEN * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win) == MPI_SUCCESS,
        "Win_allocate");
  MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
  MPI_Win_lock(MPI_LOCK_EXCLUSIVE, mt_rank, 0, win);
  for (int i = 0; i < LEN; ++i) mem[i] = 0;
  MPI_Win_unlock(mt_rank, win);
  MPI_Barrier(MPI_COMM_WORLD);
  test_exclusive();
  test_shared_locks();
  test_flushes();
  test_requests();
  test_shared_window_sync();
  test_computing_target();
  MPI_Win_free(&win);
  return mt_pass();
}
