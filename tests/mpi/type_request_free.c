/* MPI_Request_free on a pending receive of a non-contiguous datatype: the
 * data still lands in the user's buffer (the engine-side staging is
 * unpacked when the engine completes the receive, with nobody waiting). */
#include "mpitest.h"

static int run(int n, int tag) {
  /* every other int of a 2n array */
  MPI_Datatype v;
  MPI_Type_vector(n, 1, 2, MPI_INT, &v);
  MPI_Type_commit(&v);
  int* buf = calloc(2 * (size_t)n, sizeof(int));
  int* src = malloc((size_t)n * sizeof(int));
  for (int i = 0; i < n; i++) src[i] = i * 3 + tag;
  if (mt_rank == 0) {
    for (int i = 0; i < 2 * n; i++) buf[i] = -1;
    MPI_Request r;
    MPI_Irecv(buf, 1, v, 1, tag, MPI_COMM_WORLD, &r);
    MPI_Request_free(&r);
    CHECK(r == MPI_REQUEST_NULL, "freed handle is MPI_REQUEST_NULL");
    int done = 0;
    MPI_Recv(&done, 1, MPI_INT, 1, tag + 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    /* The data was sent (and, for a rendezvous, fully taken) before the
     * notice; keep making progress until the unpacked values show up. */
    double t0 = MPI_Wtime();
    int ok = 0;
    while (!ok && MPI_Wtime() - t0 < 20) {
      ok = 1;
      for (int i = 0; i < n && ok; i++) ok = buf[2 * i] == src[i] && buf[2 * i + 1] == -1;
      if (!ok) {
        int flag;
        MPI_Iprobe(MPI_ANY_SOURCE, 999, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
      }
    }
    CHECK(ok, "freed receive of %d ints delivered its data", n);
  } else if (mt_rank == 1) {
    MPI_Send(src, n, MPI_INT, 0, tag, MPI_COMM_WORLD);
    int one = 1;
    MPI_Send(&one, 1, MPI_INT, 0, tag + 1, MPI_COMM_WORLD);
  }
  free(buf);
  free(src);
  MPI_Type_free(&v);
  return 0;
}

int main(int argc, char** argv) {
  mt_start("type_request_free", &argc, &argv);
  if (mt_size >= 2) {
    run(16, 10);      /* eager */
    run(1 << 18, 20); /* 1 MiB: rendezvous */
  }
  /* Later requests recycle the freed ones. */
  for (int i = 0; i < 100; i++) {
    MPI_Request r;
    int x = i, y = -1;
    MPI_Irecv(&y, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    (void)x;
  }
  return mt_pass();
}
