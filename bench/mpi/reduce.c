/* Reductions: the local kernel (MPI_Reduce_local) and MPI_Allreduce, on
 * MPI_FLOAT / MPI_SUM and MPI_DOUBLE / MPI_MAX, by message size in bytes.
 *
 *   reduce [--sizes 1K,...,16M] [--iters N]
 *
 * Per size S (bytes; S / sizeof(type) elements):
 *   reduce_local.<type>.<op>: rank 0 alone, MPI_Reduce_local(in, inout) on
 *             buffers that stay in cache when they fit; us = median time of
 *             one call, gbs = bytes of inout (S) / us / 1000;
 *   allreduce.<type>.<op>: every rank, MPI_Allreduce of S bytes; us = the
 *             median over iterations of the slowest rank's time.
 * Every result is checked against the value the operation must give
 * (integers stored in floating point, so sums are exact).
 * Output per size and series:
 *   {"bench": "reduce_local.float.sum", "size": S, "iters": N, "us": .., "gbs": .., "verified": true}
 *   {"bench": "allreduce.double.max", "size": S, "iters": N, "us": .., "gbs": .., "verified": true}
 */
#include "common.h"

typedef struct {
  const char *name;  /* "float.sum" */
  MPI_Datatype type;
  MPI_Op op;
  size_t elem;
} series;

/* Element k of rank r's operand: small integers, exact in float. */
static double value_of(int r, size_t k) { return (double)((k * 7 + (size_t)r * 3) % 1000); }

static void fill(void *buf, const series *s, int r, size_t n) {
  for (size_t k = 0; k < n; k++) {
    if (s->type == MPI_FLOAT) ((float *)buf)[k] = (float)value_of(r, k);
    else ((double *)buf)[k] = value_of(r, k);
  }
}

/* What rank-combined element k must be over ranks 0..nr-1. */
static double expected(const series *s, int nr, size_t k) {
  double acc = value_of(0, k);
  for (int r = 1; r < nr; r++) {
    const double v = value_of(r, k);
    if (s->op == MPI_SUM) acc += v;
    else acc = v > acc ? v : acc;
  }
  return acc;
}

static void check(const void *buf, const series *s, int nr, size_t n, const char *what) {
  for (size_t k = 0; k < n; k++) {
    const double got = s->type == MPI_FLOAT ? (double)((const float *)buf)[k] : ((const double *)buf)[k];
    if (got != expected(s, nr, k)) {
      fprintf(stderr, "reduce: %s %s: element %zu is %g, expected %g\n", what, s->name, k, got, expected(s, nr, k));
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
  }
}

int main(int argc, char **argv) {
  bench_opts o;
  int rank, nprocs;
  bench_init(&o, &argc, &argv, "reduce", 1, "1K,16K,64K,1M,16M", 1000, 1, &rank, &nprocs);
  bench_print_library("reduce");
  const series all[] = {
      {"float.sum", MPI_FLOAT, MPI_SUM, sizeof(float)},
      {"double.max", MPI_DOUBLE, MPI_MAX, sizeof(double)},
  };
  const size_t maxsize = bench_max_size(&o, 8);
  char *in = bench_alloc(maxsize), *io = bench_alloc(maxsize), *out = bench_alloc(maxsize);

  for (size_t si = 0; si < sizeof all / sizeof all[0]; si++) {
    const series *s = &all[si];
    for (int z = 0; z < o.nsizes; z++) {
      const size_t size = o.sizes[z] < s->elem ? s->elem : o.sizes[z];
      const size_t n = size / s->elem;
      const int iters = bench_iters_for(&o, size);
      const int warmup = bench_warmup_for(&o, size);
      double *t = bench_times(iters);

      /* Local kernel: inout = in op inout, on rank 0. The operand is
       * refilled before each call (outside the timing) so that every call
       * computes the same checked result. */
      if (rank == 0) {
        fill(in, s, 1, n);
        for (int i = 0; i < warmup + iters; i++) {
          fill(io, s, 0, n);
          const double t0 = MPI_Wtime();
          MPI_Reduce_local(in, io, (int)n, s->type, s->op);
          if (i >= warmup) t[i - warmup] = MPI_Wtime() - t0;
        }
        check(io, s, 2, n, "MPI_Reduce_local");
        const double us = bench_median(t, iters) * 1e6;
        printf("{\"bench\": \"reduce_local.%s\", \"size\": %zu, \"iters\": %d, \"us\": %.3f, \"gbs\": %.3f, "
               "\"verified\": true}\n",
               s->name, size, iters, us, (double)size / us / 1000.0);
        fflush(stdout);
      }

      /* Allreduce over every rank. */
      fill(in, s, rank, n);
      for (int i = 0; i < warmup + iters; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        MPI_Allreduce(in, out, (int)n, s->type, s->op, MPI_COMM_WORLD);
        double dt = MPI_Wtime() - t0, slowest = 0;
        MPI_Allreduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (i >= warmup) t[i - warmup] = slowest;
      }
      check(out, s, nprocs, n, "MPI_Allreduce");
      if (rank == 0) {
        const double us = bench_median(t, iters) * 1e6;
        printf("{\"bench\": \"allreduce.%s\", \"size\": %zu, \"iters\": %d, \"us\": %.3f, \"gbs\": %.3f, "
               "\"verified\": true}\n",
               s->name, size, iters, us, (double)size / us / 1000.0);
        fflush(stdout);
      }
      free(t);
    }
  }
  bench_print_done("reduce");
  MPI_Finalize();
  return 0;
}
