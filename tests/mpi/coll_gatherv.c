/* MPI_Gatherv: every root, per-rank counts that differ (some zero),
 * displacements out of rank order with gaps that must stay untouched,
 * small and > 64 KiB totals. */
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"

static int val(int rank, int i) { return rank * 1000003 + i * 3 + 2; }

int main(int argc, char** argv) {
  mt_start("coll_gatherv", &argc, &argv);
  int n = mt_size, r = mt_rank;
  const int bases[] = {1, 50, 9000};
  int* rc = malloc(sizeof(int) * n);
  int* dp = malloc(sizeof(int) * n);
  for (int root = 0; root < n; ++root) {
    for (int k = 0; k < 3; ++k) {
      long total = 0;
      /* Rank p sends base*(p%3) + p ints (rank 0 sends nothing when p%3 == 0 and p == 0);
       * blocks are placed in reverse rank order with a gap of 3 ints. */
      for (int p = 0; p < n; ++p) rc[p] = bases[k] * (p % 3) + p;
      for (int p = n - 1; p >= 0; --p) {
        dp[p] = (int)total;
        total += rc[p] + 3;
      }
      int* s = malloc(sizeof(int) * (rc[r] + 1));
      int* g = malloc(sizeof(int) * (total + 1));
      for (int i = 0; i < rc[r]; ++i) s[i] = val(r, i);
      for (long i = 0; i < total; ++i) g[i] = -7;
      CHECK(MPI_Gatherv(s, rc[r], MPI_INT, g, rc, dp, MPI_INT, root, MPI_COMM_WORLD) == MPI_SUCCESS, "gatherv");
      if (r == root) {
        for (int p = 0; p < n; ++p) {
          for (int i = 0; i < rc[p]; ++i)
            CHECK(g[dp[p] + i] == val(p, i), "root %d base %d: block %d [%d] = %d", root, bases[k], p, i,
                  g[dp[p] + i]);
          for (int i = 0; i < 3; ++i) CHECK(g[dp[p] + rc[p] + i] == -7, "gap after block %d overwritten", p);
        }
      }
      free(s);
      free(g);
    }
  }
  free(rc);
  free(dp);
  return mt_pass();
}
