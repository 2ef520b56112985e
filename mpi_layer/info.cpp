// Info objects: ordered (key, value) string pairs. Hints are stored and
// returned; the one the layer interprets is a communicator's
// "nmad_priority" (comm.cpp).
//
// Handles index a table with its own lock; MPI_INFO_NULL is 0, MPI_INFO_ENV
// is 1 (read-only, filled by MPI_Init with what this process really knows:
// command, argv, maxprocs, host, wdir, thread_level). Handles are not reused.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>

#include "mpi_layer/mpi_impl.hpp"

namespace nmad::mpi {

namespace {

struct info_obj {
  info_entries entries;
  bool freed = false;
};

struct info_table {
  std::mutex mu;
  std::vector<std::unique_ptr<info_obj>> infos;  // index = handle
  info_table() {
    infos.push_back(nullptr);                     // MPI_INFO_NULL
    infos.push_back(std::make_unique<info_obj>());  // MPI_INFO_ENV
  }
};

info_table& table() {
  static info_table* t = new info_table();
  return *t;
}

std::string ihandle(MPI_Info i) {
  return i == MPI_INFO_NULL ? std::string("MPI_INFO_NULL") : "info " + std::to_string(i);
}

// The object behind i (locked by the caller), or null.
info_obj* find_locked(info_table& t, MPI_Info i) {
  if (i <= 0 || static_cast<std::size_t>(i) >= t.infos.size() || t.infos[i]->freed) return nullptr;
  return t.infos[i].get();
}

int check_key(const char* fn, const char* key) {
  if (!key) return mpi_raise(fn, nullptr, MPI_ERR_INFO_KEY, "null key");
  const std::size_t n = std::strlen(key);
  if (n == 0) return mpi_raise(fn, nullptr, MPI_ERR_INFO_KEY, "empty key");
  if (n > MPI_MAX_INFO_KEY)
    return mpi_raise(fn, nullptr, MPI_ERR_INFO_KEY,
                     "key of " + std::to_string(n) + " characters (MPI_MAX_INFO_KEY is " +
                         std::to_string(MPI_MAX_INFO_KEY) + ")");
  return MPI_SUCCESS;
}

auto find_key(info_entries& e, const char* key) {
  return std::find_if(e.begin(), e.end(), [&](const auto& kv) { return kv.first == key; });
}

int invalid(const char* fn, MPI_Info i) {
  return mpi_raise(fn, nullptr, MPI_ERR_INFO, "invalid info handle (" + ihandle(i) + ")");
}

}  // namespace

namespace {
// MPI_INFO_ENV's keys (MPI-4.0 11.2.3) for a program started with `args`:
// what this process really knows, nothing made up (maxprocs < 0: unknown).
info_entries env_entries(const std::vector<std::string>& args, long maxprocs, int thread_level) {
  info_entries e;
  if (!args.empty()) {
    e.emplace_back("command", args[0].substr(0, MPI_MAX_INFO_VAL));
    std::string rest;
    for (std::size_t i = 1; i < args.size(); ++i) rest += (i > 1 ? " " : "") + args[i];
    if (!rest.empty()) e.emplace_back("argv", rest.substr(0, MPI_MAX_INFO_VAL));
  }
  if (maxprocs > 0) e.emplace_back("maxprocs", std::to_string(maxprocs));
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) e.emplace_back("host", host);
  char cwd[MPI_MAX_INFO_VAL + 1] = {};
  if (getcwd(cwd, sizeof cwd)) e.emplace_back("wdir", cwd);
  static const char* levels[] = {"MPI_THREAD_SINGLE", "MPI_THREAD_FUNNELED", "MPI_THREAD_SERIALIZED",
                                 "MPI_THREAD_MULTIPLE"};
  e.emplace_back("thread_level", levels[std::clamp(thread_level, 0, 3)]);
  return e;
}
}  // namespace

void init_info_env(int thread_level) {
  std::string cmdline;
  {
    std::ifstream f("/proc/self/cmdline", std::ios::binary);
    cmdline.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  std::vector<std::string> args;
  for (std::size_t p = 0; p < cmdline.size();) {
    const std::size_t z = cmdline.find('\0', p);
    args.push_back(cmdline.substr(p, z == std::string::npos ? std::string::npos : z - p));
    if (z == std::string::npos) break;
    p = z + 1;
  }
  info_entries e = env_entries(args, st().world_size, thread_level);
  info_table& t = table();
  std::lock_guard g(t.mu);
  t.infos[MPI_INFO_ENV]->entries = std::move(e);
}

std::optional<info_entries> info_get_entries(MPI_Info i) {
  info_table& t = table();
  std::lock_guard g(t.mu);
  info_obj* o = find_locked(t, i);
  if (!o) return std::nullopt;
  return o->entries;
}

MPI_Info new_info(info_entries e) {
  info_table& t = table();
  std::lock_guard g(t.mu);
  auto o = std::make_unique<info_obj>();
  o->entries = std::move(e);
  t.infos.push_back(std::move(o));
  return static_cast<MPI_Info>(t.infos.size() - 1);
}

}  // namespace nmad::mpi

