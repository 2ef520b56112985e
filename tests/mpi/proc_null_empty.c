/* A transfer of nothing with MPI_PROC_NULL may name MPI_DATATYPE_NULL (as
 * MPICH and Open MPI accept): every send mode, Recv, Irecv, Sendrecv and
 * persistent requests complete at once; a receive's status says source
 * MPI_PROC_NULL, tag MPI_ANY_TAG, count 0. With a real peer it is a message
 * of nothing, matched as any other. MPI_DATATYPE_NULL is still MPI_ERR_TYPE
 * with a non-zero count. */
#include "mpitest.h"

static int cls(int err) {
  char text[MPI_MAX_ERROR_STRING];
  return mt_error(err, text);
}

static void check_null_status(const MPI_Status* st, const char* what) {
  int count = -1;
  MPI_Get_count(st, MPI_BYTE, &count);
  CHECK(st->MPI_SOURCE == MPI_PROC_NULL && st->MPI_TAG == MPI_ANY_TAG && count == 0,
        "%s: status (%d, %d, count %d)", what, st->MPI_SOURCE, st->MPI_TAG, count);
}

int main(int argc, char** argv) {
  mt_start("proc_null_empty", &argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const MPI_Datatype N = MPI_DATATYPE_NULL;
  const MPI_Comm W = MPI_COMM_WORLD;
  MPI_Status st;
  char bsend_buf[MPI_BSEND_OVERHEAD + 16];
  MPI_Buffer_attach(bsend_buf, sizeof bsend_buf);

  CHECK(MPI_Send(NULL, 0, N, MPI_PROC_NULL, 1, W) == MPI_SUCCESS, "Send");
  CHECK(MPI_Ssend(NULL, 0, N, MPI_PROC_NULL, 1, W) == MPI_SUCCESS, "Ssend");
  CHECK(MPI_Rsend(NULL, 0, N, MPI_PROC_NULL, 1, W) == MPI_SUCCESS, "Rsend");
  CHECK(MPI_Bsend(NULL, 0, N, MPI_PROC_NULL, 1, W) == MPI_SUCCESS, "Bsend");
  CHECK(MPI_Recv(NULL, 0, N, MPI_PROC_NULL, 1, W, &st) == MPI_SUCCESS, "Recv");
  check_null_status(&st, "Recv");

  MPI_Request r[3];
  int done = 0;
  CHECK(MPI_Isend(NULL, 0, N, MPI_PROC_NULL, 1, W, &r[0]) == MPI_SUCCESS, "Isend");
  CHECK(MPI_Irecv(NULL, 0, N, MPI_PROC_NULL, 1, W, &r[1]) == MPI_SUCCESS, "Irecv");
  CHECK(MPI_Issend(NULL, 0, N, MPI_PROC_NULL, 1, W, &r[2]) == MPI_SUCCESS, "Issend");
  CHECK(MPI_Test(&r[1], &done, &st) == MPI_SUCCESS && done && r[1] == MPI_REQUEST_NULL, "Irecv completes at once");
  check_null_status(&st, "Irecv");
  CHECK(MPI_Waitall(3, r, MPI_STATUSES_IGNORE) == MPI_SUCCESS, "Waitall");

  CHECK(MPI_Sendrecv(NULL, 0, N, MPI_PROC_NULL, 1, NULL, 0, N, MPI_PROC_NULL, 1, W, &st) == MPI_SUCCESS, "Sendrecv");
  check_null_status(&st, "Sendrecv");

  MPI_Request p[2];
  CHECK(MPI_Send_init(NULL, 0, N, MPI_PROC_NULL, 1, W, &p[0]) == MPI_SUCCESS, "Send_init");
  CHECK(MPI_Recv_init(NULL, 0, N, MPI_PROC_NULL, 1, W, &p[1]) == MPI_SUCCESS, "Recv_init");
  for (int round = 0; round < 2; ++round) {
    MPI_Status sts[2];
    CHECK(MPI_Startall(2, p) == MPI_SUCCESS, "Startall");
    CHECK(MPI_Waitall(2, p, sts) == MPI_SUCCESS, "Waitall persistent");
    check_null_status(&sts[1], "persistent receive");
  }
  MPI_Request_free(&p[0]);
  MPI_Request_free(&p[1]);

  /* A real peer: a message of nothing, matched like any other (MPICH
   * accepts it too; Open MPI says MPI_ERR_TYPE). */
  int x = 0;
  CHECK(MPI_Isend(&x, 0, N, mt_rank, 1, W, &r[0]) == MPI_SUCCESS, "Isend of nothing to self");
  CHECK(MPI_Recv(&x, 0, N, mt_rank, 1, W, &st) == MPI_SUCCESS, "Recv of nothing from self");
  CHECK(MPI_Wait(&r[0], MPI_STATUS_IGNORE) == MPI_SUCCESS, "Wait");
  int got = -1;
  MPI_Get_count(&st, MPI_BYTE, &got);
  CHECK(st.MPI_SOURCE == mt_rank && st.MPI_TAG == 1 && got == 0, "status of nothing: %d %d %d", st.MPI_SOURCE,
        st.MPI_TAG, got);
  CHECK(MPI_Recv_init(&x, 0, N, MPI_ANY_SOURCE, 2, W, &p[0]) == MPI_SUCCESS, "Recv_init of nothing");
  CHECK(MPI_Send(&x, 0, N, mt_rank, 2, W) == MPI_SUCCESS, "Send of nothing to self");
  MPI_Start(&p[0]);
  CHECK(MPI_Wait(&p[0], &st) == MPI_SUCCESS && st.MPI_TAG == 2, "persistent receive of nothing");
  MPI_Request_free(&p[0]);
  /* Still an error: data would move. */
  CHECK(cls(MPI_Send(&x, 1, N, MPI_PROC_NULL, 1, W)) == MPI_ERR_TYPE, "count 1 with MPI_DATATYPE_NULL");
  CHECK(cls(MPI_Send(&x, 1, N, mt_rank, 1, W)) == MPI_ERR_TYPE, "count 1 to a real peer");
  void* b;
  int bs;
  MPI_Buffer_detach(&b, &bs);
  return mt_pass();
}
