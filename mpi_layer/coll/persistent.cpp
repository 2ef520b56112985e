// Persistent collectives (MPI 4.1 6.13): MPI_<Coll>_init makes an inactive
// persistent request whose schedule is BUILT ONCE, at init, and replayed
// at each MPI_Start.
//
// Init calls the collective's non-blocking form with persistent_build set
// (coll/bindings.hpp): the arguments are checked then (errors raised under
// the _init call's name), the schedule is built against the user's buffers
// (the standard fixes them, and the arrays describing them, until the
// request is freed), its temporaries allocated once, and the request is
// made inactive instead of started (coll/call.cpp, make_persistent). Each
// MPI_Start then
//   * takes the communicator's next collective sequence number (the tags
//     of that run: starts happen in the same order on every member, with
//     the communicator's other collectives, as the standard requires),
//   * packs again what the build packed (a derived send type, an in-place
//     receive buffer that is also input: their contents change between
//     starts; schedule::on_restart),
//   * restarts the executor from round 0 (executor::restart) and hands it
//     to the progress hook, like a non-blocking collective: MPI_Start does
//     not wait for anyone, Wait/Test (or any progress) complete it, a dead
//     member fails it with MPI_ERR_PROC_FAILED.
// The request completes with status empty and error the run's. Freed while
// active, it completes in the background like any freed request (the hook
// keeps advancing the executor, the request keeps it alive).
//
// Every blocking and neighbourhood form goes through this, on
// intercommunicators too where the non-blocking forms accept them.
#include "mpi_layer/coll/bindings.hpp"
#include "mpi_layer/mpi_impl.hpp"


using namespace nmad::mpi;

extern "C" {

int PMPI_Barrier_init(MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistent_init("MPI_Barrier_init", comm, info, request, [=](MPI_Request* r) { return PMPI_Ibarrier(comm, r); });
}

int PMPI_Bcast_init(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Info info,
                    MPI_Request* request) {
  return persistent_init("MPI_Bcast_init", comm, info, request,
                    [=](MPI_Request* r) { return PMPI_Ibcast(buffer, count, datatype, root, comm, r); });
}

int PMPI_Reduce_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                     MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistent_init("MPI_Reduce_init", comm, info, request,
                    [=](MPI_Request* r) { return PMPI_Ireduce(sendbuf, recvbuf, count, datatype, op, root, comm, r); });
}

int PMPI_Allreduce_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                        MPI_Info info, MPI_Request* request) {
  return persistent_init("MPI_Allreduce_init", comm, info, request,
                    [=](MPI_Request* r) { return PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, r); });
}

int PMPI_Gather_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                     MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistent_init("MPI_Gather_init", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Igather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, r);
  });
}

int PMPI_Gatherv_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                      const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info,
                      MPI_Request* request) {
  return persistent_init("MPI_Gatherv_init", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Igatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, r);
  });
}

int PMPI_Scatter_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                      MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistent_init("MPI_Scatter_init", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Iscatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, r);
  });
}

int PMPI_Scatterv_init(const void* sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                       void* recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info,
                       MPI_Request* request) {
  return persistent_init("MPI_Scatterv_init", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Iscatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm, r);
  });
}

int PMPI_Allgather_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                        MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistent_init("MPI_Allgather_init", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, r);
  });
}

int PMPI_Allgatherv_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                         const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm,
                         MPI_Info info, MPI_Request* request) {
  return persistent_init("MPI_Allgatherv_init", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Iallgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, r);
  });
}

int PMPI_Alltoall_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                       MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistent_init("MPI_Alltoall_init", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, r);
  });
}

int PMPI_Alltoallv_init(const void* sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                        void* recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype,
                        MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistent_init("MPI_Alltoallv_init", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Ialltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, r);
  });
}

int PMPI_Alltoallw_init(const void* sendbuf, const int sendcounts[], const int sdispls[],
                        const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[], const int rdispls[],
                        const MPI_Datatype recvtypes[], MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistent_init("MPI_Alltoallw_init", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Ialltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, r);
  });
}