using namespace nmad::mpi;

extern "C" {

// Info objects can be made, read and freed at any time, before MPI_Init and
// after MPI_Finalize (MPI-4.0 11.4.1): none of these calls checks either.

// MPI-4.0 11.2.3: an info object with MPI_INFO_ENV's keys for a program
// started with (argc, argv), callable before MPI_Init (argv may be null).
// maxprocs comes from the launcher's PMI_SIZE when MPI is not initialized.
int PMPI_Info_create_env(int argc, char* argv[], MPI_Info* info) {
  const char* fn = "MPI_Info_create_env";
  if (!info) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null info");
  if (argc < 0) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "negative argc " + std::to_string(argc));
  std::vector<std::string> args;
  for (int i = 0; argv && i < argc && argv[i]; ++i) args.emplace_back(argv[i]);
  const state& s = st();
  long maxprocs = s.initialized.load() ? static_cast<long>(s.world_size) : -1;
  if (maxprocs < 0)
    if (const char* p = std::getenv("PMI_SIZE"); p && *p) maxprocs = std::strtol(p, nullptr, 10);
  *info = new_info(env_entries(args, maxprocs, s.initialized.load() ? s.thread_level : MPI_THREAD_SINGLE));
  return MPI_SUCCESS;
}

int PMPI_Info_create(MPI_Info* info) {
  if (!info) return mpi_raise("MPI_Info_create", nullptr, MPI_ERR_ARG, "null info");
  *info = new_info({});
  return MPI_SUCCESS;
}

int PMPI_Info_set(MPI_Info info, const char* key, const char* value) {
  const char* fn = "MPI_Info_set";
  if (int e = check_key(fn, key)) return e;
  if (!value) return mpi_raise(fn, nullptr, MPI_ERR_INFO_VALUE, "null value");
  const std::size_t n = std::strlen(value);
  if (n > MPI_MAX_INFO_VAL)
    return mpi_raise(fn, nullptr, MPI_ERR_INFO_VALUE,
                     "value of " + std::to_string(n) + " characters (MPI_MAX_INFO_VAL is " +
                         std::to_string(MPI_MAX_INFO_VAL) + ")");
  if (info == MPI_INFO_ENV) return mpi_raise(fn, nullptr, MPI_ERR_INFO, "MPI_INFO_ENV is read-only");
  info_table& t = table();
  std::unique_lock g(t.mu);
  info_obj* o = find_locked(t, info);
  if (!o) {
    g.unlock();
    return invalid(fn, info);
  }
  auto it = find_key(o->entries, key);
  if (it != o->entries.end()) it->second = value;
  else o->entries.emplace_back(key, value);
  return MPI_SUCCESS;
}

int PMPI_Info_get(MPI_Info info, const char* key, int valuelen, char* value, int* flag) {
  const char* fn = "MPI_Info_get";
  if (int e = check_key(fn, key)) return e;
  if (valuelen < 0) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "negative valuelen " + std::to_string(valuelen));
  if (!value || !flag) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null value or flag");
  auto e = info_get_entries(info);
  if (!e) return invalid(fn, info);
  auto it = find_key(*e, key);
  *flag = it != e->end();
  if (*flag) {
    // At most valuelen characters, then the terminator (value has
    // valuelen + 1 bytes, as the standard says).
    const std::size_t n = std::min<std::size_t>(it->second.size(), static_cast<std::size_t>(valuelen));
    std::memcpy(value, it->second.data(), n);
    value[n] = '\0';
  }
  return MPI_SUCCESS;
}

// MPI 4.0 10.1: *buflen in: the size of value; out: the value's length
// plus one. At most *buflen - 1 characters are copied, then a terminator
// (nothing with *buflen 0): a caller asks with 0, then allocates.
int PMPI_Info_get_string(MPI_Info info, const char* key, int* buflen, char* value, int* flag) {
  const char* fn = "MPI_Info_get_string";
  if (int e = check_key(fn, key)) return e;
  if (!buflen || !flag) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null buflen or flag");
  if (*buflen < 0) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "negative buflen " + std::to_string(*buflen));
  if (*buflen > 0 && !value) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null value with buflen > 0");
  auto e = info_get_entries(info);
  if (!e) return invalid(fn, info);
  auto it = find_key(*e, key);
  *flag = it != e->end();
  if (!*flag) return MPI_SUCCESS;
  if (*buflen > 0) {
    const std::size_t n = std::min<std::size_t>(it->second.size(), static_cast<std::size_t>(*buflen - 1));
    std::memcpy(value, it->second.data(), n);
    value[n] = '\0';
  }
  *buflen = static_cast<int>(it->second.size()) + 1;
  return MPI_SUCCESS;
}

