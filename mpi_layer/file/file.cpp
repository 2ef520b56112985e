// MPI-IO (MPI-3.1 chapter 13), file manipulation: the file table, open and
// close, delete, size, preallocation, group, access mode, hints (info),
// atomicity, sync, error handlers, c2f/f2c. Views and data representations
// are in view.cpp, data access in access.cpp; the design in file_impl.hpp.
//
// Errors: a call on an open file raises on that file's error handler; a
// call with no file (MPI_File_open, MPI_File_delete, an invalid handle)
// on MPI_FILE_NULL's, which is MPI_ERRORS_RETURN until
// MPI_File_set_errhandler(MPI_FILE_NULL, ...) changes it (MPI-3.1 13.7); a
// newly opened file starts with MPI_FILE_NULL's handler of that moment.
// Collective calls agree on their outcome: when one process fails (its
// open is refused, its arguments differ), every process returns the class.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <functional>
#include <unordered_map>

#include "api/nmad/services/hw_levels.hpp"
#include "mpi_layer/datatype/external32.hpp"
#include "mpi_layer/file/file_impl.hpp"

namespace nmad::mpi::io {

namespace {

// The error handler of MPI_FILE_NULL (MPI-3.1 13.7: MPI_ERRORS_RETURN
// initially).
std::atomic<MPI_Errhandler> g_file_null_handler{MPI_ERRORS_RETURN};

struct file_table {
  std::mutex mu;
  std::unordered_map<MPI_File, std::shared_ptr<file_obj>> open;
  MPI_File next = 1;  // handles are not reused
  int opened = 0;     // for the shared file pointer's side file name
};
file_table& table() {
  static auto* t = new file_table();  // never destroyed (threads may still call at exit)
  return *t;
}

}  // namespace

std::shared_ptr<file_obj> lookup_file(MPI_File fh) {
  file_table& t = table();
  std::lock_guard g(t.mu);
  auto it = t.open.find(fh);
  return it == t.open.end() ? nullptr : it->second;
}

int raise_file(const char* fn, file_obj* f, int code, const std::string& detail) {
  if (!f) return mpi_raise_on(fn, g_file_null_handler.load(std::memory_order_acquire), MPI_FILE_NULL, code, detail);
  return mpi_raise_on(fn, f->errhandler.load(std::memory_order_acquire), f->handle, code, detail);
}

// Looks up an open file for fn: null after raising MPI_ERR_FILE (rc set).
std::shared_ptr<file_obj> need_file(const char* fn, MPI_File fh, int& rc) {
  rc = MPI_SUCCESS;
  if (!check_initialized(fn)) {
    rc = MPI_ERR_OTHER;
    return nullptr;
  }
  auto f = lookup_file(fh);
  if (!f)
    rc = raise_file(fn, nullptr, MPI_ERR_FILE,
                    fh == MPI_FILE_NULL ? std::string("MPI_FILE_NULL is not an open file")
                                        : "invalid file handle " + std::to_string(fh) + " (not open, or closed)");
  return f;
}

// The largest of every process's value (agreement on an error class).
int agree_max(MPI_Comm comm, int mine) {
  int all = mine;
  if (PMPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MAX, comm) != MPI_SUCCESS) return mine ? mine : MPI_ERR_OTHER;
  return all;
}

// Whether every process passed the same value.
bool same_everywhere(MPI_Comm comm, long long v) {
  long long in[2] = {v, -v}, out[2] = {v, -v};
  if (PMPI_Allreduce(in, out, 2, MPI_LONG_LONG, MPI_MAX, comm) != MPI_SUCCESS) return false;
  return out[0] == v && -out[1] == v;
}

