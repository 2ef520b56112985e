/* MPI_Scatterv: every root, differing counts (some zero), displacements out
 * of rank order, small and > 64 KiB totals; receive buffers beyond the
 * block stay untouched. */
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"

static int val(int rank, int i) { return rank * 1000003 + i * 11 + 4; }

int main(int argc, char** argv) {
  mt_start("coll_scatterv", &argc, &argv);
  int n = mt_size, r = mt_rank;
  const int bases[] = {1, 50, 9000};
  int* sc = malloc(sizeof(int) * n);
  int* dp = malloc(sizeof(int) * n);
  for (int root = 0; root < n; ++root) {
    for (int k = 0; k < 3; ++k) {
      long total = 0;
      for (int p = 0; p < n; ++p) sc[p] = bases[k] * ((p + 1) % 3) + p;
      for (int p = n - 1; p >= 0; --p) {
        dp[p] = (int)total;
        total += sc[p] + 2;
      }
      int* s = malloc(sizeof(int) * (total + 1));
      int* d = malloc(sizeof(int) * (sc[r] + 4));
      for (long i = 0; i < total; ++i) s[i] = -1;
      if (r == root)
        for (int p = 0; p < n; ++p)
          for (int i = 0; i < sc[p]; ++i) s[dp[p] + i] = val(p, i);
      for (int i = 0; i < sc[r] + 4; ++i) d[i] = -9;
      CHECK(MPI_Scatterv(s, sc, dp, MPI_INT, d, sc[r], MPI_INT, root, MPI_COMM_WORLD) == MPI_SUCCESS, "scatterv");
      for (int i = 0; i < sc[r]; ++i) CHECK(d[i] == val(r, i), "root %d base %d: [%d] = %d", root, bases[k], i, d[i]);
      for (int i = sc[r]; i < sc[r] + 4; ++i) CHECK(d[i] == -9, "written past the block at %d", i);
      free(s);
      free(d);
    }
  }
  free(sc);
  free(dp);
  return mt_pass();
}
