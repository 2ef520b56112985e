/* Partitioned communication (MPI 4.0 chapter 4) over a ring: every rank
 * sends to its right neighbour and receives from its left one, at
 * MPI_THREAD_MULTIPLE. Partitions are marked ready by 8 threads in random
 * order (MPI_Pready, MPI_Pready_range, MPI_Pready_list) while the main
 * thread polls MPI_Parrived and checks each partition the moment it is
 * reported; the two sides use different partition counts; each request
 * is started 3 times with new data. Also: derived (non-contiguous)
 * datatypes on either side, two pairs with the same tag matched in init
 * order, MPI_PROC_NULL, truncation, and the argument errors. Any number of
 * ranks (1: a rank sends to itself). */
#include <pthread.h>

#include "mpitest.h"

#define THREADS 8
#define STARTS 3

static int right, left;

static int value(int seed, long i) { return (int)((i * 2654435761u + (unsigned)seed * 40503u) & 0x7fffffff); }

/* ---- marking partitions ready from several threads ---- */
enum ready_form { SINGLE, RANGE, LIST };

struct marker {
  MPI_Request req;
  int* order;       /* a permutation of the partitions */
  int partitions;
  int next;         /* atomic index into order */
  enum ready_form form;
};

static void* mark(void* arg) {
  struct marker* m = (struct marker*)arg;
  for (;;) {
    /* Take 1 (SINGLE) or up to 4 (RANGE, LIST) entries of the order. */
    const int take = m->form == SINGLE ? 1 : 4;
    const int i = __atomic_fetch_add(&m->next, take, __ATOMIC_RELAXED);
    if (i >= m->partitions) return NULL;
    const int n = i + take > m->partitions ? m->partitions - i : take;
    if (m->form == LIST) {
      CHECK(MPI_Pready_list(n, m->order + i, m->req) == MPI_SUCCESS, "Pready_list failed");
    } else if (m->form == RANGE) {
      CHECK(MPI_Pready_range(m->order[i], m->order[i] + n - 1, m->req) == MPI_SUCCESS, "Pready_range failed");
    } else {
      CHECK(MPI_Pready(m->order[i], m->req) == MPI_SUCCESS, "Pready %d failed", m->order[i]);
    }
  }
}

static void shuffle(int* a, int n, unsigned* seed) {
  for (int i = n - 1; i > 0; --i) {
    int j = (int)(rand_r(seed) % (unsigned)(i + 1));
    int t = a[i];
    a[i] = a[j];
    a[j] = t;
  }
}

/* ---- one configuration ---- */
struct config {
  int sparts, scount;   /* sender: partitions x elements */
  int rparts, rcount;   /* receiver */
  int sstride, rstride; /* 1: MPI_INT; 2: every other int (non-contiguous) */
  enum ready_form form;
};

static MPI_Datatype type_of_stride(int stride) {
  if (stride == 1) return MPI_INT;
  MPI_Datatype t;
  MPI_Type_create_resized(MPI_INT, 0, (MPI_Aint)(stride * sizeof(int)), &t);
  MPI_Type_commit(&t);
  return t;
}

