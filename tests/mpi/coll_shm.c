/* The blocking collectives that go through the communicator's
 * shared segment (mpi_layer/coll/shm.hpp) when its ranks share a host
 * (reduce, allgather, reduce_scatter_block and the v-collectives: see
 * reduce_gather_round and v_round):
 * many more operations than the segment's ring depth, every root, blocks
 * of 1, 8, 1,024 (a line, a slot) and 4,096 to 65,536 bytes (a large slot,
 * the largest the segment takes) interleaved with 1,025-byte ones (the
 * engine's direct path) and 65,537 and 300,000-byte ones (single copy out
 * of the root's or the senders' memory; schedules with NMAD_SHM_CMA=0); allreduce of up
 * to 64 KiB and just over it; a root on the fast path (predefined
 * type) with the others on the full path (a derived type of the same
 * signature); MPI_IN_PLACE at the root; allreduce with a predefined
 * op (in place and not), a non-commutative user op (2x2 matrix product,
 * whose result depends on the rank order) and floating-point sums that
 * must be bit-identical on every rank; alltoall of 1 to 1,024-byte
 * blocks (a row in one slot, or one slot per peer), 1,025 to 65,536-byte
 * ones (a pair slot per sender) and larger ones (single copy out of the
 * others' memory, or engine messages with NMAD_SHM_CMA=0), in place or
 * not, with a strided send type, interleaved with 1,024-byte rooted
 * operations that reuse the same slots; an Ibcast started before a
 * blocking Bcast and completed after it (the shared-memory wait must
 * progress it); two split communicators at once; and a barrier that
 * really holds everyone (each rank appends to a file before it, and finds
 * every rank's line after it). Every value is checked. Run by the test
 * with the segment on, off (NMAD_COLL_SHM=off) and across emulated hosts
 * (where it is not used). */
#include <fcntl.h>

#include "mpitest.h"

static unsigned char val(int iter, int rank, long i) { return (unsigned char)(iter * 31 + rank * 7 + i * 3 + 1); }

static void rooted_round(MPI_Comm comm, int iter, size_t block) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const int root = iter % size;
  unsigned char* all = malloc(block * (size_t)size);
  unsigned char* mine = malloc(block);
  /* bcast */
  for (size_t i = 0; i < block; ++i) mine[i] = rank == root ? val(iter, root, (long)i) : 0;
  CHECK(MPI_Bcast(mine, (int)block, MPI_BYTE, root, comm) == MPI_SUCCESS, "bcast");
  for (size_t i = 0; i < block; ++i) CHECK(mine[i] == val(iter, root, (long)i), "bcast iter %d byte %zu", iter, i);
  /* scatter (in place at the root every third round) */
  const int inplace = iter % 3 == 0;
  if (rank == root)
    for (int r = 0; r < size; ++r)
      for (size_t i = 0; i < block; ++i) all[(size_t)r * block + i] = val(iter, r, (long)i);
  memset(mine, 0, block);
  if (rank == root && inplace)
    CHECK(MPI_Scatter(all, (int)block, MPI_BYTE, MPI_IN_PLACE, (int)block, MPI_BYTE, root, comm) == MPI_SUCCESS,
          "scatter in place");
  else
    CHECK(MPI_Scatter(all, (int)block, MPI_BYTE, mine, (int)block, MPI_BYTE, root, comm) == MPI_SUCCESS, "scatter");
  if (!(rank == root && inplace))
    for (size_t i = 0; i < block; ++i) CHECK(mine[i] == val(iter, rank, (long)i), "scatter iter %d byte %zu", iter, i);
  /* gather */
  for (size_t i = 0; i < block; ++i) mine[i] = val(iter + 1, rank, (long)i);
  if (rank == root) {
    memset(all, 0, block * (size_t)size);
    if (inplace) memcpy(all + (size_t)root * block, mine, block);
    CHECK(MPI_Gather(inplace ? MPI_IN_PLACE : mine, (int)block, MPI_BYTE, all, (int)block, MPI_BYTE, root, comm) ==
              MPI_SUCCESS,
          "gather");
    for (int r = 0; r < size; ++r)
      for (size_t i = 0; i < block; ++i)
        CHECK(all[(size_t)r * block + i] == val(iter + 1, r, (long)i), "gather iter %d rank %d byte %zu", iter, r, i);
  } else {
    CHECK(MPI_Gather(mine, (int)block, MPI_BYTE, NULL, 0, MPI_BYTE, root, comm) == MPI_SUCCESS, "gather");
  }
  free(all);
  free(mine);
}