// The checks MPI_File_set_size and MPI_File_preallocate share, collective:
// a non-negative size, a file that may change size, the same size on every
// process. Returns the code all processes agreed on (err and detail: this
// process's own finding).
int agree_on_size(const file_obj& f, MPI_Offset size, int& err, std::string& detail) {
  if (size < 0) {
    err = MPI_ERR_ARG;
    detail = "negative size " + std::to_string(size);
  } else if (f.amode & MPI_MODE_SEQUENTIAL) {
    err = MPI_ERR_UNSUPPORTED_OPERATION;
    detail = "file opened with MPI_MODE_SEQUENTIAL";
  } else if (f.amode & MPI_MODE_RDONLY) {
    err = MPI_ERR_READ_ONLY;
    detail = "file opened with MPI_MODE_RDONLY";
  }
  int all = agree_max(f.comm, err);
  if (all == MPI_SUCCESS && !same_everywhere(f.comm, size)) {
    all = err = MPI_ERR_NOT_SAME;
    detail = "the processes passed different sizes";
  }
  return all;
}

std::string other_failed(int cls) {
  return std::string("failed on another process of the communicator (") + error_name(cls) + ")";
}

namespace {

bool parse_int(const std::string& s, long long& out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return false;
  out = v;
  return true;
}


}  // namespace
// Takes the hints this implementation knows from info into h; values it
// cannot use are ignored (MPI-3.1 9: hints may be ignored).
void apply_hints(MPI_Info info, hints& h, int nprocs) {
  if (info == MPI_INFO_NULL) return;
  auto e = info_get_entries(info);
  if (!e) return;
  static const char* kKept[] = {"access_style", "collective_buffering", "file_perm",      "io_node_list",
                                "nb_proc",      "num_io_nodes",         "striping_factor", "striping_unit",
                                "cb_config_list", "romio_no_indep_rw",  "chunked",         "chunked_item",
                                "chunked_size", "filename"};
  for (const auto& [k, val] : *e) {
    long long n = 0;
    if (k == "cb_nodes") {
      if (parse_int(val, n) && n > 0) h.cb_nodes = static_cast<int>(std::min<long long>(n, nprocs));
    } else if (k == "cb_buffer_size") {
      if (parse_int(val, n) && n > 0 && n <= INT_MAX) h.cb_buffer_size = n;
    } else if (k == "ind_rd_buffer_size") {
      if (parse_int(val, n) && n > 0 && n <= INT_MAX) h.ind_rd_buffer_size = n;
    } else if (k == "ind_wr_buffer_size") {
      if (parse_int(val, n) && n > 0 && n <= INT_MAX) h.ind_wr_buffer_size = n;
    } else if (k == "romio_cb_read" || k == "romio_cb_write" || k == "romio_ds_read" || k == "romio_ds_write") {
      if (val != "enable" && val != "disable" && val != "automatic") continue;
      (k == "romio_cb_read" ? h.cb_read : k == "romio_cb_write" ? h.cb_write : k == "romio_ds_read" ? h.ds_read
                                                                                                   : h.ds_write) = val;
    } else if (std::find_if(std::begin(kKept), std::end(kKept), [&](const char* s) { return k == s; }) !=
               std::end(kKept)) {
      auto it = std::find_if(h.extra.begin(), h.extra.end(), [&](const auto& p) { return p.first == k; });
      if (it != h.extra.end())
        it->second = val;
      else
        h.extra.emplace_back(k, val);
    }
  }
}

