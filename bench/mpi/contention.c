/* Collectives and the graph-code polling loop where ranks share cores: run
 * with more ranks than cores and/or with other busy processes on the
 * machine (bench/compare --load K starts them), where how an MPI library
 * waits decides everything.
 *
 *   contention [--ops barrier,bcast,scatter,gather,allreduce,alltoall,polling]
 *              [--sizes 0,8,1K,64K] [--iters N] [--tag T]
 *
 *   barrier     MPI_Barrier (size ignored: reported as 0)
 *   bcast       MPI_Bcast of `size` bytes from rank 0
 *   scatter     MPI_Scatter, `size` bytes per rank, root 0
 *   gather      MPI_Gather, `size` bytes per rank, root 0
 *   allreduce   MPI_Allreduce of size/4 floats (MPI_SUM; 0 B: count 0)
 *   alltoall    MPI_Alltoall, `size` bytes per peer
 *   polling     one round of the Graph500-style active-message pattern:
 *               persistent receives restarted after each arrival, polled
 *               with MPI_Testany, one 8-byte message to every other rank,
 *               the round closed by an MPI_Ibarrier polled with MPI_Test
 *               (size ignored: reported as 8)
 * Every result is checked on the first and last iteration of each batch.
 * Each point runs N iterations (fewer above 1 KiB) after N/10 warm-up ones,
 * timed in 5 batches; the median batch (slowest rank) gives the time per
 * operation. Output per point (rank 0):
 *   {"bench": "contention<T>.<op>", "size": S, "iters": N, "np": P,
 *    "us_per_op": ..., "verified": true}
 */
#include "common.h"

#define BATCHES 5

typedef struct {
  int rank, np, check;
  size_t size;
  unsigned char *sbuf, *rbuf;
  float *fin, *fout;
  /* polling */
  long long *pin, *pout;
  MPI_Request *precv, *psend;
  long long *pseen;
  long long round;
} ctx_t;

static void run_barrier(ctx_t *c) { MPI_Barrier(MPI_COMM_WORLD); }

static void run_bcast(ctx_t *c) {
  if (c->check && c->rank == 0) bench_fill(c->sbuf, c->size, 11);
  if (c->check && c->rank != 0) memset(c->sbuf, 0, c->size);
  MPI_Bcast(c->sbuf, (int)c->size, MPI_BYTE, 0, MPI_COMM_WORLD);
  if (c->check) bench_check(c->sbuf, c->size, 11, "bcast");
}

static void run_scatter(ctx_t *c) {
  if (c->check && c->rank == 0)
    for (int p = 0; p < c->np; p++) bench_fill(c->sbuf + (size_t)p * c->size, c->size, (uint64_t)(100 + p));
  MPI_Scatter(c->sbuf, (int)c->size, MPI_BYTE, c->rbuf, (int)c->size, MPI_BYTE, 0, MPI_COMM_WORLD);
  if (c->check) bench_check(c->rbuf, c->size, (uint64_t)(100 + c->rank), "scatter");
}

static void run_gather(ctx_t *c) {
  if (c->check) bench_fill(c->sbuf, c->size, (uint64_t)(200 + c->rank));
  MPI_Gather(c->sbuf, (int)c->size, MPI_BYTE, c->rbuf, (int)c->size, MPI_BYTE, 0, MPI_COMM_WORLD);
  if (c->check && c->rank == 0)
    for (int p = 0; p < c->np; p++) bench_check(c->rbuf + (size_t)p * c->size, c->size, (uint64_t)(200 + p), "gather");
}

