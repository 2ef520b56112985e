/* Pcontrol, Comm_get_parent, Status_set_cancelled/Test_cancelled, and the
 * C <-> Fortran handle conversions round-trip. */
#include "mpitest.h"

int main(int argc, char** argv) {
  mt_start("misc", &argc, &argv);
  CHECK(MPI_Pcontrol(1) == MPI_SUCCESS && MPI_Pcontrol(0) == MPI_SUCCESS, "Pcontrol");
  MPI_Comm parent = MPI_COMM_WORLD;
  MPI_Comm_get_parent(&parent);
  CHECK(parent == MPI_COMM_NULL, "no parent (%d)", parent);
  MPI_Status st;
  int flag = -1;
  MPI_Status_set_cancelled(&st, 1);
  MPI_Test_cancelled(&st, &flag);
  CHECK(flag == 1, "Status_set_cancelled(1) read back %d", flag);
  MPI_Status_set_cancelled(&st, 0);
  MPI_Test_cancelled(&st, &flag);
  CHECK(flag == 0, "Status_set_cancelled(0) read back %d", flag);

  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  MPI_Fint f = MPI_Comm_c2f(dup);
  MPI_Comm back = MPI_Comm_f2c(f);
  CHECK(back == dup, "Comm c2f/f2c");
  int r1, r2;
  MPI_Comm_rank(back, &r1);
  MPI_Comm_rank(MPI_COMM_WORLD, &r2);
  CHECK(r1 == r2, "converted communicator works");
  CHECK(MPI_Type_f2c(MPI_Type_c2f(MPI_DOUBLE)) == MPI_DOUBLE, "Type c2f/f2c");
  CHECK(MPI_Op_f2c(MPI_Op_c2f(MPI_SUM)) == MPI_SUM, "Op c2f/f2c");
  MPI_Group g;
  MPI_Comm_group(dup, &g);
  CHECK(MPI_Group_f2c(MPI_Group_c2f(g)) == g, "Group c2f/f2c");
  MPI_Group_free(&g);
  CHECK(MPI_Request_f2c(MPI_Request_c2f(MPI_REQUEST_NULL)) == MPI_REQUEST_NULL, "Request c2f/f2c");
  CHECK(MPI_Info_f2c(MPI_Info_c2f(MPI_INFO_NULL)) == MPI_INFO_NULL, "Info c2f/f2c");
  CHECK(MPI_Errhandler_f2c(MPI_Errhandler_c2f(MPI_ERRORS_RETURN)) == MPI_ERRORS_RETURN, "Errhandler c2f/f2c");
  CHECK(MPI_Message_f2c(MPI_Message_c2f(MPI_MESSAGE_NULL)) == MPI_MESSAGE_NULL, "Message c2f/f2c");
  MPI_Comm_free(&dup);
  return mt_pass();
}