/* 2x2 unsigned matrices, row-major: inout = in x inout (MPI's order). */
static void matmul(void* in, void* inout, int* len, MPI_Datatype* dt) {
  (void)dt;
  unsigned* a = in;
  unsigned* b = inout;
  for (int k = 0; k < *len; ++k, a += 4, b += 4) {
    const unsigned c0 = a[0] * b[0] + a[1] * b[2], c1 = a[0] * b[1] + a[1] * b[3];
    const unsigned c2 = a[2] * b[0] + a[3] * b[2], c3 = a[2] * b[1] + a[3] * b[3];
    b[0] = c0, b[1] = c1, b[2] = c2, b[3] = c3;
  }
}

static void allreduce_round(MPI_Comm comm, int iter) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  /* Sum of ints, in place every other round; 1 to 200 elements. */
  const int n = 1 + (iter * 37) % 200;
  int* v = malloc(sizeof(int) * (size_t)n);
  int* out = malloc(sizeof(int) * (size_t)n);
  for (int i = 0; i < n; ++i) v[i] = rank * 1000 + i + iter;
  if (iter % 2)
    CHECK(MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_INT, MPI_SUM, comm) == MPI_SUCCESS, "allreduce in place");
  else
    CHECK(MPI_Allreduce(v, out, n, MPI_INT, MPI_SUM, comm) == MPI_SUCCESS, "allreduce");
  const int* got = iter % 2 ? v : out;
  for (int i = 0; i < n; ++i) {
    const int want = 1000 * size * (size - 1) / 2 + size * (i + iter);
    CHECK(got[i] == want, "allreduce iter %d element %d: %d, not %d", iter, i, got[i], want);
  }
  free(v);
  free(out);
  /* Non-commutative: the product M(0) x M(1) x ... x M(size-1). */
  MPI_Op mm;
  MPI_Op_create(matmul, 0, &mm);
  MPI_Datatype m4;
  MPI_Type_contiguous(4, MPI_UNSIGNED, &m4);
  MPI_Type_commit(&m4);
  unsigned mine[4] = {1u + (unsigned)rank, 2u, (unsigned)iter, 1u + 3u * (unsigned)rank}, prod[4];
  CHECK(MPI_Allreduce(mine, prod, 1, m4, mm, comm) == MPI_SUCCESS, "allreduce matmul");
  unsigned want[4] = {1, 0, 0, 1};
  for (int r = size - 1; r >= 0; --r) {
    unsigned a[4] = {1u + (unsigned)r, 2u, (unsigned)iter, 1u + 3u * (unsigned)r};
    int one = 1;
    matmul(a, want, &one, NULL);
  }
  CHECK(memcmp(prod, want, sizeof want) == 0, "matrix product in rank order (iter %d)", iter);
  MPI_Type_free(&m4);
  MPI_Op_free(&mm);
  /* Doubles: every rank gets the same bits. */
  double d = 1.0 / (3.0 + rank + iter), sum = 0, root_sum = 0;
  CHECK(MPI_Allreduce(&d, &sum, 1, MPI_DOUBLE, MPI_SUM, comm) == MPI_SUCCESS, "allreduce double");
  root_sum = sum;
  MPI_Bcast(&root_sum, 1, MPI_DOUBLE, 0, comm);
  CHECK(memcmp(&sum, &root_sum, sizeof sum) == 0, "the same double sum on every rank (iter %d)", iter);
}

/* Sums of 1,024 to 16,385 ints (4 KiB to just over 64 KiB), in place
 * every other time. */
static void big_allreduce_round(MPI_Comm comm, int iter) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const int counts[] = {16384, 1024, 16385, 5000};
  const int n = counts[(iter / 4) % 4];
  int* v = malloc(sizeof(int) * (size_t)n);
  int* out = malloc(sizeof(int) * (size_t)n);
  for (int i = 0; i < n; ++i) v[i] = rank * 3 + i % 1000 + iter;
  if (iter % 8)
    CHECK(MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_INT, MPI_SUM, comm) == MPI_SUCCESS, "big allreduce in place");
  else
    CHECK(MPI_Allreduce(v, out, n, MPI_INT, MPI_SUM, comm) == MPI_SUCCESS, "big allreduce");
  const int* got = iter % 8 ? v : out;
  for (int i = 0; i < n; ++i) {
    const int want = 3 * size * (size - 1) / 2 + size * (i % 1000 + iter);
    CHECK(got[i] == want, "big allreduce iter %d (%d ints) element %d: %d, not %d", iter, n, i, got[i], want);
  }
  free(v);
  free(out);
}

