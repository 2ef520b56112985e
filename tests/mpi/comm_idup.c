/* MPI_Comm_idup: several outstanding (of world and of a split), completed
 * together with Waitall; then traffic with one tag on all of them stays
 * on its own communicator. Attributes are copied as by MPI_Comm_dup. */
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
