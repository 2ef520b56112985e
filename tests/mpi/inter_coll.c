/* Collectives on an intercommunicator made of the two halves of world
 * (MPI-3.1 5.2.2): Barrier, Bcast and Reduce with MPI_ROOT/MPI_PROC_NULL
 * roots in both directions, Allreduce (each group gets the other's
 * reduction), Gather(v)/Scatter(v) at a root, Allgather(v), Alltoall(v),
 * Reduce_scatter_block, non-blocking forms, a vector datatype, and the
 * errors for Scan and MPI_IN_PLACE. */
#include "mpitest.h"

#define N 3

int main(int argc, char** argv) {
  mt_start("inter_coll", &argc, &argv);
  const int n = mt_size, me = mt_rank;
  CHECK(n >= 2, "needs 2 processes or more");
  const int lowsize = n / 2, low = me < lowsize;
  MPI_Comm local, ic;
  MPI_Comm_split(MPI_COMM_WORLD, low, me, &local);
  MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, low ? lowsize : 0, 5, &ic);
  int rank, lsize, rsize;
  MPI_Comm_rank(ic, &rank);
  MPI_Comm_size(ic, &lsize);
  MPI_Comm_remote_size(ic, &rsize);
  const int group = low ? 0 : 1; /* group 0: world ranks 0..lowsize-1 */
  const int rbase = low ? lowsize : 0;

  MPI_Barrier(ic);

  /* Bcast: the root is local rank 1 (or 0) of each group in turn. */
  for (int g = 0; g < 2; ++g) {
    const int root = (g == 0 ? lowsize : n - lowsize) > 1 ? 1 : 0;
    int buf[N] = {-1, -1, -1};
    int r;
    if (group == g) {
      r = rank == root ? MPI_ROOT : MPI_PROC_NULL;
      if (rank == root) for (int i = 0; i < N; ++i) buf[i] = 100 * g + i;
    } else {
      r = root;
    }
    MPI_Bcast(buf, N, MPI_INT, r, ic);
    if (group != g)
      for (int i = 0; i < N; ++i) CHECK(buf[i] == 100 * g + i, "bcast from group %d: buf[%d] = %d", g, i, buf[i]);
    else if (rank != root)
      CHECK(buf[0] == -1, "a non-root of the root group keeps its buffer");
  }

  /* Reduce: group g's root receives the sum of the other group's values. */
  for (int g = 0; g < 2; ++g) {
    int in[N], out[N] = {-7, -7, -7};
    for (int i = 0; i < N; ++i) in[i] = me + i;
    int r = group == g ? (rank == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
    MPI_Reduce(in, out, N, MPI_INT, MPI_SUM, r, ic);
    if (group == g && rank == 0) {
      for (int i = 0; i < N; ++i) {
        int want = 0;
        for (int q = 0; q < rsize; ++q) want += rbase + q + i;
        CHECK(out[i] == want, "reduce into group %d [%d] = %d want %d", g, i, out[i], want);
      }
    }
  }

  /* Allreduce: each process gets the max over the remote group. */
  {
    double in = 10.0 * me, out = -1;
    MPI_Allreduce(&in, &out, 1, MPI_DOUBLE, MPI_MAX, ic);
    CHECK(out == 10.0 * (rbase + rsize - 1), "allreduce max %g", out);
  }

  /* Gather at local rank 0 of group 0, scatter back from it. */
  {
    int mine[2] = {me, -me}, all[2 * 8];
    int r = group == 0 ? (rank == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
    MPI_Gather(mine, 2, MPI_INT, all, 2, MPI_INT, r, ic);
    if (group == 0 && rank == 0)
      for (int q = 0; q < rsize; ++q)
        CHECK(all[2 * q] == rbase + q && all[2 * q + 1] == -(rbase + q), "gather block %d", q);
    int back[2] = {0, 0};
    if (group == 0 && rank == 0)
      for (int q = 0; q < rsize; ++q) all[2 * q] *= 3, all[2 * q + 1] *= 3;
    MPI_Scatter(all, 2, MPI_INT, back, 2, MPI_INT, r, ic);
    if (group == 1) CHECK(back[0] == 3 * me && back[1] == -3 * me, "scatter got %d %d", back[0], back[1]);
  }

  /* Gatherv/Scatterv with remote rank q contributing q+1 ints. */
  {
    int mine[8], all[64], counts[8], displs[8], tot = 0;
    for (int i = 0; i < rank + 1; ++i) mine[i] = 1000 * me + i;
    for (int q = 0; q < rsize; ++q) counts[q] = q + 1, displs[q] = tot + q, tot += q + 2; /* gaps */
    int r = group == 1 ? (rank == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
    MPI_Gatherv(mine, rank + 1, MPI_INT, all, counts, displs, MPI_INT, r, ic);
    if (group == 1 && rank == 0)
      for (int q = 0; q < rsize; ++q)
        for (int i = 0; i <= q; ++i) CHECK(all[displs[q] + i] == 1000 * (rbase + q) + i, "gatherv %d.%d", q, i);
    int got[8] = {0};
    MPI_Scatterv(all, counts, displs, MPI_INT, got, rank + 1, MPI_INT, r, ic);
    if (group == 0)
      for (int i = 0; i <= rank; ++i) CHECK(got[i] == 1000 * me + i, "scatterv %d = %d", i, got[i]);
  }

  /* Allgather / Allgatherv: everyone gets the remote group's values. */
  {
    int mine = 7 * me, all[8], counts[8], displs[8], allv[16];
    MPI_Allgather(&mine, 1, MPI_INT, all, 1, MPI_INT, ic);
    for (int q = 0; q < rsize; ++q) CHECK(all[q] == 7 * (rbase + q), "allgather %d", q);
    for (int q = 0; q < rsize; ++q) counts[q] = 1, displs[q] = 2 * q;
    MPI_Allgatherv(&mine, 1, MPI_INT, allv, counts, displs, MPI_INT, ic);
    for (int q = 0; q < rsize; ++q) CHECK(allv[2 * q] == 7 * (rbase + q), "allgatherv %d", q);
  }

  /* Alltoall: block q goes to remote rank q. */
  {
    int out[8], in[8];
    for (int q = 0; q < rsize; ++q) out[q] = 100 * me + q;
    MPI_Alltoall(out, 1, MPI_INT, in, 1, MPI_INT, ic);
    for (int q = 0; q < rsize; ++q) CHECK(in[q] == 100 * (rbase + q) + rank, "alltoall from %d: %d", q, in[q]);
    int sc[8], sd[8], rc[8], rd[8], o2[32], i2[32];
    for (int q = 0; q < rsize; ++q) {
      sc[q] = 2, sd[q] = 3 * q, rc[q] = 2, rd[q] = 3 * q;
      o2[3 * q] = me * 10 + q, o2[3 * q + 1] = -(me * 10 + q);
    }
    MPI_Alltoallv(o2, sc, sd, MPI_INT, i2, rc, rd, MPI_INT, ic);
    for (int q = 0; q < rsize; ++q)
      CHECK(i2[3 * q] == (rbase + q) * 10 + rank && i2[3 * q + 1] == -((rbase + q) * 10 + rank), "alltoallv %d", q);
  }

  /* Reduce_scatter_block (MPI-3.1 5.10.1): each group reduces vectors of
   * lsize * recvcount elements, the same length in both groups (recvcount
   * = rsize here), and the remote group's reduction is scattered over this
   * group in blocks of recvcount. */
  {
    int in[64], out[8];
    for (int e = 0; e < lsize * rsize; ++e) in[e] = me * 100 + e;
    for (int i = 0; i < 8; ++i) out[i] = -1;
    MPI_Reduce_scatter_block(in, out, rsize, MPI_INT, MPI_SUM, ic);
    for (int i = 0; i < rsize; ++i) {
      int want = 0;
      for (int q = 0; q < rsize; ++q) want += (rbase + q) * 100 + rank * rsize + i;
      CHECK(out[i] == want, "reduce_scatter_block element %d: %d want %d", i, out[i], want);
    }
    CHECK(out[rsize] == -1, "reduce_scatter_block wrote past its block");
  }

  /* Non-blocking: Ibarrier, Ibcast from group 1's rank 0, Iallreduce. */
  {
    MPI_Request rq[3];
    int b = group == 1 && rank == 0 ? 42 : 0;
    int r = group == 1 ? (rank == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
    long in = me, out = -1;
    MPI_Ibarrier(ic, &rq[0]);
    MPI_Ibcast(&b, 1, MPI_INT, r, ic, &rq[1]);
    MPI_Iallreduce(&in, &out, 1, MPI_LONG, MPI_SUM, ic, &rq[2]);
    MPI_Waitall(3, rq, MPI_STATUSES_IGNORE);
    if (group == 0) CHECK(b == 42, "ibcast %d", b);
    long want = 0;
    for (int q = 0; q < rsize; ++q) want += rbase + q;
    CHECK(out == want, "iallreduce %ld want %ld", out, want);
  }

  /* A non-contiguous datatype: every other int of 2*N. */
  {
    MPI_Datatype v;
    MPI_Type_vector(N, 1, 2, MPI_INT, &v);
    MPI_Type_commit(&v);
    int buf[2 * N];
    for (int i = 0; i < 2 * N; ++i) buf[i] = group == 0 ? i : -1;
    int r = group == 0 ? (rank == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
    MPI_Bcast(buf, 1, v, r, ic);
    if (group == 1)
      for (int i = 0; i < 2 * N; ++i) CHECK(buf[i] == (i % 2 == 0 ? i : -1), "vector bcast [%d] = %d", i, buf[i]);
    MPI_Type_free(&v);
  }

  /* Errors: Scan is not defined on intercommunicators, nor MPI_IN_PLACE. */
  MPI_Comm_set_errhandler(ic, MPI_ERRORS_RETURN);
  int x = 1, y;
  CHECK(MPI_Scan(&x, &y, 1, MPI_INT, MPI_SUM, ic) == MPI_ERR_COMM, "Scan on an intercommunicator");
  CHECK(MPI_Allreduce(MPI_IN_PLACE, &y, 1, MPI_INT, MPI_SUM, ic) == MPI_ERR_BUFFER, "MPI_IN_PLACE");
  CHECK(MPI_Bcast(&x, 1, MPI_INT, rsize + 3, ic) == MPI_ERR_ROOT, "bad root");

  MPI_Barrier(ic);
  MPI_Comm_free(&ic);
  MPI_Comm_free(&local);
  return mt_pass();
}