/* Reduce to every root (in place at the root every other round; a
 * non-commutative matrix product checked against rank order), allgather
 * (in place every third round) and reduce_scatter_block of 1 to 16,384
 * ints per block, through the segment up to 64 KiB. */
static void reduce_gather_round(MPI_Comm comm, int iter) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const int root = iter % size;
  const int counts[] = {1, 7, 256, 1000, 16384};
  const int n = counts[iter % 5];
  int* v = malloc(sizeof(int) * (size_t)n * (size_t)size);
  int* out = malloc(sizeof(int) * (size_t)n * (size_t)size);
  for (int i = 0; i < n; ++i) v[i] = rank * 1000 + i + iter;
  const int inplace = rank == root && iter % 2;
  CHECK(MPI_Reduce(inplace ? MPI_IN_PLACE : v, inplace ? v : out, n, MPI_INT, MPI_SUM, root, comm) == MPI_SUCCESS,
        "reduce");
  if (rank == root)
    for (int i = 0; i < n; ++i) {
      const int want = 1000 * size * (size - 1) / 2 + size * (i + iter);
      const int got = inplace ? v[i] : out[i];
      CHECK(got == want, "reduce iter %d root %d element %d: %d, not %d", iter, root, i, got, want);
    }
  MPI_Op mm;
  MPI_Op_create(matmul, 0, &mm);
  MPI_Datatype m4;
  MPI_Type_contiguous(4, MPI_UNSIGNED, &m4);
  MPI_Type_commit(&m4);
  unsigned mine[4] = {1u + (unsigned)rank, 2u, (unsigned)iter, 1u + 3u * (unsigned)rank}, prod[4] = {0, 0, 0, 0};
  CHECK(MPI_Reduce(mine, prod, 1, m4, mm, root, comm) == MPI_SUCCESS, "reduce matmul");
  if (rank == root) {
    unsigned want[4] = {1, 0, 0, 1};
    for (int r = size - 1; r >= 0; --r) {
      unsigned a[4] = {1u + (unsigned)r, 2u, (unsigned)iter, 1u + 3u * (unsigned)r};
      int one = 1;
      matmul(a, want, &one, NULL);
    }
    CHECK(memcmp(prod, want, sizeof want) == 0, "reduce: matrix product in rank order (iter %d)", iter);
  }
  MPI_Type_free(&m4);
  MPI_Op_free(&mm);
  /* allgather */
  for (int r = 0; r < size; ++r)
    for (int i = 0; i < n; ++i) out[r * n + i] = r == rank ? -(rank * 100000 + i + iter) : 0;
  if (iter % 3 == 0)
    CHECK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, out, n, MPI_INT, comm) == MPI_SUCCESS,
          "allgather in place");
  else {
    for (int i = 0; i < n; ++i) v[i] = -(rank * 100000 + i + iter);
    CHECK(MPI_Allgather(v, n, MPI_INT, out, n, MPI_INT, comm) == MPI_SUCCESS, "allgather");
  }
  for (int r = 0; r < size; ++r)
    for (int i = 0; i < n; ++i)
      CHECK(out[r * n + i] == -(r * 100000 + i + iter), "allgather iter %d block %d element %d: %d", iter, r, i,
            out[r * n + i]);
  /* reduce_scatter_block: block r of the sum to rank r */
  if ((size_t)n * (size_t)size * sizeof(int) <= 65536 * 4) {
    for (int i = 0; i < n * size; ++i) v[i] = rank + i + iter;
    CHECK(MPI_Reduce_scatter_block(v, out, n, MPI_INT, MPI_SUM, comm) == MPI_SUCCESS, "reduce_scatter_block");
    for (int i = 0; i < n; ++i) {
      const int want = size * (size - 1) / 2 + size * (rank * n + i + iter);
      CHECK(out[i] == want, "reduce_scatter_block iter %d element %d: %d, not %d", iter, i, out[i], want);
    }
  }
  free(v);
  free(out);
}

/* Gatherv, scatterv and allgatherv with blocks of different sizes on each
 * rank (0, 8, 56 and 57 bytes - a line slot's edge -, 5,000 and 100,000:
 * read in place), rotating with the round; every root; in place at the
 * root every other round. */
