/* Predefined handles are non-negative (like every handle of this MPI), and
 * the special ones behave: MPI_MESSAGE_NO_PROC from Mprobe/Improbe on
 * MPI_PROC_NULL is received by Mrecv/Imrecv and becomes MPI_MESSAGE_NULL,
 * real matched messages get handles distinct from both; MPI_Errhandler_free
 * of MPI_ERRHANDLER_NULL or of an unknown handle is MPI_ERR_ARG. */
#include "mpitest.h"

static int cls(int err) {
  char text[MPI_MAX_ERROR_STRING];
  return mt_error(err, text);
}

int main(int argc, char** argv) {
  mt_start("handles", &argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const long handles[] = {MPI_COMM_NULL,     MPI_COMM_WORLD,      MPI_COMM_SELF,       MPI_REQUEST_NULL,
                          MPI_MESSAGE_NULL,  MPI_MESSAGE_NO_PROC, MPI_ERRHANDLER_NULL, MPI_ERRORS_ARE_FATAL,
                          MPI_ERRORS_RETURN, MPI_DATATYPE_NULL,   MPI_OP_NULL,         MPI_GROUP_NULL,
                          MPI_GROUP_EMPTY,   MPI_INFO_NULL,       MPI_INFO_ENV,        MPI_WIN_NULL,
                          MPI_FILE_NULL};
  for (int i = 0; i < (int)(sizeof handles / sizeof handles[0]); ++i)
    CHECK(handles[i] >= 0, "predefined handle %d is negative (%ld)", i, handles[i]);
  CHECK(MPI_MESSAGE_NO_PROC != MPI_MESSAGE_NULL, "NO_PROC is not NULL");

  /* MPI_MESSAGE_NO_PROC round trips. */
  MPI_Message m = MPI_MESSAGE_NULL;
  MPI_Status st;
  int buf = 7, flag = 0;
  CHECK(MPI_Mprobe(MPI_PROC_NULL, 3, MPI_COMM_WORLD, &m, &st) == MPI_SUCCESS && m == MPI_MESSAGE_NO_PROC,
        "Mprobe(PROC_NULL) gives MPI_MESSAGE_NO_PROC (%d)", m);
  CHECK(MPI_Mrecv(&buf, 1, MPI_INT, &m, &st) == MPI_SUCCESS && m == MPI_MESSAGE_NULL &&
            st.MPI_SOURCE == MPI_PROC_NULL && buf == 7, "Mrecv of NO_PROC");
  CHECK(MPI_Improbe(MPI_PROC_NULL, 3, MPI_COMM_WORLD, &flag, &m, &st) == MPI_SUCCESS && flag &&
            m == MPI_MESSAGE_NO_PROC, "Improbe(PROC_NULL)");
  MPI_Request r;
  CHECK(MPI_Imrecv(&buf, 1, MPI_INT, &m, &r) == MPI_SUCCESS && m == MPI_MESSAGE_NULL, "Imrecv of NO_PROC");
  MPI_Wait(&r, &st);
  CHECK(st.MPI_SOURCE == MPI_PROC_NULL, "Imrecv status");
  /* A real matched message (to self): its handle is neither NULL nor NO_PROC. */
  int v = 41, w = 0;
  MPI_Isend(&v, 1, MPI_INT, mt_rank, 9, MPI_COMM_WORLD, &r);
  MPI_Mprobe(mt_rank, 9, MPI_COMM_WORLD, &m, &st);
  CHECK(m != MPI_MESSAGE_NULL && m != MPI_MESSAGE_NO_PROC && m > 0, "message handle %d", m);
  MPI_Mrecv(&w, 1, MPI_INT, &m, &st);
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  CHECK(w == 41 && m == MPI_MESSAGE_NULL && st.MPI_SOURCE == mt_rank, "Mrecv of a real message");
  CHECK(cls(MPI_Mrecv(&w, 1, MPI_INT, &m, &st)) == MPI_ERR_REQUEST, "Mrecv of MPI_MESSAGE_NULL");

  /* Errhandler_free. */
  MPI_Errhandler h = MPI_ERRHANDLER_NULL;
  CHECK(cls(MPI_Errhandler_free(&h)) == MPI_ERR_ARG, "Errhandler_free(MPI_ERRHANDLER_NULL)");
  h = 4242;
  CHECK(cls(MPI_Errhandler_free(&h)) == MPI_ERR_ARG, "Errhandler_free(unknown)");
  h = MPI_ERRORS_RETURN;
  CHECK(MPI_Errhandler_free(&h) == MPI_SUCCESS && h == MPI_ERRHANDLER_NULL, "freeing a predefined handler");
  return mt_pass();
}
