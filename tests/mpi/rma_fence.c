/* Active target communication with fences (MPI 4.1 12.3, 12.5.1): Put, Get
 * and Accumulate between every pair of non-contiguous datatypes (vector,
 * indexed, struct of one basic type, subarray, resized, contiguous) on the
 * origin and the target side, each element checked where it must land and
 * the gaps untouched; the fence assertions (NOPRECEDE, NOSTORE, NOPUT,
 * NOSUCCEED) used where they hold; a different disp_unit on each rank;
 * MPI_PROC_NULL targets; zero counts; a process targeting itself; 4 MiB
 * transfers (contiguous, and strided on the target side). */
#include "mpitest.h"

#define NTYPES 6
#define NELEM 6    /* ints in one instance of every type */
#define REGION 20  /* ints of window per (origin type, target type) pair; every type spans <= 17 */
#define NPAIRS (NTYPES * NTYPES)
#define WINLEN (NPAIRS * REGION + 16)

static MPI_Datatype types[NTYPES];
static const char* names[NTYPES] = {"contiguous", "vector", "indexed", "struct", "subarray", "resized"};
/* The int offsets of each type's elements, in order (its type map, by hand). */
static const int offs[NTYPES][NELEM] = {
    {0, 1, 2, 3, 4, 5},        /* contiguous(6) */
    {0, 1, 5, 6, 10, 11},      /* vector(3, 2, 5) */
    {0, 1, 2, 5, 9, 10},       /* indexed {3,1,2} at {0,5,9} */
    {0, 1, 4, 8, 9, 10},       /* struct of MPI_INT {2,1,3} at bytes {0,16,32} */
    {8, 9, 10, 14, 15, 16},    /* subarray 4x6, 2x3 from (1,2), C order */
    {0, 3, 6, 9, 12, 15},      /* contiguous(6) of MPI_INT resized to 3 ints */
};

static void make_types(void) {
  MPI_Type_contiguous(6, MPI_INT, &types[0]);
  MPI_Type_vector(3, 2, 5, MPI_INT, &types[1]);
  int bl[3] = {3, 1, 2}, dis[3] = {0, 5, 9};
  MPI_Type_indexed(3, bl, dis, MPI_INT, &types[2]);
  int sbl[3] = {2, 1, 3};
  MPI_Aint sdis[3] = {0, 4 * sizeof(int), 8 * sizeof(int)};
  MPI_Datatype st[3] = {MPI_INT, MPI_INT, MPI_INT};
  MPI_Type_create_struct(3, sbl, sdis, st, &types[3]);
  int sizes[2] = {4, 6}, sub[2] = {2, 3}, starts[2] = {1, 2};
  MPI_Type_create_subarray(2, sizes, sub, starts, MPI_ORDER_C, MPI_INT, &types[4]);
  MPI_Datatype r;
  MPI_Type_create_resized(MPI_INT, 0, 3 * sizeof(int), &r);
  MPI_Type_contiguous(6, r, &types[5]);
  MPI_Type_free(&r);
  for (int i = 0; i < NTYPES; ++i) MPI_Type_commit(&types[i]);
}

/* The value of element x (an int offset) of origin buffers of pair p from rank src. */
static int oval(int src, int p, int x) { return 100000 * (src + 1) + 1000 * p + x; }

/* Checks region p of window memory w (written by rank src with pair p's
 * target type, mult times the origin values) and that the gaps kept -1. */
static void check_region(const int* w, int p, int src, int mult, const char* op) {
  const int i = p / NTYPES, j = p % NTYPES;
  const int* r = w + p * REGION;
  int expect[REGION];
  for (int x = 0; x < REGION; ++x) expect[x] = -1;
  for (int k = 0; k < NELEM; ++k) expect[offs[j][k]] = mult * oval(src, p, offs[i][k]);
  for (int x = 0; x < REGION; ++x)
    CHECK(r[x] == expect[x], "%s %s -> %s from rank %d: target int %d = %d, expected %d", op, names[i], names[j], src,
          x, r[x], expect[x]);
}

