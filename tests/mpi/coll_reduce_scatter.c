/* MPI_Reduce_scatter and MPI_Reduce_scatter_block: SUM and MAX on ints and
 * doubles, per-rank counts that differ (some zero), small and > 64 KiB
 * totals (binomial reduce + scatterv, pairwise), in place too, and a
 * non-commutative user op (rank order must be kept). */
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"

static int val(int rank, long i) { return (int)((rank + 1) * (i % 1000 + 1)); }

/* Affine maps x -> a*x + b packed in MPI_2INT; a op b = "a, then b". */
typedef struct { int a, b; } affine;
static void compose(void* in, void* inout, int* len, MPI_Datatype* t) {
  affine* x = in;
  affine* y = inout;
  for (int k = 0; k < *len; ++k) {
    unsigned a = (unsigned)y[k].a * (unsigned)x[k].a, b = (unsigned)y[k].a * (unsigned)x[k].b + (unsigned)y[k].b;
    y[k].a = (int)a;
    y[k].b = (int)b;
  }
  (void)t;
}
static affine elem(int rank, long i) {
  affine e = {(int)(2 * rank + 3 + i % 5), (int)(rank * 7 + i % 11)};
  return e;
}

int main(int argc, char** argv) {
  mt_start("coll_reduce_scatter", &argc, &argv);
  int n = mt_size, r = mt_rank;
  const int bases[] = {0, 1, 40, 6000};
  int* rc = malloc(sizeof(int) * n);
  MPI_Op comp;
  MPI_Op_create(compose, 0, &comp);
  for (int k = 0; k < 4; ++k) {
    long total = 0, off = 0;
    for (int p = 0; p < n; ++p) {
      rc[p] = bases[k] * (1 + p % 2) + (p == 1 ? 0 : p);
      total += rc[p];
    }
    for (int p = 0; p < r; ++p) off += rc[p];
    int* s = malloc(sizeof(int) * (total + 1));
    int* d = malloc(sizeof(int) * (total + 1));
    for (long i = 0; i < total; ++i) s[i] = val(r, i);
    CHECK(MPI_Reduce_scatter(s, d, rc, MPI_INT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS, "reduce_scatter");
    for (int i = 0; i < rc[r]; ++i)
      CHECK(d[i] == (int)((off + i) % 1000 + 1) * n * (n + 1) / 2, "base %d sum [%d] = %d", bases[k], i, d[i]);
    /* In place: the whole vector in recvbuf, the result at its start. */
    for (long i = 0; i < total; ++i) d[i] = val(r, i);
    CHECK(MPI_Reduce_scatter(MPI_IN_PLACE, d, rc, MPI_INT, MPI_MAX, MPI_COMM_WORLD) == MPI_SUCCESS, "in place");
    for (int i = 0; i < rc[r]; ++i) CHECK(d[i] == val(n - 1, off + i), "max in place [%d] = %d", i, d[i]);
    /* Non-commutative. */
    affine* as = malloc(sizeof(affine) * (total + 1));
    affine* ad = malloc(sizeof(affine) * (total + 1));
    for (long i = 0; i < total; ++i) as[i] = elem(r, i);
    CHECK(MPI_Reduce_scatter(as, ad, rc, MPI_2INT, comp, MPI_COMM_WORLD) == MPI_SUCCESS, "user op");
    for (int i = 0; i < rc[r]; ++i) {
      affine e = elem(0, off + i);
      for (int p = 1; p < n; ++p) {
        affine x = elem(p, off + i);
        int len = 1;
        MPI_Datatype t = MPI_2INT;
        compose(&e, &x, &len, &t);
        e = x;
      }
      CHECK(ad[i].a == e.a && ad[i].b == e.b, "user op [%d] = (%d,%d), want (%d,%d)", i, ad[i].a, ad[i].b, e.a, e.b);
    }
    free(as);
    free(ad);
    free(s);
    free(d);

    /* Block variant. */
    int bc = bases[k] + 1;
    double* bs = malloc(sizeof(double) * bc * n);
    double* bd = malloc(sizeof(double) * bc * n);
    for (long i = 0; i < (long)bc * n; ++i) bs[i] = r + i * 0.5;
    CHECK(MPI_Reduce_scatter_block(bs, bd, bc, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS, "block");
    for (int i = 0; i < bc; ++i) {
      double want = n * (n - 1) / 2.0 + n * ((long)r * bc + i) * 0.5;
      CHECK(bd[i] == want, "block [%d] = %g, want %g", i, bd[i], want);
    }
    for (long i = 0; i < (long)bc * n; ++i) bd[i] = r + i * 0.5;
    CHECK(MPI_Reduce_scatter_block(MPI_IN_PLACE, bd, bc, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD) == MPI_SUCCESS,
          "block in place");
    for (int i = 0; i < bc; ++i) CHECK(bd[i] == ((long)r * bc + i) * 0.5, "block min in place [%d] = %g", i, bd[i]);
    free(bs);
    free(bd);
  }
  MPI_Op_free(&comp);
  free(rc);
  return mt_pass();
}
