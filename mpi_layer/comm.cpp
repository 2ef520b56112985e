// Communicators: MPI_COMM_WORLD/SELF, size/rank, dup, split, create,
// create_group, free, compare, names, info hints. Dup, split and create of
// an intercommunicator agree over both its groups (the union team). How the
// communicator files fit together: comm_impl.hpp.

#include <algorithm>
#include <cstring>
#include <mutex>

#include "mpi_layer/comm_impl.hpp"

namespace nmad::mpi::comms {

comm_obj* add_comm(state& s, std::unique_ptr<comm_obj> c, int slot) {
  c->handle = static_cast<MPI_Comm>(s.comms.size());
  if (slot >= 0) set_slot(*c, slot);
  comm_obj* p = c.get();
  s.comms.push_back(std::move(c));
  return p;
}

comm_obj* make_comm(state& s, int slot, std::vector<int> world_of, int my_world) {
  auto c = std::make_unique<comm_obj>();
  c->world_of = std::move(world_of);
  c->comm_of.assign(s.world_size, -1);
  for (int i = 0; i < c->size(); ++i) {
    c->comm_of[c->world_of[i]] = i;
    if (c->world_of[i] == my_world) c->rank = i;
  }
  return add_comm(s, std::move(c), slot);
}

comm_obj* make_inter(state& s, int slot, std::vector<int> local, std::vector<int> remote) {
  auto c = std::make_unique<comm_obj>();
  c->inter = true;
  c->world_of = std::move(remote);
  c->local_world_of = std::move(local);
  c->comm_of.assign(s.world_size, -1);
  for (int i = 0; i < c->size(); ++i) c->comm_of[c->world_of[i]] = i;
  for (int i = 0; i < c->local_size(); ++i)
    if (c->local_world_of[i] == s.world_rank) c->rank = i;
  return add_comm(s, std::move(c), slot);
}

comm_obj* intra_arg(const char* fn, MPI_Comm comm, int& err) {
  comm_obj* c = lookup_comm(comm);
  err = MPI_SUCCESS;
  if (!c) err = mpi_raise(fn, nullptr, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm));
  else if (c->inter)
    err = mpi_raise(fn, c, MPI_ERR_COMM, "communicator " + std::to_string(comm) + " is an intercommunicator");
  return err ? nullptr : c;
}

