/* Ping-pong latency and bandwidth between ranks 0 and 1 (other ranks idle).
 *
 *   pingpong [--sizes 0,8,...] [--iters N] [--warmup N] [--min-iters N] [--thread-multiple]
 *
 * Per size: one verified exchange (rank 0 sends a pattern, rank 1 checks it
 * and answers with another pattern that rank 0 checks), a warm-up, then N
 * timed round trips (MPI_Send/MPI_Recv), each timed. Output per size:
 *   {"bench": "pingpong", "size": S, "iters": N, "latency_us": one-way
 *    latency (median round trip / 2), "latency_avg_us": mean round trip / 2,
 *    "bw_MBps": S / latency_us (10^6 B/s), "verified": true}
 */
#include "common.h"

int main(int argc, char **argv) {
  bench_opts o;
  int rank, nprocs;
  bench_init(&o, &argc, &argv, "pingpong", 2, "0,1,2,4,8,16,32,64,128,256,512,1K,2K,4K,8K,16K,32K,64K,128K,256K,512K,1M,2M,4M", 1000, 1, &rank, &nprocs);
  bench_print_library("pingpong");

  const size_t maxsize = bench_max_size(&o, 0);
  char *sbuf = bench_alloc(maxsize);
  char *rbuf = bench_alloc(maxsize);
  const int peer = rank == 0 ? 1 : 0;
  const int tag = 7;

  for (int s = 0; s < o.nsizes; s++) {
    const size_t size = o.sizes[s];
    const int count = (int)size;
    const int iters = bench_iters_for(&o, size);
    const int warmup = bench_warmup_for(&o, size);

    if (rank <= 1) {
      /* Verification exchange. */
      const uint64_t seed_ping = 1000u + (uint64_t)s, seed_pong = 2000u + (uint64_t)s;
      if (rank == 0) {
        bench_fill(sbuf, size, seed_ping);
        memset(rbuf, 0, size);
        MPI_Send(sbuf, count, MPI_BYTE, peer, tag, MPI_COMM_WORLD);
        MPI_Status st;
        MPI_Recv(rbuf, count, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &st);
        int got;
        MPI_Get_count(&st, MPI_BYTE, &got);
        if (got != count) bench_die("pingpong: wrong received count");
        bench_check(rbuf, size, seed_pong, "pingpong (pong)");
      } else {
        memset(rbuf, 0, size);
        MPI_Status st;
        MPI_Recv(rbuf, count, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &st);
        int got;
        MPI_Get_count(&st, MPI_BYTE, &got);
        if (got != count) bench_die("pingpong: wrong received count");
        bench_check(rbuf, size, seed_ping, "pingpong (ping)");
        bench_fill(sbuf, size, seed_pong);
        MPI_Send(sbuf, count, MPI_BYTE, peer, tag, MPI_COMM_WORLD);
      }
    }

    double *times = bench_times(iters);
    double total = 0.0;
    for (int phase = 0; phase < 2; phase++) { /* warm-up, timed */
      const int n = phase == 0 ? warmup : iters;
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      if (rank == 0) {
        for (int i = 0; i < n; i++) {
          double ti = MPI_Wtime();
          MPI_Send(sbuf, count, MPI_BYTE, peer, tag, MPI_COMM_WORLD);
          MPI_Recv(rbuf, count, MPI_BYTE, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          if (phase == 1) times[i] = MPI_Wtime() - ti;
        }
      } else if (rank == 1) {
        for (int i = 0; i < n; i++) {
          MPI_Recv(rbuf, count, MPI_BYTE, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          MPI_Send(sbuf, count, MPI_BYTE, peer, tag, MPI_COMM_WORLD);
        }
      }
      total = MPI_Wtime() - t0;
    }
    /* After the timed loop each side holds the other's last message: still
     * the verification patterns. */
    if (rank == 0) bench_check(rbuf, size, 2000u + (uint64_t)s, "pingpong (after timing)");
    if (rank == 1) bench_check(rbuf, size, 1000u + (uint64_t)s, "pingpong (after timing)");

    if (rank == 0) {
      double lat_us = bench_median(times, iters) * 1e6 / 2.0;
      double avg_us = total * 1e6 / (2.0 * iters);
      double bw = lat_us > 0.0 ? (double)size / lat_us : 0.0;
      /* At MPI_THREAD_MULTIPLE (--thread-multiple) the points are
       * "pingpong_mt": the same exchange, with the library's thread safety on. */
      printf("{\"bench\": \"%s\", \"size\": %zu, \"iters\": %d, \"latency_us\": %.4f, "
             "\"latency_avg_us\": %.4f, \"bw_MBps\": %.3f, \"verified\": true}\n",
             o.thread_multiple ? "pingpong_mt" : "pingpong", size, iters, lat_us, avg_us, bw);
      fflush(stdout);
    }
    free(times);
  }
  free(sbuf);
  free(rbuf);
  bench_print_done("pingpong");
  MPI_Finalize();
  return 0;
}
