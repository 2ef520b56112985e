/* Cartesian topologies: Dims_create (most balanced split, fixed entries,
 * errors), Cart_create/get/rank/coords/shift/sub (some, all and no
 * dimensions kept), Cartdim_get, Topo_test, a periodic halo exchange along
 * each dimension. */
#include "mpitest.h"

static void dims_case(int n, int nd, const int* in, const int* want) {
  int d[8];
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
  /* As close to each other as possible: the smallest max - min, not a
   * greedy split (12 x 6); the same answers as MPICH. */
  { int z[2] = {0, 0}, w[2] = {9, 8}; dims_case(72, 2, z, w); }
  { int z[3] = {0, 0, 0}, w[3] = {6, 4, 3}; dims_case(72, 3, z, w); }
  { int z[4] = {0, 0, 0, 0}, w[4] = {4, 3, 3, 2}; dims_case(72, 4, z, w); }
  { int z[3] = {0, 0, 0}, w[3] = {10, 6, 6}; dims_case(360, 3, z, w); }
  { int z[3] = {0, 0, 0}, w[3] = {21, 16, 15}; dims_case(5040, 3, z, w); }
  { int z[4] = {0, 0, 0, 0}, w[4] = {10, 9, 8, 7}; dims_case(5040, 4, z, w); }
  { int z[2] = {0, 0}, w[2] = {55, 42}; dims_case(2310, 2, z, w); }
  /* Equal spread and smallest factor: the larger second smallest wins. */
  { int z[5] = {0, 0, 0, 0, 0}, w[5] = {14, 14, 9, 8, 7}; dims_case(98784, 5, z, w); }
  { int z[6] = {0, 0, 0, 0, 0, 0}, w[6] = {10, 10, 8, 6, 6, 5}; dims_case(144000, 6, z, w); }
  { int z[4] = {0, 0, 0, 0}, w[4] = {7, 1, 1, 1}; dims_case(7, 4, z, w); }
  { int z[1] = {0}, w[1] = {72}; dims_case(72, 1, z, w); }
  /* Fixed entries stay; the free ones are balanced among themselves. */
  { int z[3] = {0, 3, 0}, w[3] = {6, 3, 4}; dims_case(72, 3, z, w); }
  { int z[3] = {2, 0, 0}, w[3] = {2, 6, 6}; dims_case(72, 3, z, w); }
  { int z[3] = {0, 9, 0}, w[3] = {1, 9, 1}; dims_case(9, 3, z, w); }
  { int z[2] = {3, 4}, w[2] = {3, 4}; dims_case(12, 2, z, w); }
  /* Large inputs stay quick: a prime, a highly composite number. */
  { int z[3] = {0, 0, 0}, w[3] = {2147483647, 1, 1}; dims_case(2147483647, 3, z, w); }
  { int z[2] = {0, 0}, w[2] = {32768, 32768}; dims_case(1 << 30, 2, z, w); }
  { int z[6] = {0, 0, 0, 0, 0, 0}, w[6] = {34, 33, 30, 30, 28, 26}; dims_case(735134400, 6, z, w); }
  { int bad[2] = {0, 5}; CHECK(MPI_Dims_create(12, 2, bad) == MPI_ERR_DIMS, "12 nodes over a fixed 5"); }
  { int bad[2] = {2, 2}; CHECK(MPI_Dims_create(6, 2, bad) == MPI_ERR_DIMS, "all fixed, product 4 != 6"); }
  { int bad[2] = {0, -1}; CHECK(MPI_Dims_create(6, 2, bad) == MPI_ERR_DIMS, "negative entry"); }
  { int bad[3] = {65536, 65536, 0}; CHECK(MPI_Dims_create(12, 3, bad) == MPI_ERR_DIMS, "fixed product overflows"); }
  { int d[2] = {0, 0}; CHECK(MPI_Dims_create(0, 2, d) == MPI_ERR_ARG, "nnodes 0"); }
  { int d[2] = {0, 0}; CHECK(MPI_Dims_create(4, -1, d) == MPI_ERR_DIMS, "negative ndims"); }

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
  /* Every dimension kept: the same grid, ranks and coordinates. */
  int all[2] = {1, 1};
  MPI_Comm same;
  CHECK(MPI_Cart_sub(cart, all, &same) == MPI_SUCCESS, "Cart_sub keeping every dimension");
  CHECK(same != MPI_COMM_NULL, "Cart_sub keeping every dimension gives a communicator");
  MPI_Comm_size(same, &rs);
  MPI_Comm_rank(same, &rr);
  CHECK(rs == mt_size && rr == r, "all kept: size %d rank %d (want %d, %d)", rs, rr, mt_size, r);
  MPI_Topo_test(same, &st);
  CHECK(st == MPI_CART, "all kept: Topo_test %d", st);
  MPI_Cartdim_get(same, &nd);
  CHECK(nd == 2, "all kept: %d dimensions", nd);
  {
    int sd[2], sp[2], sc[2];
    MPI_Cart_get(same, 2, sd, sp, sc);
    CHECK(sd[0] == dims[0] && sd[1] == dims[1] && sp[0] == 1 && sp[1] == 0 && sc[0] == co[0] && sc[1] == co[1],
          "all kept: grid %dx%d periods %d%d coords (%d,%d)", sd[0], sd[1], sp[0], sp[1], sc[0], sc[1]);
    int src, dst, src0, dst0;
    MPI_Cart_shift(same, 0, 1, &src, &dst);
    MPI_Cart_shift(cart, 0, 1, &src0, &dst0);
    CHECK(src == src0 && dst == dst0, "all kept: same shift neighbours");
    sum = 0;
    MPI_Allreduce(&r, &sum, 1, MPI_INT, MPI_SUM, same);
    CHECK(sum == mt_size * (mt_size - 1) / 2, "all kept: allreduce %d", sum);
    /* and again from the sub-grid itself */
    MPI_Comm again;
    CHECK(MPI_Cart_sub(same, all, &again) == MPI_SUCCESS, "Cart_sub of the full sub-grid");
    MPI_Comm_size(again, &rs);
    CHECK(rs == mt_size, "sub of sub size %d", rs);
    MPI_Comm_free(&again);
  }
  MPI_Comm_free(&same);
  /* Every dimension dropped: a 0-dimensional grid of one process, at every
   * rank (MPI-3.1 7.5.7), congruent to MPI_COMM_SELF. */
  int none[2] = {0, 0};
  MPI_Comm zero;
  CHECK(MPI_Cart_sub(cart, none, &zero) == MPI_SUCCESS, "Cart_sub dropping every dimension");
  CHECK(zero != MPI_COMM_NULL, "every rank gets the 0-dimensional grid");
  MPI_Comm_size(zero, &rs);
  CHECK(rs == 1, "0-dimensional grid of size %d", rs);
  MPI_Topo_test(zero, &st);
  CHECK(st == MPI_CART, "0-dimensional: Topo_test %d", st);
  nd = -1;
  MPI_Cartdim_get(zero, &nd);
  CHECK(nd == 0, "0-dimensional: Cartdim_get %d", nd);
  int cmp = -1;
  MPI_Comm_compare(zero, MPI_COMM_SELF, &cmp);
  CHECK(cmp == MPI_CONGRUENT, "0-dimensional grid vs MPI_COMM_SELF: %d", cmp);
  {
    int zr = -1;
    CHECK(MPI_Cart_rank(zero, NULL, &zr) == MPI_SUCCESS && zr == 0, "0-dimensional Cart_rank %d", zr);
    MPI_Comm zz;
    CHECK(MPI_Cart_sub(zero, NULL, &zz) == MPI_SUCCESS, "Cart_sub of a 0-dimensional grid");
    MPI_Cartdim_get(zz, &nd);
    MPI_Comm_size(zz, &rs);
    CHECK(nd == 0 && rs == 1, "still 0-dimensional (%d dims, size %d)", nd, rs);
    MPI_Comm_free(&zz);
  }
  MPI_Comm_free(&zero);
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

  /* Three dimensions, sub-grids keeping two of them. */
  {
    int d3[3] = {0, 0, 0}, p3[3] = {0, 1, 0};
    MPI_Dims_create(mt_size, 3, d3);
    MPI_Comm c3, plane;
    CHECK(MPI_Cart_create(MPI_COMM_WORLD, 3, d3, p3, 0, &c3) == MPI_SUCCESS, "3-D Cart_create");
    int c[3];
    MPI_Cart_coords(c3, mt_rank, 3, c);
    int keep3[3] = {1, 0, 1};
    CHECK(MPI_Cart_sub(c3, keep3, &plane) == MPI_SUCCESS, "3-D Cart_sub");
    int ps, pr, pd[2], pp[2], pc[2];
    MPI_Comm_size(plane, &ps);
    MPI_Comm_rank(plane, &pr);
    MPI_Cart_get(plane, 2, pd, pp, pc);
    CHECK(ps == d3[0] * d3[2] && pr == c[0] * d3[2] + c[2], "plane size %d rank %d", ps, pr);
    CHECK(pd[0] == d3[0] && pd[1] == d3[2] && pp[0] == 0 && pp[1] == 0 && pc[0] == c[0] && pc[1] == c[2],
          "plane grid");
    MPI_Comm_free(&plane);
    int keep_all3[3] = {1, 1, 1};
    CHECK(MPI_Cart_sub(c3, keep_all3, &plane) == MPI_SUCCESS, "3-D Cart_sub keeping all");
    MPI_Comm_size(plane, &ps);
    MPI_Cartdim_get(plane, &nd);
    CHECK(ps == mt_size && nd == 3, "3-D all kept: size %d dims %d", ps, nd);
    MPI_Comm_free(&plane);
    MPI_Comm_free(&c3);
  }
  /* Cartesian calls on a communicator without a grid. */
  {
    int bogus;
    CHECK(MPI_Cartdim_get(MPI_COMM_WORLD, &bogus) == MPI_ERR_TOPOLOGY, "Cartdim_get on world");
    CHECK(MPI_Cart_sub(MPI_COMM_WORLD, keep, &row) == MPI_ERR_TOPOLOGY, "Cart_sub on world");
  }

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