namespace {

// The members of group g, which must be a subset of c's (local) group
// (else MPI_ERR_GROUP is raised), and this process's position in it (-1:
// none).
int group_in_comm(const char* fn, comm_obj* c, MPI_Group g, std::vector<int>& world, int& my_pos) {
  auto m = group_members(g);
  if (!m) return mpi_raise(fn, c, MPI_ERR_GROUP, "invalid group handle " + std::to_string(g));
  const auto& local = c->local_members();
  for (int w : *m)
    if (std::find(local.begin(), local.end(), w) == local.end())
      return mpi_raise(fn, c, MPI_ERR_GROUP,
                       "the group has world rank " + std::to_string(w) + ", which is not in the communicator" +
                           (c->inter ? "'s local group" : ""));
  world = std::move(*m);
  my_pos = -1;
  for (int i = 0; i < static_cast<int>(world.size()); ++i)
    if (world[i] == st().world_rank) my_pos = i;
  return MPI_SUCCESS;
}

// Indices in [lo, hi) of the entries of this color, ordered by (key, index).
std::vector<int> members_of(const std::vector<split_entry>& entries, int color, int lo, int hi) {
  std::vector<std::pair<int, int>> m;
  for (int r = lo; r < hi; ++r)
    if (entries[r].color == color) m.emplace_back(entries[r].key, r);
  std::stable_sort(m.begin(), m.end());
  std::vector<int> out;
  for (auto& [k, r] : m) out.push_back(r);
  return out;
}

int split(const char* fn, comm_obj* parent, int color, int key, MPI_Comm* newcomm) {
  state& s = st();
  std::vector<split_entry> entries;
  int slot = -1;
  if (int e = agree(fn, parent, team_of(*parent), color, key, entries, slot)) return e;
  if (color == MPI_UNDEFINED) {
    *newcomm = MPI_COMM_NULL;
    return MPI_SUCCESS;
  }
  std::vector<int> world_of;
  for (int r : members_of(entries, color, 0, parent->size())) world_of.push_back(parent->world_of[r]);
  std::lock_guard g(s.mu);
  comm_obj* c = make_comm(s, slot, std::move(world_of), s.world_rank);
  c->errhandler = parent->errhandler;
  c->session = parent->session;  // derived from the same session
  *newcomm = c->handle;
  return MPI_SUCCESS;
}

// Split of an intercommunicator: every process of both groups takes part;
// the new intercommunicator joins the local and remote members of one
// color (MPI_COMM_NULL if either side has none).
int inter_split(const char* fn, comm_obj* parent, int color, int key, MPI_Comm* newcomm) {
  state& s = st();
  bool local_first = false;
  const team t = union_team(*parent, local_first);
  std::vector<split_entry> entries;
  int slot = -1;
  if (int e = agree(fn, parent, t, color, key, entries, slot)) return e;
  const int ls = parent->local_size(), rs = parent->size();
  const int llo = local_first ? 0 : rs, rlo = local_first ? ls : 0;
  std::vector<int> local, remote;
  if (color != MPI_UNDEFINED) {
    for (int i : members_of(entries, color, llo, llo + ls)) local.push_back(t.world_of[i]);
    for (int i : members_of(entries, color, rlo, rlo + rs)) remote.push_back(t.world_of[i]);
  }
  if (color == MPI_UNDEFINED || remote.empty()) {
    // A reservation made by the confirmation round is released.
    bool any = false;
    for (auto& e : entries) any |= e.confirm != 0;
    if (color != MPI_UNDEFINED && any) unreserve(slot);
    *newcomm = MPI_COMM_NULL;
    return MPI_SUCCESS;
  }
  std::lock_guard g(s.mu);
  comm_obj* c = make_inter(s, slot, std::move(local), std::move(remote));
  c->errhandler = parent->errhandler;
  c->session = parent->session;  // derived from the same session
  *newcomm = c->handle;
  return MPI_SUCCESS;
}

// The "nmad_priority" hint: -1 when absent, else 0..255; a value that is
// not a whole number in that range is an error (detail says why) and
// nothing of the info is applied.
constexpr const char* kPriorityHint = "nmad_priority";
int priority_hint(const info_entries& e, int& prio, std::string& detail) {
  prio = -1;
  for (auto& [k, v] : e) {
    if (k != kPriorityHint) continue;
    std::size_t used = 0;
    long n = -1;
    try {
      n = std::stol(v, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    while (used < v.size() && v[used] == ' ') ++used;
    if (v.empty() || used != v.size() || n < 0 || n > 255) {
      detail = std::string(kPriorityHint) + " must be a whole number from 0 to 255, not '" + v + "'";
      return MPI_ERR_INFO_VALUE;
    }
    prio = static_cast<int>(n);
  }
  return MPI_SUCCESS;
}

// MPI_Comm_dup and MPI_Comm_idup: a communicator with the same group(s),
// a new context, the parent's error handler, info hints and the copies its
// attributes' copy callbacks make.
int dup(const char* fn, comm_obj* c, MPI_Comm* newcomm) {
  int e = c->inter ? inter_split(fn, c, 0, c->rank, newcomm) : split(fn, c, 0, c->rank, newcomm);
  if (e != MPI_SUCCESS) return e;
  comm_obj* n = lookup_comm(*newcomm);
  {
    state& s = st();
    std::lock_guard g(s.mu);
    n->hints = c->hints;
    n->send_priority.store(c->send_priority.load(std::memory_order_relaxed), std::memory_order_relaxed);
  }
  copy_topology(c->handle, n->handle);
  std::string detail;
  e = copy_attrs(*c, *n, detail);
  if (e != MPI_SUCCESS) {
    MPI_Comm tmp = *newcomm;
    PMPI_Comm_free(&tmp);
    *newcomm = MPI_COMM_NULL;
    return mpi_raise(fn, c, e, detail);
  }
  return MPI_SUCCESS;
}

}  // namespace

int hints_of(const char* fn, comm_obj* c, MPI_Info info, info_entries& hints, int& prio) {
  if (info != MPI_INFO_NULL) {
    auto e = info_get_entries(info);
    if (!e) return mpi_raise(fn, c, MPI_ERR_INFO, "invalid info handle " + std::to_string(info));
    hints = std::move(*e);
  }
  std::string detail;
  if (int pe = priority_hint(hints, prio, detail)) return mpi_raise(fn, c, pe, detail);
  return MPI_SUCCESS;
}

}  // namespace nmad::mpi::comms

namespace nmad::mpi {

int comm_split(const char* fn, comm_obj* parent, int color, int key, MPI_Comm* newcomm) {
  return comms::split(fn, parent, color, key, newcomm);
}

int comm_allgather(const comm_obj& c, const void* mine, std::size_t n, std::vector<std::byte>& all,
                   std::string& detail) {
  return comms::allgather_team(comms::team_of(c), mine, n, all, detail);
}

void init_comms(int world_rank, int world_size) {
  state& s = st();
  std::lock_guard g(s.mu);
  s.comms.clear();
  comms::clear_slots();
  s.comms.push_back(nullptr);  // MPI_COMM_NULL
  std::vector<int> all(world_size);
  for (int i = 0; i < world_size; ++i) all[i] = i;
  comm_obj* world = comms::make_comm(s, 0, std::move(all), world_rank);
  world->name = "MPI_COMM_WORLD";
  comm_obj* self = comms::make_comm(s, 1, {world_rank}, world_rank);
  self->name = "MPI_COMM_SELF";
  s.predefined_comms[MPI_COMM_WORLD].store(world, std::memory_order_release);
  s.predefined_comms[MPI_COMM_SELF].store(self, std::memory_order_release);
}

comm_obj* lookup_comm_table(MPI_Comm c) {
  state& s = st();
  std::lock_guard g(s.mu);
  if (c <= 0 || static_cast<std::size_t>(c) >= s.comms.size()) return nullptr;
  comm_obj* p = s.comms[c].get();
  return (p && !p->freed && p->ready.load(std::memory_order_acquire)) ? p : nullptr;
}

comm_obj* lookup_comm_or_pending(MPI_Comm c) {
  if (comm_obj* p = lookup_comm(c)) return p;
  state& s = st();
  std::lock_guard g(s.mu);
  if (c <= 0 || static_cast<std::size_t>(c) >= s.comms.size()) return nullptr;
  comm_obj* p = s.comms[c].get();
  return p && !p->freed ? p : nullptr;
}

int check_buffer(MPI_Count count, MPI_Datatype t, const void* buf, std::string& detail) {
  if (count < 0) {
    detail = "count " + std::to_string(count) + " is negative";
    return MPI_ERR_COUNT;
  }
  if (type_size(t) < 0) {
    detail = "datatype " + std::to_string(t) + " is not a valid datatype";
    return MPI_ERR_TYPE;
  }
  if (!buf && count > 0 && type_size(t) > 0) {
    detail = "null buffer with count " + std::to_string(count);
    return MPI_ERR_BUFFER;
  }
  return MPI_SUCCESS;
}

}  // namespace nmad::mpi

using namespace nmad::mpi;
using namespace nmad::mpi::comms;

extern "C" {

int PMPI_Comm_size(MPI_Comm comm, int* size) {
  if (!check_initialized("MPI_Comm_size")) return MPI_ERR_OTHER;
  comm_obj* c = lookup_comm(comm);
  if (!c) return mpi_raise("MPI_Comm_size", nullptr, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm));
  if (!size) return mpi_raise("MPI_Comm_size", c, MPI_ERR_ARG, "null size");
  *size = c->local_size();
  return MPI_SUCCESS;
}

int PMPI_Comm_rank(MPI_Comm comm, int* rank) {
  if (!check_initialized("MPI_Comm_rank")) return MPI_ERR_OTHER;
  comm_obj* c = lookup_comm(comm);
  if (!c) return mpi_raise("MPI_Comm_rank", nullptr, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm));
  if (!rank) return mpi_raise("MPI_Comm_rank", c, MPI_ERR_ARG, "null rank");
  *rank = c->rank;
  return MPI_SUCCESS;
}