static int vsize(int rank, int iter) {
  const int sizes[] = {0, 8, 56, 57, 5000, 100000};
  return sizes[(rank + iter) % 6];
}
static void v_round(MPI_Comm comm, int iter) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const int root = iter % size;
  int counts[64], displs[64], total = 0;
  for (int r = 0; r < size; ++r) {
    counts[r] = vsize(r, iter);
    displs[r] = total + 3; /* gaps between blocks */
    total += counts[r] + 3;
  }
  unsigned char* all = calloc((size_t)total + 1, 1);
  unsigned char* mine = malloc((size_t)vsize(rank, iter) + 1);
  const int inplace = iter % 2;
  /* gatherv */
  for (int i = 0; i < counts[rank]; ++i) mine[i] = val(iter, rank, i);
  if (rank == root && inplace) memcpy(all + displs[rank], mine, (size_t)counts[rank]);
  CHECK(MPI_Gatherv(rank == root && inplace ? MPI_IN_PLACE : mine, counts[rank], MPI_BYTE, all, counts, displs,
                    MPI_BYTE, root, comm) == MPI_SUCCESS,
        "gatherv");
  if (rank == root)
    for (int r = 0; r < size; ++r)
      for (int i = 0; i < counts[r]; ++i)
        CHECK(all[displs[r] + i] == val(iter, r, i), "gatherv iter %d block %d byte %d", iter, r, i);
  /* scatterv: the root's blocks, each rank checks its own */
  if (rank == root)
    for (int r = 0; r < size; ++r)
      for (int i = 0; i < counts[r]; ++i) all[displs[r] + i] = val(iter + 7, r, i);
  memset(mine, 0, (size_t)counts[rank] + 1);
  CHECK(MPI_Scatterv(all, counts, displs, MPI_BYTE, rank == root && inplace ? MPI_IN_PLACE : mine, counts[rank],
                     MPI_BYTE, root, comm) == MPI_SUCCESS,
        "scatterv");
  if (!(rank == root && inplace))
    for (int i = 0; i < counts[rank]; ++i) CHECK(mine[i] == val(iter + 7, rank, i), "scatterv iter %d byte %d", iter, i);
  /* allgatherv */
  memset(all, 0, (size_t)total);
  for (int i = 0; i < counts[rank]; ++i) mine[i] = val(iter + 3, rank, i);
  if (inplace) memcpy(all + displs[rank], mine, (size_t)counts[rank]);
  CHECK(MPI_Allgatherv(inplace ? MPI_IN_PLACE : mine, counts[rank], MPI_BYTE, all, counts, displs, MPI_BYTE, comm) ==
            MPI_SUCCESS,
        "allgatherv");
  for (int r = 0; r < size; ++r)
    for (int i = 0; i < counts[r]; ++i)
      CHECK(all[displs[r] + i] == val(iter + 3, r, i), "allgatherv iter %d block %d byte %d", iter, r, i);
  free(all);
  free(mine);
}

static void alltoall_sized(MPI_Comm comm, int iter, int b);

static void alltoall_round(MPI_Comm comm, int iter) {
  const int blocks[] = {1, 8, 16, 128, 200, 1024, 1025, 512};
  alltoall_sized(comm, iter, blocks[iter % 8]);
}

/* Blocks above 1 KiB per peer: through the pair slots up to 64 KiB, then
 * read straight out of the others' memory where the ranks may (single
 * copy), else engine messages. */
static void big_alltoall_round(MPI_Comm comm, int iter) {
  const int blocks[] = {1025, 4096, 65536, 3000, 200000, 8192, 65537};
  alltoall_sized(comm, iter, blocks[iter % 7]);
}

/* Alltoall of 3-int blocks described by a strided type on the send side
 * (every other int of a 6-int stretch) and contiguous ints on the receive
 * side. */