static void test_datatypes(void) {
  int* w;
  MPI_Win win;
  CHECK(MPI_Win_allocate(WINLEN * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &w, &win) == MPI_SUCCESS,
        "Win_allocate");
  MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
  for (int x = 0; x < WINLEN; ++x) w[x] = -1;
  const int next = (mt_rank + 1) % mt_size, prev = (mt_rank + mt_size - 1) % mt_size;
  int* obuf = malloc(NPAIRS * REGION * sizeof(int));
  for (int p = 0; p < NPAIRS; ++p)
    for (int x = 0; x < REGION; ++x) obuf[p * REGION + x] = oval(mt_rank, p, x);

  /* Epoch 1: every pair put to the next rank (the local stores above came before this fence). */
  CHECK(MPI_Win_fence(MPI_MODE_NOPRECEDE, win) == MPI_SUCCESS, "fence NOPRECEDE");
  for (int p = 0; p < NPAIRS; ++p)
    CHECK(MPI_Put(obuf + p * REGION, 1, types[p / NTYPES], next, p * REGION, 1, types[p % NTYPES], win) ==
              MPI_SUCCESS, "put pair %d", p);
  /* No local stores in epoch 1, and epoch 2 only reads: NOSTORE | NOPUT. */
  CHECK(MPI_Win_fence(MPI_MODE_NOSTORE | MPI_MODE_NOPUT, win) == MPI_SUCCESS, "fence NOSTORE|NOPUT");
  for (int p = 0; p < NPAIRS; ++p) check_region(w, p, prev, 1, "put");

  /* Epoch 2: get each region back from the next rank, through the origin type, into a -1 buffer. */
  int* gbuf = malloc(NPAIRS * REGION * sizeof(int));
  for (int x = 0; x < NPAIRS * REGION; ++x) gbuf[x] = -1;
  for (int p = 0; p < NPAIRS; ++p)
    CHECK(MPI_Get(gbuf + p * REGION, 1, types[p / NTYPES], next, p * REGION, 1, types[p % NTYPES], win) ==
              MPI_SUCCESS, "get pair %d", p);
  CHECK(MPI_Win_fence(MPI_MODE_NOSTORE, win) == MPI_SUCCESS, "fence NOSTORE");
  for (int p = 0; p < NPAIRS; ++p) {
    const int i = p / NTYPES;
    int expect[REGION];
    for (int x = 0; x < REGION; ++x) expect[x] = -1;
    for (int k = 0; k < NELEM; ++k) expect[offs[i][k]] = oval(mt_rank, p, offs[i][k]);
    for (int x = 0; x < REGION; ++x)
      CHECK(gbuf[p * REGION + x] == expect[x], "get %s <- %s: origin int %d = %d, expected %d", names[i],
            names[p % NTYPES], x, gbuf[p * REGION + x], expect[x]);
  }

  /* Epoch 3: accumulate the same data with MPI_SUM: the target holds twice it. */
  for (int p = 0; p < NPAIRS; ++p)
    CHECK(MPI_Accumulate(obuf + p * REGION, 1, types[p / NTYPES], next, p * REGION, 1, types[p % NTYPES], MPI_SUM,
                         win) == MPI_SUCCESS, "accumulate pair %d", p);
  CHECK(MPI_Win_fence(MPI_MODE_NOSTORE, win) == MPI_SUCCESS, "fence after accumulate");
  for (int p = 0; p < NPAIRS; ++p) check_region(w, p, prev, 2, "accumulate");

  /* Epoch 4: several instances (count 2 of a vector into count 12 of MPI_INT
   * and back), MPI_PROC_NULL targets, zero counts, and the process itself. */
  int tail = NPAIRS * REGION;  /* 16 free ints at the end */
  int src2[12], got[12], junk[4] = {7, 7, 7, 7};
  MPI_Datatype v2;
  MPI_Type_vector(3, 1, 2, MPI_INT, &v2);  /* extent 5 ints: count 2 = ints {0,2,4,5,7,9} */
  MPI_Type_commit(&v2);
  for (int x = 0; x < 12; ++x) src2[x] = 50 * mt_rank + x;
  CHECK(MPI_Put(src2, 2, v2, mt_rank, tail, 6, MPI_INT, win) == MPI_SUCCESS, "put to self");
  CHECK(MPI_Put(junk, 4, MPI_INT, MPI_PROC_NULL, 0, 4, MPI_INT, win) == MPI_SUCCESS, "put to MPI_PROC_NULL");
  CHECK(MPI_Get(junk, 4, MPI_INT, MPI_PROC_NULL, 0, 4, MPI_INT, win) == MPI_SUCCESS, "get from MPI_PROC_NULL");
  CHECK(MPI_Accumulate(junk, 4, MPI_INT, MPI_PROC_NULL, 0, 4, MPI_INT, MPI_SUM, win) == MPI_SUCCESS,
        "accumulate to MPI_PROC_NULL");
  CHECK(MPI_Put(junk, 0, MPI_INT, next, tail + 8, 0, MPI_INT, win) == MPI_SUCCESS, "put of 0");
  CHECK(MPI_Get(junk, 0, MPI_INT, next, tail + 8, 0, MPI_INT, win) == MPI_SUCCESS, "get of 0");
  CHECK(MPI_Accumulate(junk, 0, MPI_INT, next, tail + 8, 0, MPI_INT, MPI_SUM, win) == MPI_SUCCESS, "acc of 0");
  CHECK(MPI_Win_fence(MPI_MODE_NOSTORE, win) == MPI_SUCCESS, "fence");
  const int sel[6] = {0, 2, 4, 5, 7, 9};
  for (int k = 0; k < 6; ++k)
    CHECK(w[tail + k] == 50 * mt_rank + sel[k], "put to self: int %d = %d, expected %d", k, w[tail + k],
          50 * mt_rank + sel[k]);
  for (int x = 6; x < 16; ++x) CHECK(w[tail + x] == -1, "tail int %d = %d: zero-count or PROC_NULL wrote", x, w[tail + x]);
  for (int x = 0; x < 4; ++x) CHECK(junk[x] == 7, "a get from MPI_PROC_NULL wrote the origin buffer");
  /* The window's first region is untouched by the PROC_NULL operations. */
  check_region(w, 0, prev, 2, "after PROC_NULL");

  /* Epoch 5: get the self-put back through the vector from the previous rank; last epoch. */
  for (int x = 0; x < 12; ++x) got[x] = -2;
  CHECK(MPI_Get(got, 2, v2, prev, tail, 6, MPI_INT, win) == MPI_SUCCESS, "get through count 2 vector");
  CHECK(MPI_Win_fence(MPI_MODE_NOSUCCEED | MPI_MODE_NOSTORE | MPI_MODE_NOPUT, win) == MPI_SUCCESS,
        "fence NOSUCCEED");
  for (int x = 0; x < 12; ++x) {
    int k = -1;
    for (int q = 0; q < 6; ++q)
      if (sel[q] == x) k = q;
    const int expect = k < 0 ? -2 : 50 * prev + x;
    CHECK(got[x] == expect, "get through vector: int %d = %d, expected %d", x, got[x], expect);
  }
  MPI_Type_free(&v2);
  free(obuf);
  free(gbuf);
  CHECK(MPI_Win_free(&win) == MPI_SUCCESS, "Win_free");
}