int PMPI_Comm_remote_size(MPI_Comm comm, int* size) {
  const char* fn = "MPI_Comm_remote_size";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  comm_obj* c = lookup_comm(comm);
  if (!c) return mpi_raise(fn, nullptr, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm));
  if (!c->inter) return mpi_raise(fn, c, MPI_ERR_COMM, "not an intercommunicator");
  if (!size) return mpi_raise(fn, c, MPI_ERR_ARG, "null size");
  *size = c->size();
  return MPI_SUCCESS;
}

int PMPI_Comm_test_inter(MPI_Comm comm, int* flag) {
  const char* fn = "MPI_Comm_test_inter";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  comm_obj* c = lookup_comm(comm);
  if (!c) return mpi_raise(fn, nullptr, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm));
  if (!flag) return mpi_raise(fn, c, MPI_ERR_ARG, "null flag");
  *flag = c->inter ? 1 : 0;
  return MPI_SUCCESS;
}

int PMPI_Comm_dup(MPI_Comm comm, MPI_Comm* newcomm) {
  if (!check_initialized("MPI_Comm_dup")) return MPI_ERR_OTHER;
  comm_obj* c = lookup_comm(comm);
  if (!c) return mpi_raise("MPI_Comm_dup", nullptr, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm));
  if (!newcomm) return mpi_raise("MPI_Comm_dup", c, MPI_ERR_ARG, "null newcomm");
  return dup("MPI_Comm_dup", c, newcomm);
}

