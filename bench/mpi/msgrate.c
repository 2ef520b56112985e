/* Message rate with a window, rank 0 -> rank 1 (osu_mbw_mr style, one pair).
 *
 *   msgrate [--sizes 1,8,...] [--iters N] [--window W]
 *
 * Each iteration: rank 1 pre-posts W receives, rank 0 posts W sends
 * (MPI_Isend), both wait, then rank 1 acknowledges with a 4-byte message.
 * Each message has its own buffer slot and its own pattern, verified once
 * per size before timing and again for the last timed window.
 * Output per size:
 *   {"bench": "msgrate", "size": S, "iters": N, "window": W,
 *    "rate_Mmsgs": W / median window time (max over the ranks; 10^6 msg/s),
 *    "verified": true}
 */
#include "common.h"

int main(int argc, char **argv) {
  bench_opts o;
  int rank, nprocs;
  bench_init(&o, &argc, &argv, "msgrate", 2, "1,8,64,512,4K", 500, 64, &rank, &nprocs);
  bench_print_library("msgrate");

  const size_t maxsize = bench_max_size(&o, 1);
  const int W = o.window;
  char *buf = bench_alloc(maxsize * (size_t)W);
  MPI_Request *reqs = malloc(sizeof(MPI_Request) * (size_t)W);
  if (!reqs) bench_die("out of memory");
  const int peer = rank == 0 ? 1 : 0;
  const int tag = 21, ack_tag = 22;
  int ack = 0;

  for (int s = 0; s < o.nsizes; s++) {
    const size_t size = o.sizes[s];
    const int iters = bench_iters_for(&o, size);
    const int warmup = bench_warmup_for(&o, size);
    if (rank == 0)
      for (int w = 0; w < W; w++) bench_fill(buf + (size_t)w * size, size, (uint64_t)(s * 4096 + w));
    else
      memset(buf, 0, size * (size_t)W);

    double *times = bench_times(iters);
    for (int phase = 0; phase < 3; phase++) { /* verify, warm-up, timed */
      const int n = phase == 0 ? 1 : phase == 1 ? warmup : iters;
      MPI_Barrier(MPI_COMM_WORLD);
      for (int i = 0; i < n && rank <= 1; i++) {
        double t0 = MPI_Wtime();
        if (rank == 1) {
          for (int w = 0; w < W; w++)
            MPI_Irecv(buf + (size_t)w * size, (int)size, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &reqs[w]);
          MPI_Waitall(W, reqs, MPI_STATUSES_IGNORE);
          MPI_Send(&ack, 1, MPI_INT, peer, ack_tag, MPI_COMM_WORLD);
        } else {
          for (int w = 0; w < W; w++)
            MPI_Isend(buf + (size_t)w * size, (int)size, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &reqs[w]);
          MPI_Waitall(W, reqs, MPI_STATUSES_IGNORE);
          MPI_Recv(&ack, 1, MPI_INT, peer, ack_tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        if (phase == 2) times[i] = MPI_Wtime() - t0;
      }
      if (rank == 1 && phase != 1) {
        for (int w = 0; w < W; w++)
          bench_check(buf + (size_t)w * size, size, (uint64_t)(s * 4096 + w), "msgrate");
        if (phase == 0) memset(buf, 0, size * (size_t)W);
      }
    }
    double t = rank <= 1 ? bench_median(times, iters) : 0.0, tmax = 0.0;
    free(times);
    MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      double rate = tmax > 0.0 ? (double)W / (tmax * 1e6) : 0.0;
      printf("{\"bench\": \"msgrate\", \"size\": %zu, \"iters\": %d, \"window\": %d, "
             "\"rate_Mmsgs\": %.4f, \"verified\": true}\n",
             size, iters, W, rate);
      fflush(stdout);
    }
  }
  free(reqs);
  free(buf);
  bench_print_done("msgrate");
  MPI_Finalize();
  return 0;
}
