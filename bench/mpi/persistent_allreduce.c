/* MPI_Allreduce against its persistent form (MPI 4.0: MPI_Allreduce_init
 * once, then MPI_Start + MPI_Wait per operation) on the same buffers, sum
 * of doubles, for each of --sizes (bytes). Per size: --iters timed
 * operations of each form after --warmup, interleaved in blocks of 10 so
 * that a change of machine load hits both alike; each operation timed
 * alone (after a barrier) and the median kept. The result of every
 * operation of the last block is checked.
 *
 *   persistent_allreduce --sizes 8,1K,64K,1M --iters 500
 *
 * Output (rank 0): one JSON object per size:
 *   {"bench": "persistent_allreduce", "size": 8, "blocking_us": ..,
 *    "persistent_us": .., "ratio": persistent/blocking, "verified": true}
 */
#include "common.h"

int main(int argc, char** argv) {
  size_t sizes[32];
  int nsizes = 0, iters = 500, warmup = 50;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--sizes") && i + 1 < argc) {
      for (char* tok = strtok(argv[++i], ","); tok && nsizes < 32; tok = strtok(NULL, ",")) sizes[nsizes++] = bench_parse_size(tok);
    } else if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--warmup") && i + 1 < argc) warmup = atoi(argv[++i]);
  }
  if (nsizes == 0) {
    size_t def[] = {8, 1024, 65536, 1 << 20};
    memcpy(sizes, def, sizeof def);
    nsizes = 4;
  }
  iters = (iters + 9) / 10 * 10;
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  bench_print_library("persistent_allreduce");
  double* tb = malloc(sizeof(double) * (size_t)iters);
  double* tp = malloc(sizeof(double) * (size_t)iters);
  for (int si = 0; si < nsizes; ++si) {
    const int n = (int)(sizes[si] / sizeof(double)) > 0 ? (int)(sizes[si] / sizeof(double)) : 1;
    double* in = malloc(sizeof(double) * (size_t)n);
    double* out = malloc(sizeof(double) * (size_t)n);
    MPI_Request req;
    MPI_Allreduce_init(in, out, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &req);
    int nb = 0, np = 0, verified = 1;
    for (int it = -warmup; it < iters; it += 10) {
      for (int form = 0; form < 2; ++form)
        for (int k = 0; k < 10; ++k) {
          for (int j = 0; j < n; ++j) in[j] = (double)(rank + j % 7 + k);
          MPI_Barrier(MPI_COMM_WORLD);
          const double t0 = MPI_Wtime();
          if (form == 0) {
            MPI_Allreduce(in, out, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
          } else {
            MPI_Start(&req);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
          }
          const double t = (MPI_Wtime() - t0) * 1e6;
          if (it >= 0) {
            if (form == 0) tb[nb++] = t;
            else tp[np++] = t;
          }
          if (it + 10 >= iters)
            for (int j = 0; j < n; ++j)
              if (out[j] != (double)size * (j % 7 + k) + (double)size * (size - 1) / 2) verified = 0;
        }
    }
    MPI_Request_free(&req);
    int all = 0;
    MPI_Allreduce(&verified, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (rank == 0) {
      qsort(tb, (size_t)nb, sizeof(double), bench_cmp_double);
      qsort(tp, (size_t)np, sizeof(double), bench_cmp_double);
      const double b = tb[nb / 2], p = tp[np / 2];
      printf("{\"bench\": \"persistent_allreduce\", \"size\": %zu, \"ranks\": %d, \"iters\": %d, \"blocking_us\": %.3f, "
             "\"persistent_us\": %.3f, \"ratio\": %.3f, \"verified\": %s}\n",
             sizes[si], size, nb, b, p, p / b, all ? "true" : "false");
      fflush(stdout);
    }
    free(in);
    free(out);
  }
  if (rank == 0) printf("{\"bench\": \"persistent_allreduce\", \"done\": true}\n");
  free(tb);
  free(tp);
  MPI_Finalize();
  return 0;
}
