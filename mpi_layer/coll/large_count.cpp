// The large-count (`_c`) bindings of every collective (MPI 4.0 / 4.1,
// "large count" embiggened forms): blocking, non-blocking (MPI_I..._c) and
// persistent (MPI_..._init_c), on intra- and intercommunicators, and the
// neighbourhood collectives.
//
// Counts (MPI_Count), count arrays (const MPI_Count[]) and displacement
// arrays (const MPI_Aint[]) reach the same functions as the int bindings
// (entries.hpp): those take Count and count_array, and compute every size
// in bytes (std::size_t), so nothing is truncated, no array is copied, and
// a count above INT_MAX moves as many elements as it says. The only
// difference with the int forms: the blocking shortcuts that take int
// arguments (bcast_fast, rooted_fast) are skipped for counts above INT_MAX.
//
// Persistent forms: MPI_..._init_c builds its schedule once, at init, as
// the int forms do (bindings.hpp, persistent_init: the non-blocking `_c`
// form is called as the persistent build), and each MPI_Start replays it.
#include "mpi_layer/coll/bindings.hpp"
#include "mpi_layer/coll/entries.hpp"
#include "mpi_layer/mpi_impl.hpp"

using namespace nmad::mpi;
using namespace nmad::mpi::coll_call;

extern "C" {

int PMPI_Allgather_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                     MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  return gather("MPI_Allgather_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, 0, true, comm, nullptr);
}
int PMPI_Iallgather_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                      MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return gather("MPI_Iallgather_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, 0, true, comm, request);
}
int PMPI_Allgather_init_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                          MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info,
                          MPI_Request* request) {
  return persistent_init("MPI_Allgather_init_c", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Iallgather_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, r);
  });
}
int PMPI_Allgatherv_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                      const MPI_Count recvcounts[], const MPI_Aint displs[], MPI_Datatype recvtype, MPI_Comm comm) {
  return gatherv("MPI_Allgatherv_c", sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, 0, true, comm,
                 nullptr);
}
int PMPI_Iallgatherv_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                       const MPI_Count recvcounts[], const MPI_Aint displs[], MPI_Datatype recvtype, MPI_Comm comm,
                       MPI_Request* request) {
  return gatherv("MPI_Iallgatherv_c", sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, 0, true,
                 comm, request);
}
int PMPI_Allgatherv_init_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                           const MPI_Count recvcounts[], const MPI_Aint displs[], MPI_Datatype recvtype, MPI_Comm comm,
                           MPI_Info info, MPI_Request* request) {
  return persistent_init("MPI_Allgatherv_init_c", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Iallgatherv_c(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, r);
  });
}
int PMPI_Allreduce_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op,
                     MPI_Comm comm) {
  return reduce("MPI_Allreduce_c", sendbuf, recvbuf, count, datatype, op, 0, red_kind::allreduce, comm, nullptr);
}
int PMPI_Iallreduce_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op,
                      MPI_Comm comm, MPI_Request* request) {
  return reduce("MPI_Iallreduce_c", sendbuf, recvbuf, count, datatype, op, 0, red_kind::allreduce, comm, request);
}
int PMPI_Allreduce_init_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op,
                          MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistent_init("MPI_Allreduce_init_c", comm, info, request,
                    [=](MPI_Request* r) { return PMPI_Iallreduce_c(sendbuf, recvbuf, count, datatype, op, comm, r); });
}
int PMPI_Alltoall_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf, MPI_Count recvcount,
                    MPI_Datatype recvtype, MPI_Comm comm) {
  return alltoall("MPI_Alltoall_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, nullptr);
}
int PMPI_Ialltoall_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                     MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return alltoall("MPI_Ialltoall_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
}
int PMPI_Alltoall_init_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                         MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info,
                         MPI_Request* request) {
  return persistent_init("MPI_Alltoall_init_c", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Ialltoall_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, r);
  });
}
int PMPI_Alltoallv_c(const void* sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[], MPI_Datatype sendtype,
                     void* recvbuf, const MPI_Count recvcounts[], const MPI_Aint rdispls[], MPI_Datatype recvtype,
                     MPI_Comm comm) {
  return alltoallw("MPI_Alltoallv_c", sendbuf, sendcounts, sdispls, &sendtype, recvbuf, recvcounts, rdispls, &recvtype,
                   false, comm, nullptr);
}
int PMPI_Ialltoallv_c(const void* sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[],
                      MPI_Datatype sendtype, void* recvbuf, const MPI_Count recvcounts[], const MPI_Aint rdispls[],
                      MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return alltoallw("MPI_Ialltoallv_c", sendbuf, sendcounts, sdispls, &sendtype, recvbuf, recvcounts, rdispls, &recvtype,
                   false, comm, request);
}
int PMPI_Alltoallv_init_c(const void* sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[],
                          MPI_Datatype sendtype, void* recvbuf, const MPI_Count recvcounts[], const MPI_Aint rdispls[],
                          MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistent_init("MPI_Alltoallv_init_c", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Ialltoallv_c(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, r);
  });
}
int PMPI_Alltoallw_c(const void* sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[],
                     const MPI_Datatype sendtypes[], void* recvbuf, const MPI_Count recvcounts[],
                     const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm) {
  return alltoallw("MPI_Alltoallw_c", sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes,
                   true, comm, nullptr);
}
int PMPI_Ialltoallw_c(const void* sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[],
                      const MPI_Datatype sendtypes[], void* recvbuf, const MPI_Count recvcounts[],
                      const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm, MPI_Request* request) {
  return alltoallw("MPI_Ialltoallw_c", sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes,
                   true, comm, request);
}
int PMPI_Alltoallw_init_c(const void* sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[],
                          const MPI_Datatype sendtypes[], void* recvbuf, const MPI_Count recvcounts[],
                          const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm, MPI_Info info,
                          MPI_Request* request) {
  return persistent_init("MPI_Alltoallw_init_c", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Ialltoallw_c(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, r);
  });
}
int PMPI_Bcast_c(void* buffer, MPI_Count count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  return bcast("MPI_Bcast_c", buffer, count, datatype, root, comm, nullptr);
}
int PMPI_Ibcast_c(void* buffer, MPI_Count count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Request* request) {
  return bcast("MPI_Ibcast_c", buffer, count, datatype, root, comm, request);
}
int PMPI_Bcast_init_c(void* buffer, MPI_Count count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Info info,
                      MPI_Request* request) {
  return persistent_init("MPI_Bcast_init_c", comm, info, request,
                    [=](MPI_Request* r) { return PMPI_Ibcast_c(buffer, count, datatype, root, comm, r); });
}
int PMPI_Exscan_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op,
                  MPI_Comm comm) {
  return reduce("MPI_Exscan_c", sendbuf, recvbuf, count, datatype, op, 0, red_kind::exscan, comm, nullptr);
}
int PMPI_Iexscan_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                   MPI_Request* request) {
  return reduce("MPI_Iexscan_c", sendbuf, recvbuf, count, datatype, op, 0, red_kind::exscan, comm, request);
}
int PMPI_Exscan_init_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op,
                       MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistent_init("MPI_Exscan_init_c", comm, info, request,
                    [=](MPI_Request* r) { return PMPI_Iexscan_c(sendbuf, recvbuf, count, datatype, op, comm, r); });
}
int PMPI_Gather_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf, MPI_Count recvcount,
                  MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return gather("MPI_Gather_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, false, comm, nullptr);
}
int PMPI_Igather_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf, MPI_Count recvcount,
                   MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* request) {
  return gather("MPI_Igather_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, false, comm,
                request);
}
int PMPI_Gather_init_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                       MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info,
                       MPI_Request* request) {
  return persistent_init("MPI_Gather_init_c", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Igather_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, r);
  });
}
int PMPI_Gatherv_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                   const MPI_Count recvcounts[], const MPI_Aint displs[], MPI_Datatype recvtype, int root,
                   MPI_Comm comm) {
  return gatherv("MPI_Gatherv_c", sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, false,
                 comm, nullptr);
}
int PMPI_Igatherv_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                    const MPI_Count recvcounts[], const MPI_Aint displs[], MPI_Datatype recvtype, int root,
                    MPI_Comm comm, MPI_Request* request) {
  return gatherv("MPI_Igatherv_c", sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, false,
                 comm, request);
}
int PMPI_Gatherv_init_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                        const MPI_Count recvcounts[], const MPI_Aint displs[], MPI_Datatype recvtype, int root,
                        MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistent_init("MPI_Gatherv_init_c", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Igatherv_c(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, r);
  });
}
int PMPI_Reduce_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, int root,
                  MPI_Comm comm) {
  return reduce("MPI_Reduce_c", sendbuf, recvbuf, count, datatype, op, root, red_kind::reduce, comm, nullptr);
}
int PMPI_Ireduce_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, int root,
                   MPI_Comm comm, MPI_Request* request) {
  return reduce("MPI_Ireduce_c", sendbuf, recvbuf, count, datatype, op, root, red_kind::reduce, comm, request);
}
int PMPI_Reduce_init_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, int root,
                       MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistent_init("MPI_Reduce_init_c", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Ireduce_c(sendbuf, recvbuf, count, datatype, op, root, comm, r);
  });
}
int PMPI_Reduce_scatter_c(const void* sendbuf, void* recvbuf, const MPI_Count recvcounts[], MPI_Datatype datatype,
                          MPI_Op op, MPI_Comm comm) {
  return reduce_scatter("MPI_Reduce_scatter_c", sendbuf, recvbuf, false, recvcounts, 0, datatype, op, comm, nullptr);
}
int PMPI_Ireduce_scatter_c(const void* sendbuf, void* recvbuf, const MPI_Count recvcounts[], MPI_Datatype datatype,
                           MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  return reduce_scatter("MPI_Ireduce_scatter_c", sendbuf, recvbuf, false, recvcounts, 0, datatype, op, comm, request);
}
int PMPI_Reduce_scatter_init_c(const void* sendbuf, void* recvbuf, const MPI_Count recvcounts[], MPI_Datatype datatype,
                               MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistent_init("MPI_Reduce_scatter_init_c", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Ireduce_scatter_c(sendbuf, recvbuf, recvcounts, datatype, op, comm, r);
  });
}
int PMPI_Reduce_scatter_block_c(const void* sendbuf, void* recvbuf, MPI_Count recvcount, MPI_Datatype datatype,
                                MPI_Op op, MPI_Comm comm) {
  return reduce_scatter("MPI_Reduce_scatter_block_c", sendbuf, recvbuf, true, nullptr, recvcount, datatype, op, comm,
                        nullptr);
}
int PMPI_Ireduce_scatter_block_c(const void* sendbuf, void* recvbuf, MPI_Count recvcount, MPI_Datatype datatype,
                                 MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  return reduce_scatter("MPI_Ireduce_scatter_block_c", sendbuf, recvbuf, true, nullptr, recvcount, datatype, op, comm,
                        request);
}
int PMPI_Reduce_scatter_block_init_c(const void* sendbuf, void* recvbuf, MPI_Count recvcount, MPI_Datatype datatype,
                                     MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistent_init("MPI_Reduce_scatter_block_init_c", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Ireduce_scatter_block_c(sendbuf, recvbuf, recvcount, datatype, op, comm, r);
  });
}
int PMPI_Scan_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return reduce("MPI_Scan_c", sendbuf, recvbuf, count, datatype, op, 0, red_kind::scan, comm, nullptr);
}
int PMPI_Iscan_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                 MPI_Request* request) {
  return reduce("MPI_Iscan_c", sendbuf, recvbuf, count, datatype, op, 0, red_kind::scan, comm, request);
}
int PMPI_Scan_init_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op,
                     MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistent_init("MPI_Scan_init_c", comm, info, request,
                    [=](MPI_Request* r) { return PMPI_Iscan_c(sendbuf, recvbuf, count, datatype, op, comm, r); });
}
int PMPI_Scatter_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf, MPI_Count recvcount,
                   MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return scatter("MPI_Scatter_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, nullptr);
}
int PMPI_Iscatter_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf, MPI_Count recvcount,
                    MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* request) {
  return scatter("MPI_Iscatter_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, request);
}
int PMPI_Scatter_init_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                        MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info,
                        MPI_Request* request) {
  return persistent_init("MPI_Scatter_init_c", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Iscatter_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, r);
  });
}
int PMPI_Scatterv_c(const void* sendbuf, const MPI_Count sendcounts[], const MPI_Aint displs[], MPI_Datatype sendtype,
                    void* recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return scatterv("MPI_Scatterv_c", sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm,
                  nullptr);
}
int PMPI_Iscatterv_c(const void* sendbuf, const MPI_Count sendcounts[], const MPI_Aint displs[], MPI_Datatype sendtype,
                     void* recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                     MPI_Request* request) {
  return scatterv("MPI_Iscatterv_c", sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm,
                  request);
}
int PMPI_Scatterv_init_c(const void* sendbuf, const MPI_Count sendcounts[], const MPI_Aint displs[],
                         MPI_Datatype sendtype, void* recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int root,
                         MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistent_init("MPI_Scatterv_init_c", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Iscatterv_c(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm, r);
  });
}