static void strided_alltoall_round(MPI_Comm comm, int iter, int ints) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  MPI_Datatype every_other;
  MPI_Type_vector(ints, 1, 2, MPI_INT, &every_other);
  MPI_Type_create_resized(every_other, 0, (MPI_Aint)(2 * ints * sizeof(int)), &every_other);
  MPI_Type_commit(&every_other);
  int* in = malloc(sizeof(int) * 2 * (size_t)ints * (size_t)size);
  int* out = malloc(sizeof(int) * (size_t)ints * (size_t)size);
  for (int r = 0; r < size; ++r)
    for (int i = 0; i < 2 * ints; ++i) in[r * 2 * ints + i] = i % 2 ? -1 : rank * 1000000 + r * 10000 + i / 2 + iter;
  CHECK(MPI_Alltoall(in, 1, every_other, out, ints, MPI_INT, comm) == MPI_SUCCESS, "strided alltoall");
  for (int r = 0; r < size; ++r)
    for (int i = 0; i < ints; ++i)
      CHECK(out[r * ints + i] == r * 1000000 + rank * 10000 + i + iter, "strided alltoall iter %d from %d int %d: %d",
            iter, r, i, out[r * ints + i]);
  MPI_Type_free(&every_other);
  free(in);
  free(out);
}

static void alltoall_sized(MPI_Comm comm, int iter, int b) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  unsigned char* in = malloc((size_t)b * (size_t)size);
  unsigned char* out = malloc((size_t)b * (size_t)size);
  for (int r = 0; r < size; ++r)
    for (int i = 0; i < b; ++i) in[r * b + i] = (unsigned char)(rank * 16 + r + i * 5 + iter);
  const int inplace = iter % 3 == 2;
  if (inplace)
    CHECK(MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, in, b, MPI_BYTE, comm) == MPI_SUCCESS, "alltoall in place");
  else
    CHECK(MPI_Alltoall(in, b, MPI_BYTE, out, b, MPI_BYTE, comm) == MPI_SUCCESS, "alltoall");
  const unsigned char* got = inplace ? in : out;
  for (int r = 0; r < size; ++r)
    for (int i = 0; i < b; ++i)
      CHECK(got[r * b + i] == (unsigned char)(r * 16 + rank + i * 5 + iter), "alltoall iter %d from %d byte %d", iter,
            r, i);
  free(in);
  free(out);
}

