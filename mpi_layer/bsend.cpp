// Buffered sends' attached buffers: the process's (MPI_Buffer_attach/
// detach) and, from MPI 4.1 (3.6), a communicator's and a session's
// (MPI_Comm/Session_attach_buffer). A buffered send on a communicator uses
// the communicator's buffer if one is attached, else the one of the session
// it derives from, else the process's. It copies (or packs) its message
// into a free region of that buffer and leaves; the region is reclaimed
// once the engine send completes. MPI_BUFFER_AUTOMATIC instead of a buffer:
// each message gets storage of its own, so buffered sends never run out of
// space. Detach and flush wait until the messages in the buffer have left;
// iflush returns a request completing then. MPI_Bsend, MPI_Ibsend and
// MPI_Bsend_init reach the buffers through bsend_copy/bsend_typed (declared
// in mpi_impl.hpp), MPI_Comm_free, MPI_Session_finalize and MPI_Finalize
// through bsend_comm_free, bsend_session_end and bsend_flush.
#include <cstring>
#include <functional>
#include <limits>
#include <list>
#include <memory>
#include <optional>
#include <string>

#include "mpi_layer/mpi_impl.hpp"

namespace nmad::mpi {

namespace {

// Reclaims the regions of completed buffered sends.
void bsend_reclaim_locked(bsend_pool& p) {
  for (auto it = p.records.begin(); it != p.records.end();) {
    if (it->req.completed()) it = p.records.erase(it);
    else ++it;
  }
}

// First fit in the attached buffer; records are kept in offset order.
bool bsend_place_locked(bsend_pool& p, std::size_t need, std::list<bsend_record>::iterator& where,
                        std::size_t& offset) {
  std::size_t prev_end = 0;
  for (auto it = p.records.begin(); it != p.records.end(); ++it) {
    if (it->offset - prev_end >= need) {
      where = it;
      offset = prev_end;
      return true;
    }
    prev_end = it->offset + it->len;
  }
  if (p.size >= prev_end && p.size - prev_end >= need) {
    where = p.records.end();
    offset = prev_end;
    return true;
  }
  return false;
}

// The buffer a buffered send on c uses (null: none attached anywhere).
std::shared_ptr<bsend_pool> pool_for_locked(state& s, const comm_obj& c) {
  if (c.bsend) return c.bsend;
  if (c.session != MPI_SESSION_NULL) {
    auto it = s.session_bsends.find(c.session);
    if (it != s.session_bsends.end() && it->second) return it->second;
  }
  return s.bsend;
}

const char* owner_text(const comm_obj& c, const bsend_pool* p, const state& s) {
  if (p && p == c.bsend.get()) return "the communicator's buffer (MPI_Comm_attach_buffer)";
  if (p && p != s.bsend.get()) return "the session's buffer (MPI_Session_attach_buffer)";
  return "the process's buffer (MPI_Buffer_attach)";
}

// Places `bytes` in c's buffer, fills them with fill(dst) and sends them;
// MPI_ERR_BUFFER if they do not fit.
template <class Fill>
int bsend_fill(const comm_obj& c, std::size_t bytes, Fill&& fill, int world_dest, nmad::tag_t tag,
               std::string& detail) {
  state& s = st();
  const std::size_t need = bytes + MPI_BSEND_OVERHEAD;
  for (int attempt = 0; attempt < 2; ++attempt) {
    {
      std::lock_guard g(s.mu);
      std::shared_ptr<bsend_pool> p = pool_for_locked(s, c);
      if (!p) break;
      bsend_reclaim_locked(*p);
      if (p->automatic) {
        auto rec = p->records.emplace(p->records.end());
        rec->len = need;
        rec->owned = std::make_unique_for_overwrite<std::byte[]>(bytes ? bytes : 1);
        if (bytes) fill(rec->owned.get());
        s.session->isend(world_dest, tag, rec->owned.get(), bytes, rec->req);
        return MPI_SUCCESS;
      }
      std::list<bsend_record>::iterator where;
      std::size_t offset = 0;
      if (bsend_place_locked(*p, need, where, offset)) {
        auto rec = p->records.emplace(where);
        rec->offset = offset;
        rec->len = need;
        std::byte* dst = p->buf + offset;
        if (bytes) fill(dst);
        s.session->isend(world_dest, tag, dst, bytes, rec->req);
        return MPI_SUCCESS;
      }
    }
    s.session->progress();  // maybe an earlier buffered send just finished
  }
  std::lock_guard g(s.mu);
  std::shared_ptr<bsend_pool> p = pool_for_locked(s, c);
  if (!p) {
    detail = "no buffer attached (MPI_Buffer_attach, MPI_Comm_attach_buffer, MPI_Session_attach_buffer)";
    return MPI_ERR_BUFFER;
  }
  std::size_t used = 0;
  for (auto& r : p->records) used += r.len;
  detail = std::string(owner_text(c, p.get(), s)) + " of " + std::to_string(p->size) + " bytes has " +
           std::to_string(p->size - used) + " bytes free (possibly fragmented); need " + std::to_string(need) +
           " (message + MPI_BSEND_OVERHEAD)";
  return MPI_ERR_BUFFER;
}

// Waits until every message in p has left.
void pool_wait(const std::shared_ptr<bsend_pool>& p) {
  if (!p) return;
  state& s = st();
  s.session->wait_until([&] {
    std::lock_guard g(s.mu);
    bsend_reclaim_locked(*p);
    return p->records.empty();
  });
}

}  // namespace

int bsend_copy(const comm_obj& c, const void* buf, std::size_t bytes, int world_dest, nmad::tag_t tag,
               std::string& detail) {
  return bsend_fill(c, bytes, [&](std::byte* dst) { std::memcpy(dst, buf, bytes); }, world_dest, tag, detail);
}

int bsend_typed(const comm_obj& c, const void* buf, MPI_Count count, const Datatype& d, int world_dest,
                nmad::tag_t tag, std::string& detail) {
  const Count size = d.size();
  const std::size_t bytes = static_cast<std::size_t>(size) * static_cast<std::size_t>(count);
  if (d.is_contiguous())
    return bsend_copy(c,
                      reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(buf) +
                                                    static_cast<std::uintptr_t>(d.true_lb())),
                      bytes, world_dest, tag, detail);
  // Packed straight into the attached buffer (no intermediate copy).
  return bsend_fill(
      c, bytes,
      [&](std::byte* dst) {
        Count pos = 0;
        d.pack(buf, count, dst, static_cast<Count>(bytes), pos);
      },
      world_dest, tag, detail);
}

