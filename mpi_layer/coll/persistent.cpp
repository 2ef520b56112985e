// Persistent collectives (MPI 4.0 6.13): MPI_<Coll>_init makes an inactive
// persistent request; each MPI_Start runs the collective's non-blocking
// form with the arguments given at init (the standard forbids changing the
// arrays they point to until the request is freed) and the request
// completes with it: status empty, error the collective's. MPI_Start on
// every rank in the same order is what the standard requires for the
// collective's matching, as for the non-blocking forms.
//
// The schedule is built again at each start, from the buffers' contents
// at that time (a derived send type is packed then, not at init).
// Freed while active, the request completes in the background like any
// freed request. Argument errors are reported by MPI_Start (under the
// non-blocking call's name); MPI_<Coll>_init checks the communicator and
// the info.
#include <functional>
#include <memory>
#include <string>

#include "mpi_layer/mpi_impl.hpp"

namespace nmad::mpi {
namespace {

struct persistent_coll {
  std::function<int(MPI_Request*)> start;  // the non-blocking form
  MPI_Request inner = MPI_REQUEST_NULL;    // the running one
  int error = MPI_SUCCESS;
  std::string detail;
};

template <class Start>
int persistent(const char* fn, MPI_Comm comm, MPI_Info info, MPI_Request* request, Start start) {
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  comm_obj* c = lookup_comm(comm);
  if (!c) return mpi_raise(fn, nullptr, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm));
  if (!request) return mpi_raise(fn, c, MPI_ERR_ARG, "null request");
  if (info != MPI_INFO_NULL && !info_get_entries(info))
    return mpi_raise(fn, c, MPI_ERR_INFO, "invalid info handle " + std::to_string(info));
  auto p = std::make_shared<persistent_coll>();
  p->start = std::move(start);
  request_obj* r = new_request();
  r->type = request_obj::kind::generic;
  r->persistent = true;
  r->active = false;
  r->comm = c;
  r->extra = p;
  r->on_start = [p](request_obj& rq) {
    p->error = MPI_SUCCESS;
    p->detail.clear();
    empty_status(&rq.local_status);
    // (Wait/Test drop the completion hook once run: set it again.)
    rq.on_complete = [p](request_obj&, std::string& d) {
      d = p->detail;
      return p->error;
    };
    const int e = p->start(&p->inner);
    if (e != MPI_SUCCESS) {  // raised by the non-blocking call; the request completes with it
      p->inner = MPI_REQUEST_NULL;
      p->error = e;
      rq.local_status.MPI_ERROR = e;
    }
    return e;
  };
  r->poll = [p](request_obj& rq) {
    if (p->inner == MPI_REQUEST_NULL) return true;
    if (!handle_done(p->inner)) return false;
    p->error = finish_done_request(&p->inner, nullptr, p->detail);
    p->inner = MPI_REQUEST_NULL;
    empty_status(&rq.local_status);
    rq.local_status.MPI_ERROR = p->error;
    return true;
  };
  *request = r->handle;
  return MPI_SUCCESS;
}

}  // namespace
}  // namespace nmad::mpi

using namespace nmad::mpi;

extern "C" {

int PMPI_Barrier_init(MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistent("MPI_Barrier_init", comm, info, request, [=](MPI_Request* r) { return PMPI_Ibarrier(comm, r); });
}

int PMPI_Bcast_init(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Info info,
                    MPI_Request* request) {
  return persistent("MPI_Bcast_init", comm, info, request,
                    [=](MPI_Request* r) { return PMPI_Ibcast(buffer, count, datatype, root, comm, r); });
}

int PMPI_Reduce_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                     MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistent("MPI_Reduce_init", comm, info, request,
                    [=](MPI_Request* r) { return PMPI_Ireduce(sendbuf, recvbuf, count, datatype, op, root, comm, r); });
}

int PMPI_Allreduce_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                        MPI_Info info, MPI_Request* request) {
  return persistent("MPI_Allreduce_init", comm, info, request,
                    [=](MPI_Request* r) { return PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, r); });
}

int PMPI_Gather_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                     MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistent("MPI_Gather_init", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Igather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, r);
  });
}

int PMPI_Gatherv_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                      const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info,
                      MPI_Request* request) {
  return persistent("MPI_Gatherv_init", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Igatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, r);
  });
}

int PMPI_Scatter_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                      MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistent("MPI_Scatter_init", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Iscatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, r);
  });
}

int PMPI_Scatterv_init(const void* sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                       void* recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info,
                       MPI_Request* request) {
  return persistent("MPI_Scatterv_init", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Iscatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm, r);
  });
}

int PMPI_Allgather_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                        MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistent("MPI_Allgather_init", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, r);
  });
}

int PMPI_Allgatherv_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                         const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm,
                         MPI_Info info, MPI_Request* request) {
  return persistent("MPI_Allgatherv_init", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Iallgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, r);
  });
}

int PMPI_Alltoall_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                       MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistent("MPI_Alltoall_init", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, r);
  });
}

int PMPI_Alltoallv_init(const void* sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                        void* recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype,
                        MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistent("MPI_Alltoallv_init", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Ialltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, r);
  });
}

int PMPI_Alltoallw_init(const void* sendbuf, const int sendcounts[], const int sdispls[],
                        const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[], const int rdispls[],
                        const MPI_Datatype recvtypes[], MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistent("MPI_Alltoallw_init", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Ialltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, r);
  });
}

int PMPI_Reduce_scatter_init(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype datatype,
                             MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistent("MPI_Reduce_scatter_init", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Ireduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm, r);
  });
}

int PMPI_Reduce_scatter_block_init(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                                   MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistent("MPI_Reduce_scatter_block_init", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm, r);
  });
}

int PMPI_Scan_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                   MPI_Info info, MPI_Request* request) {
  return persistent("MPI_Scan_init", comm, info, request,
                    [=](MPI_Request* r) { return PMPI_Iscan(sendbuf, recvbuf, count, datatype, op, comm, r); });
}

int PMPI_Exscan_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                     MPI_Info info, MPI_Request* request) {
  return persistent("MPI_Exscan_init", comm, info, request,
                    [=](MPI_Request* r) { return PMPI_Iexscan(sendbuf, recvbuf, count, datatype, op, comm, r); });
}

int PMPI_Neighbor_allgather_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info,
                                 MPI_Request* request) {
  return persistent("MPI_Neighbor_allgather_init", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Ineighbor_allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, r);
  });
}

int PMPI_Neighbor_allgatherv_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                                  const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm,
                                  MPI_Info info, MPI_Request* request) {
  return persistent("MPI_Neighbor_allgatherv_init", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Ineighbor_allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, r);
  });
}

int PMPI_Neighbor_alltoall_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                                MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistent("MPI_Neighbor_alltoall_init", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Ineighbor_alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, r);
  });
}

int PMPI_Neighbor_alltoallv_init(const void* sendbuf, const int sendcounts[], const int sdispls[],
                                 MPI_Datatype sendtype, void* recvbuf, const int recvcounts[], const int rdispls[],
                                 MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistent("MPI_Neighbor_alltoallv_init", comm, info, request, [=](MPI_Request* r) {
    return PMPI_Ineighbor_alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype,
                                    comm, r);
  });
}

int PMPI_Neighbor_alltoallw_init(const void* sendbuf, const int sendcounts[], const MPI_Aint sdispls[],
                                 const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                                 const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm, MPI_Info info,
                                 MPI_Request* request) {
  return persistent("MPI_Neighbor_alltoallw_init", comm, info, request, [=](MPI_Request* r) {
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
