/* Datatype errors with MPI_ERRORS_RETURN: each bad argument gives the
 * right class (and a message naming the problem), and nothing changes. */
#include "mpitest.h"

static void expect(int err, int cls, const char* what) {
  int c = -1;
  MPI_Error_class(err, &c);
  if (c != cls) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(err, text, &len);
    mt_fail(__LINE__, what, "class %d, want %d (%s)", c, cls, text);
  }
}

int main(int argc, char** argv) {
  mt_start("type_errors", &argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Datatype t = MPI_DATATYPE_NULL, u;
  int ints[4] = {1, 1, 1, 1};
  MPI_Aint addrs[4] = {0, 8, 16, 24};

  expect(MPI_Type_contiguous(-1, MPI_INT, &t), MPI_ERR_COUNT, "negative count");
  expect(MPI_Type_contiguous(2, MPI_DATATYPE_NULL, &t), MPI_ERR_TYPE, "MPI_DATATYPE_NULL oldtype");
  expect(MPI_Type_contiguous(2, 12345, &t), MPI_ERR_TYPE, "unknown oldtype");
  expect(MPI_Type_contiguous(2, MPI_INT, NULL), MPI_ERR_ARG, "null newtype");
  expect(MPI_Type_vector(2, -1, 3, MPI_INT, &t), MPI_ERR_ARG, "negative blocklength");
  int neg[2] = {1, -2}, dsp[2] = {0, 4};
  expect(MPI_Type_indexed(2, neg, dsp, MPI_INT, &t), MPI_ERR_ARG, "indexed negative blocklength");
  expect(MPI_Type_indexed(2, NULL, dsp, MPI_INT, &t), MPI_ERR_ARG, "null blocklengths");
  MPI_Datatype tys[2] = {MPI_INT, 999};
  expect(MPI_Type_create_struct(2, ints, addrs, tys, &t), MPI_ERR_TYPE, "bad struct member type");
  int sz[2] = {4, 4}, sub[2] = {2, 2}, st_bad[2] = {3, 0}, st_ok[2] = {0, 0};
  expect(MPI_Type_create_subarray(2, sz, sub, st_bad, MPI_ORDER_C, MPI_INT, &t), MPI_ERR_ARG, "subarray start");
  expect(MPI_Type_create_subarray(2, sz, sub, st_ok, 12345, MPI_INT, &t), MPI_ERR_ARG, "subarray order");
  expect(MPI_Type_create_subarray(0, sz, sub, st_ok, MPI_ORDER_C, MPI_INT, &t), MPI_ERR_ARG, "subarray ndims");
  CHECK(t == MPI_DATATYPE_NULL, "no type created by failed calls");

  MPI_Datatype pre = MPI_INT;
  expect(MPI_Type_free(&pre), MPI_ERR_TYPE, "free of a predefined type");
  CHECK(pre == MPI_INT, "predefined handle unchanged");
  MPI_Datatype nul = MPI_DATATYPE_NULL;
  expect(MPI_Type_commit(&nul), MPI_ERR_TYPE, "commit MPI_DATATYPE_NULL");
  expect(MPI_Type_free(&nul), MPI_ERR_TYPE, "free MPI_DATATYPE_NULL");
  int ni, na, nd, comb, size;
  expect(MPI_Type_get_contents(MPI_INT, 4, 4, 4, ints, addrs, tys), MPI_ERR_TYPE, "contents of a named type");
  expect(MPI_Type_get_envelope(77777, &ni, &na, &nd, &comb), MPI_ERR_TYPE, "envelope of an unknown handle");
  expect(MPI_Type_size(MPI_DATATYPE_NULL, &size), MPI_ERR_TYPE, "size of MPI_DATATYPE_NULL");
  expect(MPI_Type_size(MPI_INT, NULL), MPI_ERR_ARG, "null size");

  /* Uncommitted type in communication. */
  MPI_Type_vector(2, 1, 2, MPI_INT, &u);
  int buf[8] = {0};
  MPI_Request rq = MPI_REQUEST_NULL;
  expect(MPI_Send(buf, 1, u, mt_rank, 1, MPI_COMM_WORLD), MPI_ERR_TYPE, "Send with an uncommitted type");
  expect(MPI_Irecv(buf, 1, u, mt_rank, 1, MPI_COMM_WORLD, &rq), MPI_ERR_TYPE, "Irecv with an uncommitted type");
  CHECK(rq == MPI_REQUEST_NULL, "no request");
  expect(MPI_Send_init(buf, 1, u, mt_rank, 1, MPI_COMM_WORLD, &rq), MPI_ERR_TYPE, "Send_init uncommitted");
  MPI_Status st;
  expect(MPI_Sendrecv(buf, 1, MPI_INT, mt_rank, 1, buf + 4, 1, u, mt_rank, 1, MPI_COMM_WORLD, &st), MPI_ERR_TYPE,
         "Sendrecv with an uncommitted receive type");
  /* Queries work on uncommitted types. */
  CHECK(MPI_Type_size(u, &size) == MPI_SUCCESS && size == 8, "size of uncommitted");
  MPI_Type_get_envelope(u, &ni, &na, &nd, &comb);
  CHECK(comb == MPI_COMBINER_VECTOR, "envelope of uncommitted");

  /* Freed handle. */
  MPI_Datatype freed = u;
  MPI_Type_free(&u);
  expect(MPI_Type_commit(&freed), MPI_ERR_TYPE, "commit a freed handle");
  expect(MPI_Send(buf, 1, freed, mt_rank, 1, MPI_COMM_WORLD), MPI_ERR_TYPE, "Send with a freed handle");
  expect(MPI_Type_free(&freed), MPI_ERR_TYPE, "double free");
  int cnt;
  st.nmad_count = 8;
  expect(MPI_Get_count(&st, freed, &cnt), MPI_ERR_TYPE, "Get_count with a freed handle");

  /* Truncation of a staged (non-contiguous) receive. */
  MPI_Datatype ev;
  MPI_Type_vector(2, 1, 2, MPI_INT, &ev);
  MPI_Type_commit(&ev);
  int big[6] = {1, 2, 3, 4, 5, 6}, small[8];
  for (int k = 0; k < 8; ++k) small[k] = -1;
  int err = MPI_Sendrecv(big, 3, MPI_INT, mt_rank, 2, small, 1, ev, mt_rank, 2, MPI_COMM_WORLD, &st);
  expect(err, MPI_ERR_TRUNCATE, "staged receive truncated");
  CHECK(small[0] == 1 && small[1] == -1 && small[2] == 2 && small[3] == -1, "the bytes that fit were unpacked");
  MPI_Irecv(small, 1, ev, mt_rank, 3, MPI_COMM_WORLD, &rq);
  MPI_Send(big, 6, MPI_INT, mt_rank, 3, MPI_COMM_WORLD);
  expect(MPI_Wait(&rq, &st), MPI_ERR_TRUNCATE, "Irecv staged truncated");

  /* Contents arrays too small. */
  MPI_Datatype tys1[1];
  int one_int[1];
  expect(MPI_Type_get_contents(ev, 1, 0, 1, one_int, addrs, tys1), MPI_ERR_ARG, "contents arrays too small");
  /* Get_address with null output. */
  expect(MPI_Get_address(buf, NULL), MPI_ERR_ARG, "Get_address null");
  MPI_Type_free(&ev);
  return mt_pass();
}
