/* Communicators: dup, split (colors, keys, MPI_UNDEFINED), compare, free;
 * traffic on a duplicate never matches traffic on the original. */
#include "mpitest.h"

int main(int argc, char** argv) {
  mt_start("comm", &argc, &argv);
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  int r = -1, s = -1, res = -1;
  MPI_Comm_rank(dup, &r);
  MPI_Comm_size(dup, &s);
  CHECK(r == mt_rank && s == mt_size, "dup rank %d size %d", r, s);
  MPI_Comm_compare(MPI_COMM_WORLD, MPI_COMM_WORLD, &res);
  CHECK(res == MPI_IDENT, "world vs world: %d", res);
  MPI_Comm_compare(MPI_COMM_WORLD, dup, &res);
  CHECK(res == MPI_CONGRUENT, "world vs dup: %d", res);

  /* Same tag, same peers, two communicators: each receive gets its own. */
  int next = (mt_rank + 1) % mt_size, prev = (mt_rank + mt_size - 1) % mt_size;
  int a = 1000 + mt_rank, b = 2000 + mt_rank, ga = 0, gb = 0;
  MPI_Request rq[4];
  MPI_Irecv(&gb, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, dup, &rq[0]);
  MPI_Irecv(&ga, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &rq[1]);
  MPI_Isend(&a, 1, MPI_INT, next, 5, MPI_COMM_WORLD, &rq[2]);
  MPI_Isend(&b, 1, MPI_INT, next, 5, dup, &rq[3]);
  MPI_Waitall(4, rq, MPI_STATUSES_IGNORE);
  CHECK(ga == 1000 + prev && gb == 2000 + prev, "isolation: world got %d, dup got %d", ga, gb);

  /* Split in reverse order by parity. */
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, mt_rank % 2, -mt_rank, &half);
  int hr, hs;
  MPI_Comm_rank(half, &hr);
  MPI_Comm_size(half, &hs);
  int expect_size = (mt_size + 1 - mt_rank % 2) / 2;
  CHECK(hs == expect_size, "split size %d, expected %d", hs, expect_size);
  CHECK(hr == hs - 1 - mt_rank / 2, "split rank %d", hr);
  /* Exchange inside the half: world ranks of the neighbours. */
  int hn = (hr + 1) % hs, hp = (hr + hs - 1) % hs, mine = mt_rank, theirs = -1;
  MPI_Status st;
  MPI_Sendrecv(&mine, 1, MPI_INT, hn, 0, &theirs, 1, MPI_INT, hp, 0, half, &st);
  CHECK(st.MPI_SOURCE == hp, "source in the half %d", st.MPI_SOURCE);
  /* hp's world rank: halves are in decreasing world order. */
  int expected_world = mt_rank % 2 + 2 * (hs - 1 - hp);
  CHECK(theirs == expected_world, "half neighbour world rank %d, expected %d", theirs, expected_world);
  MPI_Comm_compare(half, MPI_COMM_WORLD, &res);
  CHECK(res == (mt_size == 1 ? MPI_SIMILAR : MPI_UNEQUAL) || (mt_size == 1 && res == MPI_CONGRUENT), "half vs world %d", res);

  /* Same members, another order: similar. */
  MPI_Comm rev;
  MPI_Comm_split(MPI_COMM_WORLD, 0, mt_size - mt_rank, &rev);
  MPI_Comm_compare(rev, MPI_COMM_WORLD, &res);
  CHECK(res == (mt_size == 1 ? MPI_CONGRUENT : MPI_SIMILAR), "reversed vs world %d", res);

  /* MPI_UNDEFINED: rank 0 is left out. */
  MPI_Comm some;
  MPI_Comm_split(MPI_COMM_WORLD, mt_rank == 0 ? MPI_UNDEFINED : 1, 0, &some);
  CHECK((mt_rank == 0) == (some == MPI_COMM_NULL), "MPI_UNDEFINED color");
  if (some != MPI_COMM_NULL) {
    MPI_Comm_size(some, &s);
    CHECK(s == mt_size - 1, "size without rank 0: %d", s);
    MPI_Comm_free(&some);
  }
  /* Dup of a split; then many create/free cycles reuse contexts. */
  MPI_Comm hdup;
  MPI_Comm_dup(half, &hdup);
  MPI_Comm_compare(half, hdup, &res);
  CHECK(res == MPI_CONGRUENT, "half vs its dup %d", res);
  for (int i = 0; i < 2000; ++i) {
    MPI_Comm t;
    MPI_Comm_dup(MPI_COMM_WORLD, &t);
    MPI_Comm_free(&t);
    CHECK(t == MPI_COMM_NULL, "free resets the handle");
  }
  MPI_Comm_free(&hdup);
  MPI_Comm_free(&rev);
  MPI_Comm_free(&half);
  MPI_Comm_free(&dup);
  return mt_pass();
}
