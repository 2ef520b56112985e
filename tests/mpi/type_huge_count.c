/* Datatypes whose cost must not grow with their count: committing a vector,
 * hvector or indexed_block of INT_MAX/2 blocks finishes at once (an alarm
 * ends the program if it does not), the sizes (MPI_Count) and extents are
 * exact, count 0 of them is communicated and packed, and all of a large-ish
 * one (more blocks than the engine flattens) is packed and communicated
 * correctly. Ring exchange: runs at any process
 * count. */
#include <limits.h>
#include <unistd.h>

#include "mpitest.h"

#define MID (1 << 20) /* blocks of the large-ish vector: 4 MiB of ints packed */

int main(int argc, char** argv) {
  mt_start("type_huge_count", &argc, &argv);
  alarm(30); /* flattening INT_MAX/2 blocks takes minutes and gigabytes */
  int next = (mt_rank + 1) % mt_size, prev = (mt_rank + mt_size - 1) % mt_size;
  const MPI_Count n = INT_MAX / 2;

  MPI_Datatype vec, hvec, iblock, cont;
  MPI_Type_vector((int)n, 1, 2, MPI_INT, &vec);
  MPI_Type_commit(&vec);
  MPI_Count size = 0, lb = -1, extent = 0, tlb = -1, textent = 0;
  MPI_Type_size_x(vec, &size);
  MPI_Type_get_extent_x(vec, &lb, &extent);
  MPI_Type_get_true_extent_x(vec, &tlb, &textent);
  CHECK(size == n * 4, "vector size %lld", (long long)size);
  CHECK(lb == 0 && extent == (2 * n - 1) * 4, "vector lb %lld extent %lld", (long long)lb, (long long)extent);
  CHECK(tlb == 0 && textent == (2 * n - 1) * 4, "vector true lb %lld extent %lld", (long long)tlb, (long long)textent);
  int isize = 0;
  MPI_Type_size(vec, &isize);
  CHECK(isize == MPI_UNDEFINED, "int size of a 4 GiB type: %d", isize);
  MPI_Aint alb = -1, aext = 0;
  MPI_Type_get_extent(vec, &alb, &aext);
  CHECK(alb == 0 && aext == (MPI_Aint)((2 * n - 1) * 4), "MPI_Aint extent %ld", (long)aext);

  MPI_Type_create_hvector((int)n, 2, -24, MPI_DOUBLE, &hvec);
  MPI_Type_commit(&hvec);
  MPI_Type_size_x(hvec, &size);
  MPI_Type_get_extent_x(hvec, &lb, &extent);
  CHECK(size == n * 16, "hvector size %lld", (long long)size);
  CHECK(lb == -24 * (n - 1) && extent == 24 * (n - 1) + 16, "hvector lb %lld extent %lld", (long long)lb,
        (long long)extent);

  const int disps[3] = {0, 5, 2};
  MPI_Type_create_indexed_block(3, 2, disps, vec, &iblock);
  MPI_Type_commit(&iblock);
  MPI_Type_size_x(iblock, &size);
  MPI_Type_get_extent_x(iblock, &lb, &extent);
  CHECK(size == 6 * n * 4, "indexed_block size %lld", (long long)size);
  CHECK(lb == 0 && extent == 7 * (2 * n - 1) * 4, "indexed_block extent %lld", (long long)extent);

  /* 1000 of them back to back: 4 TiB of data, an MPI_Count size. */
  MPI_Type_contiguous(1000, vec, &cont);
  MPI_Type_commit(&cont);
  MPI_Type_size_x(cont, &size);
  MPI_Type_get_extent_x(cont, &lb, &extent);
  CHECK(size == 1000 * n * 4, "contiguous of vectors: size %lld", (long long)size);
  CHECK(extent == 1000 * (2 * n - 1) * 4, "contiguous of vectors: extent %lld", (long long)extent);

  /* Count 0 of a huge type: nothing is read or sent. */
  MPI_Status st;
  int dummy = 0;
  MPI_Sendrecv(&dummy, 0, vec, next, 1, &dummy, 0, iblock, prev, 1, MPI_COMM_WORLD, &st);
  int got = -1;
  MPI_Get_count(&st, vec, &got);
  CHECK(got == 0, "count %d", got);
  int pos = 0;
  char none[4];
  MPI_Pack(&dummy, 0, vec, none, (int)sizeof none, &pos, MPI_COMM_WORLD);
  CHECK(pos == 0, "packing 0 elements moved to %d", pos);

  /* A large-ish vector (MID blocks, more than the engine flattens): every
   * other int of a 2*MID array, sent and received into the odd slots. */
  MPI_Datatype mid;
  MPI_Type_vector(MID, 1, 2, MPI_INT, &mid);
  MPI_Type_commit(&mid);
  int* a = malloc(sizeof(int) * 2 * MID);
  int* b = malloc(sizeof(int) * 2 * MID);
  CHECK(a && b, "no memory");
  for (int i = 0; i < 2 * MID; ++i) a[i] = mt_rank * 10000000 + i, b[i] = -1;
  MPI_Sendrecv(a, 1, mid, next, 2, b + 1, 1, mid, prev, 2, MPI_COMM_WORLD, &st);
  for (int i = 0; i < 2 * MID; ++i) {
    const int want = i % 2 ? prev * 10000000 + (i - 1) : -1;
    if (b[i] != want) CHECK(0, "b[%d] = %d, want %d", i, b[i], want);
  }
  MPI_Get_count(&st, mid, &got);
  CHECK(got == 1, "count %d", got);

  /* MPI_Pack of it equals the ints it selects; Unpack scatters them back. */
  int psize = 0;
  MPI_Pack_size(1, mid, MPI_COMM_WORLD, &psize);
  CHECK(psize >= MID * 4, "pack size %d", psize);
  int* packed = malloc((size_t)psize);
  pos = 0;
  MPI_Pack(a, 1, mid, packed, psize, &pos, MPI_COMM_WORLD);
  CHECK(pos == MID * 4, "packed %d bytes", pos);
  for (int i = 0; i < MID; ++i)
    if (packed[i] != a[2 * i]) CHECK(0, "packed[%d] = %d", i, packed[i]);
  for (int i = 0; i < 2 * MID; ++i) b[i] = -1;
  pos = 0;
  MPI_Unpack(packed, MID * 4, &pos, b, 1, mid, MPI_COMM_WORLD);
  for (int i = 0; i < 2 * MID; ++i)
    if (b[i] != (i % 2 ? -1 : a[i])) CHECK(0, "unpacked b[%d] = %d", i, b[i]);

  free(packed);
  free(a);
  free(b);
  MPI_Type_free(&mid);
  MPI_Type_free(&cont);
  MPI_Type_free(&iblock);
  MPI_Type_free(&hvec);
  MPI_Type_free(&vec);
  return mt_pass();
}