int PMPI_Info_get_valuelen(MPI_Info info, const char* key, int* valuelen, int* flag) {
  const char* fn = "MPI_Info_get_valuelen";
  if (int e = check_key(fn, key)) return e;
  if (!valuelen || !flag) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null valuelen or flag");
  auto e = info_get_entries(info);
  if (!e) return invalid(fn, info);
  auto it = find_key(*e, key);
  *flag = it != e->end();
  if (*flag) *valuelen = static_cast<int>(it->second.size());
  return MPI_SUCCESS;
}

int PMPI_Info_get_nkeys(MPI_Info info, int* nkeys) {
  const char* fn = "MPI_Info_get_nkeys";
  if (!nkeys) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null nkeys");
  auto e = info_get_entries(info);
  if (!e) return invalid(fn, info);
  *nkeys = static_cast<int>(e->size());
  return MPI_SUCCESS;
}

int PMPI_Info_get_nthkey(MPI_Info info, int n, char* key) {
  const char* fn = "MPI_Info_get_nthkey";
  if (!key) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null key");
  auto e = info_get_entries(info);
  if (!e) return invalid(fn, info);
  if (n < 0 || n >= static_cast<int>(e->size()))
    return mpi_raise(fn, nullptr, MPI_ERR_ARG,
                     "n = " + std::to_string(n) + " not in [0, " + std::to_string(e->size()) + ")");
  std::strcpy(key, (*e)[n].first.c_str());
  return MPI_SUCCESS;
}

int PMPI_Info_delete(MPI_Info info, const char* key) {
  const char* fn = "MPI_Info_delete";
  if (int e = check_key(fn, key)) return e;
  if (info == MPI_INFO_ENV) return mpi_raise(fn, nullptr, MPI_ERR_INFO, "MPI_INFO_ENV is read-only");
  info_table& t = table();
  std::unique_lock g(t.mu);
  info_obj* o = find_locked(t, info);
  if (!o) {
    g.unlock();
    return invalid(fn, info);
  }
  auto it = find_key(o->entries, key);
  if (it == o->entries.end()) {
    g.unlock();
    return mpi_raise(fn, nullptr, MPI_ERR_INFO_NOKEY, std::string("no key \"") + key + "\"");
  }
  o->entries.erase(it);
  return MPI_SUCCESS;
}

int PMPI_Info_dup(MPI_Info info, MPI_Info* newinfo) {
  const char* fn = "MPI_Info_dup";
  if (!newinfo) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null newinfo");
  auto e = info_get_entries(info);
  if (!e) return invalid(fn, info);
  *newinfo = new_info(std::move(*e));
  return MPI_SUCCESS;
}

int PMPI_Info_free(MPI_Info* info) {
  const char* fn = "MPI_Info_free";
  if (!info) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null info");
  if (*info == MPI_INFO_ENV) return mpi_raise(fn, nullptr, MPI_ERR_INFO, "MPI_INFO_ENV cannot be freed");
  info_table& t = table();
  std::unique_lock g(t.mu);
  info_obj* o = find_locked(t, *info);
  if (!o) {
    g.unlock();
    return invalid(fn, *info);
  }
  o->freed = true;
  o->entries.clear();
  *info = MPI_INFO_NULL;
  return MPI_SUCCESS;
}

}  // extern "C"

#pragma weak MPI_Info_create = PMPI_Info_create
#pragma weak MPI_Info_set = PMPI_Info_set
#pragma weak MPI_Info_get = PMPI_Info_get
#pragma weak MPI_Info_get_valuelen = PMPI_Info_get_valuelen
#pragma weak MPI_Info_get_string = PMPI_Info_get_string
#pragma weak MPI_Info_create_env = PMPI_Info_create_env
#pragma weak MPI_Info_get_nkeys = PMPI_Info_get_nkeys
#pragma weak MPI_Info_get_nthkey = PMPI_Info_get_nthkey
#pragma weak MPI_Info_delete = PMPI_Info_delete
#pragma weak MPI_Info_dup = PMPI_Info_dup
#pragma weak MPI_Info_free = PMPI_Info_free
