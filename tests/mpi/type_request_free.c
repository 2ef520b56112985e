/* MPI_Request_free on a pending receive of a non-contiguous datatype: the
 * data still lands in the user's buffer (the engine-side staging is
 * unpacked when the engine completes the receive, with nobody waiting).
 * Nothing tells the application when that happens (a progress thread may
 * do it at any moment): the buffers are read after MPI_Finalize, which
 * completes what is pending and stops the engine's threads. */
#include "mpitest.h"

struct freed_recv {
  int n;
  int* buf;
  int* src;
};

static struct freed_recv run(int n, int tag) {
  /* every other int of a 2n array */
  MPI_Datatype v;
  MPI_Type_vector(n, 1, 2, MPI_INT, &v);
  MPI_Type_commit(&v);
  struct freed_recv f = {n, calloc(2 * (size_t)n, sizeof(int)), malloc((size_t)n * sizeof(int))};
  for (int i = 0; i < n; i++) f.src[i] = i * 3 + tag;
  if (mt_rank == 0) {
    for (int i = 0; i < 2 * n; i++) f.buf[i] = -1;
    MPI_Request r;
    MPI_Irecv(f.buf, 1, v, 1, tag, MPI_COMM_WORLD, &r);
    MPI_Request_free(&r);
    CHECK(r == MPI_REQUEST_NULL, "freed handle is MPI_REQUEST_NULL");
    /* The data was sent (and, for a rendezvous, fully taken) before this
     * notice. */
    int done = 0;
    MPI_Recv(&done, 1, MPI_INT, 1, tag + 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else if (mt_rank == 1) {
    MPI_Send(f.src, n, MPI_INT, 0, tag, MPI_COMM_WORLD);
    int one = 1;
    MPI_Send(&one, 1, MPI_INT, 0, tag + 1, MPI_COMM_WORLD);
  }
  MPI_Type_free(&v);
  return f;
}

/* After MPI_Finalize: 1 when rank 0's freed receive delivered its data. */
static int delivered(struct freed_recv f) {
  int ok = 1;
  if (mt_rank == 0)
    for (int i = 0; i < f.n && ok; i++) ok = f.buf[2 * i] == f.src[i] && f.buf[2 * i + 1] == -1;
  free(f.buf);
  free(f.src);
  return ok;
}

int main(int argc, char** argv) {
  mt_start("type_request_free", &argc, &argv);
  struct freed_recv eager = {0, NULL, NULL}, rdv = {0, NULL, NULL};
  if (mt_size >= 2) {
    eager = run(16, 10);      /* eager */
    rdv = run(1 << 18, 20);   /* 1 MiB: rendezvous */
  }
  /* Later requests recycle the freed ones. */
  for (int i = 0; i < 100; i++) {
    MPI_Request r;
    int x = i, y = -1;
    MPI_Irecv(&y, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    (void)x;
  }
  MPI_Finalize();
  if (!delivered(eager) || !delivered(rdv)) {
    printf("FAIL %s: rank %d: a freed receive did not deliver its data by MPI_Finalize\n", mt_name, mt_rank);
    return 1;
  }
  printf("PASS %s rank %d\n", mt_name, mt_rank);
  return 0;
}
