/* MPI_Status_c2f/f2c copy a real receive status both ways (source, tag and
 * error at MPI_F_SOURCE/TAG/ERROR; Get_count still works on the copy), and
 * MPI_Type_create_f90_integer/real/complex return a predefined type with
 * the type map of the smallest C type of the requested precision and range,
 * whose envelope is MPI_COMBINER_F90_* and whose contents are the
 * parameters as given, the same handle for the same parameters, not to be
 * freed, usable for communication and reductions; out-of-range requests
 * are MPI_ERR_ARG. */
#include <float.h>

#include "mpitest.h"

static int cls(int err) {
  char text[MPI_MAX_ERROR_STRING];
  return mt_error(err, text);
}

static MPI_Datatype f90_int(int r) {
  MPI_Datatype t = -1;
  CHECK(MPI_Type_create_f90_integer(r, &t) == MPI_SUCCESS, "f90_integer(%d)", r);
  return t;
}
static MPI_Datatype f90_real(int p, int r) {
  MPI_Datatype t = -1;
  CHECK(MPI_Type_create_f90_real(p, r, &t) == MPI_SUCCESS, "f90_real(%d, %d)", p, r);
  return t;
}
static MPI_Datatype f90_complex(int p, int r) {
  MPI_Datatype t = -1;
  CHECK(MPI_Type_create_f90_complex(p, r, &t) == MPI_SUCCESS, "f90_complex(%d, %d)", p, r);
  return t;
}

/* t has the type map of `like` (size, extent, true extent), its envelope is
 * `combiner` with the parameters as integers, no addresses or types, and
 * its contents are (p, r) - r alone for an integer. */
static void check_f90(MPI_Datatype t, MPI_Datatype like, int combiner, int p, int r, const char* what) {
  int size = -1, like_size = -2;
  MPI_Aint lb, ext, like_lb, like_ext, tlb, text, like_tlb, like_text;
  MPI_Type_size(t, &size);
  MPI_Type_size(like, &like_size);
  MPI_Type_get_extent(t, &lb, &ext);
  MPI_Type_get_extent(like, &like_lb, &like_ext);
  MPI_Type_get_true_extent(t, &tlb, &text);
  MPI_Type_get_true_extent(like, &like_tlb, &like_text);
  CHECK(size == like_size && lb == like_lb && ext == like_ext && tlb == like_tlb && text == like_text,
        "%s: size %d extent %ld, want %d %ld", what, size, (long)ext, like_size, (long)like_ext);
  int ni = -1, na = -1, nd = -1, comb = -1;
  CHECK(MPI_Type_get_envelope(t, &ni, &na, &nd, &comb) == MPI_SUCCESS, "%s: envelope", what);
  const int want_ni = combiner == MPI_COMBINER_F90_INTEGER ? 1 : 2;
  CHECK(comb == combiner && ni == want_ni && na == 0 && nd == 0, "%s: envelope combiner %d (%d %d %d), want %d", what,
        comb, ni, na, nd, combiner);
  int ints[2] = {-7, -7};
  CHECK(MPI_Type_get_contents(t, 2, 0, 0, ints, NULL, NULL) == MPI_SUCCESS, "%s: contents", what);
  if (combiner == MPI_COMBINER_F90_INTEGER)
    CHECK(ints[0] == r, "%s: contents r %d, want %d", what, ints[0], r);
  else
    CHECK(ints[0] == p && ints[1] == r, "%s: contents (%d, %d), want (%d, %d)", what, ints[0], ints[1], p, r);
}