// ---- neighbourhood collectives

int PMPI_Neighbor_allgather_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                              MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  return neighbor::allgather("MPI_Neighbor_allgather_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                             comm, nullptr);
}
int PMPI_Ineighbor_allgather_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                               MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return neighbor::allgather("MPI_Ineighbor_allgather_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                             comm, request);
}
int PMPI_Neighbor_allgather_init_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                                   MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info,
                                   MPI_Request* request) {
  return persistent_init("MPI_Neighbor_allgather_init_c", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Ineighbor_allgather_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, r);
  });
}
int PMPI_Neighbor_allgatherv_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                               const MPI_Count recvcounts[], const MPI_Aint displs[], MPI_Datatype recvtype,
                               MPI_Comm comm) {
  return neighbor::allgatherv("MPI_Neighbor_allgatherv_c", sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,
                              recvtype, comm, nullptr);
}
int PMPI_Ineighbor_allgatherv_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                                const MPI_Count recvcounts[], const MPI_Aint displs[], MPI_Datatype recvtype,
                                MPI_Comm comm, MPI_Request* request) {
  return neighbor::allgatherv("MPI_Ineighbor_allgatherv_c", sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,
                              recvtype, comm, request);
}
int PMPI_Neighbor_allgatherv_init_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                                    const MPI_Count recvcounts[], const MPI_Aint displs[], MPI_Datatype recvtype,
                                    MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistent_init("MPI_Neighbor_allgatherv_init_c", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Ineighbor_allgatherv_c(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, r);
  });
}
int PMPI_Neighbor_alltoall_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                             MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  return neighbor::alltoall("MPI_Neighbor_alltoall_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                            nullptr);
}
int PMPI_Ineighbor_alltoall_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                              MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return neighbor::alltoall("MPI_Ineighbor_alltoall_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                            comm, request);
}
int PMPI_Neighbor_alltoall_init_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                                  MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info,
                                  MPI_Request* request) {
  return persistent_init("MPI_Neighbor_alltoall_init_c", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Ineighbor_alltoall_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, r);
  });
}
int PMPI_Neighbor_alltoallv_c(const void* sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[],
                              MPI_Datatype sendtype, void* recvbuf, const MPI_Count recvcounts[],
                              const MPI_Aint rdispls[], MPI_Datatype recvtype, MPI_Comm comm) {
  return neighbor::alltoallw("MPI_Neighbor_alltoallv_c", sendbuf, sendcounts, sdispls, &sendtype, recvbuf, recvcounts,
                             rdispls, &recvtype, false, comm, nullptr);
}
int PMPI_Ineighbor_alltoallv_c(const void* sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[],
                               MPI_Datatype sendtype, void* recvbuf, const MPI_Count recvcounts[],
                               const MPI_Aint rdispls[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return neighbor::alltoallw("MPI_Ineighbor_alltoallv_c", sendbuf, sendcounts, sdispls, &sendtype, recvbuf, recvcounts,
                             rdispls, &recvtype, false, comm, request);
}
int PMPI_Neighbor_alltoallv_init_c(const void* sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[],
                                   MPI_Datatype sendtype, void* recvbuf, const MPI_Count recvcounts[],
                                   const MPI_Aint rdispls[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info,
                                   MPI_Request* request) {
  return persistent_init("MPI_Neighbor_alltoallv_init_c", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Ineighbor_alltoallv_c(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype,
                                      comm, r);
  });
}
int PMPI_Neighbor_alltoallw_c(const void* sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[],
                              const MPI_Datatype sendtypes[], void* recvbuf, const MPI_Count recvcounts[],
                              const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm) {
  return neighbor::alltoallw("MPI_Neighbor_alltoallw_c", sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts,
                             rdispls, recvtypes, true, comm, nullptr);
}
int PMPI_Ineighbor_alltoallw_c(const void* sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[],
                               const MPI_Datatype sendtypes[], void* recvbuf, const MPI_Count recvcounts[],
                               const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm,
                               MPI_Request* request) {
  return neighbor::alltoallw("MPI_Ineighbor_alltoallw_c", sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts,
                             rdispls, recvtypes, true, comm, request);
}
int PMPI_Neighbor_alltoallw_init_c(const void* sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[],
                                   const MPI_Datatype sendtypes[], void* recvbuf, const MPI_Count recvcounts[],
                                   const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm,
                                   MPI_Info info, MPI_Request* request) {
  return persistent_init("MPI_Neighbor_alltoallw_init_c", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Ineighbor_alltoallw_c(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes,
                                      comm, r);
  });
}

}  // extern "C"

