/* Bounds: lb, ub (extent), true lb/extent and sizes, with negative strides
 * and displacements, resized markers, the _x variants; a negative-stride
 * vector sent (reverses an array). Ring exchange: any count. */
#include "mpitest.h"

static void bounds(MPI_Datatype t, long lb, long ext, long tlb, long text, long size, int line) {
  MPI_Aint l, e, tl, te;
  MPI_Count lx, ex, tlx, tex, sx;
  int s;
  MPI_Type_get_extent(t, &l, &e);
  MPI_Type_get_true_extent(t, &tl, &te);
  MPI_Type_get_extent_x(t, &lx, &ex);
  MPI_Type_get_true_extent_x(t, &tlx, &tex);
  MPI_Type_size(t, &s);
  MPI_Type_size_x(t, &sx);
  if (!(l == lb && e == ext && tl == tlb && te == text && s == size && lx == lb && ex == ext && tlx == tlb &&
        tex == text && sx == size))
    mt_fail(line, "bounds", "lb %ld ext %ld tlb %ld text %ld size %d (want %ld %ld %ld %ld %ld)", (long)l, (long)e,
            (long)tl, (long)te, s, lb, ext, tlb, text, size);
}

int main(int argc, char** argv) {
  mt_start("type_extent", &argc, &argv);
  int next = (mt_rank + 1) % mt_size, prev = (mt_rank + mt_size - 1) % mt_size;
  bounds(MPI_INT, 0, 4, 0, 4, 4, __LINE__);
  bounds(MPI_DOUBLE_INT, 0, sizeof(struct { double d; int i; }), 0, 12, 12, __LINE__);

  /* vector(4, 1, -2) of int: data at 0, -8, -16, -24. */
  MPI_Datatype rev;
  MPI_Type_vector(4, 1, -2, MPI_INT, &rev);
  bounds(rev, -24, 28, -24, 28, 16, __LINE__);

  /* indexed with a negative displacement. */
  int bl[2] = {2, 1}, dp[2] = {3, -5};
  MPI_Datatype idx;
  MPI_Type_indexed(2, bl, dp, MPI_SHORT, &idx);
  bounds(idx, -10, 20, -10, 20, 6, __LINE__);

  /* resized sets lb/ub; true bounds stay the data's. */
  MPI_Datatype rs;
  MPI_Type_create_resized(idx, -16, 64, &rs);
  bounds(rs, -16, 64, -10, 20, 6, __LINE__);
  /* A contiguous of the resized type: extent multiplies, true extent covers data. */
  MPI_Datatype c3;
  MPI_Type_contiguous(3, rs, &c3);
  bounds(c3, -16, 192, -10, 128 + 20, 18, __LINE__);
  /* Struct with a resized member keeps its markers (no alignment padding). */
  int one[2] = {1, 1};
  MPI_Aint sd[2] = {0, 100};
  MPI_Datatype sty[2] = {rs, MPI_CHAR}, st;
  MPI_Type_create_struct(2, one, sd, sty, &st);
  bounds(st, -16, 64, -10, 111, 7, __LINE__);
  /* An empty type. */
  MPI_Datatype empty;
  MPI_Type_contiguous(0, MPI_INT, &empty);
  bounds(empty, 0, 0, 0, 0, 0, __LINE__);

  /* Send a reversed array: rev of 8 ints starting at the last one. */
  MPI_Datatype rev8;
  MPI_Type_vector(8, 1, -1, MPI_INT, &rev8);
  MPI_Type_commit(&rev8);
  int a[8], b[8];
  for (int i = 0; i < 8; ++i) a[i] = mt_rank * 10 + i, b[i] = -1;
  MPI_Status s;
  MPI_Sendrecv(&a[7], 1, rev8, next, 1, b, 8, MPI_INT, prev, 1, MPI_COMM_WORLD, &s);
  for (int i = 0; i < 8; ++i) CHECK(b[i] == prev * 10 + 7 - i, "reversed b[%d] = %d", i, b[i]);
  /* And receive reversed. */
  for (int i = 0; i < 8; ++i) b[i] = -1;
  MPI_Sendrecv(a, 8, MPI_INT, next, 2, &b[7], 1, rev8, prev, 2, MPI_COMM_WORLD, &s);
  for (int i = 0; i < 8; ++i) CHECK(b[i] == prev * 10 + 7 - i, "received reversed b[%d] = %d", i, b[i]);
  /* Zero-size derived type: an empty message. */
  MPI_Type_commit(&empty);
  int cnt = -1;
  MPI_Sendrecv(a, 3, empty, next, 3, b, 3, empty, prev, 3, MPI_COMM_WORLD, &s);
  MPI_Get_count(&s, MPI_INT, &cnt);
  CHECK(cnt == 0, "empty type count %d", cnt);
  MPI_Type_free(&rev);
  MPI_Type_free(&idx);
  MPI_Type_free(&rs);
  MPI_Type_free(&c3);
  MPI_Type_free(&st);
  MPI_Type_free(&empty);
  MPI_Type_free(&rev8);
  return mt_pass();
}
