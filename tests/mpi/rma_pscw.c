/* General active target synchronization (MPI 4.1 12.5.2): Win_post/start/
 * complete/wait and Win_test, with groups that are subsets of the window's
 * group:
 *  - a ring, several epochs: each rank exposes its window to its previous
 *    rank and accesses its next one (Put, Get and Accumulate), directions
 *    alternating, ended by Win_wait or by a Win_test loop;
 *  - a star: every other rank puts into rank 0, which posts to all of them
 *    and none of them posts;
 *  - MPI_MODE_NOCHECK on post and start (the posts made sure complete by a
 *    barrier), and MPI_MODE_NOPUT on a post whose epoch only reads;
 *  - a rank that is only an origin and one that is only a target. */
#include "mpitest.h"

#define EPOCHS 8
#define LEN 8

static MPI_Group world_group;

static MPI_Group group_of(int n, const int* ranks) {
  MPI_Group g;
  MPI_Group_incl(world_group, n, ranks, &g);
  return g;
}

static inline int cls(int err) {
  char text[MPI_MAX_ERROR_STRING];
  return mt_error(err, text);
}

/* Ends the exposure epoch by Win_wait (even epochs) or a Win_test loop. */
static void end_exposure(MPI_Win win, int epoch) {
  if (epoch % 2 == 0) {
    CHECK(MPI_Win_wait(win) == MPI_SUCCESS, "Win_wait");
    return;
  }
  int flag = 0;
  long tests = 0;
  while (!flag) {
    CHECK(MPI_Win_test(win, &flag) == MPI_SUCCESS, "Win_test");
    ++tests;
  }
  CHECK(tests >= 1, "Win_test");
}

static void test_ring(MPI_Win win, int* mem) {
  const int next = (mt_rank + 1) % mt_size, prev = (mt_rank + mt_size - 1) % mt_size;
  for (int e = 0; e < EPOCHS; ++e) {
    /* Even epochs go forward (access next, expose to prev), odd ones back. */
    const int to = e % 2 ? prev : next, from = e % 2 ? next : prev;
    MPI_Group tg = group_of(1, &to), og = group_of(1, &from);
    for (int i = 0; i < LEN; ++i) mem[i] = -1;
#ifdef OPEN_MPI
    /* Open MPI 4.1.4 bug: with MPI_MODE_NOCHECK on post and start, Win_wait
     * returns before the puts landed (osc/rdma) or never returns (osc/sm). */
    const int nocheck = 0;
#else
    const int nocheck = e >= EPOCHS - 2; /* the last two epochs with MPI_MODE_NOCHECK */
#endif
    CHECK(MPI_Win_post(og, nocheck ? MPI_MODE_NOCHECK : 0, win) == MPI_SUCCESS, "Win_post epoch %d", e);
    if (nocheck) MPI_Barrier(MPI_COMM_WORLD); /* every post has returned before any start */
    CHECK(MPI_Win_start(tg, nocheck ? MPI_MODE_NOCHECK : 0, win) == MPI_SUCCESS, "Win_start epoch %d", e);
    int v[LEN], got[2] = {-2, -2}, add = 100;
    for (int i = 0; i < LEN; ++i) v[i] = 1000 * e + 10 * mt_rank + i;
    CHECK(MPI_Put(v, LEN - 2, MPI_INT, to, 0, LEN - 2, MPI_INT, win) == MPI_SUCCESS, "Put epoch %d", e);
    CHECK(MPI_Accumulate(&add, 1, MPI_INT, to, LEN - 2, 1, MPI_INT, MPI_REPLACE, win) == MPI_SUCCESS, "Acc");
    /* The last int is never written in the epoch: a Get of it sees -1. */
    CHECK(MPI_Get(got, 1, MPI_INT, to, LEN - 1, 1, MPI_INT, win) == MPI_SUCCESS, "Get epoch %d", e);
    CHECK(MPI_Win_complete(win) == MPI_SUCCESS, "Win_complete epoch %d", e);
    CHECK(got[0] == -1 && got[1] == -2, "epoch %d: Get returned %d (and wrote %d past it)", e, got[0], got[1]);
    end_exposure(win, e);
    for (int i = 0; i < LEN - 2; ++i)
      CHECK(mem[i] == 1000 * e + 10 * from + i, "epoch %d: int %d = %d, expected %d", e, i, mem[i],
            1000 * e + 10 * from + i);
    CHECK(mem[LEN - 2] == 100 && mem[LEN - 1] == -1, "epoch %d: tail %d %d", e, mem[LEN - 2], mem[LEN - 1]);
    MPI_Group_free(&tg);
    MPI_Group_free(&og);
    if (nocheck) MPI_Barrier(MPI_COMM_WORLD); /* no next post before the others' NOCHECK starts are done */
  }
}

