// Process creation and management (MPI 4.1 11.8-11.10). Processes are
// started by the launcher (nmad-run, mpiexec, a PMI server) and only by
// it: there is no process manager to ask for more, no port to listen on
// between jobs, and no name server. The calls are declared so that programs
// naming them build (mpi4py, test suites, codes that spawn only on request);
// each raises MPI_ERR_UNSUPPORTED_OPERATION through the usual error-handler
// path, after setting its output handles to their null value and every
// error code of a spawn to that class, so a program that goes on after the
// error sees nothing half made.
//
// MPI_Comm_disconnect is the exception: it is defined for any communicator
// and works here, as MPI_Comm_free once the communication pending on the
// communicator has completed in every process (a barrier over it: messages
// sent on it before have been matched or are buffered at their receiver,
// per the matching order of the communicator's context).
#include <string>

#include "mpi_layer/mpi_impl.hpp"

using namespace nmad::mpi;

namespace {

constexpr const char* kNoDynamic = "process creation and management is not provided by this MPI (processes are "
                                   "started by the launcher only)";

// Raised on comm's handler when comm is a valid communicator, else on
// MPI_COMM_WORLD's (an invalid one is reported as such).
[[gnu::cold]] int unsupported(const char* fn, MPI_Comm comm = MPI_COMM_NULL) {
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  comm_obj* c = nullptr;
  if (comm != MPI_COMM_NULL) {
    c = lookup_comm(comm);
    if (!c) return mpi_raise(fn, nullptr, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm));
  }
  return mpi_raise(fn, c, MPI_ERR_UNSUPPORTED_OPERATION, kNoDynamic);
}

void null_comm(MPI_Comm* comm) {
  if (comm) *comm = MPI_COMM_NULL;
}

void fill_errcodes(int* codes, int n) {
  if (codes == MPI_ERRCODES_IGNORE) return;
  for (int i = 0; i < n; ++i) codes[i] = MPI_ERR_UNSUPPORTED_OPERATION;
}

}  // namespace

extern "C" {

int PMPI_Comm_spawn(const char* command, char* argv[], int maxprocs, MPI_Info info, int root, MPI_Comm comm,
                    MPI_Comm* intercomm, int array_of_errcodes[]) {
  null_comm(intercomm);
  fill_errcodes(array_of_errcodes, maxprocs);
  return unsupported("MPI_Comm_spawn", comm);
}

int PMPI_Comm_spawn_multiple(int count, char* array_of_commands[], char** array_of_argv[],
                             const int array_of_maxprocs[], const MPI_Info array_of_info[], int root, MPI_Comm comm,
                             MPI_Comm* intercomm, int array_of_errcodes[]) {
  null_comm(intercomm);
  int total = 0;
  if (array_of_maxprocs)
    for (int i = 0; i < count; ++i) total += array_of_maxprocs[i] > 0 ? array_of_maxprocs[i] : 0;
  fill_errcodes(array_of_errcodes, total);
  return unsupported("MPI_Comm_spawn_multiple", comm);
}

int PMPI_Open_port(MPI_Info info, char* port_name) {
  if (port_name) port_name[0] = '\0';
  return unsupported("MPI_Open_port");
}

int PMPI_Close_port(const char* port_name) { return unsupported("MPI_Close_port"); }

int PMPI_Comm_accept(const char* port_name, MPI_Info info, int root, MPI_Comm comm, MPI_Comm* newcomm) {
  null_comm(newcomm);
  return unsupported("MPI_Comm_accept", comm);
}

int PMPI_Comm_connect(const char* port_name, MPI_Info info, int root, MPI_Comm comm, MPI_Comm* newcomm) {
  null_comm(newcomm);
  return unsupported("MPI_Comm_connect", comm);
}

int PMPI_Comm_join(int fd, MPI_Comm* intercomm) {
  null_comm(intercomm);
  return unsupported("MPI_Comm_join");
}

int PMPI_Publish_name(const char* service_name, MPI_Info info, const char* port_name) {
  return unsupported("MPI_Publish_name");
}

int PMPI_Unpublish_name(const char* service_name, MPI_Info info, const char* port_name) {
  return unsupported("MPI_Unpublish_name");
}

int PMPI_Lookup_name(const char* service_name, MPI_Info info, char* port_name) {
  if (port_name) port_name[0] = '\0';
  return unsupported("MPI_Lookup_name");
}

int PMPI_Comm_disconnect(MPI_Comm* comm) {
  const char* fn = "MPI_Comm_disconnect";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (!comm) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null comm");
  comm_obj* c = lookup_comm(*comm);
  if (!c) return mpi_raise(fn, nullptr, MPI_ERR_COMM, "invalid communicator " + std::to_string(*comm));
  if (*comm == MPI_COMM_WORLD || *comm == MPI_COMM_SELF)
    return mpi_raise(fn, c, MPI_ERR_COMM, "predefined communicators cannot be disconnected");
  // The barrier's errors (a member died) are the disconnect's; the
  // communicator is freed all the same, as the call's contract says.
  const MPI_Errhandler keep = c->errhandler;
  c->errhandler = MPI_ERRORS_RETURN;
  const int e = PMPI_Barrier(*comm);
  c->errhandler = keep;
  const int f = PMPI_Comm_free(comm);
  if (e != MPI_SUCCESS) return mpi_raise(fn, nullptr, e, "a member of the communicator failed before disconnecting");
  return f;
}

#pragma weak MPI_Comm_spawn = PMPI_Comm_spawn
#pragma weak MPI_Comm_spawn_multiple = PMPI_Comm_spawn_multiple
#pragma weak MPI_Open_port = PMPI_Open_port
#pragma weak MPI_Close_port = PMPI_Close_port
#pragma weak MPI_Comm_accept = PMPI_Comm_accept
#pragma weak MPI_Comm_connect = PMPI_Comm_connect
#pragma weak MPI_Comm_join = PMPI_Comm_join
#pragma weak MPI_Comm_disconnect = PMPI_Comm_disconnect
#pragma weak MPI_Publish_name = PMPI_Publish_name
#pragma weak MPI_Unpublish_name = PMPI_Unpublish_name
#pragma weak MPI_Lookup_name = PMPI_Lookup_name

}  // extern "C"
