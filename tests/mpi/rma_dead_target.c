/* A window's target that dies: rank 1 leaves abruptly once the window
 * exists (_exit(3), or with MPITEST_DEATH=kill a SIGKILL to itself). The
 * survivors, with MPI_ERRORS_RETURN on the window, first see the death in a
 * receive from it (MPI_ERR_PROC_FAILED), then:
 *  - lock(exclusive) + Put + unlock towards it: the first of them that
 *    fails says MPI_ERR_PROC_FAILED, and none waits forever;
 *  - lock_all + Put + flush towards it: the same; unlock_all returns;
 *  - with 3+ ranks, the survivors' RMA among themselves still works
 *    (lock, Put, unlock to rank 0, checked on a survivors' communicator);
 *  - a fence and MPI_Win_free (collective, with a dead member) return.
 * Each survivor prints what failed. Open MPI and MPICH end the whole job
 * when a process dies (they are no reference here); the time bound is the
 * suite's. */
#include <signal.h>
#include <unistd.h>

#include "mpitest.h"

#define DYING 1

static int first_err = MPI_SUCCESS;
static const char* first_what = "";

/* Remembers the first failure of a sequence; later calls of it may fail with any class. */
static void note(int err, const char* what) {
  if (err != MPI_SUCCESS && first_err == MPI_SUCCESS) first_err = err, first_what = what;
}

static void report(const char* sequence) {
  char text[MPI_MAX_ERROR_STRING];
  const int cls = first_err == MPI_SUCCESS ? MPI_SUCCESS : mt_error(first_err, text);
  CHECK(first_err != MPI_SUCCESS, "%s towards the dead rank %d succeeded", sequence, DYING);
  printf("rank %d: %s: %s failed: %s\n", mt_rank, sequence, first_what, text);
  fflush(stdout);
#if !defined(OPEN_MPI) && !defined(MPICH_VERSION)
  CHECK(cls == MPI_ERR_PROC_FAILED, "%s: %s gave class %d (%s), not MPI_ERR_PROC_FAILED", sequence, first_what, cls,
        text);
#else
  (void)cls;
#endif
  first_err = MPI_SUCCESS;
}

int main(int argc, char** argv) {
  mt_start("rma_dead_target", &argc, &argv);
  CHECK(mt_size >= 2, "needs 2+ processes");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const char* how = getenv("MPITEST_DEATH");
  int* mem;
  MPI_Win win;
  CHECK(MPI_Win_allocate(16 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win) == MPI_SUCCESS,
        "Win_allocate");
  MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
  for (int i = 0; i < 16; ++i) mem[i] = -1;
  MPI_Comm survivors;
  MPI_Comm_split(MPI_COMM_WORLD, mt_rank == DYING ? MPI_UNDEFINED : 0, mt_rank, &survivors);
  /* One epoch everyone completes: the window is in use everywhere. */
  MPI_Win_fence(0, win);
  int v = 100 + mt_rank;
  MPI_Put(&v, 1, MPI_INT, (mt_rank + 1) % mt_size, mt_rank % 16, 1, MPI_INT, win);
  MPI_Win_fence(0, win);
  MPI_Barrier(MPI_COMM_WORLD);
  if (mt_rank == DYING) {
    fflush(stdout);
    if (how && strcmp(how, "kill") == 0) raise(SIGKILL);
    _exit(3);
  }

  /* The death, seen by a receive. */
  int x = 0;
  int err = MPI_Recv(&x, 1, MPI_INT, DYING, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  CHECK(err != MPI_SUCCESS, "a receive from the dead rank succeeded");
#if !defined(OPEN_MPI) && !defined(MPICH_VERSION)
  char text[MPI_MAX_ERROR_STRING];
  CHECK(mt_error(err, text) == MPI_ERR_PROC_FAILED, "receive from the dead rank: %s", text);
#endif

  /* Passive target, exclusive lock. */
  note(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, DYING, 0, win), "Win_lock");
  note(MPI_Put(&v, 1, MPI_INT, DYING, 0, 1, MPI_INT, win), "Put");
  note(MPI_Win_unlock(DYING, win), "Win_unlock");
  report("lock/put/unlock");

  /* lock_all, Put, flush; unlock_all returns (any result). */
  note(MPI_Win_lock_all(0, win), "Win_lock_all");
  note(MPI_Put(&v, 1, MPI_INT, DYING, 1, 1, MPI_INT, win), "Put");
  note(MPI_Win_flush(DYING, win), "Win_flush");
  report("lock_all/put/flush");
  err = MPI_Win_unlock_all(win);
  printf("rank %d: unlock_all returned %d\n", mt_rank, err);

  /* The survivors still reach each other: each puts into its slot of rank 0. */
  if (mt_size >= 3) {
    v = 500 + mt_rank;
    CHECK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win) == MPI_SUCCESS, "lock on a live rank");
    CHECK(MPI_Put(&v, 1, MPI_INT, 0, 2 + mt_rank % 14, 1, MPI_INT, win) == MPI_SUCCESS, "put to a live rank");
    CHECK(MPI_Win_unlock(0, win) == MPI_SUCCESS, "unlock of a live rank");
    MPI_Barrier(survivors);
    if (mt_rank == 0) {
      MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
      MPI_Win_sync(win);
      for (int r = 0; r < mt_size && r < 14; ++r)
        if (r != DYING) CHECK(mem[2 + r] == 500 + r, "live put from rank %d: %d", r, mem[2 + r]);
      MPI_Win_unlock(0, win);
    }
    MPI_Barrier(survivors);
  }

  /* Collective calls with a dead member return (with an error, or not). */
  err = MPI_Win_fence(0, win);
  printf("rank %d: fence returned %d\n", mt_rank, err);
  err = MPI_Win_free(&win);
  printf("rank %d: Win_free returned %d\n", mt_rank, err);
  fflush(stdout);
  MPI_Comm_free(&survivors);
  return mt_pass();
}
