// Windows: the table, creation of every flavour (create, allocate,
// allocate_shared, dynamic with attach/detach), MPI_Win_free, shared
// queries, groups, names, info, error handlers and the predefined
// attributes. How the parts fit together is at the top of rma.hpp.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>

#include "api/nmad/services/config.hpp"
#include "api/nmad/services/shm_segment.hpp"
#include "mpi_layer/coll/bindings.hpp"
#include "mpi_layer/rma/rma.hpp"

namespace nmad::mpi::rma {

namespace {

struct win_table {
  std::mutex mu;
  std::map<MPI_Win, std::shared_ptr<window>> live;
  MPI_Win next = 1;
};
win_table& table() {
  static win_table* t = new win_table();
  return *t;
}

// The predefined attribute values handed out by MPI_Win_get_attr (a
// pointer to them, as MPI returns for MPI_WIN_SIZE and friends).
struct attr_values {
  void* base = nullptr;
  MPI_Aint size = 0;
  int disp_unit = 1;
  int flavor = 0;
  int model = MPI_WIN_UNIFIED;
};
std::mutex g_values_mu;
std::map<MPI_Win, std::unique_ptr<attr_values>>& values() {
  static auto* m = new std::map<MPI_Win, std::unique_ptr<attr_values>>();
  return *m;
}

bool knob_direct() {
  static const bool on = [] {
    try {
      return nmad::config::word("NMAD_RMA_SHM") != "off";
    } catch (const std::exception&) {
      return true;
    }
  }();
  return on;
}

std::string seg_name() {
  static unsigned counter = 0;
  char prefix[32];
  std::snprintf(prefix, sizeof prefix, "nmad-%08x-", static_cast<unsigned>(::geteuid()) * 2654435761u);
  return shm::unique_name(prefix, "win", counter);
}

std::size_t round_up(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }

// The segment of a direct window: rank 0 creates it, broadcasts its name,
// every rank maps it and says so; all or none use it. Returns MPI_SUCCESS
// and w.direct set, or MPI_SUCCESS with w.direct false (the message path
// serves), or an error of the exchange.
int map_segment(window& w, const std::vector<MPI_Aint>& sizes, bool required, std::string& detail) {
  std::size_t data = 0;
  for (MPI_Aint s : sizes) data += static_cast<std::size_t>(s);
  const std::size_t ctl = round_up(sizeof(std::uint64_t) + sizeof(control_line) * static_cast<std::size_t>(w.size), 4096);
  const std::size_t total = ctl + round_up(std::max<std::size_t>(data, 1), 4096);
  char name[96] = {};
  shm::locked_segment seg;
  std::string why;
  if (w.rank == 0) {
    const std::string nm = seg_name();
    seg = shm::create_locked(nm, total, false, why);
    if (seg.base) std::snprintf(name, sizeof name, "%s", nm.c_str());
  }
  if (int e = PMPI_Bcast(name, sizeof name, MPI_CHAR, 0, w.comm)) {
    detail = "window set-up: broadcasting the segment's name failed";
    return e;
  }
  void* p = seg.base;
  if (w.rank != 0 && name[0]) {
    const int fd = ::shm_open(name, O_RDWR | O_CLOEXEC, 0);
    if (fd >= 0) {
      void* m = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      ::close(fd);
      if (m != MAP_FAILED) p = m;
    }
  }
  int ok = p ? 1 : 0, all = 0;
  if (int e = PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, w.comm)) {
    detail = "window set-up: agreeing on the segment failed";
    return e;
  }
  if (w.rank == 0 && name[0]) {
    ::shm_unlink(name);
    ::close(seg.lock_fd);
  }
  if (!all) {
    if (p) ::munmap(p, total);
    if (required) {
      detail = "the shared-memory segment of the window could not be created or mapped" +
               (why.empty() ? std::string() : " (" + why + ")");
      return MPI_ERR_NO_MEM;
    }
    return MPI_SUCCESS;
  }
  w.segment = p;
  w.segment_bytes = total;
  w.lines = reinterpret_cast<control_line*>(static_cast<std::byte*>(p) + 64);
  if (w.rank == 0)
    for (int r = 0; r < w.size; ++r) ::new (&w.lines[r]) control_line;
  std::byte* at = static_cast<std::byte*>(p) + ctl;
  w.mapped.resize(static_cast<std::size_t>(w.size));
  for (int r = 0; r < w.size; ++r) {
    w.mapped[static_cast<std::size_t>(r)] = at;
    at += sizes[static_cast<std::size_t>(r)];
  }
  w.direct = true;
  // Everyone's control lines are initialised before anyone uses them.
  if (int e = PMPI_Barrier(w.comm)) {
    detail = "window set-up: barrier failed";
    return e;
  }
  return MPI_SUCCESS;
}

// The common part of every constructor. mem: the memory for create (user)
// or null; alloc: allocate it (allocate, shared).
int make_window(const char* fn, MPI_Comm comm, flavor fl, void* mem, MPI_Aint size, MPI_Aint disp_unit,
                MPI_Info info, void* baseptr, MPI_Win* win) {
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (win) *win = MPI_WIN_NULL;
  comm_obj* c = lookup_comm(comm);
  if (!c) return mpi_raise(fn, nullptr, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm));
  if (c->inter) return mpi_raise(fn, c, MPI_ERR_COMM, "windows are made on intracommunicators");
  if (!win) return mpi_raise(fn, c, MPI_ERR_ARG, "null window pointer");
  if ((fl == flavor::allocate || fl == flavor::shared) && !baseptr)
    return mpi_raise(fn, c, MPI_ERR_ARG, "null baseptr");
  if (size < 0) return mpi_raise(fn, c, MPI_ERR_SIZE, "negative window size " + std::to_string(size));
  if (disp_unit <= 0 || disp_unit > INT32_MAX)
    return mpi_raise(fn, c, MPI_ERR_DISP, "displacement unit " + std::to_string(disp_unit) + " is not positive");
  if (fl == flavor::create && size > 0 && !mem)
    return mpi_raise(fn, c, MPI_ERR_BASE, "null base for a window of " + std::to_string(size) + " bytes");
  info_entries hints;
  if (info != MPI_INFO_NULL) {
    auto e = info_get_entries(info);
    if (!e) return mpi_raise(fn, c, MPI_ERR_INFO, "invalid info " + std::to_string(info));
    hints = *e;
  }
  if (fl == flavor::shared && !comm_on_one_host(*c) && c->size() > 1)
    return mpi_raise(fn, c, MPI_ERR_RMA_SHARED, "the communicator's processes are not all on one host");

