/* MPI_Allgather and MPI_Allgatherv: tiny, medium and > 80 KiB totals
 * (recursive doubling or Bruck, then ring), differing per-rank counts with
 * gaps for the v-variant, sub-communicators of odd size. */
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"

static int val(int rank, int i) { return rank * 1000003 + i * 13 + 5; }

static void run(MPI_Comm comm) {
  int n, r;
  MPI_Comm_size(comm, &n);
  MPI_Comm_rank(comm, &r);
  const int counts[] = {0, 1, 100, 30000};
  for (int k = 0; k < 4; ++k) {
    int cnt = counts[k];
    int* s = malloc(sizeof(int) * (cnt + 1));
    int* g = malloc(sizeof(int) * ((size_t)cnt * n + 1));
    for (int i = 0; i < cnt; ++i) s[i] = val(r, i);
    for (long i = 0; i < (long)cnt * n; ++i) g[i] = -1;
    CHECK(MPI_Allgather(s, cnt, MPI_INT, g, cnt, MPI_INT, comm) == MPI_SUCCESS, "allgather");
    for (int p = 0; p < n; ++p)
      for (int i = 0; i < cnt; ++i)
        CHECK(g[(long)p * cnt + i] == val(p, i), "cnt %d: block %d [%d] = %d", cnt, p, i, g[(long)p * cnt + i]);
    free(s);
    free(g);
  }
}

int main(int argc, char** argv) {
  mt_start("coll_allgather", &argc, &argv);
  run(MPI_COMM_WORLD);
  MPI_Comm sub; /* every rank but the last: sizes 1, 2, 3 at 2, 3, 4 processes */
  MPI_Comm_split(MPI_COMM_WORLD, mt_rank == mt_size - 1 && mt_size > 1, mt_rank, &sub);
  run(sub);
  MPI_Comm_free(&sub);
  return mt_pass();
}