/* Each rank's own disp_unit: 8 on even ranks, 4 on odd ones; an origin
 * scales the displacement by the target's unit. Window of 8 ints. */
static void test_disp_units(void) {
  int mem[8];
  for (int x = 0; x < 8; ++x) mem[x] = -1;
  const int unit = mt_rank % 2 ? 4 : 8;
  MPI_Win win;
  CHECK(MPI_Win_create(mem, sizeof mem, unit, MPI_INFO_NULL, MPI_COMM_WORLD, &win) == MPI_SUCCESS, "Win_create");
  const int next = (mt_rank + 1) % mt_size, prev = (mt_rank + mt_size - 1) % mt_size;
  const int next_unit = next % 2 ? 4 : 8;
  /* Two ints at int offset 4 (byte 16) of the next rank, then one at int 7 (odd unit only). */
  int v[3] = {mt_rank * 10 + 1, mt_rank * 10 + 2, mt_rank * 10 + 3};
  MPI_Win_fence(MPI_MODE_NOPRECEDE, win);
  CHECK(MPI_Put(v, 2, MPI_INT, next, 16 / next_unit, 2, MPI_INT, win) == MPI_SUCCESS, "put by disp unit");
  if (next_unit == 4) MPI_Put(v + 2, 1, MPI_INT, next, 7, 1, MPI_INT, win);
  MPI_Win_fence(MPI_MODE_NOSTORE, win);
  CHECK(mem[4] == prev * 10 + 1 && mem[5] == prev * 10 + 2, "disp unit %d: ints 4,5 = %d %d", unit, mem[4], mem[5]);
  CHECK(mem[0] == -1 && mem[3] == -1 && mem[6] == -1, "disp unit %d wrote elsewhere", unit);
  CHECK(mem[7] == (unit == 4 && mt_size > 1 ? prev * 10 + 3 : unit == 4 ? mt_rank * 10 + 3 : -1),
        "disp unit %d: int 7 = %d", unit, mem[7]);
  /* And a get at byte 8 of the previous rank. */
  int g[2] = {0, 0};
  const int prev_unit = prev % 2 ? 4 : 8;
  MPI_Get(g, 2, MPI_INT, prev, 16 / prev_unit, 2, MPI_INT, win);
  MPI_Win_fence(MPI_MODE_NOSUCCEED, win);
  const int pp = (prev + mt_size - 1) % mt_size;
  CHECK(g[0] == pp * 10 + 1 && g[1] == pp * 10 + 2, "get by disp unit: %d %d", g[0], g[1]);
  MPI_Win_free(&win);
}

