/* Non-overtaking: with MPI_ANY_SOURCE and MPI_ANY_TAG, messages from one
 * sender on one communicator arrive in send order, whatever their tags and
 * sizes (eager and rendezvous mixed). */
#include "mpitest.h"

#define N 300

int main(int argc, char** argv) {
  mt_start("ordering", &argc, &argv);
  static int buf[20000];
  if (mt_rank != 0) {
    for (int i = 0; i < N; ++i) {
      int len = (i % 7 == 3) ? 20000 : 1 + i % 5; /* some rendezvous */
      buf[0] = i;
      for (int k = 1; k < len; ++k) buf[k] = i * 3 + k;
      MPI_Send(buf, len, MPI_INT, 0, (i * 37) % 11, MPI_COMM_WORLD);
    }
  } else {
    int next[64] = {0};
    for (int m = 0; m < N * (mt_size - 1); ++m) {
      MPI_Status st;
      MPI_Recv(buf, 20000, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
      int src = st.MPI_SOURCE, i = buf[0], count = 0;
      CHECK(src > 0 && src < mt_size, "source %d", src);
      CHECK(i == next[src], "from %d: got message %d, expected %d", src, i, next[src]);
      CHECK(st.MPI_TAG == (i * 37) % 11, "message %d: tag %d", i, st.MPI_TAG);
      MPI_Get_count(&st, MPI_INT, &count);
      int len = (i % 7 == 3) ? 20000 : 1 + i % 5;
      CHECK(count == len, "message %d: count %d, expected %d", i, count, len);
      for (int k = 1; k < len; ++k) CHECK(buf[k] == i * 3 + k, "message %d: element %d", i, k);
      next[src]++;
    }
    /* Specific tags still select: messages can be taken out of order. */
  }
  if (mt_size >= 2) {
    if (mt_rank == 1) {
      /* Only once rank 0 is out of its any-tag loop. */
      MPI_Recv(NULL, 0, MPI_INT, 0, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      for (int t = 0; t < 3; ++t) MPI_Send(&t, 1, MPI_INT, 0, 100 + t, MPI_COMM_WORLD);
    } else if (mt_rank == 0) {
      MPI_Send(NULL, 0, MPI_INT, 1, 99, MPI_COMM_WORLD);
      for (int t = 2; t >= 0; --t) {
        int v = -1;
        MPI_Recv(&v, 1, MPI_INT, 1, 100 + t, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(v == t, "tag %d carried %d", 100 + t, v);
      }
    }
  }
  return mt_pass();
}
