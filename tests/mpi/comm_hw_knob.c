/* A broken testing knob (NMAD_HW_BINDING not a CPU list) is raised at
 * every member of a hardware split, naming the rank and the variable; a
 * shared-memory split, which needs no binding, still works. */
#include "mpitest.h"

int main(int argc, char** argv) {
  mt_start("comm_hw_knob", &argc, &argv);
  MPI_Comm c = MPI_COMM_NULL;
  char text[MPI_MAX_ERROR_STRING];
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int err = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_HW_UNGUIDED, 0, MPI_INFO_NULL, &c);
  int cls = mt_error(err, text);
  CHECK(cls == MPI_ERR_OTHER && c == MPI_COMM_NULL, "class %d (%s)", cls, text);
  err = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &c);
  CHECK(err == MPI_SUCCESS && c != MPI_COMM_NULL, "shared split failed");
  MPI_Comm_free(&c);
  return mt_pass();
}