  auto w = std::make_shared<window>();
  w->fl = fl;
  w->disp_unit = static_cast<int>(disp_unit);
  w->bytes = size;
  w->info = hints;
  if (int e = PMPI_Comm_split(comm, 0, c->rank, &w->comm))
    return mpi_raise(fn, c, e, "making the window's private communicator failed");
  PMPI_Comm_set_errhandler(w->comm, MPI_ERRORS_RETURN);
  w->c = lookup_comm(w->comm);
  w->rank = w->c->rank;
  w->size = w->c->size();
  const auto n = static_cast<std::size_t>(w->size);

  struct entry {
    std::uint64_t base;
    std::int64_t size;
    std::int64_t disp_unit;
  };
  // Sizes first (a shared window needs them all to lay the segment out).
  entry mine{0, size, disp_unit};
  std::vector<entry> all(n);
  if (int e = PMPI_Allgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, w->comm)) {
    PMPI_Comm_free(&w->comm);
    return mpi_raise(fn, c, e, "exchanging the window's sizes failed");
  }
  std::vector<MPI_Aint> sizes(n);
  for (std::size_t i = 0; i < n; ++i) sizes[i] = static_cast<MPI_Aint>(all[i].size);

  std::string detail;
  const nmad::session* s = st().session.get();
  const bool shm_gates = w->size == 1 || (s && s->driver_name().find("shm") != std::string::npos);
  if (fl == flavor::shared || (fl == flavor::allocate && knob_direct() && shm_gates && comm_on_one_host(*c))) {
    if (int e = map_segment(*w, sizes, fl == flavor::shared, detail)) {
      PMPI_Comm_free(&w->comm);
      return mpi_raise(fn, c, e, detail);
    }
  }
  if (w->direct) {
    w->base = size > 0 ? w->mapped[static_cast<std::size_t>(w->rank)] : nullptr;
  } else if (fl == flavor::allocate) {
    if (size > 0) {
      w->base = ::operator new(static_cast<std::size_t>(size), std::align_val_t{64}, std::nothrow);
      if (!w->base) {
        PMPI_Comm_free(&w->comm);
        return mpi_raise(fn, c, MPI_ERR_NO_MEM, "cannot allocate " + std::to_string(size) + " bytes");
      }
      std::memset(w->base, 0, static_cast<std::size_t>(size));
      w->own_memory = true;
    }
  } else if (fl == flavor::create) {
    w->base = mem;
  }
  if (baseptr) *static_cast<void**>(baseptr) = w->base;

  mine.base = reinterpret_cast<std::uintptr_t>(w->base);
  if (int e = PMPI_Allgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, w->comm)) {
    PMPI_Comm_free(&w->comm);
    return mpi_raise(fn, c, e, "exchanging the window's addresses failed");
  }
  w->bases.resize(n);
  w->sizes = sizes;
  w->disp_units.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    w->bases[i] = all[i].base;
    w->disp_units[i] = static_cast<int>(all[i].disp_unit);
  }
  w->lock_type.assign(n, 0);
  w->lock_sent.assign(n, false);
  w->sent.assign(n, 0);
  w->unflushed.assign(n, 0);
  w->target_error.assign(n, MPI_SUCCESS);
  {
    win_table& t = table();
    std::lock_guard g(t.mu);
    w->handle = t.next++;
    t.live[w->handle] = w;
  }
  {
    std::lock_guard g(g_values_mu);
    auto v = std::make_unique<attr_values>();
    v->base = w->base;
    v->size = size;
    v->disp_unit = w->disp_unit;
    v->flavor = static_cast<int>(fl);
    values()[w->handle] = std::move(v);
  }
  agent_add(w);
  *win = w->handle;
  return MPI_SUCCESS;
}