namespace {

info_entries hint_entries(const hints& h) {
  info_entries e = {{"cb_buffer_size", std::to_string(h.cb_buffer_size)},
                    {"romio_cb_read", h.cb_read},
                    {"romio_cb_write", h.cb_write},
                    {"cb_nodes", std::to_string(h.cb_nodes)},
                    {"romio_ds_read", h.ds_read},
                    {"romio_ds_write", h.ds_write},
                    {"ind_rd_buffer_size", std::to_string(h.ind_rd_buffer_size)},
                    {"ind_wr_buffer_size", std::to_string(h.ind_wr_buffer_size)}};
  for (const auto& kv : h.extra) e.push_back(kv);
  return e;
}

// Access-mode rules of MPI-3.1 13.2.1: 0 or MPI_ERR_AMODE with detail.
int check_amode(int amode, std::string& detail) {
  const int known = MPI_MODE_CREATE | MPI_MODE_RDONLY | MPI_MODE_WRONLY | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE |
                    MPI_MODE_UNIQUE_OPEN | MPI_MODE_EXCL | MPI_MODE_APPEND | MPI_MODE_SEQUENTIAL;
  if (amode & ~known) {
    detail = "unknown bits in access mode " + std::to_string(amode);
    return MPI_ERR_AMODE;
  }
  const int rw = (amode & MPI_MODE_RDONLY ? 1 : 0) + (amode & MPI_MODE_WRONLY ? 1 : 0) + (amode & MPI_MODE_RDWR ? 1 : 0);
  if (rw != 1) {
    detail = "access mode " + std::to_string(amode) +
             " must contain exactly one of MPI_MODE_RDONLY, MPI_MODE_WRONLY, MPI_MODE_RDWR";
    return MPI_ERR_AMODE;
  }
  if ((amode & MPI_MODE_RDONLY) && (amode & (MPI_MODE_CREATE | MPI_MODE_EXCL))) {
    detail = "MPI_MODE_RDONLY with MPI_MODE_CREATE or MPI_MODE_EXCL";
    return MPI_ERR_AMODE;
  }
  if ((amode & MPI_MODE_RDWR) && (amode & MPI_MODE_SEQUENTIAL)) {
    detail = "MPI_MODE_RDWR with MPI_MODE_SEQUENTIAL";
    return MPI_ERR_AMODE;
  }
  return MPI_SUCCESS;
}

int posix_flags(int amode, bool creator) {
  int fl = O_CLOEXEC;
  fl |= (amode & MPI_MODE_RDONLY) ? O_RDONLY : (amode & MPI_MODE_WRONLY) ? O_WRONLY : O_RDWR;
  if (creator && (amode & MPI_MODE_CREATE)) fl |= O_CREAT;
  if (creator && (amode & MPI_MODE_EXCL)) fl |= O_EXCL;
  return fl;
}

mode_t create_mode(const hints& h) {
  for (const auto& [k, v] : h.extra)
    if (k == "file_perm") {
      char* end = nullptr;
      const long m = std::strtol(v.c_str(), &end, 8);
      if (*end == '\0' && m >= 0 && m <= 07777) return static_cast<mode_t>(m);
    }
  return 0666;
}

// Opens path; 0 or an error class (detail set). Refuses directories.
int open_posix(const std::string& path, int flags, mode_t mode, int& fd, std::string& detail) {
  fd = ::open(path.c_str(), flags, mode);
  if (fd < 0) {
    const int e = errno;
    detail = "open(\"" + path + "\"): " + std::strerror(e);
    return errno_class(e);
  }
  struct stat sb {};
  if (::fstat(fd, &sb) == 0 && S_ISDIR(sb.st_mode)) {
    ::close(fd);
    fd = -1;
    detail = "\"" + path + "\" is a directory";
    return MPI_ERR_BAD_FILE;
  }
  return MPI_SUCCESS;
}

std::string absolute(const std::string& p) {
  if (!p.empty() && p[0] == '/') return p;
  char cwd[PATH_MAX];
  if (!::getcwd(cwd, sizeof cwd)) return p;
  return std::string(cwd) + "/" + p;
}

// The ranks of comm in aggregator preference order, from the host
// identity and the topology module's placement of each process (its NUMA
// node, else its package): within a host, the first process of each NUMA
// node (nodes in order of their first rank), then the second of each, ...;
// across hosts, the first of every host's list, then the second of every
// host's, ... `ndomains` = the (host, NUMA node) pairs that hold processes:
// the default cb_nodes, one aggregator next to each memory. Processes
// whose binding spans nodes (or is unknown) form one domain of their host.
std::vector<int> aggregator_order(MPI_Comm comm, int size, int& ndomains) {
  std::string id, detail;
  if (!host_identity(id, detail)) id = "?";
  int package = nmad::topology::hw_spans, numa = nmad::topology::hw_spans;
  if (!hw_locate_self(package, numa, detail)) package = numa = nmad::topology::hw_spans;
  const int domain = numa >= 0 ? numa : (package >= 0 ? 1 << 20 | package : -1);
  unsigned long long mine[2] = {std::hash<std::string>{}(id), static_cast<unsigned long long>(domain)};
  std::vector<unsigned long long> all(2 * static_cast<std::size_t>(size));
  all[0] = mine[0];
  all[1] = mine[1];
  if (size > 1) PMPI_Allgather(mine, 2, MPI_UNSIGNED_LONG_LONG, all.data(), 2, MPI_UNSIGNED_LONG_LONG, comm);
  // hosts[h] = its domains in order of first rank, each with its ranks.
  struct dom {
    unsigned long long key;
    std::vector<int> ranks;
  };
  std::vector<unsigned long long> host_keys;
  std::vector<std::vector<dom>> hosts;
  ndomains = 0;
  for (int r = 0; r < size; ++r) {
    const unsigned long long hk = all[2 * static_cast<std::size_t>(r)], dk = all[2 * static_cast<std::size_t>(r) + 1];
    auto h = std::find(host_keys.begin(), host_keys.end(), hk);
    if (h == host_keys.end()) {
      host_keys.push_back(hk);
      hosts.emplace_back();
      h = host_keys.end() - 1;
    }
    auto& doms = hosts[static_cast<std::size_t>(h - host_keys.begin())];
    auto d = std::find_if(doms.begin(), doms.end(), [&](const dom& x) { return x.key == dk; });
    if (d == doms.end()) {
      doms.push_back({dk, {}});
      d = doms.end() - 1;
      ++ndomains;
    }
    d->ranks.push_back(r);
  }
  // Each host's list: round robin over its domains.
  std::vector<std::vector<int>> per_host(hosts.size());
  for (std::size_t h = 0; h < hosts.size(); ++h) {
    std::size_t deepest = 0;
    for (const dom& d : hosts[h]) deepest = std::max(deepest, d.ranks.size());
    for (std::size_t k = 0; k < deepest; ++k)
      for (const dom& d : hosts[h])
        if (k < d.ranks.size()) per_host[h].push_back(d.ranks[k]);
  }
  std::vector<int> order;
  for (std::size_t k = 0; order.size() < static_cast<std::size_t>(size); ++k)
    for (const auto& h : per_host)
      if (k < h.size()) order.push_back(h[k]);
  return order;
}

std::int64_t file_size_of(int fd, int& err, std::string& detail) {
  struct stat sb {};
  if (::fstat(fd, &sb) != 0) {
    const int e = errno;
    err = errno_class(e);
    detail = std::string("fstat: ") + std::strerror(e);
    return 0;
  }
  err = MPI_SUCCESS;
  return sb.st_size;
}

}  // namespace

}  // namespace nmad::mpi::io

