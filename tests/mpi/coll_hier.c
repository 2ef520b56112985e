/* Hierarchical collectives (NMAD_EMULATED_HOSTS gives the ranks hosts, so
 * MPI_COMM_WORLD and its sub-communicators span several "hosts"): Barrier,
 * Bcast, Reduce, Allreduce and their non-blocking forms, every root, in
 * place and not, small and large counts (several rendezvous), on
 * MPI_COMM_WORLD, a communicator with the ranks in reverse order (hosts'
 * ranks not contiguous any more), and a split keeping every other rank.
 * Every element of every result is checked; a non-commutative user op
 * (which stays flat) is checked for MPI's rank order. */
#include "mpitest.h"
#include <time.h>

/* This host's monotonic clock, the same in every process of the host. */
static double host_clock(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int val(int r, int i) { return (r + 1) * 1000 + i % 997; }

/* a op b = a * 10 + b on digits: the result spells the operand order. */
static void digits(void *in, void *inout, int *len, MPI_Datatype *dt) {
  (void)dt;
  long long *a = in, *b = inout;
  for (int i = 0; i < *len; i++) {
    long long p = 1;
    while (p <= b[i]) p *= 10;
    b[i] = a[i] * p + b[i];
  }
}

static void check_comm(MPI_Comm comm, const char *what) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const int counts[] = {1, 100, 70000};
  for (int ci = 0; ci < 3; ci++) {
    const int n = counts[ci];
    int *in = malloc(sizeof(int) * n), *out = malloc(sizeof(int) * n), *want = malloc(sizeof(int) * n);
    for (int i = 0; i < n; i++) {
      in[i] = val(rank, i);
      want[i] = 0;
      for (int r = 0; r < size; r++) want[i] += val(r, i);
    }
    for (int root = 0; root < size; root++) {
      /* Bcast, blocking and not. */
      for (int i = 0; i < n; i++) out[i] = rank == root ? val(root, i) : -1;
      MPI_Bcast(out, n, MPI_INT, root, comm);
      for (int i = 0; i < n; i++) CHECK(out[i] == val(root, i), "%s bcast root %d n %d: [%d] = %d", what, root, n, i, out[i]);
      MPI_Request rq;
      for (int i = 0; i < n; i++) out[i] = rank == root ? -val(root, i) : 7;
      MPI_Ibcast(out, n, MPI_INT, root, comm, &rq);
      MPI_Wait(&rq, MPI_STATUS_IGNORE);
      for (int i = 0; i < n; i++) CHECK(out[i] == -val(root, i), "%s ibcast root %d n %d: [%d] = %d", what, root, n, i, out[i]);
      /* Reduce, into a separate buffer and in place at the root. */
      for (int i = 0; i < n; i++) out[i] = -5;
      MPI_Reduce(in, out, n, MPI_INT, MPI_SUM, root, comm);
      for (int i = 0; i < n; i++) {
        if (rank == root) CHECK(out[i] == want[i], "%s reduce root %d n %d: [%d] = %d, want %d", what, root, n, i, out[i], want[i]);
        else CHECK(out[i] == -5, "%s reduce root %d: non-root buffer written", what, root);
      }
      if (rank == root) {
        memcpy(out, in, sizeof(int) * n);
        MPI_Ireduce(MPI_IN_PLACE, out, n, MPI_INT, MPI_SUM, root, comm, &rq);
      } else {
        MPI_Ireduce(in, NULL, n, MPI_INT, MPI_SUM, root, comm, &rq);
      }
      MPI_Wait(&rq, MPI_STATUS_IGNORE);
      if (rank == root)
        for (int i = 0; i < n; i++) CHECK(out[i] == want[i], "%s ireduce in place root %d n %d: [%d]", what, root, n, i);
    }
    /* Allreduce, blocking, non-blocking, in place. */
    MPI_Allreduce(in, out, n, MPI_INT, MPI_SUM, comm);
    for (int i = 0; i < n; i++) CHECK(out[i] == want[i], "%s allreduce n %d: [%d] = %d, want %d", what, n, i, out[i], want[i]);
    memcpy(out, in, sizeof(int) * n);
    MPI_Request rq;
    MPI_Iallreduce(MPI_IN_PLACE, out, n, MPI_INT, MPI_SUM, comm, &rq);
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
    for (int i = 0; i < n; i++) CHECK(out[i] == want[i], "%s iallreduce in place n %d: [%d]", what, n, i);
    for (int i = 0; i < n; i++) CHECK(in[i] == val(rank, i), "%s: the send buffer was written", what);
    free(in);
    free(out);
    free(want);
  }
  /* Non-commutative user op: digits in rank order (stays flat). */
  MPI_Op op;
  MPI_Op_create(digits, 0, &op);
  long long d = rank + 1, r = 0, w = 0;
  for (int i = 0; i < size; i++) w = w * 10 + (i + 1);
  if (size <= 9) {
    MPI_Allreduce(&d, &r, 1, MPI_LONG_LONG, op, comm);
    CHECK(r == w, "%s non-commutative allreduce %lld, want %lld", what, r, w);
  }
  MPI_Op_free(&op);
  /* Barriers: a rank that arrives late holds everyone. The ranks share
   * this host's monotonic clock: nobody may leave before the late rank
   * entered (whatever the scheduler did to the others meanwhile). Blocking
   * and non-blocking in turn, every rank alike (MPI-3.1 5.12: a blocking
   * collective never matches a non-blocking one). */
  const int lates[4] = {0, size / 2, size - 1, size - 1};
  for (int li = 0; li < 4; li++) {
    const int late = lates[li], nonblocking = li % 2;
    double t0 = MPI_Wtime(), entered = 0, left = 0;
    if (rank == late) {
      while (MPI_Wtime() - t0 < 0.1) {
      }
      entered = host_clock();
    }
    if (nonblocking) {
      MPI_Request rq;
      MPI_Ibarrier(comm, &rq);
      MPI_Wait(&rq, MPI_STATUS_IGNORE);
    } else {
      MPI_Barrier(comm);
    }
    if (rank != late) left = host_clock();
    MPI_Bcast(&entered, 1, MPI_DOUBLE, late, comm);
    if (rank != late)
      CHECK(left >= entered, "%s barrier left %.6f s before rank %d entered it", what, entered - left, late);
  }
}

int main(int argc, char **argv) {
  mt_start("coll_hier", &argc, &argv);
  check_comm(MPI_COMM_WORLD, "world");
  MPI_Comm rev, half;
  MPI_Comm_split(MPI_COMM_WORLD, 0, mt_size - mt_rank, &rev);
  check_comm(rev, "reversed");
  MPI_Comm_split(MPI_COMM_WORLD, mt_rank % 2, mt_rank, &half);
  check_comm(half, "every other rank");
  MPI_Comm_free(&rev);
  MPI_Comm_free(&half);
  return mt_pass();
}
