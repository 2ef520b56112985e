/* MPI_Type_create_subarray: halo exchange of a 2D block (rows and columns
 * of the interior into the neighbours' halos) in C and Fortran order, and a
 * 3D face. Ring: each rank sends its faces to next and receives prev's. */
#include "mpitest.h"

#define NY 10
#define NX 12

static int v(int rank, int y, int x) { return rank * 10000 + y * 100 + x; }

int main(int argc, char** argv) {
  mt_start("type_subarray", &argc, &argv);
  int next = (mt_rank + 1) % mt_size, prev = (mt_rank + mt_size - 1) % mt_size;
  MPI_Status st;
  static int g[NY][NX], h[NY][NX];
  for (int y = 0; y < NY; ++y)
    for (int x = 0; x < NX; ++x) g[y][x] = v(mt_rank, y, x), h[y][x] = -1;

  int sizes[2] = {NY, NX};
  /* Interior is rows 1..NY-2, columns 1..NX-2. */
  int row_sub[2] = {1, NX - 2}, col_sub[2] = {NY - 2, 1};
  int top_in[2] = {1, 1}, bottom_halo[2] = {NY - 1, 1};
  int left_in[2] = {1, 1}, right_halo[2] = {1, NX - 1};
  MPI_Datatype top, bhalo, left, rhalo;
  MPI_Type_create_subarray(2, sizes, row_sub, top_in, MPI_ORDER_C, MPI_INT, &top);
  MPI_Type_create_subarray(2, sizes, row_sub, bottom_halo, MPI_ORDER_C, MPI_INT, &bhalo);
  MPI_Type_create_subarray(2, sizes, col_sub, left_in, MPI_ORDER_C, MPI_INT, &left);
  MPI_Type_create_subarray(2, sizes, col_sub, right_halo, MPI_ORDER_C, MPI_INT, &rhalo);
  MPI_Type_commit(&top);
  MPI_Type_commit(&bhalo);
  MPI_Type_commit(&left);
  MPI_Type_commit(&rhalo);
  MPI_Aint lb, ext;
  MPI_Type_get_extent(left, &lb, &ext);
  CHECK(lb == 0 && ext == (MPI_Aint)sizeof g, "subarray extent is the whole array: %ld", (long)ext);
  /* My top interior row -> next's bottom halo; my left interior column -> next's right halo. */
  MPI_Sendrecv(g, 1, top, next, 1, h, 1, bhalo, prev, 1, MPI_COMM_WORLD, &st);
  MPI_Sendrecv(g, 1, left, next, 2, h, 1, rhalo, prev, 2, MPI_COMM_WORLD, &st);
  for (int y = 0; y < NY; ++y)
    for (int x = 0; x < NX; ++x) {
      int want = -1;
      if (y == NY - 1 && x >= 1 && x <= NX - 2) want = v(prev, 1, x);
      if (x == NX - 1 && y >= 1 && y <= NY - 2) want = v(prev, y, 1);
      CHECK(h[y][x] == want, "2D halo h[%d][%d] = %d, want %d", y, x, h[y][x], want);
    }

  /* Fortran order over the same memory seen as a (NX, NY) column-major
   * array: the subarray (x in 2..4, y in 3..7) is g[3..7][2..4]. */
  int fsizes[2] = {NX, NY}, fsub[2] = {3, 5}, fstart[2] = {2, 3};
  MPI_Datatype fsa;
  MPI_Type_create_subarray(2, fsizes, fsub, fstart, MPI_ORDER_FORTRAN, MPI_INT, &fsa);
  MPI_Type_commit(&fsa);
  int packed[15];
  MPI_Sendrecv(g, 1, fsa, next, 3, packed, 15, MPI_INT, prev, 3, MPI_COMM_WORLD, &st);
  for (int y = 0, k = 0; y < 5; ++y)
    for (int x = 0; x < 3; ++x, ++k) CHECK(packed[k] == v(prev, 3 + y, 2 + x), "Fortran subarray %d", k);

  /* 3D: a [6][5][4] block; the face x == 2 (a 6x5 plane of stride 4) and
   * the face z == 0 interior. */
  static int c[6][5][4], r[6][5][4];
  for (int z = 0; z < 6; ++z)
    for (int y = 0; y < 5; ++y)
      for (int x = 0; x < 4; ++x) c[z][y][x] = v(mt_rank, z * 10 + y, x), r[z][y][x] = -1;
  int s3[3] = {6, 5, 4}, xface[3] = {6, 5, 1}, xat[3] = {0, 0, 2};
  int zface[3] = {1, 3, 2}, zat[3] = {0, 1, 1};
  MPI_Datatype fx, fz;
  MPI_Type_create_subarray(3, s3, xface, xat, MPI_ORDER_C, MPI_INT, &fx);
  MPI_Type_create_subarray(3, s3, zface, zat, MPI_ORDER_C, MPI_INT, &fz);
  MPI_Type_commit(&fx);
  MPI_Type_commit(&fz);
  MPI_Request rq[4];
  MPI_Irecv(r, 1, fx, prev, 4, MPI_COMM_WORLD, &rq[0]);
  MPI_Irecv(r, 1, fz, prev, 5, MPI_COMM_WORLD, &rq[1]);
  MPI_Isend(c, 1, fx, next, 4, MPI_COMM_WORLD, &rq[2]);
  MPI_Isend(c, 1, fz, next, 5, MPI_COMM_WORLD, &rq[3]);
  MPI_Waitall(4, rq, MPI_STATUSES_IGNORE);
  for (int z = 0; z < 6; ++z)
    for (int y = 0; y < 5; ++y)
      for (int x = 0; x < 4; ++x) {
        int in = x == 2 || (z == 0 && y >= 1 && y <= 3 && x >= 1 && x <= 2);
        int want = in ? v(prev, z * 10 + y, x) : -1;
        CHECK(r[z][y][x] == want, "3D r[%d][%d][%d] = %d want %d", z, y, x, r[z][y][x], want);
      }
  MPI_Type_free(&top);
  MPI_Type_free(&bhalo);
  MPI_Type_free(&left);
  MPI_Type_free(&rhalo);
  MPI_Type_free(&fsa);
  MPI_Type_free(&fx);
  MPI_Type_free(&fz);
  return mt_pass();
}
