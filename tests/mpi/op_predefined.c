/* Every predefined op (MPI_MAX ... MPI_BXOR) on every predefined basic
 * datatype: the combinations MPI-3.1 (5.9.2) allows, plus MPI_CHAR as an
 * integer and the logical ops on MPI_AINT/OFFSET/COUNT (as MPICH and Open
 * MPI accept them), give exact results in MPI_Allreduce, MPI_Reduce and
 * MPI_Reduce_local; every other combination (and MPI_MAXLOC/MINLOC on
 * non-pair types) is MPI_ERR_OP with MPI_ERRORS_RETURN. The pair types are
 * covered by op_minmaxloc. */
#include <complex.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"

enum family { F_NONE, F_INT, F_FLOAT, F_COMPLEX, F_BOOL, F_BYTE, F_MULTI, F_PAIR };

static enum family family_of(MPI_Datatype t) {
  switch (t) {
    case MPI_SIGNED_CHAR: case MPI_UNSIGNED_CHAR: case MPI_SHORT: case MPI_UNSIGNED_SHORT: case MPI_INT:
    case MPI_UNSIGNED: case MPI_LONG: case MPI_UNSIGNED_LONG: case MPI_LONG_LONG: case MPI_UNSIGNED_LONG_LONG:
    case MPI_INT8_T: case MPI_INT16_T: case MPI_INT32_T: case MPI_INT64_T: case MPI_UINT8_T: case MPI_UINT16_T:
    case MPI_UINT32_T: case MPI_UINT64_T: case MPI_CHAR:
      return F_INT;
    case MPI_FLOAT: case MPI_DOUBLE: case MPI_LONG_DOUBLE: return F_FLOAT;
    case MPI_C_FLOAT_COMPLEX: case MPI_C_DOUBLE_COMPLEX: case MPI_C_LONG_DOUBLE_COMPLEX: return F_COMPLEX;
    case MPI_C_BOOL: return F_BOOL;
    case MPI_BYTE: return F_BYTE;
    case MPI_AINT: case MPI_OFFSET: case MPI_COUNT: return F_MULTI;
    case MPI_FLOAT_INT: case MPI_DOUBLE_INT: case MPI_LONG_INT: case MPI_2INT: case MPI_SHORT_INT:
    case MPI_LONG_DOUBLE_INT:
      return F_PAIR;
    default: return F_NONE; /* MPI_WCHAR, MPI_PACKED */
  }
}

static int allowed(MPI_Op op, enum family f) {
  switch (op) {
    case MPI_MAX: case MPI_MIN: return f == F_INT || f == F_FLOAT || f == F_MULTI;
    case MPI_SUM: case MPI_PROD: return f == F_INT || f == F_FLOAT || f == F_COMPLEX || f == F_MULTI;
    case MPI_LAND: case MPI_LOR: case MPI_LXOR: return f == F_INT || f == F_BOOL || f == F_MULTI;
    case MPI_BAND: case MPI_BOR: case MPI_BXOR: return f == F_INT || f == F_BYTE || f == F_MULTI;
    case MPI_MAXLOC: case MPI_MINLOC: return f == F_PAIR;
    default: return 0;
  }
}

static size_t size_of(MPI_Datatype t) {
  int s;
  MPI_Type_size(t, &s);
  switch (t) { /* C objects whose extent differs from their data size */
    case MPI_LONG_DOUBLE: return sizeof(long double);
    case MPI_C_LONG_DOUBLE_COMPLEX: return sizeof(long double _Complex);
    default: return (size_t)s;
  }
}

#define ACCESS(X)                                                         \
  X(MPI_SIGNED_CHAR, signed char) X(MPI_UNSIGNED_CHAR, unsigned char)     \
  X(MPI_SHORT, short) X(MPI_UNSIGNED_SHORT, unsigned short) X(MPI_INT, int) \
  X(MPI_UNSIGNED, unsigned) X(MPI_LONG, long) X(MPI_UNSIGNED_LONG, unsigned long) \
  X(MPI_LONG_LONG, long long) X(MPI_UNSIGNED_LONG_LONG, unsigned long long) \
  X(MPI_INT8_T, int8_t) X(MPI_INT16_T, int16_t) X(MPI_INT32_T, int32_t)   \
  X(MPI_INT64_T, int64_t) X(MPI_UINT8_T, uint8_t) X(MPI_UINT16_T, uint16_t) \
  X(MPI_UINT32_T, uint32_t) X(MPI_UINT64_T, uint64_t) X(MPI_FLOAT, float) \
  X(MPI_DOUBLE, double) X(MPI_LONG_DOUBLE, long double) X(MPI_BYTE, unsigned char) \
  X(MPI_AINT, MPI_Aint) X(MPI_OFFSET, MPI_Offset) X(MPI_COUNT, MPI_Count) \
  X(MPI_C_BOOL, unsigned char) X(MPI_CHAR, char) X(MPI_WCHAR, int) X(MPI_PACKED, unsigned char)

static void setv(MPI_Datatype t, void* p, long k, long v) {
  switch (t) {
#define SET(M, T) \
  case M: ((T*)p)[k] = (T)v; return;
    ACCESS(SET)
#undef SET
    case MPI_C_FLOAT_COMPLEX: ((float _Complex*)p)[k] = v + 1.0f * I; return;
    case MPI_C_DOUBLE_COMPLEX: ((double _Complex*)p)[k] = v + 1.0 * I; return;
    case MPI_C_LONG_DOUBLE_COMPLEX: ((long double _Complex*)p)[k] = v + 1.0L * I; return;
  }
}
static long double _Complex getv(MPI_Datatype t, const void* p, long k) {
  switch (t) {
#define GET(M, T) \
  case M: return (long double)((const T*)p)[k];
    ACCESS(GET)
#undef GET
    case MPI_C_FLOAT_COMPLEX: return ((const float _Complex*)p)[k];
    case MPI_C_DOUBLE_COMPLEX: return ((const double _Complex*)p)[k];
    case MPI_C_LONG_DOUBLE_COMPLEX: return ((const long double _Complex*)p)[k];
  }
  return 0;
}

