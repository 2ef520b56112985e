#pragma once
// Private state of MPI-IO (MPI-3.1 chapter 13) in the MPI layer.
//
// How this part works. A file is opened over POSIX by every process of the
// communicator (one descriptor each); the layer keeps, per open file, a
// duplicate of the communicator (its collective traffic never mixes with
// the application's), the access mode, the hints, the error handler, the
// view, the individual file pointer and the atomicity flag.
//   * The view maps a stream of etypes onto the file: the filetype tiled
//     from the displacement; for_each_file_block() turns a range of the
//     stream into the file's byte blocks through the datatype engine's
//     block walk (the file offset is the "address" of a block).
//   * Data access (io.cpp) packs the user's datatype through a
//     staging window (ind_wr/rd_buffer_size bytes, whole elements in
//     external32) when it is not contiguous or is converted, and writes or
//     reads each file block with pwrite/pread; non-contiguous independent
//     reads are sieved (one
//     large read, the pieces copied out); in atomic mode the byte range an
//     access covers is locked with fcntl (and a process mutex, since fcntl
//     locks do not exclude the threads of one process).
//   * Shared file pointers live in a small side file next to the data file
//     (".<name>.nmad-shfp.<id>"), an 8-byte counter updated under an fcntl
//     lock, created on first use and removed at close.
//   * Non-blocking independent operations are queued to one background I/O
//     thread per process (io.cpp); their MPI requests are generic
//     requests that complete when the thread has done the access, so the
//     access advances while the application computes.
//   * Collective data access uses two-phase aggregation (twophase.cpp)
//     when some process's access is not contiguous in the file: aggregator
//     processes (cb_nodes; by default one per NUMA node holding processes
//     on every host, from the topology module) each own a contiguous
//     file domain, gather the pieces of all processes for a window of
//     cb_buffer_size bytes over the engine (the collective schedules of
//     coll/), and write (or read) it with one large access. It is a state
//     machine that never blocks: blocking forms wait on it, non-blocking
//     and split forms leave it to the layer's progress (a session progress
//     task, the progress thread while the application computes), with its
//     file steps on the background I/O thread.
// Thread safety: the file table has its own lock; a file's view, pointer
// and hints are guarded by file_obj::mu; shared-pointer updates by
// file_obj::shared_mu plus the fcntl lock. No lock of this part is held
// across a call into the rest of the layer.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "mpi_layer/mpi_impl.hpp"

namespace nmad::mpi::io {

// The view (MPI_File_set_view): disp + filetype tiled, in etype units.
struct view {
  MPI_Offset disp = 0;
  Datatype etype, filetype;            // committed
  MPI_Datatype etype_handle = MPI_BYTE, filetype_handle = MPI_BYTE;  // as given (for get_view)
  bool external32 = false;             // data representation "external32" (else native)
  std::string datarep = "native";
  std::int64_t esize = 1;              // bytes of one etype in the file
  std::int64_t ftsize = 1;             // data bytes of one filetype in the file
  std::int64_t ftextent = 1;           // extent of one filetype in the file
  bool dense = true;                   // the filetype is one block at offset 0 of size == extent
};

// Hints in effect (reported by MPI_File_get_info).
struct hints {
  int cb_nodes = 1;                    // aggregators for collective buffering
  std::int64_t cb_buffer_size = 16 << 20;
  std::string cb_read = "automatic", cb_write = "automatic";  // enable/disable/automatic
  std::string ds_read = "automatic", ds_write = "disable";
  std::int64_t ind_rd_buffer_size = 4 << 20, ind_wr_buffer_size = 512 << 10;
  info_entries extra;                  // other recognised hints, as given
};

struct collective_job;  // twophase.cpp

struct file_obj {
  MPI_File handle = MPI_FILE_NULL;
  MPI_Comm comm = MPI_COMM_NULL;       // private duplicate (MPI_ERRORS_RETURN)
  int rank = 0, size = 1;
  int fd = -1;
  std::string filename;                // as given
  std::string path;                    // absolute path (delete on close, shared pointer)
  int amode = 0;
  std::atomic<MPI_Errhandler> errhandler{MPI_ERRORS_RETURN};
  std::vector<int> aggregator_order;   // ranks in aggregator preference order (one per NUMA node and host first)

