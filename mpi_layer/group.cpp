// Groups: ordered sets of processes, held as lists of world ranks.
//
// Handles index a table of their own, under a lock of their own (so group
// calls never contend with communication); handles are not reused, and a
// freed group keeps its slot (marked freed) so a stale handle is reported
// as MPI_ERR_GROUP rather than aliasing a newer group.
#include <algorithm>
#include <memory>
#include <mutex>
#include <set>

#include "mpi_layer/mpi_impl.hpp"

namespace nmad::mpi {

namespace {

struct group_obj {
  std::vector<int> members;  // group rank -> world rank
  bool freed = false;
  int session = 0;           // MPI_SESSION_NULL, or the session it derives from
};

struct group_table {
  std::mutex mu;
  std::vector<std::unique_ptr<group_obj>> groups;  // index = handle
  group_table() {
    groups.push_back(nullptr);                      // MPI_GROUP_NULL
    groups.push_back(std::make_unique<group_obj>());  // MPI_GROUP_EMPTY
  }
};

group_table& table() {
  static group_table* t = new group_table();  // never destroyed (see st())
  return *t;
}

std::string ghandle(MPI_Group g) {
  return g == MPI_GROUP_NULL ? std::string("MPI_GROUP_NULL") : "group " + std::to_string(g);
}

// Looks up g for function fn; raises MPI_ERR_GROUP (on MPI_COMM_WORLD's
// handler, groups have none) if invalid. Returns the error code, 0 if ok.
int get(const char* fn, MPI_Group g, std::vector<int>& out) {
  auto m = group_members(g);
  if (!m) return mpi_raise(fn, nullptr, MPI_ERR_GROUP, "invalid group handle (" + ghandle(g) + ")");
  out = std::move(*m);
  return MPI_SUCCESS;
}

int position(const std::vector<int>& v, int world) {
  auto it = std::find(v.begin(), v.end(), world);
  return it == v.end() ? -1 : static_cast<int>(it - v.begin());
}

// Checks n distinct ranks of a group of size `size`; 0 or an error raised.
int check_ranks(const char* fn, int size, int n, const int ranks[]) {
  if (n < 0) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "negative count " + std::to_string(n));
  if (n > 0 && !ranks) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null ranks array");
  std::vector<bool> seen(size, false);
  for (int i = 0; i < n; ++i) {
    if (ranks[i] < 0 || ranks[i] >= size)
      return mpi_raise(fn, nullptr, MPI_ERR_RANK,
                       "ranks[" + std::to_string(i) + "] = " + std::to_string(ranks[i]) + " not in [0, " +
                           std::to_string(size) + ")");
    if (seen[ranks[i]])
      return mpi_raise(fn, nullptr, MPI_ERR_RANK, "rank " + std::to_string(ranks[i]) + " listed twice");
    seen[ranks[i]] = true;
  }
  return MPI_SUCCESS;
}

// Expands n (first, last, stride) triplets into ranks; 0 or an error raised.
int expand_ranges(const char* fn, int size, int n, int ranges[][3], std::vector<int>& out) {
  if (n < 0) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "negative count " + std::to_string(n));
  if (n > 0 && !ranges) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null ranges array");
  out.clear();
  for (int i = 0; i < n; ++i) {
    const long first = ranges[i][0], last = ranges[i][1], stride = ranges[i][2];
    const std::string which = "ranges[" + std::to_string(i) + "] = (" + std::to_string(first) + ", " +
                              std::to_string(last) + ", " + std::to_string(stride) + ")";
    if (stride == 0) return mpi_raise(fn, nullptr, MPI_ERR_ARG, which + ": zero stride");
    if (first < 0 || first >= size || last < 0 || last >= size)
      return mpi_raise(fn, nullptr, MPI_ERR_RANK, which + ": rank not in [0, " + std::to_string(size) + ")");
    if ((stride > 0 && first > last) || (stride < 0 && first < last))
      continue;  // an empty range: the standard allows it only with no ranks, harmless
    for (long r = first; stride > 0 ? r <= last : r >= last; r += stride) out.push_back(static_cast<int>(r));
  }
  std::vector<bool> seen(size, false);
  for (int r : out) {
    if (seen[r]) return mpi_raise(fn, nullptr, MPI_ERR_RANK, "rank " + std::to_string(r) + " in two ranges");
    seen[r] = true;
  }
  return MPI_SUCCESS;
}

// The new group derives from the session its source group derives from
// (of two groups, the first that does; mixing sessions is erroneous).
int put(const char* fn, std::vector<int> members, MPI_Group* out, MPI_Group from, MPI_Group from2 = MPI_GROUP_NULL) {
  if (!out) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null newgroup");
  int session = group_session(from);
  if (session == 0 && from2 != MPI_GROUP_NULL) session = group_session(from2);
  *out = new_group(std::move(members), session);
  return MPI_SUCCESS;
}

}  // namespace

MPI_Group new_group(std::vector<int> world_ranks, int session) {
  if (world_ranks.empty()) return MPI_GROUP_EMPTY;
  group_table& t = table();
  std::lock_guard g(t.mu);
  auto o = std::make_unique<group_obj>();
  o->members = std::move(world_ranks);
  o->session = session;
  t.groups.push_back(std::move(o));
  return static_cast<MPI_Group>(t.groups.size() - 1);
}