int win_free(MPI_Win* win) {
  const char* fn = "MPI_Win_free";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (!win) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null window pointer");
  int rc = MPI_SUCCESS;
  auto w = need_window(fn, *win, rc);
  if (!w) return rc;
  {
    std::lock_guard g(w->mu);
    if (w->access_pscw || w->exposure_pscw || w->lock_all ||
        std::any_of(w->lock_type.begin(), w->lock_type.end(), [](int t) { return t != 0; }))
      return raise_win(fn, w.get(), MPI_ERR_RMA_SYNC, "an access or exposure epoch is still open on the window");
  }
  // Every member is done with its epochs once all are here; then the
  // operations of this process still leaving end, and nobody addresses
  // the window any more.
  PMPI_Barrier(w->comm);
  std::string detail;
  wait_for(*w, {}, [&] { return w->inflight.empty(); }, detail);
  std::string attr_detail;
  if (int e = delete_win_attrs(w->handle, attr_detail)) return raise_win(fn, w.get(), e, attr_detail);
  agent_remove(*w);
  PMPI_Barrier(w->comm);
  {
    win_table& t = table();
    std::lock_guard g(t.mu);
    t.live.erase(w->handle);
  }
  {
    std::lock_guard g(g_values_mu);
    values().erase(w->handle);
  }
  if (w->segment) ::munmap(w->segment, w->segment_bytes);
  if (w->own_memory) ::operator delete(w->base, std::align_val_t{64});
  PMPI_Comm_free(&w->comm);
  *win = MPI_WIN_NULL;
  return MPI_SUCCESS;
}

}  // namespace

std::shared_ptr<window> lookup_window(MPI_Win w) {
  win_table& t = table();
  std::lock_guard g(t.mu);
  auto it = t.live.find(w);
  return it == t.live.end() ? nullptr : it->second;
}

