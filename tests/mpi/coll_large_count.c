/* The large-count (_c) collectives of MPI 4.0/4.1: every one, in its
 * blocking, non-blocking (MPI_I..._c) and persistent (MPI_..._init_c,
 * started 3 times) forms, against the int blocking form on the same random
 * data, receive buffers compared byte for byte (sentinels included, so a
 * write outside a block is seen). On the world communicator, on a periodic
 * ring (neighbourhood collectives) and, from 2 ranks, on an
 * intercommunicator of world's two halves (the collectives defined there).
 * Then MPI_IN_PLACE forms, Allreduce_c with a user op (MPI_Op_create, not
 * commutative), bad arguments (negative counts, null arrays) refused with
 * their class, and, at 2 ranks, the large transfers: a Bcast_c of more than 2^31 MPI_CHARs
 * and a Gatherv_c whose displacement exceeds INT_MAX (skipped, with the
 * reason printed, when memory is short). Any number of ranks. */
#include <limits.h>
#include <stdint.h>

#include "mpitest.h"

#define B 4     /* elements per block of the uniform collectives */
#define ITERS 3 /* starts of each persistent request */

static int me, n;
static int *sb, *rb, *ref;
static size_t cap; /* ints in each of sb, rb, ref */
static int preload = -1; /* this rank (or every rank: -2) starts with sb's data in rb and ref (bcast, in place) */
static unsigned rng_state = 1;

static int rnd(void) {
  rng_state = rng_state * 1103515245u + 12345u;
  return (int)((rng_state >> 8) % 100000u);
}

static void fill(int iter) {
  rng_state = (unsigned)(iter * 7919 + me * 104729 + 17);
  for (size_t i = 0; i < cap; ++i) sb[i] = rnd();
  for (size_t i = 0; i < cap; ++i) rb[i] = ref[i] = -77;
  if (preload == me || preload == -2) memcpy(rb, sb, cap * sizeof(int)), memcpy(ref, sb, cap * sizeof(int));
}

static void compare(const char* name, int mode, int iter) {
  static const char* modes[] = {"blocking", "non-blocking", "persistent"};
  for (size_t i = 0; i < cap; ++i)
    CHECK(rb[i] == ref[i], "%s (%s, start %d): int %zu is %d, the int form gives %d", name, modes[mode], iter, i, rb[i],
          ref[i]);
}

static void wait_ok(MPI_Request* r, const char* name) {
  CHECK(MPI_Wait(r, MPI_STATUS_IGNORE) == MPI_SUCCESS, "%s: wait failed", name);
}

/* Runs one collective in its three _c forms (CALL_C, ICALL_C, INIT_C,
 * writing into R, the request &req) and its int form (CALL_INT into R),
 * on the same data each time. */
#define TRIPLE(name, CALL_C, ICALL_C, INIT_C, CALL_INT)                                           \
  do {                                                                                            \
    for (int mode = 0; mode < 3; ++mode) {                                                        \
      MPI_Request req = MPI_REQUEST_NULL;                                                         \
      if (mode == 2) {                                                                            \
        void* R = rb;                                                                             \
        (void)R;                                                                                  \
        CHECK((INIT_C) == MPI_SUCCESS, "%s: init failed", name);                                  \
      }                                                                                           \
      for (int it = 0; it < (mode == 2 ? ITERS : 1); ++it) {                                      \
        fill(10 * mode + it);                                                                     \
        {                                                                                         \
          void* R = rb;                                                                           \
          (void)R;                                                                                \
          if (mode == 0) CHECK((CALL_C) == MPI_SUCCESS, "%s failed", name);                       \
          if (mode == 1) CHECK((ICALL_C) == MPI_SUCCESS, "%s: I form failed", name);              \
          if (mode == 2) CHECK(MPI_Start(&req) == MPI_SUCCESS, "%s: start failed", name);         \
          if (mode > 0) wait_ok(&req, name);                                                      \
        }                                                                                         \
        {                                                                                         \
          void* R = ref;                                                                          \
          (void)R;                                                                                \
          CHECK((CALL_INT) == MPI_SUCCESS, "%s: int form failed", name);                          \
        }                                                                                         \
        compare(name, mode, it);                                                                  \
      }                                                                                           \
      if (mode == 2) {                                                                            \
        MPI_Request_free(&req);                                                                   \
        CHECK(req == MPI_REQUEST_NULL, "%s: free did not null", name);                            \
      }                                                                                           \
    }                                                                                             \
  } while (0)

/* A user op, associative but not commutative: element (a, b) of a pair of
 * ints is the map x -> a x + b (mod 65521); in op inout = the map in, then
 * inout's. */
