/* Shared helpers for the plain MPI-3.1 C benchmarks in bench/mpi/.
 *
 * Every benchmark:
 *   - takes  --sizes a,b,c   (bytes; K/M/G suffixes = 2^10/2^20/2^30)
 *            --iters N       (alias --reps N: timed iterations for small sizes;
 *                             scaled down above 64 KiB, never below --min-iters)
 *            --warmup N      (untimed iterations before each size; default iters/10)
 *            --min-iters N   (default 10)
 *     plus its own options (documented at the top of each file);
 *   - verifies the received data of every size at least once (MPI_Abort on
 *     a mismatch: a benchmark measuring wrong data is worthless);
 *   - measures with MPI_Wtime after a warm-up, timing every iteration and
 *     keeping the median iteration (robust to preemption on a shared host);
 *   - prints, on rank 0 only, one JSON object per line on stdout:
 *       {"library": "..."}                                 first line
 *       {"bench": "pingpong", "size": 8, "iters": 1000, ..., "verified": true}
 *       {"bench": "pingpong", "done": true}               before MPI_Finalize
 *     The driver (bench/report/compare.py) keeps the lines that start with
 *     '{' and ignores everything else.
 */
#ifndef NMAD_BENCH_MPI_COMMON_H
#define NMAD_BENCH_MPI_COMMON_H

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* posix_memalign under -std=c11 */
#endif
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_MAX_SIZES 64

typedef struct {
  size_t sizes[BENCH_MAX_SIZES];
  int nsizes;
  int iters;
  int warmup; /* -1: iters/10 */
  int min_iters;
  int window;
  int flows;
  int bidir;
  const char *ops; /* nbc_overlap: comma separated list of operations */
  int thread_multiple; /* --thread-multiple: MPI_Init_thread(MPI_THREAD_MULTIPLE) */
  int threads;         /* --threads N (latency_mt: receiving threads) */
  double compute_us;   /* --compute-us C (eager_send: computation between Isend and Wait) */
} bench_opts;

static inline int bench_rank(void) {
  int r;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

static inline void bench_die(const char *msg) {
  fprintf(stderr, "[rank %d] error: %s\n", bench_rank(), msg);
  fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 2);
  exit(2);
}

static inline size_t bench_parse_size(const char *s) {
  char *end = NULL;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s) bench_die("bad size in --sizes");
  switch (*end) {
    case 'k': case 'K': v <<= 10; end++; break;
    case 'm': case 'M': v <<= 20; end++; break;
    case 'g': case 'G': v <<= 30; end++; break;
    default: break;
  }
  if (*end == 'i' || *end == 'B' || *end == 'b') end++; /* 4KiB, 4KB */
  if (*end == 'B') end++;
  if (*end != '\0') bench_die("bad size in --sizes");
  return (size_t)v;
}

static inline void bench_parse_sizes(bench_opts *o, const char *list) {
  char buf[4096];
  size_t n = strlen(list);
  if (n >= sizeof buf) bench_die("--sizes list too long");
  memcpy(buf, list, n + 1);
  o->nsizes = 0;
  for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
    if (o->nsizes == BENCH_MAX_SIZES) bench_die("too many sizes");
    o->sizes[o->nsizes++] = bench_parse_size(tok);
  }
}

/* Parses the common options; default_sizes is a comma separated list. */
static inline void bench_parse(bench_opts *o, int argc, char **argv, const char *default_sizes,
                        int default_iters, int default_window) {
  memset(o, 0, sizeof *o);
  o->iters = default_iters;
  o->warmup = -1;
  o->min_iters = 10;
  o->window = default_window;
  o->flows = 4;
  o->threads = 1;
  o->compute_us = 50.0;
  o->ops = "Iallreduce,Ibcast,Ialltoall";
  bench_parse_sizes(o, default_sizes);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = (i + 1 < argc) ? argv[i + 1] : NULL;
#define NEEDV() do { if (!v) bench_die("option needs a value"); i++; } while (0)
    if (!strcmp(a, "--sizes")) { NEEDV(); bench_parse_sizes(o, v); }
    else if (!strcmp(a, "--iters") || !strcmp(a, "--reps")) { NEEDV(); o->iters = atoi(v); }
    else if (!strcmp(a, "--warmup")) { NEEDV(); o->warmup = atoi(v); }
    else if (!strcmp(a, "--min-iters")) { NEEDV(); o->min_iters = atoi(v); }
    else if (!strcmp(a, "--window")) { NEEDV(); o->window = atoi(v); }
    else if (!strcmp(a, "--flows")) { NEEDV(); o->flows = atoi(v); }
    else if (!strcmp(a, "--ops")) { NEEDV(); o->ops = v; }
    else if (!strcmp(a, "--bidir")) { o->bidir = 1; }
    else if (!strcmp(a, "--thread-multiple")) { o->thread_multiple = 1; }
    else if (!strcmp(a, "--threads")) { NEEDV(); o->threads = atoi(v); }
    else if (!strcmp(a, "--compute-us")) { NEEDV(); o->compute_us = atof(v); }
    else {
      if (bench_rank() == 0) fprintf(stderr, "unknown option %s\n", a);
      bench_die("bad command line");
    }
#undef NEEDV
  }
  if (o->iters < 1) o->iters = 1;
  if (o->min_iters < 1) o->min_iters = 1;
  if (o->window < 1) o->window = 1;
  if (o->flows < 1) o->flows = 1;
  if (o->threads < 1) o->threads = 1;
}

