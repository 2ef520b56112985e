/* MPI_THREAD_MULTIPLE with derived datatypes: 4 threads per process each
 * create, commit, name, query, use (staged and in-place sends to the same
 * thread of the partner process) and free types concurrently, so handles
 * are allocated and recycled under contention. */
#include <pthread.h>

#include "mpitest.h"

#define THREADS 4
#define ITERS 150

static int peer;

static void fail(int t, int i, const char* what, int got, int want) {
  printf("FAIL type_threads: rank %d thread %d iteration %d: %s: got %d want %d\n", mt_rank, t, i, what, got, want);
  fflush(stdout);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

static void* worker(void* arg) {
  int t = (int)(long)arg;
  static __thread int src[600], dst[600];
  for (int i = 0; i < ITERS; ++i) {
    int stride = 1 + (i + t) % 3; /* stride 1: contiguous, in place */
    MPI_Datatype v, r;
    MPI_Type_vector(100, 2, 2 * stride, MPI_INT, &v);
    MPI_Type_create_resized(v, 0, sizeof(int), &r); /* a second handle, freed at once */
    MPI_Type_free(&r);
    MPI_Type_commit(&v);
    char name[MPI_MAX_OBJECT_NAME];
    int len;
    snprintf(name, sizeof name, "t%d-%d", t, i);
    MPI_Type_set_name(v, name);
    int size;
    MPI_Type_size(v, &size);
    if (size != 800) fail(t, i, "size", size, 800);
    for (int k = 0; k < 600; ++k) src[k] = t * 100000 + i * 1000 + k, dst[k] = -1;
    MPI_Status st;
    MPI_Sendrecv(src, 1, v, peer, t, dst, 1, v, peer, t, MPI_COMM_WORLD, &st);
    for (int k = 0; k < 600; ++k) {
      int in = k < 200 * stride && k % (2 * stride) < 2;
      int want = in ? t * 100000 + i * 1000 + k : -1;
      if (dst[k] != want) fail(t, i, "data", dst[k], want);
    }
    char back[MPI_MAX_OBJECT_NAME];
    MPI_Type_get_name(v, back, &len);
    if (strcmp(back, name) != 0) fail(t, i, "name", len, (int)strlen(name));
    MPI_Type_free(&v);
  }
  return NULL;
}

int main(int argc, char** argv) {
  int provided = -1;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  mt_name = "type_threads";
  MPI_Comm_rank(MPI_COMM_WORLD, &mt_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &mt_size);
  CHECK(provided == MPI_THREAD_MULTIPLE, "provided %d", provided);
  peer = mt_rank ^ 1;
  if (peer >= mt_size) peer = mt_rank;
  pthread_t th[THREADS];
  for (long t = 0; t < THREADS; ++t) pthread_create(&th[t], NULL, worker, (void*)t);
  for (int t = 0; t < THREADS; ++t) pthread_join(th[t], NULL);
  return mt_pass();
}
