// Point-to-point: every send mode but the buffered one's buffer (blocking
// and non-blocking), receives, sendrecv, probes (including matched probes).
// The attached buffer of buffered sends is bsend.cpp's.
//
// Datatypes: predefined types go straight to the engine (buf, count * size).
// Derived types are resolved by resolve_send/resolve_recv (datatype/datatype_bindings.cpp):
// in place when the elements form one contiguous block, otherwise through a
// staging buffer (packed before the send; unpacked after the receive).
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "api/nmad/services/thread_heap.hpp"
#include "mpi_layer/mpi_impl.hpp"
#include "mpi_layer/p2p.hpp"


using namespace nmad::mpi;

namespace {

// The engine request of a blocking call (MPI_Send, MPI_Recv, ...): each
// thread reuses one (making and destroying one per call cost more than the
// rest of MPI_Send's own work); a blocking call nested in another on the
// same thread (an error handler's, say) gets its own.
class blocking_request {
 public:
  // isend/irecv then wait: one blocking call for a progress thread too
  // (it is not woken between the two).
  blocking_request() : _section(*st().session) {
    slot* s = t_slot;
    if (!s) [[unlikely]] s = &nmad::thread_heap::create(t_slot);
    if (!s->busy) {
      s->busy = true;
      _req = &s->req;
    } else {
      _own = std::make_unique<nmad::request>();
      _req = _own.get();
    }
  }
  ~blocking_request() {
    if (!_own) t_slot->busy = false;
  }
  blocking_request(const blocking_request&) = delete;
  blocking_request& operator=(const blocking_request&) = delete;
  nmad::request& get() { return *_req; }

 private:
  // The thread's request, on the heap from its first blocking call to its
  // end (api/nmad/services/thread_heap.hpp: the library keeps only a pointer in
  // static TLS, and reaching it costs no TLS initialisation call).
  struct slot {
    nmad::request req;
    bool busy = false;
  };
  [[gnu::tls_model("initial-exec")]] static thread_local slot* t_slot;
  nmad::layer::blocking_section _section;  // first in, last out
  nmad::request* _req = nullptr;
  std::unique_ptr<nmad::request> _own;
};
[[gnu::tls_model("initial-exec")]] thread_local blocking_request::slot* blocking_request::t_slot = nullptr;

// The errors of check_p2p, raised out of line: the checks themselves stay
// a few compares with no string (and no stack frame) on the way.
[[gnu::cold, gnu::noinline]] int raise_bad_comm(const char* fn, MPI_Comm comm) {
  return mpi_raise(fn, nullptr, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm));
}
// (Also the derived-datatype path, whose checks need the type's lookup.)
[[gnu::noinline]] int check_buffer_full(const char* fn, comm_obj* c, MPI_Count count, MPI_Datatype type, const void* buf) {
  std::string detail;
  const int e = check_comm_buffer(count, type, buf, detail);
  return e ? mpi_raise(fn, c, e, detail) : MPI_SUCCESS;
}
[[gnu::cold, gnu::noinline]] int raise_bad_rank(const char* fn, comm_obj* c, int peer, bool send) {
  return mpi_raise(fn, c, MPI_ERR_RANK,
                   (send ? "destination " : "source ") + std::to_string(peer) + " not in [0, " +
                       std::to_string(c->size()) + ")");
}
[[gnu::cold, gnu::noinline]] int raise_bad_tag(const char* fn, comm_obj* c, int tag, bool send) {
  return mpi_raise(fn, c, MPI_ERR_TAG, "tag " + std::to_string(tag) + (send ? " is negative" : " is invalid"));
}

// Validates the arguments of a send or receive; 0 or an error raised on c.
// A transfer of nothing may name MPI_DATATYPE_NULL (empty_null_type): type
// becomes MPI_BYTE, so what follows never sees the null handle.
[[gnu::always_inline]] inline int check_p2p(const char* fn, comm_obj*& c, MPI_Comm comm, const void* buf, MPI_Count count,
                                            MPI_Datatype& type, int peer, int tag, bool send) {
  c = lookup_comm(comm);
  if (!c) return raise_bad_comm(fn, comm);
  const int n = type_size(type);
  if (count < 0 || n < 0 || (!buf && count > 0 && n > 0)) {  // not the plain predefined case
    if (empty_null_type(count, type)) type = MPI_BYTE;
    else if (int e = check_buffer_full(fn, c, count, type, buf)) return e;
  }
  if (!(peer == MPI_PROC_NULL || (peer >= 0 && peer < c->size()) || (!send && peer == MPI_ANY_SOURCE)))
    return raise_bad_rank(fn, c, peer, send);
  if (!(tag >= 0 || (!send && tag == MPI_ANY_TAG))) return raise_bad_tag(fn, c, tag, send);
  return MPI_SUCCESS;
}

// A probe's arguments: a communicator, a source and a tag, as a receive's.
inline int check_probe(const char* fn, comm_obj*& c, MPI_Comm comm, int source, int tag) {
  MPI_Datatype none = MPI_BYTE;
  return check_p2p(fn, c, comm, nullptr, 0, none, source, tag, false);
}

