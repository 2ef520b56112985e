/* MPI_Comm_split_type: MPI_COMM_TYPE_SHARED puts every rank of this host
 * (all of them: the tests run on one host) in one communicator, ordered by
 * key; MPI_UNDEFINED gives MPI_COMM_NULL. */
#include "mpitest.h"

int main(int argc, char** argv) {
  mt_start("comm_split_type", &argc, &argv);
  const int n = mt_size, me = mt_rank;
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, n - me, MPI_INFO_NULL, &node);
  CHECK(node != MPI_COMM_NULL, "shared comm");
  int r, s;
  MPI_Comm_rank(node, &r);
  MPI_Comm_size(node, &s);
  CHECK(s == n && r == n - 1 - me, "rank %d size %d", r, s);
  /* Traffic: every rank sends its world rank to rank 0 of node. */
  if (r == 0) {
    int seen = 0;
    for (int i = 1; i < s; ++i) {
      int v;
      MPI_Status st;
      MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 2, node, &st);
      CHECK(v == n - 1 - st.MPI_SOURCE, "from node rank %d: world %d", st.MPI_SOURCE, v);
      seen |= 1 << st.MPI_SOURCE;
    }
    CHECK(seen == ((1 << s) - 2), "all heard: %x", seen);
  } else {
    MPI_Send(&me, 1, MPI_INT, 0, 2, node);
  }
  /* MPI_UNDEFINED everywhere, and only at rank 0. */
  MPI_Comm none = MPI_COMM_WORLD;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_UNDEFINED, 0, MPI_INFO_NULL, &none);
  CHECK(none == MPI_COMM_NULL, "MPI_UNDEFINED gives MPI_COMM_NULL");
  MPI_Comm some;
  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "nmad_unused_hint", "1");
  MPI_Comm_split_type(MPI_COMM_WORLD, me == 0 ? MPI_UNDEFINED : MPI_COMM_TYPE_SHARED, me, info, &some);
  MPI_Info_free(&info);
  CHECK((me == 0) == (some == MPI_COMM_NULL), "rank 0 left out");
  if (some != MPI_COMM_NULL) {
    MPI_Comm_rank(some, &r);
    MPI_Comm_size(some, &s);
    CHECK(s == n - 1 && r == me - 1, "without rank 0: rank %d size %d", r, s);
    MPI_Comm_free(&some);
  }
  /* Splitting a split: the shared communicator of a half is the half. */
  MPI_Comm half, hnode;
  MPI_Comm_split(MPI_COMM_WORLD, me % 2, me, &half);
  MPI_Comm_split_type(half, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &hnode);
  int res;
  MPI_Comm_compare(half, hnode, &res);
  CHECK(res == MPI_CONGRUENT, "half vs its shared split %d", res);
  MPI_Comm_free(&hnode);
  MPI_Comm_free(&half);
  MPI_Comm_free(&node);
  return mt_pass();
}
