/* Single-core memcpy bandwidth: the ceiling of any shared-memory transport
 * that copies once (plain C, no MPI; the driver pins it with taskset).
 *
 *   memcpy_bw [--sizes 4K,64K,1M,16M,128M] [--bytes TOTAL] [--trials T]
 *
 * Per size: a warm-up copy, then T trials, each copying about TOTAL bytes
 * (default 1 GiB) in copies of `size` bytes between two page-aligned, touched
 * buffers; the best trial is kept (the ceiling). The destination is verified
 * once. Output per size (bandwidth counts the bytes copied, 10^6 B/s):
 *   {"bench": "memcpy", "size": S, "iters": N, "bw_MBps": .., "verified": true}
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static size_t parse_size(const char *s) {
  char *end = NULL;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s) { fprintf(stderr, "bad size %s\n", s); exit(2); }
  switch (*end) {
    case 'k': case 'K': v <<= 10; end++; break;
    case 'm': case 'M': v <<= 20; end++; break;
    case 'g': case 'G': v <<= 30; end++; break;
    default: break;
  }
  if (*end == 'i' || *end == 'B' || *end == 'b') end++;
  if (*end == 'B') end++;
  if (*end) { fprintf(stderr, "bad size %s\n", s); exit(2); }
  return (size_t)v;
}

int main(int argc, char **argv) {
  char sizes_buf[4096] = "4K,64K,1M,16M,128M";
  size_t total = (size_t)1 << 30;
  int trials = 3;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--sizes") && i + 1 < argc) snprintf(sizes_buf, sizeof sizes_buf, "%s", argv[++i]);
    else if (!strcmp(argv[i], "--bytes") && i + 1 < argc) total = parse_size(argv[++i]);
    else if ((!strcmp(argv[i], "--trials") || !strcmp(argv[i], "--iters") || !strcmp(argv[i], "--reps")) &&
             i + 1 < argc) trials = atoi(argv[++i]);
    else { fprintf(stderr, "usage: memcpy_bw [--sizes LIST] [--bytes TOTAL] [--trials T]\n"); return 2; }
  }
  if (trials < 1) trials = 1;
  printf("{\"bench\": \"memcpy\", \"library\": \"libc memcpy\", \"nprocs\": 1}\n");
  for (char *tok = strtok(sizes_buf, ","); tok; tok = strtok(NULL, ",")) {
    size_t size = parse_size(tok);
    if (size == 0) continue;
    char *src = NULL, *dst = NULL;
    if (posix_memalign((void **)&src, 4096, size) || posix_memalign((void **)&dst, 4096, size)) {
      fprintf(stderr, "out of memory\n");
      return 1;
    }
    for (size_t i = 0; i < size; i++) src[i] = (char)(i * 131u + (i >> 12));
    memset(dst, 0, size);
    long iters = (long)(total / size);
    if (iters < 2) iters = 2;
    memcpy(dst, src, size);
    if (memcmp(dst, src, size) != 0) { fprintf(stderr, "memcpy verification failed\n"); return 1; }
    double best = 1e30;
    for (int t = 0; t < trials; t++) {
      double t0 = now();
      for (long i = 0; i < iters; i++) {
        memcpy(dst, src, size);
        __asm__ __volatile__("" : : "r"(dst), "r"(src) : "memory");
      }
      double dt = now() - t0;
      if (dt < best) best = dt;
    }
    printf("{\"bench\": \"memcpy\", \"size\": %zu, \"iters\": %ld, \"bw_MBps\": %.1f, \"verified\": true}\n", size,
           iters, (double)size * (double)iters / (best * 1e6));
    fflush(stdout);
    free(src);
    free(dst);
  }
  return 0;
}
