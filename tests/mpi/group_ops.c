/* Groups: union, intersection, difference, incl/excl and their range
 * forms, compare, translate_ranks (MPI_PROC_NULL, MPI_UNDEFINED), rank. */
#include "mpitest.h"

static int gsize(MPI_Group g) {
  int s = -1;
  MPI_Group_size(g, &s);
  return s;
}
static int gcmp(MPI_Group a, MPI_Group b) {
  int r = -1;
  MPI_Group_compare(a, b, &r);
  return r;
}

int main(int argc, char** argv) {
  mt_start("group_ops", &argc, &argv);
  const int n = mt_size, me = mt_rank;
  MPI_Group world, even, odd, u, x, d, reven, rodd, rev;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  CHECK(gsize(world) == n, "world group size %d", gsize(world));
  int r = -1;
  MPI_Group_rank(world, &r);
  CHECK(r == me, "world group rank %d", r);

  int evens[64], ne = 0;
  for (int i = 0; i < n; i += 2) evens[ne++] = i;
  MPI_Group_incl(world, ne, evens, &even);
  MPI_Group_excl(world, ne, evens, &odd);
  CHECK(gsize(even) == (n + 1) / 2 && gsize(odd) == n / 2, "even %d odd %d", gsize(even), gsize(odd));
  MPI_Group_rank(even, &r);
  CHECK(r == (me % 2 == 0 ? me / 2 : MPI_UNDEFINED), "rank in even: %d", r);
  MPI_Group_rank(odd, &r);
  CHECK(r == (me % 2 == 1 ? me / 2 : MPI_UNDEFINED), "rank in odd: %d", r);

  /* Union: evens then odds; translate back to world. */
  MPI_Group_union(even, odd, &u);
  CHECK(gsize(u) == n, "union size %d", gsize(u));
  CHECK(gcmp(u, world) == (n <= 2 ? MPI_IDENT : MPI_SIMILAR), "union vs world %d", gcmp(u, world));
  int ur[64], wr[64];
  for (int i = 0; i < n; ++i) ur[i] = i;
  MPI_Group_translate_ranks(u, n, ur, world, wr);
  for (int i = 0; i < n; ++i) {
    int expect = i < (n + 1) / 2 ? 2 * i : 2 * (i - (n + 1) / 2) + 1;
    CHECK(wr[i] == expect, "union rank %d is world %d, expected %d", i, wr[i], expect);
  }
  /* Union with itself and with a subset changes nothing. */
  MPI_Group t;
  MPI_Group_union(world, even, &t);
  CHECK(gcmp(t, world) == MPI_IDENT, "world u even");
  MPI_Group_free(&t);

  MPI_Group_intersection(world, even, &x);
  CHECK(gcmp(x, even) == MPI_IDENT, "world ^ even = even: %d", gcmp(x, even));
  MPI_Group_difference(world, even, &d);
  CHECK(gcmp(d, odd) == MPI_IDENT, "world - even = odd: %d", gcmp(d, odd));
  MPI_Group_intersection(even, odd, &t);
  CHECK(gsize(t) == 0 && t == MPI_GROUP_EMPTY, "even ^ odd is empty");
  MPI_Group_free(&t);

  /* Range forms. */
  int rng[1][3] = {{0, n - 1, 2}};
  MPI_Group_range_incl(world, 1, rng, &reven);
  CHECK(gcmp(reven, even) == MPI_IDENT, "range_incl evens");
  MPI_Group_range_excl(world, 1, rng, &rodd);
  CHECK(gcmp(rodd, odd) == MPI_IDENT, "range_excl evens");
  int back[1][3] = {{n - 1, 0, -1}};
  MPI_Group_range_incl(world, 1, back, &rev);
  CHECK(gcmp(rev, world) == (n == 1 ? MPI_IDENT : MPI_SIMILAR), "reversed vs world %d", gcmp(rev, world));
  MPI_Group_rank(rev, &r);
  CHECK(r == n - 1 - me, "rank in reversed %d", r);
  if (n >= 4) {
    /* Two ranges: {0,1} and {3}. */
    int two[2][3] = {{0, 1, 1}, {3, 3, 1}};
    MPI_Group_range_incl(world, 2, two, &t);
    int q[3] = {0, 1, 2}, w3[3];
    MPI_Group_translate_ranks(t, 3, q, world, w3);
    CHECK(w3[0] == 0 && w3[1] == 1 && w3[2] == 3, "two ranges: %d %d %d", w3[0], w3[1], w3[2]);
    MPI_Group_free(&t);
    MPI_Group_range_excl(world, 2, two, &t);
    CHECK(gsize(t) == n - 3, "range_excl two ranges %d", gsize(t));
    MPI_Group_free(&t);
  }

  /* translate_ranks: world -> reversed and -> even, with MPI_PROC_NULL. */
  int in[65], out[65];
  for (int i = 0; i < n; ++i) in[i] = i;
  in[n] = MPI_PROC_NULL;
  MPI_Group_translate_ranks(world, n + 1, in, rev, out);
  for (int i = 0; i < n; ++i) CHECK(out[i] == n - 1 - i, "to reversed %d -> %d", i, out[i]);
  CHECK(out[n] == MPI_PROC_NULL, "MPI_PROC_NULL passes through: %d", out[n]);
  MPI_Group_translate_ranks(world, n, in, even, out);
  for (int i = 0; i < n; ++i) CHECK(out[i] == (i % 2 ? MPI_UNDEFINED : i / 2), "to even %d -> %d", i, out[i]);

  /* incl order matters: incl in reverse order is SIMILAR, not IDENT. */
  int rr[64];
  for (int i = 0; i < n; ++i) rr[i] = n - 1 - i;
  MPI_Group_incl(world, n, rr, &t);
  CHECK(gcmp(t, rev) == MPI_IDENT, "incl reversed = range reversed");
  MPI_Group_free(&t);
  if (n >= 2) CHECK(gcmp(even, odd) == MPI_UNEQUAL, "even vs odd %d", gcmp(even, odd));

  /* A group from a split communicator maps back to world ranks. */
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, me % 2, 0, &half);
  MPI_Group hg;
  MPI_Comm_group(half, &hg);
  CHECK(gcmp(hg, me % 2 ? odd : even) == MPI_IDENT, "half's group");
  MPI_Group_free(&hg);
  MPI_Comm_free(&half);

  MPI_Group* all[] = {&world, &even, &odd, &u, &x, &d, &reven, &rodd, &rev};
  for (unsigned i = 0; i < sizeof all / sizeof all[0]; ++i) {
    MPI_Group_free(all[i]);
    CHECK(*all[i] == MPI_GROUP_NULL, "free resets the handle");
  }
  return mt_pass();
}
