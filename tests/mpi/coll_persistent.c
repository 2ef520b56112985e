/* Persistent collectives (MPI 4.0 6.13): each MPI_<Coll>_init request is
 * started 3 times, with new data in the same buffers before every start,
 * and its results compared with the blocking form's on the same data;
 * several requests started together with MPI_Startall; neighbourhood forms
 * on a ring; a derived send type; a request freed while inactive. Any
 * number of ranks. */
#include "mpitest.h"

#define B 4 /* elements per block */
#define ITERS 3

static int val(int iter, int rank, int i) { return iter * 1000003 + rank * 1009 + i * 7 + 1; }

static void same(const int* a, const int* b, int n, const char* what, int iter) {
  for (int i = 0; i < n; ++i) CHECK(a[i] == b[i], "%s start %d: [%d] = %d, blocking form gives %d", what, iter, i, a[i], b[i]);
}

/* Runs the started request to completion, checking the request handle
 * stays valid and inactive afterwards. */
static void finish(MPI_Request* r) {
  MPI_Status st;
  CHECK(MPI_Wait(r, &st) == MPI_SUCCESS, "Wait failed");
  CHECK(*r != MPI_REQUEST_NULL, "persistent request released by Wait");
  int flag = 0;
  MPI_Request_get_status(*r, &flag, MPI_STATUS_IGNORE);
  CHECK(flag, "inactive request not reported complete");
}

