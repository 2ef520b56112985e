// MPI-IO: views, POSIX data access, atomic-mode locks, data sieving for
// reads, the shared file pointer's side file and the background I/O thread
// of non-blocking operations. See file_impl.hpp.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <thread>

#include "mpi_layer/datatype/external32.hpp"
#include "api/nmad/services/thread_heap.hpp"
#include "mpi_layer/file/file_impl.hpp"

namespace nmad::mpi::io {

view default_view() {
  view v;
  v.etype = v.filetype = Datatype::basic(BasicType::Byte);
  return v;
}

namespace {

int check_layout(const Datatype& out, const char* what, MPI_Datatype h, std::string& detail);

// A type usable in a view: live, committed, no negative displacement.
int view_type(MPI_Datatype h, const char* what, Datatype& out, std::string& detail) {
  out = type_of(h);
  if (!out) {
    detail = std::string(what) + " " + type_handle_text(h) + " is not a valid datatype";
    return MPI_ERR_TYPE;
  }
  if (!out.is_committed()) {
    detail = std::string(what) + " " + type_handle_text(h) + " is not committed";
    return MPI_ERR_TYPE;
  }
  return check_layout(out, what, h, detail);
}

// The layout of a view's type (native, or its external32 file layout):
// no negative displacement, nondecreasing and not overlapping.
int check_layout(const Datatype& out, const char* what, MPI_Datatype h, std::string& detail) {
  if (out.true_lb() < 0 || out.lb() < 0) {
    detail = std::string(what) + " " + type_handle_text(h) + " has a negative displacement (MPI-3.1 13.3)";
    return MPI_ERR_TYPE;
  }
  // MPI-3.1 13.3: displacements must be monotonically nondecreasing (no
  // overlap either), so that a view's stream has one place in the file.
  std::intptr_t reach = 0;
  bool ordered = true;
  out.for_each_block(static_cast<const void*>(nullptr), 1, [&](const void* p, std::size_t n) {
    const auto off = static_cast<std::intptr_t>(reinterpret_cast<std::uintptr_t>(p));
    if (off < reach) ordered = false;
    reach = std::max(reach, off + static_cast<std::intptr_t>(n));
  });
  if (!ordered) {
    detail = std::string(what) + " " + type_handle_text(h) +
             " has decreasing or overlapping displacements (MPI-3.1 13.3 requires them nondecreasing)";
    return MPI_ERR_TYPE;
  }
  return MPI_SUCCESS;
}

}  // namespace

int make_view(MPI_Offset disp, MPI_Datatype etype, MPI_Datatype filetype, const char* datarep, view& out,
              std::string& detail) {
  view v;
  if (int e = view_type(etype, "etype", v.etype, detail)) return e;
  if (int e = view_type(filetype, "filetype", v.filetype, detail)) return e;
  if (!datarep) {
    detail = "null data representation";
    return MPI_ERR_ARG;
  }
  const std::string rep = datarep;
  if (rep == "native" || rep == "internal") {
    v.external32 = false;
  } else if (rep == "external32") {
    v.external32 = true;
  } else {
    detail = "data representation \"" + rep + "\" (supported: native, internal, external32)";
    return MPI_ERR_UNSUPPORTED_DATAREP;
  }
  v.datarep = rep;
  v.disp = disp;
  v.etype_handle = etype;
  v.filetype_handle = filetype;
  if (v.external32) {
    // The filetype as it lies in an external32 file: counts scale with the
    // external32 extents, byte displacements stay as given (MPI-3.1
    // 13.5.2); the stream is tiled over that layout.
    v.esize = external32::size(v.etype, 1);
    try {
      v.filetype = external32::file_layout(v.filetype);
      v.filetype.commit();
    } catch (const DatatypeError& e) {
      detail = "filetype " + type_handle_text(filetype) + " has no external32 layout: " + e.what();
      return MPI_ERR_TYPE;
    }
    if (int e = check_layout(v.filetype, "filetype (in external32)", filetype, detail)) return e;
  } else {
    v.esize = v.etype.size();
  }
  v.ftsize = v.filetype.size();
  v.ftextent = v.filetype.extent();
  if (v.esize <= 0) {
    detail = "etype " + type_handle_text(etype) + " has size 0";
    return MPI_ERR_TYPE;
  }
  if (v.ftsize <= 0 || v.ftextent <= 0) {
    detail = "filetype " + type_handle_text(filetype) + " has no data or a zero extent";
    return MPI_ERR_TYPE;
  }
  if (v.ftsize % v.esize != 0) {
    detail = "filetype " + type_handle_text(filetype) + " (" + std::to_string(v.ftsize) +
             " bytes) is not made of whole etypes of " + std::to_string(v.esize) + " bytes";
    return MPI_ERR_TYPE;
  }
  v.dense = v.filetype.is_contiguous() && v.filetype.true_lb() == 0 && v.ftsize == v.ftextent;
  out = std::move(v);
  return MPI_SUCCESS;
}

MPI_Offset view_eof(const view& v, MPI_Offset file_size) {
  const std::int64_t avail = file_size - v.disp;
  if (avail <= 0) return 0;
  std::int64_t bytes = 0;
  if (v.dense) {
    bytes = avail;
  } else {
    const std::int64_t n = avail / v.ftextent, rem = avail % v.ftextent;
    bytes = n * v.ftsize;
    v.filetype.for_each_block(static_cast<const void*>(nullptr), 1, [&](const void* p, std::size_t len) {
      const std::int64_t off = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(p));
      if (off < rem) bytes += std::min<std::int64_t>(static_cast<std::int64_t>(len), rem - off);
    });
  }
  return (bytes + v.esize - 1) / v.esize;
}