void bsend_flush() {
  state& s = st();
  s.session->wait_until([&] {
    std::lock_guard g(s.mu);
    bool empty = true;
    auto visit = [&](const std::shared_ptr<bsend_pool>& p) {
      if (!p) return;
      bsend_reclaim_locked(*p);
      empty = empty && p->records.empty();
    };
    visit(s.bsend);
    for (auto& [h, p] : s.session_bsends) visit(p);
    for (auto& c : s.comms)
      if (c) visit(c->bsend);
    return empty;
  });
}

void bsend_comm_free(comm_obj& c) {
  state& s = st();
  std::shared_ptr<bsend_pool> p;
  {
    std::lock_guard g(s.mu);
    p = c.bsend;
  }
  if (!p) return;
  pool_wait(p);
  std::lock_guard g(s.mu);
  c.bsend.reset();
}

void bsend_session_end(int session) {
  state& s = st();
  std::shared_ptr<bsend_pool> p;
  {
    std::lock_guard g(s.mu);
    auto it = s.session_bsends.find(session);
    if (it == s.session_bsends.end()) return;
    p = it->second;
  }
  pool_wait(p);
  std::lock_guard g(s.mu);
  s.session_bsends.erase(session);
}

}  // namespace nmad::mpi

using namespace nmad::mpi;