using namespace nmad::mpi;
using namespace nmad::mpi::io;

extern "C" {

int PMPI_File_open(MPI_Comm comm, const char* filename, int amode, MPI_Info info, MPI_File* fh) {
  const char* fn = "MPI_File_open";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (!fh) return raise_file(fn, nullptr, MPI_ERR_ARG, "null file handle pointer");
  *fh = MPI_FILE_NULL;
  comm_obj* c = lookup_comm(comm);
  if (!c) return raise_file(fn, nullptr, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm));
  if (c->inter) return raise_file(fn, nullptr, MPI_ERR_COMM, "MPI_File_open needs an intracommunicator");
  if (info != MPI_INFO_NULL && !info_get_entries(info))
    return raise_file(fn, nullptr, MPI_ERR_INFO, "invalid info " + std::to_string(info));

  auto f = std::make_shared<file_obj>();
  if (int e = PMPI_Comm_dup(comm, &f->comm)) return raise_file(fn, nullptr, e, "duplicating the communicator failed");
  PMPI_Comm_set_errhandler(f->comm, MPI_ERRORS_RETURN);
  PMPI_Comm_rank(f->comm, &f->rank);
  PMPI_Comm_size(f->comm, &f->size);
  auto fail = [&](int cls, const std::string& detail) {
    if (f->fd >= 0) ::close(f->fd);
    PMPI_Comm_free(&f->comm);
    return raise_file(fn, nullptr, cls, detail);
  };

  // Arguments, and that every process passed the same ones.
  std::string detail;
  int err = MPI_SUCCESS;
  if (!filename) {
    err = MPI_ERR_BAD_FILE;
    detail = "null file name";
  } else if (!*filename) {
    err = MPI_ERR_BAD_FILE;
    detail = "empty file name";
  } else {
    err = check_amode(amode, detail);
  }
  const int all_err = agree_max(f->comm, err);
  if (all_err != MPI_SUCCESS) return fail(all_err, err ? detail : other_failed(all_err));
  if (!same_everywhere(f->comm, amode))
    return fail(MPI_ERR_NOT_SAME, "the processes passed different access modes");
  const std::string name = filename;
  if (!same_everywhere(f->comm, static_cast<long long>(std::hash<std::string>{}(name) >> 2)))
    return fail(MPI_ERR_NOT_SAME, "the processes passed different file names");

  f->filename = name;
  f->path = absolute(name);
  f->amode = amode;
  f->v = default_view();
  // Default cb_nodes: one aggregator per NUMA node holding processes, on
  // every host (the topology module's placement).
  f->aggregator_order = aggregator_order(f->comm, f->size, f->h.cb_nodes);
  apply_hints(info, f->h, f->size);

  // Process 0 creates the file (MPI_MODE_CREATE, MPI_MODE_EXCL), then the
  // others open it.
  const mode_t perm = create_mode(f->h);
  // A write-only file is opened for reading too where the system allows
  // it: collective writes that leave holes read the window they rewrite.
  // MPI_MODE_WRONLY is still enforced on every access.
  auto open_mode = [&](bool creator) {
    if (amode & MPI_MODE_WRONLY) {
      const int e = open_posix(name, (posix_flags(amode, creator) & ~O_WRONLY) | O_RDWR, perm, f->fd, detail);
      if (e != MPI_ERR_ACCESS && e != MPI_ERR_READ_ONLY) return e;
    }
    return open_posix(name, posix_flags(amode, creator), perm, f->fd, detail);
  };
  if (f->rank == 0) err = open_mode(true);
  int root_err = err;
  PMPI_Bcast(&root_err, 1, MPI_INT, 0, f->comm);
  if (root_err != MPI_SUCCESS) return fail(root_err, f->rank == 0 ? detail
                                                    : std::string("process 0 could not open or create the file (") +
                                                          error_name(root_err) + ")");
  if (f->rank != 0) err = open_mode(false);
  const int open_err = agree_max(f->comm, err);
  if (open_err != MPI_SUCCESS) return fail(open_err, err ? detail : other_failed(open_err));

  // The shared file pointer's side file: named by process 0 (its pid and
  // an open counter), created on first use.
  long long ids[2] = {static_cast<long long>(::getpid()), 0};
  {
    file_table& t = table();
    std::lock_guard g(t.mu);
    ids[1] = t.opened++;
  }
  PMPI_Bcast(ids, 2, MPI_LONG_LONG, 0, f->comm);
  {
    const auto slash = f->path.rfind('/');
    const std::string dir = f->path.substr(0, slash + 1), base = f->path.substr(slash + 1);
    f->shared_path = dir + "." + base + ".nmad-shfp." + std::to_string(ids[0]) + "." + std::to_string(ids[1]);
  }
  if (amode & MPI_MODE_APPEND) {
    // Both pointers start at the end of the file (the default view counts
    // bytes from 0).
    int e = MPI_SUCCESS;
    std::string d;
    const std::int64_t size = file_size_of(f->fd, e, d);
    f->pointer = size;
    int se = MPI_SUCCESS;
    if (f->rank == 0 && size > 0) se = shared_set(*f, size, d);
    se = agree_max(f->comm, se);
    if (se != MPI_SUCCESS) return fail(se, d.empty() ? other_failed(se) : d);
  }
  f->errhandler.store(g_file_null_handler.load(std::memory_order_acquire), std::memory_order_release);
  {
    file_table& t = table();
    std::lock_guard g(t.mu);
    f->handle = t.next++;
    t.open[f->handle] = f;
  }
  *fh = f->handle;
  return MPI_SUCCESS;
}