static void run_config(const struct config* c, int tag) {
  const long total = (long)c->sparts * c->scount;
  CHECK(total == (long)c->rparts * c->rcount, "bad config");
  MPI_Datatype st = type_of_stride(c->sstride), rt = type_of_stride(c->rstride);
  int* sbuf = malloc(sizeof(int) * (size_t)(total * c->sstride + 1));
  int* rbuf = malloc(sizeof(int) * (size_t)(total * c->rstride + 1));
  MPI_Request sreq, rreq;
  CHECK(MPI_Psend_init(sbuf, c->sparts, c->scount, st, right, tag, MPI_COMM_WORLD, MPI_INFO_NULL, &sreq) ==
            MPI_SUCCESS, "Psend_init failed");
  CHECK(MPI_Precv_init(rbuf, c->rparts, c->rcount, rt, left, tag, MPI_COMM_WORLD, MPI_INFO_NULL, &rreq) ==
            MPI_SUCCESS, "Precv_init failed");
  /* Types may be freed once the requests hold them. */
  if (st != MPI_INT) MPI_Type_free(&st);
  if (rt != MPI_INT) MPI_Type_free(&rt);
  int* order = malloc(sizeof(int) * (size_t)(c->sparts + 1));
  char* seen = malloc((size_t)c->rparts + 1);
  unsigned seed = (unsigned)(tag * 977 + mt_rank);
  for (int start = 0; start < STARTS; ++start) {
    const int my_seed = tag * 100 + start * 10 + mt_rank, left_seed = tag * 100 + start * 10 + left;
    for (long i = 0; i < total * c->sstride; ++i) sbuf[i] = -1;
    for (long i = 0; i < total; ++i) sbuf[i * c->sstride] = value(my_seed, i);
    for (long i = 0; i < total * c->rstride; ++i) rbuf[i] = -7;
    memset(seen, 0, (size_t)c->rparts + 1);
    MPI_Request both[2] = {rreq, sreq};
    CHECK(MPI_Startall(2, both) == MPI_SUCCESS, "Startall failed");
    /* The order: a permutation of the partitions; for RANGE, of blocks of
     * 4 partitions (each block's first partition 4 times: a marker takes 4
     * entries at a time, aligned, and readies that block as one range). */
    if (c->form == RANGE) {
      CHECK(c->sparts % 4 == 0, "RANGE configs have whole blocks");
      const int blocks = c->sparts / 4;
      int* b = malloc(sizeof(int) * (size_t)blocks);
      for (int k = 0; k < blocks; ++k) b[k] = k;
      shuffle(b, blocks, &seed);
      for (int k = 0; k < c->sparts; ++k) order[k] = b[k / 4] * 4;
      free(b);
    } else {
      for (int k = 0; k < c->sparts; ++k) order[k] = k;
      shuffle(order, c->sparts, &seed);
    }
    struct marker m = {sreq, order, c->sparts, 0, c->form};
    pthread_t th[THREADS];
    const int nthreads = THREADS;
    for (int t = 0; t < nthreads; ++t) pthread_create(&th[t], NULL, mark, &m);
    /* Meanwhile: poll the receive's partitions, check each when it arrives. */
    int arrived = 0;
    while (arrived < c->rparts) {
      for (int p = 0; p < c->rparts; ++p) {
        if (seen[p]) continue;
        int flag = 0;
        CHECK(MPI_Parrived(rreq, p, &flag) == MPI_SUCCESS, "Parrived failed");
        if (!flag) continue;
        for (long i = (long)p * c->rcount; i < (long)(p + 1) * c->rcount; ++i)
          CHECK(rbuf[i * c->rstride] == value(left_seed, i),
                "config %d start %d: partition %d element %ld is %d, want %d (when Parrived said it was in)", tag,
                start, p, i, rbuf[i * c->rstride], value(left_seed, i));
        seen[p] = 1;
        ++arrived;
      }
    }
    for (int t = 0; t < nthreads; ++t) pthread_join(th[t], NULL);
    MPI_Status sts[2];
    CHECK(MPI_Waitall(2, both, sts) == MPI_SUCCESS, "Waitall failed");
    CHECK(both[0] == rreq && both[1] == sreq, "persistent requests kept their handles");
    int n = -1;
    MPI_Get_count(&sts[0], MPI_INT, &n);
    CHECK(n == (int)total, "received count %d, want %ld", n, total);
    CHECK(sts[0].MPI_SOURCE == left && sts[0].MPI_TAG == tag, "status source %d tag %d", sts[0].MPI_SOURCE,
          sts[0].MPI_TAG);
    for (long i = 0; i < total; ++i)
      CHECK(rbuf[i * c->rstride] == value(left_seed, i), "config %d start %d: element %ld is %d after Wait", tag,
            start, i, rbuf[i * c->rstride]);
    for (long i = 0; c->rstride > 1 && i < total; ++i)
      CHECK(rbuf[i * c->rstride + 1] == -7, "gap %ld of the non-contiguous receive written", i);
    /* Inactive now: Parrived says every partition is in. */
    int flag = 0;
    CHECK(MPI_Parrived(rreq, 0, &flag) == MPI_SUCCESS && flag, "Parrived on an inactive request");
  }
  MPI_Request_free(&sreq);
  MPI_Request_free(&rreq);
  free(order);
  free(seen);
  free(sbuf);
  free(rbuf);
}

