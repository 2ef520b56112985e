/* Communicator constructors under MPI_THREAD_MULTIPLE: concurrent
 * creations in several threads of a process (dup, create_group, split,
 * Intercomm_create + merge, attributes copied with callbacks) on separate
 * parent communicators must get distinct contexts; the same tag on each
 * result carries the thread's id and must not cross. */
#include <pthread.h>

#include "mpitest.h"

#define THREADS 3
#define ITERS 25

static MPI_Comm parent[THREADS];
static int kv;
static int copies[THREADS];
static int copy_fn(MPI_Comm c, int k, void* extra, void* in, void* out, int* flag) {
  (void)c;
  (void)k;
  (void)extra;
  __atomic_add_fetch(&copies[*(int*)in], 1, __ATOMIC_RELAXED);
  *(void**)out = in;
  *flag = 1;
  return MPI_SUCCESS;
}

/* One ring exchange on c; the value received must be the sender's
 * (thread, iteration). */
static void ring(MPI_Comm c, int t, int i, const char* what) {
  int r, s;
  MPI_Comm_rank(c, &r);
  MPI_Comm_size(c, &s);
  int out = t * 100000 + i * 100 + r, in = -1;
  int prev = (r + s - 1) % s;
  MPI_Sendrecv(&out, 1, MPI_INT, (r + 1) % s, 0, &in, 1, MPI_INT, prev, 0, c, MPI_STATUS_IGNORE);
  CHECK(in == t * 100000 + i * 100 + prev, "%s: thread %d iteration %d got %d", what, t, i, in);
}

static void* creator(void* arg) {
  const int t = (int)(long)arg;
  MPI_Group g;
  MPI_Comm_group(parent[t], &g);
  for (int i = 0; i < ITERS; ++i) {
    MPI_Comm d, cg, sp;
    MPI_Comm_dup(parent[t], &d);
    int* v = NULL;
    int flag = 0;
    MPI_Comm_get_attr(d, kv, &v, &flag);
    CHECK(flag && *v == t, "attribute copied to thread %d's dup", t);
    ring(d, t, i, "dup");
    MPI_Comm_create_group(parent[t], g, t, &cg);
    ring(cg, t, i, "create_group");
    MPI_Comm_split(d, 0, -mt_rank, &sp);
    ring(sp, t, i, "split");
    if (mt_size >= 2 && i % 5 == 0) {
      /* Two halves of the thread's own parent, joined and merged. */
      const int lowsize = mt_size / 2, low = mt_rank < lowsize;
      MPI_Comm half, inter, merged;
      MPI_Comm_split(parent[t], low, mt_rank, &half);
      MPI_Intercomm_create(half, 0, parent[t], low ? lowsize : 0, 100 + t, &inter);
      MPI_Intercomm_merge(inter, !low, &merged);
      ring(merged, t, i, "merged");
      int lr, rs;
      MPI_Comm_rank(inter, &lr);
      MPI_Comm_remote_size(inter, &rs);
      if (lr < rs) {
        int out = t * 1000 + mt_rank, in = -1;
        MPI_Sendrecv(&out, 1, MPI_INT, lr, 1, &in, 1, MPI_INT, lr, 1, inter, MPI_STATUS_IGNORE);
        CHECK(in == t * 1000 + (low ? lowsize : 0) + lr, "inter: thread %d got %d", t, in);
      }
      MPI_Comm_free(&merged);
      MPI_Comm_free(&inter);
      MPI_Comm_free(&half);
    }
    MPI_Comm_free(&sp);
    MPI_Comm_free(&cg);
    MPI_Comm_free(&d);
  }
  MPI_Group_free(&g);
  return NULL;
}

int main(int argc, char** argv) {
  mt_name = "comm_threads";
  int provided = -1;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &mt_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &mt_size);
  CHECK(provided == MPI_THREAD_MULTIPLE, "provided %d", provided);
  MPI_Comm_create_keyval(copy_fn, MPI_COMM_NULL_DELETE_FN, &kv, NULL);
  static int ids[THREADS];
  for (int t = 0; t < THREADS; ++t) {
    MPI_Comm_dup(MPI_COMM_WORLD, &parent[t]);
    ids[t] = t;
    MPI_Comm_set_attr(parent[t], kv, &ids[t]);
  }
  pthread_t th[THREADS];
  for (int t = 0; t < THREADS; ++t) pthread_create(&th[t], NULL, creator, (void*)(long)t);
  for (int t = 0; t < THREADS; ++t) pthread_join(th[t], NULL);
  for (int t = 0; t < THREADS; ++t) {
    /* One copy per dup (split does not copy attributes). */
    CHECK(copies[t] == ITERS, "thread %d: %d copies", t, copies[t]);
    MPI_Comm_free(&parent[t]);
  }
  MPI_Comm_free_keyval(&kv);
  return mt_pass();
}
