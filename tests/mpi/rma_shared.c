/* Shared-memory windows (MPI 4.1 12.2.3, 12.7): on the communicator of
 * MPI_Comm_split_type(MPI_COMM_TYPE_SHARED), MPI_Win_allocate_shared
 *  - is contiguous by default: each rank's segment starts where the
 *    previous non-empty one ends, so rank 0's base addresses them all
 *    (one rank exposes nothing: an empty segment in the middle);
 *  - gives every rank direct load/store access to the others' segments
 *    (stores made visible by Win_sync + barrier + Win_sync, several rounds,
 *    every rank writing into its neighbour's segment);
 *  - still works for Put/Get/Accumulate, mixed with the loads and stores;
 *  - reports each rank's own disp_unit through Win_shared_query. */
#include "mpitest.h"

#define UNIT 16 /* ints per unit of size */

static int seg_ints(int r) { return r == 1 ? 0 : (r % 3 + 1) * UNIT; } /* rank 1: empty */

int main(int argc, char** argv) {
  mt_start("rma_shared", &argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm node;
  CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS &&
            node != MPI_COMM_NULL, "Comm_split_type SHARED");
  int nr, ns;
  MPI_Comm_rank(node, &nr);
  MPI_Comm_size(node, &ns);
  /* Different disp_units: sizeof(int) on even ranks, 1 on odd ones. */
  const int unit = nr % 2 ? 1 : (int)sizeof(int);
  int* mine = NULL;
  MPI_Win win;
  CHECK(MPI_Win_allocate_shared((MPI_Aint)seg_ints(nr) * sizeof(int), unit, MPI_INFO_NULL, node, &mine, &win) ==
            MPI_SUCCESS, "Win_allocate_shared");
  MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
  int** base = malloc(ns * sizeof(int*));
  int total = 0;
  for (int r = 0; r < ns; ++r) {
    MPI_Aint sz = -1;
    int du = -1;
    CHECK(MPI_Win_shared_query(win, r, &sz, &du, &base[r]) == MPI_SUCCESS, "Win_shared_query %d", r);
#ifdef OPEN_MPI /* Open MPI 4.1 bug: reports the size rounded up to a page */
    if (sz > (MPI_Aint)seg_ints(r) * (MPI_Aint)sizeof(int) && sz % 4096 == 0) sz = seg_ints(r) * sizeof(int);
#endif
    CHECK(sz == (MPI_Aint)seg_ints(r) * (MPI_Aint)sizeof(int), "rank %d's size %ld", r, (long)sz);
    CHECK(du == (r % 2 ? 1 : (int)sizeof(int)), "rank %d's disp_unit %d", r, du);
    total += seg_ints(r);
  }
  CHECK(seg_ints(nr) == 0 || base[nr] == mine, "my segment queried at %p, allocated at %p", (void*)base[nr],
        (void*)mine);
  /* Contiguity: each non-empty segment follows the previous non-empty one. */
  for (int r = 1, last = 0; r < ns; ++r) {
    if (seg_ints(r) == 0) continue;
    CHECK(base[r] == base[last] + seg_ints(last), "rank %d's segment at %p, not right after rank %d's (%p + %d ints)",
          r, (void*)base[r], last, (void*)base[last], seg_ints(last));
    last = r;
  }
  MPI_Win_lock_all(MPI_MODE_NOCHECK, win);
  /* Rank 0 writes the whole window through its base, the others read their part. */
  if (nr == 0)
    for (int i = 0; i < total; ++i) base[0][i] = 5000 + i;
  MPI_Win_sync(win);
  MPI_Barrier(node);
  MPI_Win_sync(win);
  const int first = (int)(mine - base[0]);
  for (int i = 0; i < seg_ints(nr); ++i)
    CHECK(mine[i] == 5000 + first + i, "int %d of my segment: %d, expected %d", i, mine[i], 5000 + first + i);
  MPI_Win_sync(win);
  MPI_Barrier(node);
  /* Rounds of stores into the next rank's segment (if it has one), read by its owner. */
  const int to = (nr + 1) % ns, from = (nr + ns - 1) % ns;
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i < seg_ints(to); ++i) base[to][i] = 100 * round + nr + i;
    MPI_Win_sync(win);
    MPI_Barrier(node);
    MPI_Win_sync(win);
    for (int i = 0; i < seg_ints(nr); ++i)
      CHECK(mine[i] == 100 * round + from + i, "round %d: int %d = %d, expected rank %d's store %d", round, i, mine[i],
            from, 100 * round + from + i);
    MPI_Win_sync(win);
    MPI_Barrier(node); /* loads done before the next round's stores */
  }
  /* RMA on the same window, by each target's disp_unit, after the owners
   * cleared their segments; then loads see it. Writer w puts a pair at int
   * 2 + 2w of its neighbour, everyone adds 1 to int 0 of rank 0. */
  for (int i = 0; i < seg_ints(nr); ++i) mine[i] = 0;
  MPI_Win_sync(win);
  MPI_Barrier(node);
  MPI_Win_sync(win);
  const int tunit = to % 2 ? 1 : (int)sizeof(int);
  int v[2] = {-10 - nr, -20 - nr}, got = 0, one = 1;
  if (2 + 2 * nr + 2 <= seg_ints(to)) {
    CHECK(MPI_Put(v, 2, MPI_INT, to, (2 + 2 * nr) * sizeof(int) / tunit, 2, MPI_INT, win) == MPI_SUCCESS, "Put");
    MPI_Win_flush(to, win);
    CHECK(MPI_Get(&got, 1, MPI_INT, to, (3 + 2 * nr) * sizeof(int) / tunit, 1, MPI_INT, win) == MPI_SUCCESS, "Get");
    MPI_Win_flush(to, win);
    CHECK(got == -20 - nr, "Get after Put: %d", got);
  }
  CHECK(MPI_Accumulate(&one, 1, MPI_INT, 0, 0, 1, MPI_INT, MPI_SUM, win) == MPI_SUCCESS, "Accumulate");
  MPI_Win_flush(0, win);
  MPI_Win_sync(win);
  MPI_Barrier(node);
  MPI_Win_sync(win);
  for (int w = 0; w < ns; ++w) {
    const int wto = (w + 1) % ns;
    if (wto == nr && 2 + 2 * w + 2 <= seg_ints(nr))
      CHECK(mine[2 + 2 * w] == -10 - w && mine[3 + 2 * w] == -20 - w, "load of rank %d's put: %d %d", w,
            mine[2 + 2 * w], mine[3 + 2 * w]);
  }
  if (nr == 0) CHECK(mine[0] == ns, "int 0 of rank 0 after %d accumulates: %d", ns, mine[0]);
  MPI_Win_unlock_all(win);
  free(base);
  CHECK(MPI_Win_free(&win) == MPI_SUCCESS && win == MPI_WIN_NULL, "Win_free");
  MPI_Comm_free(&node);
  return mt_pass();
}