std::shared_ptr<window> need_window(const char* fn, MPI_Win w, int& rc) {
  if (!check_initialized(fn)) {
    rc = MPI_ERR_OTHER;
    return nullptr;
  }
  auto p = lookup_window(w);
  if (!p)
    rc = mpi_raise(fn, nullptr, MPI_ERR_WIN,
                   w == MPI_WIN_NULL ? std::string("MPI_WIN_NULL") : "invalid window " + std::to_string(w));
  return p;
}

int raise_win(const char* fn, window* w, int code, const std::string& detail) {
  if (!w) return mpi_raise(fn, nullptr, code, detail);
  return mpi_raise_on(fn, w->errhandler.load(std::memory_order_acquire), w->handle, code, detail);
}

bool predefined_win_attr(MPI_Win w, int keyval, void** value_out) {
  if (keyval < MPI_WIN_BASE || keyval > MPI_WIN_MODEL) return false;
  std::lock_guard g(g_values_mu);
  auto it = values().find(w);
  if (it == values().end()) return false;
  attr_values& v = *it->second;
  switch (keyval) {
    case MPI_WIN_BASE: *value_out = v.base; break;  // the base itself (MPI: a void*)
    case MPI_WIN_SIZE: *value_out = &v.size; break;
    case MPI_WIN_DISP_UNIT: *value_out = &v.disp_unit; break;
    case MPI_WIN_CREATE_FLAVOR: *value_out = &v.flavor; break;
    default: *value_out = &v.model; break;
  }
  return true;
}

}  // namespace nmad::mpi::rma

using namespace nmad::mpi;
using namespace nmad::mpi::rma;