/* Rank 0 exposes to every other rank; they access only rank 0. Then the
 * reverse with gets only: rank 0 reads everyone's window (posts NOPUT). */
static void test_star(MPI_Win win, int* mem) {
  if (mt_size < 2) return;
  int* others = malloc((mt_size - 1) * sizeof(int));
  for (int r = 1; r < mt_size; ++r) others[r - 1] = r;
  MPI_Group rest = group_of(mt_size - 1, others), root = group_of(1, (int[]){0});
  for (int i = 0; i < LEN; ++i) mem[i] = -1;
  MPI_Barrier(MPI_COMM_WORLD); /* the stores above come before anyone's puts */
  if (mt_rank == 0) {
    /* Not MPI_MODE_NOSTORE: the stores above came after the last synchronization of the window. */
    CHECK(MPI_Win_post(rest, 0, win) == MPI_SUCCESS, "star post");
    CHECK(MPI_Win_wait(win) == MPI_SUCCESS, "star wait");
    for (int r = 1; r < mt_size && r < LEN; ++r) CHECK(mem[r] == 7 * r, "star: int %d = %d", r, mem[r]);
    CHECK(mem[0] == -1, "star: int 0 written");
  } else {
    CHECK(MPI_Win_start(root, 0, win) == MPI_SUCCESS, "star start");
    int v = 7 * mt_rank;
    if (mt_rank < LEN) MPI_Put(&v, 1, MPI_INT, 0, mt_rank, 1, MPI_INT, win);
    CHECK(MPI_Win_complete(win) == MPI_SUCCESS, "star complete");
  }
  /* Reverse: the others expose (NOPUT: only read), rank 0 gets from each. */
  mem[0] = 500 + mt_rank;
  if (mt_rank == 0) {
    int* got = malloc(mt_size * sizeof(int));
    CHECK(MPI_Win_start(rest, 0, win) == MPI_SUCCESS, "reverse start");
    for (int r = 1; r < mt_size; ++r) MPI_Get(&got[r], 1, MPI_INT, r, 0, 1, MPI_INT, win);
    CHECK(MPI_Win_complete(win) == MPI_SUCCESS, "reverse complete");
    for (int r = 1; r < mt_size; ++r) CHECK(got[r] == 500 + r, "reverse: from %d got %d", r, got[r]);
    free(got);
  } else {
    CHECK(MPI_Win_post(root, MPI_MODE_NOPUT, win) == MPI_SUCCESS, "reverse post");
    CHECK(MPI_Win_wait(win) == MPI_SUCCESS, "reverse wait");
  }
  MPI_Group_free(&rest);
  MPI_Group_free(&root);
  free(others);
}

/* An access epoch to a rank outside the start group is erroneous. */
static void test_outside_group(MPI_Win win) {
  if (mt_size < 3) return;
  const int next = (mt_rank + 1) % mt_size, prev = (mt_rank + mt_size - 1) % mt_size;
  const int other = (mt_rank + 2) % mt_size; /* neither next (target) nor the one it exposes to */
  MPI_Group tg = group_of(1, &next), og = group_of(1, &prev);
  MPI_Win_post(og, 0, win);
  MPI_Win_start(tg, 0, win);
  /* Open MPI 4.1 and MPICH 4.0 do not check this (the put is not made
   * there: it would land in a window not exposed to this rank); nmad must
   * say MPI_ERR_RMA_SYNC. */
#if !defined(OPEN_MPI) && !defined(MPICH_VERSION)
  int v = 1;
  int err = MPI_Put(&v, 1, MPI_INT, other, LEN - 1, 1, MPI_INT, win);
  CHECK(cls(err) == MPI_ERR_RMA_SYNC, "put to rank %d outside the start group: class %d, not MPI_ERR_RMA_SYNC", other,
        cls(err));
#else
  (void)other;
#endif
  MPI_Win_complete(win);
  MPI_Win_wait(win);
  MPI_Group_free(&tg);
  MPI_Group_free(&og);
}

int main(int argc, char** argv) {
  mt_start("rma_pscw", &argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  int* mem;
  MPI_Win win;
  CHECK(MPI_Win_allocate(LEN * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win) == MPI_SUCCESS,
        "Win_allocate");
  MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
  test_ring(win, mem);
  MPI_Barrier(MPI_COMM_WORLD);
  test_star(win, mem);
  MPI_Barrier(MPI_COMM_WORLD);
  test_outside_group(win);
  MPI_Win_free(&win);
  /* A window on user memory, one epoch: PSCW works on every flavor. */
  int buf[LEN];
  for (int i = 0; i < LEN; ++i) buf[i] = -1;
  CHECK(MPI_Win_create(buf, sizeof buf, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win) == MPI_SUCCESS,
        "Win_create");
  test_ring(win, buf);
  MPI_Win_free(&win);
  MPI_Group_free(&world_group);
  return mt_pass();
}
