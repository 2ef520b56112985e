// Small calls programs expect to find: MPI_Pcontrol (profiling control, a
// no-op without a profiler), MPI_Comm_get_parent (no dynamic processes:
// always MPI_COMM_NULL), MPI_Status_set_cancelled, and the C <-> Fortran
// handle conversions (our handles are already ints: identity).
#include "mpi_layer/mpi_impl.hpp"

using namespace nmad::mpi;

extern "C" {

int PMPI_Pcontrol(const int level, ...) {
  (void)level;
  return MPI_SUCCESS;
}

int PMPI_Comm_get_parent(MPI_Comm* parent) {
  if (!check_initialized("MPI_Comm_get_parent")) return MPI_ERR_OTHER;
  if (!parent) return mpi_raise("MPI_Comm_get_parent", nullptr, MPI_ERR_ARG, "null parent");
  *parent = MPI_COMM_NULL;  // no process of this job was spawned
  return MPI_SUCCESS;
}

int PMPI_Status_set_cancelled(MPI_Status* status, int flag) {
  if (!status) return mpi_raise("MPI_Status_set_cancelled", nullptr, MPI_ERR_ARG, "null status");
  status->nmad_cancelled = flag ? 1 : 0;
  return MPI_SUCCESS;
}

MPI_Fint PMPI_Comm_c2f(MPI_Comm h) { return h; }
MPI_Comm PMPI_Comm_f2c(MPI_Fint h) { return h; }
MPI_Fint PMPI_Type_c2f(MPI_Datatype h) { return h; }
MPI_Datatype PMPI_Type_f2c(MPI_Fint h) { return h; }
MPI_Fint PMPI_Group_c2f(MPI_Group h) { return h; }
MPI_Group PMPI_Group_f2c(MPI_Fint h) { return h; }
MPI_Fint PMPI_Request_c2f(MPI_Request h) { return h; }
MPI_Request PMPI_Request_f2c(MPI_Fint h) { return h; }
MPI_Fint PMPI_Op_c2f(MPI_Op h) { return h; }
MPI_Op PMPI_Op_f2c(MPI_Fint h) { return h; }
MPI_Fint PMPI_Info_c2f(MPI_Info h) { return h; }
MPI_Info PMPI_Info_f2c(MPI_Fint h) { return h; }
MPI_Fint PMPI_Errhandler_c2f(MPI_Errhandler h) { return h; }
MPI_Errhandler PMPI_Errhandler_f2c(MPI_Fint h) { return h; }
MPI_Fint PMPI_Message_c2f(MPI_Message h) { return h; }
MPI_Message PMPI_Message_f2c(MPI_Fint h) { return h; }

}  // extern "C"

#pragma weak MPI_Pcontrol = PMPI_Pcontrol
#pragma weak MPI_Comm_get_parent = PMPI_Comm_get_parent
#pragma weak MPI_Status_set_cancelled = PMPI_Status_set_cancelled
#pragma weak MPI_Comm_c2f = PMPI_Comm_c2f
#pragma weak MPI_Comm_f2c = PMPI_Comm_f2c
#pragma weak MPI_Type_c2f = PMPI_Type_c2f
#pragma weak MPI_Type_f2c = PMPI_Type_f2c
#pragma weak MPI_Group_c2f = PMPI_Group_c2f
#pragma weak MPI_Group_f2c = PMPI_Group_f2c
#pragma weak MPI_Request_c2f = PMPI_Request_c2f
#pragma weak MPI_Request_f2c = PMPI_Request_f2c
#pragma weak MPI_Op_c2f = PMPI_Op_c2f
#pragma weak MPI_Op_f2c = PMPI_Op_f2c
#pragma weak MPI_Info_c2f = PMPI_Info_c2f
#pragma weak MPI_Info_f2c = PMPI_Info_f2c
#pragma weak MPI_Errhandler_c2f = PMPI_Errhandler_c2f
#pragma weak MPI_Errhandler_f2c = PMPI_Errhandler_f2c
#pragma weak MPI_Message_c2f = PMPI_Message_c2f
#pragma weak MPI_Message_f2c = PMPI_Message_f2c