// MPI-3.1 3.2.5: calls that return one status (Recv, Sendrecv, Probe,
// Iprobe, Mprobe, Improbe, Mrecv) never modify its MPI_ERROR field; only
// the multiple-completion calls set it (with MPI_ERR_IN_STATUS). So these
// helpers fill source, tag, count and cancelled, and keep MPI_ERROR.
void proc_null_status(MPI_Status* status) {
  if (status == MPI_STATUS_IGNORE) return;
  const int keep = status->MPI_ERROR;
  empty_status(status);
  status->MPI_SOURCE = MPI_PROC_NULL;
  status->MPI_ERROR = keep;
}

void received_status(MPI_Status* status, comm_obj* c, const nmad::recv_status& rs) {
  if (status == MPI_STATUS_IGNORE) return;
  const int keep = status->MPI_ERROR;
  fill_status(status, c, rs, MPI_SUCCESS);
  status->MPI_ERROR = keep;
}

// Bytes of count plain elements (plain_size(t) >= 0).
std::size_t bytes_of(MPI_Count count, MPI_Datatype t) { return static_cast<std::size_t>(count) * plain_size(t); }

// After a blocking receive completed with err: unpacks a staged receive,
// fills the status, raises the error if any.
int finish_blocking_recv(const char* fn, comm_obj* c, nmad::request& req, int err, recv_stage* stage,
                         MPI_Status* status) {
  std::string detail;  // stays empty (no allocation) on success
  if (stage) {
    const int unpack_err = stage->finish(req, detail);
    if (err == MPI_SUCCESS) err = unpack_err;
  }
  received_status(status, c, req.status());
  if (err != MPI_SUCCESS) return mpi_raise(fn, c, err, req.error() != nmad::errc::ok ? req.error_message() : detail);
  return MPI_SUCCESS;
}

// The engine view of a derived-datatype receive or send buffer (out of
// line: predefined types need none of its locals).
[[gnu::noinline]] int recv_view_typed(comm_obj* c, const char* fn, void* buf, MPI_Count count, MPI_Datatype t, void*& ptr,
                                      std::size_t& bytes, std::shared_ptr<recv_stage>& stage) {
  std::string detail;
  Datatype dt;
  if (int e = lookup_comm_type(t, dt, detail)) return mpi_raise(fn, c, e, detail);
  if (int e = resolve_recv(buf, count, dt, ptr, bytes, stage, detail)) return mpi_raise(fn, c, e, detail);
  return MPI_SUCCESS;
}
[[gnu::noinline]] int send_view_typed(comm_obj* c, const char* fn, const void* buf, MPI_Count count, MPI_Datatype t,
                                      const void*& ptr, std::size_t& bytes, std::shared_ptr<send_stage>& stage) {
  std::string detail;
  Datatype dt;
  if (int e = lookup_comm_type(t, dt, detail)) return mpi_raise(fn, c, e, detail);
  if (int e = resolve_send(buf, count, dt, ptr, bytes, stage, detail)) return mpi_raise(fn, c, e, detail);
  return MPI_SUCCESS;
}

// The engine view of a typed receive or send buffer (Recv, Sendrecv, Mrecv).
[[gnu::always_inline]] inline int recv_view(comm_obj* c, const char* fn, void* buf, MPI_Count count, MPI_Datatype t,
                                            void*& ptr, std::size_t& bytes, std::shared_ptr<recv_stage>& stage) {
  ptr = buf;
  if (plain_size(t) >= 0) {
    bytes = bytes_of(count, t);
    return MPI_SUCCESS;
  }
  return recv_view_typed(c, fn, buf, count, t, ptr, bytes, stage);
}
[[gnu::always_inline]] inline int send_view(comm_obj* c, const char* fn, const void* buf, MPI_Count count, MPI_Datatype t,
                                            const void*& ptr, std::size_t& bytes,
                                            std::shared_ptr<send_stage>& stage) {
  ptr = buf;
  if (plain_size(t) >= 0) {
    bytes = bytes_of(count, t);
    return MPI_SUCCESS;
  }
  return send_view_typed(c, fn, buf, count, t, ptr, bytes, stage);
}

// Sendrecv on engine views: the send side already resolved (sptr, sbytes).
int sendrecv_core(const char* fn, comm_obj* c, const void* sptr, std::size_t sbytes, int dest, int sendtag,
                  void* recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Status* status);

