/* MPI_THREAD_MULTIPLE: 4 threads per process exchange with the same thread
 * of the partner process concurrently (one tag per thread), plus
 * Is_thread_main and Query_thread. */
#include <pthread.h>

#include "mpitest.h"

#define THREADS 4
#define ITERS 300

static int peer;
static MPI_Comm thread_comm[THREADS];

/* Concurrent communicator creation: every thread duplicates its own
 * communicator repeatedly; the duplicates must get distinct contexts (the
 * same tag on each carries the thread's id and must not cross). */
static void* creator(void* arg) {
  int t = (int)(long)arg;
  for (int i = 0; i < 40; ++i) {
    MPI_Comm d;
    MPI_Comm_dup(thread_comm[t], &d);
    int out = t * 1000 + i, in = -1;
    MPI_Sendrecv(&out, 1, MPI_INT, peer, 0, &in, 1, MPI_INT, peer, 0, d, MPI_STATUS_IGNORE);
    if (in != out) { printf("FAIL threads: creator %d iteration %d got %d\n", t, i, in); fflush(stdout); MPI_Abort(MPI_COMM_WORLD, 1); }
    MPI_Comm_free(&d);
  }
  return NULL;
}

static void* worker(void* arg) {
  int t = (int)(long)arg;
  int flag = -1;
  MPI_Is_thread_main(&flag);
  if (flag != 0) { printf("FAIL threads: worker %d claims to be the main thread\n", t); fflush(stdout); MPI_Abort(MPI_COMM_WORLD, 1); }
  static __thread int buf[2000];
  for (int i = 0; i < ITERS; ++i) {
    int n = (i % 10 == 0) ? 2000 : 1 + i % 4;
    int out[2000];
    for (int k = 0; k < n; ++k) out[k] = t * 1000000 + i * 10 + k % 10;
    MPI_Request r[2];
    MPI_Irecv(buf, 2000, MPI_INT, peer, t, MPI_COMM_WORLD, &r[0]);
    MPI_Isend(out, n, MPI_INT, peer, t, MPI_COMM_WORLD, &r[1]);
    MPI_Status st[2];
    MPI_Waitall(2, r, st);
    int c = 0;
    MPI_Get_count(&st[0], MPI_INT, &c);
    if (c != n || st[0].MPI_TAG != t) { printf("FAIL threads: thread %d iter %d count %d\n", t, i, c); fflush(stdout); MPI_Abort(MPI_COMM_WORLD, 1); }
    for (int k = 0; k < n; ++k)
      if (buf[k] != t * 1000000 + i * 10 + k % 10) { printf("FAIL threads: thread %d iter %d element %d\n", t, i, k); fflush(stdout); MPI_Abort(MPI_COMM_WORLD, 1); }
  }
  return NULL;
}

int main(int argc, char** argv) {
  int provided = -1;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  mt_name = "threads";
  MPI_Comm_rank(MPI_COMM_WORLD, &mt_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &mt_size);
  CHECK(provided == MPI_THREAD_MULTIPLE, "provided %d", provided);
  int q = -1, flag = -1;
  MPI_Query_thread(&q);
  CHECK(q == MPI_THREAD_MULTIPLE, "Query_thread %d", q);
  MPI_Is_thread_main(&flag);
  CHECK(flag == 1, "main thread");
  peer = mt_rank ^ 1;
  if (peer >= mt_size) peer = mt_rank; /* odd one out talks to itself */
  pthread_t th[THREADS];
  for (long t = 0; t < THREADS; ++t) pthread_create(&th[t], NULL, worker, (void*)t);
  for (int t = 0; t < THREADS; ++t) pthread_join(th[t], NULL);
  for (int t = 0; t < THREADS; ++t) MPI_Comm_dup(MPI_COMM_WORLD, &thread_comm[t]);
  for (long t = 0; t < THREADS; ++t) pthread_create(&th[t], NULL, creator, (void*)t);
  for (int t = 0; t < THREADS; ++t) pthread_join(th[t], NULL);
  for (int t = 0; t < THREADS; ++t) MPI_Comm_free(&thread_comm[t]);
  return mt_pass();
}