MPI_Offset view_byte_offset(const view& v, MPI_Offset offset) {
  MPI_Offset first = -1;
  for_each_file_block(v, offset * v.esize, 1, [&](std::int64_t off, std::int64_t) {
    if (first < 0) first = off;
  });
  return first < 0 ? v.disp : first;
}

int describe(const view& v, const void* buf, MPI_Count count, MPI_Datatype t, user_data& out, std::string& detail) {
  if (count < 0) {
    detail = "negative count " + std::to_string(count);
    return MPI_ERR_COUNT;
  }
  if (int e = lookup_comm_type(t, out.type, detail)) return e;
  out.buf = const_cast<void*>(buf);
  out.count = count;
  out.handle = t;
  out.mem_bytes = static_cast<std::int64_t>(count) * out.type.size();
  if (out.mem_bytes > 0 && !buf && basic_of(t)) {
    detail = "null buffer for " + std::to_string(count) + " elements";
    return MPI_ERR_BUFFER;
  }
  out.file_bytes = v.external32 ? external32::size(out.type, count) : out.mem_bytes;
  if (out.file_bytes % v.esize != 0) {
    detail = std::to_string(count) + " x " + type_handle_text(t) + " is " + std::to_string(out.file_bytes) +
             " bytes in the file, not a whole number of etypes of " + std::to_string(v.esize) + " bytes";
    return MPI_ERR_ARG;
  }
  return MPI_SUCCESS;
}

bool direct_access(const view& v, const user_data& u) { return !v.external32 && u.type.is_contiguous(); }

