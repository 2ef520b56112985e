/* With MPI_ERRORS_RETURN a receive too small returns MPI_ERR_TRUNCATE (in
 * Recv, in Wait, and in Waitall's statuses) and the program goes on. */
#include "mpitest.h"

int main(int argc, char** argv) {
  mt_start("truncate", &argc, &argv);
  CHECK(mt_size == 2, "needs 2 processes");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Errhandler eh;
  MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh);
  CHECK(eh == MPI_ERRORS_RETURN, "get_errhandler");
  static int big[100000];
  for (int i = 0; i < 100000; ++i) big[i] = i;
  if (mt_rank == 0) {
    MPI_Send(big, 100, MPI_INT, 1, 1, MPI_COMM_WORLD);      /* eager */
    MPI_Send(big, 100000, MPI_INT, 1, 2, MPI_COMM_WORLD);   /* rendezvous */
    MPI_Send(big, 50, MPI_INT, 1, 3, MPI_COMM_WORLD);
    MPI_Send(big, 10, MPI_INT, 1, 4, MPI_COMM_WORLD);       /* after the errors: fine */
  } else {
    static int small[10];
    MPI_Status st;
    int err = MPI_Recv(small, 10, MPI_INT, 0, 1, MPI_COMM_WORLD, &st);
    int cls = -1;
    MPI_Error_class(err, &cls);
    CHECK(cls == MPI_ERR_TRUNCATE, "eager: error %d class %d", err, cls);
    CHECK(small[9] == 9, "the bytes that fit were delivered");
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(err, text, &len);
    CHECK(strstr(text, "TRUNCATE") != NULL, "Error_string '%s'", text);
    MPI_Request r;
    MPI_Irecv(small, 10, MPI_INT, 0, 2, MPI_COMM_WORLD, &r);
    err = MPI_Wait(&r, &st);
    CHECK(err == MPI_ERR_TRUNCATE, "rendezvous: error %d", err);
    MPI_Request rs[2];
    MPI_Status sts[2];
    static int ok[50];
    MPI_Irecv(small, 10, MPI_INT, 0, 3, MPI_COMM_WORLD, &rs[0]);
    MPI_Irecv(ok, 50, MPI_INT, 0, 4, MPI_COMM_WORLD, &rs[1]);
    err = MPI_Waitall(2, rs, sts);
    CHECK(err == MPI_ERR_IN_STATUS, "Waitall: error %d", err);
    CHECK(sts[0].MPI_ERROR == MPI_ERR_TRUNCATE && sts[1].MPI_ERROR == MPI_SUCCESS, "Waitall statuses %d %d",
          sts[0].MPI_ERROR, sts[1].MPI_ERROR);
    CHECK(ok[9] == 9, "the good receive completed");
  }
  return mt_pass();
}
