/* MPI_Comm_idup: several outstanding (of world and of a split), completed
 * together with Waitall; then traffic with one tag on all of them stays
 * on its own communicator. Attributes are copied as by MPI_Comm_dup.
 * It does not block: idups of two overlapping communicators started in
 * opposite orders by even and odd ranks; a blocking dup and a blocking
 * receive while an idup is pending (it completes from engine progress). */
#include "mpitest.h"

int main(int argc, char** argv) {
  mt_start("comm_idup", &argc, &argv);
  const int n = mt_size, me = mt_rank;
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, me % 2, me, &half);
  int kv;
  MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &kv, NULL);
  static int value = 42;
  MPI_Comm_set_attr(MPI_COMM_WORLD, kv, &value);
  enum { K = 4 };
  MPI_Comm d[K + 1];
  MPI_Request rq[K + 1];
  for (int i = 0; i < K; ++i) MPI_Comm_idup(MPI_COMM_WORLD, &d[i], &rq[i]);
  MPI_Comm_idup(half, &d[K], &rq[K]);
  MPI_Waitall(K + 1, rq, MPI_STATUSES_IGNORE);
  for (int i = 0; i <= K; ++i) CHECK(rq[i] == MPI_REQUEST_NULL, "request %d released", i);
  for (int i = 0; i < K; ++i) {
    int res, *v = NULL, flag = 0;
    MPI_Comm_compare(d[i], MPI_COMM_WORLD, &res);
    CHECK(res == MPI_CONGRUENT, "idup %d vs world %d", i, res);
    MPI_Comm_get_attr(d[i], kv, &v, &flag);
    CHECK(flag && v == &value, "attribute copied to idup %d", i);
  }
  int res;
  MPI_Comm_compare(d[K], half, &res);
  CHECK(res == MPI_CONGRUENT, "idup of half %d", res);
  /* One message per communicator, same tag, received with any source in
   * the opposite order of sending. */
  int next = (me + 1) % n, prev = (me + n - 1) % n;
  int out[K], in[K];
  MPI_Request srq[K], rrq[K];
  for (int i = K - 1; i >= 0; --i) MPI_Irecv(&in[i], 1, MPI_INT, MPI_ANY_SOURCE, 5, d[i], &rrq[i]);
  for (int i = 0; i < K; ++i) {
    out[i] = 1000 * i + me;
    MPI_Isend(&out[i], 1, MPI_INT, next, 5, d[i], &srq[i]);
  }
  MPI_Waitall(K, srq, MPI_STATUSES_IGNORE);
  MPI_Waitall(K, rrq, MPI_STATUSES_IGNORE);
  for (int i = 0; i < K; ++i) CHECK(in[i] == 1000 * i + prev, "idup %d got %d", i, in[i]);
  /* Traffic on the half's duplicate. */
  int hr, hs, got = -1;
  MPI_Comm_rank(d[K], &hr);
  MPI_Comm_size(d[K], &hs);
  MPI_Sendrecv(&me, 1, MPI_INT, (hr + 1) % hs, 0, &got, 1, MPI_INT, (hr + hs - 1) % hs, 0, d[K], MPI_STATUS_IGNORE);
  CHECK(got == me % 2 + 2 * ((hr + hs - 1) % hs), "half dup neighbour %d", got);
  /* Opposite orders on two overlapping communicators (legal for
   * non-blocking collectives; an eager agreement would deadlock). */
  MPI_Comm a, b, na, nb;
  MPI_Comm_dup(MPI_COMM_WORLD, &a);
  MPI_Comm_dup(MPI_COMM_WORLD, &b);
  MPI_Request two[2];
  if (me % 2 == 0) {
    MPI_Comm_idup(a, &na, &two[0]);
    MPI_Comm_idup(b, &nb, &two[1]);
  } else {
    MPI_Comm_idup(b, &nb, &two[1]);
    MPI_Comm_idup(a, &na, &two[0]);
  }
  /* A blocking dup of a while a's idup is pending. */
  MPI_Comm ba;
  MPI_Comm_dup(a, &ba);
  MPI_Waitall(2, two, MPI_STATUSES_IGNORE);
  MPI_Comm trio[3] = {na, nb, ba};
  for (int i = 0; i < 3; ++i) {
    int v = 10 * i + me, w = -1;
    MPI_Sendrecv(&v, 1, MPI_INT, next, 7, &w, 1, MPI_INT, MPI_ANY_SOURCE, 7, trio[i], MPI_STATUS_IGNORE);
    CHECK(w == 10 * i + prev, "opposite orders: comm %d got %d", i, w);
  }
  for (int i = 0; i < 3; ++i) MPI_Comm_free(&trio[i]);
  MPI_Comm_free(&a);
  MPI_Comm_free(&b);
  /* Rank 0 waits in a blocking receive from rank 1, which first waits for
   * its idup: rank 0's part of the agreement must progress in MPI_Recv. */
  if (n >= 2 && me < 2) {
    MPI_Comm pair, np;
    MPI_Comm_split(MPI_COMM_WORLD, 0, 0, &pair);
    MPI_Request pr;
    MPI_Comm_idup(pair, &np, &pr);
    int tok = 0;
    if (me == 0) {
      MPI_Recv(&tok, 1, MPI_INT, 1, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Wait(&pr, MPI_STATUS_IGNORE);
    } else {
      MPI_Wait(&pr, MPI_STATUS_IGNORE);
      tok = 1;
      MPI_Send(&tok, 1, MPI_INT, 0, 8, MPI_COMM_WORLD);
    }
    int ps;
    MPI_Comm_size(np, &ps);
    CHECK(ps == 2 && (me == 1 || tok == 1), "pair idup size %d", ps);
    MPI_Comm_free(&np);
    MPI_Comm_free(&pair);
  } else if (n >= 2) {
    MPI_Comm pair;
    MPI_Comm_split(MPI_COMM_WORLD, MPI_UNDEFINED, 0, &pair);
  }
  /* Test (not only Wait) completes an idup too. */
  MPI_Comm t;
  MPI_Request r1;
  int flag = 0;
  MPI_Comm_idup(MPI_COMM_WORLD, &t, &r1);
  while (!flag) MPI_Test(&r1, &flag, MPI_STATUS_IGNORE);
  MPI_Comm_free(&t);
  for (int i = 0; i <= K; ++i) MPI_Comm_free(&d[i]);
  MPI_Comm_delete_attr(MPI_COMM_WORLD, kv);
  MPI_Comm_free_keyval(&kv);
  MPI_Comm_free(&half);
  return mt_pass();
}
