/* MPI_Type_free while communication using the type is pending (sends and
 * staged receives complete normally), types built from a freed type,
 * MPI_Type_dup (committed iff the original is), and handle reuse not
 * disturbing a pending operation. Ring exchange: any count. */
#include "mpitest.h"

#define N 4096

int main(int argc, char** argv) {
  mt_start("type_free_inflight", &argc, &argv);
  int next = (mt_rank + 1) % mt_size, prev = (mt_rank + mt_size - 1) % mt_size;
  static int src[2 * N], dst[2 * N];
  for (int i = 0; i < 2 * N; ++i) src[i] = mt_rank * 100000 + i, dst[i] = -1;

  MPI_Datatype even, even2;
  MPI_Type_vector(N, 1, 2, MPI_INT, &even);
  MPI_Type_commit(&even);
  MPI_Type_dup(even, &even2); /* committed, as even is */
  MPI_Request rq[2];
  /* Irecv first, then free its type at once; the Isend's type too. */
  MPI_Irecv(dst, 1, even, prev, 1, MPI_COMM_WORLD, &rq[0]);
  MPI_Type_free(&even);
  CHECK(even == MPI_DATATYPE_NULL, "freed");
  /* The freed handle may be reused right away by another type. */
  MPI_Datatype other;
  MPI_Type_contiguous(3, MPI_DOUBLE, &other);
  MPI_Type_commit(&other);
  MPI_Isend(src, 1, even2, next, 1, MPI_COMM_WORLD, &rq[1]);
  MPI_Type_free(&even2);
  MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
  for (int i = 0; i < 2 * N; ++i) CHECK(dst[i] == (i % 2 == 0 ? prev * 100000 + i : -1), "dst[%d] = %d", i, dst[i]);

  /* A type built from a freed one keeps working. */
  MPI_Datatype pair, pairs;
  MPI_Type_contiguous(2, MPI_INT, &pair);
  MPI_Type_vector(4, 1, 3, pair, &pairs); /* pairs at ints 0, 6, 12, 18 */
  MPI_Type_free(&pair);
  MPI_Type_commit(&pairs);
  for (int i = 0; i < 2 * N; ++i) dst[i] = -1;
  MPI_Sendrecv(src, 1, pairs, next, 2, dst, 1, pairs, prev, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  for (int i = 0; i < 24; ++i) {
    int in = i % 6 < 2;
    CHECK(dst[i] == (in ? prev * 100000 + i : -1), "pairs dst[%d] = %d", i, dst[i]);
  }

  /* dup of an uncommitted type is uncommitted: commit the dup only. */
  MPI_Datatype raw, rawdup;
  MPI_Type_vector(2, 1, 5, MPI_INT, &raw);
  MPI_Type_dup(raw, &rawdup);
  MPI_Type_free(&raw);
  MPI_Type_commit(&rawdup);
  for (int i = 0; i < 2 * N; ++i) dst[i] = -1;
  MPI_Sendrecv(src, 1, rawdup, next, 3, dst, 2, MPI_INT, prev, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  CHECK(dst[0] == prev * 100000 && dst[1] == prev * 100000 + 5 && dst[2] == -1, "dup of uncommitted");

  /* Many types created and freed: handles are recycled (no growth). */
  MPI_Datatype first;
  MPI_Type_contiguous(1, MPI_INT, &first);
  MPI_Datatype keep = first;
  MPI_Type_free(&first);
  for (int k = 0; k < 1000; ++k) {
    MPI_Datatype t;
    MPI_Type_contiguous(k + 1, MPI_CHAR, &t);
    MPI_Type_commit(&t);
    CHECK(t == keep, "handle %d not recycled (want %d)", t, keep);
    MPI_Type_free(&t);
  }
  MPI_Type_free(&pairs);
  MPI_Type_free(&rawdup);
  MPI_Type_free(&other);
  return mt_pass();
}
