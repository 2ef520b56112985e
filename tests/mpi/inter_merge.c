/* MPI_Intercomm_merge: the group passing high = 1 comes last; with equal
 * flags both orders are allowed but every member must agree; traffic and
 * a collective on the merged intracommunicator. */
#include "mpitest.h"

static void check_merged(MPI_Comm m, int expect_rank) {
  int r, s, flag = 1;
  MPI_Comm_rank(m, &r);
  MPI_Comm_size(m, &s);
  MPI_Comm_test_inter(m, &flag);
  CHECK(flag == 0, "merged is an intracommunicator");
  CHECK(s == mt_size, "merged size %d", s);
  if (expect_rank >= 0) CHECK(r == expect_rank, "merged rank %d, expected %d", r, expect_rank);
  /* Everyone learns everyone's world rank through a ring: the merged
   * order must be the same everywhere (each rank checks its neighbour's
   * claim of who is before it). */
  int next = (r + 1) % s, prev = (r + s - 1) % s;
  int mine[2] = {mt_rank, r}, got[2] = {-1, -1};
  MPI_Status st;
  MPI_Sendrecv(mine, 2, MPI_INT, next, 3, got, 2, MPI_INT, prev, 3, m, &st);
  CHECK(st.MPI_SOURCE == prev && got[1] == prev, "ring: from %d who says rank %d", st.MPI_SOURCE, got[1]);
  int sum = 0;
  MPI_Allreduce(&mt_rank, &sum, 1, MPI_INT, MPI_SUM, m);
  CHECK(sum == mt_size * (mt_size - 1) / 2, "allreduce on merged: %d", sum);
}

int main(int argc, char** argv) {
  mt_start("inter_merge", &argc, &argv);
  const int n = mt_size, me = mt_rank;
  CHECK(n >= 2, "needs 2 processes or more");
  const int lowsize = n / 2, low = me < lowsize;
  MPI_Comm local, inter, m1, m2, m3;
  MPI_Comm_split(MPI_COMM_WORLD, low, me, &local);
  MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, low ? lowsize : 0, 5, &inter);
  int lrank;
  MPI_Comm_rank(inter, &lrank);
  /* Low half low, high half high: world order. */
  MPI_Intercomm_merge(inter, !low, &m1);
  check_merged(m1, me);
  /* Reversed flags: the high half comes first. */
  MPI_Intercomm_merge(inter, low, &m2);
  check_merged(m2, low ? (n - lowsize) + lrank : lrank);
  /* Same flag on both sides: some order both groups agree on. */
  MPI_Intercomm_merge(inter, 0, &m3);
  check_merged(m3, -1);
  int res;
  MPI_Comm_compare(m1, MPI_COMM_WORLD, &res);
  CHECK(res == MPI_CONGRUENT, "m1 vs world %d", res);
  MPI_Comm_compare(m2, MPI_COMM_WORLD, &res);
  CHECK(res == MPI_SIMILAR, "m2 vs world %d", res);
  /* Merging a duplicate of the intercommunicator works the same. */
  MPI_Comm idup, m4;
  MPI_Comm_dup(inter, &idup);
  MPI_Intercomm_merge(idup, !low, &m4);
  check_merged(m4, me);
  MPI_Comm_free(&m4);
  MPI_Comm_free(&idup);
  MPI_Comm_free(&m3);
  MPI_Comm_free(&m2);
  MPI_Comm_free(&m1);
  MPI_Comm_free(&inter);
  MPI_Comm_free(&local);
  return mt_pass();
}