namespace {
bool direct(const view& v, const user_data& u) { return direct_access(v, u); }
std::byte* user_base(const user_data& u) {
  return static_cast<std::byte*>(u.buf) + u.type.true_lb();
}

// Staging windows of an access whose data is not contiguous in memory or
// is converted (external32): at most `window` stream bytes at a time, or
// whole elements in external32 (at least one).
struct window_plan {
  std::int64_t bytes = 0;  // stream bytes per window
  std::int64_t one = 0;    // external32: stream bytes of one element
};
window_plan plan_windows(const view& v, const user_data& u, std::int64_t window) {
  window = std::max<std::int64_t>(window, 4096);
  if (!v.external32) return {std::min(window, u.file_bytes), 0};
  const std::int64_t one = external32::size(u.type, 1);
  return {std::min(std::max<std::int64_t>(1, window / one) * one, u.file_bytes), one};
}
// The user's element `e` (external32 windows start on whole elements).
void* element_at(const user_data& u, std::int64_t e) {
  return static_cast<std::byte*>(u.buf) + e * static_cast<std::int64_t>(u.type.extent());
}
// Stream bytes [s, s + n) of the user's data, in the file's representation.
void fill_window(const window_plan& w, const user_data& u, std::int64_t s, std::int64_t n, std::byte* out) {
  if (w.one == 0) {
    u.type.pack_range(u.buf, u.count, s, n, out);
    return;
  }
  Count at = 0;
  external32::pack(u.type, element_at(u, s / w.one), n / w.one, out, n, at);
}
// Places `got` stream bytes read at stream offset s; returns the user bytes
// filled (whole elements in external32).
std::int64_t place_window(const window_plan& w, const user_data& u, std::int64_t s, std::int64_t got,
                          const std::byte* in) {
  if (got <= 0) return 0;
  if (w.one == 0) {
    u.type.unpack_range(in, s, got, u.buf, u.count);
    return got;
  }
  const std::int64_t whole = got / w.one;
  Count at = 0;
  if (whole > 0) external32::unpack(u.type, in, whole * w.one, at, element_at(u, s / w.one), whole);
  return whole * static_cast<std::int64_t>(u.type.size());
}
}  // namespace

const std::byte* stage_for_write(const view& v, const user_data& u, std::vector<std::byte>& stage) {
  if (u.file_bytes == 0) return nullptr;
  if (direct(v, u)) return user_base(u);
  stage.resize(static_cast<std::size_t>(u.file_bytes));
  Count pos = 0;
  if (v.external32)
    external32::pack(u.type, u.buf, u.count, stage.data(), u.file_bytes, pos);
  else
    u.type.pack(u.buf, u.count, stage.data(), u.file_bytes, pos);
  return stage.data();
}

std::byte* read_target(const view& v, const user_data& u, std::vector<std::byte>& stage) {
  if (u.file_bytes == 0) return nullptr;
  if (direct(v, u)) return user_base(u);
  stage.assign(static_cast<std::size_t>(u.file_bytes), std::byte{0});
  return stage.data();
}

std::int64_t finish_read(const view& v, const user_data& u, const std::byte* data, std::int64_t got) {
  if (got <= 0 || direct(v, u)) return std::max<std::int64_t>(got, 0);
  if (v.external32) {
    const std::int64_t one = external32::size(u.type, 1);
    const std::int64_t whole = one > 0 ? got / one : 0;
    Count pos = 0;
    if (whole > 0) external32::unpack(u.type, data, whole * one, pos, u.buf, whole);
    return whole * u.type.size();
  }
  u.type.unpack_range(data, 0, got, u.buf, u.count);
  return got;
}

int errno_class(int e) {
  switch (e) {
    case ENOENT: return MPI_ERR_NO_SUCH_FILE;
    case EACCES:
    case EPERM: return MPI_ERR_ACCESS;
    case EEXIST: return MPI_ERR_FILE_EXISTS;
    case EROFS: return MPI_ERR_READ_ONLY;
    case ENOSPC:
    case EFBIG: return MPI_ERR_NO_SPACE;
    case EDQUOT: return MPI_ERR_QUOTA;
    case ENAMETOOLONG:
    case ENOTDIR:
    case EISDIR:
    case ELOOP: return MPI_ERR_BAD_FILE;
    case ETXTBSY:
    case EBUSY: return MPI_ERR_FILE_IN_USE;
    default: return MPI_ERR_IO;
  }
}

