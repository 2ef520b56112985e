/* MPI_Comm_create_group: only the group's members call it (the others are
 * busy elsewhere); two disjoint groups with the same tag; a second
 * creation with another tag; traffic on the results. */
#include "mpitest.h"

static void ring(MPI_Comm c, int world_rank, int world_of_prev) {
  int r, s, got = -1;
  MPI_Comm_rank(c, &r);
  MPI_Comm_size(c, &s);
  MPI_Status st;
  MPI_Sendrecv(&world_rank, 1, MPI_INT, (r + 1) % s, 1, &got, 1, MPI_INT, MPI_ANY_SOURCE, 1, c, &st);
  CHECK(got == world_of_prev && st.MPI_SOURCE == (r + s - 1) % s, "ring: got %d from %d, expected %d", got,
        st.MPI_SOURCE, world_of_prev);
}

int main(int argc, char** argv) {
  mt_start("comm_create_group", &argc, &argv);
  const int n = mt_size, me = mt_rank;
  MPI_Group world, mine;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  /* Even ranks in decreasing order; odd ranks in increasing order. */
  int ranks[64], m = 0;
  if (me % 2 == 0)
    for (int i = (n - 1) / 2 * 2; i >= 0; i -= 2) ranks[m++] = i;
  else
    for (int i = 1; i < n; i += 2) ranks[m++] = i;
  MPI_Group_incl(world, m, ranks, &mine);
  if (me % 2 == 1) {
    /* The odd ranks first talk among themselves on world: the even ranks'
     * creation must not need them. */
    int x = me, y = -1;
    MPI_Sendrecv(&x, 1, MPI_INT, me, 3, &y, 1, MPI_INT, me, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(y == me, "self exchange");
  }
  MPI_Comm c;
  MPI_Comm_create_group(MPI_COMM_WORLD, mine, 7, &c);
  CHECK(c != MPI_COMM_NULL, "member got a communicator");
  int r, s;
  MPI_Comm_rank(c, &r);
  MPI_Comm_size(c, &s);
  int pos = -1;
  for (int i = 0; i < m; ++i)
    if (ranks[i] == me) pos = i;
  CHECK(s == m && r == pos, "rank %d (expected %d) size %d (expected %d)", r, pos, s, m);
  ring(c, me, ranks[(pos + m - 1) % m]);

  /* Another creation from the new communicator's group over c, tag 8,
   * only by its first two members. */
  if (pos < 2 && m >= 2) {
    MPI_Group cg, two;
    MPI_Comm_group(c, &cg);
    int first2[2] = {0, 1};
    MPI_Group_incl(cg, 2, first2, &two);
    MPI_Comm c2;
    MPI_Comm_create_group(c, two, 8, &c2);
    int s2;
    MPI_Comm_size(c2, &s2);
    CHECK(s2 == 2, "pair size %d", s2);
    ring(c2, me, ranks[1 - pos]);
    MPI_Comm_free(&c2);
    MPI_Group_free(&two);
    MPI_Group_free(&cg);
  }
  /* A non-member gets MPI_COMM_NULL without communicating. */
  MPI_Group other;
  MPI_Group_difference(world, mine, &other);
  MPI_Comm none = MPI_COMM_WORLD;
  MPI_Comm_create_group(MPI_COMM_WORLD, other, 9, &none);
  CHECK(none == MPI_COMM_NULL, "non-member");
  MPI_Group_free(&other);
  MPI_Comm_free(&c);
  MPI_Group_free(&mine);
  MPI_Group_free(&world);
  return mt_pass();
}