// The public names: weak aliases, so profiling tools can interpose.
#pragma weak MPI_Allgather_c = PMPI_Allgather_c
#pragma weak MPI_Iallgather_c = PMPI_Iallgather_c
#pragma weak MPI_Allgather_init_c = PMPI_Allgather_init_c
#pragma weak MPI_Allgatherv_c = PMPI_Allgatherv_c
#pragma weak MPI_Iallgatherv_c = PMPI_Iallgatherv_c
#pragma weak MPI_Allgatherv_init_c = PMPI_Allgatherv_init_c
#pragma weak MPI_Allreduce_c = PMPI_Allreduce_c
#pragma weak MPI_Iallreduce_c = PMPI_Iallreduce_c
#pragma weak MPI_Allreduce_init_c = PMPI_Allreduce_init_c
#pragma weak MPI_Alltoall_c = PMPI_Alltoall_c
#pragma weak MPI_Ialltoall_c = PMPI_Ialltoall_c
#pragma weak MPI_Alltoall_init_c = PMPI_Alltoall_init_c
#pragma weak MPI_Alltoallv_c = PMPI_Alltoallv_c
#pragma weak MPI_Ialltoallv_c = PMPI_Ialltoallv_c
#pragma weak MPI_Alltoallv_init_c = PMPI_Alltoallv_init_c
#pragma weak MPI_Alltoallw_c = PMPI_Alltoallw_c
#pragma weak MPI_Ialltoallw_c = PMPI_Ialltoallw_c
#pragma weak MPI_Alltoallw_init_c = PMPI_Alltoallw_init_c
#pragma weak MPI_Bcast_c = PMPI_Bcast_c
#pragma weak MPI_Ibcast_c = PMPI_Ibcast_c
#pragma weak MPI_Bcast_init_c = PMPI_Bcast_init_c
#pragma weak MPI_Exscan_c = PMPI_Exscan_c
#pragma weak MPI_Iexscan_c = PMPI_Iexscan_c
#pragma weak MPI_Exscan_init_c = PMPI_Exscan_init_c
#pragma weak MPI_Gather_c = PMPI_Gather_c
#pragma weak MPI_Igather_c = PMPI_Igather_c
#pragma weak MPI_Gather_init_c = PMPI_Gather_init_c
#pragma weak MPI_Gatherv_c = PMPI_Gatherv_c
#pragma weak MPI_Igatherv_c = PMPI_Igatherv_c
#pragma weak MPI_Gatherv_init_c = PMPI_Gatherv_init_c
#pragma weak MPI_Reduce_c = PMPI_Reduce_c
#pragma weak MPI_Ireduce_c = PMPI_Ireduce_c
#pragma weak MPI_Reduce_init_c = PMPI_Reduce_init_c
#pragma weak MPI_Reduce_scatter_c = PMPI_Reduce_scatter_c
#pragma weak MPI_Ireduce_scatter_c = PMPI_Ireduce_scatter_c
#pragma weak MPI_Reduce_scatter_init_c = PMPI_Reduce_scatter_init_c
#pragma weak MPI_Reduce_scatter_block_c = PMPI_Reduce_scatter_block_c
#pragma weak MPI_Ireduce_scatter_block_c = PMPI_Ireduce_scatter_block_c
#pragma weak MPI_Reduce_scatter_block_init_c = PMPI_Reduce_scatter_block_init_c
#pragma weak MPI_Scan_c = PMPI_Scan_c
#pragma weak MPI_Iscan_c = PMPI_Iscan_c
#pragma weak MPI_Scan_init_c = PMPI_Scan_init_c
#pragma weak MPI_Scatter_c = PMPI_Scatter_c
#pragma weak MPI_Iscatter_c = PMPI_Iscatter_c
#pragma weak MPI_Scatter_init_c = PMPI_Scatter_init_c
#pragma weak MPI_Scatterv_c = PMPI_Scatterv_c
#pragma weak MPI_Iscatterv_c = PMPI_Iscatterv_c
#pragma weak MPI_Scatterv_init_c = PMPI_Scatterv_init_c