std::optional<std::vector<int>> group_members(MPI_Group h) {
  group_table& t = table();
  std::lock_guard g(t.mu);
  if (h <= 0 || static_cast<std::size_t>(h) >= t.groups.size() || t.groups[h]->freed) return std::nullopt;
  return t.groups[h]->members;
}

int group_session(MPI_Group h) {
  group_table& t = table();
  std::lock_guard g(t.mu);
  if (h <= 0 || static_cast<std::size_t>(h) >= t.groups.size() || t.groups[h]->freed) return 0;
  return t.groups[h]->session;
}

}  // namespace nmad::mpi

using namespace nmad::mpi;

extern "C" {

int PMPI_Comm_group(MPI_Comm comm, MPI_Group* group) {
  if (!check_initialized("MPI_Comm_group")) return MPI_ERR_OTHER;
  comm_obj* c = lookup_comm(comm);
  if (!c) return mpi_raise("MPI_Comm_group", nullptr, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm));
  if (!group) return mpi_raise("MPI_Comm_group", c, MPI_ERR_ARG, "null group");
  *group = new_group(c->local_members(), c->session);
  return MPI_SUCCESS;
}

int PMPI_Comm_remote_group(MPI_Comm comm, MPI_Group* group) {
  if (!check_initialized("MPI_Comm_remote_group")) return MPI_ERR_OTHER;
  comm_obj* c = lookup_comm(comm);
  if (!c)
    return mpi_raise("MPI_Comm_remote_group", nullptr, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm));
  if (!c->inter) return mpi_raise("MPI_Comm_remote_group", c, MPI_ERR_COMM, "not an intercommunicator");
  if (!group) return mpi_raise("MPI_Comm_remote_group", c, MPI_ERR_ARG, "null group");
  *group = new_group(c->world_of, c->session);
  return MPI_SUCCESS;
}

int PMPI_Group_size(MPI_Group group, int* size) {
  if (!check_initialized("MPI_Group_size")) return MPI_ERR_OTHER;
  std::vector<int> m;
  if (int e = get("MPI_Group_size", group, m)) return e;
  if (!size) return mpi_raise("MPI_Group_size", nullptr, MPI_ERR_ARG, "null size");
  *size = static_cast<int>(m.size());
  return MPI_SUCCESS;
}

int PMPI_Group_rank(MPI_Group group, int* rank) {
  if (!check_initialized("MPI_Group_rank")) return MPI_ERR_OTHER;
  std::vector<int> m;
  if (int e = get("MPI_Group_rank", group, m)) return e;
  if (!rank) return mpi_raise("MPI_Group_rank", nullptr, MPI_ERR_ARG, "null rank");
  const int p = position(m, st().world_rank);
  *rank = p < 0 ? MPI_UNDEFINED : p;
  return MPI_SUCCESS;
}

int PMPI_Group_translate_ranks(MPI_Group group1, int n, const int ranks1[], MPI_Group group2, int ranks2[]) {
  const char* fn = "MPI_Group_translate_ranks";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  std::vector<int> a, b;
  if (int e = get(fn, group1, a)) return e;
  if (int e = get(fn, group2, b)) return e;
  if (n < 0) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "negative count " + std::to_string(n));
  if (n > 0 && (!ranks1 || !ranks2)) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null ranks array");
  for (int i = 0; i < n; ++i) {
    const int r = ranks1[i];
    if (r == MPI_PROC_NULL) continue;
    if (r < 0 || r >= static_cast<int>(a.size()))
      return mpi_raise(fn, nullptr, MPI_ERR_RANK,
                       "ranks1[" + std::to_string(i) + "] = " + std::to_string(r) + " not in [0, " +
                           std::to_string(a.size()) + ")");
  }
  for (int i = 0; i < n; ++i) {
    if (ranks1[i] == MPI_PROC_NULL) {
      ranks2[i] = MPI_PROC_NULL;
      continue;
    }
    const int p = position(b, a[ranks1[i]]);
    ranks2[i] = p < 0 ? MPI_UNDEFINED : p;
  }
  return MPI_SUCCESS;
}

int PMPI_Group_compare(MPI_Group group1, MPI_Group group2, int* result) {
  const char* fn = "MPI_Group_compare";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  std::vector<int> a, b;
  if (int e = get(fn, group1, a)) return e;
  if (int e = get(fn, group2, b)) return e;
  if (!result) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null result");
  if (a == b) *result = MPI_IDENT;
  else {
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    *result = a == b ? MPI_SIMILAR : MPI_UNEQUAL;
  }
  return MPI_SUCCESS;
}

int PMPI_Group_union(MPI_Group group1, MPI_Group group2, MPI_Group* newgroup) {
  const char* fn = "MPI_Group_union";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  std::vector<int> a, b;
  if (int e = get(fn, group1, a)) return e;
  if (int e = get(fn, group2, b)) return e;
  std::set<int> in_a(a.begin(), a.end());
  for (int w : b)
    if (!in_a.count(w)) a.push_back(w);
  return put(fn, std::move(a), newgroup, group1, group2);
}