int main(int argc, char** argv) {
  mt_start("coll_persistent", &argc, &argv);
  const int n = mt_size, me = mt_rank, root = n - 1;
  /* (At least 2 blocks: a ring of 1 rank still has 2 neighbours.) */
  const int blocks = n < 2 ? 2 : n;
  int *sb = malloc(sizeof(int) * B * blocks), *rb = malloc(sizeof(int) * B * blocks),
      *ref = malloc(sizeof(int) * B * blocks);
  int *counts = malloc(sizeof(int) * n), *displs = malloc(sizeof(int) * n);
  MPI_Datatype *types = malloc(sizeof(MPI_Datatype) * n);
  int *wdispls = malloc(sizeof(int) * n);
  for (int i = 0; i < n; ++i) {
    counts[i] = B;
    displs[i] = i * B;
    types[i] = MPI_INT;
    wdispls[i] = i * B * (int)sizeof(int);
  }
  const MPI_Comm w = MPI_COMM_WORLD;
  MPI_Request r;

#define FILL(it)                                                     \
  do {                                                               \
    for (int i = 0; i < B * n; ++i) sb[i] = val(it, me, i);          \
    for (int i = 0; i < B * n; ++i) rb[i] = ref[i] = -7;             \
  } while (0)
#define RUN(name, init, blocking, nres)                              \
  do {                                                               \
    CHECK((init) == MPI_SUCCESS, "%s init failed", name);             \
    for (int it = 0; it < ITERS; ++it) {                             \
      FILL(it);                                                      \
      CHECK(MPI_Start(&r) == MPI_SUCCESS, "%s start failed", name);   \
      finish(&r);                                                    \
      blocking;                                                      \
      same(rb, ref, nres, name, it);                                 \
    }                                                                \
    MPI_Request_free(&r);                                            \
    CHECK(r == MPI_REQUEST_NULL, "%s: free did not null", name);     \
  } while (0)

  /* Bcast: the root's sb, copied into rb first at the root. */
  CHECK(MPI_Bcast_init(rb, B, MPI_INT, root, w, MPI_INFO_NULL, &r) == MPI_SUCCESS, "Bcast_init");
  for (int it = 0; it < ITERS; ++it) {
    FILL(it);
    if (me == root) memcpy(rb, sb, sizeof(int) * B), memcpy(ref, sb, sizeof(int) * B);
    MPI_Start(&r);
    finish(&r);
    MPI_Bcast(ref, B, MPI_INT, root, w);
    same(rb, ref, B, "bcast", it);
  }
  MPI_Request_free(&r);

  RUN("reduce", MPI_Reduce_init(sb, rb, B, MPI_INT, MPI_SUM, root, w, MPI_INFO_NULL, &r),
      MPI_Reduce(sb, ref, B, MPI_INT, MPI_SUM, root, w), me == root ? B : 0);
  RUN("allreduce", MPI_Allreduce_init(sb, rb, B, MPI_INT, MPI_MAX, w, MPI_INFO_NULL, &r),
      MPI_Allreduce(sb, ref, B, MPI_INT, MPI_MAX, w), B);
  RUN("gather", MPI_Gather_init(sb, B, MPI_INT, rb, B, MPI_INT, root, w, MPI_INFO_NULL, &r),
      MPI_Gather(sb, B, MPI_INT, ref, B, MPI_INT, root, w), me == root ? B * n : 0);
  RUN("gatherv", MPI_Gatherv_init(sb, B, MPI_INT, rb, counts, displs, MPI_INT, root, w, MPI_INFO_NULL, &r),
      MPI_Gatherv(sb, B, MPI_INT, ref, counts, displs, MPI_INT, root, w), me == root ? B * n : 0);
  RUN("scatter", MPI_Scatter_init(sb, B, MPI_INT, rb, B, MPI_INT, root, w, MPI_INFO_NULL, &r),
      MPI_Scatter(sb, B, MPI_INT, ref, B, MPI_INT, root, w), B);
  RUN("scatterv", MPI_Scatterv_init(sb, counts, displs, MPI_INT, rb, B, MPI_INT, root, w, MPI_INFO_NULL, &r),
      MPI_Scatterv(sb, counts, displs, MPI_INT, ref, B, MPI_INT, root, w), B);
  RUN("allgather", MPI_Allgather_init(sb, B, MPI_INT, rb, B, MPI_INT, w, MPI_INFO_NULL, &r),
      MPI_Allgather(sb, B, MPI_INT, ref, B, MPI_INT, w), B * n);
  RUN("allgatherv", MPI_Allgatherv_init(sb, B, MPI_INT, rb, counts, displs, MPI_INT, w, MPI_INFO_NULL, &r),
      MPI_Allgatherv(sb, B, MPI_INT, ref, counts, displs, MPI_INT, w), B * n);
  RUN("alltoall", MPI_Alltoall_init(sb, B, MPI_INT, rb, B, MPI_INT, w, MPI_INFO_NULL, &r),
      MPI_Alltoall(sb, B, MPI_INT, ref, B, MPI_INT, w), B * n);
  RUN("alltoallv",
      MPI_Alltoallv_init(sb, counts, displs, MPI_INT, rb, counts, displs, MPI_INT, w, MPI_INFO_NULL, &r),
      MPI_Alltoallv(sb, counts, displs, MPI_INT, ref, counts, displs, MPI_INT, w), B * n);
  RUN("alltoallw",
      MPI_Alltoallw_init(sb, counts, wdispls, types, rb, counts, wdispls, types, w, MPI_INFO_NULL, &r),
      MPI_Alltoallw(sb, counts, wdispls, types, ref, counts, wdispls, types, w), B * n);
  RUN("reduce_scatter", MPI_Reduce_scatter_init(sb, rb, counts, MPI_INT, MPI_SUM, w, MPI_INFO_NULL, &r),
      MPI_Reduce_scatter(sb, ref, counts, MPI_INT, MPI_SUM, w), B);
  RUN("reduce_scatter_block",
      MPI_Reduce_scatter_block_init(sb, rb, B, MPI_INT, MPI_MIN, w, MPI_INFO_NULL, &r),
      MPI_Reduce_scatter_block(sb, ref, B, MPI_INT, MPI_MIN, w), B);
  RUN("scan", MPI_Scan_init(sb, rb, B, MPI_INT, MPI_SUM, w, MPI_INFO_NULL, &r),
      MPI_Scan(sb, ref, B, MPI_INT, MPI_SUM, w), B);
  RUN("exscan", MPI_Exscan_init(sb, rb, B, MPI_INT, MPI_SUM, w, MPI_INFO_NULL, &r),
      MPI_Exscan(sb, ref, B, MPI_INT, MPI_SUM, w), me == 0 ? 0 : B);

  /* Barrier: the request completes only once every rank started it. */
  CHECK(MPI_Barrier_init(w, MPI_INFO_NULL, &r) == MPI_SUCCESS, "Barrier_init");
  for (int it = 0; it < ITERS; ++it) {
    MPI_Start(&r);
    finish(&r);
  }
  MPI_Request_free(&r);

  /* In place, and a derived send type packed at each start (not at init). */
  MPI_Datatype every_other;
  MPI_Type_vector(B, 1, 2, MPI_INT, &every_other);
  MPI_Type_commit(&every_other);
  int strided[2 * B];
  CHECK(MPI_Allgather_init(strided, 1, every_other, rb, B, MPI_INT, w, MPI_INFO_NULL, &r) == MPI_SUCCESS, "init");
  for (int it = 0; it < ITERS; ++it) {
    for (int i = 0; i < 2 * B; ++i) strided[i] = (i % 2) ? -1 : val(it, me, i / 2);
    MPI_Start(&r);
    finish(&r);
    for (int p = 0; p < n; ++p)
      for (int i = 0; i < B; ++i)
        CHECK(rb[p * B + i] == val(it, p, i), "derived allgather start %d: rank %d elt %d = %d", it, p, i,
              rb[p * B + i]);
  }
  MPI_Request_free(&r);
  MPI_Type_free(&every_other);
  CHECK(MPI_Allreduce_init(MPI_IN_PLACE, rb, B, MPI_INT, MPI_SUM, w, MPI_INFO_NULL, &r) == MPI_SUCCESS, "init");
  for (int it = 0; it < ITERS; ++it) {
    for (int i = 0; i < B; ++i) rb[i] = ref[i] = val(it, me, i);
    MPI_Start(&r);
    finish(&r);
    MPI_Allreduce(MPI_IN_PLACE, ref, B, MPI_INT, MPI_SUM, w);
    same(rb, ref, B, "allreduce in place", it);
  }
  MPI_Request_free(&r);

  /* Several at once, started with MPI_Startall, completed with Waitall. */
  int a[B], b[B], c[B * 64];
  MPI_Request rs[3];
  MPI_Allreduce_init(sb, a, B, MPI_INT, MPI_SUM, w, MPI_INFO_NULL, &rs[0]);
  MPI_Bcast_init(b, B, MPI_INT, 0, w, MPI_INFO_NULL, &rs[1]);
  MPI_Allgather_init(sb, B, MPI_INT, c, B, MPI_INT, w, MPI_INFO_NULL, &rs[2]);
  for (int it = 0; it < ITERS; ++it) {
    FILL(it);
    if (me == 0)
      for (int i = 0; i < B; ++i) b[i] = val(it, 0, i);
    CHECK(MPI_Startall(3, rs) == MPI_SUCCESS, "Startall");
    CHECK(MPI_Waitall(3, rs, MPI_STATUSES_IGNORE) == MPI_SUCCESS, "Waitall");
    for (int i = 0; i < B; ++i) {
      long sum = 0;
      for (int p = 0; p < n; ++p) sum += val(it, p, i);
      CHECK(a[i] == sum, "startall allreduce %d", a[i]);
      CHECK(b[i] == val(it, 0, i), "startall bcast %d", b[i]);
      for (int p = 0; p < n && n <= 64; ++p) CHECK(c[p * B + i] == val(it, p, i), "startall allgather");
    }
  }
  for (int i = 0; i < 3; ++i) MPI_Request_free(&rs[i]);

  /* Neighbourhood forms on a periodic ring. */
  MPI_Comm ring;
  int dims[1] = {n}, periods[1] = {1};
  MPI_Cart_create(w, 1, dims, periods, 0, &ring);
  int nb[2 * B], nref[2 * B];
  MPI_Neighbor_allgather_init(sb, B, MPI_INT, nb, B, MPI_INT, ring, MPI_INFO_NULL, &r);
  for (int it = 0; it < ITERS; ++it) {
    for (int i = 0; i < B * blocks; ++i) sb[i] = val(it, me, i);
    MPI_Start(&r);
    finish(&r);
    MPI_Neighbor_allgather(sb, B, MPI_INT, nref, B, MPI_INT, ring);
    same(nb, nref, 2 * B, "neighbor_allgather", it);
  }
  MPI_Request_free(&r);
  MPI_Neighbor_alltoall_init(sb, B, MPI_INT, nb, B, MPI_INT, ring, MPI_INFO_NULL, &r);
  for (int it = 0; it < ITERS; ++it) {
    for (int i = 0; i < B * blocks; ++i) sb[i] = val(it, me, i);
    MPI_Start(&r);
    finish(&r);
    MPI_Neighbor_alltoall(sb, B, MPI_INT, nref, B, MPI_INT, ring);
    same(nb, nref, 2 * B, "neighbor_alltoall", it);
  }
  MPI_Request_free(&r);
  MPI_Comm_free(&ring);

  /* Errors: an invalid communicator at init; MPI_Start of an active one. */
  MPI_Comm_set_errhandler(w, MPI_ERRORS_RETURN);
  char text[MPI_MAX_ERROR_STRING];
  int e = MPI_Allreduce_init(sb, rb, B, MPI_INT, MPI_SUM, MPI_COMM_NULL, MPI_INFO_NULL, &r);
  CHECK(mt_error(e, text) == MPI_ERR_COMM, "null comm gave %d (%s)", e, text);
  MPI_Barrier_init(w, MPI_INFO_NULL, &r);
  MPI_Start(&r);
  e = MPI_Start(&r);
  CHECK(mt_error(e, text) == MPI_ERR_REQUEST, "second start gave %d (%s)", e, text);
  finish(&r);
  MPI_Request_free(&r);
  MPI_Comm_set_errhandler(w, MPI_ERRORS_ARE_FATAL);

  free(sb), free(rb), free(ref), free(counts), free(displs), free(types), free(wdispls);
  return mt_pass();
}
