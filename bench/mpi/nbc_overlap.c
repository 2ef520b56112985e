/* Non-blocking collective overlap, computed as IMB-NBC does:
 *
 *   t_pure: I<op> + MPI_Wait
 *   t_CPU : a computation (no MPI call) bounded by the clock to ~t_pure
 *   t_ovrl: I<op>, the same computation, MPI_Wait
 *   overlap = max(0, min(1, (t_pure + t_CPU - t_ovrl) / min(t_pure, t_CPU)))
 *
 * with each time the median over the iterations (IMB takes the mean; the
 * median resists preemption on a shared machine), then the maximum over the
 * ranks.
 *
 *   nbc_overlap [--ops Iallreduce,Ibcast,Ialltoall] [--sizes ...] [--iters N]
 *
 * Sizes are bytes: the reduced vector (MPI_DOUBLE, size/8 elements) for
 * Iallreduce, the broadcast buffer for Ibcast (root 0), the block sent to
 * each rank for Ialltoall. Results are verified once before timing and once
 * after. Output per (op, size):
 *   {"bench": "nbc_overlap", "op": "Iallreduce", "size": S, "iters": N,
 *    "t_pure_us": .., "t_cpu_us": .., "t_ovrl_us": .., "overlap_pct": ..,
 *    "coll_cpu_us": .., "verified": true}
 * coll_cpu_us is the CPU time the collective itself took while overlapped:
 * the process's CPU time (every thread, getrusage) per iteration of the
 * overlapped loop minus that of the computation-alone loop, maximum over the
 * ranks. With both cores computing, that much cannot hide; the rest of
 * t_pure (waiting) can: t_ovrl - t_cpu close to coll_cpu_us means all of
 * it did.
 */
#include "common.h"

#include <sys/resource.h>

enum { OP_ALLREDUCE, OP_BCAST, OP_ALLTOALL };

static int rank_, nprocs_;