#define MOD 65521
static void compose(void* in, void* inout, int* len, MPI_Datatype* dt) {
  (void)dt;
  const int* f = in;
  int* g = inout;
  for (int i = 0; i < *len; ++i) {
    const long long a1 = f[2 * i] % MOD, b1 = f[2 * i + 1] % MOD, a2 = g[2 * i] % MOD, b2 = g[2 * i + 1] % MOD;
    g[2 * i] = (int)(a1 * a2 % MOD);
    g[2 * i + 1] = (int)((a2 * b1 + b2) % MOD);
  }
}

/* The intracommunicator collectives on comm (size p, rank r). */
static void intra(MPI_Comm c, int p, int r) {
  int *cnt = malloc(sizeof(int) * p), *dsp = malloc(sizeof(int) * p), *wdsp = malloc(sizeof(int) * p);
  MPI_Count* ccnt = malloc(sizeof(MPI_Count) * p);
  MPI_Aint *cdsp = malloc(sizeof(MPI_Aint) * p), *cwdsp = malloc(sizeof(MPI_Aint) * p);
  MPI_Datatype* types = malloc(sizeof(MPI_Datatype) * p);
  for (int i = 0; i < p; ++i) {
    cnt[i] = 1 + (i + 2) % 3; /* uneven blocks, with gaps between them */
    dsp[i] = 5 * i + 1;
    wdsp[i] = dsp[i] * (int)sizeof(int);
    ccnt[i] = cnt[i], cdsp[i] = dsp[i], cwdsp[i] = wdsp[i];
    types[i] = MPI_INT;
  }
  const int root = p - 1, mine = cnt[r];
  const MPI_Info I = MPI_INFO_NULL;

  preload = root;
  TRIPLE("Bcast_c", MPI_Bcast_c(R, 7, MPI_INT, root, c), MPI_Ibcast_c(R, 7, MPI_INT, root, c, &req),
         MPI_Bcast_init_c(R, 7, MPI_INT, root, c, I, &req), MPI_Bcast(R, 7, MPI_INT, root, c));
  preload = -1;
  TRIPLE("Reduce_c", MPI_Reduce_c(sb, R, 9, MPI_INT, MPI_SUM, root, c),
         MPI_Ireduce_c(sb, R, 9, MPI_INT, MPI_SUM, root, c, &req),
         MPI_Reduce_init_c(sb, R, 9, MPI_INT, MPI_SUM, root, c, I, &req),
         MPI_Reduce(sb, R, 9, MPI_INT, MPI_SUM, root, c));
  TRIPLE("Allreduce_c", MPI_Allreduce_c(sb, R, 9, MPI_INT, MPI_MAX, c),
         MPI_Iallreduce_c(sb, R, 9, MPI_INT, MPI_MAX, c, &req),
         MPI_Allreduce_init_c(sb, R, 9, MPI_INT, MPI_MAX, c, I, &req), MPI_Allreduce(sb, R, 9, MPI_INT, MPI_MAX, c));
  TRIPLE("Scan_c", MPI_Scan_c(sb, R, 6, MPI_INT, MPI_SUM, c), MPI_Iscan_c(sb, R, 6, MPI_INT, MPI_SUM, c, &req),
         MPI_Scan_init_c(sb, R, 6, MPI_INT, MPI_SUM, c, I, &req), MPI_Scan(sb, R, 6, MPI_INT, MPI_SUM, c));
  TRIPLE("Exscan_c", MPI_Exscan_c(sb, R, 6, MPI_INT, MPI_SUM, c), MPI_Iexscan_c(sb, R, 6, MPI_INT, MPI_SUM, c, &req),
         MPI_Exscan_init_c(sb, R, 6, MPI_INT, MPI_SUM, c, I, &req), MPI_Exscan(sb, R, 6, MPI_INT, MPI_SUM, c));
  TRIPLE("Gather_c", MPI_Gather_c(sb, B, MPI_INT, R, B, MPI_INT, root, c),
         MPI_Igather_c(sb, B, MPI_INT, R, B, MPI_INT, root, c, &req),
         MPI_Gather_init_c(sb, B, MPI_INT, R, B, MPI_INT, root, c, I, &req),
         MPI_Gather(sb, B, MPI_INT, R, B, MPI_INT, root, c));
  TRIPLE("Gatherv_c", MPI_Gatherv_c(sb, mine, MPI_INT, R, ccnt, cdsp, MPI_INT, root, c),
         MPI_Igatherv_c(sb, mine, MPI_INT, R, ccnt, cdsp, MPI_INT, root, c, &req),
         MPI_Gatherv_init_c(sb, mine, MPI_INT, R, ccnt, cdsp, MPI_INT, root, c, I, &req),
         MPI_Gatherv(sb, mine, MPI_INT, R, cnt, dsp, MPI_INT, root, c));
  TRIPLE("Allgather_c", MPI_Allgather_c(sb, B, MPI_INT, R, B, MPI_INT, c),
         MPI_Iallgather_c(sb, B, MPI_INT, R, B, MPI_INT, c, &req),
         MPI_Allgather_init_c(sb, B, MPI_INT, R, B, MPI_INT, c, I, &req),
         MPI_Allgather(sb, B, MPI_INT, R, B, MPI_INT, c));
  TRIPLE("Allgatherv_c", MPI_Allgatherv_c(sb, mine, MPI_INT, R, ccnt, cdsp, MPI_INT, c),
         MPI_Iallgatherv_c(sb, mine, MPI_INT, R, ccnt, cdsp, MPI_INT, c, &req),
         MPI_Allgatherv_init_c(sb, mine, MPI_INT, R, ccnt, cdsp, MPI_INT, c, I, &req),
         MPI_Allgatherv(sb, mine, MPI_INT, R, cnt, dsp, MPI_INT, c));
  TRIPLE("Scatter_c", MPI_Scatter_c(sb, B, MPI_INT, R, B, MPI_INT, root, c),
         MPI_Iscatter_c(sb, B, MPI_INT, R, B, MPI_INT, root, c, &req),
         MPI_Scatter_init_c(sb, B, MPI_INT, R, B, MPI_INT, root, c, I, &req),
         MPI_Scatter(sb, B, MPI_INT, R, B, MPI_INT, root, c));
  TRIPLE("Scatterv_c", MPI_Scatterv_c(sb, ccnt, cdsp, MPI_INT, R, mine, MPI_INT, root, c),
         MPI_Iscatterv_c(sb, ccnt, cdsp, MPI_INT, R, mine, MPI_INT, root, c, &req),
         MPI_Scatterv_init_c(sb, ccnt, cdsp, MPI_INT, R, mine, MPI_INT, root, c, I, &req),
         MPI_Scatterv(sb, cnt, dsp, MPI_INT, R, mine, MPI_INT, root, c));
  TRIPLE("Alltoall_c", MPI_Alltoall_c(sb, B, MPI_INT, R, B, MPI_INT, c),
         MPI_Ialltoall_c(sb, B, MPI_INT, R, B, MPI_INT, c, &req),
         MPI_Alltoall_init_c(sb, B, MPI_INT, R, B, MPI_INT, c, I, &req),
         MPI_Alltoall(sb, B, MPI_INT, R, B, MPI_INT, c));
  /* Alltoallv/w: every rank sends cnt[r] to each and receives cnt[q] from rank q. */
  {
    int *sc = malloc(sizeof(int) * p);
    MPI_Count* csc = malloc(sizeof(MPI_Count) * p);
    for (int i = 0; i < p; ++i) sc[i] = csc[i] = mine;
    TRIPLE("Alltoallv_c", MPI_Alltoallv_c(sb, csc, cdsp, MPI_INT, R, ccnt, cdsp, MPI_INT, c),
           MPI_Ialltoallv_c(sb, csc, cdsp, MPI_INT, R, ccnt, cdsp, MPI_INT, c, &req),
           MPI_Alltoallv_init_c(sb, csc, cdsp, MPI_INT, R, ccnt, cdsp, MPI_INT, c, I, &req),
           MPI_Alltoallv(sb, sc, dsp, MPI_INT, R, cnt, dsp, MPI_INT, c));
    TRIPLE("Alltoallw_c", MPI_Alltoallw_c(sb, csc, cwdsp, types, R, ccnt, cwdsp, types, c),
           MPI_Ialltoallw_c(sb, csc, cwdsp, types, R, ccnt, cwdsp, types, c, &req),
           MPI_Alltoallw_init_c(sb, csc, cwdsp, types, R, ccnt, cwdsp, types, c, I, &req),
           MPI_Alltoallw(sb, sc, wdsp, types, R, cnt, wdsp, types, c));
    free(sc), free(csc);
  }
  TRIPLE("Reduce_scatter_c", MPI_Reduce_scatter_c(sb, R, ccnt, MPI_INT, MPI_SUM, c),
         MPI_Ireduce_scatter_c(sb, R, ccnt, MPI_INT, MPI_SUM, c, &req),
         MPI_Reduce_scatter_init_c(sb, R, ccnt, MPI_INT, MPI_SUM, c, I, &req),
         MPI_Reduce_scatter(sb, R, cnt, MPI_INT, MPI_SUM, c));
  TRIPLE("Reduce_scatter_block_c", MPI_Reduce_scatter_block_c(sb, R, 3, MPI_INT, MPI_SUM, c),
         MPI_Ireduce_scatter_block_c(sb, R, 3, MPI_INT, MPI_SUM, c, &req),
         MPI_Reduce_scatter_block_init_c(sb, R, 3, MPI_INT, MPI_SUM, c, I, &req),
         MPI_Reduce_scatter_block(sb, R, 3, MPI_INT, MPI_SUM, c));

  /* MPI_IN_PLACE: every rank's input already in its receive buffer. */
  preload = -2;
  TRIPLE("Allreduce_c in place", MPI_Allreduce_c(MPI_IN_PLACE, R, 9, MPI_INT, MPI_SUM, c),
         MPI_Iallreduce_c(MPI_IN_PLACE, R, 9, MPI_INT, MPI_SUM, c, &req),
         MPI_Allreduce_init_c(MPI_IN_PLACE, R, 9, MPI_INT, MPI_SUM, c, I, &req),
         MPI_Allreduce(MPI_IN_PLACE, R, 9, MPI_INT, MPI_SUM, c));
  TRIPLE("Allgatherv_c in place", MPI_Allgatherv_c(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, R, ccnt, cdsp, MPI_INT, c),
         MPI_Iallgatherv_c(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, R, ccnt, cdsp, MPI_INT, c, &req),
         MPI_Allgatherv_init_c(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, R, ccnt, cdsp, MPI_INT, c, I, &req),
         MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, R, cnt, dsp, MPI_INT, c));
  TRIPLE("Reduce_scatter_c in place", MPI_Reduce_scatter_c(MPI_IN_PLACE, R, ccnt, MPI_INT, MPI_SUM, c),
         MPI_Ireduce_scatter_c(MPI_IN_PLACE, R, ccnt, MPI_INT, MPI_SUM, c, &req),
         MPI_Reduce_scatter_init_c(MPI_IN_PLACE, R, ccnt, MPI_INT, MPI_SUM, c, I, &req),
         MPI_Reduce_scatter(MPI_IN_PLACE, R, cnt, MPI_INT, MPI_SUM, c));
  preload = -1;

  /* A user op (int MPI_User_function; the MPI_User_function_c forms are
   * Op_create_c's), not commutative, on a derived type: rank order matters. */
  {
    MPI_Op op;
    MPI_Datatype pair;
    MPI_Op_create(compose, 0, &op);
    MPI_Type_contiguous(2, MPI_INT, &pair);
    MPI_Type_commit(&pair);
    TRIPLE("Allreduce_c (user op)", MPI_Allreduce_c(sb, R, 11, pair, op, c),
           MPI_Iallreduce_c(sb, R, 11, pair, op, c, &req), MPI_Allreduce_init_c(sb, R, 11, pair, op, c, I, &req),
           MPI_Allreduce(sb, R, 11, pair, op, c));
    /* and against the composition by hand, rank 0's map first */
    fill(99);
    CHECK(MPI_Allreduce_c(sb, rb, 11, pair, op, c) == MPI_SUCCESS, "Allreduce_c user op");
    for (int i = 0; i < 11; ++i) {
      long long a = 0, b = 0;
      for (int q = 0; q < p; ++q) {
        unsigned st = (unsigned)(99 * 7919 + q * 104729 + 17), v[2] = {0, 0};
        for (int k = 0; k <= 2 * i + 1; ++k) st = st * 1103515245u + 12345u, v[k & 1] = (st >> 8) % 100000u;
        if (q == 0) { /* (one rank: its own vector, untouched by the op) */
          a = v[0], b = v[1];
          continue;
        }
        const long long a2 = v[0] % MOD, b2 = v[1] % MOD;
        b = (a2 * (b % MOD) + b2) % MOD, a = a % MOD * a2 % MOD;
      }
      CHECK(rb[2 * i] == a && rb[2 * i + 1] == b, "Allreduce_c user op element %d: (%d, %d), want (%lld, %lld)", i,
            rb[2 * i], rb[2 * i + 1], a, b);
    }
    MPI_Type_free(&pair);
    MPI_Op_free(&op);
  }
  free(cnt), free(dsp), free(wdsp), free(ccnt), free(cdsp), free(cwdsp), free(types);
}

