/* Atomicity and ordering of accumulate functions (MPI 4.1 12.7.1, 12.7.2,
 * 12.2.1 accumulate_ordering), with passive target (lock_all):
 *  - every rank adds 1 to one counter on rank 0, ITERS times with
 *    MPI_Accumulate(SUM) and ITERS times with MPI_Fetch_and_op(SUM), all at
 *    once: the total is exact, and the values fetched are all different;
 *  - MPI_Compare_and_swap as a spin lock on rank 0 protecting a
 *    non-atomic read-modify-write (Get, add, Put) of another counter: exact;
 *  - operations of one origin to one target are ordered by default: a run
 *    of Get_accumulate(SUM) without flush sees each previous one, and
 *    Accumulate(REPLACE) / Get_accumulate(NO_OP) pairs read what was written
 *    before and not after. */
#include "mpitest.h"

#define ITERS 1000
#define LOCKED_ITERS 100
#define RUN 64
enum { COUNTER = 0, LOCK = 1, DATA = 2, SLOTS = 3 }; /* ints on rank 0; then SLOTS + rank: each origin's own */

static void test_counter(MPI_Win win, int* mem) {
  int one = 1, *fetched = malloc(ITERS * sizeof(int));
  MPI_Win_lock_all(0, win);
  for (int i = 0; i < ITERS; ++i) {
    CHECK(MPI_Accumulate(&one, 1, MPI_INT, 0, COUNTER, 1, MPI_INT, MPI_SUM, win) == MPI_SUCCESS, "Accumulate");
    CHECK(MPI_Fetch_and_op(&one, &fetched[i], MPI_INT, 0, COUNTER, MPI_SUM, win) == MPI_SUCCESS, "Fetch_and_op");
    if (i % 16 == 15) MPI_Win_flush(0, win);
  }
  MPI_Win_flush(0, win);
  MPI_Win_unlock_all(win);
  MPI_Barrier(MPI_COMM_WORLD);
  const int total = 2 * ITERS * mt_size;
  if (mt_rank == 0) {
    MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);  /* the public copy reaches the private one */
    CHECK(mem[COUNTER] == total, "counter = %d after %d atomic increments", mem[COUNTER], total);
    MPI_Win_unlock(0, win);
  }
  /* Each fetched value is below the total, and no two increments fetched the same. */
  int* all = mt_rank == 0 ? malloc((size_t)ITERS * mt_size * sizeof(int)) : NULL;
  MPI_Gather(fetched, ITERS, MPI_INT, all, ITERS, MPI_INT, 0, MPI_COMM_WORLD);
  if (mt_rank == 0) {
    unsigned char* seen = calloc(total, 1);
    for (int i = 0; i < ITERS * mt_size; ++i) {
      CHECK(all[i] >= 0 && all[i] < total, "fetched %d, outside [0, %d)", all[i], total);
      CHECK(!seen[all[i]], "value %d fetched twice: Fetch_and_op is not atomic", all[i]);
      seen[all[i]] = 1;
    }
    free(seen);
    free(all);
  }
  /* One origin's increments are ordered: what it fetches grows. */
  for (int i = 1; i < ITERS; ++i)
    CHECK(fetched[i] > fetched[i - 1], "fetch %d got %d after %d", i, fetched[i], fetched[i - 1]);
  free(fetched);
}

