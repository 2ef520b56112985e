// MPI-IO data access (MPI-3.1 13.4): explicit offsets, individual and
// shared file pointers; blocking, non-blocking, collective and split
// collective forms; seek and position queries.
//
// Every form goes through access(): it checks the file, the access mode
// (MPI_ERR_READ_ONLY for a write to a file opened MPI_MODE_RDONLY,
// MPI_ERR_ACCESS for a read of one opened MPI_MODE_WRONLY,
// MPI_ERR_UNSUPPORTED_OPERATION for explicit offsets and individual
// pointers on an MPI_MODE_SEQUENTIAL file) and the buffer, turns the
// position into a byte position in the view's data stream, and then
//   * blocking independent: io.cpp's access_independent;
//   * non-blocking independent: the same, queued to the background I/O
//     thread; the request completes when it has run;
//   * collective (_all, _ordered, and their non-blocking and split forms):
//     twophase.cpp's collective job. A blocking form waits for it; a
//     non-blocking form returns a request on it and a split _begin keeps
//     it for _end, and the layer's progress moves it meanwhile (file
//     steps on the I/O thread), so the access advances while the
//     application computes. Their start is local: the agreement of the
//     argument checks is the job's first phase (a process whose checks
//     fail returns the error at once and still takes part in that phase,
//     so the others' jobs fail with the class instead of waiting). Only
//     the ordered split form synchronises at _begin (its place in the
//     file comes from a scan and the shared pointer).
// File pointers move at call time by the amount requested (for a blocking
// read, by the amount read), so a later call sees the new position even
// while a non-blocking access is still queued.
#include <sys/stat.h>

#include <algorithm>

#include "mpi_layer/datatype/external32.hpp"
#include "mpi_layer/file/file_impl.hpp"

