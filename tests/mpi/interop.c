/* MPI_Status_c2f/f2c copy a real receive status both ways (source, tag and
 * error at MPI_F_SOURCE/TAG/ERROR; Get_count still works on the copy), and
 * MPI_Type_create_f90_integer/real/complex return the smallest predefined
 * type with the requested precision and range, usable for communication;
 * out-of-range requests are MPI_ERR_ARG. */
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
  CHECK(f90_int(1) == MPI_INT8_T && f90_int(2) == MPI_INT8_T, "r <= 2: 8 bits");
  CHECK(f90_int(3) == MPI_INT16_T && f90_int(4) == MPI_INT16_T, "r <= 4: 16 bits");
  CHECK(f90_int(5) == MPI_INT32_T && f90_int(9) == MPI_INT32_T, "r <= 9: 32 bits");
  CHECK(f90_int(10) == MPI_INT64_T && f90_int(18) == MPI_INT64_T, "r <= 18: 64 bits");
  MPI_Datatype t = MPI_INT;
  CHECK(cls(MPI_Type_create_f90_integer(19, &t)) == MPI_ERR_ARG && t == MPI_DATATYPE_NULL, "r = 19: none");

  /* SELECTED_REAL_KIND: precision and range both satisfied. */
  CHECK(f90_real(FLT_DIG, U) == MPI_FLOAT && f90_real(FLT_DIG + 1, U) == MPI_DOUBLE, "precision float/double");
  CHECK(f90_real(U, 37) == MPI_FLOAT && f90_real(U, 38) == MPI_DOUBLE, "range float/double");
  CHECK(f90_real(6, 37) == MPI_FLOAT && f90_real(15, 307) == MPI_DOUBLE && f90_real(3, 300) == MPI_DOUBLE,
        "both");
  if (LDBL_DIG > DBL_DIG) CHECK(f90_real(DBL_DIG + 1, U) == MPI_LONG_DOUBLE, "wider than double: long double");
  CHECK(cls(MPI_Type_create_f90_real(LDBL_DIG + 1, U, &t)) == MPI_ERR_ARG && t == MPI_DATATYPE_NULL,
        "more precision than any type");
  CHECK(cls(MPI_Type_create_f90_real(U, 100000, &t)) == MPI_ERR_ARG, "more range than any type");
  CHECK(cls(MPI_Type_create_f90_real(U, U, &t)) == MPI_ERR_ARG, "p and r both undefined");
  CHECK(f90_complex(6, U) == MPI_C_FLOAT_COMPLEX && f90_complex(15, 300) == MPI_C_DOUBLE_COMPLEX, "complex");
  CHECK(cls(MPI_Type_create_f90_complex(U, U, &t)) == MPI_ERR_ARG, "complex: p and r both undefined");

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
