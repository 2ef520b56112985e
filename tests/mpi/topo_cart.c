/* Cartesian topologies: Dims_create, Cart_create/get/rank/coords/shift/sub,
 * Cartdim_get, Topo_test, a periodic halo exchange along each dimension. */
#include "mpitest.h"

static void dims_case(int n, int nd, const int* in, const int* want) {
  int d[4];
  for (int i = 0; i < nd; i++) d[i] = in[i];
  CHECK(MPI_Dims_create(n, nd, d) == MPI_SUCCESS, "Dims_create(%d, %d)", n, nd);
  for (int i = 0; i < nd; i++) CHECK(d[i] == want[i], "Dims_create(%d,%d)[%d] = %d, want %d", n, nd, i, d[i], want[i]);
}

int main(int argc, char** argv) {
  mt_start("topo_cart", &argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  { int z[2] = {0, 0}, w[2] = {3, 2}; dims_case(6, 2, z, w); }
  { int z[3] = {0, 0, 0}, w[3] = {3, 2, 2}; dims_case(12, 3, z, w); }
  { int z[2] = {0, 0}, w[2] = {7, 1}; dims_case(7, 2, z, w); }
  { int z[3] = {0, 3, 0}, w[3] = {4, 3, 2}; dims_case(24, 3, z, w); }
  { int z[2] = {0, 0}, w[2] = {1, 1}; dims_case(1, 2, z, w); }
  { int bad[2] = {0, 5}; CHECK(MPI_Dims_create(12, 2, bad) == MPI_ERR_DIMS, "12 nodes over a fixed 5"); }

  int st = -1;
  MPI_Topo_test(MPI_COMM_WORLD, &st);
  CHECK(st == MPI_UNDEFINED, "world has no topology (%d)", st);

  int dims[2] = {0, 0}, periods[2] = {1, 0};
  MPI_Dims_create(mt_size, 2, dims);
  MPI_Comm cart;
  CHECK(MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 1, &cart) == MPI_SUCCESS, "Cart_create");
  CHECK(cart != MPI_COMM_NULL, "every rank is in a full grid");
  MPI_Topo_test(cart, &st);
  CHECK(st == MPI_CART, "Topo_test %d", st);
  int nd = -1;
  MPI_Cartdim_get(cart, &nd);
  CHECK(nd == 2, "Cartdim_get %d", nd);
  int r, gd[2], gp[2], co[2];
  MPI_Comm_rank(cart, &r);
  MPI_Cart_get(cart, 2, gd, gp, co);
  CHECK(gd[0] == dims[0] && gd[1] == dims[1] && gp[0] == 1 && gp[1] == 0, "Cart_get dims/periods");
  CHECK(co[0] == r / dims[1] && co[1] == r % dims[1], "row-major coords (%d,%d) of rank %d", co[0], co[1], r);
  for (int q = 0; q < mt_size; q++) {
    int c2[2], back = -1;
    MPI_Cart_coords(cart, q, 2, c2);
    MPI_Cart_rank(cart, c2, &back);
    CHECK(back == q, "coords/rank round trip of %d gives %d", q, back);
  }
  /* Periodic dimension 0 wraps; non-periodic dimension 1 does not. */
  int wrap[2] = {co[0] + dims[0], co[1]}, w = -1;
  CHECK(MPI_Cart_rank(cart, wrap, &w) == MPI_SUCCESS && w == r, "periodic wrap");
  int off[2] = {co[0], dims[1]};
  CHECK(MPI_Cart_rank(cart, off, &w) != MPI_SUCCESS, "outside a non-periodic dimension is an error");

  /* Halo exchange: send my rank to dest, receive source's rank. */
  for (int dir = 0; dir < 2; dir++) {
    for (int disp = 1; disp <= 2; disp++) {
      int src, dst;
      MPI_Cart_shift(cart, dir, disp, &src, &dst);
      if (dir == 1) { /* non-periodic: edges see MPI_PROC_NULL */
        CHECK((co[1] + disp >= dims[1]) == (dst == MPI_PROC_NULL), "dest at the edge dir %d disp %d", dir, disp);
        CHECK((co[1] - disp < 0) == (src == MPI_PROC_NULL), "source at the edge dir %d disp %d", dir, disp);
      }
      int got = -7;
      MPI_Sendrecv(&r, 1, MPI_INT, dst, 5, &got, 1, MPI_INT, src, 5, cart, MPI_STATUS_IGNORE);
      CHECK(src == MPI_PROC_NULL ? got == -7 : got == src, "halo dir %d disp %d got %d from %d", dir, disp, got, src);
    }
  }

  /* Rows: keep dimension 1. */
  int keep[2] = {0, 1};
  MPI_Comm row;
  CHECK(MPI_Cart_sub(cart, keep, &row) == MPI_SUCCESS, "Cart_sub");
  int rs, rr;
  MPI_Comm_size(row, &rs);
  MPI_Comm_rank(row, &rr);
  CHECK(rs == dims[1] && rr == co[1], "row size %d rank %d", rs, rr);
  MPI_Cartdim_get(row, &nd);
  CHECK(nd == 1, "row is 1-D (%d)", nd);
  int sum = 0;
  MPI_Allreduce(&r, &sum, 1, MPI_INT, MPI_SUM, row);
  int want = 0;
  for (int j = 0; j < dims[1]; j++) want += co[0] * dims[1] + j;
  CHECK(sum == want, "row sum %d want %d", sum, want);
  MPI_Comm_free(&row);
  /* A duplicate keeps the topology. */
  MPI_Comm dupc;
  MPI_Comm_dup(cart, &dupc);
  MPI_Topo_test(dupc, &st);
  CHECK(st == MPI_CART, "Comm_dup keeps the Cartesian topology (%d)", st);
  int dd[2], dp[2], dc[2];
  MPI_Cart_get(dupc, 2, dd, dp, dc);
  CHECK(dd[0] == dims[0] && dd[1] == dims[1] && dc[0] == co[0] && dc[1] == co[1], "dup grid");
  MPI_Comm_free(&dupc);
  MPI_Comm_free(&cart);

  /* A grid smaller than the communicator: the last rank is left out. */
  if (mt_size > 1) {
    int d1[1] = {mt_size - 1}, p1[1] = {0};
    MPI_Comm small;
    CHECK(MPI_Cart_create(MPI_COMM_WORLD, 1, d1, p1, 0, &small) == MPI_SUCCESS, "Cart_create small");
    CHECK((mt_rank == mt_size - 1) == (small == MPI_COMM_NULL), "left-out rank gets MPI_COMM_NULL");
    if (small != MPI_COMM_NULL) MPI_Comm_free(&small);
    int big[1] = {mt_size + 1};
    CHECK(MPI_Cart_create(MPI_COMM_WORLD, 1, big, p1, 0, &small) == MPI_ERR_DIMS, "grid larger than comm");
  }
  return mt_pass();
}
