/* One-sided latency and bandwidth in a passive-target epoch: rank 0 opens
 * MPI_Win_lock_all once and works on rank 1's window, which waits in an
 * MPI_Barrier (inside MPI, so an MPI that progresses the target only from
 * its calls still can); ranks above 1 only take part in the collectives.
 *
 *   put_lat, get_lat   one 8-byte MPI_Put / MPI_Get + MPI_Win_flush, each
 *                      operation timed alone, the median kept (--iters)
 *   put_bw, get_bw     per size of --sizes: --window operations of that size
 *                      at consecutive displacements then one MPI_Win_flush,
 *                      timed per batch; MB/s of the median batch (--iters/4
 *                      batches while a batch is at most 64 KiB, proportionally
 *                      fewer above, at least 10)
 *   fop_lat            MPI_Fetch_and_op(MPI_SUM, 1, int64) + flush
 *   cas_lat            MPI_Compare_and_swap(int64) + flush
 * Checks: the target compares its window with the pattern put (after a
 * barrier, under a lock on itself); rank 0 compares every get's last batch
 * with the target's pattern; every fetch_and_op must return the running sum
 * and every compare_and_swap the previous value (one origin, so both are
 * exact).
 *
 *   rma_lat [--win allocate|create] [--iters 2000] [--sizes 4K,...,4M]
 *           [--window 16] [--ops put_lat,get_lat,put_bw,get_bw,fop_lat,cas_lat]
 *
 * Output (rank 0), one JSON line per measurement:
 *   {"bench": "rma_lat", "op": "put_lat", "size": 8, "iters": N, "median_us": ..,
 *    "p90_us": .., "min_us": .., "verified": true}
 *   {"bench": "rma_lat", "op": "put_bw", "size": 4096, "iters": N, "window": 16,
 *    "mbps": .. (MB/s, 10^6 bytes), "median_us": per batch, "verified": true}
 * A failed MPI call (an MPI without one-sided communication) prints
 * {"bench": "rma_lat", "error": "<call>: <MPI error string>"} and the program
 * exits with status 3 (no abort: the driver reports it).
 */
#include "common.h"

static int g_rank;

static void rma_fail(const char *call, int rc) {
  char msg[MPI_MAX_ERROR_STRING + 1];
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) len = snprintf(msg, sizeof msg, "error code %d", rc);
  msg[len] = '\0';
  /* The function's name only, not its arguments. */
  const char *paren = strchr(call, '(');
  char what[MPI_MAX_ERROR_STRING + 64];
  snprintf(what, sizeof what, "%.*s: %s", paren ? (int)(paren - call) : (int)strlen(call), call, msg);
  printf("{\"bench\": \"rma_lat\", \"rank\": %d, \"error\": ", g_rank);
  bench_json_string(stdout, what);
  printf("}\n");
  fflush(stdout);
  /* Window creation is collective and fails alike on every rank: finalize
   * and leave cleanly. Any later failure may leave a peer waiting: abort. */
  if (!strncmp(call, "MPI_Win_allocate", 16) || !strncmp(call, "MPI_Win_create", 14)) {
    MPI_Finalize();
    exit(3);
  }
  MPI_Abort(MPI_COMM_WORLD, 3);
  exit(3);
}

#define RMA_CHECK(call)                           \
  do {                                            \
    int rc_ = (call);                             \
    if (rc_ != MPI_SUCCESS) rma_fail(#call, rc_); \
  } while (0)

static void print_lat(const char *op, size_t size, double *t, int n, int ok) {
  qsort(t, (size_t)n, sizeof(double), bench_cmp_double);
  const double med = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
  printf("{\"bench\": \"rma_lat\", \"op\": \"%s\", \"size\": %zu, \"iters\": %d, \"median_us\": %.3f, "
         "\"p90_us\": %.3f, \"min_us\": %.3f, \"verified\": %s}\n",
         op, size, n, med, t[(int)(0.9 * (n - 1) + 0.5)], t[0], ok ? "true" : "false");
  fflush(stdout);
}

/* Target side of a put test: after the barrier that ends rank 0's work,
 * the window must hold the pattern of `seed` over `bytes`. Every rank
 * learns the verdict. */
static int target_check(MPI_Win win, const unsigned char *base, size_t bytes, uint64_t seed) {
  int ok = 1;
  if (g_rank == 1) {
    RMA_CHECK(MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win));
    for (size_t i = 0; i < bytes && ok; ++i) ok = base[i] == bench_pat(seed, i);
    RMA_CHECK(MPI_Win_unlock(1, win));
  }
  MPI_Bcast(&ok, 1, MPI_INT, 1, MPI_COMM_WORLD);
  return ok;
}

