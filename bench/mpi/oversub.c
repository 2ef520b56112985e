/* Collectives and a ring on any number of ranks: meant to be run with more
 * ranks than cores (oversubscribed), where the way an MPI library waits
 * decides everything.
 *
 *   oversub [--ops barrier,allreduce,alltoall,ring] [--iters N] [--tag T]
 *
 *   barrier    MPI_Barrier
 *   allreduce  MPI_Allreduce of 256 doubles (MPI_SUM), checked every time
 *   alltoall   MPI_Alltoall, 4 KiB per peer, checked on the first and last
 *   ring       MPI_Sendrecv of 1 MiB to the right neighbour from the left,
 *              checked on the first and last
 * Each operation runs N times after N/10 warm-up rounds; the N rounds are
 * timed in 5 batches and the median batch gives the time per operation.
 * --tag T names the run (e.g. the rank count) in the bench field.
 * Output per operation (rank 0):
 *   {"bench": "oversub<T>.<op>", "size": <bytes per rank>, "iters": N,
 *    "np": P, "us_per_op": ..., "iters_per_s": ..., "verified": true}
 */
#include "common.h"

#define BATCHES 5

typedef struct {
  int rank, np, check;
  double *red_in, *red_out;
  unsigned char *a2a_send, *a2a_recv, *ring_send, *ring_recv;
} ctx_t;

enum { RED_N = 256, A2A_BLOCK = 4096, RING_BYTES = 1 << 20 };

static void run_barrier(ctx_t *c) { MPI_Barrier(MPI_COMM_WORLD); }

static void run_allreduce(ctx_t *c) {
  for (int i = 0; i < RED_N; i++) c->red_in[i] = (double)(c->rank + i);
  MPI_Allreduce(c->red_in, c->red_out, RED_N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  const double ranks = (double)c->np * (double)(c->np - 1) / 2.0;
  for (int i = 0; i < RED_N; i++)
    if (c->red_out[i] != ranks + (double)c->np * i) bench_die("allreduce: wrong sum");
}

static void run_alltoall(ctx_t *c) {
  MPI_Alltoall(c->a2a_send, A2A_BLOCK, MPI_BYTE, c->a2a_recv, A2A_BLOCK, MPI_BYTE, MPI_COMM_WORLD);
  if (c->check)
    for (int p = 0; p < c->np; p++)
      bench_check(c->a2a_recv + (size_t)p * A2A_BLOCK, A2A_BLOCK, (uint64_t)(p * 1000 + c->rank), "alltoall");
}

static void run_ring(ctx_t *c) {
  const int right = (c->rank + 1) % c->np, left = (c->rank + c->np - 1) % c->np;
  MPI_Sendrecv(c->ring_send, RING_BYTES, MPI_BYTE, right, 5, c->ring_recv, RING_BYTES, MPI_BYTE, left, 5,
               MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  if (c->check) bench_check(c->ring_recv, RING_BYTES, (uint64_t)(77 + left), "ring");
}

static void measure(ctx_t *c, const char *tag, const char *op, size_t size, int iters, void (*fn)(ctx_t *)) {
  const int warmup = iters / 10 > 0 ? iters / 10 : 1;
  c->check = 1;
  fn(c);  /* verified */
  c->check = 0;
  for (int i = 0; i < warmup; i++) fn(c);
  double batch[BATCHES];
  const int per = iters / BATCHES > 0 ? iters / BATCHES : 1;
  for (int b = 0; b < BATCHES; b++) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < per; i++) {
      c->check = (b == BATCHES - 1 && i == per - 1);
      fn(c);
    }
    double t = (MPI_Wtime() - t0) / per, tmax = 0;
    MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    batch[b] = tmax;
  }
  const double med = bench_median(batch, BATCHES);
  if (c->rank == 0) {
    printf("{\"bench\": \"oversub%s.%s\", \"size\": %zu, \"iters\": %d, \"np\": %d, \"us_per_op\": %.3f, "
           "\"iters_per_s\": %.3f, \"verified\": true}\n",
           tag, op, size, per * BATCHES, c->np, med * 1e6, med > 0 ? 1.0 / med : 0.0);
    fflush(stdout);
  }
}

int main(int argc, char **argv) {
  const char *ops = "barrier,allreduce,alltoall,ring";
  const char *tag = "";
  int iters = 200;
  /* Own options first; the rest would confuse nobody (no common options). */
  MPI_Init(&argc, &argv);
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--ops") && i + 1 < argc) ops = argv[++i];
    else if ((!strcmp(argv[i], "--iters") || !strcmp(argv[i], "--reps")) && i + 1 < argc) iters = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--tag") && i + 1 < argc) tag = argv[++i];
    else if (!strcmp(argv[i], "--sizes") || !strcmp(argv[i], "--min-iters") || !strcmp(argv[i], "--window")) i++;
    else bench_die("unknown option (oversub takes --ops, --iters, --tag)");
  }
  if (iters < BATCHES) iters = BATCHES;
  ctx_t c;
  MPI_Comm_rank(MPI_COMM_WORLD, &c.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &c.np);
  bench_print_library("oversub");
  c.red_in = bench_alloc(RED_N * sizeof(double));
  c.red_out = bench_alloc(RED_N * sizeof(double));
  c.a2a_send = bench_alloc((size_t)A2A_BLOCK * (size_t)c.np);
  c.a2a_recv = bench_alloc((size_t)A2A_BLOCK * (size_t)c.np);
  c.ring_send = bench_alloc(RING_BYTES);
  c.ring_recv = bench_alloc(RING_BYTES);
  for (int p = 0; p < c.np; p++)
    bench_fill(c.a2a_send + (size_t)p * A2A_BLOCK, A2A_BLOCK, (uint64_t)(c.rank * 1000 + p));
  bench_fill(c.ring_send, RING_BYTES, (uint64_t)(77 + c.rank));

  if (bench_has_op(ops, "barrier")) measure(&c, tag, "barrier", 0, iters, run_barrier);
  if (bench_has_op(ops, "allreduce")) measure(&c, tag, "allreduce", RED_N * sizeof(double), iters, run_allreduce);
  if (bench_has_op(ops, "alltoall")) measure(&c, tag, "alltoall", A2A_BLOCK, iters, run_alltoall);
  if (bench_has_op(ops, "ring")) measure(&c, tag, "ring", RING_BYTES, iters, run_ring);
  bench_print_done("oversub");
  MPI_Finalize();
  return 0;
}
