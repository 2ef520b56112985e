/* Loads libmpi.so at run time, as the bindings of Python (mpi4py, ctypes),
 * Julia, R or Java do, and runs MPI through the symbols it resolves:
 *
 *   mpi_dlopen LIBMPI              an MPI job (start it with mpiexec)
 *   mpi_dlopen --load-only LIB     dlopen LIB and nothing else (libnmad.so)
 *
 * The program is not linked with the library (mpi.h gives types and
 * constants only). Per rank: MPI_Init_thread (MPI_THREAD_MULTIPLE), rank
 * and size, a ring exchange with MPI_Sendrecv, MPI_Allreduce and MPI_Bcast
 * checked against the values every rank can compute, then a second thread
 * of the process sends and receives in its own ring (its per-thread state
 * made and freed while the library is loaded), then MPI_Barrier and
 * MPI_Finalize. Prints "PASS mpi_dlopen rank R", or "FAIL mpi_dlopen: ..."
 * and exits 1. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi.h"

static int rank = -1, size = 0;

#define FAIL(...)                                       \
  do {                                                  \
    printf("FAIL mpi_dlopen: rank %d: ", rank);         \
    printf(__VA_ARGS__);                                \
    printf("\n");                                       \
    fflush(stdout);                                     \
    exit(1);                                            \
  } while (0)

static void* lib;
static void* need(const char* name) {
  void* p = dlsym(lib, name);
  if (!p) FAIL("dlsym(%s): %s", name, dlerror());
  return p;
}
/* The entry points, resolved from the loaded library. */
static __typeof__(MPI_Init_thread)* init_thread;
static __typeof__(MPI_Comm_rank)* comm_rank;
static __typeof__(MPI_Comm_size)* comm_size;
static __typeof__(MPI_Sendrecv)* sendrecv;
static __typeof__(MPI_Allreduce)* allreduce;
static __typeof__(MPI_Bcast)* bcast;
static __typeof__(MPI_Barrier)* barrier;
static __typeof__(MPI_Finalize)* finalize;

#define CALL(f, ...)                                          \
  do {                                                        \
    int e_ = f(__VA_ARGS__);                                  \
    if (e_ != MPI_SUCCESS) FAIL("%s returned %d", #f, e_);    \
  } while (0)

/* A ring of sends on tag `tag`: each rank sends `n` ints made of (rank,
 * tag) to the next one and checks what the previous one sent. */
static void ring(int tag, int n) {
  int* out = malloc(sizeof(int) * (size_t)n);
  int* in = malloc(sizeof(int) * (size_t)n);
  if (!out || !in) FAIL("out of memory");
  for (int i = 0; i < n; ++i) {
    out[i] = rank * 1000003 + tag * 7 + i;
    in[i] = -1;
  }
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  MPI_Status st;
  CALL(sendrecv, out, n, MPI_INT, next, tag, in, n, MPI_INT, prev, tag, MPI_COMM_WORLD, &st);
  if (st.MPI_SOURCE != prev || st.MPI_TAG != tag) FAIL("ring %d: status source %d tag %d", tag, st.MPI_SOURCE, st.MPI_TAG);
  for (int i = 0; i < n; ++i)
    if (in[i] != prev * 1000003 + tag * 7 + i) FAIL("ring %d: element %d is %d", tag, i, in[i]);
  free(out);
  free(in);
}

static void* second_thread(void* arg) {
  (void)arg;
  ring(9, 100000); /* 400 KB: a rendezvous from this thread */
  ring(10, 3);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "--load-only") == 0) {
    lib = dlopen(argv[2], RTLD_NOW | RTLD_GLOBAL);
    if (!lib) FAIL("dlopen(%s): %s", argv[2], dlerror());
    printf("PASS mpi_dlopen load %s\n", argv[2]);
    return 0;
  }
  if (argc != 2) {
    fprintf(stderr, "usage: mpi_dlopen LIBMPI | mpi_dlopen --load-only LIB\n");
    return 2;
  }
  lib = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
  if (!lib) FAIL("dlopen(%s): %s", argv[1], dlerror());
  init_thread = need("MPI_Init_thread");
  comm_rank = need("MPI_Comm_rank");
  comm_size = need("MPI_Comm_size");
  sendrecv = need("MPI_Sendrecv");
  allreduce = need("MPI_Allreduce");
  bcast = need("MPI_Bcast");
  barrier = need("MPI_Barrier");
  finalize = need("MPI_Finalize");

  int provided = -1;
  CALL(init_thread, &argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  if (provided != MPI_THREAD_MULTIPLE) FAIL("provided thread level %d", provided);
  CALL(comm_rank, MPI_COMM_WORLD, &rank);
  CALL(comm_size, MPI_COMM_WORLD, &size);
  if (size < 2) FAIL("needs 2 or more processes, got %d", size);

  ring(1, 1);
  ring(2, 200000); /* 800 KB: rendezvous */

  long long mine[3] = {rank + 1, (long long)rank * rank, 1LL << (rank % 40)}, sum[3] = {0, 0, 0};
  CALL(allreduce, mine, sum, 3, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  long long want[3] = {0, 0, 0};
  for (int r = 0; r < size; ++r) {
    want[0] += r + 1;
    want[1] += (long long)r * r;
    want[2] += 1LL << (r % 40);
  }
  for (int i = 0; i < 3; ++i)
    if (sum[i] != want[i]) FAIL("allreduce element %d: %lld, not %lld", i, sum[i], want[i]);

  double v[4] = {0, 0, 0, 0};
  const int root = size - 1;
  if (rank == root)
    for (int i = 0; i < 4; ++i) v[i] = 0.5 * i + root;
  CALL(bcast, v, 4, MPI_DOUBLE, root, MPI_COMM_WORLD);
  for (int i = 0; i < 4; ++i)
    if (v[i] != 0.5 * i + root) FAIL("bcast element %d: %g", i, v[i]);

  pthread_t t;
  if (pthread_create(&t, NULL, second_thread, NULL) != 0) FAIL("pthread_create failed");
  pthread_join(t, NULL);

  CALL(barrier, MPI_COMM_WORLD);
  CALL(finalize);
  printf("PASS mpi_dlopen rank %d\n", rank);
  fflush(stdout);
  return 0;
}