int main(int argc, char** argv) {
  mt_start("coll_shm", &argc, &argv);
  for (int iter = 0; iter < 50; ++iter) alltoall_round(MPI_COMM_WORLD, iter);
  /* Alltoall with a slot per peer between operations using the same
   * slots (1 KiB blocks), far more than the ring's depth. */
  for (int iter = 0; iter < 40; ++iter) {
    alltoall_round(MPI_COMM_WORLD, 5 + 8 * iter);  /* 1,024-byte blocks */
    rooted_round(MPI_COMM_WORLD, iter, 1024);
    alltoall_round(MPI_COMM_WORLD, 7 + 8 * iter);  /* 512-byte blocks */
    if (iter % 3 == 0) rooted_round(MPI_COMM_WORLD, iter + 1, 1000);
  }
  for (int iter = 0; iter < 60; ++iter) allreduce_round(MPI_COMM_WORLD, iter);
  for (int iter = 0; iter < 60; ++iter) reduce_gather_round(MPI_COMM_WORLD, iter);
  for (int iter = 0; iter < 150; ++iter) v_round(MPI_COMM_WORLD, iter);
  /* Large alltoall blocks (two line slots per operation where they go by
   * single copy) interleaved with small operations on the same lines,
   * well past the line ring's depth (256). */
  for (int iter = 0; iter < 200; ++iter) {
    big_alltoall_round(MPI_COMM_WORLD, iter);
    if (iter % 5 == 0) allreduce_round(MPI_COMM_WORLD, iter);
    if (iter % 9 == 0) strided_alltoall_round(MPI_COMM_WORLD, iter, iter % 2 ? 2100 : 300);
    if (iter % 11 == 0) CHECK(MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS, "barrier");
  }
  const size_t blocks[] = {8, 1, 1024, 1025, 8, 4096, 65536, 65537, 300000, 1024};
  for (int iter = 0; iter < 100; ++iter) {
    rooted_round(MPI_COMM_WORLD, iter, blocks[iter % 10]);
    if (iter % 4 == 0) big_allreduce_round(MPI_COMM_WORLD, iter);
    if (iter % 7 == 0) CHECK(MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS, "barrier");
  }

  /* The root on the fast path, the others on the full path (a derived
   * type of the same signature): both sides must take the same route. */
  MPI_Datatype eight;
  MPI_Type_contiguous(8, MPI_BYTE, &eight);
  MPI_Type_commit(&eight);
  for (int iter = 0; iter < 20; ++iter) {
    const int root = iter % mt_size;
    int v[2] = {0, 0};
    if (mt_rank == root) {
      v[0] = iter;
      v[1] = -iter;
      CHECK(MPI_Bcast(v, 2, MPI_INT, root, MPI_COMM_WORLD) == MPI_SUCCESS, "bcast ints");
    } else {
      CHECK(MPI_Bcast(v, 1, eight, root, MPI_COMM_WORLD) == MPI_SUCCESS, "bcast derived");
    }
    CHECK(v[0] == iter && v[1] == -iter, "mixed-type bcast %d: %d %d", iter, v[0], v[1]);
    int g[2] = {mt_rank, iter}, all[2 * 64];
    if (mt_rank == root)
      CHECK(MPI_Gather(g, 1, eight, all, 2, MPI_INT, root, MPI_COMM_WORLD) == MPI_SUCCESS, "gather mixed");
    else
      CHECK(MPI_Gather(g, 2, MPI_INT, NULL, 0, MPI_INT, root, MPI_COMM_WORLD) == MPI_SUCCESS, "gather mixed");
    if (mt_rank == root)
      for (int r = 0; r < mt_size; ++r) CHECK(all[2 * r] == r && all[2 * r + 1] == iter, "mixed gather rank %d", r);
  }
  MPI_Type_free(&eight);

  /* An Ibcast pending across a blocking Bcast on the same communicator. */
  {
    long big[512], small = 0;
    for (int i = 0; i < 512; ++i) big[i] = mt_rank == 0 ? 1000 + i : 0;
    MPI_Request req;
    CHECK(MPI_Ibcast(big, 512, MPI_LONG, 0, MPI_COMM_WORLD, &req) == MPI_SUCCESS, "ibcast");
    if (mt_rank == mt_size - 1) small = 77;
    CHECK(MPI_Bcast(&small, 1, MPI_LONG, mt_size - 1, MPI_COMM_WORLD) == MPI_SUCCESS, "bcast during ibcast");
    CHECK(small == 77, "bcast during ibcast gave %ld", small);
    CHECK(MPI_Wait(&req, MPI_STATUS_IGNORE) == MPI_SUCCESS, "wait ibcast");
    for (int i = 0; i < 512; ++i) CHECK(big[i] == 1000 + i, "ibcast %d is %ld", i, big[i]);
  }

  /* Two split communicators, used one after the other many times. */
  {
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, mt_rank % 2, mt_rank, &half);
    for (int iter = 0; iter < 40; ++iter) {
      rooted_round(half, iter, 8);
      rooted_round(MPI_COMM_WORLD, iter, 16);
      if (iter % 4 == 0) allreduce_round(half, iter);
      if (iter % 4 == 1) alltoall_round(half, iter);
      if (iter % 4 == 3) big_alltoall_round(half, iter);
      if (iter % 4 == 2) reduce_gather_round(half, iter);
      if (iter % 4 == 0) v_round(half, iter);
    }
    MPI_Comm_free(&half);
  }

  /* The barrier holds everyone: a line per rank in a file before it, all
   * of them there after it, in every round. */
  {
    char name[512];
    mt_tmpname(MPI_COMM_WORLD, "barrier", name, sizeof name);
    for (int round = 0; round < 20; ++round) {
      if (mt_rank == 0) {
        int fd = open(name, O_CREAT | O_TRUNC | O_WRONLY, 0600);
        close(fd);
      }
      MPI_Barrier(MPI_COMM_WORLD);
      if (round % 2 == 1 && mt_rank == round % mt_size) usleep(20000); /* one rank late */
      int fd = open(name, O_WRONLY | O_APPEND);
      char line[16];
      const int n = snprintf(line, sizeof line, "%d\n", mt_rank);
      CHECK(fd >= 0 && write(fd, line, (size_t)n) == n, "append");
      close(fd);
      CHECK(MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS, "barrier");
      fd = open(name, O_RDONLY);
      char buf[1024];
      const long got = fd >= 0 ? (long)read(fd, buf, sizeof buf - 1) : -1;
      close(fd);
      int lines = 0;
      for (long i = 0; i < got; ++i) lines += buf[i] == '\n';
      CHECK(lines == mt_size, "round %d: %d lines after the barrier, not %d", round, lines, mt_size);
      MPI_Barrier(MPI_COMM_WORLD);
    }
    if (mt_rank == 0) unlink(name);
  }
  return mt_pass();
}