int PMPI_File_close(MPI_File* fh) {
  const char* fn = "MPI_File_close";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (!fh) return raise_file(fn, nullptr, MPI_ERR_ARG, "null file pointer");
  int rc = MPI_SUCCESS;
  auto f = need_file(fn, *fh, rc);
  if (!f) return rc;
  drain(*f);
  {
    std::lock_guard g(table().mu);
    table().open.erase(f->handle);
  }
  {
    std::lock_guard g(f->shared_mu);
    if (f->shared_fd >= 0) ::close(f->shared_fd);
    f->shared_fd = -1;
  }
  int err = MPI_SUCCESS;
  std::string detail;
  if (::close(f->fd) != 0) {
    const int e = errno;
    err = errno_class(e);
    detail = std::string("close: ") + std::strerror(e);
  }
  f->fd = -1;
  PMPI_Barrier(f->comm);  // every process has closed before the files go
  if (f->rank == 0) {
    shared_remove(*f);
    if ((f->amode & MPI_MODE_DELETE_ON_CLOSE) && ::unlink(f->path.c_str()) != 0 && err == MPI_SUCCESS) {
      const int e = errno;
      err = errno_class(e);
      detail = "MPI_MODE_DELETE_ON_CLOSE: unlink(\"" + f->path + "\"): " + std::strerror(e);
    }
  }
  const int all = agree_max(f->comm, err);
  PMPI_Comm_free(&f->comm);
  *fh = MPI_FILE_NULL;
  if (all != MPI_SUCCESS) return raise_file(fn, f.get(), all, err ? detail : other_failed(all));
  return MPI_SUCCESS;
}

