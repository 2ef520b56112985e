/* MPI_Alltoallv: per-pair counts that differ (some zero), displacements in
 * reverse peer order with gaps, averages below and above the pairwise
 * threshold. */
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"

static int val(int src, int dst, int i) { return src * 1000003 + dst * 10007 + i; }
static int cnt_of(int src, int dst, int base) { return ((src * 7 + dst * 3) % 4) * base + (src + dst) % 2; }

int main(int argc, char** argv) {
  mt_start("coll_alltoallv", &argc, &argv);
  int n = mt_size, r = mt_rank;
  const int bases[] = {1, 100, 15000};
  int *sc = malloc(sizeof(int) * n), *sd = malloc(sizeof(int) * n);
  int *rc = malloc(sizeof(int) * n), *rd = malloc(sizeof(int) * n);
  for (int k = 0; k < 3; ++k) {
    long st = 0, rt = 0;
    for (int p = n - 1; p >= 0; --p) {
      sc[p] = cnt_of(r, p, bases[k]);
      rc[p] = cnt_of(p, r, bases[k]);
      sd[p] = (int)st;
      rd[p] = (int)rt;
      st += sc[p] + 1;
      rt += rc[p] + 2;
    }
    int* s = malloc(sizeof(int) * (st + 1));
    int* d = malloc(sizeof(int) * (rt + 1));
    for (int p = 0; p < n; ++p)
      for (int i = 0; i < sc[p]; ++i) s[sd[p] + i] = val(r, p, i);
    for (long i = 0; i < rt; ++i) d[i] = -4;
    CHECK(MPI_Alltoallv(s, sc, sd, MPI_INT, d, rc, rd, MPI_INT, MPI_COMM_WORLD) == MPI_SUCCESS, "alltoallv");
    for (int p = 0; p < n; ++p) {
      for (int i = 0; i < rc[p]; ++i)
        CHECK(d[rd[p] + i] == val(p, r, i), "base %d: from %d [%d] = %d", bases[k], p, i, d[rd[p] + i]);
      CHECK(d[rd[p] + rc[p]] == -4 && d[rd[p] + rc[p] + 1] == -4, "gap after block from %d overwritten", p);
    }
    free(s);
    free(d);
  }
  /* Argument errors are found before anything is sent. */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int x[64], cls, err;
  for (int p = 0; p < n; ++p) sc[p] = sd[p] = rc[p] = rd[p] = 0;
  err = MPI_Alltoallv(x, sc, sd, MPI_INT, x, NULL, rd, MPI_INT, MPI_COMM_WORLD);
  MPI_Error_class(err, &cls);
  CHECK(cls == MPI_ERR_ARG, "null recvcounts gave %d", err);
  rc[n - 1] = -1;
  err = MPI_Alltoallv(x, sc, sd, MPI_INT, x, rc, rd, MPI_INT, MPI_COMM_WORLD);
  MPI_Error_class(err, &cls);
  CHECK(cls == MPI_ERR_COUNT, "negative recvcount gave %d", err);
  err = MPI_Reduce_scatter(x, x, NULL, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Error_class(err, &cls);
  CHECK(cls == MPI_ERR_ARG, "reduce_scatter null recvcounts gave %d", err);
  err = MPI_Ialltoallv(x, sc, sd, MPI_INT, x, sc, rd, MPI_INT, MPI_COMM_WORLD, NULL);
  MPI_Error_class(err, &cls);
  CHECK(cls == MPI_ERR_ARG, "null request pointer gave %d", err);
  free(sc);
  free(sd);
  free(rc);
  free(rd);
  return mt_pass();
}
