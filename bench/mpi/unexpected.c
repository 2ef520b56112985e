/* Unexpected-message memory and drain time, rank 0 -> rank 1.
 *
 *   unexpected N [SIZE]        (SIZE bytes per message, default 8)
 *
 * Rank 0 posts N sends of SIZE bytes (MPI_Isend, tag 1, one buffer slot
 * each) before rank 1 posts any receive for them, then tells rank 1 it
 * has posted them all (one message on tag 2) and waits for them.
 * Rank 1 receives that message, then keeps calling the library without
 * receiving (MPI_Iprobe of a tag nobody sends) until its resident memory
 * has not grown for 500 ms: what the library holds for it unexpectedly is
 * then as large as it gets. Then it receives the N messages in order,
 * checking each one's content and index, and measures how long that took
 * (the drain) and its resident memory afterwards.
 *
 * Resident memory is read from /proc/self/statm (rank 1) and reported
 * relative to rank 1's own baseline after MPI_Init and a first exchange.
 * Output (rank 1), one line:
 *   {"bench": "unexpected", "n": N, "size": S, "baseline_kib": B,
 *    "peak_kib": P, "after_kib": A, "growth_mib": (P-B)/1024,
 *    "after_mib": (A-B)/1024, "drain_ms": D, "verified": true}
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long rss_kib(void) {
  long pages = 0, resident = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (f) {
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    fclose(f);
  }
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static void die(int rank, const char *what) {
  fprintf(stderr, "[rank %d] unexpected: %s\n", rank, what);
  fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 2);
}

/* Byte k of message i: the index itself first (order), then a pattern. */
static void fill(unsigned char *b, size_t size, uint64_t i) {
  for (size_t k = 0; k < size; k++) b[k] = (unsigned char)((i * 131 + k * 7 + (i >> 8)) & 0xff);
  if (size >= 8) memcpy(b, &i, 8);
}

static int check(const unsigned char *b, size_t size, uint64_t i) {
  if (size >= 8) {
    uint64_t got;
    memcpy(&got, b, 8);
    if (got != i) return 0;
  }
  for (size_t k = 8; k < size; k++)
    if (b[k] != (unsigned char)((i * 131 + k * 7 + (i >> 8)) & 0xff)) return 0;
  return 1;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  if (nprocs != 2) die(rank, "run with 2 processes");
  if (argc < 2) die(rank, "usage: unexpected N [SIZE]");
  const uint64_t n = strtoull(argv[1], NULL, 10);
  const size_t size = argc > 2 ? strtoull(argv[2], NULL, 10) : 8;
  const int data_tag = 1, posted_tag = 2;
  /* A first exchange: connections are up before the baseline. */
  int token = 0;
  if (rank == 0) {
    MPI_Send(&token, 1, MPI_INT, 1, 3, MPI_COMM_WORLD);
    MPI_Recv(&token, 1, MPI_INT, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else {
    MPI_Recv(&token, 1, MPI_INT, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Send(&token, 1, MPI_INT, 0, 3, MPI_COMM_WORLD);
  }
  if (rank == 0) {
    unsigned char *bufs = malloc(n * size + 1);
    MPI_Request *reqs = malloc(sizeof(MPI_Request) * (n + 1));
    if (!bufs || !reqs) die(rank, "out of memory");
    for (uint64_t i = 0; i < n; i++) fill(bufs + i * size, size, i);
    for (uint64_t i = 0; i < n; i++)
      MPI_Isend(bufs + i * size, (int)size, MPI_BYTE, 1, data_tag, MPI_COMM_WORLD, &reqs[i]);
    MPI_Send(&token, 1, MPI_INT, 1, posted_tag, MPI_COMM_WORLD);
    MPI_Waitall((int)n, reqs, MPI_STATUSES_IGNORE);
    free(reqs);
    free(bufs);
  } else {
    const long baseline = rss_kib();
    MPI_Recv(&token, 1, MPI_INT, 0, posted_tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    /* Rank 0 posted everything: let whatever the library accepts arrive. */
    long peak = rss_kib(), last = peak;
    double quiet_since = MPI_Wtime();
    while (MPI_Wtime() - quiet_since < 0.5) {
      int flag = 0;
      MPI_Iprobe(0, 99, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
      const long now = rss_kib();
      if (now > peak) peak = now;
      if (now != last) {
        last = now;
        quiet_since = MPI_Wtime();
      }
    }
    unsigned char *buf = malloc(size + 1);
    if (!buf) die(rank, "out of memory");
    const double d0 = MPI_Wtime();
    for (uint64_t i = 0; i < n; i++) {
      MPI_Status st;
      MPI_Recv(buf, (int)size, MPI_BYTE, 0, data_tag, MPI_COMM_WORLD, &st);
      int count = 0;
      MPI_Get_count(&st, MPI_BYTE, &count);
      if ((size_t)count != size || !check(buf, size, i)) {
        char what[128];
        snprintf(what, sizeof what, "message %llu: wrong length, content or order", (unsigned long long)i);
        die(rank, what);
      }
      if ((i & 4095) == 0) {
        const long now = rss_kib();
        if (now > peak) peak = now;
      }
    }
    const double d1 = MPI_Wtime();
    const long after = rss_kib();
    free(buf);
    printf("{\"bench\": \"unexpected\", \"n\": %llu, \"size\": %zu, \"baseline_kib\": %ld, \"peak_kib\": %ld, "
           "\"after_kib\": %ld, \"growth_mib\": %.1f, \"after_mib\": %.1f, \"drain_ms\": %.2f, \"verified\": true}\n",
           (unsigned long long)n, size, baseline, peak, after, (peak - baseline) / 1024.0,
           (after - baseline) / 1024.0, (d1 - d0) * 1e3);
    fflush(stdout);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
