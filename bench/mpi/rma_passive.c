/* Passive-target progress: how long one MPI_Win_lock(EXCLUSIVE) + 8-byte
 * MPI_Put + MPI_Win_unlock of rank 0 on rank 1's window takes while rank 1
 * computes without calling MPI. An MPI whose passive target needs the
 * target inside the library (no progress thread, no hardware RMA) completes
 * the first epoch only when rank 1 enters MPI again, so the maximum grows
 * to the whole computation; one that progresses asynchronously keeps every
 * epoch near the latency of an idle target.
 *
 * Two phases, each in its own JSON line:
 *   "target_in_mpi":   rank 1 waits in MPI_Barrier while rank 0 runs --iters
 *                      epochs (the reference: the target inside MPI);
 *   "target_computing": rank 1 runs --rounds rounds of --compute-ms ms of a
 *                      busy loop reading the clock (no MPI call between the
 *                      rounds), then MPI_Barrier; rank 0 runs epochs back to
 *                      back until the computation's end (its start is aligned
 *                      by a barrier), at least one (the median and p90 of the
 *                      first million, the maximum of all).
 * Every epoch puts its sequence number; after each phase rank 1 reads its
 * window (a lock on itself) and must find the last number put.
 *
 *   rma_passive [--win allocate|create] [--rounds 100] [--compute-ms 10]
 *               [--iters 1000] [--win-bytes 4096]
 * --win-bytes is the window's size (the put goes to its first 8 bytes): a
 * page by default, because MPICH 4.0.2 (ch4:ucx) loses the put into an
 * MPI_Win_allocate window of some sizes (8 and 4095 bytes here, every time;
 * 16 to 2048 and 4096 work): the target keeps its old value, which
 * --win-bytes 8 shows (verified false).
 *
 * Output (rank 0): {"bench": "rma_passive", "phase": ..., "win": ...,
 *   "epochs": N, "median_us", "p90_us", "max_us", "min_us", "verified"}.
 * An MPI call that fails (an MPI without one-sided communication) prints
 * {"bench": "rma_passive", "error": "<call>: <MPI error string>"} and the
 * program exits with status 3 (no abort: the driver reports it).
 */
#include "common.h"

static int g_rank;
static long g_winbytes;

/* Reports a failed MPI call as a JSON line (rank 0, or any rank when the
 * failure is rank 1's alone) and ends the job with status 3. */
static void rma_fail(const char *call, int rc) {
  char msg[MPI_MAX_ERROR_STRING + 1];
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) len = snprintf(msg, sizeof msg, "error code %d", rc);
  msg[len] = '\0';
  printf("{\"bench\": \"rma_passive\", \"rank\": %d, \"error\": ", g_rank);
  /* The function's name only, not its arguments. */
  const char *paren = strchr(call, '(');
  char what[MPI_MAX_ERROR_STRING + 64];
  snprintf(what, sizeof what, "%.*s: %s", paren ? (int)(paren - call) : (int)strlen(call), call, msg);
  bench_json_string(stdout, what);
  printf("}\n");
  fflush(stdout);
  /* A collective call fails on every rank alike: finalize and leave
   * cleanly; otherwise the peer may wait for us: abort. */
  if (!strncmp(call, "MPI_Win_allocate", 16) || !strncmp(call, "MPI_Win_create", 14)) {
    MPI_Finalize();
    exit(3);
  }
  MPI_Abort(MPI_COMM_WORLD, 3);
  exit(3);
}

#define RMA_CHECK(call)                       \
  do {                                        \
    int rc_ = (call);                         \
    if (rc_ != MPI_SUCCESS) rma_fail(#call, rc_); \
  } while (0)

/* n timed epochs in t (the median and p90 come from them), `epochs` in all
 * and `max` the longest of all (more epochs than t holds are counted and
 * their maximum kept). */
static void print_phase(const char *phase, const char *win, double *t, int n, long epochs, double max,
                        int verified, int rounds, double compute_ms) {
  qsort(t, (size_t)n, sizeof(double), bench_cmp_double);
  int p90 = (int)(0.9 * (n - 1) + 0.5);
  if (t[n - 1] > max) max = t[n - 1];
  printf("{\"bench\": \"rma_passive\", \"phase\": \"%s\", \"win\": \"%s\", \"epochs\": %ld, \"median_us\": %.3f, "
         "\"p90_us\": %.3f, \"max_us\": %.3f, \"min_us\": %.3f, \"rounds\": %d, \"compute_ms\": %.3f, \"win_bytes\": %ld, "
         "\"verified\": %s}\n",
         phase, win, epochs, n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]), t[p90], max, t[0], rounds,
         compute_ms, g_winbytes, verified ? "true" : "false");
  fflush(stdout);
}

/* One epoch of rank 0 on rank 1: lock, put `value`, unlock; its duration in
 * microseconds. */
