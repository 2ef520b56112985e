/* Buffered sends: Buffer_attach, many Bsends reusing the space, a message
 * too large for the buffer (MPI_ERR_BUFFER with ERRORS_RETURN), detach. */
#include "mpitest.h"

int main(int argc, char** argv) {
  mt_start("bsend", &argc, &argv);
  int next = (mt_rank + 1) % mt_size, prev = (mt_rank + mt_size - 1) % mt_size;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int v = 1;
  int err = MPI_Bsend(&v, 1, MPI_INT, next, 0, MPI_COMM_WORLD);
  CHECK(err == MPI_ERR_BUFFER, "Bsend without a buffer: %d", err);
  int size = 4 * (1000 * (int)sizeof(int) + MPI_BSEND_OVERHEAD);
  char* buf = malloc(size);
  MPI_Buffer_attach(buf, size);
  err = MPI_Buffer_attach(buf, size);
  CHECK(err == MPI_ERR_BUFFER, "a second attach: %d", err);
  static int out[1000], in[1000];
  /* 4 fit at once; the receiver takes them only after all are sent. */
  for (int round = 0; round < 20; ++round) {
    for (int m = 0; m < 4; ++m) {
      for (int i = 0; i < 1000; ++i) out[i] = mt_rank * 100000 + round * 100 + m * 10 + i % 10;
      err = MPI_Bsend(out, 1000, MPI_INT, next, m, MPI_COMM_WORLD);
      CHECK(err == MPI_SUCCESS, "round %d Bsend %d: %d", round, m, err);
      memset(out, 0, sizeof out); /* the copy is what is sent */
    }
    for (int m = 3; m >= 0; --m) {
      MPI_Recv(in, 1000, MPI_INT, prev, m, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      for (int i = 0; i < 1000; ++i)
        CHECK(in[i] == prev * 100000 + round * 100 + m * 10 + i % 10, "round %d message %d element %d", round, m, i);
    }
    /* Everyone received this round, so the buffer is reclaimable. */
    MPI_Sendrecv(NULL, 0, MPI_INT, next, 9, NULL, 0, MPI_INT, prev, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  static int huge[10000];
  err = MPI_Bsend(huge, 10000, MPI_INT, next, 5, MPI_COMM_WORLD);
  CHECK(err == MPI_ERR_BUFFER, "message larger than the buffer: %d", err);
  char* p = NULL;
  int s = 0;
  MPI_Buffer_detach(&p, &s);
  CHECK(p == buf && s == size, "detach");
  free(buf);
  return mt_pass();
}