namespace {
// Whose buffer a call is about: `slot` (called under mu) is the owner's
// pointer to its buffer (null: none attached); `raise` reports an error on
// the owner's error handler.
struct buffer_owner {
  std::function<std::shared_ptr<bsend_pool>&(state&)> slot;
  std::function<int(int code, const std::string& detail)> raise;
  comm_obj* comm = nullptr;  // iflush's request belongs to it (null: process, session)
};

buffer_owner process_owner(const char* fn) {
  return {[](state& s) -> std::shared_ptr<bsend_pool>& { return s.bsend; },
          [fn](int code, const std::string& d) { return mpi_raise(fn, nullptr, code, d); }};
}

// Null (error raised, rc set) if comm is not a valid communicator.
std::optional<buffer_owner> comm_owner(const char* fn, MPI_Comm comm, int& rc) {
  if (!check_initialized(fn)) {
    rc = MPI_ERR_OTHER;
    return std::nullopt;
  }
  comm_obj* c = lookup_comm(comm);
  if (!c) {
    rc = mpi_raise(fn, nullptr, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm));
    return std::nullopt;
  }
  return buffer_owner{[c](state&) -> std::shared_ptr<bsend_pool>& { return c->bsend; },
                      [fn, c](int code, const std::string& d) { return mpi_raise(fn, c, code, d); }, c};
}

std::optional<buffer_owner> session_owner(const char* fn, MPI_Session session, int& rc) {
  if (!session_valid(fn, session, rc)) return std::nullopt;
  return buffer_owner{[session](state& s) -> std::shared_ptr<bsend_pool>& { return s.session_bsends[session]; },
                      [fn, session](int code, const std::string& d) { return session_raise(fn, session, code, d); }};
}

// Attach (all forms): size is an MPI_Count so the _c forms attach more than
// INT_MAX bytes; MPI_BUFFER_AUTOMATIC ignores it.
int attach(const buffer_owner& o, void* buffer, MPI_Count size) {
  const bool automatic = buffer == MPI_BUFFER_AUTOMATIC;
  if (!automatic && size < 0) return o.raise(MPI_ERR_ARG, "negative size " + std::to_string(size));
  if (!automatic && !buffer && size > 0)
    return o.raise(MPI_ERR_ARG, "null buffer of " + std::to_string(size) + " bytes");
  state& s = st();
  {
    std::lock_guard g(s.mu);
    std::shared_ptr<bsend_pool>& slot = o.slot(s);
    if (!slot) {
      auto p = std::make_shared<bsend_pool>();
      p->automatic = automatic;
      p->buf = automatic ? nullptr : static_cast<std::byte*>(buffer);
      p->size = automatic ? 0 : static_cast<std::size_t>(size);
      slot = std::move(p);
      return MPI_SUCCESS;
    }
  }
  return o.raise(MPI_ERR_BUFFER, "a buffer is already attached (detach it first)");
}

// Detach (all forms): waits until the buffer's messages have left, then
// gives back the address and size attached (MPI_BUFFER_AUTOMATIC and 0 for
// an automatic buffer; NULL and 0 when none is attached). The int forms
// cannot report a size above INT_MAX: they then fail with
// MPI_ERR_VALUE_TOO_LARGE and leave the buffer attached (MPI 4.1 sec. 2.5.8).
template <class Size>
int detach(const buffer_owner& o, const char* c_form, void* buffer_addr, Size* size) {
  if (!buffer_addr || !size) return o.raise(MPI_ERR_ARG, buffer_addr ? "null size" : "null buffer_addr");
  state& s = st();
  std::shared_ptr<bsend_pool> p;
  {
    std::lock_guard g(s.mu);
    p = o.slot(s);
    if (p && p->size > static_cast<std::size_t>(std::numeric_limits<Size>::max()))
      return o.raise(MPI_ERR_VALUE_TOO_LARGE, "the attached buffer has " + std::to_string(p->size) +
                                                  " bytes, more than an int holds (use " + c_form + ")");
  }
  if (!p) {
    *static_cast<void**>(buffer_addr) = nullptr;
    *size = 0;
    return MPI_SUCCESS;
  }
  pool_wait(p);  // the buffered messages must all have left
  std::lock_guard g(s.mu);
  *static_cast<void**>(buffer_addr) = p->automatic ? MPI_BUFFER_AUTOMATIC : static_cast<void*>(p->buf);
  *size = static_cast<Size>(p->size);
  o.slot(s).reset();
  return MPI_SUCCESS;
}

