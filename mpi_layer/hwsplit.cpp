// MPI_Comm_split_type (every split type) and the hsplit extensions
// MPIX_Comm_hsplit_with_roots, MPIX_Get_hw_resource_info,
// MPIX_Get_hw_topo_common_level.
//
// How it works. Every member of the parent sends the same fixed-size record
// in one allgather on the parent's collective context: its split type, host
// identity, the object of each hardware level its binding lies in
// (api/nmad/services/hw_levels.hpp), its machine's level order, the resource
// type or process set it asked for, and any error it found locally. Every
// member then computes the same colors from the same records and the parent
// splits once. So a process passing MPI_UNDEFINED takes part like the
// others, and a bad split type, mismatched info values or a broken testing
// knob at one process is raised at all of them with the same class: nobody
// is left waiting.
//
// Where a process is: its host is the host name and boot id (as for
// MPI_COMM_TYPE_SHARED); its binding is the CPUs it may run on
// (sched_getaffinity) on a topology of this machine, and, on a synthetic or
// XML topology (NMAD_TOPOLOGY, HWLOC_SYNTHETIC, HWLOC_XMLFILE), whose CPUs
// are not this machine's, the binding nmad-run's placement would give it.
// Two testing knobs (docs/CONFIGURATION.md) emulate a cluster on one
// machine:
//   NMAD_EMULATED_HOSTS  host names of the world ranks, in rank order,
//                        "a,a,b,b" or "a*2,b*2": ranks with equal names
//                        count as one host, others as different hosts;
//   NMAD_HW_BINDING      "affinity" | "placement" | "none" | per-rank CPU
//                        lists "0-3;4-7;none" (entries may end in *COUNT).
// Neither changes how messages travel (shm still joins local ranks).
#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <mutex>
#include <unistd.h>

#include "api/nmad/services/config.hpp"
#include "api/nmad/services/hw_levels.hpp"
#include "api/nmad/services/placement.hpp"
#include "api/nmad/services/topology.hpp"
#include "mpi_layer/comm_impl.hpp"
#include "mpi_layer/mpi_impl.hpp"