extern "C" {

int nmad_mpi_win_null_copy_fn(MPI_Win, int, void*, void*, void*, int* flag) {
  if (flag) *flag = 0;
  return MPI_SUCCESS;
}
int nmad_mpi_win_dup_fn(MPI_Win, int, void*, void* in, void* out, int* flag) {
  if (out) *static_cast<void**>(out) = in;
  if (flag) *flag = 1;
  return MPI_SUCCESS;
}
int nmad_mpi_win_null_delete_fn(MPI_Win, int, void*, void*) { return MPI_SUCCESS; }

int PMPI_Win_create(void* base, MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, MPI_Win* win) {
  return make_window("MPI_Win_create", comm, flavor::create, base, size, disp_unit, info, nullptr, win);
}
int PMPI_Win_create_c(void* base, MPI_Aint size, MPI_Aint disp_unit, MPI_Info info, MPI_Comm comm, MPI_Win* win) {
  return make_window("MPI_Win_create_c", comm, flavor::create, base, size, disp_unit, info, nullptr, win);
}
int PMPI_Win_allocate(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void* baseptr, MPI_Win* win) {
  return make_window("MPI_Win_allocate", comm, flavor::allocate, nullptr, size, disp_unit, info, baseptr, win);
}
int PMPI_Win_allocate_c(MPI_Aint size, MPI_Aint disp_unit, MPI_Info info, MPI_Comm comm, void* baseptr,
                        MPI_Win* win) {
  return make_window("MPI_Win_allocate_c", comm, flavor::allocate, nullptr, size, disp_unit, info, baseptr, win);
}
int PMPI_Win_allocate_shared(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void* baseptr,
                             MPI_Win* win) {
  return make_window("MPI_Win_allocate_shared", comm, flavor::shared, nullptr, size, disp_unit, info, baseptr, win);
}
int PMPI_Win_allocate_shared_c(MPI_Aint size, MPI_Aint disp_unit, MPI_Info info, MPI_Comm comm, void* baseptr,
                               MPI_Win* win) {
  return make_window("MPI_Win_allocate_shared_c", comm, flavor::shared, nullptr, size, disp_unit, info, baseptr,
                     win);
}
int PMPI_Win_create_dynamic(MPI_Info info, MPI_Comm comm, MPI_Win* win) {
  return make_window("MPI_Win_create_dynamic", comm, flavor::dynamic, nullptr, 0, 1, info, nullptr, win);
}

int PMPI_Win_free(MPI_Win* win) { return win_free(win); }

namespace {
int shared_query(const char* fn, MPI_Win win, int rank, MPI_Aint* size, MPI_Aint* disp_unit, void* baseptr) {
  int rc = MPI_SUCCESS;
  auto w = need_window(fn, win, rc);
  if (!w) return rc;
  if (!size || !disp_unit || !baseptr) return raise_win(fn, w.get(), MPI_ERR_ARG, "null output argument");
  if (rank != MPI_PROC_NULL && (rank < 0 || rank >= w->size))
    return raise_win(fn, w.get(), MPI_ERR_RANK, "rank " + std::to_string(rank) + " is not in the window's group");
  if (!w->direct) {
    // MPI 4.1: any flavour; memory this process cannot load and store
    // (another process's, or a dynamic window's) is size 0 at NULL.
    const bool own = rank == w->rank && w->fl != flavor::dynamic;
    *size = own ? w->bytes : 0;
    *disp_unit = own ? w->disp_unit : w->disp_units[static_cast<std::size_t>(rank == MPI_PROC_NULL ? 0 : rank)];
    *static_cast<void**>(baseptr) = own && w->bytes > 0 ? w->base : nullptr;
    return MPI_SUCCESS;
  }
  int r = rank;
  if (rank == MPI_PROC_NULL) {  // the first member with a non-zero size
    r = 0;
    for (int i = 0; i < w->size; ++i)
      if (w->sizes[static_cast<std::size_t>(i)] > 0) {
        r = i;
        break;
      }
  }
  *size = w->sizes[static_cast<std::size_t>(r)];
  *disp_unit = w->disp_units[static_cast<std::size_t>(r)];
  *static_cast<void**>(baseptr) = *size > 0 ? w->mapped[static_cast<std::size_t>(r)] : nullptr;
  return MPI_SUCCESS;
}
}  // namespace

int PMPI_Win_shared_query(MPI_Win win, int rank, MPI_Aint* size, int* disp_unit, void* baseptr) {
  MPI_Aint du = 0;
  const int e = shared_query("MPI_Win_shared_query", win, rank, size, disp_unit ? &du : nullptr, baseptr);
  if (e == MPI_SUCCESS) *disp_unit = static_cast<int>(du);
  return e;
}
int PMPI_Win_shared_query_c(MPI_Win win, int rank, MPI_Aint* size, MPI_Aint* disp_unit, void* baseptr) {
  return shared_query("MPI_Win_shared_query_c", win, rank, size, disp_unit, baseptr);
}

int PMPI_Win_attach(MPI_Win win, void* base, MPI_Aint size) {
  const char* fn = "MPI_Win_attach";
  int rc = MPI_SUCCESS;
  auto w = need_window(fn, win, rc);
  if (!w) return rc;
  if (w->fl != flavor::dynamic) return raise_win(fn, w.get(), MPI_ERR_RMA_FLAVOR, "the window is not dynamic");
  if (size < 0) return raise_win(fn, w.get(), MPI_ERR_SIZE, "negative size");
  if (size > 0 && !base) return raise_win(fn, w.get(), MPI_ERR_BASE, "null base");
  const auto b = reinterpret_cast<std::uintptr_t>(base);
  std::lock_guard g(w->mu);
  for (const attached_region& r : w->regions)
    if (b < r.base + r.size && r.base < b + static_cast<std::size_t>(size))
      return raise_win(fn, w.get(), MPI_ERR_RMA_ATTACH, "the memory overlaps a region already attached");
  w->regions.push_back({b, static_cast<std::size_t>(size)});
  return MPI_SUCCESS;
}

int PMPI_Win_detach(MPI_Win win, const void* base) {
  const char* fn = "MPI_Win_detach";
  int rc = MPI_SUCCESS;
  auto w = need_window(fn, win, rc);
  if (!w) return rc;
  if (w->fl != flavor::dynamic) return raise_win(fn, w.get(), MPI_ERR_RMA_FLAVOR, "the window is not dynamic");
  std::lock_guard g(w->mu);
  const auto b = reinterpret_cast<std::uintptr_t>(base);
  auto it = std::find_if(w->regions.begin(), w->regions.end(), [&](const attached_region& r) { return r.base == b; });
  if (it == w->regions.end())
    return raise_win(fn, w.get(), MPI_ERR_RMA_ATTACH, "no region attached at that address");
  w->regions.erase(it);
  return MPI_SUCCESS;
}

int PMPI_Win_get_group(MPI_Win win, MPI_Group* group) {
  const char* fn = "MPI_Win_get_group";
  int rc = MPI_SUCCESS;
  auto w = need_window(fn, win, rc);
  if (!w) return rc;
  if (!group) return raise_win(fn, w.get(), MPI_ERR_ARG, "null group pointer");
  return PMPI_Comm_group(w->comm, group);
}

int PMPI_Win_set_info(MPI_Win win, MPI_Info info) {
  const char* fn = "MPI_Win_set_info";
  int rc = MPI_SUCCESS;
  auto w = need_window(fn, win, rc);
  if (!w) return rc;
  if (info == MPI_INFO_NULL) return MPI_SUCCESS;
  auto e = info_get_entries(info);
  if (!e) return raise_win(fn, w.get(), MPI_ERR_INFO, "invalid info " + std::to_string(info));
  std::lock_guard g(w->mu);
  for (auto& [k, v] : *e) {
    bool found = false;
    for (auto& kv : w->info)
      if (kv.first == k) {
        kv.second = v;
        found = true;
      }
    if (!found) w->info.emplace_back(k, v);
  }
  return MPI_SUCCESS;
}

int PMPI_Win_get_info(MPI_Win win, MPI_Info* info_used) {
  const char* fn = "MPI_Win_get_info";
  int rc = MPI_SUCCESS;
  auto w = need_window(fn, win, rc);
  if (!w) return rc;
  if (!info_used) return raise_win(fn, w.get(), MPI_ERR_ARG, "null info pointer");
  // The hints in effect: the defaults this implementation applies, with
  // what the user set over them.
  info_entries e = {{"no_locks", "false"},
                    {"accumulate_ordering", "rar,raw,war,waw"},
                    {"accumulate_ops", "same_op_no_op"},
                    {"same_size", "false"},
                    {"same_disp_unit", "false"},
                    {"alloc_shared_noncontig", "false"}};
  {
    std::lock_guard g(w->mu);
    for (auto& [k, v] : w->info) {
      bool found = false;
      for (auto& kv : e)
        if (kv.first == k) {
          kv.second = v;
          found = true;
        }
      if (!found) e.emplace_back(k, v);
    }
  }
  *info_used = new_info(std::move(e));
  return MPI_SUCCESS;
}

int PMPI_Win_set_name(MPI_Win win, const char* win_name) {
  const char* fn = "MPI_Win_set_name";
  int rc = MPI_SUCCESS;
  auto w = need_window(fn, win, rc);
  if (!w) return rc;
  if (!win_name) return raise_win(fn, w.get(), MPI_ERR_ARG, "null name");
  std::lock_guard g(w->mu);
  w->name.assign(win_name, strnlen(win_name, MPI_MAX_OBJECT_NAME - 1));
  return MPI_SUCCESS;
}

int PMPI_Win_get_name(MPI_Win win, char* win_name, int* resultlen) {
  const char* fn = "MPI_Win_get_name";
  int rc = MPI_SUCCESS;
  if (win == MPI_WIN_NULL && win_name && resultlen && check_initialized(fn)) {  // MPI 4.1: the handle's name
    std::strcpy(win_name, "MPI_WIN_NULL");
    *resultlen = 12;
    return MPI_SUCCESS;
  }
  auto w = need_window(fn, win, rc);
  if (!w) return rc;
  if (!win_name || !resultlen) return raise_win(fn, w.get(), MPI_ERR_ARG, "null name or length");
  std::lock_guard g(w->mu);
  std::memcpy(win_name, w->name.c_str(), w->name.size() + 1);
  *resultlen = static_cast<int>(w->name.size());
  return MPI_SUCCESS;
}

int PMPI_Win_create_errhandler(MPI_Win_errhandler_function* f, MPI_Errhandler* errhandler) {
  if (!check_initialized("MPI_Win_create_errhandler")) return MPI_ERR_OTHER;
  return create_errhandler("MPI_Win_create_errhandler", reinterpret_cast<MPI_Comm_errhandler_function*>(f),
                           errhandler);
}

int PMPI_Win_set_errhandler(MPI_Win win, MPI_Errhandler errhandler) {
  const char* fn = "MPI_Win_set_errhandler";
  int rc = MPI_SUCCESS;
  auto w = need_window(fn, win, rc);
  if (!w) return rc;
  if (!valid_errhandler(errhandler))
    return raise_win(fn, w.get(), MPI_ERR_ARG, "invalid error handler " + std::to_string(errhandler));
  w->errhandler.store(errhandler, std::memory_order_release);
  return MPI_SUCCESS;
}

int PMPI_Win_get_errhandler(MPI_Win win, MPI_Errhandler* errhandler) {
  const char* fn = "MPI_Win_get_errhandler";
  int rc = MPI_SUCCESS;
  auto w = need_window(fn, win, rc);
  if (!w) return rc;
  if (!errhandler) return raise_win(fn, w.get(), MPI_ERR_ARG, "null errhandler pointer");
  *errhandler = w->errhandler.load(std::memory_order_acquire);
  return MPI_SUCCESS;
}

int PMPI_Win_call_errhandler(MPI_Win win, int errorcode) {
  const char* fn = "MPI_Win_call_errhandler";
  int rc = MPI_SUCCESS;
  auto w = need_window(fn, win, rc);
  if (!w) return rc;
  raise_win(fn, w.get(), errorcode, "raised by MPI_Win_call_errhandler");
  return MPI_SUCCESS;
}

MPI_Fint PMPI_Win_c2f(MPI_Win win) { return win; }
MPI_Win PMPI_Win_f2c(MPI_Fint win) { return win; }

}  // extern "C"