/* The intercommunicator collectives: group 0 (world's lower half) roots
 * the rooted ones at its local rank 0. */
static void inter(MPI_Comm ic, int group) {
  int rank, lsize, rsize;
  MPI_Comm_rank(ic, &rank);
  MPI_Comm_size(ic, &lsize);
  MPI_Comm_remote_size(ic, &rsize);
  const int root = group == 0 ? (rank == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
  const int m = lsize > rsize ? lsize : rsize;
  int *cnt = malloc(sizeof(int) * m), *dsp = malloc(sizeof(int) * m), *wdsp = malloc(sizeof(int) * m);
  MPI_Count* ccnt = malloc(sizeof(MPI_Count) * m);
  MPI_Aint *cdsp = malloc(sizeof(MPI_Aint) * m), *cwdsp = malloc(sizeof(MPI_Aint) * m);
  MPI_Datatype* types = malloc(sizeof(MPI_Datatype) * m);
  for (int i = 0; i < m; ++i) {
    cnt[i] = 2, dsp[i] = 3 * i + 1, wdsp[i] = dsp[i] * (int)sizeof(int);
    ccnt[i] = cnt[i], cdsp[i] = dsp[i], cwdsp[i] = wdsp[i], types[i] = MPI_INT;
  }
  const MPI_Info I = MPI_INFO_NULL;
  MPI_Count* crs = malloc(sizeof(MPI_Count) * lsize);
  int* irs = malloc(sizeof(int) * lsize);
  for (int i = 0; i < lsize; ++i) crs[i] = irs[i] = rsize; /* reduce_scatter: lsize * rsize in both groups */

  preload = group == 0 && rank == 0 ? me : -1;
  TRIPLE("inter Bcast_c", MPI_Bcast_c(R, 5, MPI_INT, root, ic), MPI_Ibcast_c(R, 5, MPI_INT, root, ic, &req),
         MPI_Bcast_init_c(R, 5, MPI_INT, root, ic, I, &req), MPI_Bcast(R, 5, MPI_INT, root, ic));
  preload = -1;
  TRIPLE("inter Reduce_c", MPI_Reduce_c(sb, R, 5, MPI_INT, MPI_SUM, root, ic),
         MPI_Ireduce_c(sb, R, 5, MPI_INT, MPI_SUM, root, ic, &req),
         MPI_Reduce_init_c(sb, R, 5, MPI_INT, MPI_SUM, root, ic, I, &req),
         MPI_Reduce(sb, R, 5, MPI_INT, MPI_SUM, root, ic));
  TRIPLE("inter Allreduce_c", MPI_Allreduce_c(sb, R, 5, MPI_INT, MPI_SUM, ic),
         MPI_Iallreduce_c(sb, R, 5, MPI_INT, MPI_SUM, ic, &req),
         MPI_Allreduce_init_c(sb, R, 5, MPI_INT, MPI_SUM, ic, I, &req), MPI_Allreduce(sb, R, 5, MPI_INT, MPI_SUM, ic));
  TRIPLE("inter Gather_c", MPI_Gather_c(sb, B, MPI_INT, R, B, MPI_INT, root, ic),
         MPI_Igather_c(sb, B, MPI_INT, R, B, MPI_INT, root, ic, &req),
         MPI_Gather_init_c(sb, B, MPI_INT, R, B, MPI_INT, root, ic, I, &req),
         MPI_Gather(sb, B, MPI_INT, R, B, MPI_INT, root, ic));
  TRIPLE("inter Gatherv_c", MPI_Gatherv_c(sb, 2, MPI_INT, R, ccnt, cdsp, MPI_INT, root, ic),
         MPI_Igatherv_c(sb, 2, MPI_INT, R, ccnt, cdsp, MPI_INT, root, ic, &req),
         MPI_Gatherv_init_c(sb, 2, MPI_INT, R, ccnt, cdsp, MPI_INT, root, ic, I, &req),
         MPI_Gatherv(sb, 2, MPI_INT, R, cnt, dsp, MPI_INT, root, ic));
  TRIPLE("inter Scatter_c", MPI_Scatter_c(sb, B, MPI_INT, R, B, MPI_INT, root, ic),
         MPI_Iscatter_c(sb, B, MPI_INT, R, B, MPI_INT, root, ic, &req),
         MPI_Scatter_init_c(sb, B, MPI_INT, R, B, MPI_INT, root, ic, I, &req),
         MPI_Scatter(sb, B, MPI_INT, R, B, MPI_INT, root, ic));
  TRIPLE("inter Scatterv_c", MPI_Scatterv_c(sb, ccnt, cdsp, MPI_INT, R, 2, MPI_INT, root, ic),
         MPI_Iscatterv_c(sb, ccnt, cdsp, MPI_INT, R, 2, MPI_INT, root, ic, &req),
         MPI_Scatterv_init_c(sb, ccnt, cdsp, MPI_INT, R, 2, MPI_INT, root, ic, I, &req),
         MPI_Scatterv(sb, cnt, dsp, MPI_INT, R, 2, MPI_INT, root, ic));
  TRIPLE("inter Allgather_c", MPI_Allgather_c(sb, B, MPI_INT, R, B, MPI_INT, ic),
         MPI_Iallgather_c(sb, B, MPI_INT, R, B, MPI_INT, ic, &req),
         MPI_Allgather_init_c(sb, B, MPI_INT, R, B, MPI_INT, ic, I, &req),
         MPI_Allgather(sb, B, MPI_INT, R, B, MPI_INT, ic));
  TRIPLE("inter Allgatherv_c", MPI_Allgatherv_c(sb, 2, MPI_INT, R, ccnt, cdsp, MPI_INT, ic),
         MPI_Iallgatherv_c(sb, 2, MPI_INT, R, ccnt, cdsp, MPI_INT, ic, &req),
         MPI_Allgatherv_init_c(sb, 2, MPI_INT, R, ccnt, cdsp, MPI_INT, ic, I, &req),
         MPI_Allgatherv(sb, 2, MPI_INT, R, cnt, dsp, MPI_INT, ic));
  TRIPLE("inter Alltoall_c", MPI_Alltoall_c(sb, B, MPI_INT, R, B, MPI_INT, ic),
         MPI_Ialltoall_c(sb, B, MPI_INT, R, B, MPI_INT, ic, &req),
         MPI_Alltoall_init_c(sb, B, MPI_INT, R, B, MPI_INT, ic, I, &req),
         MPI_Alltoall(sb, B, MPI_INT, R, B, MPI_INT, ic));
  TRIPLE("inter Alltoallv_c", MPI_Alltoallv_c(sb, ccnt, cdsp, MPI_INT, R, ccnt, cdsp, MPI_INT, ic),
         MPI_Ialltoallv_c(sb, ccnt, cdsp, MPI_INT, R, ccnt, cdsp, MPI_INT, ic, &req),
         MPI_Alltoallv_init_c(sb, ccnt, cdsp, MPI_INT, R, ccnt, cdsp, MPI_INT, ic, I, &req),
         MPI_Alltoallv(sb, cnt, dsp, MPI_INT, R, cnt, dsp, MPI_INT, ic));
  TRIPLE("inter Alltoallw_c", MPI_Alltoallw_c(sb, ccnt, cwdsp, types, R, ccnt, cwdsp, types, ic),
         MPI_Ialltoallw_c(sb, ccnt, cwdsp, types, R, ccnt, cwdsp, types, ic, &req),
         MPI_Alltoallw_init_c(sb, ccnt, cwdsp, types, R, ccnt, cwdsp, types, ic, I, &req),
         MPI_Alltoallw(sb, cnt, wdsp, types, R, cnt, wdsp, types, ic));
  TRIPLE("inter Reduce_scatter_c", MPI_Reduce_scatter_c(sb, R, crs, MPI_INT, MPI_SUM, ic),
         MPI_Ireduce_scatter_c(sb, R, crs, MPI_INT, MPI_SUM, ic, &req),
         MPI_Reduce_scatter_init_c(sb, R, crs, MPI_INT, MPI_SUM, ic, I, &req),
         MPI_Reduce_scatter(sb, R, irs, MPI_INT, MPI_SUM, ic));
  TRIPLE("inter Reduce_scatter_block_c", MPI_Reduce_scatter_block_c(sb, R, rsize, MPI_INT, MPI_SUM, ic),
         MPI_Ireduce_scatter_block_c(sb, R, rsize, MPI_INT, MPI_SUM, ic, &req),
         MPI_Reduce_scatter_block_init_c(sb, R, rsize, MPI_INT, MPI_SUM, ic, I, &req),
         MPI_Reduce_scatter_block(sb, R, rsize, MPI_INT, MPI_SUM, ic));
  /* Scan and Exscan are not defined on intercommunicators. */
  MPI_Comm_set_errhandler(ic, MPI_ERRORS_RETURN);
  char text[MPI_MAX_ERROR_STRING];
  CHECK(mt_error(MPI_Scan_c(sb, rb, 1, MPI_INT, MPI_SUM, ic), text) == MPI_ERR_COMM, "Scan_c on an intercomm: %s",
        text);
  free(cnt), free(dsp), free(wdsp), free(ccnt), free(cdsp), free(cwdsp), free(types), free(crs), free(irs);
}

/* The neighbourhood collectives on a periodic ring of the world. */
static void neighbours(void) {
  int dims[1] = {n}, periods[1] = {1};
  MPI_Comm c;
  MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &c);
  int cnt[2] = {3, 2}, dsp[2] = {1, 6};
  MPI_Count ccnt[2] = {3, 2};
  MPI_Aint cdsp[2] = {1, 6}, cwdsp[2] = {4, 24};
  MPI_Datatype types[2] = {MPI_INT, MPI_INT};
  const MPI_Info I = MPI_INFO_NULL;
  TRIPLE("Neighbor_allgather_c", MPI_Neighbor_allgather_c(sb, B, MPI_INT, R, B, MPI_INT, c),
         MPI_Ineighbor_allgather_c(sb, B, MPI_INT, R, B, MPI_INT, c, &req),
         MPI_Neighbor_allgather_init_c(sb, B, MPI_INT, R, B, MPI_INT, c, I, &req),
         MPI_Neighbor_allgather(sb, B, MPI_INT, R, B, MPI_INT, c));
  /* (Both neighbours send 3 elements: allgatherv's blocks are 3 each.) */
  ccnt[1] = cnt[1] = 3;
  TRIPLE("Neighbor_allgatherv_c", MPI_Neighbor_allgatherv_c(sb, 3, MPI_INT, R, ccnt, cdsp, MPI_INT, c),
         MPI_Ineighbor_allgatherv_c(sb, 3, MPI_INT, R, ccnt, cdsp, MPI_INT, c, &req),
         MPI_Neighbor_allgatherv_init_c(sb, 3, MPI_INT, R, ccnt, cdsp, MPI_INT, c, I, &req),
         MPI_Neighbor_allgatherv(sb, 3, MPI_INT, R, cnt, dsp, MPI_INT, c));
  TRIPLE("Neighbor_alltoall_c", MPI_Neighbor_alltoall_c(sb, B, MPI_INT, R, B, MPI_INT, c),
         MPI_Ineighbor_alltoall_c(sb, B, MPI_INT, R, B, MPI_INT, c, &req),
         MPI_Neighbor_alltoall_init_c(sb, B, MPI_INT, R, B, MPI_INT, c, I, &req),
         MPI_Neighbor_alltoall(sb, B, MPI_INT, R, B, MPI_INT, c));
  /* alltoallv/w: to the left 3 elements, to the right 2; so from the right
   * 3 and from the left 2 (receive block 0 is the left neighbour's). */
  MPI_Count scc[2] = {3, 2}, rcc[2] = {2, 3};
  int sci[2] = {3, 2}, rci[2] = {2, 3};
  TRIPLE("Neighbor_alltoallv_c", MPI_Neighbor_alltoallv_c(sb, scc, cdsp, MPI_INT, R, rcc, cdsp, MPI_INT, c),
         MPI_Ineighbor_alltoallv_c(sb, scc, cdsp, MPI_INT, R, rcc, cdsp, MPI_INT, c, &req),
         MPI_Neighbor_alltoallv_init_c(sb, scc, cdsp, MPI_INT, R, rcc, cdsp, MPI_INT, c, I, &req),
         MPI_Neighbor_alltoallv(sb, sci, dsp, MPI_INT, R, rci, dsp, MPI_INT, c));
  TRIPLE("Neighbor_alltoallw_c", MPI_Neighbor_alltoallw_c(sb, scc, cwdsp, types, R, rcc, cwdsp, types, c),
         MPI_Ineighbor_alltoallw_c(sb, scc, cwdsp, types, R, rcc, cwdsp, types, c, &req),
         MPI_Neighbor_alltoallw_init_c(sb, scc, cwdsp, types, R, rcc, cwdsp, types, c, I, &req),
         MPI_Neighbor_alltoallw(sb, sci, cwdsp, types, R, rci, cwdsp, types, c));
  MPI_Comm_free(&c);
}