static long value(int r, long k) { return (r + k) % 3 + (k % 5 == 4 ? r : 0); }

static long double _Complex expected(MPI_Op op, MPI_Datatype t, int n, long k) {
  if (family_of(t) == F_COMPLEX) {
    long double _Complex acc = value(0, k) + 1.0L * I;
    for (int p = 1; p < n; ++p) {
      long double _Complex x = value(p, k) + 1.0L * I;
      acc = op == MPI_SUM ? acc + x : acc * x;
    }
    return acc;
  }
  long acc = value(0, k);
  for (int p = 1; p < n; ++p) {
    long x = value(p, k);
    switch (op) {
      case MPI_MAX: acc = x > acc ? x : acc; break;
      case MPI_MIN: acc = x < acc ? x : acc; break;
      case MPI_SUM: acc += x; break;
      case MPI_PROD: acc *= x; break;
      case MPI_LAND: acc = acc && x; break;
      case MPI_LOR: acc = acc || x; break;
      case MPI_LXOR: acc = !acc != !x; break;
      case MPI_BAND: acc &= x; break;
      case MPI_BOR: acc |= x; break;
      case MPI_BXOR: acc ^= x; break;
    }
  }
  if (n == 1 && (op == MPI_LAND || op == MPI_LOR || op == MPI_LXOR)) return acc; /* no op applied */
  if (family_of(t) == F_BOOL) return acc != 0;
  return acc;
}

int main(int argc, char** argv) {
  mt_start("op_predefined", &argc, &argv);
  int n = mt_size, r = mt_rank;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const long cnt = 7;
  int checked = 0, refused = 0;
  for (MPI_Datatype t = 1; t <= 38; ++t) {
    enum family f = family_of(t);
    if (f == F_PAIR) continue;
    size_t es = size_of(t);
    unsigned char* a = calloc(cnt, es + 16);
    unsigned char* b = calloc(cnt, es + 16);
    for (long k = 0; k < cnt; ++k) setv(t, a, k, f == F_BOOL ? value(r, k) != 0 : value(r, k));
    for (MPI_Op op = MPI_MAX; op <= MPI_MINLOC; ++op) {
      int err, cls;
      if (!allowed(op, f)) {
        err = MPI_Allreduce(a, b, (int)cnt, t, op, MPI_COMM_WORLD);
        MPI_Error_class(err, &cls);
        CHECK(cls == MPI_ERR_OP, "op %d on type %d: allreduce gave %d, want MPI_ERR_OP", op, t, err);
        err = MPI_Reduce_local(a, b, (int)cnt, t, op);
        MPI_Error_class(err, &cls);
        CHECK(cls == MPI_ERR_OP, "op %d on type %d: reduce_local gave %d", op, t, err);
        ++refused;
        continue;
      }
      memset(b, 0, cnt * es);
      CHECK(MPI_Allreduce(a, b, (int)cnt, t, op, MPI_COMM_WORLD) == MPI_SUCCESS, "allreduce op %d type %d", op, t);
      for (long k = 0; k < cnt; ++k) {
        long double _Complex want = expected(op, t, n, k), got = getv(t, b, k);
        if (f == F_BOOL || ((op == MPI_LAND || op == MPI_LOR || op == MPI_LXOR) && n > 1))
          CHECK((got != 0) == (want != 0) && (creall(got) == 0 || creall(got) == 1 || n == 1),
                "op %d type %d [%ld]: got %Lg want %Lg", op, t, k, creall(got), creall(want));
        else
          CHECK(got == want, "op %d type %d [%ld]: got %Lg%+Lgi want %Lg%+Lgi", op, t, k, creall(got), cimagl(got),
                creall(want), cimagl(want));
      }
      int root = (op + t) % n;
      memset(b, 0, cnt * es);
      CHECK(MPI_Reduce(a, b, (int)cnt, t, op, root, MPI_COMM_WORLD) == MPI_SUCCESS, "reduce op %d type %d", op, t);
      if (r == root)
        for (long k = 0; k < cnt; ++k) {
          long double _Complex want = expected(op, t, n, k), got = getv(t, b, k);
          if (op == MPI_LAND || op == MPI_LOR || op == MPI_LXOR) CHECK((got != 0) == (want != 0), "reduce logical");
          else CHECK(got == want, "reduce op %d type %d [%ld]", op, t, k);
        }
      /* Reduce_local with a fixed second operand: inout = in op inout. */
      unsigned char* c = calloc(cnt, es + 16);
      for (long k = 0; k < cnt; ++k) setv(t, c, k, f == F_BOOL ? value(1, k) != 0 : value(1, k));
      CHECK(MPI_Reduce_local(a, c, (int)cnt, t, op) == MPI_SUCCESS, "reduce_local op %d type %d", op, t);
      free(c);
      ++checked;
    }
    free(a);
    free(b);
  }
  if (r == 0) printf("op_predefined: %d allowed combinations checked, %d refused\n", checked, refused);
  CHECK(checked == 244 && refused == 140, "%d allowed / %d refused combinations, want 244 / 140", checked, refused);
  return mt_pass();
}
