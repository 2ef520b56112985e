/* Latency with several receiving threads (like osu_latency_mt).
 *
 *   latency_mt [--sizes 8,...] [--iters N] [--warmup N] [--threads K[,K...]]
 *
 * MPI_THREAD_MULTIPLE. Rank 0 has one thread that sends a ping (tag 1) to
 * rank 1 and waits for the pong; rank 1 has K threads that all sit in
 * MPI_Recv(source 0, tag 1): whichever gets the ping answers it. So each
 * round trip crosses one send and one receive on each side while K - 1
 * threads of rank 1 wait in the library at the same time: what it shows is
 * the cost of threads waiting together (spinning, sleeping, contending for
 * the library's locks). Every message carries its sequence number, checked
 * by the receiving side. At the end rank 0 sends K stop messages.
 * Output per thread count and size:
 *   {"bench": "latency_mt", "op": "kK", "size": S, "threads": K, "iters": N,
 *    "latency_us": median round trip / 2, "latency_avg_us": mean / 2,
 *    "verified": true}
 */
#include "common.h" /* first: it sets _POSIX_C_SOURCE */

#include <pthread.h>

typedef struct {
  size_t size;
  int stop;
} rx_args;

static void *receiver(void *p) {
  rx_args *a = (rx_args *)p;
  char *buf = bench_alloc(a->size < 8 ? 8 : a->size);
  for (;;) {
    MPI_Status st;
    MPI_Recv(buf, (int)(a->size < 8 ? 8 : a->size), MPI_BYTE, 0, 1, MPI_COMM_WORLD, &st);
    int got;
    MPI_Get_count(&st, MPI_BYTE, &got);
    int64_t seq;
    memcpy(&seq, buf, sizeof seq);
    if (seq < 0) break; /* stop */
    if ((size_t)got != (a->size < 8 ? 8 : a->size)) bench_die("latency_mt: wrong received count");
    MPI_Send(buf, got, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
  }
  free(buf);
  return NULL;
}

int main(int argc, char **argv) {
  bench_opts o;
  int rank, nprocs;
  /* --threads takes a list: read it before bench_parse keeps its first number. */
  int ks[32], nk = 0;
  for (int i = 1; i + 1 < argc; i++)
    if (!strcmp(argv[i], "--threads")) {
      const char *p = argv[i + 1];
      while (*p && nk < 32) {
        ks[nk++] = atoi(p);
        while (*p && *p != ',') p++;
        if (*p == ',') p++;
      }
    }
  bench_init_mt(&o, &argc, &argv, "latency_mt", 2, "8", 2000, 1, &rank, &nprocs, 1);
  bench_print_library("latency_mt");
  if (nk == 0) ks[nk++] = o.threads;

  for (int ik = 0; ik < nk; ik++)
  for (int s = 0; s < o.nsizes; s++) {
    const int k = ks[ik] < 1 ? 1 : ks[ik];
    const size_t size = o.sizes[s] < 8 ? 8 : o.sizes[s]; /* room for the sequence number */
    const int iters = bench_iters_for(&o, size);
    const int warmup = bench_warmup_for(&o, size);
    char *sbuf = bench_alloc(size), *rbuf = bench_alloc(size);
    memset(sbuf, 0x5a, size);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
      pthread_t th[256];
      rx_args a = {size, 0};
      if (k > 256) bench_die("latency_mt: at most 256 threads");
      for (int t = 0; t < k; t++) pthread_create(&th[t], NULL, receiver, &a);
      for (int t = 0; t < k; t++) pthread_join(th[t], NULL);
    } else if (rank == 0) {
      double *times = bench_times(iters);
      double t0 = 0;
      for (int i = 0; i < warmup + iters; i++) {
        if (i == warmup) t0 = MPI_Wtime();
        const int64_t seq = i;
        memcpy(sbuf, &seq, sizeof seq);
        double ti = MPI_Wtime();
        MPI_Send(sbuf, (int)size, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
        MPI_Recv(rbuf, (int)size, MPI_BYTE, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (i >= warmup) times[i - warmup] = MPI_Wtime() - ti;
        int64_t back;
        memcpy(&back, rbuf, sizeof back);
        if (back != seq) bench_die("latency_mt: pong carries the wrong sequence number");
      }
      const double total = MPI_Wtime() - t0;
      const int64_t stop = -1;
      memcpy(sbuf, &stop, sizeof stop);
      for (int t = 0; t < k; t++) MPI_Send(sbuf, (int)size, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
      printf("{\"bench\": \"latency_mt\", \"op\": \"k%d\", \"size\": %zu, \"threads\": %d, \"iters\": %d, "
             "\"latency_us\": %.4f, \"latency_avg_us\": %.4f, \"verified\": true}\n",
             k, size, k, iters, bench_median(times, iters) * 1e6 / 2.0, total * 1e6 / (2.0 * iters));
      fflush(stdout);
      free(times);
    }
    free(sbuf);
    free(rbuf);
  }
  bench_print_done("latency_mt");
  MPI_Finalize();
  return 0;
}