#pragma weak MPI_Neighbor_allgather_c = PMPI_Neighbor_allgather_c
#pragma weak MPI_Ineighbor_allgather_c = PMPI_Ineighbor_allgather_c
#pragma weak MPI_Neighbor_allgather_init_c = PMPI_Neighbor_allgather_init_c
#pragma weak MPI_Neighbor_allgatherv_c = PMPI_Neighbor_allgatherv_c
#pragma weak MPI_Ineighbor_allgatherv_c = PMPI_Ineighbor_allgatherv_c
#pragma weak MPI_Neighbor_allgatherv_init_c = PMPI_Neighbor_allgatherv_init_c
#pragma weak MPI_Neighbor_alltoall_c = PMPI_Neighbor_alltoall_c
#pragma weak MPI_Ineighbor_alltoall_c = PMPI_Ineighbor_alltoall_c
#pragma weak MPI_Neighbor_alltoall_init_c = PMPI_Neighbor_alltoall_init_c
#pragma weak MPI_Neighbor_alltoallv_c = PMPI_Neighbor_alltoallv_c
#pragma weak MPI_Ineighbor_alltoallv_c = PMPI_Ineighbor_alltoallv_c
#pragma weak MPI_Neighbor_alltoallv_init_c = PMPI_Neighbor_alltoallv_init_c
#pragma weak MPI_Neighbor_alltoallw_c = PMPI_Neighbor_alltoallw_c
#pragma weak MPI_Ineighbor_alltoallw_c = PMPI_Ineighbor_alltoallw_c
#pragma weak MPI_Neighbor_alltoallw_init_c = PMPI_Neighbor_alltoallw_init_c