/* Bad arguments: the class of the error, nothing run. */
static void errors(void) {
  char text[MPI_MAX_ERROR_STRING];
  MPI_Comm c;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
  CHECK(mt_error(MPI_Bcast_c(rb, -1, MPI_INT, 0, c), text) == MPI_ERR_COUNT, "Bcast_c count -1: %s", text);
  CHECK(mt_error(MPI_Allreduce_c(sb, rb, -5, MPI_INT, MPI_SUM, c), text) == MPI_ERR_COUNT, "Allreduce_c -5: %s", text);
  CHECK(mt_error(MPI_Allgatherv_c(sb, 1, MPI_INT, rb, NULL, NULL, MPI_INT, c), text) == MPI_ERR_ARG,
        "Allgatherv_c null arrays: %s", text);
  MPI_Count* neg = malloc(sizeof(MPI_Count) * n);
  MPI_Aint* d = calloc(n, sizeof(MPI_Aint));
  for (int i = 0; i < n; ++i) neg[i] = i == n - 1 ? -((MPI_Count)1 << 40) : 1;
  CHECK(mt_error(MPI_Reduce_scatter_c(sb, rb, neg, MPI_INT, MPI_SUM, c), text) == MPI_ERR_COUNT,
        "Reduce_scatter_c negative count: %s", text);
  MPI_Request r;
  CHECK(mt_error(MPI_Ialltoallv_c(sb, neg, d, MPI_INT, rb, neg, d, MPI_INT, c, &r), text) == MPI_ERR_COUNT,
        "Ialltoallv_c negative count: %s", text);
  CHECK(r == MPI_REQUEST_NULL, "failed Ialltoallv_c left a request");
  CHECK(mt_error(MPI_Gather_c(sb, 1, MPI_INT, rb, 1, MPI_INT, n, c), text) == MPI_ERR_ROOT, "Gather_c root n: %s",
        text);
  free(neg), free(d);
  MPI_Comm_free(&c);
}