namespace nmad::mpi {

namespace {

namespace topo = nmad::topology;

constexpr int kLevels = topo::hw_level_count;
constexpr std::size_t kNameLen = 128;

// What every member sends (plain bytes: all members run this library).
struct split_record {
  std::int32_t split_type = MPI_UNDEFINED;
  std::int32_t error = MPI_SUCCESS;  // found locally; raised at everyone
  std::int32_t has_resource = 0;     // "mpi_hw_resource_type" given
  std::int32_t has_pset = 0;         // "mpi_pset_name" given
  std::int32_t where[kLevels] = {};  // topo::hw_location
  std::int32_t order[kLevels] = {};  // topo::hw_level_order, -1 after the last
  char host[320] = {};
  char resource[kNameLen] = {};
  char pset[kNameLen] = {};
  char detail[256] = {};
};

void copy_text(char* dst, std::size_t cap, const std::string& s) {
  std::strncpy(dst, s.c_str(), cap - 1);
  dst[cap - 1] = 0;
}

void set_error(split_record& r, int code, const std::string& detail) {
  if (r.error != MPI_SUCCESS) return;
  r.error = code;
  copy_text(r.detail, sizeof r.detail, detail);
}

// "a*3" -> ("a", 3); "a" -> ("a", 1). False on a bad count.
bool split_repeat(const std::string& item, std::string& value, int& count) {
  const auto star = item.rfind('*');
  value = item;
  count = 1;
  if (star == std::string::npos) return true;
  value = item.substr(0, star);
  const std::string n = item.substr(star + 1);
  if (n.empty() || n.size() > 6 || !std::all_of(n.begin(), n.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  count = std::stoi(n);
  return count > 0;
}

// A per-rank list: items separated by `sep`, each VALUE or VALUE*COUNT,
// expanded. Sets detail and returns nullopt when malformed or too short.
std::optional<std::vector<std::string>> per_rank_list(const char* var, const std::string& text, char sep,
                                                      int world_size, std::string& detail) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const auto end = std::min(text.find(sep, pos), text.size());
    const std::string item = text.substr(pos, end - pos);
    std::string value;
    int count = 0;
    if (item.empty() || !split_repeat(item, value, count) || value.empty()) {
      detail = std::string(var) + "='" + text + "': bad entry '" + item + "' (VALUE or VALUE*COUNT, separated by '" +
               sep + "')";
      return std::nullopt;
    }
    for (int i = 0; i < count && static_cast<int>(out.size()) < (1 << 20); ++i) out.push_back(value);
    pos = end + 1;
  }
  if (static_cast<int>(out.size()) < world_size) {
    detail = std::string(var) + "='" + text + "' gives " + std::to_string(out.size()) + " entries for " +
             std::to_string(world_size) + " ranks";
    return std::nullopt;
  }
  return out;
}

std::optional<std::vector<std::string>> emulated_hosts(std::string& detail) {
  const std::string v = nmad::config::text("NMAD_EMULATED_HOSTS");
  if (v.empty()) return std::vector<std::string>{};
  return per_rank_list("NMAD_EMULATED_HOSTS", v, ',', st().world_size, detail);
}

// The CPUs (of topology t) this process is bound to; empty: unbound.
bool hw_binding(const topo::machine_topology& t, std::vector<int>& cpus, std::string& detail) {
  const state& s = st();
  std::string mode = nmad::config::text("NMAD_HW_BINDING");
  if (mode.empty()) mode = t.this_system() ? "affinity" : "placement";
  cpus.clear();
  if (mode == "none") return true;
  if (mode == "affinity") {
    if (!t.this_system()) {
      detail = "NMAD_HW_BINDING=affinity on topology '" + t.source() + "', which is not this machine";
      return false;
    }
    cpus = topo::allowed_cpus();
    return true;
  }
  if (mode == "placement") {
    // Rank placement (scatter by NUMA) among the world ranks of this host.
    auto hosts = emulated_hosts(detail);
    if (!hosts) return false;
    int index = s.world_rank, count = s.world_size;
    if (!hosts->empty()) {
      index = count = 0;
      for (int r = 0; r < s.world_size; ++r)
        if ((*hosts)[r] == (*hosts)[s.world_rank]) {
          if (r < s.world_rank) ++index;
          ++count;
        }
    }
    cpus = topo::place_ranks(t, count)[static_cast<std::size_t>(index)].cpus;
    return true;
  }
  auto list = per_rank_list("NMAD_HW_BINDING", mode, ';', s.world_size, detail);
  if (!list) {
    detail += " (or affinity, placement, none)";
    return false;
  }
  // Every entry is checked, so a broken knob fails at every rank alike.
  for (std::size_t r = 0; r < list->size(); ++r) {
    const std::string& entry = (*list)[r];
    if (entry == "none") continue;
    auto parsed = topo::parse_cpu_list(entry);
    if (!parsed) {
      detail = "NMAD_HW_BINDING: entry " + std::to_string(r) + " '" + entry + "' is not a CPU list (like 0-3,8) or none";
      return false;
    }
    for (int c : *parsed)
      if (std::none_of(t.pus().begin(), t.pus().end(), [&](const topo::pu_info& p) { return p.os_index == c; })) {
        detail = "NMAD_HW_BINDING: CPU " + std::to_string(c) + " of entry " + std::to_string(r) +
                 " is not in topology '" + t.source() + "'";
        return false;
      }
    if (static_cast<int>(r) == s.world_rank) cpus = std::move(*parsed);
  }
  return true;
}

// Fills r.where and r.order from this machine's topology and binding.
void locate_me(split_record& r) {
  try {
    const auto& t = topo::shared_from_env();
    std::vector<int> cpus;
    std::string detail;
    if (!hw_binding(t, cpus, detail)) return set_error(r, MPI_ERR_OTHER, detail);
    const auto where = topo::locate(t, cpus);
    for (int i = 0; i < kLevels; ++i) r.where[i] = where[static_cast<std::size_t>(i)];
    const auto order = topo::hw_level_order(t);
    for (int i = 0; i < kLevels; ++i)
      r.order[i] = i < static_cast<int>(order.size()) ? static_cast<int>(order[static_cast<std::size_t>(i)]) : -1;
  } catch (const std::exception& e) {
    set_error(r, MPI_ERR_OTHER, std::string("cannot read the hardware topology: ") + e.what());
  }
}

bool known_split_type(int t) {
  return t == MPI_UNDEFINED || t == MPI_COMM_TYPE_SHARED || t == MPI_COMM_TYPE_HW_GUIDED ||
         t == MPI_COMM_TYPE_HW_UNGUIDED || t == MPI_COMM_TYPE_RESOURCE_GUIDED;
}

std::string split_type_name(int t) {
  switch (t) {
    case MPI_UNDEFINED: return "MPI_UNDEFINED";
    case MPI_COMM_TYPE_SHARED: return "MPI_COMM_TYPE_SHARED";
    case MPI_COMM_TYPE_HW_GUIDED: return "MPI_COMM_TYPE_HW_GUIDED";
    case MPI_COMM_TYPE_HW_UNGUIDED: return "MPI_COMM_TYPE_HW_UNGUIDED";
    case MPI_COMM_TYPE_RESOURCE_GUIDED: return "MPI_COMM_TYPE_RESOURCE_GUIDED";
  }
  return std::to_string(t);
}

bool is_shared_memory(const char* v) { return std::strcmp(v, "mpi_shared_memory") == 0; }

// The record of this process for a split of type split_type with `info`
// (already checked valid or MPI_INFO_NULL). Never fails: problems go into
// the record, for everyone to raise.
split_record local_record(int split_type, MPI_Info info, bool need_location) {
  split_record r;
  r.split_type = split_type;
  for (int i = 0; i < kLevels; ++i) r.where[i] = r.order[i] = -1;
  // Every process is in its machine, located or not: the shared-memory
  // split groups by host alone.
  r.where[static_cast<int>(topo::hw_level::machine)] = 0;
  std::string id, detail;
  if (!host_identity(id, detail)) set_error(r, MPI_ERR_OTHER, detail);
  copy_text(r.host, sizeof r.host, id);
  if (!known_split_type(split_type))
    set_error(r, MPI_ERR_ARG,
              "split_type " + std::to_string(split_type) +
                  " (MPI_COMM_TYPE_SHARED, MPI_COMM_TYPE_HW_GUIDED, MPI_COMM_TYPE_HW_UNGUIDED, "
                  "MPI_COMM_TYPE_RESOURCE_GUIDED or MPI_UNDEFINED)");
  const bool guided = split_type == MPI_COMM_TYPE_HW_GUIDED || split_type == MPI_COMM_TYPE_RESOURCE_GUIDED;
  if (guided && info != MPI_INFO_NULL)
    if (auto e = info_get_entries(info))
      for (auto& [k, v] : *e) {
        if (k == "mpi_hw_resource_type") {
          r.has_resource = 1;
          copy_text(r.resource, sizeof r.resource, v);
        } else if (k == "mpi_pset_name" && split_type == MPI_COMM_TYPE_RESOURCE_GUIDED) {
          r.has_pset = 1;
          copy_text(r.pset, sizeof r.pset, v);
        }
      }
  const bool level_named = r.has_resource && !is_shared_memory(r.resource) && topo::parse_hw_level(r.resource);
  if (need_location || split_type == MPI_COMM_TYPE_HW_UNGUIDED || (guided && level_named)) locate_me(r);
  return r;
}

std::vector<topo::hw_member> members_of(const std::vector<split_record>& all) {
  std::vector<topo::hw_member> m(all.size());
  for (std::size_t i = 0; i < all.size(); ++i) {
    m[i].host = all[i].host;
    for (int l = 0; l < kLevels; ++l) m[i].where[static_cast<std::size_t>(l)] = all[i].where[l];
    m[i].takes_part = all[i].split_type != MPI_UNDEFINED;
  }
  return m;
}

std::vector<topo::hw_level> order_of(const split_record& r) {
  std::vector<topo::hw_level> order;
  for (int i = 0; i < kLevels && r.order[i] >= 0; ++i) order.push_back(static_cast<topo::hw_level>(r.order[i]));
  return order;
}

// The first error any member found (the same at every member).
int first_error(const std::vector<split_record>& all, std::string& detail) {
  for (std::size_t r = 0; r < all.size(); ++r)
    if (all[r].error != MPI_SUCCESS) {
      detail = "rank " + std::to_string(r) + ": " + all[r].detail;
      return all[r].error;
    }
  return MPI_SUCCESS;
}

// What a split decides for member `me`, the same computation at everyone.
struct split_decision {
  int error = MPI_SUCCESS;
  std::string detail;
  int color = MPI_UNDEFINED;
  std::string resource;                  // mpi_hw_resource_type of the new communicator ("" none)
  std::optional<topo::hw_level> level;   // a hardware level was used
  topo::hw_siblings siblings;
};

// Same meaning: equal levels when both name one, else equal text.
bool same_resource(const char* a, const char* b) {
  auto la = topo::parse_hw_level(a), lb = topo::parse_hw_level(b);
  if (la && lb) return *la == *lb;
  return std::strcmp(a, b) == 0;
}

split_decision decide(const std::vector<split_record>& all, int me) {
  split_decision d;
  if ((d.error = first_error(all, d.detail))) return d;
  const int n = static_cast<int>(all.size());
  int first = -1;  // first member taking part
  for (int r = 0; r < n; ++r) {
    if (all[r].split_type == MPI_UNDEFINED) continue;
    if (first < 0) {
      first = r;
      continue;
    }
    if (all[r].split_type != all[first].split_type) {
      d.error = MPI_ERR_ARG;
      d.detail = "split_type differs: rank " + std::to_string(first) + " passes " +
                 split_type_name(all[first].split_type) + ", rank " + std::to_string(r) + " " +
                 split_type_name(all[r].split_type);
      return d;
    }
  }
  const split_record& mine = all[static_cast<std::size_t>(me)];
  if (first < 0 || mine.split_type == MPI_UNDEFINED) return d;
  const int type = mine.split_type;
  const auto members = members_of(all);
  auto at_level = [&](topo::hw_level l) {
    d.level = l;
    d.color = topo::hw_color(members, me, l);
    if (d.color < 0) d.color = MPI_UNDEFINED;
    d.siblings = topo::hw_group_siblings(members, me, l);
    d.resource = std::string(topo::hw_level_name(l));
  };
  if (type == MPI_COMM_TYPE_SHARED) {
    d.color = topo::hw_color(members, me, topo::hw_level::machine);
    return d;
  }
  if (type == MPI_COMM_TYPE_HW_UNGUIDED) {
    if (auto l = topo::hw_unguided_level(members, order_of(all[static_cast<std::size_t>(first)]))) at_level(*l);
    return d;
  }
  // Guided: every member giving a value must give the same one (MPI-4.0
  // 7.4.2); members without one, or with one we do not know, get
  // MPI_COMM_NULL.
  for (int pass = 0; pass < 2; ++pass) {
    int given = -1;
    for (int r = 0; r < n; ++r) {
      const split_record& x = all[r];
      if (x.split_type == MPI_UNDEFINED || !(pass == 0 ? x.has_resource : x.has_pset)) continue;
      const char* v = pass == 0 ? x.resource : x.pset;
      if (given < 0) {
        given = r;
        continue;
      }
      const char* g = pass == 0 ? all[given].resource : all[given].pset;
      if (!same_resource(g, v)) {
        d.error = MPI_ERR_INFO_VALUE;
        d.detail = std::string(pass == 0 ? "mpi_hw_resource_type" : "mpi_pset_name") + " differs: rank " +
                   std::to_string(given) + " gives '" + g + "', rank " + std::to_string(r) + " '" + v + "'";
        return d;
      }
    }
  }
  if (mine.has_resource) {
    if (is_shared_memory(mine.resource)) {
      d.color = topo::hw_color(members, me, topo::hw_level::machine);
      d.resource = "mpi_shared_memory";
    } else if (auto l = topo::parse_hw_level(mine.resource)) {
      at_level(*l);
    }
    return d;
  }
  if (mine.has_pset) {  // RESOURCE_GUIDED by process set
    if (std::strcmp(mine.pset, "mpi://WORLD") == 0) d.color = 0;
    else if (std::strcmp(mine.pset, "mpi://SELF") == 0) d.color = me;
  }
  return d;
}

// ---- level information kept on the communicators of a hardware split ----
struct level_info {
  char type[64];
  int count;
  int index;
};

int level_copy(MPI_Comm, int, void*, void* in, void* out, int* flag) {
  *static_cast<void**>(out) = new level_info(*static_cast<level_info*>(in));
  *flag = 1;
  return MPI_SUCCESS;
}
int level_delete(MPI_Comm, int, void* value, void*) {
  delete static_cast<level_info*>(value);
  return MPI_SUCCESS;
}
int level_keyval() {
  static std::once_flag once;
  static int keyval = MPI_KEYVAL_INVALID;
  std::call_once(once, [] { PMPI_Comm_create_keyval(level_copy, level_delete, &keyval, nullptr); });
  return keyval;
}

// Gives the new communicator its info (mpi_hw_resource_type) and level
// information.
void label_new_comm(MPI_Comm newcomm, const split_decision& d) {
  if (newcomm == MPI_COMM_NULL || d.resource.empty()) return;
  if (comm_obj* n = lookup_comm(newcomm)) {
    state& s = st();
    std::lock_guard g(s.mu);
    n->hints.clear();
    n->hints.emplace_back("mpi_hw_resource_type", d.resource);
  }
  if (!d.level) return;
  auto* li = new level_info{};
  copy_text(li->type, sizeof li->type, d.resource);
  li->count = d.siblings.count;
  li->index = d.siblings.index;
  PMPI_Comm_set_attr(newcomm, level_keyval(), li);
}

int gather_records(comm_obj* c, const split_record& mine, std::vector<split_record>& all, std::string& detail) {
  std::vector<std::byte> bytes;
  if (int e = comm_allgather(*c, &mine, sizeof mine, bytes, detail)) return e;
  all.resize(static_cast<std::size_t>(c->size()));
  std::memcpy(all.data(), bytes.data(), bytes.size());
  return MPI_SUCCESS;
}

int split_type(const char* fn, comm_obj* c, int type, int key, MPI_Info info, MPI_Comm* newcomm) {
  std::vector<split_record> all;
  std::string detail;
  if (int e = gather_records(c, local_record(type, info, false), all, detail)) return mpi_raise(fn, c, e, detail);
  const split_decision d = decide(all, c->rank);
  if (d.error) return mpi_raise(fn, c, d.error, d.detail);
  if (int e = comm_split(fn, c, d.color, key, newcomm)) return e;
  label_new_comm(*newcomm, d);
  return MPI_SUCCESS;
}

// Common argument checks of split_type and hsplit_with_roots.
comm_obj* split_args(const char* fn, MPI_Comm comm, MPI_Info info, const void* newcomm, int& err) {
  comm_obj* c = comms::intra_arg(fn, comm, err);
  if (!c) return nullptr;
  if (!newcomm) err = mpi_raise(fn, c, MPI_ERR_ARG, "null newcomm");
  else if (info != MPI_INFO_NULL && !info_get_entries(info))
    err = mpi_raise(fn, c, MPI_ERR_INFO, "invalid info handle " + std::to_string(info));
  return err ? nullptr : c;
}

void put_name(char* dst, const std::string& name) {
  if (!dst) return;
  std::strncpy(dst, name.c_str(), MPI_MAX_OBJECT_NAME - 1);
  dst[std::min(name.size(), static_cast<std::size_t>(MPI_MAX_OBJECT_NAME - 1))] = 0;
}

}  // namespace

// This host's identity: the emulated name if NMAD_EMULATED_HOSTS says so,
// else host name and boot id (two containers may share a host name but not
// memory).
bool host_identity(std::string& id, std::string& detail) {
  auto hosts = emulated_hosts(detail);
  if (!hosts) return false;
  if (!hosts->empty()) {
    id = "emulated:" + (*hosts)[st().world_rank];
    return true;
  }
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "localhost");
  std::string boot;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::getline(f, boot);
  id = std::string(host) + "/" + boot.substr(0, 60);
  return true;
}