int pwrite_full(int fd, const std::byte* p, std::int64_t n, std::int64_t off, std::string& detail) {
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, p, static_cast<std::size_t>(std::min<std::int64_t>(n, 1 << 30)), off);
    if (w < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      detail = "pwrite of " + std::to_string(n) + " bytes at offset " + std::to_string(off) + ": " + std::strerror(e);
      return errno_class(e);
    }
    if (w == 0) {
      detail = "pwrite at offset " + std::to_string(off) + " wrote nothing";
      return MPI_ERR_IO;
    }
    p += w;
    n -= w;
    off += w;
  }
  return MPI_SUCCESS;
}

int pread_full(int fd, std::byte* p, std::int64_t n, std::int64_t off, std::int64_t& got, std::string& detail) {
  got = 0;
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, static_cast<std::size_t>(std::min<std::int64_t>(n, 1 << 30)), off);
    if (r < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      detail = "pread of " + std::to_string(n) + " bytes at offset " + std::to_string(off) + ": " + std::strerror(e);
      return errno_class(e);
    }
    if (r == 0) break;  // end of file
    p += r;
    n -= r;
    off += r;
    got += r;
  }
  return MPI_SUCCESS;
}

namespace {

// The byte range [lo, hi) of the file an access covers.
void covered_range(const view& v, std::int64_t pos, std::int64_t len, std::int64_t& lo, std::int64_t& hi) {
  lo = -1;
  hi = -1;
  if (v.dense) {
    lo = v.disp + pos;
    hi = lo + len;
    return;
  }
  for_each_file_block(v, pos, len, [&](std::int64_t off, std::int64_t n) {
    if (lo < 0) lo = off;
    hi = std::max(hi, off + n);
  });
}

// Atomic mode: an fcntl lock over [lo, hi) held for an access, plus the
// file's process mutex (fcntl locks belong to the process).
class range_lock {
 public:
  range_lock(file_obj& f, bool on, bool write, std::int64_t lo, std::int64_t hi) : _f(f), _on(on && hi > lo) {
    if (!_on) return;
    _f.atomic_mu.lock();
    _fl.l_type = write ? F_WRLCK : F_RDLCK;
    _fl.l_whence = SEEK_SET;
    _fl.l_start = lo;
    _fl.l_len = hi - lo;
    while (::fcntl(_f.fd, F_SETLKW, &_fl) != 0) {
      if (errno == EINTR) continue;
      _err = errno;
      break;
    }
  }
  ~range_lock() {
    if (!_on) return;
    if (_err == 0) {
      _fl.l_type = F_UNLCK;
      ::fcntl(_f.fd, F_SETLK, &_fl);
    }
    _f.atomic_mu.unlock();
  }
  // A lock the file system refuses (ENOLCK, EINVAL): reported, since
  // atomicity cannot be kept without it.
  int error() const { return _err; }