int blocking_send(const char* fn, send_mode mode, const void* buf, MPI_Count count, MPI_Datatype datatype, int dest,
                  int tag, MPI_Comm comm) {
  tool_event_point tool_events;  // (MPI_T events: delivered on the way out, every send mode and count width)
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  comm_obj* c = nullptr;
  if (int e = check_p2p(fn, c, comm, buf, count, datatype, dest, tag, true)) return e;
  if (dest == MPI_PROC_NULL) return MPI_SUCCESS;
  state& s = st();
  const nmad::tag_t etag = engine_tag(c->p2p_ctx, tag);
  const bool predefined = plain_size(datatype) >= 0;  // and contiguous
  const nmad::send_flags flags =
      mode == send_mode::synchronous ? nmad::send_flags::synchronous : nmad::send_flags::none;
  if (predefined && mode != send_mode::buffered) {  // the plain case, as below without staging
    blocking_request held;
    nmad::request& req = held.get();
    s.session->isend(c->world_of[dest], etag, buf, bytes_of(count, datatype), req, send_options_of(*c, flags));
    const nmad::errc e = s.session->wait(req);
    if (e != nmad::errc::ok) return mpi_raise(fn, c, from_errc(e), req.error_message());
    return MPI_SUCCESS;
  }
  Datatype dt;
  std::string detail;
  if (!predefined)
    if (int e = lookup_comm_type(datatype, dt, detail)) return mpi_raise(fn, c, e, detail);
  if (mode == send_mode::buffered) {
    const int e = predefined ? bsend_copy(*c, buf, bytes_of(count, datatype), c->world_of[dest], etag, detail)
                             : bsend_typed(*c, buf, count, dt, c->world_of[dest], etag, detail);
    return e == MPI_SUCCESS ? e : mpi_raise(fn, c, e, detail);
  }
  const void* ptr = buf;
  std::size_t bytes = 0;
  std::shared_ptr<send_stage> stage;  // alive until the wait below returns
  if (predefined) bytes = bytes_of(count, datatype);
  else if (int e = resolve_send(buf, count, dt, ptr, bytes, stage, detail)) return mpi_raise(fn, c, e, detail);
  blocking_request held;
  nmad::request& req = held.get();
  s.session->isend(c->world_of[dest], etag, ptr, bytes, req, send_options_of(*c, flags));
  const nmad::errc e = s.session->wait(req);
  if (e != nmad::errc::ok) return mpi_raise(fn, c, from_errc(e), req.error_message());
  return MPI_SUCCESS;
}

// A send/recv request on a derived datatype holds the type (not the
// handle, which may be freed while the operation is pending);
// start_request stages the data.
[[gnu::noinline]] void hold_type(request_obj& r, MPI_Datatype datatype) {
  auto tr = std::make_shared<typed_request>();
  tr->type = type_of(datatype);
  r.extra = std::move(tr);
}

// Inlined into each MPI_I*send/MPI_Irecv (fn, k, mode are constants there).
[[gnu::always_inline]] inline int nonblocking(const char* fn, request_obj::kind k, send_mode mode, const void* buf,
                                              MPI_Count count, MPI_Datatype datatype, int peer, int tag, MPI_Comm comm,
                                              MPI_Request* request) {
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  comm_obj* c = nullptr;
  const bool send = k == request_obj::kind::send;
  if (int e = check_p2p(fn, c, comm, buf, count, datatype, peer, tag, send)) return e;
  if (!request) return mpi_raise(fn, c, MPI_ERR_ARG, "null request");
  request_obj* r = new_request();
  r->type = k;
  r->mode = mode;
  r->persistent = false;
  r->sbuf = buf;
  r->rbuf = const_cast<void*>(buf);
  r->count = count;
  r->type_handle = datatype;
  if (plain_size(datatype) >= 0) r->bytes = bytes_of(count, datatype);
  else hold_type(*r, datatype);
  r->peer = peer;
  r->tag = tag;
  r->comm = c;
  const int e = start_request(*r);
  if (e != MPI_SUCCESS) {
    release_request(r);
    return e;  // already raised
  }
  *request = r->handle;
  return MPI_SUCCESS;
}

int sendrecv_core(const char* fn, comm_obj* c, const void* sptr, std::size_t sbytes, int dest, int sendtag,
                  void* recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Status* status) {
  state& s = st();
  void* rptr = nullptr;
  std::size_t rbytes = 0;
  std::shared_ptr<recv_stage> stage;
  if (source != MPI_PROC_NULL)
    if (int e = recv_view(c, fn, recvbuf, recvcount, recvtype, rptr, rbytes, stage)) return e;
  nmad::request rr, sr;
  if (source != MPI_PROC_NULL) {
    const int src = source == MPI_ANY_SOURCE ? nmad::any_source : c->world_of[source];
    s.session->irecv(src, engine_tag(c->p2p_ctx, recvtag == MPI_ANY_TAG ? 0 : recvtag), rptr, rbytes, rr,
                     engine_mask(recvtag));
  }
  if (dest != MPI_PROC_NULL) s.session->isend(c->world_of[dest], engine_tag(c->p2p_ctx, sendtag), sptr, sbytes, sr, send_options_of(*c));
  const nmad::errc es = dest != MPI_PROC_NULL ? s.session->wait(sr) : nmad::errc::ok;
  const nmad::errc er = source != MPI_PROC_NULL ? s.session->wait(rr) : nmad::errc::ok;
  std::string detail = rr.error_message();
  int rerr = from_errc(er);
  if (stage) {
    const int ue = stage->finish(rr, detail);
    if (rerr == MPI_SUCCESS) rerr = ue;
  }
  if (source == MPI_PROC_NULL) proc_null_status(status);
  else received_status(status, c, rr.status());
  if (es != nmad::errc::ok) return mpi_raise(fn, c, from_errc(es), sr.error_message());
  if (rerr != MPI_SUCCESS) return mpi_raise(fn, c, rerr, detail);
  return MPI_SUCCESS;
}

}  // namespace

