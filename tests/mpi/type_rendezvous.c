/* Large messages with derived types (the engine's rendezvous path): a
 * 4 MiB non-contiguous vector (staged), a 4 MiB contiguous derived type
 * (sent and received in place), a large struct-of-contiguous array, and a
 * synchronous send; received both as the derived type and as bytes. Pairs
 * (0,1), (2,3)...; an odd last rank talks to itself. */
#include "mpitest.h"

#define NV (256 * 1024) /* vector blocks */

int main(int argc, char** argv) {
  mt_start("type_rendezvous", &argc, &argv);
  int peer = mt_rank ^ 1;
  if (peer >= mt_size) peer = mt_rank;
  /* 4 MiB of data in blocks of 2 doubles, stride 3 doubles. */
  double* src = malloc(sizeof(double) * 3 * NV);
  double* dst = malloc(sizeof(double) * 3 * NV);
  double* flat = malloc(sizeof(double) * 2 * NV);
  CHECK(src && dst && flat, "malloc");
  for (long i = 0; i < 3L * NV; ++i) src[i] = mt_rank * 1e7 + i, dst[i] = -1;
  MPI_Datatype vec;
  MPI_Type_vector(NV, 2, 3, MPI_DOUBLE, &vec);
  MPI_Type_commit(&vec);
  int size;
  MPI_Type_size(vec, &size);
  CHECK(size == 4 * 1024 * 1024, "vector size %d", size);
  MPI_Status st;
  MPI_Request rq;
  MPI_Irecv(dst, 1, vec, peer, 1, MPI_COMM_WORLD, &rq);
  MPI_Send(src, 1, vec, peer, 1, MPI_COMM_WORLD);
  MPI_Wait(&rq, &st);
  for (long i = 0; i < 3L * NV; ++i)
    CHECK(dst[i] == (i % 3 < 2 ? peer * 1e7 + i : -1), "vector dst[%ld] = %g", i, dst[i]);
  /* Vector out, flat in; flat out, vector in (Ssend). */
  MPI_Irecv(flat, 2 * NV, MPI_DOUBLE, peer, 2, MPI_COMM_WORLD, &rq);
  MPI_Ssend(src, 1, vec, peer, 2, MPI_COMM_WORLD);
  MPI_Wait(&rq, &st);
  for (long k = 0; k < 2L * NV; ++k)
    CHECK(flat[k] == peer * 1e7 + (k / 2) * 3 + k % 2, "flat[%ld] = %g", k, flat[k]);
  for (long i = 0; i < 3L * NV; ++i) dst[i] = -1;
  MPI_Irecv(dst, 1, vec, peer, 3, MPI_COMM_WORLD, &rq);
  MPI_Send(flat, 2 * NV, MPI_DOUBLE, peer, 3, MPI_COMM_WORLD);
  MPI_Wait(&rq, &st);
  /* flat holds peer's data; peer got ours and sends it back, so dst = our own src layout... of peer's flat */
  for (long i = 0; i < 3L * NV; ++i)
    CHECK(dst[i] == (i % 3 < 2 ? mt_rank * 1e7 + i : -1), "vector back dst[%ld] = %g", i, dst[i]);

  /* A contiguous derived type of 4 MiB (1 element), in place on both sides,
   * with a nonzero true lb: contiguous(2^20 ints) shifted by a resize. */
  int* ia = malloc(sizeof(int) * ((1 << 20) + 16));
  int* ib = malloc(sizeof(int) * ((1 << 20) + 16));
  CHECK(ia && ib, "malloc");
  for (long i = 0; i < (1 << 20) + 16; ++i) ia[i] = (int)(mt_rank * 3000000 + i), ib[i] = -1;
  MPI_Datatype big, inner, shifted;
  MPI_Type_contiguous(1 << 20, MPI_INT, &big);
  MPI_Type_commit(&big);
  MPI_Aint disp = 8 * sizeof(int);
  int one = 1;
  MPI_Type_contiguous(1 << 19, MPI_INT, &inner);
  MPI_Type_create_struct(1, &one, &disp, &inner, &shifted); /* data at ints 8 .. 8 + 2^19 */
  MPI_Type_commit(&shifted);
  MPI_Irecv(ib, 1, big, peer, 4, MPI_COMM_WORLD, &rq);
  MPI_Send(ia, 1, big, peer, 4, MPI_COMM_WORLD);
  MPI_Wait(&rq, &st);
  int cnt = -1;
  MPI_Get_count(&st, big, &cnt);
  CHECK(cnt == 1, "big count %d", cnt);
  for (long i = 0; i < (1 << 20); ++i) CHECK(ib[i] == (int)(peer * 3000000 + i), "big ib[%ld] = %d", i, ib[i]);
  CHECK(ib[(1 << 20)] == -1, "big: nothing past the end");
  for (long i = 0; i < (1 << 20) + 16; ++i) ib[i] = -1;
  MPI_Irecv(ib, 2, shifted, peer, 5, MPI_COMM_WORLD, &rq); /* 2 elements, extent = 8 + 2^19 ints */
  MPI_Send(ia, 2, shifted, peer, 5, MPI_COMM_WORLD);
  MPI_Wait(&rq, &st);
  MPI_Get_count(&st, shifted, &cnt);
  CHECK(cnt == 2, "shifted count %d", cnt);
  MPI_Aint lb, ext;
  MPI_Type_get_extent(shifted, &lb, &ext);
  CHECK(lb == 8 * (MPI_Aint)sizeof(int) && ext == (MPI_Aint)sizeof(int) << 19, "shifted lb %ld extent %ld", (long)lb,
        (long)ext);
  /* Element k's data is at ints 8 + k * 2^19: both elements form one block. */
  for (long i = 0; i < (1 << 20) + 16; ++i) {
    int in = i >= 8 && i < 8 + (1 << 20);
    CHECK(ib[i] == (in ? (int)(peer * 3000000 + i) : -1), "shifted ib[%ld] = %d", i, ib[i]);
  }
  MPI_Type_free(&vec);
  MPI_Type_free(&big);
  MPI_Type_free(&inner);
  MPI_Type_free(&shifted);
  free(src);
  free(dst);
  free(flat);
  free(ia);
  free(ib);
  return mt_pass();
}
