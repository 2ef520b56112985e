/* User-defined reduction ops: MPI_Op_create / MPI_Op_free (handles are
 * recycled), MPI_Op_commutative, MPI_Reduce_local, and collectives with a
 * commutative op (a sum on MPI_LONG) and a non-commutative one (composition
 * of affine maps, whose result shows the rank order): Reduce at every root,
 * Allreduce small and > 64 KiB, Scan,
 * Reduce_scatter_block, Ireduce. */
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"

static int calls = 0;
static void my_sum(void* in, void* inout, int* len, MPI_Datatype* t) {
  CHECK(*t == MPI_LONG, "user op got datatype %d", *t);
  long* x = in;
  long* y = inout;
  for (int i = 0; i < *len; ++i) y[i] += x[i];
  ++calls;
}

/* The non-commutative op: MPI_2INT pairs (a, b) as affine maps
 * x -> a*x + b; composition is associative and not commutative. */
typedef struct { int a, b; } affine;
static void compose(void* in, void* inout, int* len, MPI_Datatype* t) {
  CHECK(*t == MPI_2INT, "compose got datatype %d", *t);
  affine* x = in;
  affine* y = inout;
  for (int k = 0; k < *len; ++k) { /* y := y o x (x first) */
    unsigned a = (unsigned)y[k].a * (unsigned)x[k].a, b = (unsigned)y[k].a * (unsigned)x[k].b + (unsigned)y[k].b;
    y[k].a = (int)a;
    y[k].b = (int)b;
  }
}
static affine elem(int rank, long i) {
  affine e = {(int)(2 * rank + 3 + i % 4), (int)(rank + 1 + i % 9)};
  return e;
}
static affine fold(int from, int to, long i) { /* elem(from) op ... op elem(to) */
  affine e = elem(from, i);
  for (int p = from + 1; p <= to; ++p) {
    affine x = elem(p, i);
    int len = 1;
    MPI_Datatype t = MPI_2INT;
    compose(&e, &x, &len, &t);
    e = x;
  }
  return e;
}

/* A user op on a non-contiguous type (MPI_DOUBLE_INT: 12 data bytes in a
 * 16-byte extent): it must see the C layout. v: sum; i: largest. */
typedef struct { double v; int i; } double_int;
static void di_op(void* in, void* inout, int* len, MPI_Datatype* t) {
  CHECK(*t == MPI_DOUBLE_INT, "di_op got datatype %d", *t);
  double_int* x = in;
  double_int* y = inout;
  for (int k = 0; k < *len; ++k) {
    y[k].v += x[k].v;
    if (x[k].i > y[k].i) y[k].i = x[k].i;
  }
}

