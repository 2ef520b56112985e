/* Persistent collectives replayed (MPI 4.1 6.13): the schedule is built at
 * init and replayed at each MPI_Start, so what must change between starts
 * is the data only. Checks, against the blocking forms or the expected
 * values: new send data before each start (contiguous, a derived send
 * type, a derived type in place), sizes that take every allreduce
 * algorithm (8 B to 1 MiB), 1000 starts of a small allreduce, two requests
 * on one communicator started in the same order and completed in the
 * other, persistent and non-blocking collectives interleaved, Startall of
 * several kinds, free while inactive and while active, an
 * intercommunicator, and argument errors reported by the _init call.
 * Any number of ranks. */
#include "mpitest.h"

static int val(int iter, int rank, int i) { return (iter * 131 + rank * 1009 + i * 7 + 1) % 100003; }

static void finish(MPI_Request* r, const char* what) {
  MPI_Status st;
  CHECK(MPI_Wait(r, &st) == MPI_SUCCESS, "%s: Wait failed", what);
  CHECK(*r != MPI_REQUEST_NULL, "%s: persistent request released by Wait", what);
}

static long sum_of(int it, int n, int i) {
  long s = 0;
  for (int p = 0; p < n; ++p) s += val(it, p, i);
  return s;
}

int main(int argc, char** argv) {
  mt_start("coll_persistent_replay", &argc, &argv);
  const int n = mt_size, me = mt_rank;
  const MPI_Comm w = MPI_COMM_WORLD;
  MPI_Request r;

  /* Every allreduce size class (line, slot, big slot, engine; recursive
   * doubling and Rabenseifner), 4 starts each with new data. */
  {
    const int counts[] = {2, 256, 16384, 262144}; /* 8 B, 1 KiB, 64 KiB, 1 MiB of int */
    for (int k = 0; k < 4; ++k) {
      const int cnt = counts[k];
      int *sb = malloc(sizeof(int) * cnt), *rb = malloc(sizeof(int) * cnt), *ref = malloc(sizeof(int) * cnt);
      CHECK(MPI_Allreduce_init(sb, rb, cnt, MPI_INT, MPI_SUM, w, MPI_INFO_NULL, &r) == MPI_SUCCESS, "init");
      for (int it = 0; it < 4; ++it) {
        for (int i = 0; i < cnt; ++i) sb[i] = val(it + k, me, i), rb[i] = -1;
        MPI_Start(&r);
        finish(&r, "allreduce sizes");
        MPI_Allreduce(sb, ref, cnt, MPI_INT, MPI_SUM, w);
        for (int i = 0; i < cnt; ++i)
          CHECK(rb[i] == ref[i], "allreduce of %d ints start %d: [%d] = %d, blocking %d", cnt, it, i, rb[i], ref[i]);
      }
      MPI_Request_free(&r);
      free(sb), free(rb), free(ref);
    }
  }

  /* 1000 starts of an 8-byte allreduce, each with new data. */
  {
    int sb[2], rb[2];
    CHECK(MPI_Allreduce_init(sb, rb, 2, MPI_INT, MPI_SUM, w, MPI_INFO_NULL, &r) == MPI_SUCCESS, "init");
    for (int it = 0; it < 1000; ++it) {
      sb[0] = val(it, me, 0), sb[1] = val(it, me, 1);
      MPI_Start(&r);
      finish(&r, "1000 starts");
      CHECK(rb[0] == sum_of(it, n, 0) && rb[1] == sum_of(it, n, 1), "start %d: %d %d, expected %ld %ld", it, rb[0],
            rb[1], sum_of(it, n, 0), sum_of(it, n, 1));
    }
    MPI_Request_free(&r);
  }

  /* A derived send type: packed at each start (the buffer's contents
   * then), and a derived type in place (the receive buffer is input). */
  {
    enum { B = 6 };
    MPI_Datatype every_other;
    MPI_Type_vector(B, 1, 2, MPI_INT, &every_other);
    MPI_Type_commit(&every_other);
    int sb[2 * B], rb[2 * B], ip[2 * B];
    CHECK(MPI_Allreduce_init(sb, rb, 1, every_other, MPI_SUM, w, MPI_INFO_NULL, &r) == MPI_SUCCESS, "init");
    MPI_Request rip;
    CHECK(MPI_Allreduce_init(MPI_IN_PLACE, ip, 1, every_other, MPI_MAX, w, MPI_INFO_NULL, &rip) == MPI_SUCCESS,
          "init in place");
    MPI_Request rg;
    int g[B * 64];
    CHECK(MPI_Gather_init(sb, 1, every_other, g, B, MPI_INT, 0, w, MPI_INFO_NULL, &rg) == MPI_SUCCESS, "gather init");
    for (int it = 0; it < 5; ++it) {
      for (int i = 0; i < 2 * B; ++i) {
        sb[i] = (i % 2) ? -5 : val(it, me, i / 2);
        rb[i] = -9;
        ip[i] = (i % 2) ? -3 : val(it, me, i / 2) + me * 100;
      }
      MPI_Start(&r);
      finish(&r, "derived allreduce");
      MPI_Start(&rip);
      finish(&rip, "derived in place");
      MPI_Start(&rg);
      finish(&rg, "derived gather");
      for (int i = 0; i < 2 * B; ++i) {
        if (i % 2) {
          CHECK(rb[i] == -9, "derived allreduce start %d wrote the gap [%d] = %d", it, i, rb[i]);
          CHECK(ip[i] == -3, "derived in place start %d wrote the gap [%d] = %d", it, i, ip[i]);
          continue;
        }
        CHECK(rb[i] == sum_of(it, n, i / 2), "derived allreduce start %d: [%d] = %d, expected %ld", it, i, rb[i],
              sum_of(it, n, i / 2));
        int mx = val(it, 0, i / 2);
        for (int p = 1; p < n; ++p)
          if (val(it, p, i / 2) + p * 100 > mx) mx = val(it, p, i / 2) + p * 100;
        CHECK(ip[i] == mx, "derived in place start %d: [%d] = %d, expected %d", it, i, ip[i], mx);
      }
      if (me == 0 && n <= 64)
        for (int p = 0; p < n; ++p)
          for (int i = 0; i < B; ++i)
            CHECK(g[p * B + i] == val(it, p, i), "derived gather start %d: rank %d elt %d = %d", it, p, i,
                  g[p * B + i]);
    }
    MPI_Request_free(&r);
    MPI_Request_free(&rip);
    MPI_Request_free(&rg);
    MPI_Type_free(&every_other);
  }

  /* Two requests on one communicator, started in the same order on every
   * rank, completed in the other order; then interleaved with
   * non-blocking collectives started between them. */
  {
    int sa[4], ra[4], sb2[4], rb2[4], ia[4], ib[4];
    MPI_Request a, b, q[2];
    MPI_Allreduce_init(sa, ra, 4, MPI_INT, MPI_SUM, w, MPI_INFO_NULL, &a);
    MPI_Bcast_init(rb2, 4, MPI_INT, n - 1, w, MPI_INFO_NULL, &b);
    for (int it = 0; it < 20; ++it) {
      for (int i = 0; i < 4; ++i) {
        sa[i] = val(it, me, i);
        rb2[i] = me == n - 1 ? val(it, 77, i) : -1;
        sb2[i] = val(it + 1, me, i);
        ib[i] = me == 0 ? val(it, 55, i) : -1;
      }
      MPI_Start(&a);
      MPI_Iallreduce(sb2, ia, 4, MPI_INT, MPI_SUM, w, &q[0]);
      MPI_Start(&b);
      MPI_Ibcast(ib, 4, MPI_INT, 0, w, &q[1]);
      finish(&b, "second request");
      finish(&a, "first request");
      MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
      for (int i = 0; i < 4; ++i) {
        CHECK(ra[i] == sum_of(it, n, i), "interleaved allreduce start %d: %d", it, ra[i]);
        CHECK(rb2[i] == val(it, 77, i), "interleaved bcast start %d: %d", it, rb2[i]);
        CHECK(ia[i] == sum_of(it + 1, n, i), "Iallreduce between starts %d: %d", it, ia[i]);
        CHECK(ib[i] == val(it, 55, i), "Ibcast between starts %d: %d", it, ib[i]);
      }
    }
    MPI_Request_free(&a);
    MPI_Request_free(&b);
  }

  /* Startall of several kinds (barrier, reduce, scan, alltoall), Testall. */
  {
    enum { K = 4 };
    int s[3], red[3], scn[3], *at = malloc(sizeof(int) * n), *ar = malloc(sizeof(int) * n);
    MPI_Request rs[K];
    MPI_Barrier_init(w, MPI_INFO_NULL, &rs[0]);
    MPI_Reduce_init(s, red, 3, MPI_INT, MPI_MAX, 0, w, MPI_INFO_NULL, &rs[1]);
    MPI_Scan_init(s, scn, 3, MPI_INT, MPI_SUM, w, MPI_INFO_NULL, &rs[2]);
    MPI_Alltoall_init(at, 1, MPI_INT, ar, 1, MPI_INT, w, MPI_INFO_NULL, &rs[3]);
    for (int it = 0; it < 10; ++it) {
      for (int i = 0; i < 3; ++i) s[i] = val(it, me, i);
      for (int p = 0; p < n; ++p) at[p] = val(it, me, p), ar[p] = -1;
      CHECK(MPI_Startall(K, rs) == MPI_SUCCESS, "Startall");
      int flag = 0;
      while (!flag) MPI_Testall(K, rs, &flag, MPI_STATUSES_IGNORE);
      for (int i = 0; i < 3; ++i) {
        long pre = 0;
        int mx = val(it, 0, i);
        for (int p = 0; p <= me; ++p) pre += val(it, p, i);
        for (int p = 0; p < n; ++p)
          if (val(it, p, i) > mx) mx = val(it, p, i);
        CHECK(scn[i] == pre, "startall scan %d: %d, expected %ld", it, scn[i], pre);
        if (me == 0) CHECK(red[i] == mx, "startall reduce %d: %d, expected %d", it, red[i], mx);
      }
      for (int p = 0; p < n; ++p) CHECK(ar[p] == val(it, p, me), "startall alltoall %d from %d: %d", it, p, ar[p]);
    }
    for (int i = 0; i < K; ++i) MPI_Request_free(&rs[i]);
    free(at), free(ar);
  }

  /* Freed while inactive (never started, and after starts), and while
   * active: it completes in the background; the collectives after it
   * (started in the same order everywhere) are unaffected. */
  {
    int s[4], rv[4], t[4];
    MPI_Allreduce_init(s, rv, 4, MPI_INT, MPI_SUM, w, MPI_INFO_NULL, &r);
    MPI_Request_free(&r);
    CHECK(r == MPI_REQUEST_NULL, "free of an inactive request did not null it");
    static int fs[4], frv[4];
    for (int i = 0; i < 4; ++i) fs[i] = val(3, me, i);
    MPI_Allreduce_init(fs, frv, 4, MPI_INT, MPI_SUM, w, MPI_INFO_NULL, &r);
    MPI_Start(&r);
    finish(&r, "before the free while active");
    MPI_Start(&r);
    CHECK(MPI_Request_free(&r) == MPI_SUCCESS && r == MPI_REQUEST_NULL, "free while active");
    for (int it = 0; it < 5; ++it) {
      for (int i = 0; i < 4; ++i) s[i] = val(it, me, i);
      MPI_Allreduce(s, t, 4, MPI_INT, MPI_SUM, w);
      for (int i = 0; i < 4; ++i) CHECK(t[i] == sum_of(it, n, i), "allreduce after a freed active one: %d", t[i]);
    }
    MPI_Barrier(w);
    (void)rv;
  }

  /* An intercommunicator: the two halves (even, odd ranks). */
  if (n >= 2) {
    MPI_Comm half, inter;
    const int color = me % 2;
    MPI_Comm_split(w, color, me, &half);
    MPI_Intercomm_create(half, 0, w, color ? 0 : 1, 42, &inter);
    int rsize = 0;
    MPI_Comm_remote_size(inter, &rsize);
    int s[3], rv[3], ref[3], bb[3];
    MPI_Request ra, rb3;
    MPI_Allreduce_init(s, rv, 3, MPI_INT, MPI_SUM, inter, MPI_INFO_NULL, &ra);
    int hrank = 0;
    MPI_Comm_rank(half, &hrank);
    /* Bcast from rank 0 of the even group to the odd group. */
    const int root = color == 0 ? (hrank == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
    MPI_Bcast_init(bb, 3, MPI_INT, root, inter, MPI_INFO_NULL, &rb3);
    for (int it = 0; it < 4; ++it) {
      for (int i = 0; i < 3; ++i) s[i] = val(it, me, i), bb[i] = color == 0 && hrank == 0 ? val(it, 99, i) : -1;
      MPI_Start(&ra);
      MPI_Start(&rb3);
      finish(&rb3, "inter bcast");
      finish(&ra, "inter allreduce");
      MPI_Allreduce(s, ref, 3, MPI_INT, MPI_SUM, inter);
      for (int i = 0; i < 3; ++i) {
        CHECK(rv[i] == ref[i], "inter allreduce start %d: %d, blocking %d", it, rv[i], ref[i]);
        if (color == 1) CHECK(bb[i] == val(it, 99, i), "inter bcast start %d: %d", it, bb[i]);
      }
    }
    MPI_Request_free(&ra);
    MPI_Request_free(&rb3);
    MPI_Comm_free(&inter);
    MPI_Comm_free(&half);
  }

  /* Argument errors are the _init call's, with their class. */
  {
    MPI_Comm_set_errhandler(w, MPI_ERRORS_RETURN);
    char text[MPI_MAX_ERROR_STRING];
    int s[2], rv[2];
    int e = MPI_Allreduce_init(s, rv, -1, MPI_INT, MPI_SUM, w, MPI_INFO_NULL, &r);
    CHECK(mt_error(e, text) == MPI_ERR_COUNT, "negative count gave %d (%s)", e, text);
    e = MPI_Bcast_init(s, 2, MPI_INT, n, w, MPI_INFO_NULL, &r);
    CHECK(mt_error(e, text) == MPI_ERR_ROOT, "bad root gave %d (%s)", e, text);
    e = MPI_Reduce_init(s, rv, 2, MPI_INT, MPI_OP_NULL, 0, w, MPI_INFO_NULL, &r);
    CHECK(mt_error(e, text) == MPI_ERR_OP, "null op gave %d (%s)", e, text);
    e = MPI_Gather_init(s, 2, MPI_DATATYPE_NULL, rv, 2, MPI_INT, 0, w, MPI_INFO_NULL, &r);
    CHECK(mt_error(e, text) == MPI_ERR_TYPE, "null type gave %d (%s)", e, text);
    /* A collective after failed inits still matches on every rank. */
    s[0] = me;
    MPI_Allreduce_init(s, rv, 1, MPI_INT, MPI_SUM, w, MPI_INFO_NULL, &r);
    MPI_Start(&r);
    finish(&r, "after errors");
    CHECK(rv[0] == n * (n - 1) / 2, "allreduce after errors: %d", rv[0]);
    MPI_Request_free(&r);
    MPI_Comm_set_errhandler(w, MPI_ERRORS_ARE_FATAL);
  }

  /* Persistent collectives match by their inits: members may start them in
   * different orders (even ranks one way, odd ranks the other), several
   * times, with an Allreduce of each size class among them. */
  {
    int a = -1, x[2], y[2], bx[2048], by[2048], ox[2048], oy[2048];
    MPI_Request q[4];
    MPI_Bcast_init(&a, 1, MPI_INT, 0, w, MPI_INFO_NULL, &q[0]);
    MPI_Barrier_init(w, MPI_INFO_NULL, &q[1]);
    MPI_Allreduce_init(x, y, 2, MPI_INT, MPI_SUM, w, MPI_INFO_NULL, &q[2]);
    MPI_Allreduce_init(bx, by, 2048, MPI_INT, MPI_MAX, w, MPI_INFO_NULL, &q[3]);
    for (int it = 0; it < 5; ++it) {
      a = me == 0 ? 42 + it : -1;
      x[0] = me + it, x[1] = 1;
      for (int i = 0; i < 2048; ++i) bx[i] = (me * 7 + i + it) % 1000;
      for (int i = 0; i < 2048; ++i) {
        ox[i] = 0;
        for (int p = 0; p < n; ++p) ox[i] = (p * 7 + i + it) % 1000 > ox[i] ? (p * 7 + i + it) % 1000 : ox[i];
      }
      if (me % 2 == 0)
        for (int k = 0; k < 4; ++k) MPI_Start(&q[k]);
      else
        for (int k = 3; k >= 0; --k) MPI_Start(&q[k]);
      CHECK(MPI_Waitall(4, q, MPI_STATUSES_IGNORE) == MPI_SUCCESS, "out-of-order starts %d", it);
      CHECK(a == 42 + it, "bcast started out of order: %d", a);
      CHECK(y[0] == n * (n - 1) / 2 + n * it && y[1] == n, "allreduce started out of order: %d %d", y[0], y[1]);
      for (int i = 0; i < 2048; ++i) oy[i] = by[i] == ox[i];
      for (int i = 0; i < 2048; ++i) CHECK(oy[i], "max allreduce started out of order [%d]: %d != %d", i, by[i], ox[i]);
    }
    for (int k = 0; k < 4; ++k) MPI_Request_free(&q[k]);
  }

  return mt_pass();
}