/* Two pairs with the same tag pair up in init order, whatever the start order. */
static void same_tag_pairs(void) {
  int a = 1000 + mt_rank, b = 2000 + mt_rank, ra = -1, rb = -1;
  MPI_Request sa, sb, qa, qb;
  MPI_Psend_init(&a, 1, 1, MPI_INT, right, 77, MPI_COMM_WORLD, MPI_INFO_NULL, &sa);
  MPI_Psend_init(&b, 1, 1, MPI_INT, right, 77, MPI_COMM_WORLD, MPI_INFO_NULL, &sb);
  MPI_Precv_init(&ra, 1, 1, MPI_INT, left, 77, MPI_COMM_WORLD, MPI_INFO_NULL, &qa);
  MPI_Precv_init(&rb, 1, 1, MPI_INT, left, 77, MPI_COMM_WORLD, MPI_INFO_NULL, &qb);
  MPI_Start(&qb);
  MPI_Start(&sb);  /* the second pair first */
  MPI_Pready(0, sb);
  MPI_Wait(&qb, MPI_STATUS_IGNORE);
  CHECK(rb == 2000 + left, "second pair got %d", rb);
  MPI_Start(&sa);
  MPI_Start(&qa);
  MPI_Pready(0, sa);
  MPI_Wait(&qa, MPI_STATUS_IGNORE);
  MPI_Wait(&sa, MPI_STATUS_IGNORE);
  MPI_Wait(&sb, MPI_STATUS_IGNORE);
  CHECK(ra == 1000 + left, "first pair got %d", ra);
  MPI_Request_free(&sa);
  MPI_Request_free(&sb);
  MPI_Request_free(&qa);
  MPI_Request_free(&qb);
}

static void proc_null(void) {
  int v[4] = {1, 2, 3, 4};
  MPI_Request s, r;
  CHECK(MPI_Psend_init(v, 2, 2, MPI_INT, MPI_PROC_NULL, 3, MPI_COMM_WORLD, MPI_INFO_NULL, &s) == MPI_SUCCESS, "psend");
  CHECK(MPI_Precv_init(v, 2, 2, MPI_INT, MPI_PROC_NULL, 3, MPI_COMM_WORLD, MPI_INFO_NULL, &r) == MPI_SUCCESS, "precv");
  MPI_Start(&s);
  MPI_Start(&r);
  MPI_Pready_range(0, 1, s);
  int flag = 0;
  MPI_Parrived(r, 1, &flag);
  CHECK(flag, "PROC_NULL partition not arrived");
  MPI_Status st;
  MPI_Wait(&r, &st);
  CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG, "PROC_NULL status %d %d", st.MPI_SOURCE,
        st.MPI_TAG);
  MPI_Wait(&s, MPI_STATUS_IGNORE);
  CHECK(v[0] == 1 && v[3] == 4, "PROC_NULL touched the buffer");
  MPI_Request_free(&s);
  MPI_Request_free(&r);
}

