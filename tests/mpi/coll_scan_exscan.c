/* MPI_Scan and MPI_Exscan: SUM on long long for small and > 256 KiB vectors
 * (recursive doubling, chain), in place, MAX on doubles, and a
 * non-commutative user op whose result shows the rank order. */
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"

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
  affine e = {(int)(3 * rank + 2 + i % 7), (int)(rank * 5 + 1 + i % 3)};
  return e;
}
static affine prefix(int upto, long i) { /* elem(0) op ... op elem(upto) */
  affine e = elem(0, i);
  for (int p = 1; p <= upto; ++p) {
    affine x = elem(p, i);
    int len = 1;
    MPI_Datatype t = MPI_2INT;
    compose(&e, &x, &len, &t);
    e = x;
  }
  return e;
}

int main(int argc, char** argv) {
  mt_start("coll_scan_exscan", &argc, &argv);
  int r = mt_rank;
  const int counts[] = {0, 1, 100, 40000}; /* 40000 long long = 320 KB */
  for (int k = 0; k < 4; ++k) {
    int cnt = counts[k];
    long long* s = malloc(sizeof(long long) * (cnt + 1));
    long long* d = malloc(sizeof(long long) * (cnt + 1));
    for (int i = 0; i < cnt; ++i) s[i] = (long long)(r + 1) * (i + 1);
    CHECK(MPI_Scan(s, d, cnt, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS, "scan");
    for (int i = 0; i < cnt; ++i)
      CHECK(d[i] == (long long)(r + 1) * (r + 2) / 2 * (i + 1), "cnt %d scan [%d] = %lld", cnt, i, d[i]);
    for (int i = 0; i < cnt; ++i) d[i] = -12345;
    CHECK(MPI_Exscan(s, d, cnt, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS, "exscan");
    if (r > 0)
      for (int i = 0; i < cnt; ++i)
        CHECK(d[i] == (long long)r * (r + 1) / 2 * (i + 1), "cnt %d exscan [%d] = %lld", cnt, i, d[i]);
    else
      for (int i = 0; i < cnt; ++i) CHECK(d[i] == -12345, "exscan touched rank 0's buffer");
    /* In place. */
    for (int i = 0; i < cnt; ++i) d[i] = (long long)(r + 1) * (i + 1);
    CHECK(MPI_Scan(MPI_IN_PLACE, d, cnt, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS, "scan in place");
    for (int i = 0; i < cnt; ++i) CHECK(d[i] == (long long)(r + 1) * (r + 2) / 2 * (i + 1), "scan in place [%d]", i);
    for (int i = 0; i < cnt; ++i) d[i] = (long long)(r + 1) * (i + 1);
    CHECK(MPI_Exscan(MPI_IN_PLACE, d, cnt, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS,
          "exscan in place");
    if (r > 0)
      for (int i = 0; i < cnt; ++i) CHECK(d[i] == (long long)r * (r + 1) / 2 * (i + 1), "exscan in place [%d]", i);
    free(s);
    free(d);

    double* x = malloc(sizeof(double) * (cnt + 1));
    double* y = malloc(sizeof(double) * (cnt + 1));
    for (int i = 0; i < cnt; ++i) x[i] = (i % 2) ? -r : r;
    CHECK(MPI_Scan(x, y, cnt, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD) == MPI_SUCCESS, "scan max");
    for (int i = 0; i < cnt; ++i) CHECK(y[i] == ((i % 2) ? 0 : r), "scan max [%d] = %g", i, y[i]);
    free(x);
    free(y);

    MPI_Op comp;
    MPI_Op_create(compose, 0, &comp);
    affine* as = malloc(sizeof(affine) * (cnt + 1));
    affine* ad = malloc(sizeof(affine) * (cnt + 1));
    for (int i = 0; i < cnt; ++i) as[i] = elem(r, i);
    CHECK(MPI_Scan(as, ad, cnt, MPI_2INT, comp, MPI_COMM_WORLD) == MPI_SUCCESS, "scan user op");
    for (int i = 0; i < cnt; ++i) {
      affine e = prefix(r, i);
      CHECK(ad[i].a == e.a && ad[i].b == e.b, "scan user op [%d] = (%d,%d) want (%d,%d)", i, ad[i].a, ad[i].b, e.a,
            e.b);
    }
    CHECK(MPI_Exscan(as, ad, cnt, MPI_2INT, comp, MPI_COMM_WORLD) == MPI_SUCCESS, "exscan user op");
    if (r > 0)
      for (int i = 0; i < cnt; ++i) {
        affine e = prefix(r - 1, i);
        CHECK(ad[i].a == e.a && ad[i].b == e.b, "exscan user op [%d]", i);
      }
    MPI_Op_free(&comp);
    free(as);
    free(ad);
  }
  return mt_pass();
}
