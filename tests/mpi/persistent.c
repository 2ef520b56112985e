/* Persistent requests: Send_init/Recv_init (+ Ssend_init, Bsend_init,
 * Rsend_init), Start, Startall, restarted many times with new contents. */
#include "mpitest.h"

int main(int argc, char** argv) {
  mt_start("persistent", &argc, &argv);
  int next = (mt_rank + 1) % mt_size, prev = (mt_rank + mt_size - 1) % mt_size;
  static int out[4][5000], in[4][5000];
  int bsize = 5000 * sizeof(int) + MPI_BSEND_OVERHEAD;
  void* bbuf = malloc(bsize);
  MPI_Buffer_attach(bbuf, bsize);
  MPI_Request req[8];
  MPI_Send_init(out[0], 5000, MPI_INT, next, 0, MPI_COMM_WORLD, &req[0]);
  MPI_Ssend_init(out[1], 10, MPI_INT, next, 1, MPI_COMM_WORLD, &req[1]);
  MPI_Bsend_init(out[2], 5000, MPI_INT, next, 2, MPI_COMM_WORLD, &req[2]);
  MPI_Rsend_init(out[3], 3, MPI_INT, next, 3, MPI_COMM_WORLD, &req[3]);
  for (int k = 0; k < 4; ++k) MPI_Recv_init(in[k], 5000, MPI_INT, prev, k, MPI_COMM_WORLD, &req[4 + k]);
  for (int it = 0; it < 25; ++it) {
    for (int k = 0; k < 4; ++k)
      for (int i = 0; i < 5000; ++i) out[k][i] = mt_rank * 100000 + it * 1000 + k * 10 + i % 10;
    MPI_Startall(4, &req[4]);
    /* Everyone's receives are posted before anyone's ready send. */
    MPI_Sendrecv(NULL, 0, MPI_INT, next, 50, NULL, 0, MPI_INT, prev, 50, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Sendrecv(NULL, 0, MPI_INT, prev, 51, NULL, 0, MPI_INT, next, 51, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Start(&req[0]);
    MPI_Start(&req[1]);
    MPI_Start(&req[2]);
    MPI_Start(&req[3]);
    MPI_Status st[8];
    MPI_Waitall(8, req, st);
    const int counts[4] = {5000, 10, 5000, 3};
    for (int k = 0; k < 4; ++k) {
      CHECK(req[k] != MPI_REQUEST_NULL && req[4 + k] != MPI_REQUEST_NULL, "persistent requests stay allocated");
      int count = -1;
      MPI_Get_count(&st[4 + k], MPI_INT, &count);
      CHECK(count == counts[k], "iteration %d kind %d: count %d", it, k, count);
      for (int i = 0; i < counts[k]; ++i)
        CHECK(in[k][i] == prev * 100000 + it * 1000 + k * 10 + i % 10, "iteration %d kind %d element %d", it, k, i);
    }
  }
  /* An inactive persistent request completes at once with an empty status. */
  MPI_Status st;
  MPI_Wait(&req[0], &st);
  CHECK(req[0] != MPI_REQUEST_NULL && st.MPI_TAG == MPI_ANY_TAG, "Wait on an inactive request");
  for (int k = 0; k < 8; ++k) {
    MPI_Request_free(&req[k]);
    CHECK(req[k] == MPI_REQUEST_NULL, "Request_free resets the handle");
  }
  void* p;
  int sz;
  MPI_Buffer_detach(&p, &sz);
  free(bbuf);
  return mt_pass();
}
