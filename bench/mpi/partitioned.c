/* Partitioned send (MPI 4.0 chapter 4): rank 0 sends --bytes in P
 * partitions (--partitions a,b,c) to rank 1, the partitions marked ready by
 * --threads T threads of rank 0 (thread t marks the partitions t, t + T,
 * ...: the ready order interleaves). Measured per iteration, on the one
 * clock both ranks share (CLOCK_MONOTONIC, same host):
 *   after_last_us   from the last MPI_Pready returning on the sender to
 *                   MPI_Wait returning on the receiver (what the transfer
 *                   adds once the application has produced everything);
 *   total_us        from the first MPI_Pready to the receiver's completion.
 * Medians (and minimum, maximum) over --iters iterations after --warmup.
 * The received data is checked on every iteration.
 *
 *   partitioned --bytes 1M --partitions 16,64,256,1024 --threads 4 --iters 200
 *
 * Output (rank 1, the receiver, which knows both times): one JSON object
 * per partition count, as the other benchmarks of bench/mpi.
 */
#include "common.h"

#include <pthread.h>

/* ---- the sender's marking threads ---- */
struct team {
  pthread_barrier_t go, done;
  MPI_Request req;
  int partitions, threads, quit;
  double first[64], last[64]; /* per thread: its first and last Pready */
};
struct worker_arg {
  struct team* t;
  int id;
};

static void* worker(void* p) {
  struct worker_arg* a = (struct worker_arg*)p;
  struct team* t = a->t;
  for (;;) {
    pthread_barrier_wait(&t->go);
    if (t->quit) return NULL;
    t->first[a->id] = bench_now_us();
    for (int i = a->id; i < t->partitions; i += t->threads)
      if (MPI_Pready(i, t->req) != MPI_SUCCESS) {
        fprintf(stderr, "MPI_Pready failed\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
      }
    t->last[a->id] = bench_now_us();
    pthread_barrier_wait(&t->done);
  }
}

static unsigned char pattern(int iter, size_t i) { return (unsigned char)((i * 7 + (size_t)iter * 13 + (i >> 10)) & 0xff); }

int main(int argc, char** argv) {
  size_t bytes = 1 << 20;
  int parts[32], nparts = 0, threads = 4, iters = 200, warmup = 20;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--bytes") && i + 1 < argc) bytes = bench_parse_size(argv[++i]);
    else if (!strcmp(argv[i], "--partitions") && i + 1 < argc) {
      for (char* tok = strtok(argv[++i], ","); tok && nparts < 32; tok = strtok(NULL, ",")) parts[nparts++] = atoi(tok);
    } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--warmup") && i + 1 < argc) warmup = atoi(argv[++i]);
  }
  if (nparts == 0) {
    int def[] = {16, 64, 256, 1024};
    memcpy(parts, def, sizeof def);
    nparts = 4;
  }
  if (threads < 1 || threads > 64) threads = 4;
  int provided, rank, size;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 2 || provided != MPI_THREAD_MULTIPLE) {
    if (rank == 0) fprintf(stderr, "partitioned: needs 2 ranks and MPI_THREAD_MULTIPLE (got %d ranks, level %d)\n", size, provided);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  bench_print_library("partitioned");
  unsigned char* buf = malloc(bytes);
  struct team t;
  memset(&t, 0, sizeof t);
  t.threads = threads;
  pthread_t th[64];
  struct worker_arg args[64];
  if (rank == 0) {
    pthread_barrier_init(&t.go, NULL, (unsigned)threads + 1);
    pthread_barrier_init(&t.done, NULL, (unsigned)threads + 1);
    for (int k = 0; k < threads; ++k) {
      args[k].t = &t;
      args[k].id = k;
      pthread_create(&th[k], NULL, worker, &args[k]);
    }
  }
  double* after = malloc(sizeof(double) * (size_t)iters);
  double* total = malloc(sizeof(double) * (size_t)iters);
  for (int pi = 0; pi < nparts; ++pi) {
    const int P = parts[pi];
    if (P < 1 || bytes % (size_t)P) {
      if (rank == 1) fprintf(stderr, "partitioned: %zu bytes do not split into %d partitions\n", bytes, P);
      continue;
    }
    MPI_Request req;
    if (rank == 0) MPI_Psend_init(buf, P, (MPI_Count)(bytes / (size_t)P), MPI_BYTE, 1, 5, MPI_COMM_WORLD, MPI_INFO_NULL, &req);
    else MPI_Precv_init(buf, P, (MPI_Count)(bytes / (size_t)P), MPI_BYTE, 0, 5, MPI_COMM_WORLD, MPI_INFO_NULL, &req);
    int verified = 1;
    for (int it = -warmup; it < iters; ++it) {
      if (rank == 0)
        for (size_t i = 0; i < bytes; ++i) buf[i] = pattern(it, i);
      else
        memset(buf, 0, bytes);
      MPI_Barrier(MPI_COMM_WORLD);
      MPI_Start(&req);
      double times[2];
      if (rank == 0) {
        t.req = req;
        t.partitions = P;
        pthread_barrier_wait(&t.go);
        pthread_barrier_wait(&t.done);
        times[0] = t.first[0];
        times[1] = t.last[0];
        for (int k = 1; k < threads; ++k) {
          if (t.first[k] < times[0]) times[0] = t.first[k];
          if (t.last[k] > times[1]) times[1] = t.last[k];
        }
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        MPI_Send(times, 2, MPI_DOUBLE, 1, 6, MPI_COMM_WORLD);
      } else {
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        const double done = bench_now_us();
        MPI_Recv(times, 2, MPI_DOUBLE, 0, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (size_t i = 0; i < bytes; ++i)
          if (buf[i] != pattern(it, i)) {
            verified = 0;
            fprintf(stderr, "partitioned: byte %zu wrong with %d partitions\n", i, P);
            MPI_Abort(MPI_COMM_WORLD, 3);
          }
        if (it >= 0) {
          after[it] = done - times[1];
          total[it] = done - times[0];
        }
      }
    }
    MPI_Request_free(&req);
    if (rank == 1) {
      qsort(after, (size_t)iters, sizeof(double), bench_cmp_double);
      qsort(total, (size_t)iters, sizeof(double), bench_cmp_double);
      printf("{\"bench\": \"partitioned\", \"size\": %zu, \"partitions\": %d, \"threads\": %d, \"iters\": %d, "
             "\"after_last_us\": %.2f, \"after_last_min_us\": %.2f, \"after_last_max_us\": %.2f, "
             "\"total_us\": %.2f, \"verified\": %s}\n",
             bytes, P, threads, iters, after[iters / 2], after[0], after[iters - 1], total[iters / 2],
             verified ? "true" : "false");
      fflush(stdout);
    }
  }
  if (rank == 0) {
    t.quit = 1;
    pthread_barrier_wait(&t.go);
    for (int k = 0; k < threads; ++k) pthread_join(th[k], NULL);
  }
  if (rank == 1) printf("{\"bench\": \"partitioned\", \"done\": true}\n");
  free(after);
  free(total);
  free(buf);
  MPI_Finalize();
  return 0;
}
