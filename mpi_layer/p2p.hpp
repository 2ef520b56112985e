// Private: the point-to-point calls with MPI_Count counts (p2p.cpp), shared
// by the int bindings and the large-count "_c" ones (p2p_large_count.cpp).
// Each is its binding without the name: fn is the MPI name its errors carry
// ("MPI_Recv", "MPI_Recv_c"). Counts go to the engine as 64-bit byte
// counts, never narrowed, so a _c call above INT_MAX elements moves them all.
#pragma once

#include "mpi_layer/mpi_impl.hpp"

namespace nmad::mpi {

// MPI_Send/Ssend/Rsend/Bsend by mode.
int p2p_send(const char* fn, send_mode mode, const void* buf, MPI_Count count, MPI_Datatype datatype, int dest,
             int tag, MPI_Comm comm);
// MPI_Isend/Issend/Irsend/Ibsend (k = send) and MPI_Irecv (k = recv).
int p2p_start(const char* fn, request_obj::kind k, send_mode mode, const void* buf, MPI_Count count,
              MPI_Datatype datatype, int peer, int tag, MPI_Comm comm, MPI_Request* request);
int p2p_recv(const char* fn, void* buf, MPI_Count count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
             MPI_Status* status);
int p2p_sendrecv(const char* fn, const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, int dest,
                 int sendtag, void* recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int source, int recvtag,
                 MPI_Comm comm, MPI_Status* status);
int p2p_sendrecv_replace(const char* fn, void* buf, MPI_Count count, MPI_Datatype datatype, int dest, int sendtag,
                         int source, int recvtag, MPI_Comm comm, MPI_Status* status);
int p2p_isendrecv(const char* fn, const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, int dest,
                  int sendtag, void* recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int source, int recvtag,
                  MPI_Comm comm, MPI_Request* request);
int p2p_isendrecv_replace(const char* fn, void* buf, MPI_Count count, MPI_Datatype datatype, int dest, int sendtag,
                          int source, int recvtag, MPI_Comm comm, MPI_Request* request);
int p2p_mrecv(const char* fn, void* buf, MPI_Count count, MPI_Datatype datatype, MPI_Message* message,
              MPI_Status* status);
int p2p_imrecv(const char* fn, void* buf, MPI_Count count, MPI_Datatype datatype, MPI_Message* message,
               MPI_Request* request);
// MPI_Send_init/Ssend_init/Rsend_init/Bsend_init (k = send), MPI_Recv_init
// (k = recv) (request_persistent.cpp).
int p2p_init(const char* fn, request_obj::kind k, send_mode mode, const void* buf, MPI_Count count,
             MPI_Datatype datatype, int peer, int tag, MPI_Comm comm, MPI_Request* request);

}  // namespace nmad::mpi