int PMPI_Reduce_scatter_init(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype datatype,
                             MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistent_init("MPI_Reduce_scatter_init", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Ireduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm, r);
  });
}

int PMPI_Reduce_scatter_block_init(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                                   MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistent_init("MPI_Reduce_scatter_block_init", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm, r);
  });
}

int PMPI_Scan_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                   MPI_Info info, MPI_Request* request) {
  return persistent_init("MPI_Scan_init", comm, info, request,
                    [=](MPI_Request* r) { return PMPI_Iscan(sendbuf, recvbuf, count, datatype, op, comm, r); });
}

int PMPI_Exscan_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                     MPI_Info info, MPI_Request* request) {
  return persistent_init("MPI_Exscan_init", comm, info, request,
                    [=](MPI_Request* r) { return PMPI_Iexscan(sendbuf, recvbuf, count, datatype, op, comm, r); });
}

int PMPI_Neighbor_allgather_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info,
                                 MPI_Request* request) {
  return persistent_init("MPI_Neighbor_allgather_init", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Ineighbor_allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, r);
  });
}

int PMPI_Neighbor_allgatherv_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                                  const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm,
                                  MPI_Info info, MPI_Request* request) {
  return persistent_init("MPI_Neighbor_allgatherv_init", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Ineighbor_allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, r);
  });
}

int PMPI_Neighbor_alltoall_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                                MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistent_init("MPI_Neighbor_alltoall_init", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Ineighbor_alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, r);
  });
}

int PMPI_Neighbor_alltoallv_init(const void* sendbuf, const int sendcounts[], const int sdispls[],
                                 MPI_Datatype sendtype, void* recvbuf, const int recvcounts[], const int rdispls[],
                                 MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistent_init("MPI_Neighbor_alltoallv_init", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Ineighbor_alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype,
                                    comm, r);
  });
}

int PMPI_Neighbor_alltoallw_init(const void* sendbuf, const int sendcounts[], const MPI_Aint sdispls[],
                                 const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                                 const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm, MPI_Info info,
                                 MPI_Request* request) {
  return persistent_init("MPI_Neighbor_alltoallw_init", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Ineighbor_alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes,
                                    comm, r);
  });
}

}  // extern "C"

// The public names: weak aliases, so profiling tools can interpose.
#pragma weak MPI_Barrier_init = PMPI_Barrier_init
#pragma weak MPI_Bcast_init = PMPI_Bcast_init
#pragma weak MPI_Reduce_init = PMPI_Reduce_init
#pragma weak MPI_Allreduce_init = PMPI_Allreduce_init
#pragma weak MPI_Gather_init = PMPI_Gather_init
#pragma weak MPI_Gatherv_init = PMPI_Gatherv_init
#pragma weak MPI_Scatter_init = PMPI_Scatter_init
#pragma weak MPI_Scatterv_init = PMPI_Scatterv_init
#pragma weak MPI_Allgather_init = PMPI_Allgather_init
#pragma weak MPI_Allgatherv_init = PMPI_Allgatherv_init
#pragma weak MPI_Alltoall_init = PMPI_Alltoall_init
#pragma weak MPI_Alltoallv_init = PMPI_Alltoallv_init
#pragma weak MPI_Alltoallw_init = PMPI_Alltoallw_init
#pragma weak MPI_Reduce_scatter_init = PMPI_Reduce_scatter_init
#pragma weak MPI_Reduce_scatter_block_init = PMPI_Reduce_scatter_block_init
#pragma weak MPI_Scan_init = PMPI_Scan_init
#pragma weak MPI_Exscan_init = PMPI_Exscan_init
#pragma weak MPI_Neighbor_allgather_init = PMPI_Neighbor_allgather_init
#pragma weak MPI_Neighbor_allgatherv_init = PMPI_Neighbor_allgatherv_init
#pragma weak MPI_Neighbor_alltoall_init = PMPI_Neighbor_alltoall_init
#pragma weak MPI_Neighbor_alltoallv_init = PMPI_Neighbor_alltoallv_init
#pragma weak MPI_Neighbor_alltoallw_init = PMPI_Neighbor_alltoallw_init
