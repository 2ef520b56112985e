/* Intercommunicator queries: Comm_size/rank/group are the local group,
 * Comm_remote_size/remote_group the other; compare; dup (a congruent,
 * separate intercommunicator); split of an intercommunicator; Comm_create
 * on an intercommunicator. */
#include "mpitest.h"

int main(int argc, char** argv) {
  mt_start("inter_remote", &argc, &argv);
  const int n = mt_size, me = mt_rank;
  CHECK(n >= 2, "needs 2 processes or more");
  const int lowsize = n / 2, low = me < lowsize;
  MPI_Comm local, inter;
  MPI_Comm_split(MPI_COMM_WORLD, low, me, &local);
  MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, low ? lowsize : 0, 1, &inter);
  MPI_Group lg, rg, localg, world;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  MPI_Comm_group(inter, &lg);
  MPI_Comm_group(local, &localg);
  MPI_Comm_remote_group(inter, &rg);
  int res;
  MPI_Group_compare(lg, localg, &res);
  CHECK(res == MPI_IDENT, "Comm_group of an intercomm is the local group: %d", res);
  int rs, gs;
  MPI_Comm_remote_size(inter, &rs);
  MPI_Group_size(rg, &gs);
  CHECK(rs == gs && rs == (low ? n - lowsize : lowsize), "remote size %d group %d", rs, gs);
  int q[64], w[64];
  for (int i = 0; i < rs; ++i) q[i] = i;
  MPI_Group_translate_ranks(rg, rs, q, world, w);
  for (int i = 0; i < rs; ++i) CHECK(w[i] == (low ? lowsize : 0) + i, "remote %d is world %d", i, w[i]);
  MPI_Group_rank(rg, &res);
  CHECK(res == MPI_UNDEFINED, "not in the remote group");

  /* Compare. */
  MPI_Comm_compare(inter, inter, &res);
  CHECK(res == MPI_IDENT, "inter vs inter %d", res);
  MPI_Comm_compare(inter, local, &res);
  CHECK(res == MPI_UNEQUAL, "inter vs local %d", res);
  MPI_Comm d;
  MPI_Comm_dup(inter, &d);
  MPI_Comm_compare(inter, d, &res);
  CHECK(res == MPI_CONGRUENT, "inter vs dup %d", res);
  int flag = 0, ds, drs;
  MPI_Comm_test_inter(d, &flag);
  MPI_Comm_size(d, &ds);
  MPI_Comm_remote_size(d, &drs);
  CHECK(flag && ds == n - rs && drs == rs, "dup is an intercomm %d %d %d", flag, ds, drs);
  /* Traffic on dup and original with the same tag, any source. */
  int lr;
  MPI_Comm_rank(inter, &lr);
  if (lr < rs) {
    int a = -1, b = -1, x = 10 + me, y = 20 + me;
    MPI_Request rq[4];
    MPI_Irecv(&a, 1, MPI_INT, MPI_ANY_SOURCE, 2, d, &rq[0]);
    MPI_Irecv(&b, 1, MPI_INT, MPI_ANY_SOURCE, 2, inter, &rq[1]);
    MPI_Isend(&x, 1, MPI_INT, lr, 2, inter, &rq[2]);
    MPI_Isend(&y, 1, MPI_INT, lr, 2, d, &rq[3]);
    MPI_Status st[4];
    MPI_Waitall(4, rq, st);
    const int peer = (low ? lowsize : 0) + lr;
    CHECK(a == 20 + peer && b == 10 + peer, "dup isolation: %d %d", a, b);
    CHECK(st[0].MPI_SOURCE == lr && st[1].MPI_SOURCE == lr, "sources %d %d", st[0].MPI_SOURCE, st[1].MPI_SOURCE);
  }
  /* Split by parity of the local rank: pairs (local r, remote r') of the
   * same parity. */
  MPI_Comm sp;
  MPI_Comm_split(inter, lr % 2, lr, &sp);
  int lsize;
  MPI_Comm_size(inter, &lsize);
  int want_local = 0, want_remote = 0;
  for (int i = 0; i < lsize; ++i) want_local += i % 2 == lr % 2;
  for (int i = 0; i < rs; ++i) want_remote += i % 2 == lr % 2;
  if (want_remote == 0) {
    CHECK(sp == MPI_COMM_NULL, "no remote member of my color");
  } else {
    int s1, s2, r1;
    MPI_Comm_size(sp, &s1);
    MPI_Comm_remote_size(sp, &s2);
    MPI_Comm_rank(sp, &r1);
    CHECK(s1 == want_local && s2 == want_remote && r1 == lr / 2, "split: %d %d rank %d", s1, s2, r1);
    int v = me, got = -1;
    MPI_Status st;
    if (r1 < s2) {
      MPI_Sendrecv(&v, 1, MPI_INT, r1, 0, &got, 1, MPI_INT, r1, 0, sp, &st);
      CHECK(got == (low ? lowsize : 0) + 2 * r1 + lr % 2, "split traffic %d", got);
    }
    MPI_Comm_free(&sp);
  }
  /* Comm_create on the intercommunicator: each side keeps its local rank 0
   * only (a 1-to-1 intercommunicator of the two leaders). */
  MPI_Group first;
  MPI_Group_incl(lg, 1, (int[]){0}, &first);
  MPI_Comm leaders;
  MPI_Comm_create(inter, first, &leaders);
  CHECK((lr == 0) == (leaders != MPI_COMM_NULL), "leaders membership");
  if (leaders != MPI_COMM_NULL) {
    int s1, s2, other = -1, tf = 0;
    MPI_Comm_size(leaders, &s1);
    MPI_Comm_remote_size(leaders, &s2);
    MPI_Comm_test_inter(leaders, &tf);
    CHECK(tf && s1 == 1 && s2 == 1, "leaders: inter %d sizes %d %d", tf, s1, s2);
    MPI_Sendrecv(&me, 1, MPI_INT, 0, 0, &other, 1, MPI_INT, 0, 0, leaders, MPI_STATUS_IGNORE);
    CHECK(other == (low ? lowsize : 0), "leaders exchange %d", other);
    MPI_Comm_free(&leaders);
  }
  MPI_Group_free(&first);
  MPI_Group_free(&world);
  MPI_Group_free(&lg);
  MPI_Group_free(&rg);
  MPI_Group_free(&localg);
  MPI_Comm_free(&d);
  MPI_Comm_free(&inter);
  MPI_Comm_free(&local);
  return mt_pass();
}