int main(int argc, char** argv) {
  mt_start("interop", &argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const int U = MPI_UNDEFINED;

  /* Status round trip on a real message (to self). */
  int data[5] = {1, 2, 3, 4, 5}, got[5];
  MPI_Status st, back;
  MPI_Sendrecv(data, 5, MPI_INT, mt_rank, 17, got, 5, MPI_INT, mt_rank, 17, MPI_COMM_WORLD, &st);
  st.MPI_ERROR = MPI_ERR_TRUNCATE; /* Sendrecv leaves it alone: give it a value to carry */
  MPI_Fint f[MPI_F_STATUS_SIZE];
  CHECK(MPI_STATUS_SIZE == MPI_F_STATUS_SIZE && MPI_F_STATUS_SIZE * sizeof(MPI_Fint) >= sizeof(MPI_Status),
        "status size");
  CHECK(MPI_Status_c2f(&st, f) == MPI_SUCCESS, "Status_c2f");
  CHECK(f[MPI_F_SOURCE] == mt_rank && f[MPI_F_TAG] == 17 && f[MPI_F_ERROR] == MPI_ERR_TRUNCATE,
        "Fortran status fields (%d %d %d)", f[MPI_F_SOURCE], f[MPI_F_TAG], f[MPI_F_ERROR]);
  memset(&back, 0, sizeof back);
  CHECK(MPI_Status_f2c(f, &back) == MPI_SUCCESS, "Status_f2c");
  int count = -1;
  MPI_Get_count(&back, MPI_INT, &count);
  CHECK(back.MPI_SOURCE == mt_rank && back.MPI_TAG == 17 && back.MPI_ERROR == MPI_ERR_TRUNCATE && count == 5,
        "round trip (%d %d %d count %d)", back.MPI_SOURCE, back.MPI_TAG, back.MPI_ERROR, count);
  CHECK(cls(MPI_Status_c2f(MPI_STATUS_IGNORE, f)) == MPI_ERR_ARG, "c2f of MPI_STATUS_IGNORE");
  CHECK(cls(MPI_Status_f2c(MPI_F_STATUS_IGNORE, &back)) == MPI_ERR_ARG, "f2c of MPI_F_STATUS_IGNORE");

  /* SELECTED_INT_KIND: 10^r - 1 must fit. */
  check_f90(f90_int(1), MPI_INT8_T, MPI_COMBINER_F90_INTEGER, U, 1, "integer r 1: 8 bits");
  check_f90(f90_int(2), MPI_INT8_T, MPI_COMBINER_F90_INTEGER, U, 2, "integer r 2: 8 bits");
  check_f90(f90_int(3), MPI_INT16_T, MPI_COMBINER_F90_INTEGER, U, 3, "integer r 3: 16 bits");
  check_f90(f90_int(4), MPI_INT16_T, MPI_COMBINER_F90_INTEGER, U, 4, "integer r 4: 16 bits");
  check_f90(f90_int(5), MPI_INT32_T, MPI_COMBINER_F90_INTEGER, U, 5, "integer r 5: 32 bits");
  check_f90(f90_int(9), MPI_INT32_T, MPI_COMBINER_F90_INTEGER, U, 9, "integer r 9: 32 bits");
  check_f90(f90_int(10), MPI_INT64_T, MPI_COMBINER_F90_INTEGER, U, 10, "integer r 10: 64 bits");
  check_f90(f90_int(18), MPI_INT64_T, MPI_COMBINER_F90_INTEGER, U, 18, "integer r 18: 64 bits");
  MPI_Datatype t = MPI_INT;
  CHECK(cls(MPI_Type_create_f90_integer(19, &t)) == MPI_ERR_ARG && t == MPI_DATATYPE_NULL, "r = 19: none");

  /* SELECTED_REAL_KIND: precision and range both satisfied. */
  const int R = MPI_COMBINER_F90_REAL, C = MPI_COMBINER_F90_COMPLEX;
  check_f90(f90_real(FLT_DIG, U), MPI_FLOAT, R, FLT_DIG, U, "real: float precision");
  check_f90(f90_real(FLT_DIG + 1, U), MPI_DOUBLE, R, FLT_DIG + 1, U, "real: more than float precision");
  check_f90(f90_real(U, 37), MPI_FLOAT, R, U, 37, "real: float range");
  check_f90(f90_real(U, 38), MPI_DOUBLE, R, U, 38, "real: more than float range");
  check_f90(f90_real(6, 37), MPI_FLOAT, R, 6, 37, "real (6, 37)");
  check_f90(f90_real(15, 307), MPI_DOUBLE, R, 15, 307, "real (15, 307)");
  check_f90(f90_real(3, 300), MPI_DOUBLE, R, 3, 300, "real (3, 300)");
  if (LDBL_DIG > DBL_DIG)
    check_f90(f90_real(DBL_DIG + 1, U), MPI_LONG_DOUBLE, R, DBL_DIG + 1, U, "wider than double: long double");
  CHECK(cls(MPI_Type_create_f90_real(LDBL_DIG + 1, U, &t)) == MPI_ERR_ARG && t == MPI_DATATYPE_NULL,
        "more precision than any type");
  CHECK(cls(MPI_Type_create_f90_real(U, 100000, &t)) == MPI_ERR_ARG, "more range than any type");
  CHECK(cls(MPI_Type_create_f90_real(U, U, &t)) == MPI_ERR_ARG, "p and r both undefined");
  check_f90(f90_complex(6, U), MPI_C_FLOAT_COMPLEX, C, 6, U, "complex (6, undefined)");
  check_f90(f90_complex(15, 300), MPI_C_DOUBLE_COMPLEX, C, 15, 300, "complex (15, 300)");
  CHECK(cls(MPI_Type_create_f90_complex(U, U, &t)) == MPI_ERR_ARG, "complex: p and r both undefined");

  /* One handle per parameters: the same again, another for others. */
  CHECK(f90_real(15, 307) == f90_real(15, 307) && f90_int(9) == f90_int(9) && f90_complex(6, U) == f90_complex(6, U),
        "same parameters, same handle");
  CHECK(f90_int(9) != f90_int(5) && f90_real(15, 307) != f90_real(15, 300) && f90_real(6, U) != f90_complex(6, U),
        "other parameters, other handles");
  /* Predefined: MPI_Type_free refuses it and leaves the handle. */
  MPI_Datatype keep = f90_real(15, 307);
  CHECK(cls(MPI_Type_free(&keep)) == MPI_ERR_TYPE && keep == f90_real(15, 307), "Type_free of an F90 type");
  /* A duplicate names it as its constituent, as it is. */
  MPI_Datatype dup;
  CHECK(MPI_Type_dup(keep, &dup) == MPI_SUCCESS, "Type_dup of an F90 type");
  int ni, na, nd, comb;
  MPI_Type_get_envelope(dup, &ni, &na, &nd, &comb);
  CHECK(comb == MPI_COMBINER_DUP && ni == 0 && na == 0 && nd == 1, "dup envelope %d (%d %d %d)", comb, ni, na, nd);
  MPI_Datatype inner = MPI_DATATYPE_NULL;
  MPI_Type_get_contents(dup, 0, 0, 1, NULL, NULL, &inner);
  CHECK(inner == keep, "dup contents: %d, not the F90 handle %d", (int)inner, (int)keep);
  MPI_Type_free(&dup);

  /* The returned types communicate like the C types they are. */
  MPI_Datatype dt = f90_real(12, U);
  int size = 0;
  MPI_Type_size(dt, &size);
  CHECK(size == (int)sizeof(double), "f90_real(12) is 8 bytes (%d)", size);
  double x[3] = {1.5, -2.25, 1e300}, y[3] = {0, 0, 0};
  int peer = (mt_rank + 1) % mt_size, from = (mt_rank + mt_size - 1) % mt_size;
  MPI_Sendrecv(x, 3, dt, peer, 5, y, 3, dt, from, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  CHECK(y[0] == 1.5 && y[1] == -2.25 && y[2] == 1e300, "doubles through f90_real(12)");
  long long s = mt_rank + 1, sum = 0;
  MPI_Allreduce(&s, &sum, 1, f90_int(15), MPI_SUM, MPI_COMM_WORLD);
  CHECK(sum == (long long)mt_size * (mt_size + 1) / 2, "Allreduce on f90_integer(15): %lld", sum);
  return mt_pass();
}
