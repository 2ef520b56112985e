/* Every non-blocking collective (MPI_Ibarrier ... MPI_Iexscan), several
 * outstanding at once on one communicator, completed with MPI_Waitall,
 * MPI_Testany and MPI_Waitsome, overlapping with point-to-point traffic;
 * statuses of completed collectives; MPI_Request_free on a pending one. */
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"

#define NREQ 16

static int val(int rank, long i) { return rank * 100003 + (int)i; }

static void round_of(int cnt, int how) {
  int n = mt_size, r = mt_rank;
  MPI_Comm w = MPI_COMM_WORLD;
  long big = (long)cnt * n;
  int *bc = malloc(sizeof(int) * (cnt + 1)), *red = malloc(sizeof(int) * (cnt + 1)),
      *ared = malloc(sizeof(int) * (cnt + 1)), *sv = malloc(sizeof(int) * (cnt + 1)),
      *gat = malloc(sizeof(int) * (big + 1)), *gatv = malloc(sizeof(int) * (big + 1)),
      *sca = malloc(sizeof(int) * (cnt + 1)), *scav = malloc(sizeof(int) * (cnt + 1)),
      *ag = malloc(sizeof(int) * (big + 1)), *agv = malloc(sizeof(int) * (big + 1)),
      *src = malloc(sizeof(int) * (big + 1)), *a2a = malloc(sizeof(int) * (big + 1)),
      *a2av = malloc(sizeof(int) * (big + 1)), *a2aw = malloc(sizeof(int) * (big + 1)),
      *rs = malloc(sizeof(int) * (cnt + 1)), *rsb = malloc(sizeof(int) * (cnt + 1)),
      *scn = malloc(sizeof(int) * (cnt + 1)), *exs = malloc(sizeof(int) * (cnt + 1));
  int *counts = malloc(sizeof(int) * n), *displs = malloc(sizeof(int) * n), *bdispls = malloc(sizeof(int) * n);
  MPI_Datatype* types = malloc(sizeof(MPI_Datatype) * n);
  for (int p = 0; p < n; ++p) {
    counts[p] = cnt;
    displs[p] = p * cnt;
    bdispls[p] = p * cnt * (int)sizeof(int);
    types[p] = MPI_INT;
  }
  for (int i = 0; i < cnt; ++i) {
    bc[i] = r == 0 ? val(7, i) : -1;
    sv[i] = val(r, i);
  }
  for (long i = 0; i < big; ++i) src[i] = val(r, i);
  int root = n - 1;
  MPI_Request q[NREQ];
  int k = 0;
  CHECK(MPI_Ibarrier(w, &q[k++]) == MPI_SUCCESS, "ibarrier");
  CHECK(MPI_Ibcast(bc, cnt, MPI_INT, 0, w, &q[k++]) == MPI_SUCCESS, "ibcast");
  CHECK(MPI_Ireduce(sv, red, cnt, MPI_INT, MPI_SUM, root, w, &q[k++]) == MPI_SUCCESS, "ireduce");
  CHECK(MPI_Iallreduce(sv, ared, cnt, MPI_INT, MPI_MAX, w, &q[k++]) == MPI_SUCCESS, "iallreduce");
  CHECK(MPI_Igather(sv, cnt, MPI_INT, gat, cnt, MPI_INT, root, w, &q[k++]) == MPI_SUCCESS, "igather");
  CHECK(MPI_Igatherv(sv, cnt, MPI_INT, gatv, counts, displs, MPI_INT, 0, w, &q[k++]) == MPI_SUCCESS, "igatherv");
  CHECK(MPI_Iscatter(src, cnt, MPI_INT, sca, cnt, MPI_INT, root, w, &q[k++]) == MPI_SUCCESS, "iscatter");
  CHECK(MPI_Iscatterv(src, counts, displs, MPI_INT, scav, cnt, MPI_INT, 0, w, &q[k++]) == MPI_SUCCESS, "iscatterv");
  CHECK(MPI_Iallgather(sv, cnt, MPI_INT, ag, cnt, MPI_INT, w, &q[k++]) == MPI_SUCCESS, "iallgather");
  CHECK(MPI_Iallgatherv(sv, cnt, MPI_INT, agv, counts, displs, MPI_INT, w, &q[k++]) == MPI_SUCCESS, "iallgatherv");
  CHECK(MPI_Ialltoall(src, cnt, MPI_INT, a2a, cnt, MPI_INT, w, &q[k++]) == MPI_SUCCESS, "ialltoall");
  CHECK(MPI_Ialltoallv(src, counts, displs, MPI_INT, a2av, counts, displs, MPI_INT, w, &q[k++]) == MPI_SUCCESS,
        "ialltoallv");
  CHECK(MPI_Ialltoallw(src, counts, bdispls, types, a2aw, counts, bdispls, types, w, &q[k++]) == MPI_SUCCESS,
        "ialltoallw");
  CHECK(MPI_Ireduce_scatter(src, rs, counts, MPI_INT, MPI_SUM, w, &q[k++]) == MPI_SUCCESS, "ireduce_scatter");
  CHECK(MPI_Ireduce_scatter_block(src, rsb, cnt, MPI_INT, MPI_MIN, w, &q[k++]) == MPI_SUCCESS, "irsb");
  CHECK(MPI_Iscan(sv, scn, cnt, MPI_INT, MPI_SUM, w, &q[k++]) == MPI_SUCCESS, "iscan");
  CHECK(k == NREQ, "k");
  MPI_Request ex;
  CHECK(MPI_Iexscan(sv, exs, cnt, MPI_INT, MPI_SUM, w, &ex) == MPI_SUCCESS, "iexscan");

  /* Point-to-point ring traffic while the collectives are pending. */
  int token_out = val(r, 99), token_in = -1;
  MPI_Request p2p[2];
  MPI_Irecv(&token_in, 1, MPI_INT, (r + n - 1) % n, 5, w, &p2p[0]);
  MPI_Isend(&token_out, 1, MPI_INT, (r + 1) % n, 5, w, &p2p[1]);
  MPI_Waitall(2, p2p, MPI_STATUSES_IGNORE);
  CHECK(token_in == val((r + n - 1) % n, 99), "ring token %d", token_in);

  MPI_Status st[NREQ];
  if (how == 0) {
    CHECK(MPI_Waitall(NREQ, q, st) == MPI_SUCCESS, "waitall");
    for (int i = 0; i < NREQ; ++i)
      CHECK(st[i].MPI_SOURCE == MPI_ANY_SOURCE && st[i].MPI_TAG == MPI_ANY_TAG && st[i].MPI_ERROR == MPI_SUCCESS,
            "status %d: source %d tag %d error %d", i, st[i].MPI_SOURCE, st[i].MPI_TAG, st[i].MPI_ERROR);
  } else if (how == 1) {
    int left = NREQ;
    while (left > 0) {
      int idx, flag;
      MPI_Status s1;
      s1.MPI_ERROR = -77; /* Testany returns one status: MPI_ERROR stays as it was */
      CHECK(MPI_Testany(NREQ, q, &idx, &flag, &s1) == MPI_SUCCESS, "testany");
      if (flag) {
        CHECK(idx >= 0 && idx < NREQ && q[idx] == MPI_REQUEST_NULL, "testany index %d", idx);
        CHECK(s1.MPI_ERROR == -77 && s1.MPI_SOURCE == MPI_ANY_SOURCE, "testany status: error %d source %d",
              s1.MPI_ERROR, s1.MPI_SOURCE);
        --left;
      }
    }
  } else {
    int left = NREQ, idx[NREQ], out;
    while (left > 0) {
      CHECK(MPI_Waitsome(NREQ, q, &out, idx, st) == MPI_SUCCESS, "waitsome");
      CHECK(out >= 1 && out <= left, "waitsome outcount %d", out);
      left -= out;
    }
  }
  for (int i = 0; i < NREQ; ++i) CHECK(q[i] == MPI_REQUEST_NULL, "request %d not released", i);
  CHECK(MPI_Wait(&ex, MPI_STATUS_IGNORE) == MPI_SUCCESS, "wait exscan");

  for (int i = 0; i < cnt; ++i) {
    CHECK(bc[i] == val(7, i), "ibcast [%d]", i);
    if (r == root) CHECK(red[i] == n * (n - 1) / 2 * 100003 + n * i, "ireduce [%d]", i);
    CHECK(ared[i] == val(n - 1, i), "iallreduce [%d]", i);
    CHECK(sca[i] == val(root, (long)r * cnt + i), "iscatter [%d] = %d", i, sca[i]);
    CHECK(scav[i] == val(0, (long)r * cnt + i), "iscatterv [%d]", i);
    CHECK(rs[i] == n * (n - 1) / 2 * 100003 + n * (r * cnt + i), "ireduce_scatter [%d]", i);
    CHECK(rsb[i] == val(0, (long)r * cnt + i), "irsb [%d]", i);
    CHECK(scn[i] == r * (r + 1) / 2 * 100003 + (r + 1) * i, "iscan [%d]", i);
    if (r > 0) CHECK(exs[i] == r * (r - 1) / 2 * 100003 + r * i, "iexscan [%d]", i);
  }
  for (int p = 0; p < n; ++p)
    for (int i = 0; i < cnt; ++i) {
      long at = (long)p * cnt + i;
      if (r == root) CHECK(gat[at] == val(p, i), "igather %d [%d]", p, i);
      if (r == 0) CHECK(gatv[at] == val(p, i), "igatherv %d [%d]", p, i);
      CHECK(ag[at] == val(p, i) && agv[at] == val(p, i), "iallgather(v) %d [%d]", p, i);
      CHECK(a2a[at] == val(p, (long)r * cnt + i), "ialltoall from %d [%d]", p, i);
      CHECK(a2av[at] == val(p, (long)r * cnt + i), "ialltoallv from %d [%d]", p, i);
      CHECK(a2aw[at] == val(p, (long)r * cnt + i), "ialltoallw from %d [%d]", p, i);
    }
  free(bc); free(red); free(ared); free(sv); free(gat); free(gatv); free(sca); free(scav); free(ag); free(agv);
  free(src); free(a2a); free(a2av); free(a2aw); free(rs); free(rsb); free(scn); free(exs);
  free(counts); free(displs); free(bdispls); free(types);
}