 private:
  file_obj& _f;
  bool _on;
  int _err = 0;
  struct flock _fl {};
};

// Reads the stream range into out (len bytes): block by block, or through
// a sieve buffer of `sieve` bytes when blocks are small and close together.
// got = stream bytes read before the first short block (end of file).
// The sieve buffer of the calling thread.
struct sieve_buffer {
  std::vector<std::byte> bytes;
};

int read_blocks(file_obj& f, const view& v, std::int64_t pos, std::int64_t len, std::byte* out, bool sieve_on,
                std::int64_t sieve_size, std::int64_t& got, std::string& detail) {
  got = 0;
  bool eof = false;
  int err = MPI_SUCCESS;
  // Kept per thread across calls: a fresh 4 MiB buffer costs a page fault
  // per 4 KiB on first touch, about as much as the read it serves here.
  // Behind a POSIX key, not a thread_local: libmpi.so keeps its static TLS
  // within what dlopen allows (api/nmad/services/thread_heap.hpp).
  std::vector<std::byte>& sieve = thread_heap::thread_object<sieve_buffer>::get().bytes;
  std::int64_t s_lo = 0, s_hi = 0;  // file range held in the sieve buffer
  for_each_file_block(v, pos, len, [&](std::int64_t off, std::int64_t n) {
    if (err != MPI_SUCCESS || eof) return;
    if (sieve_on && n < sieve_size / 8) {
      if (off < s_lo || off + n > s_hi) {
        sieve.resize(static_cast<std::size_t>(sieve_size));
        std::int64_t r = 0;
        err = pread_full(f.fd, sieve.data(), sieve_size, off, r, detail);
        if (err != MPI_SUCCESS) return;
        s_lo = off;
        s_hi = off + r;
      }
      const std::int64_t have = std::clamp<std::int64_t>(s_hi - off, 0, n);
      std::memcpy(out + got, sieve.data() + (off - s_lo), static_cast<std::size_t>(have));
      got += have;
      if (have < n) eof = true;
      return;
    }
    std::int64_t r = 0;
    err = pread_full(f.fd, out + got, n, off, r, detail);
    got += r;
    if (r < n) eof = true;
  });
  return err;
}

// Whether sieving pays: several blocks whose data fill at least a quarter
// of the range they span, close enough together that one pread per block
// costs more than reading the gaps too. Measured here (2 ranks, rows
// interleaved with the other rank's, 128 MiB each from the page cache):
// a pread costs about 3.5 us, as much as copying ~20 KiB; sieving won up to
// 16 KiB rows (a 32 KiB span per block: 0.051 s against 0.057) and lost
// at 47 KB rows (94 KB span: 0.045 s against 0.034). Hence spans of at
// most kSieveSpan bytes per block on average.
constexpr std::int64_t kSieveSpan = 48 << 10;
bool sieve_pays(const view& v, const hints& h, std::int64_t pos, std::int64_t len) {
  if (v.dense || h.ds_read == "disable") return false;
  std::int64_t blocks = 0, lo = -1, hi = -1;
  for_each_file_block(v, pos, len, [&](std::int64_t off, std::int64_t n) {
    ++blocks;
    if (lo < 0) lo = off;
    hi = off + n;
  });
  if (blocks < 2) return false;
  return h.ds_read == "enable" || (len * 4 >= hi - lo && (hi - lo) / blocks <= kSieveSpan);
}

}  // namespace

io_result access_independent(file_obj& f, const view& v, const hints& h, bool atomic, bool write, const user_data& u,
                             std::int64_t pos) {
  io_result res;
  if (u.file_bytes == 0) return res;
  std::int64_t lo = 0, hi = 0;
  if (atomic) covered_range(v, pos, u.file_bytes, lo, hi);
  range_lock lock(f, atomic, write, lo, hi);
  if (lock.error() != 0) {
    res.err = MPI_ERR_IO;
    res.detail = std::string("atomic mode: fcntl lock of bytes ") + std::to_string(lo) + ".." + std::to_string(hi) +
                 " refused: " + std::strerror(lock.error());
    return res;
  }
  // A buffer that is contiguous in memory (and native) is written from and
  // read into directly; any other goes through a staging window of
  // ind_wr_buffer_size (ind_rd_buffer_size) bytes, so memory stays bounded
  // whatever the size of the access.
  const bool sieve = !write && sieve_pays(v, h, pos, u.file_bytes);
  auto write_stream = [&](const std::byte* data, std::int64_t s, std::int64_t n) {
    std::int64_t done = 0;
    for_each_file_block(v, pos + s, n, [&](std::int64_t off, std::int64_t len) {
      if (res.err != MPI_SUCCESS) return;
      res.err = pwrite_full(f.fd, data + done, len, off, res.detail);
      if (res.err == MPI_SUCCESS) done += len;
    });
  };
  if (direct(v, u)) {
    if (write) {
      write_stream(user_base(u), 0, u.file_bytes);
      if (res.err == MPI_SUCCESS) res.bytes = u.mem_bytes;
      return res;
    }
    std::int64_t got = 0;
    res.err = read_blocks(f, v, pos, u.file_bytes, user_base(u), sieve, h.ind_rd_buffer_size, got, res.detail);
    if (res.err == MPI_SUCCESS) res.bytes = got;
    return res;
  }
  const window_plan w = plan_windows(v, u, write ? h.ind_wr_buffer_size : h.ind_rd_buffer_size);
  std::vector<std::byte> stage(static_cast<std::size_t>(w.bytes));
  std::int64_t placed = 0;
  for (std::int64_t s = 0; s < u.file_bytes && res.err == MPI_SUCCESS; s += w.bytes) {
    const std::int64_t n = std::min(w.bytes, u.file_bytes - s);
    if (write) {
      fill_window(w, u, s, n, stage.data());
      write_stream(stage.data(), s, n);
      continue;
    }
    std::int64_t got = 0;
    res.err = read_blocks(f, v, pos + s, n, stage.data(), sieve, h.ind_rd_buffer_size, got, res.detail);
    if (res.err != MPI_SUCCESS) break;
    placed += place_window(w, u, s, got, stage.data());
    if (got < n) break;  // end of file
  }
  if (res.err == MPI_SUCCESS) res.bytes = write ? u.mem_bytes : placed;
  return res;
}

