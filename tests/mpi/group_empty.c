/* MPI_GROUP_EMPTY: what empty results are, its size and rank, compare,
 * translate into it, Comm_create with it, freeing it. */
#include "mpitest.h"

int main(int argc, char** argv) {
  mt_start("group_empty", &argc, &argv);
  int s = -1, r = -1, res = -1;
  MPI_Group_size(MPI_GROUP_EMPTY, &s);
  MPI_Group_rank(MPI_GROUP_EMPTY, &r);
  CHECK(s == 0 && r == MPI_UNDEFINED, "size %d rank %d", s, r);
  MPI_Group world, e1, e2, e3, e4;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  MPI_Group_incl(world, 0, NULL, &e1);
  MPI_Group_difference(world, world, &e2);
  MPI_Group_intersection(world, MPI_GROUP_EMPTY, &e3);
  MPI_Group_union(MPI_GROUP_EMPTY, MPI_GROUP_EMPTY, &e4);
  MPI_Group es[] = {e1, e2, e3, e4};
  for (int i = 0; i < 4; ++i) {
    MPI_Group_size(es[i], &s);
    CHECK(s == 0, "empty result %d has size %d", i, s);
    MPI_Group_compare(es[i], MPI_GROUP_EMPTY, &res);
    CHECK(res == MPI_IDENT, "empty result %d vs MPI_GROUP_EMPTY: %d", i, res);
  }
  MPI_Group_compare(world, MPI_GROUP_EMPTY, &res);
  CHECK(res == MPI_UNEQUAL, "world vs empty %d", res);
  /* Excluding everyone; union with the empty group. */
  MPI_Group g;
  int rng[1][3] = {{0, mt_size - 1, 1}};
  MPI_Group_range_excl(world, 1, rng, &g);
  MPI_Group_size(g, &s);
  CHECK(s == 0, "range_excl all: %d", s);
  MPI_Group_free(&g);
  MPI_Group_union(world, MPI_GROUP_EMPTY, &g);
  MPI_Group_compare(g, world, &res);
  CHECK(res == MPI_IDENT, "world u empty %d", res);
  MPI_Group_free(&g);
  /* Translating into the empty group: all MPI_UNDEFINED. */
  int in[2] = {0, MPI_PROC_NULL}, out[2] = {7, 7};
  MPI_Group_translate_ranks(world, 2, in, MPI_GROUP_EMPTY, out);
  CHECK(out[0] == MPI_UNDEFINED && out[1] == MPI_PROC_NULL, "translate into empty: %d %d", out[0], out[1]);
  /* Nobody is in the new communicator. */
  MPI_Comm c = MPI_COMM_WORLD;
  MPI_Comm_create(MPI_COMM_WORLD, MPI_GROUP_EMPTY, &c);
  CHECK(c == MPI_COMM_NULL, "Comm_create with the empty group");
  for (int i = 0; i < 4; ++i) {
    MPI_Group_free(&es[i]);
    CHECK(es[i] == MPI_GROUP_NULL, "free resets");
  }
  /* The predefined handle is still usable after freeing results. */
  MPI_Group_size(MPI_GROUP_EMPTY, &s);
  CHECK(s == 0, "MPI_GROUP_EMPTY still valid");
  MPI_Group_free(&world);
  return mt_pass();
}
