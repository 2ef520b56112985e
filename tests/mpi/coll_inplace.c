/* Every MPI_IN_PLACE form of MPI-3.1 on intracommunicators: Reduce (root),
 * Allreduce, Gather(v) (root), Scatter(v) (root), Allgather(v), Alltoall(v,w),
 * Reduce_scatter(_block), Scan, Exscan, blocking and non-blocking, with
 * small and > 64 KiB data; MPI_IN_PLACE where it is not allowed is an error. */
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"

static int val(int rank, long i) { return rank * 1000003 + (int)i * 3 + 1; }

static void run(int cnt, int nb) {
  int n = mt_size, r = mt_rank;
  MPI_Comm w = MPI_COMM_WORLD;
  MPI_Request q;
#define DO(call, icall)                                              \
  do {                                                               \
    if (nb) {                                                        \
      CHECK(icall == MPI_SUCCESS, #icall);                           \
      CHECK(MPI_Wait(&q, MPI_STATUS_IGNORE) == MPI_SUCCESS, "wait"); \
    } else {                                                         \
      CHECK(call == MPI_SUCCESS, #call);                             \
    }                                                                \
  } while (0)
  long big = (long)cnt * n;
  int* a = malloc(sizeof(int) * (big + 1));
  int* b = malloc(sizeof(int) * (big + 1));
  int *counts = malloc(sizeof(int) * n), *displs = malloc(sizeof(int) * n);
  for (int p = 0; p < n; ++p) {
    counts[p] = cnt;
    displs[p] = (n - 1 - p) * cnt; /* reversed layout */
  }
  for (int root = 0; root < n; ++root) {
    /* Reduce at the root in place. */
    for (int i = 0; i < cnt; ++i) a[i] = val(r, i);
    DO(MPI_Reduce(r == root ? MPI_IN_PLACE : a, a, cnt, MPI_INT, MPI_SUM, root, w),
       MPI_Ireduce(r == root ? MPI_IN_PLACE : a, a, cnt, MPI_INT, MPI_SUM, root, w, &q));
    if (r == root)
      for (int i = 0; i < cnt; ++i)
        CHECK(a[i] == n * (n - 1) / 2 * 1000003 + n * (i * 3 + 1), "reduce in place root %d [%d]", root, i);
    /* Gather at the root: its block already in place. */
    for (long i = 0; i < big; ++i) a[i] = -1;
    for (int i = 0; i < cnt; ++i) a[(long)(r == root ? root : 0) * cnt + i] = val(r, i);
    DO(MPI_Gather(r == root ? MPI_IN_PLACE : a, cnt, MPI_INT, a, cnt, MPI_INT, root, w),
       MPI_Igather(r == root ? MPI_IN_PLACE : a, cnt, MPI_INT, a, cnt, MPI_INT, root, w, &q));
    if (r == root)
      for (int p = 0; p < n; ++p)
        for (int i = 0; i < cnt; ++i) CHECK(a[(long)p * cnt + i] == val(p, i), "gather in place %d [%d]", p, i);
    /* Gatherv at the root. */
    for (long i = 0; i < big; ++i) a[i] = -1;
    for (int i = 0; i < cnt; ++i) a[(r == root ? displs[r] : 0) + i] = val(r, i);
    DO(MPI_Gatherv(r == root ? MPI_IN_PLACE : a, cnt, MPI_INT, a, counts, displs, MPI_INT, root, w),
       MPI_Igatherv(r == root ? MPI_IN_PLACE : a, cnt, MPI_INT, a, counts, displs, MPI_INT, root, w, &q));
    if (r == root)
      for (int p = 0; p < n; ++p)
        for (int i = 0; i < cnt; ++i) CHECK(a[displs[p] + i] == val(p, i), "gatherv in place %d [%d]", p, i);
    /* Scatter at the root: its block stays in the send buffer. */
    for (int p = 0; p < n; ++p)
      for (int i = 0; i < cnt; ++i) a[(long)p * cnt + i] = val(p, i);
    for (int i = 0; i < cnt; ++i) b[i] = -1;
    DO(MPI_Scatter(a, cnt, MPI_INT, r == root ? MPI_IN_PLACE : b, cnt, MPI_INT, root, w),
       MPI_Iscatter(a, cnt, MPI_INT, r == root ? MPI_IN_PLACE : b, cnt, MPI_INT, root, w, &q));
    if (r != root)
      for (int i = 0; i < cnt; ++i) CHECK(b[i] == val(r, i), "scatter in place [%d]", i);
    else
      for (int i = 0; i < cnt; ++i) CHECK(a[(long)root * cnt + i] == val(root, i) && b[i] == -1, "root's block moved");
    for (int p = 0; p < n; ++p)
      for (int i = 0; i < cnt; ++i) a[displs[p] + i] = val(p, i);
    DO(MPI_Scatterv(a, counts, displs, MPI_INT, r == root ? MPI_IN_PLACE : b, cnt, MPI_INT, root, w),
       MPI_Iscatterv(a, counts, displs, MPI_INT, r == root ? MPI_IN_PLACE : b, cnt, MPI_INT, root, w, &q));
    if (r != root)
      for (int i = 0; i < cnt; ++i) CHECK(b[i] == val(r, i), "scatterv in place [%d]", i);
  }
  /* Allreduce. */
  for (int i = 0; i < cnt; ++i) a[i] = val(r, i);
  DO(MPI_Allreduce(MPI_IN_PLACE, a, cnt, MPI_INT, MPI_MAX, w),
     MPI_Iallreduce(MPI_IN_PLACE, a, cnt, MPI_INT, MPI_MAX, w, &q));
  for (int i = 0; i < cnt; ++i) CHECK(a[i] == val(n - 1, i), "allreduce in place [%d]", i);
  /* Allgather / Allgatherv. */
  for (long i = 0; i < big; ++i) a[i] = -1;
  for (int i = 0; i < cnt; ++i) a[(long)r * cnt + i] = val(r, i);
  DO(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, a, cnt, MPI_INT, w),
     MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, a, cnt, MPI_INT, w, &q));
  for (int p = 0; p < n; ++p)
    for (int i = 0; i < cnt; ++i) CHECK(a[(long)p * cnt + i] == val(p, i), "allgather in place %d [%d]", p, i);
  for (long i = 0; i < big; ++i) a[i] = -1;
  for (int i = 0; i < cnt; ++i) a[displs[r] + i] = val(r, i);
  DO(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, a, counts, displs, MPI_INT, w),
     MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, a, counts, displs, MPI_INT, w, &q));
  for (int p = 0; p < n; ++p)
    for (int i = 0; i < cnt; ++i) CHECK(a[displs[p] + i] == val(p, i), "allgatherv in place %d [%d]", p, i);
  /* Alltoall / Alltoallv / Alltoallw: send data taken from recvbuf. */
  for (int p = 0; p < n; ++p)
    for (int i = 0; i < cnt; ++i) a[(long)p * cnt + i] = val(r, p * 7 + i);
  DO(MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, a, cnt, MPI_INT, w),
     MPI_Ialltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, a, cnt, MPI_INT, w, &q));
  for (int p = 0; p < n; ++p)
    for (int i = 0; i < cnt; ++i) CHECK(a[(long)p * cnt + i] == val(p, r * 7 + i), "alltoall in place %d [%d]", p, i);
  for (int p = 0; p < n; ++p)
    for (int i = 0; i < cnt; ++i) a[displs[p] + i] = val(r, p * 7 + i);
  DO(MPI_Alltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, a, counts, displs, MPI_INT, w),
     MPI_Ialltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, a, counts, displs, MPI_INT, w, &q));
  for (int p = 0; p < n; ++p)
    for (int i = 0; i < cnt; ++i) CHECK(a[displs[p] + i] == val(p, r * 7 + i), "alltoallv in place %d [%d]", p, i);
  {
    int* bd = malloc(sizeof(int) * n);
    MPI_Datatype* ty = malloc(sizeof(MPI_Datatype) * n);
    for (int p = 0; p < n; ++p) {
      bd[p] = displs[p] * (int)sizeof(int);
      ty[p] = MPI_INT;
    }
    for (int p = 0; p < n; ++p)
      for (int i = 0; i < cnt; ++i) a[displs[p] + i] = val(r, p * 5 + i);
    DO(MPI_Alltoallw(MPI_IN_PLACE, NULL, NULL, NULL, a, counts, bd, ty, w),
       MPI_Ialltoallw(MPI_IN_PLACE, NULL, NULL, NULL, a, counts, bd, ty, w, &q));
    for (int p = 0; p < n; ++p)
      for (int i = 0; i < cnt; ++i) CHECK(a[displs[p] + i] == val(p, r * 5 + i), "alltoallw in place %d [%d]", p, i);
    free(bd);
    free(ty);
  }
  /* Reduce_scatter(_block): the whole vector in recvbuf, result at its start. */
  for (long i = 0; i < big; ++i) a[i] = val(r, i);
  DO(MPI_Reduce_scatter(MPI_IN_PLACE, a, counts, MPI_INT, MPI_SUM, w),
     MPI_Ireduce_scatter(MPI_IN_PLACE, a, counts, MPI_INT, MPI_SUM, w, &q));
  for (int i = 0; i < cnt; ++i)
    CHECK(a[i] == n * (n - 1) / 2 * 1000003 + n * ((r * cnt + i) * 3 + 1), "reduce_scatter in place [%d]", i);
  for (long i = 0; i < big; ++i) a[i] = val(r, i);
  DO(MPI_Reduce_scatter_block(MPI_IN_PLACE, a, cnt, MPI_INT, MPI_MIN, w),
     MPI_Ireduce_scatter_block(MPI_IN_PLACE, a, cnt, MPI_INT, MPI_MIN, w, &q));
  for (int i = 0; i < cnt; ++i) CHECK(a[i] == val(0, (long)r * cnt + i), "reduce_scatter_block in place [%d]", i);
  /* Scan / Exscan. */
  for (int i = 0; i < cnt; ++i) a[i] = val(r, i);
  DO(MPI_Scan(MPI_IN_PLACE, a, cnt, MPI_INT, MPI_MAX, w), MPI_Iscan(MPI_IN_PLACE, a, cnt, MPI_INT, MPI_MAX, w, &q));
  for (int i = 0; i < cnt; ++i) CHECK(a[i] == val(r, i), "scan in place [%d]", i);
  for (int i = 0; i < cnt; ++i) a[i] = val(r, i);
  DO(MPI_Exscan(MPI_IN_PLACE, a, cnt, MPI_INT, MPI_SUM, w),
     MPI_Iexscan(MPI_IN_PLACE, a, cnt, MPI_INT, MPI_SUM, w, &q));
  if (r > 0)
    for (int i = 0; i < cnt; ++i)
      CHECK(a[i] == r * (r - 1) / 2 * 1000003 + r * (i * 3 + 1), "exscan in place [%d] = %d", i, a[i]);
  free(a);
  free(b);
  free(counts);
  free(displs);
}

int main(int argc, char** argv) {
  mt_start("coll_inplace", &argc, &argv);
  const int counts[] = {1, 50, 20000};
  for (int k = 0; k < 3; ++k)
    for (int nb = 0; nb < 2; ++nb) run(counts[k], nb);
  /* MPI_IN_PLACE where the standard does not allow it. */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int x = 1, y[64], cls;
  if (mt_size > 1) {
    /* Non-root ranks may not pass MPI_IN_PLACE to MPI_Gather. Every rank
     * names a root other than itself, so every call fails locally and
     * nothing is communicated. */
    int err = MPI_Gather(MPI_IN_PLACE, 1, MPI_INT, y, 1, MPI_INT, mt_rank == 0 ? 1 : 0, MPI_COMM_WORLD);
    MPI_Error_class(err, &cls);
    CHECK(cls == MPI_ERR_BUFFER, "MPI_IN_PLACE at a non-root gave %d", err);
    MPI_Barrier(MPI_COMM_WORLD);
  }
  (void)x;
  return mt_pass();
}
