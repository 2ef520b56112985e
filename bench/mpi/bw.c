/* Streaming bandwidth between ranks 0 and 1, unidirectional or (--bidir)
 * bidirectional, OSU-style: each iteration posts a window of non-blocking
 * receives and sends, waits for all of them, then (unidirectional) rank 1
 * acknowledges with a 4-byte message.
 *
 *   bw [--bidir] [--sizes ...] [--iters N] [--window W]
 *
 * Each message of the window has its own buffer slot; when window * size
 * would exceed 64 MiB the window is reduced for that size (reported as
 * "window"). Every slot is verified once per size before timing, and the last
 * timed window is verified again.
 * Output per size:
 *   {"bench": "bw"|"bibw", "size": S, "iters": N, "window": W,
 *    "bw_MBps": bytes of one window (both directions for bibw) / median
 *    window time (max over the two ranks, 10^6 B/s),
 *    "verified": true}
 */
#include "common.h"

#define SLOT_BUDGET ((size_t)64 << 20)

static uint64_t seed_of(int from_rank, int s, int slot) {
  return ((uint64_t)from_rank << 40) ^ ((uint64_t)s << 20) ^ (uint64_t)slot ^ 0x5157u;
}

int main(int argc, char **argv) {
  bench_opts o;
  int rank, nprocs;
  bench_init(&o, &argc, &argv, "bw", 2, "1,4,16,64,256,1K,4K,16K,64K,256K,1M,4M", 100, 64, &rank, &nprocs);
  const char *name = o.bidir ? "bibw" : "bw";
  bench_print_library(name);

  size_t maxbytes = 0;
  for (int s = 0; s < o.nsizes; s++) {
    size_t w = (size_t)o.window;
    if (o.sizes[s] > 0 && w * o.sizes[s] > SLOT_BUDGET) w = SLOT_BUDGET / o.sizes[s];
    if (w < 1) w = 1;
    if (w * o.sizes[s] > maxbytes) maxbytes = w * o.sizes[s];
  }
  char *sbuf = bench_alloc(maxbytes);
  char *rbuf = bench_alloc(maxbytes);
  MPI_Request *reqs = malloc(sizeof(MPI_Request) * 2 * (size_t)o.window);
  if (!reqs) bench_die("out of memory");
  const int peer = rank == 0 ? 1 : 0;
  const int tag = 11, ack_tag = 12;
  int ack = 0;

  for (int s = 0; s < o.nsizes; s++) {
    const size_t size = o.sizes[s];
    int window = o.window;
    if (size > 0 && (size_t)window * size > SLOT_BUDGET) window = (int)(SLOT_BUDGET / size);
    if (window < 1) window = 1;
    const int iters = bench_iters_for(&o, size);
    const int warmup = bench_warmup_for(&o, size);
    const int sender = rank == 0 || (o.bidir && rank == 1);
    const int receiver = rank == 1 || (o.bidir && rank == 0);

    if (rank <= 1) {
      if (sender)
        for (int w = 0; w < window; w++) bench_fill(sbuf + (size_t)w * size, size, seed_of(rank, s, w));
      if (receiver) memset(rbuf, 0, (size_t)window * size);
    }

    double *times = bench_times(iters);
    /* phase 0: verification window (untimed), 1: warm-up, 2: timed. */
    for (int phase = 0; phase < 3; phase++) {
      const int n = phase == 0 ? 1 : phase == 1 ? warmup : iters;
      MPI_Barrier(MPI_COMM_WORLD);
      if (rank <= 1) {
        for (int i = 0; i < n; i++) {
          double t0 = MPI_Wtime();
          int nr = 0;
          if (receiver)
            for (int w = 0; w < window; w++)
              MPI_Irecv(rbuf + (size_t)w * size, (int)size, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &reqs[nr++]);
          if (sender)
            for (int w = 0; w < window; w++)
              MPI_Isend(sbuf + (size_t)w * size, (int)size, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &reqs[nr++]);
          MPI_Waitall(nr, reqs, MPI_STATUSES_IGNORE);
          if (!o.bidir) {
            if (rank == 0) MPI_Recv(&ack, 1, MPI_INT, peer, ack_tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            else MPI_Send(&ack, 1, MPI_INT, peer, ack_tag, MPI_COMM_WORLD);
          }
          if (phase == 2) times[i] = MPI_Wtime() - t0;
        }
      }
      if ((phase == 0 || phase == 2) && receiver && rank <= 1) {
        for (int w = 0; w < window; w++)
          bench_check(rbuf + (size_t)w * size, size, seed_of(peer, s, w), name);
        if (phase == 0) memset(rbuf, 0, (size_t)window * size);
      }
    }
    /* Median window time; the slower of the two ranks defines the bandwidth. */
    double t = rank <= 1 ? bench_median(times, iters) : 0.0, tmax = 0.0;
    free(times);
    MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      double bytes = (double)size * window * (o.bidir ? 2.0 : 1.0);
      double bw = tmax > 0.0 ? bytes / (tmax * 1e6) : 0.0;
      printf("{\"bench\": \"%s\", \"size\": %zu, \"iters\": %d, \"window\": %d, \"bw_MBps\": %.3f, "
             "\"verified\": true}\n",
             name, size, iters, window, bw);
      fflush(stdout);
    }
  }
  free(reqs);
  free(sbuf);
  free(rbuf);
  bench_print_done(name);
  MPI_Finalize();
  return 0;
}