namespace nmad::mpi::io {
namespace {

enum class where { at, individual, shared };
enum class form { blocking, nonblocking, collective, icollective, split_begin };

// File-stream bytes of `bytes` user bytes of u (external32 sizes differ).
std::int64_t stream_bytes(const view& v, const user_data& u, std::int64_t bytes) {
  if (!v.external32 || u.mem_bytes == 0) return bytes;
  return bytes == u.mem_bytes ? u.file_bytes : (bytes / u.type.size()) * external32::size(u.type, 1);
}

int access(const char* fn, MPI_File fh, where w, form how, bool write, MPI_Offset offset, void* buf,
           MPI_Count count, MPI_Datatype t, MPI_Status* status, MPI_Request* request) {
  if (request) *request = MPI_REQUEST_NULL;
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  auto f = lookup_file(fh);
  if (!f)
    return raise_file(fn, nullptr, MPI_ERR_FILE,
                      fh == MPI_FILE_NULL ? std::string("MPI_FILE_NULL is not an open file")
                                          : "invalid file handle " + std::to_string(fh) + " (not open, or closed)");
  const bool collective = how == form::collective || how == form::icollective || how == form::split_begin;
  int err = MPI_SUCCESS;
  std::string detail;
  view v;
  hints h;
  bool atomic = false;
  user_data u;
  [&] {
    if ((how == form::nonblocking || how == form::icollective) && !request) {
      err = MPI_ERR_ARG;
      detail = "null request pointer";
    } else if (write && (f->amode & MPI_MODE_RDONLY)) {
      err = MPI_ERR_READ_ONLY;
      detail = "file opened with MPI_MODE_RDONLY";
    } else if (!write && (f->amode & MPI_MODE_WRONLY)) {
      err = MPI_ERR_ACCESS;
      detail = "file opened with MPI_MODE_WRONLY";
    } else if (w != where::shared && (f->amode & MPI_MODE_SEQUENTIAL)) {
      err = MPI_ERR_UNSUPPORTED_OPERATION;
      detail = "file opened with MPI_MODE_SEQUENTIAL: only shared file pointer routines may access it";
    } else if (w == where::at && offset < 0) {
      err = MPI_ERR_ARG;
      detail = "negative offset " + std::to_string(offset);
    }
    if (err) return;
    {
      std::lock_guard g(f->mu);
      if (how == form::split_begin && f->split_active) {
        err = MPI_ERR_OTHER;
        detail = "a split collective is already active on this file (one at a time, MPI-3.1 13.4.5)";
        return;
      }
      v = f->v;
      h = f->h;
      atomic = f->atomic;
    }
    err = describe(v, buf, count, t, u, detail);
  }();
  // Non-blocking and split collectives (except ordered) agree on the
  // checks inside the job; blocking ones (and ordered) here.
  const bool deferred = (how == form::icollective || how == form::split_begin) && w != where::shared;
  if (collective && f->size > 1 && !deferred) {
    // A collective call that fails its checks on one process must not
    // leave the others waiting in the access: all agree on the class.
    int all = err;
    PMPI_Allreduce(&err, &all, 1, MPI_INT, MPI_MAX, f->comm);
    if (all != MPI_SUCCESS && err == MPI_SUCCESS) {
      err = all;
      detail = std::string("the collective call failed its checks on another process (") + error_name(all) + ")";
    }
  }
  if (err != MPI_SUCCESS) {
    if (deferred && f->size > 1) {
      // Takes part in the others' agreement (the job ends there), then
      // reports the error now; no request is returned.
      start_collective(fn, f, v, h, atomic, write, u, 0, err, detail, true);
    }
    return raise_file(fn, f.get(), err, detail);
  }

  // Position in the stream (bytes), and the pointer update.
  std::int64_t pos = 0;
  const MPI_Offset units = u.file_bytes / v.esize;
  if (w == where::at) {
    pos = offset * v.esize;
  } else if (w == where::individual) {
    std::lock_guard g(f->mu);
    pos = f->pointer * v.esize;
    f->pointer += units;
  } else if (!collective) {
    MPI_Offset old = 0;
    if (int e = shared_fetch_add(*f, units, old, detail)) return raise_file(fn, f.get(), e, detail);
    pos = old * v.esize;
  } else {
    // Ordered: each process's place after those of lower rank, from the
    // shared pointer, which moves past them all.
    long long mine = units, before = 0, total = 0;
    PMPI_Exscan(&mine, &before, 1, MPI_LONG_LONG, MPI_SUM, f->comm);
    if (f->rank == 0) before = 0;
    PMPI_Allreduce(&mine, &total, 1, MPI_LONG_LONG, MPI_SUM, f->comm);
    long long base[2] = {MPI_SUCCESS, 0};
    if (f->rank == 0) {
      MPI_Offset old = 0;
      base[0] = shared_fetch_add(*f, total, old, detail);
      base[1] = old;
    }
    PMPI_Bcast(base, 2, MPI_LONG_LONG, 0, f->comm);
    if (base[0] != MPI_SUCCESS)
      return raise_file(fn, f.get(), static_cast<int>(base[0]),
                        f->rank == 0 ? detail : "updating the shared file pointer failed on process 0");
    pos = (base[1] + before) * v.esize;
  }

  if (how == form::nonblocking) {
    return start_async(fn, f, [f, v, h, atomic, write, u, pos] {
      return access_independent(*f, v, h, atomic, write, u, pos);
    }, request);
  }
  if (collective) {
    const bool background = how != form::collective;
    auto job = start_collective(fn, f, v, h, atomic, write, u, pos, deferred ? MPI_SUCCESS : -1, std::string(),
                                background);
    if (how == form::icollective) return collective_request(job, request);  // errors: at completion
    if (how == form::split_begin) {
      std::lock_guard g(f->mu);
      f->split_active = true;
      f->split_job = std::move(job);
      return MPI_SUCCESS;  // reported by _end
    }
    const io_result res = finish_collective(job);
    if (res.err != MPI_SUCCESS) return raise_file(fn, f.get(), res.err, res.detail);
    set_status(status, res.bytes);
    return MPI_SUCCESS;
  }
  const io_result res = access_independent(*f, v, h, atomic, write, u, pos);
  if (w == where::individual && !write && res.err == MPI_SUCCESS && res.bytes < u.mem_bytes) {
    // A read that met the end of the file moves the pointer by what it read.
    std::lock_guard g(f->mu);
    f->pointer -= units - stream_bytes(v, u, res.bytes) / v.esize;
  }
  if (res.err != MPI_SUCCESS) return raise_file(fn, f.get(), res.err, res.detail);
  set_status(status, res.bytes);
  return MPI_SUCCESS;
}

int split_end(const char* fn, MPI_File fh, MPI_Status* status) {
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  auto f = lookup_file(fh);
  if (!f) return raise_file(fn, nullptr, MPI_ERR_FILE, "invalid file handle " + std::to_string(fh));
  std::shared_ptr<collective_job> job;
  {
    std::lock_guard g(f->mu);
    if (!f->split_active)
      return raise_file(fn, f.get(), MPI_ERR_OTHER, "no split collective was begun on this file");
    f->split_active = false;
    job = std::move(f->split_job);
  }
  const io_result res = finish_collective(job);
  if (res.err != MPI_SUCCESS) return raise_file(fn, f.get(), res.err, res.detail);
  set_status(status, res.bytes);
  return MPI_SUCCESS;
}

int check_whence(int whence, std::string& detail) {
  if (whence == MPI_SEEK_SET || whence == MPI_SEEK_CUR || whence == MPI_SEEK_END) return MPI_SUCCESS;
  detail = "invalid whence " + std::to_string(whence) + " (MPI_SEEK_SET, MPI_SEEK_CUR or MPI_SEEK_END)";
  return MPI_ERR_ARG;
}

std::int64_t size_of(file_obj& f) {
  struct stat sb {};
  return ::fstat(f.fd, &sb) == 0 ? sb.st_size : 0;
}

}  // namespace
}  // namespace nmad::mpi::io

