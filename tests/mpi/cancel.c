/* Cancelling receives: a pending one is cancelled, a matched one is not;
 * the tag still works afterwards. Request_free of an active request.
 * Cancelling sends: an unmatched synchronous or large send is withdrawn
 * (Wait returns although nobody receives it, and the receiver never gets
 * it), an eager one completes normally, a matched one is not cancelled. */
#include "mpitest.h"

int main(int argc, char** argv) {
  mt_start("cancel", &argc, &argv);
  int v = 0, flag = 0;
  MPI_Request r;
  MPI_Status st;
  MPI_Irecv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 9, MPI_COMM_WORLD, &r);
  MPI_Cancel(&r);
  MPI_Wait(&r, &st);
  MPI_Test_cancelled(&st, &flag);
  CHECK(flag, "the pending receive was not cancelled");
  CHECK(r == MPI_REQUEST_NULL, "Wait frees a cancelled request");
  /* Persistent receive: cancel, then start again and use it. */
  MPI_Request pr;
  MPI_Recv_init(&v, 1, MPI_INT, mt_rank, 10, MPI_COMM_WORLD, &pr);
  MPI_Start(&pr);
  MPI_Cancel(&pr);
  MPI_Wait(&pr, &st);
  MPI_Test_cancelled(&st, &flag);
  CHECK(flag, "persistent receive not cancelled");
  MPI_Start(&pr);
  int x = 31;
  MPI_Send(&x, 1, MPI_INT, mt_rank, 10, MPI_COMM_WORLD);
  MPI_Wait(&pr, &st);
  MPI_Test_cancelled(&st, &flag);
  CHECK(!flag && v == 31, "restarted receive: cancelled %d value %d", flag, v);
  MPI_Request_free(&pr);
  /* A matched receive cannot be cancelled. */
  x = 55;
  MPI_Send(&x, 1, MPI_INT, mt_rank, 11, MPI_COMM_WORLD);
  MPI_Irecv(&v, 1, MPI_INT, mt_rank, 11, MPI_COMM_WORLD, &r);
  flag = 0;
  while (!flag) MPI_Request_get_status(r, &flag, MPI_STATUS_IGNORE);
  MPI_Cancel(&r);
  MPI_Wait(&r, &st);
  MPI_Test_cancelled(&st, &flag);
  CHECK(!flag && v == 55, "matched receive: cancelled %d value %d", flag, v);
  /* Request_free of an active send: it still completes and is delivered. */
  if (mt_size >= 2) {
    int peer = mt_rank ^ 1;
    if (peer < mt_size) {
      int y = 100 + mt_rank, z = 0;
      MPI_Isend(&y, 1, MPI_INT, peer, 12, MPI_COMM_WORLD, &r);
      MPI_Request_free(&r);
      CHECK(r == MPI_REQUEST_NULL, "Request_free");
      MPI_Recv(&z, 1, MPI_INT, peer, 12, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      CHECK(z == 100 + peer, "freed send delivered %d", z);
      MPI_Sendrecv(NULL, 0, MPI_INT, peer, 13, NULL, 0, MPI_INT, peer, 13, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
  }
  /* Sends to self: nobody receives them, MPI_Wait must still return. */
  {
    static char big[1 << 20];
    int s1 = 1, flag1 = -1, flag2 = -1;
    MPI_Request q[2];
    MPI_Issend(&s1, 1, MPI_INT, mt_rank, 20, MPI_COMM_WORLD, &q[0]);
    MPI_Isend(big, (int)sizeof big, MPI_CHAR, mt_rank, 20, MPI_COMM_WORLD, &q[1]);
    MPI_Cancel(&q[0]);
    MPI_Cancel(&q[1]);
    MPI_Wait(&q[0], &st);
    MPI_Test_cancelled(&st, &flag1);
    MPI_Wait(&q[1], &st);
    MPI_Test_cancelled(&st, &flag2);
    CHECK(flag1 == 1 && flag2 == 1, "unmatched sends cancelled: ssend %d, 1 MiB send %d", flag1, flag2);
    /* Nothing is left to receive with that tag; a new message comes through. */
    int present = 1;
    MPI_Iprobe(mt_rank, 20, MPI_COMM_WORLD, &present, MPI_STATUS_IGNORE);
    CHECK(!present, "a cancelled send can still be probed");
    int y2 = 77, z2 = 0;
    MPI_Sendrecv(&y2, 1, MPI_INT, mt_rank, 20, &z2, 1, MPI_INT, mt_rank, 20, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(z2 == 77, "the next message on the tag: %d", z2);
    /* An eager send completes by itself: the cancel does not take effect. */
    int e = 5, f = 0;
    MPI_Isend(&e, 1, MPI_INT, mt_rank, 21, MPI_COMM_WORLD, &r);
    MPI_Cancel(&r);
    MPI_Wait(&r, &st);
    MPI_Test_cancelled(&st, &flag1);
    if (!flag1) {
      MPI_Recv(&f, 1, MPI_INT, mt_rank, 21, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      CHECK(f == 5, "eager send delivered %d", f);
    }
  }
  /* Across processes: rank 0 cancels a synchronous send rank 1 never
   * receives, then one that rank 1 already matched. */
  if (mt_size >= 2 && mt_rank < 2) {
    int t = 40, w = 0, flag3 = -1;
    if (mt_rank == 0) {
      MPI_Issend(&t, 1, MPI_INT, 1, 30, MPI_COMM_WORLD, &r);
      MPI_Cancel(&r);
      MPI_Wait(&r, &st);
      MPI_Test_cancelled(&st, &flag3);
      CHECK(flag3 == 1, "unmatched Issend to rank 1 cancelled (%d)", flag3);
      MPI_Send(&t, 1, MPI_INT, 1, 31, MPI_COMM_WORLD); /* "go" */
      t = 41;
      MPI_Issend(&t, 1, MPI_INT, 1, 32, MPI_COMM_WORLD, &r);
      MPI_Recv(&w, 1, MPI_INT, 1, 33, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* rank 1 has received it */
      MPI_Cancel(&r);
      MPI_Wait(&r, &st);
      MPI_Test_cancelled(&st, &flag3);
      CHECK(flag3 == 0, "a matched Issend was cancelled");
    } else {
      MPI_Recv(&w, 1, MPI_INT, 0, 31, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      int present = 1;
      MPI_Iprobe(0, 30, MPI_COMM_WORLD, &present, MPI_STATUS_IGNORE);
      CHECK(!present, "the cancelled Issend reached rank 1");
      MPI_Recv(&w, 1, MPI_INT, 0, 32, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      CHECK(w == 41, "matched Issend delivered %d", w);
      MPI_Send(&w, 1, MPI_INT, 0, 33, MPI_COMM_WORLD);
    }
  }
  return mt_pass();
}