int PMPI_File_delete(const char* filename, MPI_Info info) {
  const char* fn = "MPI_File_delete";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (!filename || !*filename) return raise_file(fn, nullptr, MPI_ERR_BAD_FILE, "null or empty file name");
  if (info != MPI_INFO_NULL && !info_get_entries(info))
    return raise_file(fn, nullptr, MPI_ERR_INFO, "invalid info " + std::to_string(info));
  if (::unlink(filename) != 0) {
    const int e = errno;
    return raise_file(fn, nullptr, errno_class(e), "unlink(\"" + std::string(filename) + "\"): " + std::strerror(e));
  }
  return MPI_SUCCESS;
}

int PMPI_File_set_size(MPI_File fh, MPI_Offset size) {
  const char* fn = "MPI_File_set_size";
  int rc;
  auto f = need_file(fn, fh, rc);
  if (!f) return rc;
  int err = MPI_SUCCESS;
  std::string detail;
  int all = agree_on_size(*f, size, err, detail);
  if (all == MPI_SUCCESS) {
    drain(*f);
    if (f->rank == 0 && ::ftruncate(f->fd, size) != 0) {
      const int e = errno;
      err = errno_class(e);
      detail = "ftruncate to " + std::to_string(size) + ": " + std::strerror(e);
    }
    all = agree_max(f->comm, err);
  }
  if (all != MPI_SUCCESS) return raise_file(fn, f.get(), all, err ? detail : other_failed(all));
  return MPI_SUCCESS;
}

int PMPI_File_preallocate(MPI_File fh, MPI_Offset size) {
  const char* fn = "MPI_File_preallocate";
  int rc;
  auto f = need_file(fn, fh, rc);
  if (!f) return rc;
  int err = MPI_SUCCESS;
  std::string detail;
  int all = agree_on_size(*f, size, err, detail);
  if (all == MPI_SUCCESS) {
    if (f->rank == 0 && size > 0) {
      // Allocates blocks for [0, size); never shrinks the file.
      const int e = ::posix_fallocate(f->fd, 0, size);
      if (e != 0) {
        err = errno_class(e);
        detail = "posix_fallocate of " + std::to_string(size) + " bytes: " + std::strerror(e);
      }
    }
    all = agree_max(f->comm, err);
  }
  if (all != MPI_SUCCESS) return raise_file(fn, f.get(), all, err ? detail : other_failed(all));
  return MPI_SUCCESS;
}

int PMPI_File_get_size(MPI_File fh, MPI_Offset* size) {
  const char* fn = "MPI_File_get_size";
  int rc;
  auto f = need_file(fn, fh, rc);
  if (!f) return rc;
  if (!size) return raise_file(fn, f.get(), MPI_ERR_ARG, "null size pointer");
  int err;
  std::string detail;
  const std::int64_t s = file_size_of(f->fd, err, detail);
  if (err) return raise_file(fn, f.get(), err, detail);
  *size = s;
  return MPI_SUCCESS;
}