/* MPI_Init (MPI_Init_thread with MPI_THREAD_MULTIPLE when the command line
 * has --thread-multiple, or when need_multiple), the common options (see
 * bench_parse), this process's rank and the job's size; a job of fewer than
 * min_procs processes ends with an error naming the benchmark. */
static inline void bench_init_mt(bench_opts *o, int *argc, char ***argv, const char *bench, int min_procs,
                          const char *default_sizes, int default_iters, int default_window, int *rank,
                          int *nprocs, int need_multiple) {
  int multiple = need_multiple;
  for (int i = 1; i < *argc; i++)
    if (!strcmp((*argv)[i], "--thread-multiple")) multiple = 1;
  if (multiple) {
    int provided = MPI_THREAD_SINGLE;
    MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    if (provided < MPI_THREAD_MULTIPLE) bench_die("MPI_THREAD_MULTIPLE is not provided");
  } else {
    MPI_Init(argc, argv);
  }
  bench_parse(o, *argc, *argv, default_sizes, default_iters, default_window);
  o->thread_multiple = multiple;
  MPI_Comm_rank(MPI_COMM_WORLD, rank);
  MPI_Comm_size(MPI_COMM_WORLD, nprocs);
  if (*nprocs < min_procs) {
    char msg[128];
    snprintf(msg, sizeof msg, "%s needs at least %d processes", bench, min_procs);
    bench_die(msg);
  }
}

static inline void bench_init(bench_opts *o, int *argc, char ***argv, const char *bench, int min_procs,
                       const char *default_sizes, int default_iters, int default_window, int *rank,
                       int *nprocs) {
  bench_init_mt(o, argc, argv, bench, min_procs, default_sizes, default_iters, default_window, rank, nprocs, 0);
}

/* The largest size of the sweep, and at least `floor`. */
static inline size_t bench_max_size(const bench_opts *o, size_t floor) {
  size_t m = floor;
  for (int s = 0; s < o->nsizes; s++)
    if (o->sizes[s] > m) m = o->sizes[s];
  return m;
}

/* Timed iterations for a message size: all of them up to 64 KiB, then
 * proportionally fewer so that large sizes move about as many bytes. */
static inline int bench_iters_for(const bench_opts *o, size_t size) {
  long n = o->iters;
  if (size > 65536) n = (long)((double)o->iters * 65536.0 / (double)size);
  if (n < o->min_iters) n = o->min_iters;
  if (n > o->iters) n = o->iters;
  return (int)n;
}

static inline int bench_warmup_for(const bench_opts *o, size_t size) {
  int n = o->warmup >= 0 ? o->warmup : bench_iters_for(o, size) / 10;
  if (o->warmup < 0 && n < 2) n = 2;
  return n;
}

static inline void *bench_alloc(size_t n) {
  void *p = NULL;
  if (n == 0) n = 1;
  if (posix_memalign(&p, 4096, n) != 0 || !p) bench_die("out of memory");
  memset(p, 0, n);
  return p;
}

/* Deterministic pattern depending on a seed, so that a stale or misplaced
 * buffer is detected. */
static inline unsigned char bench_pat(uint64_t seed, size_t i) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + (uint64_t)i * 0x2545F4914F6CDD1Dull;
  return (unsigned char)((x >> 29) ^ (x >> 47) ^ i);
}

static inline void bench_fill(void *buf, size_t n, uint64_t seed) {
  unsigned char *b = (unsigned char *)buf;
  for (size_t i = 0; i < n; i++) b[i] = bench_pat(seed, i);
}

/* Aborts the job if buf does not hold the pattern of seed. */
static inline void bench_check(const void *buf, size_t n, uint64_t seed, const char *what) {
  const unsigned char *b = (const unsigned char *)buf;
  for (size_t i = 0; i < n; i++) {
    if (b[i] != bench_pat(seed, i)) {
      char msg[256];
      snprintf(msg, sizeof msg,
               "data verification failed in %s: size %zu, byte %zu: got 0x%02x, expected 0x%02x",
               what, n, i, b[i], bench_pat(seed, i));
      bench_die(msg);
    }
  }
}

