/* Collectives on non-contiguous datatypes (packed into temporaries and
 * unpacked at the end, also by non-blocking collectives):
 *  A. always: the pair types whose C layout has padding (MPI_DOUBLE_INT,
 *     MPI_SHORT_INT, MPI_LONG_DOUBLE_INT) in Bcast, Gather, Allgather,
 *     Alltoall, Scatterv, Allreduce/Reduce_scatter_block/Scan with
 *     MAXLOC/MINLOC, blocking and not;
 *  B. a vector of ints and a struct {int; double;} in Bcast, Allgather, Alltoall
 *     (vector against contiguous), Allreduce with MPI_SUM on the vector,
 *     a user op on the vector and on the struct, and MPI_ERR_OP for a
 *     predefined op on the struct (mixed basic types). */
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"

typedef struct { double v; int i; } double_int;
typedef struct { short v; int i; } short_int;
typedef struct { int a; double b; } rec;

static void pairs(int cnt) {
  int n = mt_size, r = mt_rank;
  MPI_Comm w = MPI_COMM_WORLD;
  long big = (long)cnt * n;
  double_int* a = malloc(sizeof(double_int) * (big + 1));
  double_int* b = malloc(sizeof(double_int) * (big + 1));
  /* Bcast from every root. */
  for (int root = 0; root < n; ++root) {
    for (int i = 0; i < cnt; ++i) {
      a[i].v = r == root ? root + i * 0.25 : -1;
      a[i].i = r == root ? i - root : -1;
    }
    CHECK(MPI_Bcast(a, cnt, MPI_DOUBLE_INT, root, w) == MPI_SUCCESS, "bcast");
    for (int i = 0; i < cnt; ++i) CHECK(a[i].v == root + i * 0.25 && a[i].i == i - root, "bcast [%d]", i);
  }
  /* Gather (root n-1) and Allgather. */
  for (int i = 0; i < cnt; ++i) {
    a[i].v = r * 1000 + i;
    a[i].i = r - i;
  }
  CHECK(MPI_Gather(a, cnt, MPI_DOUBLE_INT, b, cnt, MPI_DOUBLE_INT, n - 1, w) == MPI_SUCCESS, "gather");
  if (r == n - 1)
    for (int p = 0; p < n; ++p)
      for (int i = 0; i < cnt; ++i)
        CHECK(b[(long)p * cnt + i].v == p * 1000 + i && b[(long)p * cnt + i].i == p - i, "gather %d [%d]", p, i);
  memset(b, 0, sizeof(double_int) * big);
  MPI_Request q;
  CHECK(MPI_Iallgather(a, cnt, MPI_DOUBLE_INT, b, cnt, MPI_DOUBLE_INT, w, &q) == MPI_SUCCESS, "iallgather");
  CHECK(MPI_Wait(&q, MPI_STATUS_IGNORE) == MPI_SUCCESS, "wait");
  for (int p = 0; p < n; ++p)
    for (int i = 0; i < cnt; ++i)
      CHECK(b[(long)p * cnt + i].v == p * 1000 + i && b[(long)p * cnt + i].i == p - i, "allgather %d [%d]", p, i);
  /* Alltoall. */
  for (int p = 0; p < n; ++p)
    for (int i = 0; i < cnt; ++i) {
      a[(long)p * cnt + i].v = r * 100 + p + i * 0.5;
      a[(long)p * cnt + i].i = p * 100 + r;
    }
  CHECK(MPI_Alltoall(a, cnt, MPI_DOUBLE_INT, b, cnt, MPI_DOUBLE_INT, w) == MPI_SUCCESS, "alltoall");
  for (int p = 0; p < n; ++p)
    for (int i = 0; i < cnt; ++i)
      CHECK(b[(long)p * cnt + i].v == p * 100 + r + i * 0.5 && b[(long)p * cnt + i].i == r * 100 + p,
            "alltoall from %d [%d]", p, i);
  /* Allreduce MAXLOC: the value peaks at rank i % n, ties elsewhere at 0. */
  for (int i = 0; i < cnt; ++i) {
    a[i].v = (r == i % n) ? 7.5 : 0;
    a[i].i = r;
  }
  CHECK(MPI_Allreduce(a, b, cnt, MPI_DOUBLE_INT, MPI_MAXLOC, w) == MPI_SUCCESS, "allreduce maxloc");
  for (int i = 0; i < cnt; ++i) CHECK(b[i].v == 7.5 && b[i].i == i % n, "maxloc [%d] = (%g,%d)", i, b[i].v, b[i].i);
  CHECK(MPI_Iallreduce(a, b, cnt, MPI_DOUBLE_INT, MPI_MINLOC, w, &q) == MPI_SUCCESS, "iallreduce minloc");
  CHECK(MPI_Wait(&q, MPI_STATUS_IGNORE) == MPI_SUCCESS, "wait");
  for (int i = 0; i < cnt; ++i) {
    int want = (n == 1) ? 0 : (i % n == 0 ? 1 : 0); /* lowest rank holding 0 */
    CHECK(b[i].v == (n == 1 ? 7.5 : 0) && b[i].i == want, "minloc [%d] = (%g,%d)", i, b[i].v, b[i].i);
  }
  /* Scan MAXLOC in place. */
  for (int i = 0; i < cnt; ++i) {
    b[i].v = r % 2;
    b[i].i = r;
  }
  CHECK(MPI_Scan(MPI_IN_PLACE, b, cnt, MPI_DOUBLE_INT, MPI_MAXLOC, w) == MPI_SUCCESS, "scan maxloc");
  for (int i = 0; i < cnt; ++i)
    CHECK(b[i].v == (r >= 1 ? 1 : 0) && b[i].i == (r >= 1 ? 1 : 0), "scan maxloc [%d] = (%g,%d)", i, b[i].v, b[i].i);
  free(a);
  free(b);

  /* MPI_SHORT_INT through Scatterv and Reduce_scatter_block. */
  short_int* s = malloc(sizeof(short_int) * (big + 1));
  short_int* d = malloc(sizeof(short_int) * (cnt + 1));
  int *sc = malloc(sizeof(int) * n), *dp = malloc(sizeof(int) * n);
  for (int p = 0; p < n; ++p) {
    sc[p] = cnt;
    dp[p] = (n - 1 - p) * cnt;
  }
  for (int p = 0; p < n; ++p)
    for (int i = 0; i < cnt; ++i) {
      s[dp[p] + i].v = (short)(p * 10 + i % 100);
      s[dp[p] + i].i = i;
    }
  CHECK(MPI_Scatterv(s, sc, dp, MPI_SHORT_INT, d, cnt, MPI_SHORT_INT, 0, w) == MPI_SUCCESS, "scatterv");
  for (int i = 0; i < cnt; ++i) CHECK(d[i].v == (short)(r * 10 + i % 100) && d[i].i == i, "scatterv [%d]", i);
  for (long i = 0; i < big; ++i) {
    s[i].v = (short)((i + r) % 5);
    s[i].i = r;
  }
  CHECK(MPI_Reduce_scatter_block(s, d, cnt, MPI_SHORT_INT, MPI_MINLOC, w) == MPI_SUCCESS, "rsb minloc");
  for (int i = 0; i < cnt; ++i) {
    long g = (long)r * cnt + i;
    int bestv = 99, bestr = -1;
    for (int p = 0; p < n; ++p)
      if ((g + p) % 5 < bestv) {
        bestv = (int)((g + p) % 5);
        bestr = p;
      }
    CHECK(d[i].v == bestv && d[i].i == bestr, "rsb minloc [%d] = (%d,%d) want (%d,%d)", i, d[i].v, d[i].i, bestv,
          bestr);
  }
  free(s);
  free(d);
  free(sc);
  free(dp);
}

