/* MPI_MAXLOC / MPI_MINLOC on every pair type (MPI_FLOAT_INT, MPI_DOUBLE_INT,
 * MPI_LONG_INT, MPI_2INT, MPI_SHORT_INT, MPI_LONG_DOUBLE_INT): ties keep the
 * smaller index, Reduce at every root, Allreduce small and > 64 KiB (with
 * the padded types packed), Reduce_local, and MPI_ERR_OP for MAXLOC on a
 * non-pair type. */
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"

typedef struct { float v; int i; } float_int;
typedef struct { double v; int i; } double_int;
typedef struct { long v; int i; } long_int;
typedef struct { int v; int i; } two_int;
typedef struct { short v; int i; } short_int;
typedef struct { long double v; int i; } ldouble_int;

/* Value of element k at rank r: few distinct values so that ties are
 * frequent; the index is a per-rank label (not the rank) so that "smaller
 * index" and "lower rank" differ. */
static int value(int r, long k) { return (int)((r * 3 + k) % 4); }
static int label(int r, long k) { return (int)((7 - r) * 10 + k % 3); }

/* Expected (value, index) of the reduction over ranks 0..n-1. */
static void expect(int n, long k, int maxloc, int* v, int* idx) {
  *v = value(0, k);
  *idx = label(0, k);
  for (int p = 1; p < n; ++p) {
    int pv = value(p, k), pi = label(p, k);
    if ((maxloc ? pv > *v : pv < *v) || (pv == *v && pi < *idx)) {
      *v = pv;
      *idx = pi;
    }
  }
}

#define TEST_PAIR(T, MPIT, cnt)                                                                          \
  do {                                                                                                   \
    T* a = malloc(sizeof(T) * (cnt));                                                                    \
    T* b = malloc(sizeof(T) * (cnt));                                                                    \
    for (long k = 0; k < (cnt); ++k) {                                                                   \
      a[k].v = value(r, k);                                                                              \
      a[k].i = label(r, k);                                                                              \
    }                                                                                                    \
    for (int maxloc = 0; maxloc < 2; ++maxloc) {                                                         \
      MPI_Op op = maxloc ? MPI_MAXLOC : MPI_MINLOC;                                                      \
      memset(b, 0, sizeof(T) * (cnt));                                                                   \
      CHECK(MPI_Allreduce(a, b, (cnt), MPIT, op, MPI_COMM_WORLD) == MPI_SUCCESS, "allreduce " #MPIT);     \
      for (long k = 0; k < (cnt); ++k) {                                                                 \
        int v, idx;                                                                                      \
        expect(n, k, maxloc, &v, &idx);                                                                  \
        CHECK(b[k].v == v && b[k].i == idx, #MPIT " %s cnt %ld [%ld] = (%g,%d) want (%d,%d)",             \
              maxloc ? "maxloc" : "minloc", (long)(cnt), k, (double)b[k].v, b[k].i, v, idx);             \
      }                                                                                                  \
      for (int root = 0; root < n; ++root) {                                                             \
        memset(b, 0, sizeof(T) * (cnt));                                                                 \
        CHECK(MPI_Reduce(a, b, (cnt), MPIT, op, root, MPI_COMM_WORLD) == MPI_SUCCESS, "reduce " #MPIT);   \
        if (r == root)                                                                                   \
          for (long k = 0; k < (cnt); ++k) {                                                             \
            int v, idx;                                                                                  \
            expect(n, k, maxloc, &v, &idx);                                                              \
            CHECK(b[k].v == v && b[k].i == idx, #MPIT " reduce root %d [%ld]", root, k);                 \
          }                                                                                              \
      }                                                                                                  \
    }                                                                                                    \
    /* Reduce_local: an exact tie keeps the smaller index of the two. */                                 \
    T x = {5, 9}, y = {5, 4}, z = {5, 2};                                                                \
    CHECK(MPI_Reduce_local(&x, &y, 1, MPIT, MPI_MAXLOC) == MPI_SUCCESS && y.i == 4, "tie " #MPIT);        \
    CHECK(MPI_Reduce_local(&z, &x, 1, MPIT, MPI_MINLOC) == MPI_SUCCESS && x.i == 2, "tie " #MPIT);        \
    free(a);                                                                                             \
    free(b);                                                                                             \
  } while (0)

int main(int argc, char** argv) {
  mt_start("op_minmaxloc", &argc, &argv);
  int n = mt_size, r = mt_rank;
  const long counts[] = {1, 5, 100, 9000}; /* 9000 x 16..32 B > 64 KiB */
  for (int c = 0; c < 4; ++c) {
    long cnt = counts[c];
    TEST_PAIR(float_int, MPI_FLOAT_INT, cnt);
    TEST_PAIR(double_int, MPI_DOUBLE_INT, cnt);
    TEST_PAIR(long_int, MPI_LONG_INT, cnt);
    TEST_PAIR(two_int, MPI_2INT, cnt);
    TEST_PAIR(short_int, MPI_SHORT_INT, cnt);
    TEST_PAIR(ldouble_int, MPI_LONG_DOUBLE_INT, cnt);
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int x = 1, y, cls, err = MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_MAXLOC, MPI_COMM_WORLD);
  MPI_Error_class(err, &cls);
  CHECK(cls == MPI_ERR_OP, "MAXLOC on MPI_INT gave %d", err);
  two_int p = {1, 2}, q;
  err = MPI_Allreduce(&p, &q, 1, MPI_2INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Error_class(err, &cls);
  CHECK(cls == MPI_ERR_OP, "SUM on MPI_2INT gave %d", err);
  return mt_pass();
}
