/* Non-blocking collectives advance while a rank sleeps outside MPI: rank 0
 * starts MPI_Iallreduce (1 MiB of doubles), MPI_Ibcast (1 MiB, root 0) and
 * MPI_Ialltoall, then sleeps without calling MPI; the other ranks start the
 * same collective and wait at once. With a progress thread
 * (NMAD_PROGRESS=thread) their wait ends long before rank 0 wakes up; with
 * NMAD_PROGRESS=none it cannot end before. Results are checked on every
 * rank. Each collective starts after a barrier (rank 0's sleep must not
 * delay its start of the next one). Expectation from the environment:
 * PROGRESS_EXPECT=background|none. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mpitest.h"

enum { kSleepMs = 1500, kCount = 131072 };

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

/* Rank 0 sleeps after starting `q`; the others wait at once. */
static void finish(MPI_Request* q, const char* what, int background) {
  if (mt_rank == 0) {
    sleep_ms(kSleepMs);
    CHECK(MPI_Wait(q, MPI_STATUS_IGNORE) == MPI_SUCCESS, "%s wait", what);
    return;
  }
  double t0 = MPI_Wtime();
  CHECK(MPI_Wait(q, MPI_STATUS_IGNORE) == MPI_SUCCESS, "%s wait", what);
  double ms = (MPI_Wtime() - t0) * 1e3;
  if (background)
    CHECK(ms < kSleepMs / 2.0, "%s: waited %.1f ms for rank 0 (progress thread expected)", what, ms);
  else
    CHECK(ms > kSleepMs * 0.8, "%s: waited only %.1f ms while rank 0 slept (no progress thread)", what, ms);
}

int main(int argc, char** argv) {
  mt_start("progress_background", &argc, &argv);
  const char* e = getenv("PROGRESS_EXPECT");
  CHECK(e && (!strcmp(e, "background") || !strcmp(e, "none")), "PROGRESS_EXPECT must be background or none");
  const int background = !strcmp(e, "background");
  const int n = mt_size, r = mt_rank;
  double* a = malloc(sizeof(double) * kCount);
  double* s = malloc(sizeof(double) * kCount);
  for (int i = 0; i < kCount; ++i) a[i] = r + i;
  MPI_Request q;
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK(MPI_Iallreduce(a, s, kCount, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &q) == MPI_SUCCESS, "iallreduce");
  finish(&q, "MPI_Iallreduce", background);
  for (int i = 0; i < kCount; ++i)
    CHECK(s[i] == n * (n - 1) / 2.0 + (double)n * i, "allreduce [%d] = %g", i, s[i]);

  for (int i = 0; i < kCount; ++i) s[i] = r == 0 ? i * 0.5 : -1;
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK(MPI_Ibcast(s, kCount, MPI_DOUBLE, 0, MPI_COMM_WORLD, &q) == MPI_SUCCESS, "ibcast");
  finish(&q, "MPI_Ibcast", background);
  for (int i = 0; i < kCount; ++i) CHECK(s[i] == i * 0.5, "bcast [%d] = %g", i, s[i]);

  const int block = kCount / n;
  for (int i = 0; i < block * n; ++i) a[i] = r * 1e6 + i;
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK(MPI_Ialltoall(a, block, MPI_DOUBLE, s, block, MPI_DOUBLE, MPI_COMM_WORLD, &q) == MPI_SUCCESS, "ialltoall");
  finish(&q, "MPI_Ialltoall", background);
  for (int p = 0; p < n; ++p)
    for (int i = 0; i < block; ++i)
      CHECK(s[p * block + i] == p * 1e6 + r * block + i, "alltoall from %d [%d] = %g", p, i, s[p * block + i]);
  free(a);
  free(s);
  return mt_pass();
}