/* User op on the vector type: element-wise max of |x| (checks that the
 * function sees the vector layout: only the data positions are read). */
static void absmax_vec(void* in, void* inout, int* len, MPI_Datatype* t) {
  (void)t;
  int* x = in;
  int* y = inout;
  /* one element of the vector type = 4 blocks of 2 ints with stride 3 */
  for (int e = 0; e < *len; ++e)
    for (int b = 0; b < 4; ++b)
      for (int k = 0; k < 2; ++k) {
        int* py = &y[e * 11 + b * 3 + k];
        int vx = abs(x[e * 11 + b * 3 + k]);
        if (vx > abs(*py)) *py = vx;
        else *py = abs(*py);
      }
}
static void rec_op(void* in, void* inout, int* len, MPI_Datatype* t) {
  (void)t;
  rec* x = in;
  rec* y = inout;
  for (int k = 0; k < *len; ++k) {
    /* Decimal concatenation (associative, not commutative): the digits
     * come out in rank order. */
    int scale = 10;
    while (scale <= y[k].a) scale *= 10;
    y[k].a = x[k].a * scale + y[k].a;
    y[k].b += x[k].b;
  }
}

static void derived(void) {
  int n = mt_size, r = mt_rank;
  MPI_Comm w = MPI_COMM_WORLD;
  MPI_Datatype vec, st;
  /* 4 blocks of 2 ints, stride 3: extent 11 ints (last block ends at 9+2). */
  CHECK(MPI_Type_vector(4, 2, 3, MPI_INT, &vec) == MPI_SUCCESS, "vector");
  CHECK(MPI_Type_commit(&vec) == MPI_SUCCESS, "commit");
  const int cnts[] = {1, 3, 2000}; /* 2000 x 8 ints = 64 KB of data per rank */
  for (int k = 0; k < 3; ++k) {
    int cnt = cnts[k];
    long ints = (long)cnt * 11 * n + 16;
    int* a = malloc(sizeof(int) * ints);
    int* b = malloc(sizeof(int) * ints);
    for (long i = 0; i < ints; ++i) a[i] = -1;
    if (r == 0)
      for (long i = 0; i < (long)cnt * 11; ++i) a[i] = (int)i;
    CHECK(MPI_Bcast(a, cnt, vec, 0, w) == MPI_SUCCESS, "bcast vector");
    for (long i = 0; i < (long)cnt * 11; ++i) {
      int data = (i % 11) % 3 < 2; /* data at 0,1 3,4 6,7 9,10 */
      CHECK(a[i] == (data || r == 0 ? (int)i : -1), "bcast vector [%ld] = %d", i, a[i]);
    }
    /* Allgather of vectors into contiguous ints. */
    for (long i = 0; i < ints; ++i) a[i] = r * 100000 + (int)i;
    CHECK(MPI_Allgather(a, cnt, vec, b, cnt * 8, MPI_INT, w) == MPI_SUCCESS, "allgather vector");
    for (int p = 0; p < n; ++p)
      for (int e = 0; e < cnt; ++e)
        for (int j = 0; j < 8; ++j) {
          int off = e * 11 + (j / 2) * 3 + j % 2;
          CHECK(b[((long)p * cnt + e) * 8 + j] == p * 100000 + off, "allgather vector from %d elem %d [%d]", p, e, j);
        }
    /* Alltoall: contiguous ints in, vectors out. */
    for (long i = 0; i < ints; ++i) b[i] = -2;
    for (int p = 0; p < n; ++p)
      for (int j = 0; j < cnt * 8; ++j) a[(long)p * cnt * 8 + j] = r * 1000000 + p * 10000 + j;
    CHECK(MPI_Alltoall(a, cnt * 8, MPI_INT, b, cnt, vec, w) == MPI_SUCCESS, "alltoall to vector");
    for (int p = 0; p < n; ++p)
      for (int e = 0; e < cnt; ++e)
        for (int j = 0; j < 8; ++j) {
          long off = ((long)p * cnt + e) * 11 + (j / 2) * 3 + j % 2;
          CHECK(b[off] == p * 1000000 + r * 10000 + e * 8 + j, "alltoall vector from %d elem %d [%d]", p, e, j);
        }
    CHECK(b[2] == -2, "alltoall wrote a hole of the vector");
    /* Allreduce SUM on the vector, and a user op. */
    for (long i = 0; i < ints; ++i) a[i] = (int)(i % 97) * (r + 1);
    for (long i = 0; i < ints; ++i) b[i] = -3;
    CHECK(MPI_Allreduce(a, b, cnt, vec, MPI_SUM, w) == MPI_SUCCESS, "allreduce vector");
    for (int e = 0; e < cnt; ++e)
      for (int j = 0; j < 8; ++j) {
        long off = (long)e * 11 + (j / 2) * 3 + j % 2;
        CHECK(b[off] == (int)(off % 97) * n * (n + 1) / 2, "allreduce vector [%ld] = %d", off, b[off]);
      }
    CHECK(b[2] == -3, "allreduce wrote a hole of the vector");
    MPI_Op absmax;
    MPI_Op_create(absmax_vec, 1, &absmax);
    for (long i = 0; i < ints; ++i) a[i] = (i % 2 ? -1 : 1) * (int)(i % 13) * (r + 1);
    CHECK(MPI_Allreduce(a, b, cnt, vec, absmax, w) == MPI_SUCCESS, "allreduce vector user op");
    for (int e = 0; e < cnt; ++e)
      for (int j = 0; j < 8; ++j) {
        long off = (long)e * 11 + (j / 2) * 3 + j % 2;
        int want = n == 1 ? a[off] : (int)(off % 13) * n;
        CHECK(b[off] == want, "absmax vector [%ld] = %d want %d", off, b[off], want);
      }
    MPI_Op_free(&absmax);
    free(a);
    free(b);
  }
  CHECK(MPI_Type_free(&vec) == MPI_SUCCESS, "free vector");

  /* struct {int a; double b;} */
  int bl[2] = {1, 1};
  MPI_Aint disp[2] = {0, 8};
  MPI_Datatype tys[2] = {MPI_INT, MPI_DOUBLE};
  CHECK(MPI_Type_create_struct(2, bl, disp, tys, &st) == MPI_SUCCESS, "struct");
  CHECK(MPI_Type_commit(&st) == MPI_SUCCESS, "commit struct");
  rec x[3], g[3 * 64];
  for (int i = 0; i < 3; ++i) {
    x[i].a = r + 1;
    x[i].b = r * 0.5 + i;
  }
  CHECK(MPI_Gather(x, 3, st, g, 3, st, 0, w) == MPI_SUCCESS, "gather struct");
  if (r == 0)
    for (int p = 0; p < n; ++p)
      for (int i = 0; i < 3; ++i) CHECK(g[p * 3 + i].a == p + 1 && g[p * 3 + i].b == p * 0.5 + i, "gather struct");
  MPI_Op ro;
  MPI_Op_create(rec_op, 0, &ro);
  rec y[3];
  CHECK(MPI_Allreduce(x, y, 3, st, ro, w) == MPI_SUCCESS, "allreduce struct user op");
  int digits = 0;
  for (int p = 0; p < n; ++p) digits = digits * 10 + p + 1;
  for (int i = 0; i < 3; ++i)
    CHECK(y[i].a == digits && y[i].b == n * (n - 1) * 0.25 + n * i, "struct op [%d] = (%d,%g)", i, y[i].a, y[i].b);
  MPI_Op_free(&ro);
  MPI_Comm_set_errhandler(w, MPI_ERRORS_RETURN);
  int cls, err = MPI_Allreduce(x, y, 3, st, MPI_SUM, w);
  MPI_Error_class(err, &cls);
  CHECK(cls == MPI_ERR_OP, "MPI_SUM on a mixed struct gave %d", err);
  MPI_Comm_set_errhandler(w, MPI_ERRORS_ARE_FATAL);
  MPI_Type_free(&st);
}

int main(int argc, char** argv) {
  mt_start("coll_derived", &argc, &argv);
  const int counts[] = {1, 33, 6000}; /* 6000 x 16 B = 96 KB */
  for (int k = 0; k < 3; ++k) pairs(counts[k]);
  derived();
  return mt_pass();
}