extern "C" {

int PMPI_Send(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
  return blocking_send("MPI_Send", send_mode::standard, buf, count, datatype, dest, tag, comm);
}
int PMPI_Ssend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
  return blocking_send("MPI_Ssend", send_mode::synchronous, buf, count, datatype, dest, tag, comm);
}
// Ready mode: the receive is known to be posted; a standard send is a
// correct (and here equally fast) implementation.
int PMPI_Rsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
  return blocking_send("MPI_Rsend", send_mode::ready, buf, count, datatype, dest, tag, comm);
}
int PMPI_Bsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
  return blocking_send("MPI_Bsend", send_mode::buffered, buf, count, datatype, dest, tag, comm);
}

int PMPI_Isend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
              MPI_Request* request) {
  return nonblocking("MPI_Isend", request_obj::kind::send, send_mode::standard, buf, count, datatype, dest, tag, comm,
                     request);
}
int PMPI_Issend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
               MPI_Request* request) {
  return nonblocking("MPI_Issend", request_obj::kind::send, send_mode::synchronous, buf, count, datatype, dest, tag,
                     comm, request);
}
int PMPI_Irsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
               MPI_Request* request) {
  return nonblocking("MPI_Irsend", request_obj::kind::send, send_mode::ready, buf, count, datatype, dest, tag, comm,
                     request);
}
int PMPI_Ibsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
               MPI_Request* request) {
  return nonblocking("MPI_Ibsend", request_obj::kind::send, send_mode::buffered, buf, count, datatype, dest, tag,
                     comm, request);
}

int PMPI_Irecv(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
              MPI_Request* request) {
  return nonblocking("MPI_Irecv", request_obj::kind::recv, send_mode::standard, buf, count, datatype, source, tag,
                     comm, request);
}

}  // extern "C"

int nmad::mpi::p2p_recv(const char* fn, void* buf, MPI_Count count, MPI_Datatype datatype, int source, int tag,
                        MPI_Comm comm, MPI_Status* status) {
  tool_event_point tool_events;  // (MPI_T events: delivered on the way out)
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  comm_obj* c = nullptr;
  if (int e = check_p2p(fn, c, comm, buf, count, datatype, source, tag, false)) return e;
  if (source == MPI_PROC_NULL) {
    proc_null_status(status);
    return MPI_SUCCESS;
  }
  state& s = st();
  void* ptr = nullptr;
  std::size_t bytes = 0;
  std::shared_ptr<recv_stage> stage;  // derived, non-contiguous types only
  if (int e = recv_view(c, fn, buf, count, datatype, ptr, bytes, stage)) return e;
  blocking_request held;
  nmad::request& req = held.get();
  const int src = source == MPI_ANY_SOURCE ? nmad::any_source : c->world_of[source];
  s.session->irecv(src, engine_tag(c->p2p_ctx, tag == MPI_ANY_TAG ? 0 : tag), ptr, bytes, req, engine_mask(tag));
  const nmad::errc e = s.session->wait(req);
  return finish_blocking_recv(fn, c, req, from_errc(e), stage.get(), status);
}


// The definitions below keep the C linkage mpi.h gave their PMPI_ names.

int nmad::mpi::p2p_send(const char* fn, send_mode mode, const void* buf, MPI_Count count, MPI_Datatype datatype,
                        int dest, int tag, MPI_Comm comm) {
  return blocking_send(fn, mode, buf, count, datatype, dest, tag, comm);
}
int nmad::mpi::p2p_start(const char* fn, request_obj::kind k, send_mode mode, const void* buf, MPI_Count count,
                         MPI_Datatype datatype, int peer, int tag, MPI_Comm comm, MPI_Request* request) {
  return nonblocking(fn, k, mode, buf, count, datatype, peer, tag, comm, request);
}

int nmad::mpi::p2p_sendrecv(const char* fn, const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, int dest,
                            int sendtag, void* recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int source,
                            int recvtag, MPI_Comm comm, MPI_Status* status) {
  tool_event_point tool_events;  // (MPI_T events: delivered on the way out)
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  comm_obj* c = nullptr;
  if (int e = check_p2p(fn, c, comm, sendbuf, sendcount, sendtype, dest, sendtag, true)) return e;
  if (int e = check_p2p(fn, c, comm, recvbuf, recvcount, recvtype, source, recvtag, false)) return e;
  const void* sptr = nullptr;
  std::size_t sbytes = 0;
  std::shared_ptr<send_stage> stage;  // alive until sendrecv_core returns
  if (dest != MPI_PROC_NULL)
    if (int e = send_view(c, fn, sendbuf, sendcount, sendtype, sptr, sbytes, stage)) return e;
  return sendrecv_core(fn, c, sptr, sbytes, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag,
                       status);
}

