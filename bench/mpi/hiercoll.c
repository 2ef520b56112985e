/* The collectives that have a hierarchical form (Barrier, Bcast, Reduce,
 * Allreduce and their non-blocking forms), by message size, so that one
 * launch with NMAD_COLL_HIER=on and one with =off compare them (on an
 * emulated cluster: docs/EMUCLUSTER.md, docs/BENCHMARKS.md).
 *
 *   hiercoll [--ops barrier,bcast,...] [--sizes 8,1K,64K,1M] [--iters N]
 *
 * Operations: barrier, ibarrier, bcast, ibcast, reduce, ireduce,
 * allreduce, iallreduce (non-blocking forms: the call and MPI_Wait).
 * Bcast moves S bytes from rank 0; Reduce and Allreduce sum S / 4 floats
 * (small integers, so the sums are exact) into rank 0 / every rank.
 * Every iteration starts after a barrier; its time is the slowest rank's,
 * and the median over the iterations is reported. Results are checked on
 * the first and last timed iteration.
 * Output per operation and size (rank 0):
 *   {"bench": "hiercoll.bcast", "size": S, "iters": N, "np": P, "us": .., "verified": true}
 */
#include "common.h"

static float value_of(int r, size_t k) { return (float)((k * 7 + (size_t)r * 3) % 1000); }

static void check_sum(const float *out, size_t n, int np, const char *what) {
  for (size_t k = 0; k < n; k++) {
    float want = 0;
    for (int r = 0; r < np; r++) want += value_of(r, k);
    if (out[k] != want) bench_die(what);
  }
}

typedef enum { OP_BARRIER, OP_BCAST, OP_REDUCE, OP_ALLREDUCE } kind_t;

int main(int argc, char **argv) {
  bench_opts o;
  int rank, np;
  bench_init(&o, &argc, &argv, "hiercoll", 2, "8,1K,64K,1M", 1000, 1, &rank, &np);
  bench_print_library("hiercoll");
  const char *ops = o.ops;
  if (!strcmp(ops, "Iallreduce,Ibcast,Ialltoall")) /* common.h's default is nbc_overlap's */
    ops = "barrier,ibarrier,bcast,ibcast,reduce,ireduce,allreduce,iallreduce";
  static const struct {
    const char *name;
    kind_t kind;
    int nb;
  } all[] = {
      {"barrier", OP_BARRIER, 0}, {"ibarrier", OP_BARRIER, 1},   {"bcast", OP_BCAST, 0},
      {"ibcast", OP_BCAST, 1},    {"reduce", OP_REDUCE, 0},      {"ireduce", OP_REDUCE, 1},
      {"allreduce", OP_ALLREDUCE, 0}, {"iallreduce", OP_ALLREDUCE, 1},
  };
  const size_t maxsize = bench_max_size(&o, 8);
  float *in = bench_alloc(maxsize), *out = bench_alloc(maxsize);
  unsigned char *buf = bench_alloc(maxsize);

  for (size_t a = 0; a < sizeof all / sizeof all[0]; a++) {
    if (!bench_has_op(ops, all[a].name)) continue;
    const kind_t kind = all[a].kind;
    for (int z = 0; z < o.nsizes; z++) {
      if (kind == OP_BARRIER && z > 0) break; /* no size */
      const size_t size = kind == OP_BARRIER ? 0 : (o.sizes[z] < 4 ? 4 : o.sizes[z]);
      const size_t n = size / 4;
      const int iters = bench_iters_for(&o, size);
      const int warmup = bench_warmup_for(&o, size);
      double *t = bench_times(iters);
      for (size_t k = 0; k < n; k++) in[k] = value_of(rank, k);
      for (int i = 0; i < warmup + iters; i++) {
        const int check = i == warmup || i == warmup + iters - 1;
        if (check && kind == OP_BCAST) {
          if (rank == 0) bench_fill(buf, size, (uint64_t)i);
          else memset(buf, 0, size);
        }
        if (check && kind != OP_BCAST) memset(out, 0, size);
        MPI_Request req = MPI_REQUEST_NULL;
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        switch (kind) {
          case OP_BARRIER:
            if (all[a].nb) MPI_Ibarrier(MPI_COMM_WORLD, &req);
            else MPI_Barrier(MPI_COMM_WORLD);
            break;
          case OP_BCAST:
            if (all[a].nb) MPI_Ibcast(buf, (int)size, MPI_BYTE, 0, MPI_COMM_WORLD, &req);
            else MPI_Bcast(buf, (int)size, MPI_BYTE, 0, MPI_COMM_WORLD);
            break;
          case OP_REDUCE:
            if (all[a].nb) MPI_Ireduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD, &req);
            else MPI_Reduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
            break;
          case OP_ALLREDUCE:
            if (all[a].nb) MPI_Iallreduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
            else MPI_Allreduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            break;
        }
        if (all[a].nb) MPI_Wait(&req, MPI_STATUS_IGNORE);
        double dt = MPI_Wtime() - t0, slowest = 0;
        MPI_Allreduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (i >= warmup) t[i - warmup] = slowest;
        if (!check) continue;
        if (kind == OP_BCAST) bench_check(buf, size, (uint64_t)i, "bcast: wrong data");
        if (kind == OP_REDUCE && rank == 0) check_sum(out, n, np, "reduce: wrong sum");
        if (kind == OP_ALLREDUCE) check_sum(out, n, np, "allreduce: wrong sum");
      }
      if (rank == 0) {
        printf("{\"bench\": \"hiercoll.%s\", \"size\": %zu, \"iters\": %d, \"np\": %d, \"us\": %.3f, "
               "\"verified\": true}\n",
               all[a].name, size, iters, np, bench_median(t, iters) * 1e6);
        fflush(stdout);
      }
      free(t);
    }
  }
  free(in);
  free(out);
  free(buf);
  bench_print_done("hiercoll");
  MPI_Finalize();
  return 0;
}