static void run_allreduce(ctx_t *c) {
  const int n = (int)(c->size / sizeof(float));
  if (c->check)
    for (int i = 0; i < n; i++) c->fin[i] = (float)((c->rank + i) % 64);
  MPI_Allreduce(c->fin, c->fout, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  if (c->check)
    for (int i = 0; i < n; i++) {
      float expect = 0;
      for (int p = 0; p < c->np; p++) expect += (float)((p + i) % 64);
      if (c->fout[i] != expect) bench_die("allreduce: wrong sum");
    }
}

static void run_alltoall(ctx_t *c) {
  if (c->check)
    for (int p = 0; p < c->np; p++) bench_fill(c->sbuf + (size_t)p * c->size, c->size, (uint64_t)(c->rank * 1000 + p));
  MPI_Alltoall(c->sbuf, (int)c->size, MPI_BYTE, c->rbuf, (int)c->size, MPI_BYTE, MPI_COMM_WORLD);
  if (c->check)
    for (int p = 0; p < c->np; p++)
      bench_check(c->rbuf + (size_t)p * c->size, c->size, (uint64_t)(p * 1000 + c->rank), "alltoall");
}

static void polling_setup(ctx_t *c) {
  c->pin = calloc((size_t)c->np, sizeof *c->pin);
  c->pout = calloc((size_t)c->np, sizeof *c->pout);
  c->pseen = calloc((size_t)c->np, sizeof *c->pseen);
  c->precv = malloc((size_t)c->np * sizeof *c->precv);
  c->psend = malloc((size_t)c->np * sizeof *c->psend);
  for (int p = 0; p < c->np; p++) {
    c->precv[p] = MPI_REQUEST_NULL;
    c->psend[p] = MPI_REQUEST_NULL;
    if (p == c->rank) continue;
    MPI_Recv_init(&c->pin[p], 1, MPI_LONG_LONG, p, 21, MPI_COMM_WORLD, &c->precv[p]);
    MPI_Start(&c->precv[p]);
  }
}

static void run_polling(ctx_t *c) {
  const long long r = c->round++;
  for (int p = 0; p < c->np; p++) {
    if (p == c->rank) continue;
    c->pout[p] = (long long)c->rank << 40 | r;
    MPI_Isend(&c->pout[p], 1, MPI_LONG_LONG, p, 21, MPI_COMM_WORLD, &c->psend[p]);
  }
  int got = 0;
  while (got < c->np - 1) {
    int idx = MPI_UNDEFINED, flag = 0;
    MPI_Testany(c->np, c->precv, &idx, &flag, MPI_STATUS_IGNORE);
    if (!flag || idx == MPI_UNDEFINED) continue;
    if (c->pin[idx] != ((long long)idx << 40 | c->pseen[idx])) bench_die("polling: wrong message");
    c->pseen[idx]++;
    got++;
    MPI_Start(&c->precv[idx]);
  }
  MPI_Waitall(c->np, c->psend, MPI_STATUSES_IGNORE);
  MPI_Request bar;
  MPI_Ibarrier(MPI_COMM_WORLD, &bar);
  for (int done = 0; !done;) MPI_Test(&bar, &done, MPI_STATUS_IGNORE);
}

static void polling_teardown(ctx_t *c) {
  for (int p = 0; p < c->np; p++) {
    if (p == c->rank) continue;
    if (c->pseen[p] != c->round) bench_die("polling: messages missing");
    MPI_Cancel(&c->precv[p]);
    MPI_Wait(&c->precv[p], MPI_STATUS_IGNORE);
    MPI_Request_free(&c->precv[p]);
  }
}

static void measure(ctx_t *c, const char *tag, const char *op, size_t size, int iters, void (*fn)(ctx_t *)) {
  c->size = size;
  if (size > 1024) iters = iters / 4 > BATCHES ? iters / 4 : BATCHES;
  const int warmup = iters / 10 > 0 ? iters / 10 : 1;
  c->check = 1;
  fn(c);
  c->check = 0;
  for (int i = 0; i < warmup; i++) fn(c);
  double batch[BATCHES];
  const int per = iters / BATCHES > 0 ? iters / BATCHES : 1;
  for (int b = 0; b < BATCHES; b++) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < per; i++) {
      c->check = (i == 0 || i == per - 1);
      fn(c);
    }
    double t = (MPI_Wtime() - t0) / per, tmax = 0;
    MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    batch[b] = tmax;
  }
  const double med = bench_median(batch, BATCHES);
  if (c->rank == 0) {
    printf("{\"bench\": \"contention%s.%s\", \"size\": %zu, \"iters\": %d, \"np\": %d, \"us_per_op\": %.3f, "
           "\"verified\": true}\n",
           tag, op, size, per * BATCHES, c->np, med * 1e6);
    fflush(stdout);
  }
}

int main(int argc, char **argv) {
  const char *ops = "barrier,bcast,scatter,gather,allreduce,alltoall,polling";
  const char *tag = "";
  const char *sizes_arg = "0,8,1K,64K";
  int iters = 200;
  MPI_Init(&argc, &argv);
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--ops") && i + 1 < argc) ops = argv[++i];
    else if ((!strcmp(argv[i], "--iters") || !strcmp(argv[i], "--reps")) && i + 1 < argc) iters = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--tag") && i + 1 < argc) tag = argv[++i];
    else if (!strcmp(argv[i], "--sizes") && i + 1 < argc) sizes_arg = argv[++i];
    else if (!strcmp(argv[i], "--min-iters") || !strcmp(argv[i], "--window")) i++;
    else bench_die("unknown option (contention takes --ops, --sizes, --iters, --tag)");
  }
  if (iters < BATCHES) iters = BATCHES;
  bench_opts o;
  memset(&o, 0, sizeof o);
  bench_parse_sizes(&o, sizes_arg);
  ctx_t c;
  memset(&c, 0, sizeof c);
  MPI_Comm_rank(MPI_COMM_WORLD, &c.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &c.np);
  bench_print_library("contention");
  size_t max = 8;
  for (int i = 0; i < o.nsizes; i++)
    if (o.sizes[i] > max) max = o.sizes[i];
  c.sbuf = bench_alloc(max * (size_t)c.np);
  c.rbuf = bench_alloc(max * (size_t)c.np);
  c.fin = bench_alloc(max);
  c.fout = bench_alloc(max);

  static const struct {
    const char *name;
    void (*fn)(ctx_t *);
    int sized;
  } table[] = {{"barrier", run_barrier, 0}, {"bcast", run_bcast, 1},         {"scatter", run_scatter, 1},
               {"gather", run_gather, 1},   {"allreduce", run_allreduce, 1}, {"alltoall", run_alltoall, 1}};
  for (size_t t = 0; t < sizeof table / sizeof table[0]; t++) {
    if (!bench_has_op(ops, table[t].name)) continue;
    if (!table[t].sized) {
      measure(&c, tag, table[t].name, 0, iters, table[t].fn);
      continue;
    }
    for (int i = 0; i < o.nsizes; i++) measure(&c, tag, table[t].name, o.sizes[i], iters, table[t].fn);
  }
  if (bench_has_op(ops, "polling")) {
    polling_setup(&c);
    measure(&c, tag, "polling", 8, iters * 5, run_polling);
    polling_teardown(&c);
  }
  bench_print_done("contention");
  MPI_Finalize();
  return 0;
}