static double cpu_seconds(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (double)u.ru_utime.tv_sec + (double)u.ru_stime.tv_sec + 1e-6 * (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}
static char *sbuf, *rbuf;

static uint64_t seed_of(int from, int to, int s) {
  return 0xB0Bu + ((uint64_t)from << 32) + ((uint64_t)to << 16) + (uint64_t)s;
}

/* Fills the inputs and clears the outputs of one operation. */
static void prepare(int op, size_t size, int s) {
  if (op == OP_ALLREDUCE) {
    size_t n = size / 8;
    double *in = (double *)sbuf, *out = (double *)rbuf;
    for (size_t i = 0; i < n; i++) { in[i] = (double)(rank_ + 1) + (double)(i % 1024) + s; out[i] = -1.0; }
  } else if (op == OP_BCAST) {
    if (rank_ == 0) bench_fill(sbuf, size, seed_of(0, 0, s));
    else memset(sbuf, 0, size);
  } else {
    for (int d = 0; d < nprocs_; d++) bench_fill(sbuf + (size_t)d * size, size, seed_of(rank_, d, s));
    memset(rbuf, 0, size * (size_t)nprocs_);
  }
}

static void verify(int op, size_t size, int s) {
  if (op == OP_ALLREDUCE) {
    size_t n = size / 8;
    const double *out = (const double *)rbuf;
    double base = (double)nprocs_ * (nprocs_ + 1) / 2.0;
    for (size_t i = 0; i < n; i++) {
      double expect = base + (double)nprocs_ * ((double)(i % 1024) + s);
      if (out[i] != expect) bench_die("nbc_overlap: Iallreduce result is wrong");
    }
  } else if (op == OP_BCAST) {
    bench_check(sbuf, size, seed_of(0, 0, s), "nbc_overlap Ibcast");
  } else {
    for (int src = 0; src < nprocs_; src++)
      bench_check(rbuf + (size_t)src * size, size, seed_of(src, rank_, s), "nbc_overlap Ialltoall");
  }
}

static void start(int op, size_t size, MPI_Request *req) {
  if (op == OP_ALLREDUCE)
    MPI_Iallreduce(sbuf, rbuf, (int)(size / 8), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, req);
  else if (op == OP_BCAST)
    MPI_Ibcast(sbuf, (int)size, MPI_BYTE, 0, MPI_COMM_WORLD, req);
  else
    MPI_Ialltoall(sbuf, (int)size, MPI_BYTE, rbuf, (int)size, MPI_BYTE, MPI_COMM_WORLD, req);
}

int main(int argc, char **argv) {
  bench_opts o;
  bench_init(&o, &argc, &argv, "nbc_overlap", 1, "8,1K,64K,1M", 100, 1, &rank_, &nprocs_);
  bench_print_library("nbc_overlap");

  const size_t maxsize = bench_max_size(&o, 8);
  sbuf = bench_alloc(maxsize * (size_t)nprocs_);
  rbuf = bench_alloc(maxsize * (size_t)nprocs_);

  char opsbuf[256];
  snprintf(opsbuf, sizeof opsbuf, "%s", o.ops);
  for (char *tok = strtok(opsbuf, ","); tok; tok = strtok(NULL, ",")) {
    int op;
    if (!strcmp(tok, "Iallreduce")) op = OP_ALLREDUCE;
    else if (!strcmp(tok, "Ibcast")) op = OP_BCAST;
    else if (!strcmp(tok, "Ialltoall")) op = OP_ALLTOALL;
    else bench_die("unknown --ops entry (Iallreduce, Ibcast, Ialltoall)");

    for (int s = 0; s < o.nsizes; s++) {
      const size_t size = o.sizes[s];
      const int iters = bench_iters_for(&o, size);
      const int warmup = bench_warmup_for(&o, size);
      MPI_Request req;

      prepare(op, size, s);
      start(op, size, &req);
      MPI_Wait(&req, MPI_STATUS_IGNORE);
      verify(op, size, s);
      for (int i = 0; i < warmup; i++) {
        start(op, size, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
      }

      double *tq = bench_times(iters), *tc = bench_times(iters), *to = bench_times(iters);
      MPI_Barrier(MPI_COMM_WORLD);
      for (int i = 0; i < iters; i++) {
        double t0 = MPI_Wtime();
        start(op, size, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        tq[i] = MPI_Wtime() - t0;
      }
      double t_pure = bench_median(tq, iters);
      double target = 0.0;
      MPI_Allreduce(&t_pure, &target, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      const double c0 = cpu_seconds();
      for (int i = 0; i < iters; i++) {
        double t0 = MPI_Wtime();
        bench_compute_us(target * 1e6);
        tc[i] = MPI_Wtime() - t0;
      }
      double t_cpu = bench_median(tc, iters);
      const double cpu_alone = (cpu_seconds() - c0) / iters;
      prepare(op, size, s);
      MPI_Barrier(MPI_COMM_WORLD);
      const double c1 = cpu_seconds();
      for (int i = 0; i < iters; i++) {
        double t0 = MPI_Wtime();
        start(op, size, &req);
        bench_compute_us(target * 1e6);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        to[i] = MPI_Wtime() - t0;
      }
      double t_ovrl = bench_median(to, iters);
      const double coll_cpu = (cpu_seconds() - c1) / iters - cpu_alone;
      free(tq);
      free(tc);
      free(to);
      verify(op, size, s);

      double loc[4] = {t_pure, t_cpu, t_ovrl, coll_cpu}, mx[4];
      MPI_Reduce(loc, mx, 4, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
      if (rank_ == 0) {
        double ov = bench_overlap(mx[0], mx[1], mx[2]);
        printf("{\"bench\": \"nbc_overlap\", \"op\": \"%s\", \"size\": %zu, \"iters\": %d, "
               "\"t_pure_us\": %.3f, \"t_cpu_us\": %.3f, \"t_ovrl_us\": %.3f, \"overlap_pct\": %.2f, "
               "\"coll_cpu_us\": %.3f, \"verified\": true}\n",
               tok, size, iters, mx[0] * 1e6, mx[1] * 1e6, mx[2] * 1e6, 100.0 * ov, mx[3] * 1e6);
        fflush(stdout);
      }
    }
  }
  free(sbuf);
  free(rbuf);
  bench_print_done("nbc_overlap");
  MPI_Finalize();
  return 0;
}
