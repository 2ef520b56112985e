/* MPI_Intercomm_create_from_groups (MPI 4.0 11.3): the world process set
 * split into a lower and an upper half, the intercommunicator made from the
 * two groups with a string tag, then checked: it is an intercommunicator,
 * its local and remote sizes and groups are the halves, data goes both
 * ways (each rank to the remote rank of its index, and every rank's world
 * rank to the remote leader), the error handler and merge work. The errors
 * (a leader out of range, overlapping groups, a process outside the local
 * group) come back as MPI_ERR_RANK / MPI_ERR_GROUP with MPI_ERRORS_RETURN.
 * Without MPI_Init (a session), or with INTER_FROM_GROUPS_MIXED set, after
 * MPI_Init and from MPI_COMM_WORLD's group. 2 ranks and up. */
#include "mpitest.h"

static void exercise(MPI_Group world, const char* tag) {
  int wsize = -1, wrank = -1;
  MPI_Group_size(world, &wsize);
  MPI_Group_rank(world, &wrank);
  const int half = wsize / 2;  /* lower: [0, half), upper: [half, wsize) */
  const int lower = wrank < half;
  int lo_range[1][3] = {{0, half - 1, 1}}, hi_range[1][3] = {{half, wsize - 1, 1}};
  MPI_Group lo, hi;
  MPI_Group_range_incl(world, 1, lo_range, &lo);
  MPI_Group_range_incl(world, 1, hi_range, &hi);
  MPI_Group mine = lower ? lo : hi, theirs = lower ? hi : lo;
  const int lsize = lower ? half : wsize - half, rsize = lower ? wsize - half : half;
  const int lrank = lower ? wrank : wrank - half;

  /* Each group's leader is its last rank (not always 0). */
  MPI_Comm ic = MPI_COMM_NULL;
  CHECK(MPI_Intercomm_create_from_groups(mine, lsize - 1, theirs, rsize - 1, tag, MPI_INFO_NULL, MPI_ERRORS_RETURN, &ic) ==
            MPI_SUCCESS && ic != MPI_COMM_NULL, "Intercomm_create_from_groups");
  int inter = 0, size = -1, rank = -1, rs = -1;
  MPI_Comm_test_inter(ic, &inter);
  MPI_Comm_size(ic, &size);
  MPI_Comm_rank(ic, &rank);
  MPI_Comm_remote_size(ic, &rs);
  CHECK(inter && size == lsize && rank == lrank && rs == rsize, "inter %d size %d/%d rank %d/%d remote %d/%d", inter,
        size, lsize, rank, lrank, rs, rsize);
  MPI_Group rg;
  int cmp = -1;
  MPI_Comm_remote_group(ic, &rg);
  MPI_Group_compare(rg, theirs, &cmp);
  CHECK(cmp == MPI_IDENT, "remote group compares %d with the group given", cmp);
  MPI_Group_free(&rg);
  MPI_Errhandler eh;
  MPI_Comm_get_errhandler(ic, &eh);
  CHECK(eh == MPI_ERRORS_RETURN, "the intercommunicator has the handler given");

  /* Each rank with a partner of its index: exchange world ranks. */
  if (rank < rs) {
    int got = -1;
    const int partner_world = lower ? half + rank : rank;
    CHECK(MPI_Sendrecv(&wrank, 1, MPI_INT, rank, 5, &got, 1, MPI_INT, rank, 5, ic, MPI_STATUS_IGNORE) == MPI_SUCCESS,
          "sendrecv over the intercommunicator");
    CHECK(got == partner_world, "remote rank %d is world rank %d, expected %d", rank, got, partner_world);
  }
  /* Every rank to the remote rank 0, which takes them in rank order. */
  long payload[64];
  for (int i = 0; i < 64; ++i) payload[i] = wrank * 1000L + i;
  MPI_Request req;
  MPI_Isend(payload, 64, MPI_LONG, 0, 6, ic, &req);
  if (rank == 0)
    for (int r = 0; r < rs; ++r) {
      long in[64];
      MPI_Status stt;
      CHECK(MPI_Recv(in, 64, MPI_LONG, r, 6, ic, &stt) == MPI_SUCCESS && stt.MPI_SOURCE == r, "recv from remote %d", r);
      const int w = lower ? half + r : r;
      for (int i = 0; i < 64; ++i) CHECK(in[i] == w * 1000L + i, "remote %d word %d: %ld", r, i, in[i]);
    }
  MPI_Wait(&req, MPI_STATUS_IGNORE);

  /* Merged, the lower half first: every world rank in its place. */
  MPI_Comm merged;
  CHECK(MPI_Intercomm_merge(ic, !lower, &merged) == MPI_SUCCESS, "merge");
  int mrank = -1;
  MPI_Comm_rank(merged, &mrank);
  CHECK(mrank == wrank, "merged rank %d, world rank %d", mrank, wrank);
  long v = wrank, sum = 0;
  MPI_Allreduce(&v, &sum, 1, MPI_LONG, MPI_SUM, merged);
  CHECK(sum == (long)wsize * (wsize - 1) / 2, "merged allreduce %ld", sum);
  MPI_Comm_free(&merged);
  MPI_Comm_free(&ic);

  /* Errors: each is found before anything is sent, by every caller. */
  char text[MPI_MAX_ERROR_STRING];
  int e = MPI_Intercomm_create_from_groups(mine, 0, theirs, rsize, tag, MPI_INFO_NULL, MPI_ERRORS_RETURN, &ic);
  CHECK(mt_error(e, text) == MPI_ERR_RANK, "remote leader out of range: %s", text);
  e = MPI_Intercomm_create_from_groups(mine, lsize, theirs, 0, tag, MPI_INFO_NULL, MPI_ERRORS_RETURN, &ic);
  CHECK(mt_error(e, text) == MPI_ERR_RANK, "local leader out of range: %s", text);
  e = MPI_Intercomm_create_from_groups(mine, 0, world, 0, tag, MPI_INFO_NULL, MPI_ERRORS_RETURN, &ic);
  CHECK(mt_error(e, text) == MPI_ERR_GROUP, "overlapping groups: %s", text);
  e = MPI_Intercomm_create_from_groups(theirs, 0, mine, 0, tag, MPI_INFO_NULL, MPI_ERRORS_RETURN, &ic);
  CHECK(mt_error(e, text) == MPI_ERR_GROUP, "outside the local group: %s", text);
  e = MPI_Intercomm_create_from_groups(mine, 0, theirs, 0, NULL, MPI_INFO_NULL, MPI_ERRORS_RETURN, &ic);
  CHECK(mt_error(e, text) == MPI_ERR_ARG, "null tag: %s", text);
  MPI_Group_free(&lo);
  MPI_Group_free(&hi);
}

int main(int argc, char** argv) {
  mt_name = "inter_from_groups";
  if (getenv("INTER_FROM_GROUPS_MIXED")) {
    mt_start("inter_from_groups", &argc, &argv);
    MPI_Group wg;
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    exercise(wg, "nmad.test.inter.world");
    /* Twice with one tag: creations in sequence may reuse it. */
    exercise(wg, "nmad.test.inter.world");
    MPI_Group_free(&wg);
    return mt_pass();
  }
  MPI_Session s;
  if (MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s) != MPI_SUCCESS) {
    printf("FAIL inter_from_groups: Session_init\n");
    return 1;
  }
  MPI_Group wg;
  MPI_Group_from_session_pset(s, "mpi://WORLD", &wg);
  MPI_Group_rank(wg, &mt_rank);
  MPI_Group_size(wg, &mt_size);
  exercise(wg, "nmad.test.inter.session");
  MPI_Group_free(&wg);
  int flag = 1;
  MPI_Initialized(&flag);
  CHECK(!flag, "MPI_Initialized after a session alone");
  CHECK(MPI_Session_finalize(&s) == MPI_SUCCESS, "Session_finalize");
  printf("PASS inter_from_groups rank %d\n", mt_rank);
  return 0;
}
