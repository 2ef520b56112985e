/* MPI_Alltoallw: a datatype per peer on both sides (MPI_INT, MPI_DOUBLE and
 * the non-contiguous MPI_SHORT_INT, whose 6 data bytes sit in an 8-byte
 * extent), byte displacements in reverse order with gaps, small and
 * > 64 KiB blocks. */
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"

typedef struct { short v; int i; } short_int;

/* The type used for messages src -> dst (both sides agree). */
static MPI_Datatype type_of_pair(int src, int dst) {
  switch ((src + 2 * dst) % 3) {
    case 0: return MPI_INT;
    case 1: return MPI_DOUBLE;
    default: return MPI_SHORT_INT;
  }
}
static long ext(MPI_Datatype t) { return t == MPI_INT ? 4 : 8; }
static int cnt_of(int src, int dst, int base) { return base + (src * 3 + dst) % 4; }

static void put(void* p, MPI_Datatype t, int i, int v) {
  if (t == MPI_INT) ((int*)p)[i] = v;
  else if (t == MPI_DOUBLE) ((double*)p)[i] = v + 0.5;
  else {
    ((short_int*)p)[i].v = (short)(v & 0x7fff);
    ((short_int*)p)[i].i = v;
  }
}
static int ok(const void* p, MPI_Datatype t, int i, int v) {
  if (t == MPI_INT) return ((const int*)p)[i] == v;
  if (t == MPI_DOUBLE) return ((const double*)p)[i] == v + 0.5;
  return ((const short_int*)p)[i].v == (short)(v & 0x7fff) && ((const short_int*)p)[i].i == v;
}

int main(int argc, char** argv) {
  mt_start("coll_alltoallw", &argc, &argv);
  int n = mt_size, r = mt_rank;
  const int bases[] = {0, 3, 12000};
  int *sc = malloc(sizeof(int) * n), *sd = malloc(sizeof(int) * n);
  int *rc = malloc(sizeof(int) * n), *rd = malloc(sizeof(int) * n);
  MPI_Datatype *stt = malloc(sizeof(MPI_Datatype) * n), *rtt = malloc(sizeof(MPI_Datatype) * n);
  for (int k = 0; k < 3; ++k) {
    long sb = 0, rb = 0;
    for (int p = n - 1; p >= 0; --p) {
      stt[p] = type_of_pair(r, p);
      rtt[p] = type_of_pair(p, r);
      sc[p] = cnt_of(r, p, bases[k]);
      rc[p] = cnt_of(p, r, bases[k]);
      sd[p] = (int)sb;
      rd[p] = (int)rb;
      sb += (sc[p] * ext(stt[p]) + 8 + 7) / 8 * 8; /* blocks stay 8-byte aligned */
      rb += (rc[p] * ext(rtt[p]) + 16 + 7) / 8 * 8;
    }
    char* s = malloc(sb + 1);
    char* d = malloc(rb + 1);
    memset(s, 0x55, sb);
    memset(d, 0x77, rb);
    for (int p = 0; p < n; ++p)
      for (int i = 0; i < sc[p]; ++i) put(s + sd[p], stt[p], i, r * 100003 + p * 1009 + i);
    CHECK(MPI_Alltoallw(s, sc, sd, stt, d, rc, rd, rtt, MPI_COMM_WORLD) == MPI_SUCCESS, "alltoallw");
    for (int p = 0; p < n; ++p) {
      for (int i = 0; i < rc[p]; ++i)
        CHECK(ok(d + rd[p], rtt[p], i, p * 100003 + r * 1009 + i), "base %d: from %d [%d] (type %d)", bases[k], p, i,
              rtt[p]);
      const unsigned char* gap = (const unsigned char*)d + rd[p] + rc[p] * ext(rtt[p]);
      for (int j = 0; j < 16; ++j) CHECK(gap[j] == 0x77, "gap after block from %d overwritten", p);
    }
    free(s);
    free(d);
  }
  free(sc);
  free(sd);
  free(rc);
  free(rd);
  free(stt);
  free(rtt);
  return mt_pass();
}