int main(int argc, char** argv) {
  mt_start("op_user", &argc, &argv);
  int n = mt_size, r = mt_rank;
  MPI_Op sum, comp;
  CHECK(MPI_Op_create(my_sum, 1, &sum) == MPI_SUCCESS, "create");
  CHECK(MPI_Op_create(compose, 0, &comp) == MPI_SUCCESS, "create");
  CHECK(sum != comp && sum >= 32 && comp >= 32, "handles %d %d", sum, comp);
  int c = -1;
  MPI_Op_commutative(sum, &c);
  CHECK(c == 1, "sum commutative = %d", c);
  MPI_Op_commutative(comp, &c);
  CHECK(c == 0, "compose commutative = %d", c);
  MPI_Op_commutative(MPI_SUM, &c);
  CHECK(c == 1, "MPI_SUM commutative = %d", c);

  /* Reduce_local: inout = in op inout. */
  affine p = {2, 1}, q = {3, 5}; /* q o p: 3*(2x+1)+5 = 6x+8 */
  int before = calls;
  CHECK(MPI_Reduce_local(&p, &q, 1, MPI_2INT, comp) == MPI_SUCCESS, "reduce_local");
  CHECK(q.a == 6 && q.b == 8, "reduce_local = (%d,%d)", q.a, q.b);
  long l1[3] = {1, 2, 3}, l2[3] = {10, 20, 30};
  CHECK(MPI_Reduce_local(l1, l2, 3, MPI_LONG, sum) == MPI_SUCCESS && l2[2] == 33 && calls == before + 1,
        "reduce_local sum");

  const int counts[] = {1, 7, 12000}; /* 12000 x 8 B = 96 KB */
  for (int k = 0; k < 3; ++k) {
    int cnt = counts[k];
    long* a = malloc(sizeof(long) * cnt);
    long* s = malloc(sizeof(long) * cnt);
    affine* x = malloc(sizeof(affine) * cnt);
    affine* y = malloc(sizeof(affine) * cnt);
    for (int i = 0; i < cnt; ++i) {
      a[i] = (long)(r + 1) * (i + 1);
      x[i] = elem(r, i);
    }
    for (int root = 0; root < n; ++root) {
      CHECK(MPI_Reduce(a, s, cnt, MPI_LONG, sum, root, MPI_COMM_WORLD) == MPI_SUCCESS, "reduce sum");
      if (r == root)
        for (int i = 0; i < cnt; ++i) CHECK(s[i] == (long)n * (n + 1) / 2 * (i + 1), "reduce sum [%d]", i);
      CHECK(MPI_Reduce(x, y, cnt, MPI_2INT, comp, root, MPI_COMM_WORLD) == MPI_SUCCESS, "reduce compose");
      if (r == root)
        for (int i = 0; i < cnt; ++i) {
          affine e = fold(0, n - 1, i);
          CHECK(y[i].a == e.a && y[i].b == e.b, "root %d cnt %d: reduce compose [%d] = (%d,%d) want (%d,%d)", root,
                cnt, i, y[i].a, y[i].b, e.a, e.b);
        }
    }
    CHECK(MPI_Allreduce(a, s, cnt, MPI_LONG, sum, MPI_COMM_WORLD) == MPI_SUCCESS, "allreduce sum");
    for (int i = 0; i < cnt; ++i) CHECK(s[i] == (long)n * (n + 1) / 2 * (i + 1), "allreduce sum [%d]", i);
    CHECK(MPI_Allreduce(x, y, cnt, MPI_2INT, comp, MPI_COMM_WORLD) == MPI_SUCCESS, "allreduce compose");
    for (int i = 0; i < cnt; ++i) {
      affine e = fold(0, n - 1, i);
      CHECK(y[i].a == e.a && y[i].b == e.b, "allreduce compose [%d]", i);
    }
    MPI_Request req;
    CHECK(MPI_Ireduce(x, y, cnt, MPI_2INT, comp, n - 1, MPI_COMM_WORLD, &req) == MPI_SUCCESS, "ireduce");
    CHECK(MPI_Wait(&req, MPI_STATUS_IGNORE) == MPI_SUCCESS, "wait");
    if (r == n - 1)
      for (int i = 0; i < cnt; ++i) {
        affine e = fold(0, n - 1, i);
        CHECK(y[i].a == e.a && y[i].b == e.b, "ireduce compose [%d]", i);
      }
    CHECK(MPI_Scan(x, y, cnt, MPI_2INT, comp, MPI_COMM_WORLD) == MPI_SUCCESS, "scan compose");
    for (int i = 0; i < cnt; ++i) {
      affine e = fold(0, r, i);
      CHECK(y[i].a == e.a && y[i].b == e.b, "scan compose [%d]", i);
    }
    free(a);
    free(s);
    free(x);
    free(y);
    /* Reduce_scatter_block with the non-commutative op. */
    affine* bx = malloc(sizeof(affine) * cnt * n);
    affine* by = malloc(sizeof(affine) * cnt);
    for (long i = 0; i < (long)cnt * n; ++i) bx[i] = elem(r, i);
    CHECK(MPI_Reduce_scatter_block(bx, by, cnt, MPI_2INT, comp, MPI_COMM_WORLD) == MPI_SUCCESS, "rsb compose");
    for (int i = 0; i < cnt; ++i) {
      affine e = fold(0, n - 1, (long)r * cnt + i);
      CHECK(by[i].a == e.a && by[i].b == e.b, "rsb compose [%d]", i);
    }
    free(bx);
    free(by);
  }
  /* User op on a non-contiguous type, small and > 64 KiB, in place too. */
  MPI_Op dio;
  MPI_Op_create(di_op, 1, &dio);
  for (int k = 0; k < 3; ++k) {
    int cnt = counts[k];
    double_int* a = malloc(sizeof(double_int) * cnt * n);
    double_int* b = malloc(sizeof(double_int) * cnt * n);
    for (long i = 0; i < (long)cnt * n; ++i) {
      a[i].v = r + i * 0.5;
      a[i].i = (int)((r * 7 + i) % 5);
    }
    CHECK(MPI_Allreduce(a, b, cnt, MPI_DOUBLE_INT, dio, MPI_COMM_WORLD) == MPI_SUCCESS, "allreduce di_op");
    for (int i = 0; i < cnt; ++i) {
      int best = 0;
      for (int p = 0; p < n; ++p)
        if ((p * 7 + i) % 5 > best) best = (int)((p * 7 + i) % 5);
      CHECK(b[i].v == n * (n - 1) / 2.0 + n * i * 0.5 && b[i].i == best, "di_op cnt %d [%d] = (%g,%d)", cnt, i, b[i].v,
            b[i].i);
    }
    CHECK(MPI_Reduce_scatter_block(MPI_IN_PLACE, a, cnt, MPI_DOUBLE_INT, dio, MPI_COMM_WORLD) == MPI_SUCCESS,
          "rsb di_op in place");
    for (int i = 0; i < cnt; ++i) {
      long g = (long)r * cnt + i;
      int best = 0;
      for (int p = 0; p < n; ++p)
        if ((p * 7 + g) % 5 > best) best = (int)((p * 7 + g) % 5);
      CHECK(a[i].v == n * (n - 1) / 2.0 + n * g * 0.5 && a[i].i == best, "rsb di_op [%d]", i);
    }
    free(a);
    free(b);
  }
  MPI_Op_free(&dio);
  /* Handles are recycled after MPI_Op_free. */
  MPI_Op old = sum;
  CHECK(MPI_Op_free(&sum) == MPI_SUCCESS && sum == MPI_OP_NULL, "free");
  MPI_Op again;
  MPI_Op_create(my_sum, 1, &again);
  CHECK(again == old, "handle %d not recycled (got %d)", old, again);
  MPI_Op_free(&again);
  MPI_Op_free(&comp);
  /* Errors. */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int cls, err;
  MPI_Op pre = MPI_SUM;
  err = MPI_Op_free(&pre);
  MPI_Error_class(err, &cls);
  CHECK(cls == MPI_ERR_OP, "freeing MPI_SUM gave %d", err);
  long v = 1, w;
  err = MPI_Allreduce(&v, &w, 1, MPI_LONG, old, MPI_COMM_WORLD); /* freed handle */
  MPI_Error_class(err, &cls);
  CHECK(cls == MPI_ERR_OP, "freed op gave %d", err);
  err = MPI_Allreduce(&v, &w, 1, MPI_LONG, MPI_REPLACE, MPI_COMM_WORLD);
  MPI_Error_class(err, &cls);
  CHECK(cls == MPI_ERR_OP, "MPI_REPLACE in a collective gave %d", err);
  return mt_pass();
}
