// Persistent point-to-point requests: MPI_Send_init (every send mode),
// MPI_Recv_init, MPI_Start, MPI_Startall. A persistent request keeps its
// parameters; start_request (request.cpp) starts it anew each time and the
// completion calls leave it allocated, inactive.
#include <memory>
#include <string>

#include "mpi_layer/mpi_impl.hpp"
#include "mpi_layer/p2p.hpp"

using namespace nmad::mpi;

int nmad::mpi::p2p_init(const char* fn, request_obj::kind k, send_mode mode, const void* buf, MPI_Count count,
                        MPI_Datatype datatype, int peer, int tag, MPI_Comm comm, MPI_Request* request) {
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  comm_obj* c = lookup_comm(comm);
  if (!c) return mpi_raise(fn, nullptr, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm));
  if (!request) return mpi_raise(fn, c, MPI_ERR_ARG, "null request");
  std::string detail;
  if (empty_null_type(count, datatype)) datatype = MPI_BYTE;  // moves nothing, no type to hold
  if (int e = check_comm_buffer(count, datatype, buf, detail)) return mpi_raise(fn, c, e, detail);
  const bool send = k == request_obj::kind::send;
  if (!(peer == MPI_PROC_NULL || (peer >= 0 && peer < c->size()) || (!send && peer == MPI_ANY_SOURCE)))
    return mpi_raise(fn, c, MPI_ERR_RANK, "rank " + std::to_string(peer) + " not in [0, " + std::to_string(c->size()) + ")");
  if (!(tag >= 0 || (!send && tag == MPI_ANY_TAG)))
    return mpi_raise(fn, c, MPI_ERR_TAG, "tag " + std::to_string(tag));
  request_obj* r = new_request();
  r->type = k;
  r->mode = mode;
  r->persistent = true;
  r->active = false;
  r->sbuf = buf;
  r->rbuf = const_cast<void*>(buf);
  r->count = count;
  r->type_handle = datatype;
  if (plain_size(datatype) >= 0) {
    r->bytes = static_cast<std::size_t>(count) * plain_size(datatype);
  } else {
    auto tr = std::make_shared<typed_request>();  // the type outlives its handle
    tr->type = type_of(datatype);
    r->extra = std::move(tr);
  }
  r->peer = peer;
  r->tag = tag;
  r->comm = c;
  *request = r->handle;
  return MPI_SUCCESS;
}

extern "C" {

int PMPI_Send_init(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                  MPI_Request* request) {
  return p2p_init("MPI_Send_init", request_obj::kind::send, send_mode::standard, buf, count, datatype, dest,
                         tag, comm, request);
}
int PMPI_Ssend_init(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                   MPI_Request* request) {
  return p2p_init("MPI_Ssend_init", request_obj::kind::send, send_mode::synchronous, buf, count, datatype,
                         dest, tag, comm, request);
}
int PMPI_Rsend_init(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                   MPI_Request* request) {
  return p2p_init("MPI_Rsend_init", request_obj::kind::send, send_mode::ready, buf, count, datatype, dest,
                         tag, comm, request);
}
int PMPI_Bsend_init(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                   MPI_Request* request) {
  return p2p_init("MPI_Bsend_init", request_obj::kind::send, send_mode::buffered, buf, count, datatype,
                         dest, tag, comm, request);
}
int PMPI_Recv_init(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                  MPI_Request* request) {
  return p2p_init("MPI_Recv_init", request_obj::kind::recv, send_mode::standard, buf, count, datatype,
                         source, tag, comm, request);
}

int PMPI_Start(MPI_Request* request) {
  if (!check_initialized("MPI_Start")) return MPI_ERR_OTHER;
  if (!request) return mpi_raise("MPI_Start", nullptr, MPI_ERR_ARG, "null request");
  request_obj* r = lookup_request(*request);
  if (!r || !r->persistent)
    return mpi_raise("MPI_Start", nullptr, MPI_ERR_REQUEST, "not a persistent request: " + std::to_string(*request));
  if (r->active) return mpi_raise("MPI_Start", r->comm, MPI_ERR_REQUEST, "request already active");
  return start_request(*r);
}

int PMPI_Startall(int count, MPI_Request requests[]) {
  if (!check_initialized("MPI_Startall")) return MPI_ERR_OTHER;
  if (count < 0 || (count > 0 && !requests)) return mpi_raise("MPI_Startall", nullptr, MPI_ERR_ARG, "bad count or array");
  for (int i = 0; i < count; ++i)
    if (int e = PMPI_Start(&requests[i])) return e;
  return MPI_SUCCESS;
}

int PMPI_Send_init_c(const void* buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                     MPI_Request* request) {
  return p2p_init("MPI_Send_init_c", request_obj::kind::send, send_mode::standard, buf, count, datatype, dest, tag,
                  comm, request);
}
int PMPI_Ssend_init_c(const void* buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                      MPI_Request* request) {
  return p2p_init("MPI_Ssend_init_c", request_obj::kind::send, send_mode::synchronous, buf, count, datatype, dest,
                  tag, comm, request);
}
int PMPI_Rsend_init_c(const void* buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                      MPI_Request* request) {
  return p2p_init("MPI_Rsend_init_c", request_obj::kind::send, send_mode::ready, buf, count, datatype, dest, tag,
                  comm, request);
}
int PMPI_Bsend_init_c(const void* buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                      MPI_Request* request) {
  return p2p_init("MPI_Bsend_init_c", request_obj::kind::send, send_mode::buffered, buf, count, datatype, dest, tag,
                  comm, request);
}
int PMPI_Recv_init_c(void* buf, MPI_Count count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                     MPI_Request* request) {
  return p2p_init("MPI_Recv_init_c", request_obj::kind::recv, send_mode::standard, buf, count, datatype, source,
                  tag, comm, request);
}

}  // extern "C"

// The public names: weak aliases, so profiling tools can interpose.
#pragma weak MPI_Send_init = PMPI_Send_init
#pragma weak MPI_Ssend_init = PMPI_Ssend_init
#pragma weak MPI_Rsend_init = PMPI_Rsend_init
#pragma weak MPI_Bsend_init = PMPI_Bsend_init
#pragma weak MPI_Recv_init = PMPI_Recv_init
#pragma weak MPI_Start = PMPI_Start
#pragma weak MPI_Startall = PMPI_Startall
#pragma weak MPI_Send_init_c = PMPI_Send_init_c
#pragma weak MPI_Ssend_init_c = PMPI_Ssend_init_c
#pragma weak MPI_Rsend_init_c = PMPI_Rsend_init_c
#pragma weak MPI_Bsend_init_c = PMPI_Bsend_init_c
#pragma weak MPI_Recv_init_c = PMPI_Recv_init_c