// Members of group1, in its order, that are (intersection) or are not
// (difference) in group2.
static int filter(const char* fn, MPI_Group group1, MPI_Group group2, bool keep_common, MPI_Group* newgroup) {
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  std::vector<int> a, b, out;
  if (int e = get(fn, group1, a)) return e;
  if (int e = get(fn, group2, b)) return e;
  std::set<int> in_b(b.begin(), b.end());
  for (int w : a)
    if ((in_b.count(w) != 0) == keep_common) out.push_back(w);
  return put(fn, std::move(out), newgroup, group1, group2);
}

int PMPI_Group_intersection(MPI_Group group1, MPI_Group group2, MPI_Group* newgroup) {
  return filter("MPI_Group_intersection", group1, group2, true, newgroup);
}

int PMPI_Group_difference(MPI_Group group1, MPI_Group group2, MPI_Group* newgroup) {
  return filter("MPI_Group_difference", group1, group2, false, newgroup);
}

int PMPI_Group_incl(MPI_Group group, int n, const int ranks[], MPI_Group* newgroup) {
  const char* fn = "MPI_Group_incl";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  std::vector<int> a, out;
  if (int e = get(fn, group, a)) return e;
  if (int e = check_ranks(fn, static_cast<int>(a.size()), n, ranks)) return e;
  for (int i = 0; i < n; ++i) out.push_back(a[ranks[i]]);
  return put(fn, std::move(out), newgroup, group);
}

int PMPI_Group_excl(MPI_Group group, int n, const int ranks[], MPI_Group* newgroup) {
  const char* fn = "MPI_Group_excl";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  std::vector<int> a, out;
  if (int e = get(fn, group, a)) return e;
  if (int e = check_ranks(fn, static_cast<int>(a.size()), n, ranks)) return e;
  std::vector<bool> drop(a.size(), false);
  for (int i = 0; i < n; ++i) drop[ranks[i]] = true;
  for (std::size_t r = 0; r < a.size(); ++r)
    if (!drop[r]) out.push_back(a[r]);
  return put(fn, std::move(out), newgroup, group);
}

int PMPI_Group_range_incl(MPI_Group group, int n, int ranges[][3], MPI_Group* newgroup) {
  const char* fn = "MPI_Group_range_incl";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  std::vector<int> a, ranks, out;
  if (int e = get(fn, group, a)) return e;
  if (int e = expand_ranges(fn, static_cast<int>(a.size()), n, ranges, ranks)) return e;
  for (int r : ranks) out.push_back(a[r]);
  return put(fn, std::move(out), newgroup, group);
}

int PMPI_Group_range_excl(MPI_Group group, int n, int ranges[][3], MPI_Group* newgroup) {
  const char* fn = "MPI_Group_range_excl";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  std::vector<int> a, ranks, out;
  if (int e = get(fn, group, a)) return e;
  if (int e = expand_ranges(fn, static_cast<int>(a.size()), n, ranges, ranks)) return e;
  std::vector<bool> drop(a.size(), false);
  for (int r : ranks) drop[r] = true;
  for (std::size_t r = 0; r < a.size(); ++r)
    if (!drop[r]) out.push_back(a[r]);
  return put(fn, std::move(out), newgroup, group);
}

int PMPI_Group_free(MPI_Group* group) {
  const char* fn = "MPI_Group_free";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (!group) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null group");
  if (!group_members(*group))
    return mpi_raise(fn, nullptr, MPI_ERR_GROUP, "invalid group handle (" + ghandle(*group) + ")");
  // MPI_GROUP_EMPTY is what empty results return: freeing it only resets
  // the caller's handle.
  if (*group != MPI_GROUP_EMPTY) {
    group_table& t = table();
    std::lock_guard g(t.mu);
    t.groups[*group]->freed = true;
    t.groups[*group]->members.clear();
    t.groups[*group]->members.shrink_to_fit();
  }
  *group = MPI_GROUP_NULL;
  return MPI_SUCCESS;
}

}  // extern "C"

#pragma weak MPI_Comm_group = PMPI_Comm_group
#pragma weak MPI_Comm_remote_group = PMPI_Comm_remote_group
#pragma weak MPI_Group_size = PMPI_Group_size
#pragma weak MPI_Group_rank = PMPI_Group_rank
#pragma weak MPI_Group_translate_ranks = PMPI_Group_translate_ranks
#pragma weak MPI_Group_compare = PMPI_Group_compare
#pragma weak MPI_Group_union = PMPI_Group_union
#pragma weak MPI_Group_intersection = PMPI_Group_intersection
#pragma weak MPI_Group_difference = PMPI_Group_difference
#pragma weak MPI_Group_incl = PMPI_Group_incl
#pragma weak MPI_Group_excl = PMPI_Group_excl
#pragma weak MPI_Group_range_incl = PMPI_Group_range_incl
#pragma weak MPI_Group_range_excl = PMPI_Group_range_excl
#pragma weak MPI_Group_free = PMPI_Group_free
