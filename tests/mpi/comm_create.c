/* MPI_Comm_create: members (in the group's order) get a communicator,
 * the others MPI_COMM_NULL; traffic on it never matches traffic on the
 * parent; create over a duplicate with the whole group. */
#include "mpitest.h"

int main(int argc, char** argv) {
  mt_start("comm_create", &argc, &argv);
  const int n = mt_size, me = mt_rank;
  MPI_Group world, g;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  /* The first half (at least rank 0), in reverse order. */
  int m = (n + 1) / 2, ranks[64];
  for (int i = 0; i < m; ++i) ranks[i] = m - 1 - i;
  MPI_Group_incl(world, m, ranks, &g);
  MPI_Comm c;
  MPI_Comm_create(MPI_COMM_WORLD, g, &c);
  CHECK((me < m) == (c != MPI_COMM_NULL), "membership: comm %d", c);
  if (c != MPI_COMM_NULL) {
    int r, s, res;
    MPI_Comm_rank(c, &r);
    MPI_Comm_size(c, &s);
    CHECK(s == m && r == m - 1 - me, "rank %d size %d", r, s);
    MPI_Group cg;
    MPI_Comm_group(c, &cg);
    MPI_Group_compare(cg, g, &res);
    CHECK(res == MPI_IDENT, "comm's group vs group: %d", res);
    MPI_Group_free(&cg);
    /* Same tag, any source, on the new communicator and on world. */
    int next = (r + 1) % s, prev = (r + s - 1) % s;
    int a = 100 + me, b = 200 + me, ga = -1, gb = -1;
    MPI_Request rq[4];
    MPI_Status st[4];
    MPI_Irecv(&ga, 1, MPI_INT, MPI_ANY_SOURCE, 9, c, &rq[0]);
    MPI_Irecv(&gb, 1, MPI_INT, MPI_ANY_SOURCE, 9, MPI_COMM_WORLD, &rq[1]);
    MPI_Isend(&b, 1, MPI_INT, (me + 1) % m, 9, MPI_COMM_WORLD, &rq[2]);
    MPI_Isend(&a, 1, MPI_INT, next, 9, c, &rq[3]);
    MPI_Waitall(4, rq, st);
    /* prev in c is world rank m-1-prev. */
    CHECK(ga == 100 + (m - 1 - prev) && st[0].MPI_SOURCE == prev, "on c: %d from %d", ga, st[0].MPI_SOURCE);
    CHECK(gb == 200 + (me + m - 1) % m, "on world: %d", gb);
    MPI_Comm_free(&c);
  }
  /* The whole group over a duplicate: congruent with it. */
  MPI_Comm d, all;
  MPI_Comm_dup(MPI_COMM_WORLD, &d);
  MPI_Comm_create(d, world, &all);
  int res = -1;
  MPI_Comm_compare(all, d, &res);
  CHECK(res == MPI_CONGRUENT, "create(dup, world group) vs dup: %d", res);
  /* A sub-communicator from a group of the new one. */
  MPI_Group one;
  int zero = 0;
  MPI_Group_incl(world, 1, &zero, &one);
  MPI_Comm solo;
  MPI_Comm_create(all, one, &solo);
  CHECK((me == 0) == (solo != MPI_COMM_NULL), "solo membership");
  if (solo != MPI_COMM_NULL) {
    int s;
    MPI_Comm_size(solo, &s);
    CHECK(s == 1, "solo size %d", s);
    MPI_Comm_free(&solo);
  }
  MPI_Group_free(&one);

  /* Disjoint groups in one call (MPI-3.1 6.4.2): odd ranks pass the odd
   * group in reverse order, even ranks the even group; each process gets
   * the communicator of its own group, in that group's order. */
  MPI_Group mine;
  int par[64], np = 0;
  for (int i = n - 1; i >= 0; --i)
    if (i % 2 == me % 2) par[np++] = i;
  MPI_Group_incl(world, np, par, &mine);
  MPI_Comm pc;
  MPI_Comm_create(d, mine, &pc);
  CHECK(pc != MPI_COMM_NULL, "disjoint groups: no communicator");
  if (pc != MPI_COMM_NULL) {
    int r = -1, s = -1, sum = 0;
    MPI_Comm_rank(pc, &r);
    MPI_Comm_size(pc, &s);
    CHECK(s == np && r == (n - 1 - me) / 2, "disjoint groups: rank %d size %d (expected %d of %d)", r, s,
          (n - 1 - me) / 2, np);
    MPI_Allreduce(&me, &sum, 1, MPI_INT, MPI_SUM, pc);
    int expect = 0;
    for (int i = 0; i < np; ++i) expect += par[i];
    CHECK(sum == expect, "disjoint groups: sum of members %d, expected %d", sum, expect);
    MPI_Comm_free(&pc);
  }
  MPI_Group_free(&mine);
  MPI_Comm_free(&all);
  MPI_Comm_free(&d);
  MPI_Group_free(&g);
  MPI_Group_free(&world);
  return mt_pass();
}