int flush(const buffer_owner& o) {
  state& s = st();
  std::shared_ptr<bsend_pool> p;
  {
    std::lock_guard g(s.mu);
    p = o.slot(s);
  }
  pool_wait(p);
  return MPI_SUCCESS;
}

// A generic request completing once the messages in the buffer attached
// now have left (at once if none is).
int iflush(const buffer_owner& o, MPI_Request* request) {
  if (!request) return o.raise(MPI_ERR_ARG, "null request");
  state& s = st();
  std::shared_ptr<bsend_pool> p;
  {
    std::lock_guard g(s.mu);
    p = o.slot(s);
  }
  request_obj* r = new_request();
  r->type = request_obj::kind::generic;
  r->comm = o.comm;
  r->active = true;
  r->poll = [p](request_obj& rq) {
    if (p) {
      std::lock_guard g(st().mu);
      bsend_reclaim_locked(*p);
      if (!p->records.empty()) return false;
    }
    empty_status(&rq.local_status);
    return true;
  };
  *request = r->handle;
  return MPI_SUCCESS;
}
}  // namespace

extern "C" {

int PMPI_Buffer_attach(void* buffer, int size) {
  if (!check_initialized("MPI_Buffer_attach")) return MPI_ERR_OTHER;
  return attach(process_owner("MPI_Buffer_attach"), buffer, size);
}
int PMPI_Buffer_attach_c(void* buffer, MPI_Count size) {
  if (!check_initialized("MPI_Buffer_attach_c")) return MPI_ERR_OTHER;
  return attach(process_owner("MPI_Buffer_attach_c"), buffer, size);
}
int PMPI_Buffer_detach(void* buffer_addr, int* size) {
  if (!check_initialized("MPI_Buffer_detach")) return MPI_ERR_OTHER;
  return detach(process_owner("MPI_Buffer_detach"), "MPI_Buffer_detach_c", buffer_addr, size);
}
int PMPI_Buffer_detach_c(void* buffer_addr, MPI_Count* size) {
  if (!check_initialized("MPI_Buffer_detach_c")) return MPI_ERR_OTHER;
  return detach(process_owner("MPI_Buffer_detach_c"), "MPI_Buffer_detach_c", buffer_addr, size);
}
int PMPI_Buffer_flush(void) {
  if (!check_initialized("MPI_Buffer_flush")) return MPI_ERR_OTHER;
  return flush(process_owner("MPI_Buffer_flush"));
}
int PMPI_Buffer_iflush(MPI_Request* request) {
  if (!check_initialized("MPI_Buffer_iflush")) return MPI_ERR_OTHER;
  return iflush(process_owner("MPI_Buffer_iflush"), request);
}

int PMPI_Comm_attach_buffer(MPI_Comm comm, void* buffer, int size) {
  int rc = MPI_SUCCESS;
  auto o = comm_owner("MPI_Comm_attach_buffer", comm, rc);
  return o ? attach(*o, buffer, size) : rc;
}
int PMPI_Comm_attach_buffer_c(MPI_Comm comm, void* buffer, MPI_Count size) {
  int rc = MPI_SUCCESS;
  auto o = comm_owner("MPI_Comm_attach_buffer_c", comm, rc);
  return o ? attach(*o, buffer, size) : rc;
}
int PMPI_Comm_detach_buffer(MPI_Comm comm, void* buffer_addr, int* size) {
  int rc = MPI_SUCCESS;
  auto o = comm_owner("MPI_Comm_detach_buffer", comm, rc);
  return o ? detach(*o, "MPI_Comm_detach_buffer_c", buffer_addr, size) : rc;
}
int PMPI_Comm_detach_buffer_c(MPI_Comm comm, void* buffer_addr, MPI_Count* size) {
  int rc = MPI_SUCCESS;
  auto o = comm_owner("MPI_Comm_detach_buffer_c", comm, rc);
  return o ? detach(*o, "MPI_Comm_detach_buffer_c", buffer_addr, size) : rc;
}
int PMPI_Comm_flush_buffer(MPI_Comm comm) {
  int rc = MPI_SUCCESS;
  auto o = comm_owner("MPI_Comm_flush_buffer", comm, rc);
  return o ? flush(*o) : rc;
}
int PMPI_Comm_iflush_buffer(MPI_Comm comm, MPI_Request* request) {
  int rc = MPI_SUCCESS;
  auto o = comm_owner("MPI_Comm_iflush_buffer", comm, rc);
  return o ? iflush(*o, request) : rc;
}

int PMPI_Session_attach_buffer(MPI_Session session, void* buffer, int size) {
  int rc = MPI_SUCCESS;
  auto o = session_owner("MPI_Session_attach_buffer", session, rc);
  return o ? attach(*o, buffer, size) : rc;
}
int PMPI_Session_attach_buffer_c(MPI_Session session, void* buffer, MPI_Count size) {
  int rc = MPI_SUCCESS;
  auto o = session_owner("MPI_Session_attach_buffer_c", session, rc);
  return o ? attach(*o, buffer, size) : rc;
}
int PMPI_Session_detach_buffer(MPI_Session session, void* buffer_addr, int* size) {
  int rc = MPI_SUCCESS;
  auto o = session_owner("MPI_Session_detach_buffer", session, rc);
  return o ? detach(*o, "MPI_Session_detach_buffer_c", buffer_addr, size) : rc;
}
int PMPI_Session_detach_buffer_c(MPI_Session session, void* buffer_addr, MPI_Count* size) {
  int rc = MPI_SUCCESS;
  auto o = session_owner("MPI_Session_detach_buffer_c", session, rc);
  return o ? detach(*o, "MPI_Session_detach_buffer_c", buffer_addr, size) : rc;
}
int PMPI_Session_flush_buffer(MPI_Session session) {
  int rc = MPI_SUCCESS;
  auto o = session_owner("MPI_Session_flush_buffer", session, rc);
  return o ? flush(*o) : rc;
}
int PMPI_Session_iflush_buffer(MPI_Session session, MPI_Request* request) {
  int rc = MPI_SUCCESS;
  auto o = session_owner("MPI_Session_iflush_buffer", session, rc);
  return o ? iflush(*o, request) : rc;
}

}  // extern "C"

