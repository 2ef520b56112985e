/* Sendrecv and Sendrecv_replace around a ring (both directions), with
 * MPI_PROC_NULL ends. */
#include "mpitest.h"

int main(int argc, char** argv) {
  mt_start("sendrecv", &argc, &argv);
  int next = (mt_rank + 1) % mt_size, prev = (mt_rank + mt_size - 1) % mt_size;
  static long out[40000], in[40000];
  for (int n = 1; n <= 40000; n *= 200) {
    for (int i = 0; i < n; ++i) out[i] = mt_rank * 1000000L + i;
    MPI_Status st;
    MPI_Sendrecv(out, n, MPI_LONG, next, 1, in, n, MPI_LONG, prev, 1, MPI_COMM_WORLD, &st);
    CHECK(st.MPI_SOURCE == prev && st.MPI_TAG == 1, "status %d %d", st.MPI_SOURCE, st.MPI_TAG);
    for (int i = 0; i < n; ++i) CHECK(in[i] == prev * 1000000L + i, "Sendrecv n=%d element %d", n, i);
    MPI_Sendrecv_replace(out, n, MPI_LONG, prev, 2, next, 2, MPI_COMM_WORLD, &st);
    for (int i = 0; i < n; ++i) CHECK(out[i] == next * 1000000L + i, "Sendrecv_replace n=%d element %d", n, i);
  }
  /* A line, not a ring: the ends talk to MPI_PROC_NULL. */
  int left = mt_rank > 0 ? mt_rank - 1 : MPI_PROC_NULL;
  int right = mt_rank < mt_size - 1 ? mt_rank + 1 : MPI_PROC_NULL;
  int v = mt_rank, got = -7;
  MPI_Status st;
  MPI_Sendrecv(&v, 1, MPI_INT, right, 3, &got, 1, MPI_INT, left, 3, MPI_COMM_WORLD, &st);
  if (left == MPI_PROC_NULL) {
    int count = -1;
    MPI_Get_count(&st, MPI_INT, &count);
    CHECK(got == -7 && st.MPI_SOURCE == MPI_PROC_NULL && count == 0, "PROC_NULL receive");
  } else {
    CHECK(got == left, "line: got %d", got);
  }
  return mt_pass();
}