// MPI-3.1 6.4.2: exactly MPI_Comm_dup, except that the new communicator's
// hints are those of info (MPI_INFO_NULL: none), not the parent's.
int PMPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm* newcomm) {
  const char* fn = "MPI_Comm_dup_with_info";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  comm_obj* c = lookup_comm(comm);
  if (!c) return mpi_raise(fn, nullptr, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm));
  if (!newcomm) return mpi_raise(fn, c, MPI_ERR_ARG, "null newcomm");
  info_entries hints;
  int prio = -1;
  if (int e = hints_of(fn, c, info, hints, prio)) return e;
  int e = dup(fn, c, newcomm);
  if (e != MPI_SUCCESS) return e;
  comm_obj* n = lookup_comm(*newcomm);
  state& s = st();
  std::lock_guard g(s.mu);
  n->hints = std::move(hints);
  n->send_priority.store(static_cast<std::uint8_t>(prio < 0 ? 0 : prio), std::memory_order_relaxed);
  return MPI_SUCCESS;
}

int PMPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm* newcomm) {
  if (!check_initialized("MPI_Comm_split")) return MPI_ERR_OTHER;
  comm_obj* c = lookup_comm(comm);
  if (!c) return mpi_raise("MPI_Comm_split", nullptr, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm));
  if (!newcomm) return mpi_raise("MPI_Comm_split", c, MPI_ERR_ARG, "null newcomm");
  if (color < 0 && color != MPI_UNDEFINED)
    return mpi_raise("MPI_Comm_split", c, MPI_ERR_ARG, "negative color " + std::to_string(color));
  if (c->inter) return inter_split("MPI_Comm_split", c, color, key, newcomm);
  return split("MPI_Comm_split", c, color, key, newcomm);
}

// PMPI_Comm_split_type: hwsplit.cpp.

int PMPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm* newcomm) {
  const char* fn = "MPI_Comm_create";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  comm_obj* c = lookup_comm(comm);
  if (!c) return mpi_raise(fn, nullptr, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm));
  if (!newcomm) return mpi_raise(fn, c, MPI_ERR_ARG, "null newcomm");
  std::vector<int> world;
  int pos = -1;
  if (int e = group_in_comm(fn, c, group, world, pos)) return e;
  // A split whose key is the rank in the group: the group's order. On an
  // intercommunicator each side gives a subgroup of its local group; the
  // result joins them (MPI_COMM_NULL where either is empty).
  if (c->inter) return inter_split(fn, c, pos < 0 ? MPI_UNDEFINED : 0, pos, newcomm);
  // MPI-3.1 6.4.2: on an intracommunicator the processes may pass different,
  // disjoint groups, each giving its own communicator. The color is the
  // world rank of the group's first member: the same for all members of a
  // group, different for disjoint groups.
  return split(fn, c, pos < 0 ? MPI_UNDEFINED : world[0], pos, newcomm);
}

int PMPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm* newcomm) {
  const char* fn = "MPI_Comm_create_group";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  int err;
  comm_obj* c = intra_arg(fn, comm, err);
  if (!c) return err;
  if (!newcomm) return mpi_raise(fn, c, MPI_ERR_ARG, "null newcomm");
  if (tag < 0) return mpi_raise(fn, c, MPI_ERR_TAG, "tag " + std::to_string(tag) + " is negative");
  std::vector<int> world;
  int pos = -1;
  if (int e = group_in_comm(fn, c, group, world, pos)) return e;
  if (pos < 0) {  // not a member: nothing to agree on
    *newcomm = MPI_COMM_NULL;
    return MPI_SUCCESS;
  }
  // Only the group agrees, on the parent's collective context, with the
  // caller's tag keeping concurrent creations from one parent apart.
  team t{world, pos, c->coll_ctx, user_internal_tag(tag), user_internal_tag(tag)};
  std::vector<split_entry> entries;
  int slot = -1;
  if (int e = agree(fn, c, t, 0, pos, entries, slot)) return e;
  state& s = st();
  std::lock_guard g(s.mu);
  comm_obj* n = make_comm(s, slot, std::move(world), s.world_rank);
  n->errhandler = c->errhandler;
  n->session = c->session;  // derived from the same session
  *newcomm = n->handle;
  return MPI_SUCCESS;
}

int PMPI_Comm_free(MPI_Comm* comm) {
  if (!check_initialized("MPI_Comm_free")) return MPI_ERR_OTHER;
  if (!comm) return mpi_raise("MPI_Comm_free", nullptr, MPI_ERR_ARG, "null comm");
  comm_obj* c = lookup_comm(*comm);
  if (!c) return mpi_raise("MPI_Comm_free", nullptr, MPI_ERR_COMM, "invalid communicator " + std::to_string(*comm));
  if (*comm == MPI_COMM_WORLD || *comm == MPI_COMM_SELF)
    return mpi_raise("MPI_Comm_free", c, MPI_ERR_COMM, "predefined communicators cannot be freed");
  // Attributes go first (their delete callbacks may still use the
  // communicator, and may refuse: then it is not freed).
  std::string detail;
  if (int e = delete_attrs(*c, detail)) return mpi_raise("MPI_Comm_free", c, e, detail);
  bsend_comm_free(*c);  // its buffer goes once the messages in it have left
  state& s = st();
  std::lock_guard g(s.mu);
  // The object stays (handles are not reused); its slot becomes free here.
  c->freed = true;
  unreserve(c->slot);
  *comm = MPI_COMM_NULL;
  return MPI_SUCCESS;
}

int PMPI_Comm_compare(MPI_Comm comm1, MPI_Comm comm2, int* result) {
  if (!check_initialized("MPI_Comm_compare")) return MPI_ERR_OTHER;
  comm_obj* a = lookup_comm(comm1);
  comm_obj* b = lookup_comm(comm2);
  if (!a || !b)
    return mpi_raise("MPI_Comm_compare", nullptr, MPI_ERR_COMM,
                     "invalid communicator " + std::to_string(a ? comm2 : comm1));
  if (!result) return mpi_raise("MPI_Comm_compare", a, MPI_ERR_ARG, "null result");
  auto sorted = [](std::vector<int> v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  // Intercommunicators compare both groups.
  if (a == b) *result = MPI_IDENT;
  else if (a->inter != b->inter) *result = MPI_UNEQUAL;
  else if (a->world_of == b->world_of && a->local_world_of == b->local_world_of) *result = MPI_CONGRUENT;
  else if (sorted(a->world_of) == sorted(b->world_of) && sorted(a->local_world_of) == sorted(b->local_world_of))
    *result = MPI_SIMILAR;
  else *result = MPI_UNEQUAL;
  return MPI_SUCCESS;
}

int PMPI_Comm_set_name(MPI_Comm comm, const char* comm_name) {
  const char* fn = "MPI_Comm_set_name";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  comm_obj* c = lookup_comm_or_pending(comm);  // also while an idup creates it
  if (!c) return mpi_raise(fn, nullptr, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm));
  if (!comm_name) return mpi_raise(fn, c, MPI_ERR_ARG, "null name");
  state& s = st();
  std::lock_guard g(s.mu);
  // Longer names are truncated to what MPI_Comm_get_name can return.
  c->name.assign(comm_name, strnlen(comm_name, MPI_MAX_OBJECT_NAME - 1));
  return MPI_SUCCESS;
}

