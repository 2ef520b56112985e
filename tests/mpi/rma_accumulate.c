/* Accumulate functions (MPI 4.1 12.3.4, 12.3.5, 6.9.2): every predefined
 * operation with every basic datatype it is defined for, checked against
 * the same reduction computed here:
 *  - MPI_Accumulate from every rank to rank 0 (concurrent, same elements;
 *    MPI_REPLACE leaves one of the origins' values in each element);
 *  - MPI_Get_accumulate to the next rank (old values returned, new stored);
 *  - MPI_Fetch_and_op on one element;
 *  - MPI_Compare_and_swap on the types it allows (integers, logical, byte,
 *    multi-language types): swaps on equality only, returns the old value.
 * Values are small integers, so floating-point results are exact in any order. */
#include <complex.h>
#include <stdint.h>

#include "mpitest.h"

#define N 6 /* elements per operation */

static MPI_Op all_ops[] = {MPI_SUM, MPI_PROD, MPI_MAX,  MPI_MIN,    MPI_LAND,   MPI_LOR,   MPI_LXOR,
                           MPI_BAND, MPI_BOR, MPI_BXOR, MPI_MAXLOC, MPI_MINLOC, MPI_REPLACE, MPI_NO_OP};
static const char* op_names[] = {"SUM",  "PROD", "MAX",  "MIN",    "LAND",   "LOR",     "LXOR",
                                 "BAND", "BOR",  "BXOR", "MAXLOC", "MINLOC", "REPLACE", "NO_OP"};
#define NOPS ((int)(sizeof all_ops / sizeof all_ops[0]))

/* A small value for operation o, element k, from rank r (r = -1: the
 * target's initial value), suited to the operation. */
static long long gen(int o, int r, int k) {
  const int u = (k * 7 + (r + 1) * 5 + o * 3) & 0xff;
  if (all_ops[o] == MPI_PROD) return 1 + (u % 2);            /* 1 or 2: at most 2^5 */
  if (all_ops[o] == MPI_SUM) return (u % 7) - 3;             /* -3..3 */
#if defined(MPICH_VERSION) || defined(OPEN_MPI)
  /* Bugs of the peers, in MPI_Reduce too: MPICH 4.0.2's MAX and MIN compare
   * every unsigned type as a signed one, Open MPI 4.1.4's MPI_UNSIGNED_LONG;
   * keep their values non-negative there. */
  if (all_ops[o] == MPI_MAX || all_ops[o] == MPI_MIN) return u % 11;
#endif
  if (all_ops[o] == MPI_MAX || all_ops[o] == MPI_MIN) return (u % 11) - 5;
  if (all_ops[o] == MPI_LAND || all_ops[o] == MPI_LOR || all_ops[o] == MPI_LXOR) return u % 3; /* 0, 1, 2 */
  if (all_ops[o] == MPI_MAXLOC || all_ops[o] == MPI_MINLOC) return u % 3; /* ties: the lower index wins */
  return u & 0x7f;                                            /* bits, replace */
}

/* The size of a window of n bytes. MPICH 4.0.2 bug: on ranks > 0 of an
 * allocated window whose size is not a multiple of 16, RMA targets the base
 * rounded down to 16 bytes; round the size up there. */
static MPI_Aint win_bytes(MPI_Aint n) {
#ifdef MPICH_VERSION
  return (n + 15) / 16 * 16;
#else
  return n;
#endif
}

static int cls(int err) {
  char text[MPI_MAX_ERROR_STRING];
  return mt_error(err, text);
}

#define Y(...) __VA_ARGS__
#define X(...)
/* ref_NAME(op, a, b): *a = *a op b as MPI defines op; 0 if op is not one
 * of the type's operations. SP: SUM/PROD, MM: MAX/MIN, LG: logical, BT: bitwise. */
#define DEF_REF(name, T, SP, MM, LG, BT)                                             \
  static int ref_##name(MPI_Op op, T* a, T b) {                                      \
    if (op == MPI_REPLACE) return *a = b, 1;                                          \
    if (op == MPI_NO_OP) return 1;                                                    \
    SP(if (op == MPI_SUM) return *a = *a + b, 1; if (op == MPI_PROD) return *a = *a * b, 1;)          \
    MM(if (op == MPI_MAX) return *a = b > *a ? b : *a, 1; if (op == MPI_MIN) return *a = b < *a ? b : *a, 1;) \
    LG(if (op == MPI_LAND) return *a = (*a && b), 1; if (op == MPI_LOR) return *a = (*a || b), 1;          \
       if (op == MPI_LXOR) return *a = (!*a != !b), 1;)                                                   \
    BT(if (op == MPI_BAND) return *a = *a & b, 1; if (op == MPI_BOR) return *a = *a | b, 1;                \
       if (op == MPI_BXOR) return *a = *a ^ b, 1;)                                                        \
    return 0;                                                                         \
  }