namespace {
// The packed bytes of (buf, count, datatype) in `copy` (predefined types: a
// plain copy), for the _replace forms; errors are raised on c.
int outgoing_copy(const char* fn, comm_obj* c, const void* buf, MPI_Count count, MPI_Datatype datatype,
                  std::vector<std::byte>& copy) {
  if (plain_size(datatype) >= 0) {
    const std::size_t n = bytes_of(count, datatype);
    copy.resize(n);
    if (n) std::memcpy(copy.data(), buf, n);
    return MPI_SUCCESS;
  }
  std::string detail;
  Datatype dt;
  if (int e = lookup_comm_type(datatype, dt, detail)) return mpi_raise(fn, c, e, detail);
  try {
    copy.resize(static_cast<std::size_t>(dt.size()) * static_cast<std::size_t>(count));
    Count pos = 0;
    dt.pack(buf, count, copy.data(), static_cast<Count>(copy.size()), pos);
  } catch (const DatatypeError& e) {
    return mpi_raise(fn, c, datatype_error_class(e), e.what());
  }
  return MPI_SUCCESS;
}
}  // namespace

int nmad::mpi::p2p_sendrecv_replace(const char* fn, void* buf, MPI_Count count, MPI_Datatype datatype, int dest,
                                    int sendtag, int source, int recvtag, MPI_Comm comm, MPI_Status* status) {
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  comm_obj* c = nullptr;
  if (int e = check_p2p(fn, c, comm, buf, count, datatype, dest, sendtag, true)) return e;
  if (int e = check_p2p(fn, c, comm, buf, count, datatype, source, recvtag, false)) return e;
  // The outgoing data is sent from a packed copy, so the receive can land in
  // buf.
  std::vector<std::byte> copy;
  if (dest != MPI_PROC_NULL)
    if (int e = outgoing_copy(fn, c, buf, count, datatype, copy)) return e;
  return sendrecv_core(fn, c, copy.data(), copy.size(), dest, sendtag, buf, count, datatype,
                       source, recvtag, status);
}

// MPI 4.0 3.10: MPI_Isendrecv(_replace). A receive and a send started at
// once as for MPI_Sendrecv, under one request: a generic request that is
// done when both are, whose status is the receive's and whose error is the
// first of the two. Freed while active, it completes in the background
// like any freed request (the inner two with it); MPI_Cancel cancels both.
namespace {
struct sendrecv_pair {
  MPI_Request recv = MPI_REQUEST_NULL, send = MPI_REQUEST_NULL;
  bool finished = false;
  MPI_Status status{};
  int error = MPI_SUCCESS;
  std::string detail;
  std::vector<std::byte> copy;  // _replace: the outgoing data
};

// The generic request over p's two requests (already started).
int pair_request(comm_obj* c, std::shared_ptr<sendrecv_pair> p, MPI_Request* request) {
  request_obj* r = new_request();
  r->type = request_obj::kind::generic;
  r->comm = c;
  r->active = true;
  r->poll = [p](request_obj& rq) {
    if (p->finished) return true;
    if (!handle_done(p->recv) || !handle_done(p->send)) return false;
    std::string d1, d2;
    const int e1 = finish_done_request(&p->recv, &p->status, d1);
    MPI_Status ss;
    const int e2 = finish_done_request(&p->send, &ss, d2);
    p->error = e1 != MPI_SUCCESS ? e1 : e2;
    p->detail = e1 != MPI_SUCCESS ? "the receive: " + d1 : e2 != MPI_SUCCESS ? "the send: " + d2 : std::string();
    p->status.MPI_ERROR = p->error;
    rq.local_status = p->status;
    p->finished = true;
    return true;
  };
  r->on_complete = [p](request_obj&, std::string& d) {
    d = p->detail;
    return p->error;
  };
  r->on_cancel = [p](request_obj&, std::string&) {
    if (p->recv != MPI_REQUEST_NULL) PMPI_Cancel(&p->recv);
    if (p->send != MPI_REQUEST_NULL) PMPI_Cancel(&p->send);
    return MPI_SUCCESS;
  };
  r->extra = p;
  *request = r->handle;
  return MPI_SUCCESS;
}

// Starts the receive then the send of p; on failure nothing is left running
// (the error was raised by the inner call).
int start_pair(const char* fn, sendrecv_pair& p, const void* sbuf, MPI_Count scount, MPI_Datatype stype, int dest,
               int stag, void* rbuf, MPI_Count rcount, MPI_Datatype rtype, int source, int rtag, MPI_Comm comm) {
  if (int e = nonblocking(fn, request_obj::kind::recv, send_mode::standard, rbuf, rcount, rtype, source, rtag, comm,
                          &p.recv))
    return e;
  if (int e = nonblocking(fn, request_obj::kind::send, send_mode::standard, sbuf, scount, stype, dest, stag, comm,
                          &p.send)) {
    PMPI_Cancel(&p.recv);
    PMPI_Request_free(&p.recv);
    return e;
  }
  return MPI_SUCCESS;
}
}  // namespace

