/* Cancelling receives: a pending one is cancelled, a matched one is not;
 * the tag still works afterwards. Request_free of an active request. */
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
  return mt_pass();
}
