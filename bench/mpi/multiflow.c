/* Multi-flow small-message test: F concurrent flows between ranks 0 and 1,
 * each on its own communicator (MPI_Comm_dup) and tag, each with a window of
 * W small messages. The sender interleaves the flows message by message
 * (flow 0 msg 0, flow 1 msg 0, ..., flow 0 msg 1, ...); the receiver pre-posts
 * its receives flow by flow in reverse order, so matching has to sort the
 * flows out. With --bidir, odd flows run from rank 1 to rank 0.
 * This is the pattern a packet-aggregating engine (NewMadeleine strategies)
 * is built for.
 *
 *   multiflow [--sizes 8,64,...] [--iters N] [--window W] [--flows F] [--bidir]
 *
 * Every message of every flow carries its own pattern, verified once per
 * size before timing and again for the last timed iteration.
 * Output per size:
 *   {"bench": "multiflow", "size": S, "iters": N, "flows": F, "window": W,
 *    "rate_Mmsgs": F * W / median iteration time (max over the ranks;
 *    10^6 msg/s), "verified": true}
 */
#include "common.h"

static uint64_t seed_of(int s, int f, int w) { return ((uint64_t)s << 32) ^ ((uint64_t)f << 16) ^ (uint64_t)w ^ 0xF10Au; }

int main(int argc, char **argv) {
  bench_opts o;
  int rank, nprocs;
  bench_init(&o, &argc, &argv, "multiflow", 2, "8,64,1K", 200, 16, &rank, &nprocs);
  bench_print_library("multiflow");

  const int F = o.flows, W = o.window;
  MPI_Comm *comms = malloc(sizeof(MPI_Comm) * (size_t)F);
  MPI_Request *reqs = malloc(sizeof(MPI_Request) * (size_t)F * (size_t)W);
  if (!comms || !reqs) bench_die("out of memory");
  for (int f = 0; f < F; f++) MPI_Comm_dup(MPI_COMM_WORLD, &comms[f]);

  const size_t maxsize = bench_max_size(&o, 1);
  /* Slot (f, w) of sbuf/rbuf: offset (f * W + w) * size. */
  char *sbuf = bench_alloc(maxsize * (size_t)F * (size_t)W);
  char *rbuf = bench_alloc(maxsize * (size_t)F * (size_t)W);
  const int peer = rank == 0 ? 1 : 0;
  int ack = 0;

  for (int s = 0; s < o.nsizes; s++) {
    const size_t size = o.sizes[s];
    const int iters = bench_iters_for(&o, size);
    const int warmup = bench_warmup_for(&o, size);
#define SLOT(buf, f, w) ((buf) + ((size_t)(f) * (size_t)W + (size_t)(w)) * size)
#define SENDS(f) ((o.bidir && ((f) & 1)) ? rank == 1 : rank == 0)
    if (rank <= 1) {
      for (int f = 0; f < F; f++)
        for (int w = 0; w < W; w++) {
          if (SENDS(f)) bench_fill(SLOT(sbuf, f, w), size, seed_of(s, f, w));
          else memset(SLOT(rbuf, f, w), 0, size);
        }
    }
    double *times = bench_times(iters);
    for (int phase = 0; phase < 3; phase++) { /* verify, warm-up, timed */
      const int n = phase == 0 ? 1 : phase == 1 ? warmup : iters;
      MPI_Barrier(MPI_COMM_WORLD);
      for (int i = 0; i < n && rank <= 1; i++) {
        double t0 = MPI_Wtime();
        int nr = 0;
        for (int f = F - 1; f >= 0; f--)
          if (!SENDS(f))
            for (int w = 0; w < W; w++)
              MPI_Irecv(SLOT(rbuf, f, w), (int)size, MPI_BYTE, peer, 100 + f, comms[f], &reqs[nr++]);
        for (int w = 0; w < W; w++)
          for (int f = 0; f < F; f++)
            if (SENDS(f))
              MPI_Isend(SLOT(sbuf, f, w), (int)size, MPI_BYTE, peer, 100 + f, comms[f], &reqs[nr++]);
        MPI_Waitall(nr, reqs, MPI_STATUSES_IGNORE);
        /* Closing handshake so that iterations do not pile up. */
        if (rank == 0) {
          MPI_Send(&ack, 1, MPI_INT, peer, 99, MPI_COMM_WORLD);
          MPI_Recv(&ack, 1, MPI_INT, peer, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
          MPI_Recv(&ack, 1, MPI_INT, peer, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          MPI_Send(&ack, 1, MPI_INT, peer, 99, MPI_COMM_WORLD);
        }
        if (phase == 2) times[i] = MPI_Wtime() - t0;
      }
      if (phase != 1 && rank <= 1) {
        for (int f = 0; f < F; f++)
          if (!SENDS(f))
            for (int w = 0; w < W; w++) bench_check(SLOT(rbuf, f, w), size, seed_of(s, f, w), "multiflow");
        if (phase == 0)
          for (int f = 0; f < F; f++)
            if (!SENDS(f)) memset(SLOT(rbuf, f, 0), 0, size * (size_t)W);
      }
    }
#undef SENDS
#undef SLOT
    double t = rank <= 1 ? bench_median(times, iters) : 0.0, tmax = 0.0;
    free(times);
    MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      double rate = tmax > 0.0 ? (double)F * W / (tmax * 1e6) : 0.0;
      printf("{\"bench\": \"multiflow\", \"size\": %zu, \"iters\": %d, \"flows\": %d, \"window\": %d, "
             "\"bidir\": %s, \"rate_Mmsgs\": %.4f, \"verified\": true}\n",
             size, iters, F, W, o.bidir ? "true" : "false", rate);
      fflush(stdout);
    }
  }
  for (int f = 0; f < F; f++) MPI_Comm_free(&comms[f]);
  free(comms);
  free(reqs);
  free(sbuf);
  free(rbuf);
  bench_print_done("multiflow");
  MPI_Finalize();
  return 0;
}