int nmad::mpi::p2p_isendrecv(const char* fn, const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                             int dest, int sendtag, void* recvbuf, MPI_Count recvcount, MPI_Datatype recvtype,
                             int source, int recvtag, MPI_Comm comm, MPI_Request* request) {
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  comm_obj* c = nullptr;
  if (int e = check_p2p(fn, c, comm, sendbuf, sendcount, sendtype, dest, sendtag, true)) return e;
  if (int e = check_p2p(fn, c, comm, recvbuf, recvcount, recvtype, source, recvtag, false)) return e;
  if (!request) return mpi_raise(fn, c, MPI_ERR_ARG, "null request");
  auto p = std::make_shared<sendrecv_pair>();
  if (int e = start_pair(fn, *p, sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source,
                         recvtag, comm))
    return e;
  return pair_request(c, std::move(p), request);
}

int nmad::mpi::p2p_isendrecv_replace(const char* fn, void* buf, MPI_Count count, MPI_Datatype datatype, int dest,
                                     int sendtag, int source, int recvtag, MPI_Comm comm, MPI_Request* request) {
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  comm_obj* c = nullptr;
  if (int e = check_p2p(fn, c, comm, buf, count, datatype, dest, sendtag, true)) return e;
  if (int e = check_p2p(fn, c, comm, buf, count, datatype, source, recvtag, false)) return e;
  if (!request) return mpi_raise(fn, c, MPI_ERR_ARG, "null request");
  // The outgoing data leaves from a packed copy, so the receive can land
  // in buf while the send is in flight.
  auto p = std::make_shared<sendrecv_pair>();
  if (dest != MPI_PROC_NULL)
    if (int e = outgoing_copy(fn, c, buf, count, datatype, p->copy)) return e;
  if (int e = start_pair(fn, *p, p->copy.data(), static_cast<MPI_Count>(p->copy.size()), MPI_BYTE, dest, sendtag, buf,
                         count, datatype, source, recvtag, comm))
    return e;
  return pair_request(c, std::move(p), request);
}

namespace {
// Names the dead: the rank probed, or (any source) the ranks that failed.
std::string probe_failure(comm_obj* c, int source, nmad::errc e) {
  if (e != nmad::errc::peer_failed) return "invalid source";
  if (source != MPI_ANY_SOURCE) return "rank " + std::to_string(source) + " of the communicator failed";
  std::string dead;
  int n = 0;
  for (int r = 0; r < c->size(); ++r) {
    if (c->world_of[r] == st().session->rank() || st().session->peer_alive(c->world_of[r])) continue;
    if (++n <= 8) dead += (dead.empty() ? "rank " : ", rank ") + std::to_string(r);
  }
  if (n > 8) dead += ", ...";
  return "any-source probe: every other rank of the communicator failed (" + dead + ")";
}
}  // namespace

int PMPI_Iprobe(int source, int tag, MPI_Comm comm, int* flag, MPI_Status* status) {
  tool_event_point tool_events;  // (MPI_T events: delivered on the way out)
  if (!check_initialized("MPI_Iprobe")) return MPI_ERR_OTHER;
  comm_obj* c = nullptr;
  if (int e = check_probe("MPI_Iprobe", c, comm, source, tag)) return e;
  if (!flag) return mpi_raise("MPI_Iprobe", c, MPI_ERR_ARG, "null flag");
  if (source == MPI_PROC_NULL) {
    *flag = 1;
    proc_null_status(status);
    return MPI_SUCCESS;
  }
  nmad::recv_status rs;
  const int src = source == MPI_ANY_SOURCE ? nmad::any_source : c->world_of[source];
  *flag = st().session->iprobe(src, engine_tag(c->p2p_ctx, tag == MPI_ANY_TAG ? 0 : tag), rs, engine_mask(tag)) ? 1 : 0;
  if (*flag) received_status(status, c, rs);
  return MPI_SUCCESS;
}

int PMPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status* status) {
  tool_event_point tool_events;  // (MPI_T events: delivered on the way out)
  if (!check_initialized("MPI_Probe")) return MPI_ERR_OTHER;
  comm_obj* c = nullptr;
  if (int e = check_probe("MPI_Probe", c, comm, source, tag)) return e;
  if (source == MPI_PROC_NULL) {
    proc_null_status(status);
    return MPI_SUCCESS;
  }
  const int src = source == MPI_ANY_SOURCE ? nmad::any_source : c->world_of[source];
  // The engine's blocking probe waits with the session's wait policy and
  // gives up once no live peer could send a matching message.
  const nmad::recv_status rs =
      st().session->probe(src, engine_tag(c->p2p_ctx, tag == MPI_ANY_TAG ? 0 : tag), engine_mask(tag));
  if (rs.error != nmad::errc::ok)
    return mpi_raise("MPI_Probe", c, from_errc(rs.error), probe_failure(c, source, rs.error));
  received_status(status, c, rs);
  return MPI_SUCCESS;
}

