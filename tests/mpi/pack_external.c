/* MPI_Pack_external / MPI_Unpack_external / MPI_Pack_external_size with
 * "external32": the standard's sizes, big-endian bytes, round trips of
 * basic and derived types, an external32 buffer sent as MPI_BYTE and
 * unpacked by the receiver, and the errors (unknown datarep, no space). */
#include <stdint.h>

#include "mpitest.h"

static const char* ext32 = "external32";

static MPI_Aint ext_size(MPI_Datatype t, int count) {
  MPI_Aint n = -1;
  MPI_Pack_external_size(ext32, count, t, &n);
  return n;
}

static void check_bytes(MPI_Datatype t, const void* v, const unsigned char* want, int n, const char* what) {
  unsigned char out[32];
  MPI_Aint pos = 0;
  MPI_Pack_external(ext32, v, 1, t, out, sizeof out, &pos);
  CHECK(pos == n, "%s: %ld bytes, want %d", what, (long)pos, n);
  for (int i = 0; i < n; ++i) CHECK(out[i] == want[i], "%s: byte %d is %02x, want %02x", what, i, out[i], want[i]);
}

int main(int argc, char** argv) {
  mt_start("pack_external", &argc, &argv);
  char text[MPI_MAX_ERROR_STRING];

  /* sizes from the MPI-3.1 13.5.2 table */
  struct { MPI_Datatype t; MPI_Aint n; const char* name; } sizes[] = {
      {MPI_CHAR, 1, "char"},       {MPI_SHORT, 2, "short"},        {MPI_INT, 4, "int"},
      {MPI_LONG, 4, "long"},       {MPI_UNSIGNED_LONG, 4, "ulong"}, {MPI_LONG_LONG, 8, "long long"},
      {MPI_FLOAT, 4, "float"},     {MPI_DOUBLE, 8, "double"},      {MPI_LONG_DOUBLE, 16, "long double"},
      {MPI_WCHAR, 4, "wchar"},     {MPI_C_BOOL, 1, "bool"},        {MPI_INT64_T, 8, "int64"},
      {MPI_AINT, 8, "aint"},       {MPI_OFFSET, 8, "offset"},      {MPI_COUNT, 8, "count"},
      {MPI_C_DOUBLE_COMPLEX, 16, "double complex"},               {MPI_DOUBLE_INT, 12, "double int"},
      {MPI_SHORT_INT, 6, "short int"}, {MPI_BYTE, 1, "byte"},     {MPI_PACKED, 1, "packed"},
  };
  for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; ++i)
    CHECK(ext_size(sizes[i].t, 5) == 5 * sizes[i].n, "%s: %ld", sizes[i].name, (long)ext_size(sizes[i].t, 5));

  /* byte-exact encodings */
  const int one = 1;
  const unsigned char e_one[] = {0, 0, 0, 1};
  check_bytes(MPI_INT, &one, e_one, 4, "int 1");
  const double d = 1.0;
  const unsigned char e_d[] = {0x3f, 0xf0, 0, 0, 0, 0, 0, 0};
  check_bytes(MPI_DOUBLE, &d, e_d, 8, "double 1.0");
  const long l = -2;
  const unsigned char e_l[] = {0xff, 0xff, 0xff, 0xfe};
  check_bytes(MPI_LONG, &l, e_l, 4, "long -2");
  const uint16_t u16 = 0xabcd;
  const unsigned char e_u16[] = {0xab, 0xcd};
  check_bytes(MPI_UINT16_T, &u16, e_u16, 2, "uint16 0xabcd");
  const struct { float v; int i; } fi = {0.5f, 3};
  const unsigned char e_fi[] = {0x3f, 0, 0, 0, 0, 0, 0, 3};
  check_bytes(MPI_FLOAT_INT, &fi, e_fi, 8, "float_int {0.5, 3}");

  /* a derived type: the third column of a 4x5 matrix of doubles, twice,
   * plus an int header, as a struct */
  double a[4][5];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 5; ++j) a[i][j] = mt_rank * 1000 + i * 10 + j + 0.25;
  MPI_Datatype col, rec;
  MPI_Type_vector(4, 1, 5, MPI_DOUBLE, &col);
  struct rec_s { int n; double m[4][5]; } s;
  s.n = 77;
  memcpy(s.m, a, sizeof a);
  int bl[2] = {1, 1};
  MPI_Aint disp[2] = {(char*)&s.n - (char*)&s, (char*)&s.m[0][2] - (char*)&s};
  MPI_Datatype types[2] = {MPI_INT, col};
  MPI_Type_create_struct(2, bl, disp, types, &rec);
  MPI_Type_commit(&rec);
  CHECK(ext_size(rec, 1) == 4 + 32, "struct size %ld", (long)ext_size(rec, 1));
  unsigned char buf[64];
  MPI_Aint pos = 0;
  MPI_Pack_external(ext32, &s, 1, rec, buf, sizeof buf, &pos);
  CHECK(pos == 36, "packed %ld", (long)pos);
  CHECK(buf[0] == 0 && buf[3] == 77, "header %02x %02x", buf[0], buf[3]);
  /* unpack into a zeroed copy: only the column and the header come back */
  struct rec_s z;
  memset(&z, 0, sizeof z);
  pos = 0;
  MPI_Unpack_external(ext32, buf, 36, &pos, &z, 1, rec);
  CHECK(pos == 36 && z.n == 77, "unpacked header %d at %ld", z.n, (long)pos);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 5; ++j)
      CHECK(z.m[i][j] == (j == 2 ? a[i][j] : 0.0), "z.m[%d][%d] = %g", i, j, z.m[i][j]);

  /* the external form travels as bytes; the receiver unpacks it */
  int next = (mt_rank + 1) % mt_size, prev = (mt_rank + mt_size - 1) % mt_size;
  unsigned char in[64];
  MPI_Sendrecv(buf, 36, MPI_BYTE, next, 5, in, 36, MPI_BYTE, prev, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  memset(&z, 0, sizeof z);
  pos = 0;
  MPI_Unpack_external(ext32, in, 36, &pos, &z, 1, rec);
  for (int i = 0; i < 4; ++i)
    CHECK(z.m[i][2] == prev * 1000 + i * 10 + 2 + 0.25, "from rank %d: row %d %g", prev, i, z.m[i][2]);

  /* positioned packing of several calls */
  const short sh[3] = {-1, 2, -3};
  pos = 0;
  MPI_Pack_external(ext32, sh, 3, MPI_SHORT, buf, sizeof buf, &pos);
  MPI_Pack_external(ext32, &one, 1, MPI_INT, buf, sizeof buf, &pos);
  CHECK(pos == 10, "two packs: %ld", (long)pos);
  short sh2[3];
  int one2 = 0;
  pos = 0;
  MPI_Unpack_external(ext32, buf, 10, &pos, sh2, 3, MPI_SHORT);
  MPI_Unpack_external(ext32, buf, 10, &pos, &one2, 1, MPI_INT);
  CHECK(sh2[0] == -1 && sh2[1] == 2 && sh2[2] == -3 && one2 == 1, "round trip %d %d %d %d", sh2[0], sh2[1],
        sh2[2], one2);

  /* errors */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Aint n = 0;
  int err = MPI_Pack_external_size("native", 1, MPI_INT, &n);
  CHECK(mt_error(err, text) == MPI_ERR_ARG, "datarep native: %s", text);
  pos = 0;
  err = MPI_Pack_external("internal", &one, 1, MPI_INT, buf, sizeof buf, &pos);
  CHECK(mt_error(err, text) == MPI_ERR_ARG, "datarep internal: %s", text);
  pos = 0;
  err = MPI_Pack_external(ext32, &s, 1, rec, buf, 20, &pos);
  CHECK(mt_error(err, text) == MPI_ERR_NO_SPACE, "no space: %s", text);
  pos = 0;
  err = MPI_Unpack_external(ext32, buf, 20, &pos, &z, 1, rec);
  CHECK(mt_error(err, text) == MPI_ERR_TRUNCATE, "short input: %s", text);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);

  MPI_Type_free(&rec);
  MPI_Type_free(&col);
  return mt_pass();
}
