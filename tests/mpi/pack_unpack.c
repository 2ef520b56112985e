/* MPI_Pack of several types (an int, a vector, a struct) into one buffer,
 * sent as MPI_PACKED and unpacked on the other side; a packed message
 * received with the original derived type and vice versa; MPI_Pack_size;
 * errors: packing past outsize (MPI_ERR_NO_SPACE), unpacking past insize
 * (MPI_ERR_TRUNCATE), with MPI_ERRORS_RETURN. Ring exchange: any count. */
#include "mpitest.h"

typedef struct {
  short s;
  double d;
} sd;

int main(int argc, char** argv) {
  mt_start("pack_unpack", &argc, &argv);
  int next = (mt_rank + 1) % mt_size, prev = (mt_rank + mt_size - 1) % mt_size;
  MPI_Status st;

  int n = 3 + mt_rank;
  int m[5][4];
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 4; ++j) m[i][j] = mt_rank * 100 + i * 10 + j;
  MPI_Datatype col;
  MPI_Type_vector(5, 1, 4, MPI_INT, &col);
  MPI_Type_commit(&col);
  MPI_Datatype col1; /* a column whose extent is one int: count 2 = two adjacent columns */
  MPI_Type_create_resized(col, 0, sizeof(int), &col1);
  MPI_Type_commit(&col1);
  sd items[2] = {{(short)(mt_rank + 1), mt_rank * 1.5}, {(short)-(mt_rank + 1), -mt_rank * 1.5}};
  int bl[2] = {1, 1};
  MPI_Aint dp[2] = {offsetof(sd, s), offsetof(sd, d)};
  MPI_Datatype tys[2] = {MPI_SHORT, MPI_DOUBLE}, sdt;
  MPI_Type_create_struct(2, bl, dp, tys, &sdt);
  MPI_Type_commit(&sdt);

  int s1, s2, s3;
  MPI_Pack_size(1, MPI_INT, MPI_COMM_WORLD, &s1);
  MPI_Pack_size(2, col1, MPI_COMM_WORLD, &s2);
  MPI_Pack_size(2, sdt, MPI_COMM_WORLD, &s3);
  CHECK(s1 >= 4 && s2 >= 40 && s3 >= 20, "Pack_size %d %d %d", s1, s2, s3);
  char buf[256];
  int pos = 0;
  MPI_Pack(&n, 1, MPI_INT, buf, sizeof buf, &pos, MPI_COMM_WORLD);
  CHECK(pos == 4, "pos after int %d", pos);
  MPI_Pack(&m[0][1], 2, col1, buf, sizeof buf, &pos, MPI_COMM_WORLD); /* columns 1 and 2 */
  MPI_Pack(items, 2, sdt, buf, sizeof buf, &pos, MPI_COMM_WORLD);
  CHECK(pos == 4 + 40 + 20, "packed %d bytes", pos);
  CHECK(pos <= s1 + s2 + s3, "Pack_size bound");

  char rbuf[256];
  MPI_Sendrecv(buf, pos, MPI_PACKED, next, 1, rbuf, sizeof rbuf, MPI_PACKED, prev, 1, MPI_COMM_WORLD, &st);
  int got = 0;
  MPI_Get_count(&st, MPI_PACKED, &got);
  CHECK(got == pos, "received %d packed bytes", got);
  int rn = 0, rpos = 0;
  int rm[5][4];
  memset(rm, 0, sizeof rm);
  sd ritems[2];
  memset(ritems, 0, sizeof ritems);
  MPI_Unpack(rbuf, got, &rpos, &rn, 1, MPI_INT, MPI_COMM_WORLD);
  MPI_Unpack(rbuf, got, &rpos, &rm[0][1], 2, col1, MPI_COMM_WORLD);
  MPI_Unpack(rbuf, got, &rpos, ritems, 2, sdt, MPI_COMM_WORLD);
  CHECK(rpos == got && rn == 3 + prev, "unpacked n %d pos %d", rn, rpos);
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 4; ++j) {
      int want = (j == 1 || j == 2) ? prev * 100 + i * 10 + j : 0;
      CHECK(rm[i][j] == want, "unpacked rm[%d][%d] = %d want %d", i, j, rm[i][j], want);
    }
  CHECK(ritems[0].s == prev + 1 && ritems[0].d == prev * 1.5 && ritems[1].s == -(prev + 1) &&
            ritems[1].d == -prev * 1.5,
        "unpacked struct");

  /* Packed on one side, typed on the other (the same bytes on the wire). */
  int col_in[5];
  char cb[64];
  int cpos = 0;
  MPI_Pack(&m[0][3], 1, col, cb, sizeof cb, &cpos, MPI_COMM_WORLD);
  int rc[5][4];
  memset(rc, 0, sizeof rc);
  MPI_Sendrecv(cb, cpos, MPI_PACKED, next, 2, &rc[0][0], 1, col, prev, 2, MPI_COMM_WORLD, &st);
  for (int i = 0; i < 5; ++i) CHECK(rc[i][0] == prev * 100 + i * 10 + 3, "packed -> typed %d", i);
  char rcb[64];
  MPI_Sendrecv(&m[0][2], 1, col, next, 3, rcb, sizeof rcb, MPI_PACKED, prev, 3, MPI_COMM_WORLD, &st);
  MPI_Get_count(&st, MPI_PACKED, &got);
  int upos = 0;
  MPI_Unpack(rcb, got, &upos, col_in, 5, MPI_INT, MPI_COMM_WORLD);
  for (int i = 0; i < 5; ++i) CHECK(col_in[i] == prev * 100 + i * 10 + 2, "typed -> packed %d", i);

  /* Errors come back with MPI_ERRORS_RETURN and leave position alone. */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  char small[30];
  int spos = 0, cls = -1;
  int err = MPI_Pack(m, 2, col1, small, sizeof small, &spos, MPI_COMM_WORLD);
  MPI_Error_class(err, &cls);
  CHECK(cls == MPI_ERR_NO_SPACE, "pack overflow: class %d", cls);
  CHECK(spos == 0, "position untouched: %d", spos);
  spos = 20;
  int three[3] = {1, 2, 3};
  err = MPI_Pack(three, 3, MPI_INT, small, sizeof small, &spos, MPI_COMM_WORLD);
  MPI_Error_class(err, &cls);
  CHECK(cls == MPI_ERR_NO_SPACE, "pack overflow at position 20: class %d", cls);
  int upos2 = 0, tmp[8];
  err = MPI_Unpack(buf, 8, &upos2, tmp, 3, MPI_INT, MPI_COMM_WORLD);
  MPI_Error_class(err, &cls);
  CHECK(cls == MPI_ERR_TRUNCATE, "unpack past insize: class %d", cls);
  err = MPI_Pack(&n, 1, MPI_INT, small, sizeof small, NULL, MPI_COMM_WORLD);
  MPI_Error_class(err, &cls);
  CHECK(cls == MPI_ERR_ARG, "null position: class %d", cls);
  err = MPI_Pack_size(1, MPI_INT, MPI_COMM_NULL, &s1);
  MPI_Error_class(err, &cls);
  CHECK(cls == MPI_ERR_COMM, "Pack_size on MPI_COMM_NULL: class %d", cls);
  MPI_Datatype unc;
  MPI_Type_contiguous(2, MPI_INT, &unc);
  spos = 0;
  err = MPI_Pack(&n, 1, unc, small, sizeof small, &spos, MPI_COMM_WORLD);
  MPI_Error_class(err, &cls);
  CHECK(cls == MPI_ERR_TYPE, "pack with an uncommitted type: class %d", cls);
  MPI_Type_free(&unc);
  MPI_Type_free(&col);
  MPI_Type_free(&col1);
  MPI_Type_free(&sdt);
  return mt_pass();
}
