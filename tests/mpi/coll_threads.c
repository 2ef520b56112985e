/* MPI_THREAD_MULTIPLE: several threads run collectives at once, each on
 * its own communicator (as MPI allows), blocking and non-blocking, mixed
 * with point-to-point on another communicator. */
#include <pthread.h>

#include "mpitest.h"

#define THREADS 3
#define ROUNDS 200

static MPI_Comm comms[THREADS];

static void* worker(void* arg) {
  const int t = (int)(long)arg;
  MPI_Comm c = comms[t];
  int rank, size;
  MPI_Comm_rank(c, &rank);
  MPI_Comm_size(c, &size);
  for (int i = 0; i < ROUNDS; ++i) {
    long v = rank + i + 1000L * t, sum = -1;
    MPI_Allreduce(&v, &sum, 1, MPI_LONG, MPI_SUM, c);
    long want = (long)size * (i + 1000L * t) + (long)size * (size - 1) / 2;
    CHECK(sum == want, "thread %d round %d allreduce %ld want %ld", t, i, sum, want);
    int b = rank == i % size ? 7 * i + t : -1;
    MPI_Request r;
    MPI_Ibcast(&b, 1, MPI_INT, i % size, c, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    CHECK(b == 7 * i + t, "thread %d round %d ibcast %d", t, i, b);
    if (i % 50 == 0) MPI_Barrier(c);
  }
  return NULL;
}

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  mt_name = "coll_threads";
  MPI_Comm_rank(MPI_COMM_WORLD, &mt_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &mt_size);
  CHECK(provided == MPI_THREAD_MULTIPLE, "provided %d", provided);
  for (int t = 0; t < THREADS; ++t) MPI_Comm_dup(MPI_COMM_WORLD, &comms[t]);
  pthread_t th[THREADS];
  for (int t = 0; t < THREADS; ++t) pthread_create(&th[t], NULL, worker, (void*)(long)t);
  /* The main thread exchanges point-to-point traffic meanwhile. */
  const int next = (mt_rank + 1) % mt_size, prev = (mt_rank + mt_size - 1) % mt_size;
  for (int i = 0; i < ROUNDS; ++i) {
    int out = mt_rank * 1000 + i, in = -1;
    MPI_Sendrecv(&out, 1, MPI_INT, next, 9, &in, 1, MPI_INT, prev, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(in == prev * 1000 + i, "ring round %d got %d", i, in);
  }
  for (int t = 0; t < THREADS; ++t) pthread_join(th[t], NULL);
  for (int t = 0; t < THREADS; ++t) MPI_Comm_free(&comms[t]);
  return mt_pass();
}