#pragma weak MPI_Win_create = PMPI_Win_create
#pragma weak MPI_Win_create_c = PMPI_Win_create_c
#pragma weak MPI_Win_allocate = PMPI_Win_allocate
#pragma weak MPI_Win_allocate_c = PMPI_Win_allocate_c
#pragma weak MPI_Win_allocate_shared = PMPI_Win_allocate_shared
#pragma weak MPI_Win_allocate_shared_c = PMPI_Win_allocate_shared_c
#pragma weak MPI_Win_create_dynamic = PMPI_Win_create_dynamic
#pragma weak MPI_Win_free = PMPI_Win_free
#pragma weak MPI_Win_shared_query = PMPI_Win_shared_query
#pragma weak MPI_Win_shared_query_c = PMPI_Win_shared_query_c
#pragma weak MPI_Win_attach = PMPI_Win_attach
#pragma weak MPI_Win_detach = PMPI_Win_detach
#pragma weak MPI_Win_get_group = PMPI_Win_get_group
#pragma weak MPI_Win_set_info = PMPI_Win_set_info
#pragma weak MPI_Win_get_info = PMPI_Win_get_info
#pragma weak MPI_Win_set_name = PMPI_Win_set_name
#pragma weak MPI_Win_get_name = PMPI_Win_get_name
#pragma weak MPI_Win_create_errhandler = PMPI_Win_create_errhandler
#pragma weak MPI_Win_set_errhandler = PMPI_Win_set_errhandler
#pragma weak MPI_Win_get_errhandler = PMPI_Win_get_errhandler
#pragma weak MPI_Win_call_errhandler = PMPI_Win_call_errhandler
#pragma weak MPI_Win_c2f = PMPI_Win_c2f
#pragma weak MPI_Win_f2c = PMPI_Win_f2c
