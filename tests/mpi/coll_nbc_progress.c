/* Non-blocking collectives progress while the rank computes and only calls
 * MPI_Test: an MPI_Iallreduce (small and > 64 KiB) and an MPI_Ibcast
 * started while one rank arrives late; the test loop must see them
 * complete with correct results, and the progress made by MPI_Test on an
 * unrelated request (MPI_Irecv) advances them too. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mpitest.h"

static double work(double x) {
  for (int i = 0; i < 2000; ++i) x = x * 1.0000001 + 0.5 / (1.0 + x);
  return x;
}

int main(int argc, char** argv) {
  mt_start("coll_nbc_progress", &argc, &argv);
  int n = mt_size, r = mt_rank;
  const int counts[] = {1, 30000}; /* 30000 doubles = 240 KB */
  for (int c = 0; c < 2; ++c) {
    int cnt = counts[c];
    double* a = malloc(sizeof(double) * cnt);
    double* s = malloc(sizeof(double) * cnt);
    for (int i = 0; i < cnt; ++i) a[i] = r + i;
    if (r == n - 1) { /* arrive late */
      struct timespec ts = {0, 50 * 1000 * 1000};
      nanosleep(&ts, NULL);
    }
    MPI_Request q;
    CHECK(MPI_Iallreduce(a, s, cnt, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &q) == MPI_SUCCESS, "iallreduce");
    int flag = 0;
    long tests = 0;
    double acc = 1;
    while (!flag) {
      acc = work(acc);
      CHECK(MPI_Test(&q, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS, "test");
      ++tests;
    }
    CHECK(acc > 0, "work");
    for (int i = 0; i < cnt; ++i)
      CHECK(s[i] == n * (n - 1) / 2.0 + (double)n * i, "cnt %d [%d] = %g after %ld tests", cnt, i, s[i], tests);
    free(a);
    free(s);
  }
  /* Progress through an unrelated request: the collective is only ever
   * advanced by the MPI_Test calls on the receive (and the hook). */
  int* b = malloc(sizeof(int) * 50000);
  for (int i = 0; i < 50000; ++i) b[i] = r == 0 ? i * 3 : -1;
  MPI_Request bq, rq;
  CHECK(MPI_Ibcast(b, 50000, MPI_INT, 0, MPI_COMM_WORLD, &bq) == MPI_SUCCESS, "ibcast");
  int token = -1, one = r;
  MPI_Irecv(&token, 1, MPI_INT, (r + n - 1) % n, 3, MPI_COMM_WORLD, &rq);
  /* The send goes out only after this rank saw the broadcast complete via
   * MPI_Request_get_status (which must not free it). */
  int flag = 0, rflag = 0, sent = 0;
  while (!flag || !rflag) {
    if (!flag) MPI_Request_get_status(bq, &flag, MPI_STATUS_IGNORE);
    if (flag && !sent) {
      MPI_Send(&one, 1, MPI_INT, (r + 1) % n, 3, MPI_COMM_WORLD);
      sent = 1;
    }
    if (!rflag) MPI_Test(&rq, &rflag, MPI_STATUS_IGNORE);
  }
  CHECK(MPI_Wait(&bq, MPI_STATUS_IGNORE) == MPI_SUCCESS && bq == MPI_REQUEST_NULL, "wait after get_status");
  for (int i = 0; i < 50000; ++i) CHECK(b[i] == i * 3, "ibcast [%d] = %d", i, b[i]);
  CHECK(token == (r + n - 1) % n, "token %d", token);
  free(b);
  return mt_pass();
}