bool hw_locate_self(int& package, int& numa, std::string& detail) {
  package = numa = topo::hw_spans;
  try {
    const auto& t = topo::shared_from_env();
    std::vector<int> cpus;
    if (!hw_binding(t, cpus, detail)) return false;
    const auto where = topo::locate(t, cpus);
    package = where[static_cast<std::size_t>(topo::hw_level::package)];
    numa = where[static_cast<std::size_t>(topo::hw_level::numa)];
    return true;
  } catch (const std::exception& e) {
    detail = std::string("cannot read the hardware topology: ") + e.what();
    return false;
  }
}

}  // namespace nmad::mpi

using namespace nmad::mpi;

extern "C" {

int PMPI_Comm_split_type(MPI_Comm comm, int split_type_, int key, MPI_Info info, MPI_Comm* newcomm) {
  const char* fn = "MPI_Comm_split_type";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  int err;
  comm_obj* c = split_args(fn, comm, info, newcomm, err);
  if (!c) return err;
  return split_type(fn, c, split_type_, key, info, newcomm);
}

int PMPIX_Comm_hsplit_with_roots(MPI_Comm comm, int split_type_, int key, MPI_Info info, MPI_Comm* newcomm,
                                 MPI_Comm* rootcomm) {
  const char* fn = "MPIX_Comm_hsplit_with_roots";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  int err;
  comm_obj* c = split_args(fn, comm, info, newcomm, err);
  if (!c) return err;
  if (!rootcomm) return mpi_raise(fn, c, MPI_ERR_ARG, "null rootcomm");
  if (int e = split_type(fn, c, split_type_, key, info, newcomm)) return e;
  int sub_rank = -1;
  if (*newcomm != MPI_COMM_NULL) PMPI_Comm_rank(*newcomm, &sub_rank);
  return comm_split(fn, c, sub_rank == 0 ? 0 : MPI_UNDEFINED, c->rank, rootcomm);
}

int PMPIX_Get_hw_resource_info(MPI_Comm comm, char* type_name, int* num_siblings, int* index, int* flag) {
  const char* fn = "MPIX_Get_hw_resource_info";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  comm_obj* c = lookup_comm(comm);
  if (!c) return mpi_raise(fn, nullptr, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm));
  if (!type_name || !num_siblings || !index || !flag)
    return mpi_raise(fn, c, MPI_ERR_ARG, "null type_name, num_siblings, index or flag");
  level_info* li = nullptr;
  int found = 0;
  PMPI_Comm_get_attr(comm, level_keyval(), &li, &found);
  *flag = found && li;
  put_name(type_name, *flag ? li->type : "");
  *num_siblings = *flag ? li->count : 0;
  *index = *flag ? li->index : -1;
  return MPI_SUCCESS;
}

