#pragma once
// The collectives behind the MPI entry points, one function per collective
// for its blocking (req null) and non-blocking forms, shared by the MPI-3
// int bindings (collectives.cpp, neighbor.cpp) and the large-count `_c`
// bindings of MPI 4.0 (large_count.cpp, large_count_neighbor.cpp).
//
// Counts are Count and count/displacement arrays count_array (int,
// MPI_Count or MPI_Aint elements), so a `_c` call reaches the byte
// arithmetic (sizes in std::size_t, see call.hpp) without any truncation
// and without a copy of its arrays. `fn` is the MPI name errors are
// reported under. Every function checks its arguments and returns an MPI
// error code raised on the communicator (see call.hpp, collective()).
#include "mpi_layer/coll/args.hpp"
#include "mpi_layer/mpi_impl.hpp"

namespace nmad::mpi::coll_call {

int barrier(const char* fn, MPI_Comm comm, MPI_Request* req);
int bcast(const char* fn, void* buf, Count count, MPI_Datatype dt, int root, MPI_Comm comm, MPI_Request* req);

// reduce (root given), allreduce, scan, exscan (root ignored)
enum class red_kind { reduce, allreduce, scan, exscan };
int reduce(const char* fn, const void* sbuf, void* rbuf, Count count, MPI_Datatype dt, MPI_Op op, int root,
           red_kind k, MPI_Comm comm, MPI_Request* req);

// gather (all false) and allgather (all true, root ignored), and their v forms.
int gather(const char* fn, const void* sbuf, Count scount, MPI_Datatype stype, void* rbuf, Count rcount,
           MPI_Datatype rtype, int root, bool all, MPI_Comm comm, MPI_Request* req);
int gatherv(const char* fn, const void* sbuf, Count scount, MPI_Datatype stype, void* rbuf, count_array rcounts,
            count_array displs, MPI_Datatype rtype, int root, bool all, MPI_Comm comm, MPI_Request* req);
int scatter(const char* fn, const void* sbuf, Count scount, MPI_Datatype stype, void* rbuf, Count rcount,
            MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request* req);
int scatterv(const char* fn, const void* sbuf, count_array scounts, count_array displs, MPI_Datatype stype,
             void* rbuf, Count rcount, MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request* req);
int alltoall(const char* fn, const void* sbuf, Count scount, MPI_Datatype stype, void* rbuf, Count rcount,
             MPI_Datatype rtype, MPI_Comm comm, MPI_Request* req);
// alltoallv (w false: stypes/rtypes point to one type, displacements in its
// extent) and alltoallw (per-peer types, displacements in bytes).
int alltoallw(const char* fn, const void* sbuf, count_array scounts, count_array sdispls, const MPI_Datatype* stypes,
              void* rbuf, count_array rcounts, count_array rdispls, const MPI_Datatype* rtypes, bool w,
              MPI_Comm comm, MPI_Request* req);
// reduce_scatter (block false: rcounts) and reduce_scatter_block (block_count).
int reduce_scatter(const char* fn, const void* sbuf, void* rbuf, bool block, count_array rcounts, Count block_count,
                   MPI_Datatype dt, MPI_Op op, MPI_Comm comm, MPI_Request* req);

}  // namespace nmad::mpi::coll_call

// Neighbourhood collectives (neighbor.cpp): one round over the topology's
// neighbours.
namespace nmad::mpi::neighbor {

int allgather(const char* fn, const void* sbuf, Count scount, MPI_Datatype stype, void* rbuf, Count rcount,
              MPI_Datatype rtype, MPI_Comm comm, MPI_Request* req);
int allgatherv(const char* fn, const void* sbuf, Count scount, MPI_Datatype stype, void* rbuf, count_array rcounts,
               count_array displs, MPI_Datatype rtype, MPI_Comm comm, MPI_Request* req);
int alltoall(const char* fn, const void* sbuf, Count scount, MPI_Datatype stype, void* rbuf, Count rcount,
             MPI_Datatype rtype, MPI_Comm comm, MPI_Request* req);
// alltoallv (w false: displacements in the one type's extent) and alltoallw
// (w true: per-neighbour types, byte displacements).
int alltoallw(const char* fn, const void* sbuf, count_array scounts, count_array sdispls, const MPI_Datatype* stypes,
              void* rbuf, count_array rcounts, count_array rdispls, const MPI_Datatype* rtypes, bool w,
              MPI_Comm comm, MPI_Request* req);

}  // namespace nmad::mpi::neighbor