using namespace nmad::mpi;
using namespace nmad::mpi::io;

#define NMAD_FILE_CBUF(b) const_cast<void*>(static_cast<const void*>(b))

extern "C" {

// ---- explicit offsets ----
int PMPI_File_read_at(MPI_File fh, MPI_Offset offset, void* buf, int count, MPI_Datatype t, MPI_Status* status) {
  return access("MPI_File_read_at", fh, where::at, form::blocking, false, offset, buf, count, t, status, nullptr);
}
int PMPI_File_read_at_all(MPI_File fh, MPI_Offset offset, void* buf, int count, MPI_Datatype t, MPI_Status* status) {
  return access("MPI_File_read_at_all", fh, where::at, form::collective, false, offset, buf, count, t, status, nullptr);
}
int PMPI_File_write_at(MPI_File fh, MPI_Offset offset, const void* buf, int count, MPI_Datatype t,
                       MPI_Status* status) {
  return access("MPI_File_write_at", fh, where::at, form::blocking, true, offset, NMAD_FILE_CBUF(buf), count, t,
                status, nullptr);
}
int PMPI_File_write_at_all(MPI_File fh, MPI_Offset offset, const void* buf, int count, MPI_Datatype t,
                           MPI_Status* status) {
  return access("MPI_File_write_at_all", fh, where::at, form::collective, true, offset, NMAD_FILE_CBUF(buf), count, t,
                status, nullptr);
}
int PMPI_File_iread_at(MPI_File fh, MPI_Offset offset, void* buf, int count, MPI_Datatype t, MPI_Request* request) {
  return access("MPI_File_iread_at", fh, where::at, form::nonblocking, false, offset, buf, count, t, nullptr, request);
}
int PMPI_File_iwrite_at(MPI_File fh, MPI_Offset offset, const void* buf, int count, MPI_Datatype t,
                        MPI_Request* request) {
  return access("MPI_File_iwrite_at", fh, where::at, form::nonblocking, true, offset, NMAD_FILE_CBUF(buf), count, t,
                nullptr, request);
}
int PMPI_File_iread_at_all(MPI_File fh, MPI_Offset offset, void* buf, int count, MPI_Datatype t,
                           MPI_Request* request) {
  return access("MPI_File_iread_at_all", fh, where::at, form::icollective, false, offset, buf, count, t, nullptr,
                request);
}
int PMPI_File_iwrite_at_all(MPI_File fh, MPI_Offset offset, const void* buf, int count, MPI_Datatype t,
                            MPI_Request* request) {
  return access("MPI_File_iwrite_at_all", fh, where::at, form::icollective, true, offset, NMAD_FILE_CBUF(buf), count,
                t, nullptr, request);
}

// ---- individual file pointer ----
int PMPI_File_read(MPI_File fh, void* buf, int count, MPI_Datatype t, MPI_Status* status) {
  return access("MPI_File_read", fh, where::individual, form::blocking, false, 0, buf, count, t, status, nullptr);
}
int PMPI_File_read_all(MPI_File fh, void* buf, int count, MPI_Datatype t, MPI_Status* status) {
  return access("MPI_File_read_all", fh, where::individual, form::collective, false, 0, buf, count, t, status, nullptr);
}
int PMPI_File_write(MPI_File fh, const void* buf, int count, MPI_Datatype t, MPI_Status* status) {
  return access("MPI_File_write", fh, where::individual, form::blocking, true, 0, NMAD_FILE_CBUF(buf), count, t,
                status, nullptr);
}
int PMPI_File_write_all(MPI_File fh, const void* buf, int count, MPI_Datatype t, MPI_Status* status) {
  return access("MPI_File_write_all", fh, where::individual, form::collective, true, 0, NMAD_FILE_CBUF(buf), count, t,
                status, nullptr);
}
int PMPI_File_iread(MPI_File fh, void* buf, int count, MPI_Datatype t, MPI_Request* request) {
  return access("MPI_File_iread", fh, where::individual, form::nonblocking, false, 0, buf, count, t, nullptr, request);
}
int PMPI_File_iwrite(MPI_File fh, const void* buf, int count, MPI_Datatype t, MPI_Request* request) {
  return access("MPI_File_iwrite", fh, where::individual, form::nonblocking, true, 0, NMAD_FILE_CBUF(buf), count, t,
                nullptr, request);
}
int PMPI_File_iread_all(MPI_File fh, void* buf, int count, MPI_Datatype t, MPI_Request* request) {
  return access("MPI_File_iread_all", fh, where::individual, form::icollective, false, 0, buf, count, t, nullptr,
                request);
}
int PMPI_File_iwrite_all(MPI_File fh, const void* buf, int count, MPI_Datatype t, MPI_Request* request) {
  return access("MPI_File_iwrite_all", fh, where::individual, form::icollective, true, 0, NMAD_FILE_CBUF(buf), count,
                t, nullptr, request);
}

int PMPI_File_seek(MPI_File fh, MPI_Offset offset, int whence) {
  const char* fn = "MPI_File_seek";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  auto f = lookup_file(fh);
  if (!f) return raise_file(fn, nullptr, MPI_ERR_FILE, "invalid file handle " + std::to_string(fh));
  if (f->amode & MPI_MODE_SEQUENTIAL)
    return raise_file(fn, f.get(), MPI_ERR_UNSUPPORTED_OPERATION, "file opened with MPI_MODE_SEQUENTIAL");
  std::string detail;
  if (int e = check_whence(whence, detail)) return raise_file(fn, f.get(), e, detail);
  const std::int64_t fsize = whence == MPI_SEEK_END ? size_of(*f) : 0;
  std::lock_guard g(f->mu);
  const MPI_Offset base = whence == MPI_SEEK_SET ? 0 : whence == MPI_SEEK_CUR ? f->pointer : view_eof(f->v, fsize);
  if (base + offset < 0)
    return raise_file(fn, f.get(), MPI_ERR_ARG, "the pointer would be negative (" + std::to_string(base + offset) + ")");
  f->pointer = base + offset;
  return MPI_SUCCESS;
}

int PMPI_File_get_position(MPI_File fh, MPI_Offset* offset) {
  const char* fn = "MPI_File_get_position";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  auto f = lookup_file(fh);
  if (!f) return raise_file(fn, nullptr, MPI_ERR_FILE, "invalid file handle " + std::to_string(fh));
  if (!offset) return raise_file(fn, f.get(), MPI_ERR_ARG, "null offset pointer");
  if (f->amode & MPI_MODE_SEQUENTIAL)
    return raise_file(fn, f.get(), MPI_ERR_UNSUPPORTED_OPERATION, "file opened with MPI_MODE_SEQUENTIAL");
  std::lock_guard g(f->mu);
  *offset = f->pointer;
  return MPI_SUCCESS;
}

int PMPI_File_get_byte_offset(MPI_File fh, MPI_Offset offset, MPI_Offset* disp) {
  const char* fn = "MPI_File_get_byte_offset";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  auto f = lookup_file(fh);
  if (!f) return raise_file(fn, nullptr, MPI_ERR_FILE, "invalid file handle " + std::to_string(fh));
  if (!disp) return raise_file(fn, f.get(), MPI_ERR_ARG, "null disp pointer");
  if (offset < 0) return raise_file(fn, f.get(), MPI_ERR_ARG, "negative offset " + std::to_string(offset));
  std::lock_guard g(f->mu);
  *disp = view_byte_offset(f->v, offset);
  return MPI_SUCCESS;
}

// ---- shared file pointer ----
int PMPI_File_read_shared(MPI_File fh, void* buf, int count, MPI_Datatype t, MPI_Status* status) {
  return access("MPI_File_read_shared", fh, where::shared, form::blocking, false, 0, buf, count, t, status, nullptr);
}
int PMPI_File_write_shared(MPI_File fh, const void* buf, int count, MPI_Datatype t, MPI_Status* status) {
  return access("MPI_File_write_shared", fh, where::shared, form::blocking, true, 0, NMAD_FILE_CBUF(buf), count, t,
                status, nullptr);
}
int PMPI_File_iread_shared(MPI_File fh, void* buf, int count, MPI_Datatype t, MPI_Request* request) {
  return access("MPI_File_iread_shared", fh, where::shared, form::nonblocking, false, 0, buf, count, t, nullptr,
                request);
}
int PMPI_File_iwrite_shared(MPI_File fh, const void* buf, int count, MPI_Datatype t, MPI_Request* request) {
  return access("MPI_File_iwrite_shared", fh, where::shared, form::nonblocking, true, 0, NMAD_FILE_CBUF(buf), count, t,
                nullptr, request);
}
int PMPI_File_read_ordered(MPI_File fh, void* buf, int count, MPI_Datatype t, MPI_Status* status) {
  return access("MPI_File_read_ordered", fh, where::shared, form::collective, false, 0, buf, count, t, status, nullptr);
}
int PMPI_File_write_ordered(MPI_File fh, const void* buf, int count, MPI_Datatype t, MPI_Status* status) {
  return access("MPI_File_write_ordered", fh, where::shared, form::collective, true, 0, NMAD_FILE_CBUF(buf), count, t,
                status, nullptr);
}

int PMPI_File_seek_shared(MPI_File fh, MPI_Offset offset, int whence) {
  const char* fn = "MPI_File_seek_shared";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  auto f = lookup_file(fh);
  if (!f) return raise_file(fn, nullptr, MPI_ERR_FILE, "invalid file handle " + std::to_string(fh));
  std::string detail;
  int err = check_whence(whence, detail);
  long long in[4] = {offset, -offset, whence, -whence}, out[4];
  PMPI_Allreduce(in, out, 4, MPI_LONG_LONG, MPI_MAX, f->comm);
  if (err == MPI_SUCCESS && (out[0] != -out[1] || out[2] != -out[3])) {
    err = MPI_ERR_NOT_SAME;
    detail = "the processes passed different offsets or whence values";
  }
  long long res = err;
  if (err == MPI_SUCCESS && f->rank == 0) {
    MPI_Offset cur = 0;
    if (whence == MPI_SEEK_CUR) res = shared_fetch_add(*f, 0, cur, detail);
    if (whence == MPI_SEEK_END) {
      std::lock_guard g(f->mu);
      cur = view_eof(f->v, size_of(*f));
    }
    if (res == MPI_SUCCESS && cur + offset < 0) {
      res = MPI_ERR_ARG;
      detail = "the shared pointer would be negative (" + std::to_string(cur + offset) + ")";
    }
    if (res == MPI_SUCCESS) res = shared_set(*f, cur + offset, detail);
  }
  if (err == MPI_SUCCESS) PMPI_Bcast(&res, 1, MPI_LONG_LONG, 0, f->comm);
  if (res != MPI_SUCCESS)
    return raise_file(fn, f.get(), static_cast<int>(res),
                      !detail.empty() ? detail : "moving the shared file pointer failed on process 0");
  return MPI_SUCCESS;
}

int PMPI_File_get_position_shared(MPI_File fh, MPI_Offset* offset) {
  const char* fn = "MPI_File_get_position_shared";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  auto f = lookup_file(fh);
  if (!f) return raise_file(fn, nullptr, MPI_ERR_FILE, "invalid file handle " + std::to_string(fh));
  if (!offset) return raise_file(fn, f.get(), MPI_ERR_ARG, "null offset pointer");
  std::string detail;
  MPI_Offset v = 0;
  if (int e = shared_fetch_add(*f, 0, v, detail)) return raise_file(fn, f.get(), e, detail);
  *offset = v;
  return MPI_SUCCESS;
}

// ---- split collectives ----
int PMPI_File_read_at_all_begin(MPI_File fh, MPI_Offset offset, void* buf, int count, MPI_Datatype t) {
  return access("MPI_File_read_at_all_begin", fh, where::at, form::split_begin, false, offset, buf, count, t, nullptr,
                nullptr);
}
int PMPI_File_read_at_all_end(MPI_File fh, void*, MPI_Status* status) {
  return split_end("MPI_File_read_at_all_end", fh, status);
}
int PMPI_File_write_at_all_begin(MPI_File fh, MPI_Offset offset, const void* buf, int count, MPI_Datatype t) {
  return access("MPI_File_write_at_all_begin", fh, where::at, form::split_begin, true, offset, NMAD_FILE_CBUF(buf),
                count, t, nullptr, nullptr);
}
int PMPI_File_write_at_all_end(MPI_File fh, const void*, MPI_Status* status) {
  return split_end("MPI_File_write_at_all_end", fh, status);
}
int PMPI_File_read_all_begin(MPI_File fh, void* buf, int count, MPI_Datatype t) {
  return access("MPI_File_read_all_begin", fh, where::individual, form::split_begin, false, 0, buf, count, t, nullptr,
                nullptr);
}
int PMPI_File_read_all_end(MPI_File fh, void*, MPI_Status* status) {
  return split_end("MPI_File_read_all_end", fh, status);
}
int PMPI_File_write_all_begin(MPI_File fh, const void* buf, int count, MPI_Datatype t) {
  return access("MPI_File_write_all_begin", fh, where::individual, form::split_begin, true, 0, NMAD_FILE_CBUF(buf),
                count, t, nullptr, nullptr);
}
int PMPI_File_write_all_end(MPI_File fh, const void*, MPI_Status* status) {
  return split_end("MPI_File_write_all_end", fh, status);
}
int PMPI_File_read_ordered_begin(MPI_File fh, void* buf, int count, MPI_Datatype t) {
  return access("MPI_File_read_ordered_begin", fh, where::shared, form::split_begin, false, 0, buf, count, t, nullptr,
                nullptr);
}
int PMPI_File_read_ordered_end(MPI_File fh, void*, MPI_Status* status) {
  return split_end("MPI_File_read_ordered_end", fh, status);
}
int PMPI_File_write_ordered_begin(MPI_File fh, const void* buf, int count, MPI_Datatype t) {
  return access("MPI_File_write_ordered_begin", fh, where::shared, form::split_begin, true, 0, NMAD_FILE_CBUF(buf),
                count, t, nullptr, nullptr);
}
int PMPI_File_write_ordered_end(MPI_File fh, const void*, MPI_Status* status) {
  return split_end("MPI_File_write_ordered_end", fh, status);
}


// ---- the MPI 4.0 large-count forms: the same accesses, an MPI_Count count ----
int PMPI_File_read_at_c(MPI_File fh, MPI_Offset offset, void* buf, MPI_Count count, MPI_Datatype t,
                        MPI_Status* status) {
  return access("MPI_File_read_at_c", fh, where::at, form::blocking, false, offset, buf, count, t, status, nullptr);
}
int PMPI_File_read_at_all_c(MPI_File fh, MPI_Offset offset, void* buf, MPI_Count count, MPI_Datatype t,
                            MPI_Status* status) {
  return access("MPI_File_read_at_all_c", fh, where::at, form::collective, false, offset, buf, count, t, status,
                nullptr);
}
int PMPI_File_write_at_c(MPI_File fh, MPI_Offset offset, const void* buf, MPI_Count count, MPI_Datatype t,
                         MPI_Status* status) {
  return access("MPI_File_write_at_c", fh, where::at, form::blocking, true, offset, NMAD_FILE_CBUF(buf), count, t,
                status, nullptr);
}
int PMPI_File_write_at_all_c(MPI_File fh, MPI_Offset offset, const void* buf, MPI_Count count, MPI_Datatype t,
                             MPI_Status* status) {
  return access("MPI_File_write_at_all_c", fh, where::at, form::collective, true, offset, NMAD_FILE_CBUF(buf), count,
                t, status, nullptr);
}
int PMPI_File_iread_at_c(MPI_File fh, MPI_Offset offset, void* buf, MPI_Count count, MPI_Datatype t,
                         MPI_Request* request) {
  return access("MPI_File_iread_at_c", fh, where::at, form::nonblocking, false, offset, buf, count, t, nullptr,
                request);
}
int PMPI_File_iwrite_at_c(MPI_File fh, MPI_Offset offset, const void* buf, MPI_Count count, MPI_Datatype t,
                          MPI_Request* request) {
  return access("MPI_File_iwrite_at_c", fh, where::at, form::nonblocking, true, offset, NMAD_FILE_CBUF(buf), count,
                t, nullptr, request);
}
int PMPI_File_iread_at_all_c(MPI_File fh, MPI_Offset offset, void* buf, MPI_Count count, MPI_Datatype t,
                             MPI_Request* request) {
  return access("MPI_File_iread_at_all_c", fh, where::at, form::icollective, false, offset, buf, count, t, nullptr,
                request);
}
int PMPI_File_iwrite_at_all_c(MPI_File fh, MPI_Offset offset, const void* buf, MPI_Count count, MPI_Datatype t,
                              MPI_Request* request) {
  return access("MPI_File_iwrite_at_all_c", fh, where::at, form::icollective, true, offset, NMAD_FILE_CBUF(buf),
                count, t, nullptr, request);
}
int PMPI_File_read_c(MPI_File fh, void* buf, MPI_Count count, MPI_Datatype t, MPI_Status* status) {
  return access("MPI_File_read_c", fh, where::individual, form::blocking, false, 0, buf, count, t, status, nullptr);
}
int PMPI_File_read_all_c(MPI_File fh, void* buf, MPI_Count count, MPI_Datatype t, MPI_Status* status) {
  return access("MPI_File_read_all_c", fh, where::individual, form::collective, false, 0, buf, count, t, status,
                nullptr);
}
int PMPI_File_write_c(MPI_File fh, const void* buf, MPI_Count count, MPI_Datatype t, MPI_Status* status) {
  return access("MPI_File_write_c", fh, where::individual, form::blocking, true, 0, NMAD_FILE_CBUF(buf), count, t,
                status, nullptr);
}
int PMPI_File_write_all_c(MPI_File fh, const void* buf, MPI_Count count, MPI_Datatype t, MPI_Status* status) {
  return access("MPI_File_write_all_c", fh, where::individual, form::collective, true, 0, NMAD_FILE_CBUF(buf), count,
                t, status, nullptr);
}
int PMPI_File_iread_c(MPI_File fh, void* buf, MPI_Count count, MPI_Datatype t, MPI_Request* request) {
  return access("MPI_File_iread_c", fh, where::individual, form::nonblocking, false, 0, buf, count, t, nullptr,
                request);
}
int PMPI_File_iwrite_c(MPI_File fh, const void* buf, MPI_Count count, MPI_Datatype t, MPI_Request* request) {
  return access("MPI_File_iwrite_c", fh, where::individual, form::nonblocking, true, 0, NMAD_FILE_CBUF(buf), count,
                t, nullptr, request);
}
int PMPI_File_iread_all_c(MPI_File fh, void* buf, MPI_Count count, MPI_Datatype t, MPI_Request* request) {
  return access("MPI_File_iread_all_c", fh, where::individual, form::icollective, false, 0, buf, count, t, nullptr,
                request);
}
int PMPI_File_iwrite_all_c(MPI_File fh, const void* buf, MPI_Count count, MPI_Datatype t, MPI_Request* request) {
  return access("MPI_File_iwrite_all_c", fh, where::individual, form::icollective, true, 0, NMAD_FILE_CBUF(buf),
                count, t, nullptr, request);
}
int PMPI_File_read_shared_c(MPI_File fh, void* buf, MPI_Count count, MPI_Datatype t, MPI_Status* status) {
  return access("MPI_File_read_shared_c", fh, where::shared, form::blocking, false, 0, buf, count, t, status, nullptr);
}
int PMPI_File_write_shared_c(MPI_File fh, const void* buf, MPI_Count count, MPI_Datatype t, MPI_Status* status) {
  return access("MPI_File_write_shared_c", fh, where::shared, form::blocking, true, 0, NMAD_FILE_CBUF(buf), count, t,
                status, nullptr);
}
int PMPI_File_iread_shared_c(MPI_File fh, void* buf, MPI_Count count, MPI_Datatype t, MPI_Request* request) {
  return access("MPI_File_iread_shared_c", fh, where::shared, form::nonblocking, false, 0, buf, count, t, nullptr,
                request);
}
int PMPI_File_iwrite_shared_c(MPI_File fh, const void* buf, MPI_Count count, MPI_Datatype t, MPI_Request* request) {
  return access("MPI_File_iwrite_shared_c", fh, where::shared, form::nonblocking, true, 0, NMAD_FILE_CBUF(buf),
                count, t, nullptr, request);
}
int PMPI_File_read_ordered_c(MPI_File fh, void* buf, MPI_Count count, MPI_Datatype t, MPI_Status* status) {
  return access("MPI_File_read_ordered_c", fh, where::shared, form::collective, false, 0, buf, count, t, status,
                nullptr);
}
int PMPI_File_write_ordered_c(MPI_File fh, const void* buf, MPI_Count count, MPI_Datatype t, MPI_Status* status) {
  return access("MPI_File_write_ordered_c", fh, where::shared, form::collective, true, 0, NMAD_FILE_CBUF(buf), count,
                t, status, nullptr);
}
int PMPI_File_read_at_all_begin_c(MPI_File fh, MPI_Offset offset, void* buf, MPI_Count count, MPI_Datatype t) {
  return access("MPI_File_read_at_all_begin_c", fh, where::at, form::split_begin, false, offset, buf, count, t,
                nullptr, nullptr);
}
int PMPI_File_write_at_all_begin_c(MPI_File fh, MPI_Offset offset, const void* buf, MPI_Count count, MPI_Datatype t) {
  return access("MPI_File_write_at_all_begin_c", fh, where::at, form::split_begin, true, offset, NMAD_FILE_CBUF(buf),
                count, t, nullptr, nullptr);
}
int PMPI_File_read_all_begin_c(MPI_File fh, void* buf, MPI_Count count, MPI_Datatype t) {
  return access("MPI_File_read_all_begin_c", fh, where::individual, form::split_begin, false, 0, buf, count, t,
                nullptr, nullptr);
}
int PMPI_File_write_all_begin_c(MPI_File fh, const void* buf, MPI_Count count, MPI_Datatype t) {
  return access("MPI_File_write_all_begin_c", fh, where::individual, form::split_begin, true, 0, NMAD_FILE_CBUF(buf),
                count, t, nullptr, nullptr);
}
int PMPI_File_read_ordered_begin_c(MPI_File fh, void* buf, MPI_Count count, MPI_Datatype t) {
  return access("MPI_File_read_ordered_begin_c", fh, where::shared, form::split_begin, false, 0, buf, count, t,
                nullptr, nullptr);
}
int PMPI_File_write_ordered_begin_c(MPI_File fh, const void* buf, MPI_Count count, MPI_Datatype t) {
  return access("MPI_File_write_ordered_begin_c", fh, where::shared, form::split_begin, true, 0, NMAD_FILE_CBUF(buf),
                count, t, nullptr, nullptr);
}

}  // extern "C"