/* The target writes the pattern of `seed` into its window (before a get
 * test), under a lock on itself. */
static void target_fill(MPI_Win win, unsigned char *base, size_t bytes, uint64_t seed) {
  if (g_rank == 1) {
    RMA_CHECK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, win));
    bench_fill(base, bytes, seed);
    RMA_CHECK(MPI_Win_unlock(1, win));
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char **argv) {
  const char *winkind = "allocate", *ops = "put_lat,get_lat,put_bw,get_bw,fop_lat,cas_lat";
  const char *sizelist = "4K,16K,64K,256K,1M,4M";
  int iters = 2000, window = 16;
  MPI_Init(&argc, &argv);
  int nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  for (int i = 1; i < argc; ++i) {
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(argv[i], "--win") && v) winkind = argv[++i];
    else if (!strcmp(argv[i], "--iters") && v) iters = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--sizes") && v) sizelist = argv[++i];
    else if (!strcmp(argv[i], "--window") && v) window = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--ops") && v) ops = argv[++i];
    else {
      if (g_rank == 0) fprintf(stderr, "rma_lat: bad option %s (see the top of rma_lat.c)\n", argv[i]);
      bench_die("bad command line");
    }
  }
  if (strcmp(winkind, "allocate") && strcmp(winkind, "create")) bench_die("--win allocate or --win create");
  if (nprocs < 2) bench_die("rma_lat needs at least 2 processes");
  if (iters < 10 || window < 1) bench_die("--iters must be at least 10, --window at least 1");
  bench_opts so; /* the sizes and the per-size iteration scaling of common.h */
  memset(&so, 0, sizeof so);
  bench_parse_sizes(&so, sizelist);
  so.iters = iters / 4 > 10 ? iters / 4 : 10;
  so.min_iters = 10;
  so.warmup = -1;
  bench_print_library("rma_lat");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

  size_t maxsize = bench_max_size(&so, 8);
  const size_t winbytes = maxsize * (size_t)window;
  unsigned char *base = NULL, *own = NULL;
  MPI_Win win;
  if (!strcmp(winkind, "allocate")) {
    RMA_CHECK(MPI_Win_allocate((MPI_Aint)winbytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
  } else {
    own = bench_alloc(winbytes);
    base = own;
    RMA_CHECK(MPI_Win_create(base, (MPI_Aint)winbytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
  }
  MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
  unsigned char *buf = bench_alloc(winbytes);
  double *t = bench_times(iters);
  const int origin = g_rank == 0;
  uint64_t seed = 1;

  /* put_lat / get_lat: 8 bytes. */
  for (int get = 0; get < 2; ++get) {
    const char *op = get ? "get_lat" : "put_lat";
    if (!bench_has_op(ops, op)) continue;
    ++seed;
    if (get) target_fill(win, base, 8, seed);
    else bench_fill(buf, 8, seed);
    int ok = 1;
    if (origin) {
      RMA_CHECK(MPI_Win_lock_all(0, win));
      for (int i = -iters / 10; i < iters; ++i) {
        const double t0 = MPI_Wtime();
        if (get) RMA_CHECK(MPI_Get(buf, 8, MPI_BYTE, 1, 0, 8, MPI_BYTE, win));
        else RMA_CHECK(MPI_Put(buf, 8, MPI_BYTE, 1, 0, 8, MPI_BYTE, win));
        RMA_CHECK(MPI_Win_flush(1, win));
        if (i >= 0) t[i] = (MPI_Wtime() - t0) * 1e6;
      }
      RMA_CHECK(MPI_Win_unlock_all(win));
      if (get)
        for (size_t b = 0; b < 8; ++b) ok &= buf[b] == bench_pat(seed, b);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (!get) ok = target_check(win, base, 8, seed);
    else MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (origin) print_lat(op, 8, t, iters, ok);
  }

  /* put_bw / get_bw: per size, batches of `window` operations + one flush. */
  for (int get = 0; get < 2; ++get) {
    const char *op = get ? "get_bw" : "put_bw";
    if (!bench_has_op(ops, op)) continue;
    for (int s = 0; s < so.nsizes; ++s) {
      const size_t size = so.sizes[s];
      const size_t bytes = size * (size_t)window;
      const int n = bench_iters_for(&so, bytes);
      const int warm = bench_warmup_for(&so, bytes);
      ++seed;
      if (get) target_fill(win, base, bytes, seed);
      else bench_fill(buf, bytes, seed);
      int ok = 1;
      if (origin) {
        if (get) memset(buf, 0, bytes);
        RMA_CHECK(MPI_Win_lock_all(0, win));
        for (int i = -warm; i < n; ++i) {
          const double t0 = MPI_Wtime();
          for (int w = 0; w < window; ++w) {
            const MPI_Aint disp = (MPI_Aint)(size * (size_t)w);
            if (get) RMA_CHECK(MPI_Get(buf + disp, (int)size, MPI_BYTE, 1, disp, (int)size, MPI_BYTE, win));
            else RMA_CHECK(MPI_Put(buf + disp, (int)size, MPI_BYTE, 1, disp, (int)size, MPI_BYTE, win));
          }
          RMA_CHECK(MPI_Win_flush(1, win));
          if (i >= 0) t[i] = (MPI_Wtime() - t0) * 1e6;
        }
        RMA_CHECK(MPI_Win_unlock_all(win));
        if (get)
          for (size_t b = 0; b < bytes && ok; ++b) ok = buf[b] == bench_pat(seed, b);
      }
      MPI_Barrier(MPI_COMM_WORLD);
      if (!get) ok = target_check(win, base, bytes, seed);
      else MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
      if (origin) {
        qsort(t, (size_t)n, sizeof(double), bench_cmp_double);
        const double med = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
        printf("{\"bench\": \"rma_lat\", \"op\": \"%s\", \"size\": %zu, \"iters\": %d, \"window\": %d, "
               "\"mbps\": %.1f, \"median_us\": %.3f, \"verified\": %s}\n",
               op, size, n, window, (double)bytes / med, med, ok ? "true" : "false");
        fflush(stdout);
      }
    }
  }

  /* fop_lat / cas_lat on the first 8 bytes, set to 0 by the target first. */
  for (int cas = 0; cas < 2; ++cas) {
    const char *op = cas ? "cas_lat" : "fop_lat";
    if (!bench_has_op(ops, op)) continue;
    if (g_rank == 1) {
      RMA_CHECK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, win));
      memset(base, 0, sizeof(int64_t));
      RMA_CHECK(MPI_Win_unlock(1, win));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    int ok = 1;
    int64_t expect = 0;
    if (origin) {
      const int64_t one = 1;
      RMA_CHECK(MPI_Win_lock_all(0, win));
      for (int i = -iters / 10; i < iters; ++i) {
        int64_t got = -1, next = expect + 1;
        const double t0 = MPI_Wtime();
        if (cas) RMA_CHECK(MPI_Compare_and_swap(&next, &expect, &got, MPI_INT64_T, 1, 0, win));
        else RMA_CHECK(MPI_Fetch_and_op(&one, &got, MPI_INT64_T, 1, 0, MPI_SUM, win));
        RMA_CHECK(MPI_Win_flush(1, win));
        if (i >= 0) t[i] = (MPI_Wtime() - t0) * 1e6;
        if (got != expect) {
          if (ok) fprintf(stderr, "rma_lat: %s %d returned %lld, expected %lld\n", op, i, (long long)got, (long long)expect);
          ok = 0;
        }
        expect = next;
      }
      RMA_CHECK(MPI_Win_unlock_all(win));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    /* The target's final value: the number of operations. */
    MPI_Bcast(&expect, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
    int tok = 1;
    if (g_rank == 1) {
      RMA_CHECK(MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win));
      tok = *(volatile int64_t *)base == expect;
      RMA_CHECK(MPI_Win_unlock(1, win));
    }
    MPI_Bcast(&tok, 1, MPI_INT, 1, MPI_COMM_WORLD);
    if (origin) print_lat(op, 8, t, iters, ok && tok);
  }

  RMA_CHECK(MPI_Win_free(&win));
  free(own);
  free(buf);
  free(t);
  bench_print_done("rma_lat");
  MPI_Finalize();
  return 0;
}
