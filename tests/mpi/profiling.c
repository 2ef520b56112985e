/* The profiling interface: this program defines MPI_Send and MPI_Recv
 * itself (counting calls) and forwards to PMPI_Send / PMPI_Recv. */
#include "mpitest.h"

static int sends = 0, recvs = 0;

int MPI_Send(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
  sends++;
  return PMPI_Send(buf, count, datatype, dest, tag, comm);
}

int MPI_Recv(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Status* status) {
  recvs++;
  return PMPI_Recv(buf, count, datatype, source, tag, comm, status);
}

int main(int argc, char** argv) {
  mt_start("profiling", &argc, &argv);
  int next = (mt_rank + 1) % mt_size, prev = (mt_rank + mt_size - 1) % mt_size;
  int v = mt_rank, got = -1;
  MPI_Request r;
  MPI_Irecv(&got, 1, MPI_INT, prev, 0, MPI_COMM_WORLD, &r);
  for (int i = 0; i < 3; ++i) MPI_Send(&v, 1, MPI_INT, next, i, MPI_COMM_WORLD);
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  for (int i = 1; i < 3; ++i) MPI_Recv(&got, 1, MPI_INT, prev, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  CHECK(got == prev, "value %d", got);
  CHECK(sends == 3 && recvs == 2, "interposed calls: %d sends, %d receives", sends, recvs);
  return mt_pass();
}