static void errors(void) {
  MPI_Comm c;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
  char text[MPI_MAX_ERROR_STRING];
  int buf[64], rbuf[64];
  MPI_Request s, r;
  CHECK(mt_error(MPI_Precv_init(rbuf, 4, 4, MPI_INT, MPI_ANY_SOURCE, 1, c, MPI_INFO_NULL, &r), text) == MPI_ERR_RANK,
        "any source: %s", text);
  CHECK(mt_error(MPI_Precv_init(rbuf, 4, 4, MPI_INT, left, MPI_ANY_TAG, c, MPI_INFO_NULL, &r), text) == MPI_ERR_TAG,
        "any tag: %s", text);
  CHECK(mt_error(MPI_Psend_init(buf, -1, 4, MPI_INT, right, 1, c, MPI_INFO_NULL, &s), text) == MPI_ERR_ARG,
        "negative partitions: %s", text);
  CHECK(mt_error(MPI_Psend_init(buf, 4, -4, MPI_INT, right, 1, c, MPI_INFO_NULL, &s), text) == MPI_ERR_COUNT,
        "negative count: %s", text);
  CHECK(mt_error(MPI_Psend_init(buf, 4, 4, MPI_DATATYPE_NULL, right, 1, c, MPI_INFO_NULL, &s), text) == MPI_ERR_TYPE,
        "null type: %s", text);
  CHECK(MPI_Psend_init(buf, 4, 16, MPI_INT, right, 1, c, MPI_INFO_NULL, &s) == MPI_SUCCESS, "psend_init");
  CHECK(MPI_Precv_init(rbuf, 8, 8, MPI_INT, left, 1, c, MPI_INFO_NULL, &r) == MPI_SUCCESS, "precv_init");
  CHECK(mt_error(MPI_Pready(0, s), text) == MPI_ERR_REQUEST, "Pready before Start: %s", text);
  MPI_Start(&r);
  MPI_Start(&s);
  for (int i = 0; i < 64; ++i) buf[i] = 5 * i + mt_rank;
  CHECK(mt_error(MPI_Pready(4, s), text) == MPI_ERR_ARG, "partition out of range: %s", text);
  CHECK(mt_error(MPI_Pready_range(2, 1, s), text) == MPI_ERR_ARG, "empty range: %s", text);
  CHECK(MPI_Pready(1, s) == MPI_SUCCESS, "Pready");
  CHECK(mt_error(MPI_Pready(1, s), text) == MPI_ERR_ARG, "Pready twice: %s", text);
  int flag = 0;
  CHECK(mt_error(MPI_Parrived(s, 0, &flag), text) == MPI_ERR_REQUEST, "Parrived on a send: %s", text);
  CHECK(mt_error(MPI_Parrived(r, 8, &flag), text) == MPI_ERR_ARG, "Parrived out of range: %s", text);
  CHECK(mt_error(MPI_Pready(0, r), text) == MPI_ERR_REQUEST, "Pready on a receive: %s", text);
  int list[3] = {0, 2, 3};
  CHECK(MPI_Pready_list(3, list, s) == MPI_SUCCESS, "Pready_list");
  MPI_Wait(&s, MPI_STATUS_IGNORE);
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  for (int i = 0; i < 64; ++i) CHECK(rbuf[i] == 5 * i + left, "errors: element %d is %d", i, rbuf[i]);
  MPI_Request_free(&s);
  MPI_Request_free(&r);
  /* A receive shorter than the message: MPI_ERR_TRUNCATE. */
  CHECK(MPI_Psend_init(buf, 4, 16, MPI_INT, right, 2, c, MPI_INFO_NULL, &s) == MPI_SUCCESS, "psend_init");
  CHECK(MPI_Precv_init(rbuf, 4, 15, MPI_INT, left, 2, c, MPI_INFO_NULL, &r) == MPI_SUCCESS, "precv_init");
  MPI_Start(&r);
  MPI_Start(&s);
  MPI_Pready_range(0, 3, s);
  CHECK(MPI_Wait(&s, MPI_STATUS_IGNORE) == MPI_SUCCESS, "the longer send completes");
  MPI_Status st;
  CHECK(mt_error(MPI_Wait(&r, &st), text) == MPI_ERR_TRUNCATE, "truncation: %s", text);
  MPI_Request_free(&s);
  MPI_Request_free(&r);
  MPI_Comm_free(&c);
}

int main(int argc, char** argv) {
  mt_name = "partitioned";
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &mt_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &mt_size);
  CHECK(provided == MPI_THREAD_MULTIPLE, "provided %d", provided);
  right = (mt_rank + 1) % mt_size;
  left = (mt_rank + mt_size - 1) % mt_size;
  const struct config configs[] = {
      {1, 1000, 1, 1000, 1, 1, SINGLE},
      {64, 16, 16, 64, 1, 1, SINGLE},
      {8, 128, 64, 16, 1, 1, LIST},
      {37, 7, 7, 37, 1, 1, SINGLE},
      {16, 65536, 4, 262144, 1, 1, SINGLE},  /* 4 MiB: partitions by rendezvous */
      {64, 4096, 32, 8192, 1, 1, RANGE},
      {8, 32, 4, 64, 2, 1, SINGLE},          /* non-contiguous send */
      {4, 64, 16, 16, 1, 2, LIST},           /* non-contiguous receive */
      {16, 8192, 8, 16384, 2, 2, SINGLE},    /* both, large */
      {3, 0, 5, 0, 1, 1, SINGLE},            /* empty */
  };
  for (int k = 0; k < (int)(sizeof configs / sizeof configs[0]); ++k) run_config(&configs[k], k + 1);
  same_tag_pairs();
  proc_null();
  errors();
  return mt_pass();
}