/* Large transfers (4 MiB: beyond any eager size): a contiguous Put, a Get
 * of every other int through a vector on the target side, an Accumulate. */
#define BIG (1 << 20)
static void test_large(void) {
  int* w;
  MPI_Win win;
  CHECK(MPI_Win_allocate(BIG * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &w, &win) == MPI_SUCCESS,
        "Win_allocate large");
  const int next = (mt_rank + 1) % mt_size, prev = (mt_rank + mt_size - 1) % mt_size;
  int* src = malloc(BIG * sizeof(int));
  int* dst = malloc(BIG / 2 * sizeof(int));
  for (int i = 0; i < BIG; ++i) src[i] = mt_rank * 7 + i, w[i] = -1;
  MPI_Datatype every_other;
  MPI_Type_vector(BIG / 2, 1, 2, MPI_INT, &every_other);
  MPI_Type_commit(&every_other);
  MPI_Win_fence(MPI_MODE_NOPRECEDE, win);
  CHECK(MPI_Put(src, BIG, MPI_INT, next, 0, BIG, MPI_INT, win) == MPI_SUCCESS, "large put");
  MPI_Win_fence(MPI_MODE_NOSTORE, win);
  for (int i = 0; i < BIG; ++i)
    if (w[i] != prev * 7 + i) CHECK(0, "large put: int %d = %d, expected %d", i, w[i], prev * 7 + i);
  CHECK(MPI_Get(dst, BIG / 2, MPI_INT, next, 1, 1, every_other, win) == MPI_SUCCESS, "large strided get");
  MPI_Win_fence(MPI_MODE_NOSTORE, win);
  for (int i = 0; i < BIG / 2; ++i)
    if (dst[i] != mt_rank * 7 + 1 + 2 * i) CHECK(0, "large get: int %d = %d", i, dst[i]);
  CHECK(MPI_Accumulate(src, BIG, MPI_INT, next, 0, BIG, MPI_INT, MPI_SUM, win) == MPI_SUCCESS, "large acc");
  MPI_Win_fence(MPI_MODE_NOSTORE | MPI_MODE_NOSUCCEED, win);
  for (int i = 0; i < BIG; ++i)
    if (w[i] != 2 * (prev * 7 + i)) CHECK(0, "large accumulate: int %d = %d, expected %d", i, w[i], 2 * (prev * 7 + i));
  MPI_Type_free(&every_other);
  free(src);
  free(dst);
  MPI_Win_free(&win);
}

int main(int argc, char** argv) {
  mt_start("rma_fence", &argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  make_types();
  test_datatypes();
  test_disp_units();
  test_large();
  for (int i = 0; i < NTYPES; ++i) MPI_Type_free(&types[i]);
  return mt_pass();
}