// MPI 4.1: the hardware this process runs on, as the hardware splits see
// it (the content is the implementation's to choose): for each level the
// machine has, from the machine down (hw_level_order), the key
// "hwloc://<type>" (the URI form MPI_COMM_TYPE_HW_GUIDED accepts) with
// the index of the object of that level the process's binding lies in,
// or "spans" when it lies in several (an unbound process). On a topology
// that cannot be read, an empty info object.
int PMPI_Get_hw_resource_info(MPI_Info* hw_info) {
  const char* fn = "MPI_Get_hw_resource_info";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (!hw_info) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null hw_info");
  info_entries e;
  try {
    const auto& t = topo::shared_from_env();
    std::vector<int> cpus;
    std::string detail;
    if (hw_binding(t, cpus, detail)) {
      const topo::hw_location where = topo::locate(t, cpus);
      for (topo::hw_level l : topo::hw_level_order(t)) {
        const int at = where[static_cast<std::size_t>(l)];
        if (at == topo::hw_absent) continue;
        e.emplace_back("hwloc://" + std::string(topo::hw_level_name(l)), at == topo::hw_spans ? "spans" : std::to_string(at));
      }
    }
  } catch (const std::exception&) {
    e.clear();  // (no topology: nothing to say)
  }
  *hw_info = new_info(std::move(e));
  return MPI_SUCCESS;
}