static inline void bench_json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') { fputc('\\', f); fputc(c, f); }
    else if (c == '\n') fputs("\\n", f);
    else if (c == '\t') fputs("\\t", f);
    else if (c < 0x20) fprintf(f, "\\u%04x", c);
    else fputc(c, f);
  }
  fputc('"', f);
}

/* First output line: which MPI library actually ran (proves which mpicc). */
static inline void bench_print_library(const char *bench) {
  if (bench_rank() != 0) return;
  char lib[MPI_MAX_LIBRARY_VERSION_STRING + 1];
  int len = 0, size = 0;
  MPI_Get_library_version(lib, &len);
  lib[len] = '\0';
  /* Keep the first line only. */
  char *nl = strchr(lib, '\n');
  if (nl) *nl = '\0';
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  printf("{\"bench\": \"%s\", \"library\": ", bench);
  bench_json_string(stdout, lib);
  printf(", \"nprocs\": %d}\n", size);
  fflush(stdout);
}

/* Whether `op` is one of the comma-separated names in `ops` (--ops). */
static inline int bench_has_op(const char *ops, const char *op) {
  size_t n = strlen(op);
  for (const char *p = ops; p && *p;) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    if (len == n && strncmp(p, op, n) == 0) return 1;
    p = comma ? comma + 1 : NULL;
  }
  return 0;
}

static inline int bench_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Median of n values (sorts a copy). The benchmarks time every iteration and
 * keep the median: on a shared machine one preempted iteration must not move
 * the result (the driver still repeats whole launches and shows min-max). */
static inline double bench_median(const double *v, int n) {
  if (n <= 0) return 0.0;
  double *c = malloc(sizeof(double) * (size_t)n);
  if (!c) bench_die("out of memory");
  memcpy(c, v, sizeof(double) * (size_t)n);
  qsort(c, (size_t)n, sizeof(double), bench_cmp_double);
  double m = (n % 2) ? c[n / 2] : 0.5 * (c[n / 2 - 1] + c[n / 2]);
  free(c);
  return m;
}

static inline double *bench_times(int n) {
  double *t = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
  if (!t) bench_die("out of memory");
  return t;
}

/* Last output line, printed just before MPI_Finalize: lets the driver tell a
 * hang in MPI_Finalize (all results out) from a hang in the measurement. */
static inline void bench_print_done(const char *bench) {
  if (bench_rank() != 0) return;
  printf("{\"bench\": \"%s\", \"done\": true}\n", bench);
  fflush(stdout);
}

/* Busy computation for about `us` microseconds, without any MPI call (so it
 * cannot progress communication): floating-point work in blocks of 64
 * iterations, checking the monotonic clock between blocks. A clock-bounded
 * loop rather than a calibrated iteration count, because the calibration of
 * a flop rate is unreliable on a shared (oversubscribed) machine. */
static volatile double bench_sink;

static inline double bench_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static inline void bench_compute_us(double us) {
  const double end = bench_now_us() + us;
  double a = 1.0000001, x = bench_sink;
  do {
    for (int i = 0; i < 64; i++) x = x * a + 1e-9;
  } while (bench_now_us() < end);
  bench_sink = x;
}

/* IMB-NBC overlap: max(0, min(1, (t_comm + t_comp - t_ovrl) / min(t_comm, t_comp))). */
static inline double bench_overlap(double t_comm, double t_comp, double t_ovrl) {
  double m = t_comm < t_comp ? t_comm : t_comp;
  if (m <= 0.0) return 0.0;
  double o = (t_comm + t_comp - t_ovrl) / m;
  if (o < 0.0) o = 0.0;
  if (o > 1.0) o = 1.0;
  return o;
}

/* The JSON line of a point-to-point overlap benchmark (overlap, send_overlap,
 * recv_overlap): times in seconds, printed in microseconds with the
 * overlap of bench_overlap. */
static inline void bench_print_overlap(const char *bench, size_t size, int iters, double t_comm, double t_comp,
                                       double t_ovrl) {
  printf("{\"bench\": \"%s\", \"size\": %zu, \"iters\": %d, \"t_comm_us\": %.3f, "
         "\"t_comp_us\": %.3f, \"t_ovrl_us\": %.3f, \"overlap_pct\": %.2f, \"verified\": true}\n",
         bench, size, iters, t_comm * 1e6, t_comp * 1e6, t_ovrl * 1e6, 100.0 * bench_overlap(t_comm, t_comp, t_ovrl));
  fflush(stdout);
}

#endif
