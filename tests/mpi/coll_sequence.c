/* Blocking and non-blocking collectives mixed on two communicators (WORLD
 * and a reversed-order duplicate via split): started in the same order on
 * every rank, completed in different orders per rank; collectives on one
 * communicator never match those of the other. Then MPI_Comm_free with a
 * collective still pending on that communicator (it completes), and
 * MPI_Finalize with one still pending (finished there, no hang). */
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"

int main(int argc, char** argv) {
  mt_start("coll_sequence", &argc, &argv);
  int n = mt_size, r = mt_rank;
  MPI_Comm a = MPI_COMM_WORLD, b;
  MPI_Comm_split(MPI_COMM_WORLD, 0, n - r, &b); /* rank in b = n-1-r */
  int rb;
  MPI_Comm_rank(b, &rb);
  CHECK(rb == n - 1 - r, "rank in b %d", rb);
  for (int iter = 0; iter < 20; ++iter) {
    int cnt = iter % 3 == 2 ? 20000 : 1 + iter;
    int* x = malloc(sizeof(int) * cnt);
    int* y1 = malloc(sizeof(int) * cnt);
    int* y2 = malloc(sizeof(int) * cnt);
    int* z = malloc(sizeof(int) * cnt);
    int* w = malloc(sizeof(int) * cnt);
    for (int i = 0; i < cnt; ++i) {
      x[i] = r + i;
      z[i] = r == 0 ? iter * 7 + i : -1; /* bcast on a from 0 */
      w[i] = rb == 0 ? iter * 5 - i : -1; /* bcast on b from b-rank 0 (world n-1) */
    }
    MPI_Request q[4];
    CHECK(MPI_Iallreduce(x, y1, cnt, MPI_INT, MPI_SUM, a, &q[0]) == MPI_SUCCESS, "iallreduce a");
    CHECK(MPI_Ibcast(w, cnt, MPI_INT, 0, b, &q[1]) == MPI_SUCCESS, "ibcast b");
    CHECK(MPI_Allreduce(x, y2, cnt, MPI_INT, MPI_MAX, b) == MPI_SUCCESS, "allreduce b");
    CHECK(MPI_Ibcast(z, cnt, MPI_INT, 0, a, &q[2]) == MPI_SUCCESS, "ibcast a");
    CHECK(MPI_Barrier(a) == MPI_SUCCESS, "barrier a");
    CHECK(MPI_Ibarrier(b, &q[3]) == MPI_SUCCESS, "ibarrier b");
    /* Complete in a rank-dependent order. */
    for (int k = 0; k < 4; ++k) {
      int j = (k + r + iter) % 4;
      CHECK(MPI_Wait(&q[j], MPI_STATUS_IGNORE) == MPI_SUCCESS, "wait %d", j);
    }
    for (int i = 0; i < cnt; ++i) {
      CHECK(y1[i] == n * (n - 1) / 2 + n * i, "iter %d allreduce a [%d] = %d", iter, i, y1[i]);
      CHECK(y2[i] == n - 1 + i, "iter %d allreduce b [%d]", iter, i);
      CHECK(z[i] == iter * 7 + i, "iter %d bcast a [%d]", iter, i);
      CHECK(w[i] == iter * 5 - i, "iter %d bcast b [%d]", iter, i);
    }
    free(x);
    free(y1);
    free(y2);
    free(z);
    free(w);
  }
  /* Comm_free with a collective pending on the communicator. */
  int v = r + 1, s = 0;
  MPI_Request q;
  CHECK(MPI_Iallreduce(&v, &s, 1, MPI_INT, MPI_SUM, b, &q) == MPI_SUCCESS, "iallreduce before free");
  CHECK(MPI_Comm_free(&b) == MPI_SUCCESS, "comm_free");
  CHECK(MPI_Wait(&q, MPI_STATUS_IGNORE) == MPI_SUCCESS, "wait after comm_free");
  CHECK(s == n * (n + 1) / 2, "allreduce after comm_free = %d", s);
  /* A collective left pending at MPI_Finalize is finished there (every
   * rank started it). */
  static int t = 0, u = 0;
  t = r;
  MPI_Request left;
  CHECK(MPI_Iallreduce(&t, &u, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &left) == MPI_SUCCESS, "left pending");
  return mt_pass();
}