  std::mutex mu;                       // guards the fields below
  view v;
  hints h;
  MPI_Offset pointer = 0;              // individual file pointer (etypes in the view)
  bool atomic = false;
  // Split collective in progress (_begin called, _end not yet).
  bool split_active = false;
  std::shared_ptr<collective_job> split_job;

  std::mutex shared_mu;                // shared pointer side file (process-wide)
  std::string shared_path;
  int shared_fd = -1;
  std::mutex atomic_mu;                // atomic mode: excludes this process's threads
  std::atomic<int> pending{0};         // non-blocking operations not finished (independent and collective)
};

// The outcome of an access: an MPI error class (detail set) and the bytes
// of the user's datatype moved (what MPI_Get_count reads in the status).
struct io_result {
  int err = MPI_SUCCESS;
  std::string detail;
  std::int64_t bytes = 0;
};

// ---- file table (file.cpp) ----
std::shared_ptr<file_obj> lookup_file(MPI_File fh);
// Raises on f's handler (null: MPI_FILE_NULL's).
int raise_file(const char* fn, file_obj* f, int code, const std::string& detail);
// MPI error class of an errno value from a file operation.
int errno_class(int e);
// Looks up an open file for fn: null after raising MPI_ERR_FILE (rc set).
std::shared_ptr<file_obj> need_file(const char* fn, MPI_File fh, int& rc);
// The largest of every process's value (agreement on an error class).
int agree_max(MPI_Comm comm, int mine);
// The detail of a class agreed from another process's failure.
std::string other_failed(int cls);
// Takes the hints this implementation knows from info into h; values it
// cannot use are ignored (MPI-3.1 9: hints may be ignored).
void apply_hints(MPI_Info info, hints& h, int nprocs);

// ---- views and POSIX access (io.cpp) ----
// The default view: disp 0, MPI_BYTE, MPI_BYTE, "native".
view default_view();
// Builds a view; 0 or an error class with detail.
int make_view(MPI_Offset disp, MPI_Datatype etype, MPI_Datatype filetype, const char* datarep, view& out,
              std::string& detail);
// Calls fn(file_offset, n) for the file blocks holding bytes [pos, pos+len)
// of the view's data stream, in stream order (ascending offsets).
template <class Fn>
void for_each_file_block(const view& v, std::int64_t pos, std::int64_t len, Fn&& fn) {
  if (len <= 0) return;
  if (v.dense) {
    fn(v.disp + pos, len);
    return;
  }
  const std::int64_t k = pos / v.ftsize, r = pos % v.ftsize;
  const std::int64_t cnt = (r + len + v.ftsize - 1) / v.ftsize;
  const std::uintptr_t base = static_cast<std::uintptr_t>(v.disp + k * v.ftextent);
  v.filetype.for_each_block_range(reinterpret_cast<const void*>(base), cnt, r, len, [&](const void* p, std::size_t n) {
    fn(static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(p)), static_cast<std::int64_t>(n));
  });
}
// The etype offset of the end of the file's data in the view (the first
// etype at or past byte `file_size`).
MPI_Offset view_eof(const view& v, MPI_Offset file_size);
// Absolute byte offset of etype `offset` of the view.
MPI_Offset view_byte_offset(const view& v, MPI_Offset offset);

// A user buffer described for an access: count elements of type d at buf,
// `bytes` in the file's representation.
struct user_data {
  void* buf = nullptr;
  MPI_Count count = 0;                 // the _c bindings' counts too
  Datatype type;
  MPI_Datatype handle = MPI_BYTE;
  std::int64_t mem_bytes = 0;          // count * size (native packed)
  std::int64_t file_bytes = 0;         // the same in the view's representation
};
// Validates (count, datatype, buf) for an access through view v: 0 or an
// error class with detail (MPI_ERR_COUNT, MPI_ERR_TYPE, MPI_ERR_BUFFER,
// MPI_ERR_ARG for a size that is not a whole number of etypes).
int describe(const view& v, const void* buf, MPI_Count count, MPI_Datatype t, user_data& out, std::string& detail);

