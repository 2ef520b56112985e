/* Bursts between rank pairs (0-1, 2-3, ...): each side posts COUNT
 * receives and COUNT sends of MIN to MAX bytes (see size_of) at once, then
 * waits for all of them. Every message carries its index and a byte
 * pattern, checked on arrival (contents and order: one tag, so the k-th
 * receive must hold the k-th send). Repeated ROUNDS times: even rounds
 * post the receives first, odd rounds the sends first (the peer's messages
 * then arrive unexpected).
 * Usage: burst [COUNT [MIN [MAX [ROUNDS]]]] (defaults 2000 8 8 1). */
#include "mpitest.h"

static long size_of(long i, long lo, long hi) {
  /* Every 32nd message MAX, the others spread over the first few percent
   * of [MIN, MAX]: every size class, without the bytes of MAX each time. */
  if (hi <= lo) return lo;
  const long k = i % 32;
  return k == 31 ? hi : lo + (hi - lo) * k / 700;
}

int main(int argc, char** argv) {
  mt_start("burst", &argc, &argv);
  const long count = argc > 1 ? atol(argv[1]) : 2000;
  const long lo = argc > 2 ? atol(argv[2]) : 8;
  const long hi = argc > 3 ? atol(argv[3]) : lo;
  const int rounds = argc > 4 ? atoi(argv[4]) : 1;
  CHECK(count > 0 && lo >= 8 && hi >= lo, "bad arguments");
  const int peer = mt_rank ^ 1;
  if (peer < mt_size) {
    /* Buffers: one per message in flight on each side. */
    unsigned char** sbuf = malloc(sizeof(unsigned char*) * count);
    unsigned char** rbuf = malloc(sizeof(unsigned char*) * count);
    MPI_Request* req = malloc(sizeof(MPI_Request) * 2 * count);
    CHECK(sbuf && rbuf && req, "out of memory");
    for (long i = 0; i < count; ++i) {
      const long n = size_of(i, lo, hi);
      sbuf[i] = malloc(n);
      rbuf[i] = malloc(n);
      CHECK(sbuf[i] && rbuf[i], "out of memory (message %ld, %ld bytes)", i, n);
    }
    for (int r = 0; r < rounds; ++r) {
      for (int half = 0; half < 2; ++half) {
        if ((half == 0) == (r % 2 == 0)) {
          for (long i = 0; i < count; ++i) {
            const long n = size_of(i, lo, hi);
            memset(rbuf[i], 0, n);
            MPI_Irecv(rbuf[i], (int)n, MPI_BYTE, peer, 7, MPI_COMM_WORLD, &req[count + i]);
          }
        } else {
          for (long i = 0; i < count; ++i) {
            const long n = size_of(i, lo, hi);
            const int seed = (int)(i * 3 + r * 1000 + mt_rank);
            mt_fill(sbuf[i], n, seed);
            memcpy(sbuf[i], &i, sizeof i);
            MPI_Isend(sbuf[i], (int)n, MPI_BYTE, peer, 7, MPI_COMM_WORLD, &req[i]);
          }
        }
      }
      MPI_Waitall((int)(2 * count), req, MPI_STATUSES_IGNORE);
      for (long i = 0; i < count; ++i) {
        const long n = size_of(i, lo, hi);
        const int seed = (int)(i * 3 + r * 1000 + peer);
        long idx = -1;
        memcpy(&idx, rbuf[i], sizeof idx);
        CHECK(idx == i, "round %d: receive %ld holds message %ld", r, i, idx);
        long bad = -1;
        for (long k = (long)sizeof idx; k < n; ++k)
          if (rbuf[i][k] != mt_byte(seed, k)) {
            bad = k;
            break;
          }
        CHECK(bad < 0, "round %d: message %ld (%ld bytes): byte %ld wrong", r, i, n, bad);
      }
    }
    for (long i = 0; i < count; ++i) {
      free(sbuf[i]);
      free(rbuf[i]);
    }
    free(sbuf);
    free(rbuf);
    free(req);
  }
  return mt_pass();
}