int main(int argc, char** argv) {
  mt_start("coll_nonblocking", &argc, &argv);
  const int counts[] = {1, 100, 20000};
  for (int c = 0; c < 3; ++c)
    for (int how = 0; how < 3; ++how) round_of(counts[c], how);

  /* A collective request freed while pending still completes. Nothing
   * tells the application when (a progress thread may write the result at
   * any moment): the result is read after MPI_Finalize, which completes
   * started collectives and stops the engine's threads. */
  int x = mt_rank + 1, sum = 0;
  MPI_Request q;
  CHECK(MPI_Iallreduce(&x, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q) == MPI_SUCCESS, "iallreduce");
  CHECK(MPI_Request_free(&q) == MPI_SUCCESS && q == MPI_REQUEST_NULL, "request_free");
  MPI_Request b;
  MPI_Ibarrier(MPI_COMM_WORLD, &b);
  int flag = 0;
  while (!flag) MPI_Test(&b, &flag, MPI_STATUS_IGNORE);
  /* Errors are reported at the call. */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int cls, err = MPI_Ibcast(&x, 1, MPI_INT, mt_size, MPI_COMM_WORLD, &q);
  MPI_Error_class(err, &cls);
  CHECK(cls == MPI_ERR_ROOT && q == MPI_REQUEST_NULL, "ibcast bad root gave %d", err);
  MPI_Finalize();
  if (sum != mt_size * (mt_size + 1) / 2) {
    printf("FAIL %s: rank %d: freed iallreduce gave %d after MPI_Finalize\n", mt_name, mt_rank, sum);
    return 1;
  }
  printf("PASS %s rank %d\n", mt_name, mt_rank);
  return 0;
}
