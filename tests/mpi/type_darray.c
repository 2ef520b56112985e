/* MPI_Type_create_darray against hand-computed layouts (2-D block x
 * cyclic(2) in C and Fortran order, 3-D none x cyclic x block), bounds
 * (lb 0, extent = the whole array), envelope/contents, argument errors, and
 * a global array scattered in darray pieces to every rank and gathered
 * back at rank 0. Any process count. */
#include "mpitest.h"

/* Packs one darray piece of an int array holding 0, 1, 2, ... and compares
 * it with the hand-computed linear indices. */
static void check_layout(const char* what, int rank, int ndims, const int* gsizes, const int* distribs,
                         const int* dargs, const int* psizes, int order, const int* want, int nwant) {
  MPI_Datatype t;
  MPI_Type_create_darray(4, rank, ndims, gsizes, distribs, dargs, psizes, order, MPI_INT, &t);
  MPI_Type_commit(&t);
  int total = 1;
  for (int d = 0; d < ndims; ++d) total *= gsizes[d];
  int size = -1;
  MPI_Aint lb = -1, extent = -1;
  MPI_Type_size(t, &size);
  MPI_Type_get_extent(t, &lb, &extent);
  CHECK(size == nwant * 4, "%s rank %d: size %d, want %d", what, rank, size, nwant * 4);
  CHECK(lb == 0 && extent == total * 4, "%s rank %d: lb %ld extent %ld", what, rank, (long)lb, (long)extent);
  int array[64], packed[64];
  for (int i = 0; i < total; ++i) array[i] = i;
  int pos = 0;
  MPI_Pack(array, 1, t, packed, sizeof packed, &pos, MPI_COMM_SELF);
  CHECK(pos == nwant * 4, "%s rank %d: packed %d bytes", what, rank, pos);
  for (int i = 0; i < nwant; ++i)
    CHECK(packed[i] == want[i], "%s rank %d: element %d is %d, want %d", what, rank, i, packed[i], want[i]);
  MPI_Type_free(&t);
}