int PMPI_Improbe(int source, int tag, MPI_Comm comm, int* flag, MPI_Message* message, MPI_Status* status) {
  if (!check_initialized("MPI_Improbe")) return MPI_ERR_OTHER;
  comm_obj* c = nullptr;
  if (int e = check_probe("MPI_Improbe", c, comm, source, tag)) return e;
  if (!flag || !message) return mpi_raise("MPI_Improbe", c, MPI_ERR_ARG, "null flag or message");
  if (source == MPI_PROC_NULL) {
    *flag = 1;
    *message = MPI_MESSAGE_NO_PROC;
    proc_null_status(status);
    return MPI_SUCCESS;
  }
  state& s = st();
  nmad::recv_status rs;
  nmad::message_handle mh;
  const int src = source == MPI_ANY_SOURCE ? nmad::any_source : c->world_of[source];
  if (!s.session->improbe(src, engine_tag(c->p2p_ctx, tag == MPI_ANY_TAG ? 0 : tag), rs, mh, engine_mask(tag))) {
    *flag = 0;
    return MPI_SUCCESS;
  }
  *flag = 1;
  received_status(status, c, rs);
  std::lock_guard g(s.mu);
  message_obj* m = nullptr;
  for (auto& p : s.messages)
    if (!p->in_use) {
      m = p.get();
      break;
    }
  if (!m) {
    s.messages.push_back(std::make_unique<message_obj>());
    m = s.messages.back().get();
  }
  m->engine = mh;
  m->comm = c;
  m->in_use = true;
  for (std::size_t i = 0; i < s.messages.size(); ++i)
    if (s.messages[i].get() == m) *message = static_cast<MPI_Message>(i + kFirstMessageHandle);
  return MPI_SUCCESS;
}

int PMPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message* message, MPI_Status* status) {
  if (!check_initialized("MPI_Mprobe")) return MPI_ERR_OTHER;
  comm_obj* c = nullptr;
  if (int e = check_probe("MPI_Mprobe", c, comm, source, tag)) return e;
  int flag = 0, err = MPI_SUCCESS;
  nmad::errc failed = nmad::errc::ok;
  st().session->wait_until([&] {
    err = PMPI_Improbe(source, tag, comm, &flag, message, status);
    if (err != MPI_SUCCESS || flag) return true;
    // Nothing here yet: give up once no live peer could still send it.
    if (source == MPI_ANY_SOURCE) {
      bool alive = c->size() == 1;
      for (int r = 0; r < c->size() && !alive; ++r)
        alive = c->world_of[r] != st().session->rank() && st().session->peer_alive(c->world_of[r]);
      if (!alive) failed = nmad::errc::peer_failed;
    } else if (!st().session->peer_alive(c->world_of[source])) {
      failed = nmad::errc::peer_failed;
    }
    return failed != nmad::errc::ok;
  });
  if (err != MPI_SUCCESS || flag) return err;
  return mpi_raise("MPI_Mprobe", c, from_errc(failed), probe_failure(c, source, failed));
}

namespace {
// Takes the message out of the table (null if the handle is not a live one).
message_obj* take_message(MPI_Message h) {
  state& s = st();
  std::lock_guard g(s.mu);
  if (h < kFirstMessageHandle || static_cast<std::size_t>(h - kFirstMessageHandle) >= s.messages.size())
    return nullptr;
  message_obj* m = s.messages[h - kFirstMessageHandle].get();
  return m->in_use ? m : nullptr;
}
void drop_message(message_obj* m) {
  std::lock_guard g(st().mu);
  m->in_use = false;
  m->engine = nmad::message_handle{};
}
}  // namespace

int nmad::mpi::p2p_mrecv(const char* fn, void* buf, MPI_Count count, MPI_Datatype datatype, MPI_Message* message,
                         MPI_Status* status) {
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (!message) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null message");
  if (*message == MPI_MESSAGE_NO_PROC) {
    proc_null_status(status);
    *message = MPI_MESSAGE_NULL;
    return MPI_SUCCESS;
  }
  message_obj* m = take_message(*message);
  if (!m) return mpi_raise(fn, nullptr, MPI_ERR_REQUEST, "invalid message handle " + std::to_string(*message));
  comm_obj* c = m->comm;
  std::string detail;
  if (int e = check_comm_buffer(count, datatype, buf, detail)) return mpi_raise(fn, c, e, detail);
  void* ptr = nullptr;
  std::size_t bytes = 0;
  std::shared_ptr<recv_stage> stage;
  if (int e = recv_view(c, fn, buf, count, datatype, ptr, bytes, stage)) return e;
  state& s = st();
  blocking_request held;
  nmad::request& req = held.get();
  s.session->imrecv(m->engine, ptr, bytes, req);
  drop_message(m);
  *message = MPI_MESSAGE_NULL;
  const nmad::errc e = s.session->wait(req);
  return finish_blocking_recv(fn, c, req, from_errc(e), stage.get(), status);
}