#pragma weak MPI_File_read_at = PMPI_File_read_at
#pragma weak MPI_File_read_at_all = PMPI_File_read_at_all
#pragma weak MPI_File_write_at = PMPI_File_write_at
#pragma weak MPI_File_write_at_all = PMPI_File_write_at_all
#pragma weak MPI_File_iread_at = PMPI_File_iread_at
#pragma weak MPI_File_iwrite_at = PMPI_File_iwrite_at
#pragma weak MPI_File_iread_at_all = PMPI_File_iread_at_all
#pragma weak MPI_File_iwrite_at_all = PMPI_File_iwrite_at_all
#pragma weak MPI_File_read = PMPI_File_read
#pragma weak MPI_File_read_all = PMPI_File_read_all
#pragma weak MPI_File_write = PMPI_File_write
#pragma weak MPI_File_write_all = PMPI_File_write_all
#pragma weak MPI_File_iread = PMPI_File_iread
#pragma weak MPI_File_iwrite = PMPI_File_iwrite
#pragma weak MPI_File_iread_all = PMPI_File_iread_all
#pragma weak MPI_File_iwrite_all = PMPI_File_iwrite_all
#pragma weak MPI_File_seek = PMPI_File_seek
#pragma weak MPI_File_get_position = PMPI_File_get_position
#pragma weak MPI_File_get_byte_offset = PMPI_File_get_byte_offset
#pragma weak MPI_File_read_shared = PMPI_File_read_shared
#pragma weak MPI_File_write_shared = PMPI_File_write_shared
#pragma weak MPI_File_iread_shared = PMPI_File_iread_shared
#pragma weak MPI_File_iwrite_shared = PMPI_File_iwrite_shared
#pragma weak MPI_File_read_ordered = PMPI_File_read_ordered
#pragma weak MPI_File_write_ordered = PMPI_File_write_ordered
#pragma weak MPI_File_seek_shared = PMPI_File_seek_shared
#pragma weak MPI_File_get_position_shared = PMPI_File_get_position_shared
#pragma weak MPI_File_read_at_all_begin = PMPI_File_read_at_all_begin
#pragma weak MPI_File_read_at_all_end = PMPI_File_read_at_all_end
#pragma weak MPI_File_write_at_all_begin = PMPI_File_write_at_all_begin
#pragma weak MPI_File_write_at_all_end = PMPI_File_write_at_all_end
#pragma weak MPI_File_read_all_begin = PMPI_File_read_all_begin
#pragma weak MPI_File_read_all_end = PMPI_File_read_all_end
#pragma weak MPI_File_write_all_begin = PMPI_File_write_all_begin
#pragma weak MPI_File_write_all_end = PMPI_File_write_all_end
#pragma weak MPI_File_read_ordered_begin = PMPI_File_read_ordered_begin
#pragma weak MPI_File_read_ordered_end = PMPI_File_read_ordered_end
#pragma weak MPI_File_write_ordered_begin = PMPI_File_write_ordered_begin
#pragma weak MPI_File_write_ordered_end = PMPI_File_write_ordered_end
#pragma weak MPI_File_read_at_c = PMPI_File_read_at_c
#pragma weak MPI_File_read_at_all_c = PMPI_File_read_at_all_c
#pragma weak MPI_File_write_at_c = PMPI_File_write_at_c
#pragma weak MPI_File_write_at_all_c = PMPI_File_write_at_all_c
#pragma weak MPI_File_iread_at_c = PMPI_File_iread_at_c
#pragma weak MPI_File_iwrite_at_c = PMPI_File_iwrite_at_c
#pragma weak MPI_File_iread_at_all_c = PMPI_File_iread_at_all_c
#pragma weak MPI_File_iwrite_at_all_c = PMPI_File_iwrite_at_all_c
#pragma weak MPI_File_read_c = PMPI_File_read_c
#pragma weak MPI_File_read_all_c = PMPI_File_read_all_c
#pragma weak MPI_File_write_c = PMPI_File_write_c
#pragma weak MPI_File_write_all_c = PMPI_File_write_all_c
#pragma weak MPI_File_iread_c = PMPI_File_iread_c
#pragma weak MPI_File_iwrite_c = PMPI_File_iwrite_c
#pragma weak MPI_File_iread_all_c = PMPI_File_iread_all_c
#pragma weak MPI_File_iwrite_all_c = PMPI_File_iwrite_all_c
#pragma weak MPI_File_read_shared_c = PMPI_File_read_shared_c
#pragma weak MPI_File_write_shared_c = PMPI_File_write_shared_c
#pragma weak MPI_File_iread_shared_c = PMPI_File_iread_shared_c
#pragma weak MPI_File_iwrite_shared_c = PMPI_File_iwrite_shared_c
#pragma weak MPI_File_read_ordered_c = PMPI_File_read_ordered_c
#pragma weak MPI_File_write_ordered_c = PMPI_File_write_ordered_c
#pragma weak MPI_File_read_at_all_begin_c = PMPI_File_read_at_all_begin_c
#pragma weak MPI_File_write_at_all_begin_c = PMPI_File_write_at_all_begin_c
#pragma weak MPI_File_read_all_begin_c = PMPI_File_read_all_begin_c
#pragma weak MPI_File_write_all_begin_c = PMPI_File_write_all_begin_c
#pragma weak MPI_File_read_ordered_begin_c = PMPI_File_read_ordered_begin_c
#pragma weak MPI_File_write_ordered_begin_c = PMPI_File_write_ordered_begin_c