int PMPI_File_get_group(MPI_File fh, MPI_Group* group) {
  const char* fn = "MPI_File_get_group";
  if (group) *group = MPI_GROUP_NULL;
  int rc;
  auto f = need_file(fn, fh, rc);
  if (!f) return rc;
  if (!group) return raise_file(fn, f.get(), MPI_ERR_ARG, "null group pointer");
  return PMPI_Comm_group(f->comm, group);
}

int PMPI_File_get_amode(MPI_File fh, int* amode) {
  const char* fn = "MPI_File_get_amode";
  int rc;
  auto f = need_file(fn, fh, rc);
  if (!f) return rc;
  if (!amode) return raise_file(fn, f.get(), MPI_ERR_ARG, "null amode pointer");
  *amode = f->amode;
  return MPI_SUCCESS;
}

int PMPI_File_set_info(MPI_File fh, MPI_Info info) {
  const char* fn = "MPI_File_set_info";
  int rc;
  auto f = need_file(fn, fh, rc);
  if (!f) return rc;
  if (info != MPI_INFO_NULL && !info_get_entries(info))
    return raise_file(fn, f.get(), MPI_ERR_INFO, "invalid info " + std::to_string(info));
  std::lock_guard g(f->mu);
  apply_hints(info, f->h, f->size);
  return MPI_SUCCESS;
}

int PMPI_File_get_info(MPI_File fh, MPI_Info* info_used) {
  const char* fn = "MPI_File_get_info";
  if (info_used) *info_used = MPI_INFO_NULL;
  int rc;
  auto f = need_file(fn, fh, rc);
  if (!f) return rc;
  if (!info_used) return raise_file(fn, f.get(), MPI_ERR_ARG, "null info pointer");
  info_entries e;
  {
    std::lock_guard g(f->mu);
    e = hint_entries(f->h);
    // The ranks (in the file's communicator) that aggregate collective
    // accesses, in file-domain order: reported, not settable.
    std::string aggs;
    const int n = std::clamp(f->h.cb_nodes, 1, f->size);
    for (int a = 0; a < n; ++a)
      aggs += (a ? "," : "") + std::to_string(f->aggregator_order[static_cast<std::size_t>(a)]);
    e.emplace_back("nmad_aggregators", std::move(aggs));
  }
  *info_used = new_info(std::move(e));
  return MPI_SUCCESS;
}

int PMPI_File_set_atomicity(MPI_File fh, int flag) {
  const char* fn = "MPI_File_set_atomicity";
  int rc;
  auto f = need_file(fn, fh, rc);
  if (!f) return rc;
  if (!same_everywhere(f->comm, flag ? 1 : 0))
    return raise_file(fn, f.get(), MPI_ERR_NOT_SAME, "the processes passed different atomicity flags");
  drain(*f);
  std::lock_guard g(f->mu);
  f->atomic = flag != 0;
  return MPI_SUCCESS;
}

int PMPI_File_get_atomicity(MPI_File fh, int* flag) {
  const char* fn = "MPI_File_get_atomicity";
  int rc;
  auto f = need_file(fn, fh, rc);
  if (!f) return rc;
  if (!flag) return raise_file(fn, f.get(), MPI_ERR_ARG, "null flag pointer");
  std::lock_guard g(f->mu);
  *flag = f->atomic ? 1 : 0;
  return MPI_SUCCESS;
}

int PMPI_File_sync(MPI_File fh) {
  const char* fn = "MPI_File_sync";
  int rc;
  auto f = need_file(fn, fh, rc);
  if (!f) return rc;
  drain(*f);
  int err = MPI_SUCCESS;
  std::string detail;
  if (::fsync(f->fd) != 0 && errno != EINVAL && errno != EROFS) {  // EINVAL/EROFS: a file that cannot be synced (a device)
    const int e = errno;
    err = errno_class(e);
    detail = std::string("fsync: ") + std::strerror(e);
  }
  const int all = agree_max(f->comm, err);
  if (all != MPI_SUCCESS) return raise_file(fn, f.get(), all, err ? detail : other_failed(all));
  return MPI_SUCCESS;
}

