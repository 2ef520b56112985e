// The MPI 4.0 large-count ("_c") point-to-point bindings: the same calls as
// their int forms (p2p.hpp), the count an MPI_Count carried unchanged to the
// engine. The persistent ones are request_persistent.cpp's, the attached
// buffer's bsend.cpp's, Get_count_c/Get_elements_c datatype/pack_bindings.cpp's.
#include "mpi_layer/mpi_impl.hpp"
#include "mpi_layer/p2p.hpp"

using namespace nmad::mpi;

extern "C" {

int PMPI_Send_c(const void* buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
  return p2p_send("MPI_Send_c", send_mode::standard, buf, count, datatype, dest, tag, comm);
}
int PMPI_Ssend_c(const void* buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
  return p2p_send("MPI_Ssend_c", send_mode::synchronous, buf, count, datatype, dest, tag, comm);
}
int PMPI_Rsend_c(const void* buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
  return p2p_send("MPI_Rsend_c", send_mode::ready, buf, count, datatype, dest, tag, comm);
}
int PMPI_Bsend_c(const void* buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
  return p2p_send("MPI_Bsend_c", send_mode::buffered, buf, count, datatype, dest, tag, comm);
}

int PMPI_Isend_c(const void* buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                 MPI_Request* request) {
  return p2p_start("MPI_Isend_c", request_obj::kind::send, send_mode::standard, buf, count, datatype, dest, tag, comm,
                   request);
}
int PMPI_Issend_c(const void* buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                  MPI_Request* request) {
  return p2p_start("MPI_Issend_c", request_obj::kind::send, send_mode::synchronous, buf, count, datatype, dest, tag,
                   comm, request);
}
int PMPI_Irsend_c(const void* buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                  MPI_Request* request) {
  return p2p_start("MPI_Irsend_c", request_obj::kind::send, send_mode::ready, buf, count, datatype, dest, tag, comm,
                   request);
}
int PMPI_Ibsend_c(const void* buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                  MPI_Request* request) {
  return p2p_start("MPI_Ibsend_c", request_obj::kind::send, send_mode::buffered, buf, count, datatype, dest, tag,
                   comm, request);
}
int PMPI_Irecv_c(void* buf, MPI_Count count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                 MPI_Request* request) {
  return p2p_start("MPI_Irecv_c", request_obj::kind::recv, send_mode::standard, buf, count, datatype, source, tag,
                   comm, request);
}

int PMPI_Recv_c(void* buf, MPI_Count count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                MPI_Status* status) {
  return p2p_recv("MPI_Recv_c", buf, count, datatype, source, tag, comm, status);
}

int PMPI_Sendrecv_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                    void* recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm,
                    MPI_Status* status) {
  return p2p_sendrecv("MPI_Sendrecv_c", sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype,
                      source, recvtag, comm, status);
}
int PMPI_Sendrecv_replace_c(void* buf, MPI_Count count, MPI_Datatype datatype, int dest, int sendtag, int source,
                            int recvtag, MPI_Comm comm, MPI_Status* status) {
  return p2p_sendrecv_replace("MPI_Sendrecv_replace_c", buf, count, datatype, dest, sendtag, source, recvtag, comm,
                              status);
}
int PMPI_Isendrecv_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                     void* recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int source, int recvtag,
                     MPI_Comm comm, MPI_Request* request) {
  return p2p_isendrecv("MPI_Isendrecv_c", sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype,
                       source, recvtag, comm, request);
}
int PMPI_Isendrecv_replace_c(void* buf, MPI_Count count, MPI_Datatype datatype, int dest, int sendtag, int source,
                             int recvtag, MPI_Comm comm, MPI_Request* request) {
  return p2p_isendrecv_replace("MPI_Isendrecv_replace_c", buf, count, datatype, dest, sendtag, source, recvtag, comm,
                               request);
}

int PMPI_Mrecv_c(void* buf, MPI_Count count, MPI_Datatype datatype, MPI_Message* message, MPI_Status* status) {
  return p2p_mrecv("MPI_Mrecv_c", buf, count, datatype, message, status);
}
int PMPI_Imrecv_c(void* buf, MPI_Count count, MPI_Datatype datatype, MPI_Message* message, MPI_Request* request) {
  return p2p_imrecv("MPI_Imrecv_c", buf, count, datatype, message, request);
}

}  // extern "C"

// The public names: weak aliases, so profiling tools can interpose.
#pragma weak MPI_Send_c = PMPI_Send_c
#pragma weak MPI_Ssend_c = PMPI_Ssend_c
#pragma weak MPI_Rsend_c = PMPI_Rsend_c
#pragma weak MPI_Bsend_c = PMPI_Bsend_c
#pragma weak MPI_Isend_c = PMPI_Isend_c
#pragma weak MPI_Issend_c = PMPI_Issend_c
#pragma weak MPI_Irsend_c = PMPI_Irsend_c
#pragma weak MPI_Ibsend_c = PMPI_Ibsend_c
#pragma weak MPI_Irecv_c = PMPI_Irecv_c
#pragma weak MPI_Recv_c = PMPI_Recv_c
#pragma weak MPI_Sendrecv_c = PMPI_Sendrecv_c
#pragma weak MPI_Sendrecv_replace_c = PMPI_Sendrecv_replace_c
#pragma weak MPI_Isendrecv_c = PMPI_Isendrecv_c
#pragma weak MPI_Isendrecv_replace_c = PMPI_Isendrecv_replace_c
#pragma weak MPI_Mrecv_c = PMPI_Mrecv_c
#pragma weak MPI_Imrecv_c = PMPI_Imrecv_c
