/* MPI_Intercomm_create from the two halves of world (leaders: local 0;
 * remote: the other half's first world rank); p2p across it (remote
 * ranks, MPI_SOURCE is the remote rank); any-source receives match only
 * the remote group; sizes, ranks, test_inter. */
#include "mpitest.h"

int main(int argc, char** argv) {
  mt_start("inter_create", &argc, &argv);
  const int n = mt_size, me = mt_rank;
  CHECK(n >= 2, "needs 2 processes or more");
  const int lowsize = n / 2, low = me < lowsize;
  MPI_Comm local, inter;
  MPI_Comm_split(MPI_COMM_WORLD, low, me, &local);
  MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, low ? lowsize : 0, 77, &inter);
  int flag = -1, lsize, rsize, rank;
  MPI_Comm_test_inter(inter, &flag);
  CHECK(flag == 1, "test_inter");
  MPI_Comm_test_inter(local, &flag);
  CHECK(flag == 0, "test_inter on an intracommunicator");
  MPI_Comm_size(inter, &lsize);
  MPI_Comm_remote_size(inter, &rsize);
  MPI_Comm_rank(inter, &rank);
  const int mylocal = low ? lowsize : n - lowsize, myremote = n - mylocal;
  CHECK(lsize == mylocal && rsize == myremote, "size %d remote %d", lsize, rsize);
  CHECK(rank == (low ? me : me - lowsize), "rank %d", rank);
  const int rbase = low ? lowsize : 0; /* world rank of remote rank 0 */

  /* Distractions with the same tag: each rank sends to itself and to its
   * world neighbour on world and on local. None may match below. */
  int dw = -1, dl = -1, dself = -1, sw = 1000 + me, sl = 2000 + me, ss = 3000 + me;
  MPI_Request drq[6];
  MPI_Isend(&sw, 1, MPI_INT, (me + 1) % n, 4, MPI_COMM_WORLD, &drq[0]);
  MPI_Isend(&sl, 1, MPI_INT, (rank + 1) % lsize, 4, local, &drq[1]);
  MPI_Isend(&ss, 1, MPI_INT, 0, 4, MPI_COMM_SELF, &drq[2]);

  /* Every local rank r sends to remote rank r % rsize; receive with any
   * source as many as will come: #{q < rsize : q % lsize == rank}. */
  int v = me, expected = 0;
  for (int q = 0; q < rsize; ++q) expected += q % lsize == rank;
  MPI_Request srq;
  MPI_Isend(&v, 1, MPI_INT, rank % rsize, 4, inter, &srq);
  for (int i = 0; i < expected; ++i) {
    int got = -1;
    MPI_Status st;
    /* Tag 4, not MPI_ANY_TAG: the tag-6 exchange below may be in flight. */
    MPI_Recv(&got, 1, MPI_INT, MPI_ANY_SOURCE, 4, inter, &st);
    CHECK(st.MPI_SOURCE >= 0 && st.MPI_SOURCE < rsize && st.MPI_SOURCE % lsize == rank, "source %d", st.MPI_SOURCE);
    CHECK(got == rbase + st.MPI_SOURCE, "got world %d from remote %d", got, st.MPI_SOURCE);
    CHECK(st.MPI_TAG == 4, "tag %d", st.MPI_TAG);
  }
  MPI_Wait(&srq, MPI_STATUS_IGNORE);
  MPI_Irecv(&dw, 1, MPI_INT, MPI_ANY_SOURCE, 4, MPI_COMM_WORLD, &drq[3]);
  MPI_Irecv(&dl, 1, MPI_INT, MPI_ANY_SOURCE, 4, local, &drq[4]);
  MPI_Irecv(&dself, 1, MPI_INT, MPI_ANY_SOURCE, 4, MPI_COMM_SELF, &drq[5]);
  MPI_Waitall(6, drq, MPI_STATUSES_IGNORE);
  CHECK(dw == 1000 + (me + n - 1) % n, "world distraction %d", dw);
  CHECK(dself == 3000 + me, "self distraction %d", dself);
  CHECK(dl >= 2000, "local distraction %d", dl);

  /* Sendrecv with the same-numbered remote rank, and a larger message. */
  if (rank < rsize) {
    double out[1000], in[1000];
    for (int i = 0; i < 1000; ++i) out[i] = me * 1000.0 + i;
    MPI_Status st;
    MPI_Sendrecv(out, 1000, MPI_DOUBLE, rank, 6, in, 1000, MPI_DOUBLE, rank, 6, inter, &st);
    CHECK(st.MPI_SOURCE == rank, "sendrecv source %d", st.MPI_SOURCE);
    for (int i = 0; i < 1000; ++i) CHECK(in[i] == (rbase + rank) * 1000.0 + i, "sendrecv data at %d", i);
  }
  /* MPI_PROC_NULL works on intercommunicators too. */
  MPI_Send(&v, 1, MPI_INT, MPI_PROC_NULL, 0, inter);

  /* A second intercommunicator from the same halves (other tag, other
   * leaders) is separate from the first. */
  MPI_Comm inter2;
  MPI_Intercomm_create(local, lsize - 1, MPI_COMM_WORLD, low ? n - 1 : lowsize - 1, 78, &inter2);
  int res;
  MPI_Comm_compare(inter, inter2, &res);
  CHECK(res == MPI_CONGRUENT, "two intercomms of the same groups: %d", res);
  int a = -1, b = -1;
  MPI_Request rq[4];
  if (rank < rsize) {
    int x1 = 1, x2 = 2;
    MPI_Irecv(&a, 1, MPI_INT, rank, 0, inter2, &rq[0]);
    MPI_Irecv(&b, 1, MPI_INT, rank, 0, inter, &rq[1]);
    MPI_Isend(&x2, 1, MPI_INT, rank, 0, inter2, &rq[2]);
    MPI_Isend(&x1, 1, MPI_INT, rank, 0, inter, &rq[3]);
    MPI_Waitall(4, rq, MPI_STATUSES_IGNORE);
    CHECK(a == 2 && b == 1, "isolation between intercomms: %d %d", a, b);
  }
  MPI_Comm_free(&inter2);
  MPI_Comm_free(&inter);
  MPI_Comm_free(&local);
  return mt_pass();
}