static double epoch(MPI_Win win, int64_t *value) {
  const double t0 = MPI_Wtime();
  RMA_CHECK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, win));
  RMA_CHECK(MPI_Put(value, 1, MPI_INT64_T, 1, 0, 1, MPI_INT64_T, win));
  RMA_CHECK(MPI_Win_unlock(1, win));
  return (MPI_Wtime() - t0) * 1e6;
}

/* After a phase: rank 1 reads its window under a lock on itself and checks
 * it holds rank 0's last value; every rank learns the verdict. */
static int verify(MPI_Win win, int64_t *base, int64_t last) {
  MPI_Bcast(&last, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
  int ok = 1;
  if (g_rank == 1) {
    RMA_CHECK(MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win));
    ok = (*(volatile int64_t *)base == last);
    if (!ok) fprintf(stderr, "rma_passive: target holds %lld, last put %lld\n", (long long)*base, (long long)last);
    RMA_CHECK(MPI_Win_unlock(1, win));
  }
  MPI_Bcast(&ok, 1, MPI_INT, 1, MPI_COMM_WORLD);
  return ok;
}

int main(int argc, char **argv) {
  const char *winkind = "allocate";
  int rounds = 100, iters = 1000;
  long winbytes = 4096;
  double compute_ms = 10.0;
  MPI_Init(&argc, &argv);
  int nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  for (int i = 1; i < argc; ++i) {
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(argv[i], "--win") && v) winkind = argv[++i];
    else if (!strcmp(argv[i], "--rounds") && v) rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--compute-ms") && v) compute_ms = atof(argv[++i]);
    else if (!strcmp(argv[i], "--iters") && v) iters = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--win-bytes") && v) winbytes = atol(argv[++i]);
    else {
      if (g_rank == 0) fprintf(stderr, "rma_passive: bad option %s (see the top of rma_passive.c)\n", argv[i]);
      bench_die("bad command line");
    }
  }
  if (strcmp(winkind, "allocate") && strcmp(winkind, "create")) bench_die("--win allocate or --win create");
  if (nprocs < 2) bench_die("rma_passive needs at least 2 processes");
  if (rounds < 1 || iters < 1 || compute_ms <= 0) bench_die("--rounds, --iters and --compute-ms must be positive");
  if (winbytes < (long)sizeof(int64_t)) bench_die("--win-bytes must be at least 8");
  g_winbytes = winbytes;
  bench_print_library("rma_passive");
  /* Failures come back as codes (reported as JSON), not aborts. */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

  int64_t *base = NULL, *own = NULL;
  MPI_Win win;
  if (!strcmp(winkind, "allocate")) {
    RMA_CHECK(MPI_Win_allocate((MPI_Aint)winbytes, sizeof(int64_t), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
  } else {
    own = bench_alloc((size_t)winbytes);
    base = own;
    RMA_CHECK(MPI_Win_create(base, (MPI_Aint)winbytes, sizeof(int64_t), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
  }
  MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
  /* The window's initial contents, written under a lock on itself. */
  RMA_CHECK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, g_rank, 0, win));
  *base = -1;
  RMA_CHECK(MPI_Win_unlock(g_rank, win));
  MPI_Barrier(MPI_COMM_WORLD);

  const int cap = iters > 1000000 ? iters : 1000000;
  double *t = g_rank == 0 ? bench_times(cap) : NULL;
  int64_t value = 0;

  /* Phase 1: the target waits inside MPI. */
  if (g_rank == 0) {
    for (int i = 0; i < iters / 10 + 1; ++i) epoch(win, &value); /* warm-up */
    for (int i = 0; i < iters; ++i) {
      ++value;
      t[i] = epoch(win, &value);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  int ok = verify(win, base, value);
  if (g_rank == 0) print_phase("target_in_mpi", winkind, t, iters, iters, 0.0, ok, 0, 0.0);

  /* Phase 2: the target computes without calling MPI. */
  MPI_Barrier(MPI_COMM_WORLD);
  const double end = MPI_Wtime() + rounds * compute_ms * 1e-3;
  int n = 0;
  long epochs = 0;
  double max = 0.0;
  if (g_rank == 1) {
    for (int r = 0; r < rounds; ++r) bench_compute_us(compute_ms * 1e3);
  } else if (g_rank == 0) {
    /* Epochs until the computation's end; beyond `cap` (an MPI whose
     * epochs take 0.1 us makes 10^7 a second) only counted, their longest
     * kept. */
    do {
      ++value;
      const double d = epoch(win, &value);
      if (n < cap) t[n++] = d;
      else if (d > max) max = d;
      ++epochs;
    } while (MPI_Wtime() < end);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  ok = verify(win, base, value);
  if (g_rank == 0) print_phase("target_computing", winkind, t, n, epochs, max, ok, rounds, compute_ms);

  RMA_CHECK(MPI_Win_free(&win));
  free(own);
  free(t);
  bench_print_done("rma_passive");
  MPI_Finalize();
  return 0;
}
