// Buffered sends' attached buffer (MPI_Buffer_attach/detach): a buffered
// send copies (or packs) its message into a free region of it and leaves;
// the region is reclaimed once the engine send completes. MPI_Bsend,
// MPI_Ibsend and MPI_Bsend_init reach it through bsend_copy/bsend_typed
// (declared in mpi_impl.hpp), MPI_Finalize through bsend_flush.
#include <cstring>
#include <limits>
#include <list>
#include <string>

#include "mpi_layer/mpi_impl.hpp"

namespace nmad::mpi {

namespace {

// Reclaims the attached-buffer regions of completed buffered sends.
void bsend_reclaim_locked(state& s) {
  for (auto it = s.bsends.begin(); it != s.bsends.end();) {
    if (it->req.completed()) it = s.bsends.erase(it);
    else ++it;
  }
}

// First fit in the attached buffer; records are kept in offset order.
bool bsend_place_locked(state& s, std::size_t need, std::list<bsend_record>::iterator& where, std::size_t& offset) {
  std::size_t prev_end = 0;
  for (auto it = s.bsends.begin(); it != s.bsends.end(); ++it) {
    if (it->offset - prev_end >= need) {
      where = it;
      offset = prev_end;
      return true;
    }
    prev_end = it->offset + it->len;
  }
  if (s.bsend_size >= prev_end && s.bsend_size - prev_end >= need) {
    where = s.bsends.end();
    offset = prev_end;
    return true;
  }
  return false;
}

}  // namespace

namespace {
// Places `bytes` in the attached buffer, fills them with fill(dst) and
// sends them; MPI_ERR_BUFFER if they do not fit.
template <class Fill>
int bsend_fill(std::size_t bytes, Fill&& fill, int world_dest, nmad::tag_t tag, std::string& detail) {
  state& s = st();
  const std::size_t need = bytes + MPI_BSEND_OVERHEAD;
  for (int attempt = 0; attempt < 2; ++attempt) {
    {
      std::lock_guard g(s.mu);
      bsend_reclaim_locked(s);
      std::list<bsend_record>::iterator where;
      std::size_t offset = 0;
      if (s.bsend_buf && bsend_place_locked(s, need, where, offset)) {
        auto rec = s.bsends.emplace(where);
        rec->offset = offset;
        rec->len = need;
        std::byte* dst = s.bsend_buf + offset;
        if (bytes) fill(dst);
        s.session->isend(world_dest, tag, dst, bytes, rec->req);
        return MPI_SUCCESS;
      }
    }
    s.session->progress();  // maybe an earlier buffered send just finished
  }
  std::lock_guard g(s.mu);
  std::size_t used = 0;
  for (auto& r : s.bsends) used += r.len;
  detail = s.bsend_buf ? "attached buffer of " + std::to_string(s.bsend_size) + " bytes has " +
                             std::to_string(s.bsend_size - used) + " bytes free (possibly fragmented); need " +
                             std::to_string(need) + " (message + MPI_BSEND_OVERHEAD)"
                       : "no buffer attached (MPI_Buffer_attach)";
  return MPI_ERR_BUFFER;
}
}  // namespace

int bsend_copy(const void* buf, std::size_t bytes, int world_dest, nmad::tag_t tag, std::string& detail) {
  return bsend_fill(bytes, [&](std::byte* dst) { std::memcpy(dst, buf, bytes); }, world_dest, tag, detail);
}

int bsend_typed(const void* buf, MPI_Count count, const Datatype& d, int world_dest, nmad::tag_t tag,
                std::string& detail) {
  const Count size = d.size();
  const std::size_t bytes = static_cast<std::size_t>(size) * static_cast<std::size_t>(count);
  if (d.is_contiguous())
    return bsend_copy(reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(buf) +
                                                    static_cast<std::uintptr_t>(d.true_lb())),
                      bytes, world_dest, tag, detail);
  // Packed straight into the attached buffer (no intermediate copy).
  return bsend_fill(
      bytes,
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
    bsend_reclaim_locked(s);
    return s.bsends.empty();
  });
}

}  // namespace nmad::mpi

using namespace nmad::mpi;

namespace {
// MPI_Buffer_attach(_c): size is an MPI_Count so the _c form attaches more
// than INT_MAX bytes.
int buffer_attach(const char* fn, void* buffer, MPI_Count size) {
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (size < 0 || (!buffer && size > 0))
    return mpi_raise(fn, nullptr, MPI_ERR_ARG, "bad buffer or size " + std::to_string(size));
  state& s = st();
  {
    std::lock_guard g(s.mu);
    if (!s.bsend_buf) {
      s.bsend_buf = static_cast<std::byte*>(buffer);
      s.bsend_size = static_cast<std::size_t>(size);
      return MPI_SUCCESS;
    }
  }
  return mpi_raise(fn, nullptr, MPI_ERR_BUFFER, "a buffer is already attached");
}

// MPI_Buffer_detach(_c): the int form cannot report a size above INT_MAX;
// it then fails with MPI_ERR_VALUE_TOO_LARGE and leaves the buffer attached
// (MPI 4.1 sec. 2.5.8: the large-count form is the one to call).
template <class Size>
int buffer_detach(const char* fn, void* buffer_addr, Size* size) {
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (!buffer_addr || !size) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null argument");
  state& s = st();
  {
    std::lock_guard g(s.mu);
    if (s.bsend_size > static_cast<std::size_t>(std::numeric_limits<Size>::max()))
      return mpi_raise(fn, nullptr, MPI_ERR_VALUE_TOO_LARGE,
                       "the attached buffer has " + std::to_string(s.bsend_size) +
                           " bytes, more than an int holds (use MPI_Buffer_detach_c)");
  }
  bsend_flush();  // the buffered messages must all have left
  std::lock_guard g(s.mu);
  *static_cast<void**>(buffer_addr) = s.bsend_buf;
  *size = static_cast<Size>(s.bsend_size);
  s.bsend_buf = nullptr;
  s.bsend_size = 0;
  return MPI_SUCCESS;
}
}  // namespace

extern "C" {

int PMPI_Buffer_attach(void* buffer, int size) { return buffer_attach("MPI_Buffer_attach", buffer, size); }
int PMPI_Buffer_attach_c(void* buffer, MPI_Count size) { return buffer_attach("MPI_Buffer_attach_c", buffer, size); }

int PMPI_Buffer_detach(void* buffer_addr, int* size) { return buffer_detach("MPI_Buffer_detach", buffer_addr, size); }
int PMPI_Buffer_detach_c(void* buffer_addr, MPI_Count* size) {
  return buffer_detach("MPI_Buffer_detach_c", buffer_addr, size);
}

}  // extern "C"

// The public names: weak aliases, so profiling tools can interpose.
#pragma weak MPI_Buffer_attach = PMPI_Buffer_attach
#pragma weak MPI_Buffer_detach = PMPI_Buffer_detach
#pragma weak MPI_Buffer_attach_c = PMPI_Buffer_attach_c
#pragma weak MPI_Buffer_detach_c = PMPI_Buffer_detach_c