static void test_spin_lock(MPI_Win win, int* mem) {
  const int me = mt_rank + 1, zero = 0;
  long spins = 0;
  MPI_Win_lock_all(0, win);
  for (int i = 0; i < LOCKED_ITERS; ++i) {
    int old = -1;
    do {  /* acquire: 0 -> me */
      CHECK(MPI_Compare_and_swap(&me, &zero, &old, MPI_INT, 0, LOCK, win) == MPI_SUCCESS, "CAS acquire");
      MPI_Win_flush(0, win);
      CHECK(old == 0 || (old >= 1 && old <= mt_size && old != me), "lock word %d while acquiring", old);
      ++spins;
    } while (old != 0);
    int v = -1;
    MPI_Get(&v, 1, MPI_INT, 0, DATA, 1, MPI_INT, win);
    MPI_Win_flush(0, win);
    CHECK(v >= i && v < LOCKED_ITERS * mt_size, "protected counter %d at my iteration %d", v, i);
    ++v;
    MPI_Put(&v, 1, MPI_INT, 0, DATA, 1, MPI_INT, win);
    MPI_Win_flush(0, win);
    CHECK(MPI_Compare_and_swap(&zero, &me, &old, MPI_INT, 0, LOCK, win) == MPI_SUCCESS, "CAS release");
    MPI_Win_flush(0, win);
    CHECK(old == me, "released a lock word of %d, not mine (%d)", old, me);
  }
  MPI_Win_unlock_all(win);
  MPI_Barrier(MPI_COMM_WORLD);
  if (mt_rank == 0) {
    MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
    CHECK(mem[DATA] == LOCKED_ITERS * mt_size, "counter under the CAS lock = %d, expected %d", mem[DATA],
          LOCKED_ITERS * mt_size);
    CHECK(mem[LOCK] == 0, "lock word left at %d", mem[LOCK]);
    MPI_Win_unlock(0, win);
  }
}

static void test_ordering(MPI_Win win, int* mem) {
  (void)mem;
  const int target = mt_size - 1 - mt_rank, slot = SLOTS + mt_rank; /* one slot of its own on another rank */
  int one = 1, res[RUN], zero = 0;
  MPI_Win_lock(MPI_LOCK_SHARED, target, 0, win);
  MPI_Accumulate(&zero, 1, MPI_INT, target, slot, 1, MPI_INT, MPI_REPLACE, win);
  for (int i = 0; i < RUN; ++i) {
    res[i] = -1;
    CHECK(MPI_Get_accumulate(&one, 1, MPI_INT, &res[i], 1, MPI_INT, target, slot, 1, MPI_INT, MPI_SUM, win) ==
              MPI_SUCCESS, "Get_accumulate");
  }
  MPI_Win_unlock(target, win);
  for (int i = 0; i < RUN; ++i)
    CHECK(res[i] == i, "Get_accumulate %d of a run without flush fetched %d: out of order", i, res[i]);
  /* Write then read (raw), read then write (war), all without flush. */
  int w[RUN], r[RUN], dummy = 0;
  MPI_Win_lock(MPI_LOCK_SHARED, target, 0, win);
  for (int i = 0; i < RUN; ++i) {
    w[i] = 1000 * (mt_rank + 1) + i;
    r[i] = -1;
    MPI_Accumulate(&w[i], 1, MPI_INT, target, slot, 1, MPI_INT, MPI_REPLACE, win);
    MPI_Get_accumulate(&dummy, 1, MPI_INT, &r[i], 1, MPI_INT, target, slot, 1, MPI_INT, MPI_NO_OP, win);
  }
  int last = -1;
  MPI_Fetch_and_op(&dummy, &last, MPI_INT, target, slot, MPI_NO_OP, win);
  MPI_Win_unlock(target, win);
  for (int i = 0; i < RUN; ++i) CHECK(r[i] == w[i], "read %d after REPLACE %d: got %d", i, w[i], r[i]);
  CHECK(last == w[RUN - 1], "last value %d, expected %d", last, w[RUN - 1]);
}

int main(int argc, char** argv) {
  mt_start("rma_atomicity", &argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int* mem;
  MPI_Win win;
  const int n = SLOTS + mt_size;
  CHECK(MPI_Win_allocate((n + 3) / 4 * 4 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win) ==
            MPI_SUCCESS, "Win_allocate");
  MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
  MPI_Win_lock(MPI_LOCK_EXCLUSIVE, mt_rank, 0, win);
  for (int i = 0; i < n; ++i) mem[i] = 0;
  MPI_Win_unlock(mt_rank, win);
  MPI_Barrier(MPI_COMM_WORLD);
  test_counter(win, mem);
  test_spin_lock(win, mem);
  MPI_Barrier(MPI_COMM_WORLD);
  test_ordering(win, mem);
  MPI_Win_free(&win);
  return mt_pass();
}