// ---- shared file pointer ----
namespace {

int open_shared_locked(file_obj& f, std::string& detail) {
  if (f.shared_fd >= 0) return MPI_SUCCESS;
  const int fd = ::open(f.shared_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    const int e = errno;
    detail = "shared file pointer file " + f.shared_path + ": " + std::strerror(e);
    return errno_class(e);
  }
  f.shared_fd = fd;
  return MPI_SUCCESS;
}

class shared_lock {
 public:
  explicit shared_lock(int fd) : _fd(fd) {
    _fl.l_type = F_WRLCK;
    _fl.l_whence = SEEK_SET;
    _fl.l_start = 0;
    _fl.l_len = 8;
    while (::fcntl(_fd, F_SETLKW, &_fl) != 0) {
      if (errno == EINTR) continue;
      _err = errno;
      break;
    }
  }
  ~shared_lock() {
    if (_err) return;
    _fl.l_type = F_UNLCK;
    ::fcntl(_fd, F_SETLK, &_fl);
  }
  int error() const { return _err; }

 private:
  int _fd;
  int _err = 0;
  struct flock _fl {};
};

}  // namespace

int shared_fetch_add(file_obj& f, MPI_Offset delta, MPI_Offset& old, std::string& detail) {
  std::lock_guard g(f.shared_mu);
  if (int e = open_shared_locked(f, detail)) return e;
  shared_lock lock(f.shared_fd);
  if (lock.error()) {
    detail = std::string("lock of the shared file pointer: ") + std::strerror(lock.error());
    return MPI_ERR_IO;
  }
  std::int64_t value = 0, got = 0;
  if (int e = pread_full(f.shared_fd, reinterpret_cast<std::byte*>(&value), 8, 0, got, detail)) return e;
  if (got < 8) value = 0;
  old = value;
  if (delta == 0) return MPI_SUCCESS;
  value += delta;
  return pwrite_full(f.shared_fd, reinterpret_cast<const std::byte*>(&value), 8, 0, detail);
}

int shared_set(file_obj& f, MPI_Offset value, std::string& detail) {
  std::lock_guard g(f.shared_mu);
  if (int e = open_shared_locked(f, detail)) return e;
  shared_lock lock(f.shared_fd);
  if (lock.error()) {
    detail = std::string("lock of the shared file pointer: ") + std::strerror(lock.error());
    return MPI_ERR_IO;
  }
  std::int64_t v = value;
  return pwrite_full(f.shared_fd, reinterpret_cast<const std::byte*>(&v), 8, 0, detail);
}