/* Whether the host has `bytes` available (MemAvailable: free memory and
 * what the page cache can give back). */
static int memory_for(double bytes) {
  FILE* f = fopen("/proc/meminfo", "r");
  char line[256];
  double kib = -1;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "MemAvailable: %lf kB", &kib) == 1) break;
  if (f) fclose(f);
  return kib * 1024.0 > bytes;
}

/* At 2 ranks: a Bcast_c of 2^31 + 13 MPI_CHARs, and a Gatherv_c whose
 * block 1 lands at a displacement above INT_MAX. */
static void large(void) {
  const MPI_Count big = ((MPI_Count)1 << 31) + 13;
  int ok = memory_for(2.5 * (double)big); /* both ranks' buffers on this host, and a margin */
  MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  const size_t alloc = (size_t)big + 8192; /* (the gatherv's last block ends past big) */
  unsigned char* p = ok ? malloc(alloc) : NULL;
  int have = p != NULL;
  MPI_Allreduce(MPI_IN_PLACE, &have, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!have) {
    if (me == 0) printf("coll_large_count: large transfers skipped: less than %.0f bytes of memory available\n",
                        2.5 * (double)big);
    free(p);
    return;
  }
  /* Bcast_c from rank 1: a pattern, the bytes past INT_MAX included. */
  if (me == 1) mt_fill(p, (long)big, 5);
  else memset(p, 0, (size_t)big);
  CHECK(MPI_Bcast_c(p, big, MPI_CHAR, 1, MPI_COMM_WORLD) == MPI_SUCCESS, "Bcast_c of 2^31 + 13 chars");
  const long bad = mt_check(p, (long)big, 5);
  CHECK(bad < 0, "Bcast_c of 2^31 + 13 chars: byte %ld differs", bad);
  /* Gatherv_c at root 0 into p: rank 0's block at 7, rank 1's at 2^31 + 3
   * (above INT_MAX), 4096 chars each; every other byte untouched. */
  const MPI_Count cnt[2] = {4096, 4096};
  const MPI_Aint dsp[2] = {7, ((MPI_Aint)1 << 31) + 3};
  unsigned char mine[4096];
  mt_fill(mine, 4096, 40 + me);
  if (me == 0) memset(p, 0xab, alloc);
  CHECK(MPI_Gatherv_c(mine, 4096, MPI_CHAR, p, cnt, dsp, MPI_CHAR, 0, MPI_COMM_WORLD) == MPI_SUCCESS,
        "Gatherv_c with a displacement above INT_MAX");
  if (me == 0) {
    CHECK(mt_check(p + dsp[0], 4096, 40) < 0, "Gatherv_c: rank 0's block");
    CHECK(mt_check(p + dsp[1], 4096, 41) < 0, "Gatherv_c: rank 1's block, above INT_MAX");
    const MPI_Aint edges[] = {0, dsp[0] - 1, dsp[0] + 4096, dsp[1] - 1, dsp[1] + 4096, (MPI_Aint)alloc - 1};
    for (int e = 0; e < 6; ++e)
      CHECK(p[edges[e]] == 0xab, "Gatherv_c wrote outside its blocks: byte %lld is %d", (long long)edges[e],
            p[edges[e]]);
  }
  free(p);
}

int main(int argc, char** argv) {
  mt_start("coll_large_count", &argc, &argv);
  me = mt_rank, n = mt_size;
  cap = (size_t)(16 * n * n + 64);
  sb = malloc(sizeof(int) * cap), rb = malloc(sizeof(int) * cap), ref = malloc(sizeof(int) * cap);
  intra(MPI_COMM_WORLD, n, me);
  neighbours();
  if (n >= 2) {
    const int lowsize = n / 2, low = me < lowsize;
    MPI_Comm local, ic;
    MPI_Comm_split(MPI_COMM_WORLD, low, me, &local);
    MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, low ? lowsize : 0, 9, &ic);
    inter(ic, low ? 0 : 1);
    MPI_Comm_free(&ic);
    MPI_Comm_free(&local);
  }
  errors();
  if (n == 2) large();
  free(sb), free(rb), free(ref);
  return mt_pass();
}