// The public names: weak aliases, so profiling tools can interpose.
#pragma weak MPI_Buffer_attach = PMPI_Buffer_attach
#pragma weak MPI_Buffer_detach = PMPI_Buffer_detach
#pragma weak MPI_Buffer_attach_c = PMPI_Buffer_attach_c
#pragma weak MPI_Buffer_detach_c = PMPI_Buffer_detach_c
#pragma weak MPI_Buffer_flush = PMPI_Buffer_flush
#pragma weak MPI_Buffer_iflush = PMPI_Buffer_iflush
#pragma weak MPI_Comm_attach_buffer = PMPI_Comm_attach_buffer
#pragma weak MPI_Comm_attach_buffer_c = PMPI_Comm_attach_buffer_c
#pragma weak MPI_Comm_detach_buffer = PMPI_Comm_detach_buffer
#pragma weak MPI_Comm_detach_buffer_c = PMPI_Comm_detach_buffer_c
#pragma weak MPI_Comm_flush_buffer = PMPI_Comm_flush_buffer
#pragma weak MPI_Comm_iflush_buffer = PMPI_Comm_iflush_buffer
#pragma weak MPI_Session_attach_buffer = PMPI_Session_attach_buffer
#pragma weak MPI_Session_attach_buffer_c = PMPI_Session_attach_buffer_c
#pragma weak MPI_Session_detach_buffer = PMPI_Session_detach_buffer
#pragma weak MPI_Session_detach_buffer_c = PMPI_Session_detach_buffer_c
#pragma weak MPI_Session_flush_buffer = PMPI_Session_flush_buffer
#pragma weak MPI_Session_iflush_buffer = PMPI_Session_iflush_buffer