int PMPI_Comm_get_name(MPI_Comm comm, char* comm_name, int* resultlen) {
  const char* fn = "MPI_Comm_get_name";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  comm_obj* c = lookup_comm_or_pending(comm);  // also while an idup creates it
  if (!c) return mpi_raise(fn, nullptr, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm));
  if (!comm_name || !resultlen) return mpi_raise(fn, c, MPI_ERR_ARG, "null name or resultlen");
  state& s = st();
  std::lock_guard g(s.mu);
  std::memcpy(comm_name, c->name.c_str(), c->name.size() + 1);
  *resultlen = static_cast<int>(c->name.size());
  return MPI_SUCCESS;
}

int PMPI_Comm_set_info(MPI_Comm comm, MPI_Info info) {
  const char* fn = "MPI_Comm_set_info";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  comm_obj* c = lookup_comm(comm);
  if (!c) return mpi_raise(fn, nullptr, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm));
  auto e = info_get_entries(info);
  if (!e) return mpi_raise(fn, c, MPI_ERR_INFO, "invalid info handle " + std::to_string(info));
  int prio = -1;
  std::string detail;
  if (int pe = priority_hint(*e, prio, detail)) return mpi_raise(fn, c, pe, detail);
  state& s = st();
  std::lock_guard g(s.mu);
  // One hint is interpreted ("nmad_priority": the engine priority of this
  // communicator's point-to-point sends); all are kept and returned by
  // Comm_get_info.
  if (prio >= 0) c->send_priority.store(static_cast<std::uint8_t>(prio), std::memory_order_relaxed);
  for (auto& [k, v] : *e) {
    auto it = std::find_if(c->hints.begin(), c->hints.end(), [&](auto& h) { return h.first == k; });
    if (it != c->hints.end()) it->second = v;
    else c->hints.emplace_back(k, v);
  }
  return MPI_SUCCESS;
}

int PMPI_Comm_get_info(MPI_Comm comm, MPI_Info* info_used) {
  const char* fn = "MPI_Comm_get_info";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  comm_obj* c = lookup_comm(comm);
  if (!c) return mpi_raise(fn, nullptr, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm));
  if (!info_used) return mpi_raise(fn, c, MPI_ERR_ARG, "null info_used");
  info_entries e;
  {
    state& s = st();
    std::lock_guard g(s.mu);
    e = c->hints;
  }
  *info_used = new_info(std::move(e));
  return MPI_SUCCESS;
}

}  // extern "C"

#pragma weak MPI_Comm_size = PMPI_Comm_size
#pragma weak MPI_Comm_rank = PMPI_Comm_rank
#pragma weak MPI_Comm_remote_size = PMPI_Comm_remote_size
#pragma weak MPI_Comm_test_inter = PMPI_Comm_test_inter
#pragma weak MPI_Comm_dup = PMPI_Comm_dup
#pragma weak MPI_Comm_dup_with_info = PMPI_Comm_dup_with_info
#pragma weak MPI_Comm_split = PMPI_Comm_split
#pragma weak MPI_Comm_create = PMPI_Comm_create
#pragma weak MPI_Comm_create_group = PMPI_Comm_create_group
#pragma weak MPI_Comm_free = PMPI_Comm_free
#pragma weak MPI_Comm_compare = PMPI_Comm_compare
#pragma weak MPI_Comm_set_name = PMPI_Comm_set_name
#pragma weak MPI_Comm_get_name = PMPI_Comm_get_name
#pragma weak MPI_Comm_set_info = PMPI_Comm_set_info
#pragma weak MPI_Comm_get_info = PMPI_Comm_get_info
