/* What an eager send costs its sender, and its latency: the measure of copy
 * offload (NMAD_COPY_OFFLOAD), where a progress thread does the copy.
 *
 *   eager_send [--sizes 1K,...,32K] [--iters N] [--compute-us C]
 *
 * Per size, between ranks 0 and 1 (other ranks idle):
 *   latency:  a ping-pong of MPI_Isend + MPI_Wait against MPI_Recv (the
 *             non-blocking form, the one a copy can be offloaded from),
 *             one-way = median round trip / 2;
 *   sender:   rank 1 has posted its MPI_Irecv (and said so); rank 0 times
 *             MPI_Isend (isend_us), computes C microseconds without MPI
 *             calls, then times MPI_Wait (wait_us); sender_us is their sum:
 *             the time the sending thread spent in the library for the
 *             message. Rank 1 checks every message's bytes.
 * Output per size:
 *   {"bench": "eager_send", "size": S, "iters": N, "latency_us": ..,
 *    "isend_us": .., "wait_us": .., "sender_us": .., "verified": true}
 * (medians; sender_us is the median of the per-iteration sums).
 */
#include "common.h"

static uint64_t seed_of(int s, int i) { return 0xE6E5u + (uint64_t)s * 1000003u + (uint64_t)i; }

int main(int argc, char **argv) {
  bench_opts o;
  int rank, nprocs;
  bench_init(&o, &argc, &argv, "eager_send", 2, "1K,4K,8K,16K,32K", 1000, 1, &rank, &nprocs);
  bench_print_library("eager_send");
  const double compute_us = o.compute_us;

  const size_t maxsize = bench_max_size(&o, 1);
  char *sbuf = bench_alloc(maxsize);
  char *rbuf = bench_alloc(maxsize);
  const int peer = rank == 0 ? 1 : 0;
  char token = 0;
  MPI_Request req;

  for (int s = 0; s < o.nsizes; s++) {
    const size_t size = o.sizes[s];
    const int count = (int)size;
    const int iters = bench_iters_for(&o, size);
    const int warmup = bench_warmup_for(&o, size);
    double *lat = bench_times(iters), *ti = bench_times(iters), *tw = bench_times(iters), *ts = bench_times(iters);

    /* Latency: Isend + Wait / Recv, both ways. */
    bench_fill(sbuf, size, seed_of(s, 0));
    for (int phase = 0; phase < 2 && rank <= 1; phase++) {
      const int n = phase == 0 ? warmup : iters;
      for (int i = 0; i < n; i++) {
        const double t0 = MPI_Wtime();
        if (rank == 0) {
          MPI_Isend(sbuf, count, MPI_BYTE, peer, 51, MPI_COMM_WORLD, &req);
          MPI_Wait(&req, MPI_STATUS_IGNORE);
          MPI_Recv(rbuf, count, MPI_BYTE, peer, 51, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          if (phase == 1) lat[i] = MPI_Wtime() - t0;
        } else {
          MPI_Recv(rbuf, count, MPI_BYTE, peer, 51, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          MPI_Isend(sbuf, count, MPI_BYTE, peer, 51, MPI_COMM_WORLD, &req);
          MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
      }
    }
    if (rank <= 1) bench_check(rbuf, size, seed_of(s, 0), "eager_send (latency)");
    MPI_Barrier(MPI_COMM_WORLD);

    /* Sender-side time: the receive is posted first (rank 1 says so), so
     * the message is never unexpected. */
    for (int phase = 0; phase < 2 && rank <= 1; phase++) {
      const int n = phase == 0 ? warmup : iters;
      for (int i = 0; i < n; i++) {
        const uint64_t seed = seed_of(s, i + 1);
        if (rank == 1) {
          memset(rbuf, 0, size);
          MPI_Irecv(rbuf, count, MPI_BYTE, 0, 52, MPI_COMM_WORLD, &req);
          MPI_Send(&token, 1, MPI_BYTE, 0, 53, MPI_COMM_WORLD);
          MPI_Wait(&req, MPI_STATUS_IGNORE);
          bench_check(rbuf, size, seed, "eager_send (sender phase)");
          continue;
        }
        bench_fill(sbuf, size, seed);
        MPI_Recv(&token, 1, MPI_BYTE, 1, 53, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        const double t0 = MPI_Wtime();
        MPI_Isend(sbuf, count, MPI_BYTE, 1, 52, MPI_COMM_WORLD, &req);
        const double t1 = MPI_Wtime();
        bench_compute_us(compute_us);
        const double t2 = MPI_Wtime();
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        const double t3 = MPI_Wtime();
        if (phase == 1) {
          ti[i] = t1 - t0;
          tw[i] = t3 - t2;
          ts[i] = (t1 - t0) + (t3 - t2);
        }
      }
    }
    if (rank == 0) {
      printf("{\"bench\": \"eager_send\", \"size\": %zu, \"iters\": %d, \"latency_us\": %.4f, "
             "\"isend_us\": %.4f, \"wait_us\": %.4f, \"sender_us\": %.4f, \"compute_us\": %.1f, "
             "\"verified\": true}\n",
             size, iters, bench_median(lat, iters) * 1e6 / 2.0, bench_median(ti, iters) * 1e6,
             bench_median(tw, iters) * 1e6, bench_median(ts, iters) * 1e6, compute_us);
      fflush(stdout);
    }
    free(lat);
    free(ti);
    free(tw);
    free(ts);
    MPI_Barrier(MPI_COMM_WORLD);
  }
  free(sbuf);
  free(rbuf);
  bench_print_done("eager_send");
  MPI_Finalize();
  return 0;
}