int main(int argc, char** argv) {
  mt_start("type_darray", &argc, &argv);
  char text[MPI_MAX_ERROR_STRING];

  /* 4 x 6, rows BLOCK over 2, columns CYCLIC(2) over 2; grid 2 x 2, ranks
   * row-major: rank = 2 * row coordinate + column coordinate. */
  const int g2[2] = {4, 6}, dist2[2] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC};
  const int darg2[2] = {MPI_DISTRIBUTE_DFLT_DARG, 2}, p2[2] = {2, 2};
  /* C order: linear = 6 * i + j; rank 0 has rows 0-1, columns 0 1 4 5 */
  const int c0[] = {0, 1, 4, 5, 6, 7, 10, 11}, c1[] = {2, 3, 8, 9};
  const int c2[] = {12, 13, 16, 17, 18, 19, 22, 23}, c3[] = {14, 15, 20, 21};
  check_layout("2-D C", 0, 2, g2, dist2, darg2, p2, MPI_ORDER_C, c0, 8);
  check_layout("2-D C", 1, 2, g2, dist2, darg2, p2, MPI_ORDER_C, c1, 4);
  check_layout("2-D C", 2, 2, g2, dist2, darg2, p2, MPI_ORDER_C, c2, 8);
  check_layout("2-D C", 3, 2, g2, dist2, darg2, p2, MPI_ORDER_C, c3, 4);
  /* Fortran order: linear = i + 4 * j */
  const int f0[] = {0, 1, 4, 5, 16, 17, 20, 21}, f1[] = {8, 9, 12, 13};
  const int f2[] = {2, 3, 6, 7, 18, 19, 22, 23}, f3[] = {10, 11, 14, 15};
  check_layout("2-D Fortran", 0, 2, g2, dist2, darg2, p2, MPI_ORDER_FORTRAN, f0, 8);
  check_layout("2-D Fortran", 1, 2, g2, dist2, darg2, p2, MPI_ORDER_FORTRAN, f1, 4);
  check_layout("2-D Fortran", 2, 2, g2, dist2, darg2, p2, MPI_ORDER_FORTRAN, f2, 8);
  check_layout("2-D Fortran", 3, 2, g2, dist2, darg2, p2, MPI_ORDER_FORTRAN, f3, 4);

  /* 2 x 3 x 4 (C order, linear = 12 i + 4 j + k): NONE, CYCLIC (default
   * 1) over 2, BLOCK (default 2) over 2. */
  const int g3[3] = {2, 3, 4};
  const int dist3[3] = {MPI_DISTRIBUTE_NONE, MPI_DISTRIBUTE_CYCLIC, MPI_DISTRIBUTE_BLOCK};
  const int darg3[3] = {MPI_DISTRIBUTE_DFLT_DARG, MPI_DISTRIBUTE_DFLT_DARG, MPI_DISTRIBUTE_DFLT_DARG};
  const int p3[3] = {1, 2, 2};
  const int t0[] = {0, 1, 8, 9, 12, 13, 20, 21}, t1[] = {2, 3, 10, 11, 14, 15, 22, 23};
  const int t2[] = {4, 5, 16, 17}, t3[] = {6, 7, 18, 19};
  check_layout("3-D", 0, 3, g3, dist3, darg3, p3, MPI_ORDER_C, t0, 8);
  check_layout("3-D", 1, 3, g3, dist3, darg3, p3, MPI_ORDER_C, t1, 8);
  check_layout("3-D", 2, 3, g3, dist3, darg3, p3, MPI_ORDER_C, t2, 4);
  check_layout("3-D", 3, 3, g3, dist3, darg3, p3, MPI_ORDER_C, t3, 4);

  /* envelope and contents keep the MPI constants */
  MPI_Datatype t;
  MPI_Type_create_darray(4, 1, 2, g2, dist2, darg2, p2, MPI_ORDER_FORTRAN, MPI_INT, &t);
  int ni, na, nt, comb;
  MPI_Type_get_envelope(t, &ni, &na, &nt, &comb);
  CHECK(comb == MPI_COMBINER_DARRAY && ni == 4 * 2 + 4 && na == 0 && nt == 1, "envelope %d %d %d %d", ni, na, nt,
        comb);
  int ints[12];
  MPI_Aint addrs[1];
  MPI_Datatype types[1];
  MPI_Type_get_contents(t, 12, 0, 1, ints, addrs, types);
  const int want_ints[12] = {4, 1, 2, 4, 6, MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC, MPI_DISTRIBUTE_DFLT_DARG, 2,
                             2, 2, MPI_ORDER_FORTRAN};
  for (int i = 0; i < 12; ++i) CHECK(ints[i] == want_ints[i], "contents int %d: %d, want %d", i, ints[i], want_ints[i]);
  CHECK(types[0] == MPI_INT, "contents type");
  MPI_Type_free(&t);

  /* errors */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const int g1[1] = {10}, block[1] = {MPI_DISTRIBUTE_BLOCK}, none[1] = {MPI_DISTRIBUTE_NONE};
  const int three[1] = {3}, dflt[1] = {MPI_DISTRIBUTE_DFLT_DARG}, two[1] = {2}, bogus[1] = {77};
  int err = MPI_Type_create_darray(2, 0, 1, g1, block, three, two, MPI_ORDER_C, MPI_INT, &t);
  CHECK(mt_error(err, text) == MPI_ERR_ARG, "blocks of 3 on 2 processes for 10: %s", text);
  err = MPI_Type_create_darray(2, 0, 1, g1, none, dflt, two, MPI_ORDER_C, MPI_INT, &t);
  CHECK(mt_error(err, text) == MPI_ERR_ARG, "NONE on 2 processes: %s", text);
  err = MPI_Type_create_darray(3, 0, 1, g1, block, dflt, two, MPI_ORDER_C, MPI_INT, &t);
  CHECK(mt_error(err, text) == MPI_ERR_ARG, "grid of 2 for size 3: %s", text);
  err = MPI_Type_create_darray(2, 2, 1, g1, block, dflt, two, MPI_ORDER_C, MPI_INT, &t);
  CHECK(mt_error(err, text) == MPI_ERR_ARG, "rank 2 of 2: %s", text);
  err = MPI_Type_create_darray(2, 0, 1, g1, bogus, dflt, two, MPI_ORDER_C, MPI_INT, &t);
  CHECK(mt_error(err, text) == MPI_ERR_ARG, "distribution 77: %s", text);
  err = MPI_Type_create_darray(2, 0, 1, g1, block, dflt, two, 5, MPI_INT, &t);
  CHECK(mt_error(err, text) == MPI_ERR_ARG, "order 5: %s", text);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);

  /* 9 x 7 doubles over a grid of all the processes: rows CYCLIC(2), columns
   * BLOCK. Each rank sends its piece of the global array to rank 0, which
   * receives rank r's piece with rank r's darray type: every element comes
   * back exactly once. */
  int dims[2] = {0, 0};
  MPI_Dims_create(mt_size, 2, dims);
  const int gg[2] = {9, 7}, dd[2] = {MPI_DISTRIBUTE_CYCLIC, MPI_DISTRIBUTE_BLOCK};
  const int da[2] = {2, MPI_DISTRIBUTE_DFLT_DARG};
  double global[63], assembled[63];
  for (int i = 0; i < 63; ++i) global[i] = 1000.0 + i, assembled[i] = -1;
  MPI_Datatype mine;
  MPI_Type_create_darray(mt_size, mt_rank, 2, gg, dd, da, dims, MPI_ORDER_C, MPI_DOUBLE, &mine);
  MPI_Type_commit(&mine);
  MPI_Request req;
  MPI_Isend(global, 1, mine, 0, 9, MPI_COMM_WORLD, &req);
  if (mt_rank == 0) {
    for (int r = 0; r < mt_size; ++r) {
      MPI_Datatype theirs;
      MPI_Type_create_darray(mt_size, r, 2, gg, dd, da, dims, MPI_ORDER_C, MPI_DOUBLE, &theirs);
      MPI_Type_commit(&theirs);
      MPI_Recv(assembled, 1, theirs, r, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Type_free(&theirs);
    }
    for (int i = 0; i < 63; ++i) CHECK(assembled[i] == global[i], "assembled[%d] = %g", i, assembled[i]);
  }
  MPI_Wait(&req, MPI_STATUS_IGNORE);
  MPI_Type_free(&mine);
  return mt_pass();
}