#define MK_REAL(T, o, r, k) ((T)gen(o, r, k))
#define MK_CPLX(T, o, r, k) ((T)gen(o, r, k) + (T)gen(o, r, k + 3) * (T)I)
#define EQ_NUM(a, b) ((a) == (b))
#define CV_NUM(T, v) ((T)(v))
#define CV_BOOL(T, v) ((T)((v) % 2))

/* The whole test of one basic type: cas says whether Compare_and_swap allows it. */
#define DEF_TEST(name, T, MT, MK, cas, CV)                                                                          \
  static void test_##name(void) {                                                                              \
    int ops[NOPS], nops = 0;                                                                                     \
    for (int o = 0; o < NOPS; ++o) {                                                                             \
      T probe = 0;                                                                                               \
      if (ref_##name(all_ops[o], &probe, (T)0)) ops[nops++] = o;                                                 \
    }                                                                                                            \
    T* w;                                                                                                        \
    MPI_Win win;                                                                                                 \
    CHECK(MPI_Win_allocate(win_bytes(NOPS * N * sizeof(T)), sizeof(T), MPI_INFO_NULL, MPI_COMM_WORLD, &w, &win) ==          \
              MPI_SUCCESS, "Win_allocate " #name);                                                               \
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);                                                              \
    T org[NOPS * N], res[NOPS * N];                                                                              \
    for (int o = 0; o < NOPS; ++o)                                                                               \
      for (int k = 0; k < N; ++k) w[o * N + k] = MK(T, o, -1, k), org[o * N + k] = MK(T, o, mt_rank, k);         \
    /* Accumulate: everyone to rank 0. */                                                                        \
    MPI_Win_fence(MPI_MODE_NOPRECEDE, win);                                                                      \
    for (int i = 0; i < nops; ++i) {                                                                             \
      const int o = ops[i];                                                                                      \
      int err = MPI_Accumulate(org + o * N, N, MT, 0, o * N, N, MT, all_ops[o], win);                             \
      /* MPI_NO_OP is for the fetching functions only (MPI 4.1 12.3.4). */                                        \
      if (all_ops[o] == MPI_NO_OP)                                                                               \
        CHECK(cls(err) == MPI_ERR_OP, #name " Accumulate with MPI_NO_OP: class %d, not MPI_ERR_OP", cls(err));   \
      else                                                                                                       \
        CHECK(err == MPI_SUCCESS, #name " %s: Accumulate: class %d", op_names[o], cls(err));                     \
    }                                                                                                            \
    MPI_Win_fence(MPI_MODE_NOSTORE, win);                                                                        \
    for (int i = 0; mt_rank == 0 && i < nops; ++i) {                                                             \
      const int o = ops[i];                                                                                      \
      for (int k = 0; k < N; ++k) {                                                                              \
        T e = MK(T, o, -1, k);                                                                                   \
        int any = 0;                                                                                             \
        for (int r = 0; r < mt_size; ++r) {                                                                      \
          ref_##name(all_ops[o], &e, MK(T, o, r, k));                                                            \
          any |= all_ops[o] == MPI_REPLACE && EQ_NUM(w[o * N + k], MK(T, o, r, k));                              \
        }                                                                                                        \
        if (all_ops[o] == MPI_REPLACE)                                                                           \
          CHECK(any, #name " REPLACE: element %d is no origin's value", k);                                      \
        else                                                                                                     \
          CHECK(EQ_NUM(w[o * N + k], e), #name " %s: element %d differs from the reference (%g, expected %g)",   \
                op_names[o], k, (double)creal(w[o * N + k]), (double)creal(e));                                  \
      }                                                                                                          \
    }                                                                                                            \
    /* Get_accumulate (elements 0..N-2) and Fetch_and_op (element N-1) to the next rank. */                      \
    for (int o = 0; o < NOPS; ++o)                                                                               \
      for (int k = 0; k < N; ++k) w[o * N + k] = MK(T, o, -1, k), res[o * N + k] = 0;                            \
    MPI_Win_fence(0, win);                                                                                       \
    const int next = (mt_rank + 1) % mt_size, prev = (mt_rank + mt_size - 1) % mt_size;                          \
    for (int i = 0; i < nops; ++i) {                                                                             \
      const int o = ops[i];                                                                                      \
      int err = MPI_Get_accumulate(org + o * N, N - 1, MT, res + o * N, N - 1, MT, next, o * N, N - 1, MT,        \
                                   all_ops[o], win);                                                             \
      CHECK(err == MPI_SUCCESS, #name " %s: Get_accumulate: class %d", op_names[o], cls(err));                   \
      err = MPI_Fetch_and_op(org + o * N + N - 1, res + o * N + N - 1, MT, next, o * N + N - 1, all_ops[o], win); \
      CHECK(err == MPI_SUCCESS, #name " %s: Fetch_and_op: class %d", op_names[o], cls(err));                     \
    }                                                                                                            \
    MPI_Win_fence(MPI_MODE_NOSTORE, win);                                                                        \
    for (int i = 0; i < nops; ++i) {                                                                             \
      const int o = ops[i];                                                                                      \
      for (int k = 0; k < N; ++k) {                                                                              \
        T e = MK(T, o, -1, k);                                                                                   \
        CHECK(EQ_NUM(res[o * N + k], e), #name " %s: fetched element %d = %g, not the old value %g", op_names[o], \
              k, (double)creal(res[o * N + k]), (double)creal(e));                                               \
        ref_##name(all_ops[o], &e, MK(T, o, prev, k));                                                           \
        CHECK(EQ_NUM(w[o * N + k], e), #name " %s: element %d after Get_accumulate/Fetch_and_op (%g, "           \
              "expected %g)", op_names[o], k, (double)creal(w[o * N + k]), (double)creal(e));                    \
      }                                                                                                          \
    }                                                                                                            \
    if (cas) {                                                                                                   \
      /* Element 0 compared with its value: swapped; element 1 with another: kept. */                           \
      w[0] = CV(T, 10 + mt_rank), w[1] = CV(T, 20 + mt_rank);                                                    \
      MPI_Win_fence(0, win);                                                                                     \
      T mine = CV(T, 51 + mt_rank), c0 = CV(T, 10 + next), c1 = CV(T, 21 + next), r0 = 0, r1 = 0;                \
      CHECK(MPI_Compare_and_swap(&mine, &c0, &r0, MT, next, 0, win) == MPI_SUCCESS, #name " CAS 0");             \
      CHECK(MPI_Compare_and_swap(&mine, &c1, &r1, MT, next, 1, win) == MPI_SUCCESS, #name " CAS 1");             \
      MPI_Win_fence(MPI_MODE_NOSTORE, win);                                                                      \
      CHECK(r0 == CV(T, 10 + next) && r1 == CV(T, 20 + next), #name " CAS: old values %g %g", (double)r0,        \
            (double)r1);                                                                                         \
      CHECK(w[0] == CV(T, 51 + prev) && w[1] == CV(T, 20 + mt_rank), #name " CAS: new values %g %g",             \
            (double)w[0], (double)w[1]);                                                                         \
    }                                                                                                            \
    MPI_Win_free(&win);                                                                                          \
  }

/* C integers: every operation but the pair ones. */
#define INT_TYPE(name, T, MT) DEF_REF(name, T, Y, Y, Y, Y) DEF_TEST(name, T, MT, MK_REAL, 1, CV_NUM)
INT_TYPE(int, int, MPI_INT)
INT_TYPE(unsigned, unsigned, MPI_UNSIGNED)
INT_TYPE(short, short, MPI_SHORT)
INT_TYPE(ushort, unsigned short, MPI_UNSIGNED_SHORT)
INT_TYPE(long, long, MPI_LONG)
INT_TYPE(ulong, unsigned long, MPI_UNSIGNED_LONG)
INT_TYPE(llong, long long, MPI_LONG_LONG)
INT_TYPE(ullong, unsigned long long, MPI_UNSIGNED_LONG_LONG)
INT_TYPE(schar, signed char, MPI_SIGNED_CHAR)
INT_TYPE(uchar, unsigned char, MPI_UNSIGNED_CHAR)
INT_TYPE(i8, int8_t, MPI_INT8_T)
INT_TYPE(i16, int16_t, MPI_INT16_T)
INT_TYPE(i32, int32_t, MPI_INT32_T)
INT_TYPE(i64, int64_t, MPI_INT64_T)
INT_TYPE(u8, uint8_t, MPI_UINT8_T)
INT_TYPE(u16, uint16_t, MPI_UINT16_T)
INT_TYPE(u32, uint32_t, MPI_UINT32_T)
INT_TYPE(u64, uint64_t, MPI_UINT64_T)
/* Multi-language types: SUM, PROD, MAX, MIN and the bitwise ones. */
DEF_REF(aint, MPI_Aint, Y, Y, X, Y) DEF_TEST(aint, MPI_Aint, MPI_AINT, MK_REAL, 1, CV_NUM)
DEF_REF(offset, MPI_Offset, Y, Y, X, Y) DEF_TEST(offset, MPI_Offset, MPI_OFFSET, MK_REAL, 1, CV_NUM)
DEF_REF(count, MPI_Count, Y, Y, X, Y) DEF_TEST(count, MPI_Count, MPI_COUNT, MK_REAL, 1, CV_NUM)
/* Floating point: SUM, PROD, MAX, MIN; complex: SUM, PROD. */
DEF_REF(float, float, Y, Y, X, X) DEF_TEST(float, float, MPI_FLOAT, MK_REAL, 0, CV_NUM)
DEF_REF(double, double, Y, Y, X, X) DEF_TEST(double, double, MPI_DOUBLE, MK_REAL, 0, CV_NUM)
DEF_REF(ldouble, long double, Y, Y, X, X) DEF_TEST(ldouble, long double, MPI_LONG_DOUBLE, MK_REAL, 0, CV_NUM)
DEF_REF(cfloat, float _Complex, Y, X, X, X) DEF_TEST(cfloat, float _Complex, MPI_C_FLOAT_COMPLEX, MK_CPLX, 0, CV_NUM)
DEF_REF(cdouble, double _Complex, Y, X, X, X) DEF_TEST(cdouble, double _Complex, MPI_C_DOUBLE_COMPLEX, MK_CPLX, 0, CV_NUM)
DEF_REF(cldouble, long double _Complex, Y, X, X, X)
DEF_TEST(cldouble, long double _Complex, MPI_C_LONG_DOUBLE_COMPLEX, MK_CPLX, 0, CV_NUM)
/* Logical: LAND, LOR, LXOR; byte: BAND, BOR, BXOR. */
#define MK_BOOL(T, o, r, k) ((T)(gen(o, r, k) != 0))
DEF_REF(bool, _Bool, X, X, Y, X) DEF_TEST(bool, _Bool, MPI_C_BOOL, MK_BOOL, 1, CV_BOOL)
DEF_REF(byte, unsigned char, X, X, X, Y) DEF_TEST(byte, unsigned char, MPI_BYTE, MK_REAL, 1, CV_NUM)

/* Pair types: MAXLOC and MINLOC (and REPLACE, NO_OP), value and index checked. */
#define DEF_PAIR(name, VT, MT)                                                                                   \
  typedef struct {                                                                                              \
    VT v;                                                                                                       \
    int i;                                                                                                      \
  } name##_t;                                                                                                   \
  static void ref_##name(MPI_Op op, name##_t* a, name##_t b) {                                                  \
    if (op == MPI_REPLACE) *a = b;                                                                              \
    if ((op == MPI_MAXLOC && b.v > a->v) || (op == MPI_MINLOC && b.v < a->v) ||                                 \
        ((op == MPI_MAXLOC || op == MPI_MINLOC) && b.v == a->v && b.i < a->i))                                  \
      *a = b;                                                                                                   \
  }                                                                                                             \
  static name##_t mk_##name(int o, int r, int k) {                                                              \
    name##_t p = {(VT)gen(o, r, k), r < 0 ? 2 : 10 * r + k};                                                    \
    return p;                                                                                                   \
  }                                                                                                             \
  static void test_##name(void) {                                                                               \
    static const int ops[4] = {10, 11, 12, 13}; /* MAXLOC MINLOC REPLACE NO_OP */                               \
    name##_t *w, org[NOPS * N], res[NOPS * N];                                                                  \
    MPI_Win win;                                                                                                \
    CHECK(MPI_Win_allocate(win_bytes(NOPS * N * sizeof(name##_t)), sizeof(name##_t), MPI_INFO_NULL, MPI_COMM_WORLD, &w,     \
                           &win) == MPI_SUCCESS, "Win_allocate " #name);                                        \
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);                                                             \
    const int next = (mt_rank + 1) % mt_size, prev = (mt_rank + mt_size - 1) % mt_size;                         \
    for (int pass = 0; pass < 2; ++pass) {                                                                      \
      for (int o = 0; o < NOPS; ++o)                                                                            \
        for (int k = 0; k < N; ++k) w[o * N + k] = mk_##name(o, -1, k), org[o * N + k] = mk_##name(o, mt_rank, k); \
      MPI_Win_fence(0, win);                                                                                    \
      for (int i = 0; i < 4; ++i) {                                                                             \
        const int o = ops[i];                                                                                   \
        if (pass == 0 && all_ops[o] == MPI_NO_OP) continue;                                                     \
        int err = pass == 0 ? MPI_Accumulate(org + o * N, N, MT, 0, o * N, N, MT, all_ops[o], win)              \
                            : MPI_Get_accumulate(org + o * N, N, MT, res + o * N, N, MT, next, o * N, N, MT,     \
                                                 all_ops[o], win);                                              \
        CHECK(err == MPI_SUCCESS, #name " %s pass %d: class %d", op_names[o], pass, cls(err));                  \
      }                                                                                                         \
      MPI_Win_fence(MPI_MODE_NOSTORE, win);                                                                     \
      for (int i = 0; i < 4 && (pass == 1 || mt_rank == 0); ++i) {                                              \
        const int o = ops[i];                                                                                   \
        for (int k = 0; k < N; ++k) {                                                                           \
          name##_t e = mk_##name(o, -1, k), got = w[o * N + k];                                                 \
          int any = 0;                                                                                          \
          for (int r = 0; r < mt_size; ++r)                                                                     \
            if (pass == 0 || r == prev) {                                                                       \
              name##_t v = mk_##name(o, r, k);                                                                  \
              ref_##name(all_ops[o], &e, v);                                                                    \
              any |= v.v == got.v && v.i == got.i;                                                              \
            }                                                                                                   \
          if (all_ops[o] == MPI_REPLACE)                                                                        \
            CHECK(any, #name " REPLACE pass %d: element %d is no origin's value", pass, k);                      \
          else                                                                                                  \
            CHECK(got.v == e.v && got.i == e.i, #name " %s pass %d: element %d = (%g, %d), expected (%g, %d)",   \
                  op_names[o], pass, k, (double)got.v, got.i, (double)e.v, e.i);                                \
          if (pass == 1) {                                                                                      \
            name##_t old = mk_##name(o, -1, k);                                                                 \
            CHECK(res[o * N + k].v == old.v && res[o * N + k].i == old.i, #name " %s: fetched element %d",      \
                  op_names[o], k);                                                                              \
          }                                                                                                     \
        }                                                                                                       \
      }                                                                                                         \
    }                                                                                                           \
    MPI_Win_free(&win);                                                                                         \
  }
DEF_PAIR(float_int, float, MPI_FLOAT_INT)
DEF_PAIR(double_int, double, MPI_DOUBLE_INT)
DEF_PAIR(long_int, long, MPI_LONG_INT)
DEF_PAIR(two_int, int, MPI_2INT)
DEF_PAIR(short_int, short, MPI_SHORT_INT)
DEF_PAIR(ldouble_int, long double, MPI_LONG_DOUBLE_INT)

int main(int argc, char** argv) {
  mt_start("rma_accumulate", &argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  test_int(), test_unsigned(), test_short(), test_ushort(), test_long(), test_ulong(), test_llong(), test_ullong();
  test_schar(), test_uchar(), test_i8(), test_i16(), test_i32(), test_i64(), test_u8(), test_u16(), test_u32();
  test_u64(), test_aint(), test_offset(), test_count();
  test_float(), test_double(), test_ldouble(), test_cfloat(), test_cdouble(), test_cldouble();
  test_bool(), test_byte();
  test_float_int(), test_double_int(), test_long_int(), test_two_int(), test_short_int(), test_ldouble_int();
  return mt_pass();
}