// ---- error handlers ----
int PMPI_File_create_errhandler(MPI_File_errhandler_function* fn, MPI_Errhandler* errhandler) {
  const char* name = "MPI_File_create_errhandler";
  if (!check_initialized(name)) return MPI_ERR_OTHER;
  if (!fn || !errhandler) return raise_file(name, nullptr, MPI_ERR_ARG, "null function or errhandler pointer");
  // Same calling convention as a communicator handler (a pointer to an
  // int handle, a pointer to the code): one table holds both.
  return PMPI_Comm_create_errhandler(reinterpret_cast<MPI_Comm_errhandler_function*>(fn), errhandler);
}

int PMPI_File_set_errhandler(MPI_File file, MPI_Errhandler errhandler) {
  const char* fn = "MPI_File_set_errhandler";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  std::shared_ptr<file_obj> f;
  if (file != MPI_FILE_NULL) {
    int rc;
    f = need_file(fn, file, rc);
    if (!f) return rc;
  }
  if (!valid_errhandler(errhandler))
    return raise_file(fn, f.get(), MPI_ERR_ARG, "invalid error handler " + std::to_string(errhandler));
  (f ? f->errhandler : g_file_null_handler).store(errhandler, std::memory_order_release);
  return MPI_SUCCESS;
}

int PMPI_File_get_errhandler(MPI_File file, MPI_Errhandler* errhandler) {
  const char* fn = "MPI_File_get_errhandler";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  std::shared_ptr<file_obj> f;
  if (file != MPI_FILE_NULL) {
    int rc;
    f = need_file(fn, file, rc);
    if (!f) {
      if (errhandler) *errhandler = MPI_ERRHANDLER_NULL;
      return rc;
    }
  }
  if (!errhandler) return raise_file(fn, f.get(), MPI_ERR_ARG, "null errhandler pointer");
  *errhandler = (f ? f->errhandler : g_file_null_handler).load(std::memory_order_acquire);
  return MPI_SUCCESS;
}

int PMPI_File_call_errhandler(MPI_File fh, int errorcode) {
  const char* fn = "MPI_File_call_errhandler";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  std::shared_ptr<file_obj> f;
  if (fh != MPI_FILE_NULL) {
    int rc;
    f = need_file(fn, fh, rc);
    if (!f) return rc;
  }
  raise_file(fn, f.get(), errorcode, {});
  return MPI_SUCCESS;  // MPI-3.1 8.3.6: success if the handler was called
}

MPI_Fint PMPI_File_c2f(MPI_File file) { return file; }
MPI_File PMPI_File_f2c(MPI_Fint file) { return file; }

}  // extern "C"

#pragma weak MPI_File_open = PMPI_File_open
#pragma weak MPI_File_close = PMPI_File_close
#pragma weak MPI_File_delete = PMPI_File_delete
#pragma weak MPI_File_set_size = PMPI_File_set_size
#pragma weak MPI_File_preallocate = PMPI_File_preallocate
#pragma weak MPI_File_get_size = PMPI_File_get_size
#pragma weak MPI_File_get_group = PMPI_File_get_group
#pragma weak MPI_File_get_amode = PMPI_File_get_amode
#pragma weak MPI_File_set_info = PMPI_File_set_info
#pragma weak MPI_File_get_info = PMPI_File_get_info
#pragma weak MPI_File_set_atomicity = PMPI_File_set_atomicity
#pragma weak MPI_File_get_atomicity = PMPI_File_get_atomicity
#pragma weak MPI_File_sync = PMPI_File_sync
#pragma weak MPI_File_create_errhandler = PMPI_File_create_errhandler
#pragma weak MPI_File_set_errhandler = PMPI_File_set_errhandler
#pragma weak MPI_File_get_errhandler = PMPI_File_get_errhandler
#pragma weak MPI_File_call_errhandler = PMPI_File_call_errhandler
#pragma weak MPI_File_c2f = PMPI_File_c2f
#pragma weak MPI_File_f2c = PMPI_File_f2c