int nmad::mpi::p2p_imrecv(const char* fn, void* buf, MPI_Count count, MPI_Datatype datatype, MPI_Message* message,
                          MPI_Request* request) {
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (!message || !request) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null message or request");
  request_obj* r = nullptr;
  if (*message == MPI_MESSAGE_NO_PROC) {
    r = new_request();
    r->type = request_obj::kind::recv;
    r->persistent = false;
    r->comm = nullptr;
    r->peer = MPI_PROC_NULL;
    r->type_handle = MPI_BYTE;  // not a stale derived handle of the recycled request
    start_request(*r);  // completes at once with a MPI_PROC_NULL status
    *message = MPI_MESSAGE_NULL;
    *request = r->handle;
    return MPI_SUCCESS;
  }
  message_obj* m = take_message(*message);
  if (!m) return mpi_raise(fn, nullptr, MPI_ERR_REQUEST, "invalid message handle " + std::to_string(*message));
  std::string detail;
  if (int e = check_comm_buffer(count, datatype, buf, detail)) return mpi_raise(fn, m->comm, e, detail);
  void* ptr = nullptr;
  std::size_t bytes = 0;
  std::shared_ptr<recv_stage> stage;
  if (int e = recv_view(m->comm, fn, buf, count, datatype, ptr, bytes, stage)) return e;
  r = new_request();
  r->type = request_obj::kind::recv;
  r->persistent = false;
  r->comm = m->comm;
  r->rbuf = buf;
  r->count = count;
  r->type_handle = datatype;
  r->bytes = bytes;
  r->active = true;
  r->local_done = false;
  if (stage) {  // unpacked by Wait/Test
    r->on_complete = [stage](request_obj& q, std::string& d) { return stage->finish(q.engine, d); };
    auto tr = std::make_shared<typed_request>();
    tr->type = stage->type;
    tr->recv = stage;
    r->extra = std::move(tr);
  }
  st().session->imrecv(m->engine, ptr, r->bytes, r->engine);
  drop_message(m);
  *message = MPI_MESSAGE_NULL;
  *request = r->handle;
  return MPI_SUCCESS;
}

int PMPI_Recv(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Status* status) {
  return p2p_recv("MPI_Recv", buf, count, datatype, source, tag, comm, status);
}
int PMPI_Sendrecv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag, void* recvbuf,
                  int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm, MPI_Status* status) {
  return p2p_sendrecv("MPI_Sendrecv", sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype,
                      source, recvtag, comm, status);
}
int PMPI_Sendrecv_replace(void* buf, int count, MPI_Datatype datatype, int dest, int sendtag, int source,
                          int recvtag, MPI_Comm comm, MPI_Status* status) {
  return p2p_sendrecv_replace("MPI_Sendrecv_replace", buf, count, datatype, dest, sendtag, source, recvtag, comm,
                              status);
}
int PMPI_Isendrecv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag, void* recvbuf,
                   int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm,
                   MPI_Request* request) {
  return p2p_isendrecv("MPI_Isendrecv", sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype,
                       source, recvtag, comm, request);
}
int PMPI_Isendrecv_replace(void* buf, int count, MPI_Datatype datatype, int dest, int sendtag, int source,
                           int recvtag, MPI_Comm comm, MPI_Request* request) {
  return p2p_isendrecv_replace("MPI_Isendrecv_replace", buf, count, datatype, dest, sendtag, source, recvtag, comm,
                               request);
}
int PMPI_Mrecv(void* buf, int count, MPI_Datatype datatype, MPI_Message* message, MPI_Status* status) {
  return p2p_mrecv("MPI_Mrecv", buf, count, datatype, message, status);
}
int PMPI_Imrecv(void* buf, int count, MPI_Datatype datatype, MPI_Message* message, MPI_Request* request) {
  return p2p_imrecv("MPI_Imrecv", buf, count, datatype, message, request);
}

// The public names: weak aliases, so profiling tools can interpose.
#pragma weak MPI_Send = PMPI_Send
#pragma weak MPI_Ssend = PMPI_Ssend
#pragma weak MPI_Rsend = PMPI_Rsend
#pragma weak MPI_Bsend = PMPI_Bsend
#pragma weak MPI_Isend = PMPI_Isend
#pragma weak MPI_Issend = PMPI_Issend
#pragma weak MPI_Irsend = PMPI_Irsend
#pragma weak MPI_Ibsend = PMPI_Ibsend
#pragma weak MPI_Recv = PMPI_Recv
#pragma weak MPI_Irecv = PMPI_Irecv
#pragma weak MPI_Sendrecv = PMPI_Sendrecv
#pragma weak MPI_Isendrecv = PMPI_Isendrecv
#pragma weak MPI_Isendrecv_replace = PMPI_Isendrecv_replace
#pragma weak MPI_Sendrecv_replace = PMPI_Sendrecv_replace
#pragma weak MPI_Iprobe = PMPI_Iprobe
#pragma weak MPI_Probe = PMPI_Probe
#pragma weak MPI_Improbe = PMPI_Improbe
#pragma weak MPI_Mprobe = PMPI_Mprobe
#pragma weak MPI_Mrecv = PMPI_Mrecv
#pragma weak MPI_Imrecv = PMPI_Imrecv