// Whether the user's data is the file stream itself (contiguous in memory,
// native representation): accessed in place, never staged.
bool direct_access(const view& v, const user_data& u);
// Stages the user's data as the file stream of a write: the bytes to
// write (a pointer into the user buffer when it is contiguous and native,
// else `stage`).
const std::byte* stage_for_write(const view& v, const user_data& u, std::vector<std::byte>& stage);
// Places `got` stream bytes read into `stage` (or directly in the user's
// buffer when it is contiguous and native) into the user's buffer; returns
// the user bytes filled (whole elements for external32).
std::byte* read_target(const view& v, const user_data& u, std::vector<std::byte>& stage);
std::int64_t finish_read(const view& v, const user_data& u, const std::byte* data, std::int64_t got);

// Independent access of u at stream byte position pos (the view's
// representation): locks in atomic mode, sieves sparse reads.
io_result access_independent(file_obj& f, const view& v, const hints& h, bool atomic, bool write, const user_data& u,
                             std::int64_t pos);
// Raw helpers: the whole range or an error (pread stops at end of file).
int pwrite_full(int fd, const std::byte* p, std::int64_t n, std::int64_t off, std::string& detail);
int pread_full(int fd, std::byte* p, std::int64_t n, std::int64_t off, std::int64_t& got, std::string& detail);

// Queues job on the background I/O thread; a generic request (handle in
// *request) completes when it has run. The job returns the io_result; the
// request's status counts its bytes, an error is raised on the file's
// handler by the completing call.
int start_async(const char* fn, const std::shared_ptr<file_obj>& f, std::function<io_result()> job,
                MPI_Request* request);
// Runs fn on the background I/O thread (FIFO with the queued independent
// operations); fn must not call the engine or MPI.
void post_io(std::function<void()> fn);
// Fills a status from a result (count in bytes).
void set_status(MPI_Status* s, std::int64_t bytes);
// Makes r a file request: done when ready() answers true, its status and
// error then read from *res (kept alive by `keep`), an error raised on f's
// handler under the name fn.
void arm_file_request(request_obj* r, file_obj& f, std::shared_ptr<void> keep, const char* fn,
                      std::function<bool()> ready, const io_result* res);
// Waits until f has no unfinished non-blocking operation (close, sync,
// set_view, set_atomicity), progressing its collective ones.
void drain(file_obj& f);

// ---- shared file pointer (io.cpp) ----
// Reads the shared pointer and adds delta under the lock; old value in
// *old. 0 or an error class with detail.
int shared_fetch_add(file_obj& f, MPI_Offset delta, MPI_Offset& old, std::string& detail);
int shared_set(file_obj& f, MPI_Offset value, std::string& detail);
// Removes the side file (rank 0 at close).
void shared_remove(file_obj& f);

// ---- collective access (twophase.cpp, twophase_progress.cpp) ----
// A collective access of u at stream position pos on every process of f
// (two-phase aggregation when some access is not contiguous in the file
// and the hints allow it; else each process accesses independently). The
// result is agreed: an error on any process fails all with its class.
struct collective_job;
// Starts one, taking the communicator's next collective sequence number
// (call it in the same order on every process, from the calling thread).
// check >= 0: this process's argument check (an MPI class), agreed first;
// a failure anywhere ends the job with it and nothing is accessed (the
// job then never touches u). background: registered with the progress
// task, file steps on the I/O thread (non-blocking and split forms); else
// the caller drives it with finish_collective, file steps inline.
std::shared_ptr<collective_job> start_collective(const char* fn, const std::shared_ptr<file_obj>& f, const view& v,
                                                 const hints& h, bool atomic, bool write, const user_data& u,
                                                 std::int64_t pos, int check, std::string check_detail,
                                                 bool background);
// Waits for the job (session wait policy) and returns its result.
io_result finish_collective(const std::shared_ptr<collective_job>& j);
// A generic request that completes with the job (MPI_Test/MPI_Wait advance it).
int collective_request(const std::shared_ptr<collective_job>& j, MPI_Request* request);
// One round over the background jobs (drain).
void progress_collectives();
// The background side (twophase_progress.cpp): register_job hands a job to
// the progress task, which advances it (advance_job: true once finished)
// until job_finished, then drops it.
void register_job(const std::shared_ptr<collective_job>& j);
bool advance_job(collective_job& j);
bool job_finished(const collective_job& j);

}  // namespace nmad::mpi::io