int PMPIX_Get_hw_topo_common_level(MPI_Comm comm, int n, const int ranks[], char* type_name, int* flag) {
  const char* fn = "MPIX_Get_hw_topo_common_level";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  int err;
  comm_obj* c = comms::intra_arg(fn, comm, err);
  if (!c) return err;
  // Gather first, check this process's arguments after: a bad argument
  // here must not leave the others waiting in the gather.
  std::vector<split_record> all;
  std::string detail;
  if (int e = gather_records(c, local_record(MPI_UNDEFINED, MPI_INFO_NULL, true), all, detail))
    return mpi_raise(fn, c, e, detail);
  if (int e = first_error(all, detail)) return mpi_raise(fn, c, e, detail);
  if (!type_name || !flag) return mpi_raise(fn, c, MPI_ERR_ARG, "null type_name or flag");
  if (n < 1 || !ranks) return mpi_raise(fn, c, MPI_ERR_ARG, "n " + std::to_string(n) + " (at least one rank)");
  std::vector<int> who;
  for (int i = 0; i < n; ++i) {
    if (ranks[i] < 0 || ranks[i] >= c->size())
      return mpi_raise(fn, c, MPI_ERR_RANK,
                       "ranks[" + std::to_string(i) + "] = " + std::to_string(ranks[i]) + " (communicator of " +
                           std::to_string(c->size()) + ")");
    who.push_back(ranks[i]);
  }
  auto level = nmad::topology::hw_common_level(members_of(all), who, order_of(all[static_cast<std::size_t>(who[0])]));
  *flag = level ? 1 : 0;
  put_name(type_name, level ? std::string(nmad::topology::hw_level_name(*level)) : "");
  return MPI_SUCCESS;
}

}  // extern "C"

#pragma weak MPI_Comm_split_type = PMPI_Comm_split_type
#pragma weak MPIX_Comm_hsplit_with_roots = PMPIX_Comm_hsplit_with_roots
#pragma weak MPIX_Get_hw_resource_info = PMPIX_Get_hw_resource_info
#pragma weak MPI_Get_hw_resource_info = PMPI_Get_hw_resource_info
#pragma weak MPIX_Get_hw_topo_common_level = PMPIX_Get_hw_topo_common_level