void shared_remove(file_obj& f) {
  std::lock_guard g(f.shared_mu);
  ::unlink(f.shared_path.c_str());
}

// ---- background I/O thread ----
namespace {

struct io_job {
  std::function<void()> run;
};

// One thread per process, started on first use; jobs run in FIFO order.
class io_worker {
 public:
  void post(std::function<void()> job) {
    {
      std::lock_guard g(_mu);
      if (!_started) {
        _started = true;
        std::thread([this] { loop(); }).detach();  // lives as long as the process (state is never destroyed)
      }
      _jobs.push_back(std::move(job));
    }
    _cv.notify_one();
  }

 private:
  void loop() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock l(_mu);
        _cv.wait(l, [&] { return !_jobs.empty(); });
        job = std::move(_jobs.front());
        _jobs.pop_front();
      }
      job();
    }
  }
  std::mutex _mu;
  std::condition_variable _cv;
  std::deque<std::function<void()>> _jobs;
  bool _started = false;
};

io_worker& worker() {
  static auto* w = new io_worker();
  return *w;
}

// What a file request keeps alive until it is released.
struct async_state {
  std::shared_ptr<file_obj> file;
  std::atomic<bool> done{false};
  io_result result;
};

void arm_request(request_obj* r, const std::shared_ptr<async_state>& a) {
  async_state* p = a.get();
  arm_file_request(r, *a->file, a, "MPI_Wait (file request)",
                   [p] { return p->done.load(std::memory_order_acquire); }, &p->result);
}

}  // namespace

void set_status(MPI_Status* s, std::int64_t bytes) {
  if (!s) return;
  empty_status(s);
  s->nmad_count = bytes;
}

void arm_file_request(request_obj* r, file_obj& f, std::shared_ptr<void> keep, const char* fn,
                      std::function<bool()> ready, const io_result* res) {
  r->type = request_obj::kind::generic;
  r->comm = lookup_comm(f.comm);  // MPI_ERRORS_RETURN: the file's handler is called below
  r->persistent = false;
  r->local_done = false;
  r->active = true;
  r->extra = std::move(keep);
  r->poll = [ready = std::move(ready), res](request_obj& q) {
    if (!ready()) return false;
    set_status(&q.local_status, res->bytes);
    q.local_status.MPI_ERROR = res->err;
    return true;
  };
  r->on_complete = [fn, file = &f, res](request_obj& q, std::string& detail) {
    set_status(&q.local_status, res->bytes);
    q.local_status.MPI_ERROR = res->err;
    if (res->err == MPI_SUCCESS) return MPI_SUCCESS;
    detail = res->detail;
    return raise_file(fn, file, res->err, res->detail);
  };
}

int start_async(const char*, const std::shared_ptr<file_obj>& f, std::function<io_result()> job,
                MPI_Request* request) {
  auto a = std::make_shared<async_state>();
  a->file = f;
  request_obj* r = new_request();
  arm_request(r, a);
  *request = r->handle;
  f->pending.fetch_add(1, std::memory_order_acq_rel);
  worker().post([a, job = std::move(job)] {
    a->result = job();
    file_obj& file = *a->file;
    a->done.store(true, std::memory_order_release);
    file.pending.fetch_sub(1, std::memory_order_acq_rel);
    st().session->notify_waiters();  // a thread may sleep in MPI_Wait on it
  });
  return MPI_SUCCESS;
}

void post_io(std::function<void()> fn) { worker().post(std::move(fn)); }

void drain(file_obj& f) {
  if (f.pending.load(std::memory_order_acquire) == 0) return;
  // Independent operations finish on the I/O thread (which wakes us);
  // collective ones need the engine: this wait progresses them.
  st().session->wait_until([&] {
    progress_collectives();
    return f.pending.load(std::memory_order_acquire) == 0;
  });
}

}  // namespace nmad::mpi::io
