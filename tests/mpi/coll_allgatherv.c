/* MPI_Allgatherv: differing per-rank counts (some zero), displacements in
 * reverse rank order with gaps, small and > 64 KiB totals. */
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"

static int val(int rank, int i) { return rank * 1000003 + i * 17 + 6; }

int main(int argc, char** argv) {
  mt_start("coll_allgatherv", &argc, &argv);
  int n = mt_size, r = mt_rank;
  const int bases[] = {1, 60, 12000};
  int* rc = malloc(sizeof(int) * n);
  int* dp = malloc(sizeof(int) * n);
  for (int k = 0; k < 3; ++k) {
    long total = 0;
    for (int p = 0; p < n; ++p) rc[p] = bases[k] * (p % 2) + p;
    for (int p = n - 1; p >= 0; --p) {
      dp[p] = (int)total;
      total += rc[p] + 1;
    }
    int* s = malloc(sizeof(int) * (rc[r] + 1));
    int* g = malloc(sizeof(int) * (total + 1));
    for (int i = 0; i < rc[r]; ++i) s[i] = val(r, i);
    for (long i = 0; i < total; ++i) g[i] = -3;
    CHECK(MPI_Allgatherv(s, rc[r], MPI_INT, g, rc, dp, MPI_INT, MPI_COMM_WORLD) == MPI_SUCCESS, "allgatherv");
    for (int p = 0; p < n; ++p) {
      for (int i = 0; i < rc[p]; ++i)
        CHECK(g[dp[p] + i] == val(p, i), "base %d: block %d [%d] = %d", bases[k], p, i, g[dp[p] + i]);
      CHECK(g[dp[p] + rc[p]] == -3, "gap after block %d overwritten", p);
    }
    free(s);
    free(g);
  }
  free(rc);
  free(dp);
  return mt_pass();
}
