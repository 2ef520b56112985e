// Communicators: MPI_COMM_WORLD/SELF, size/rank, dup, split, free, compare.
//
// Context agreement: a communicator uses context slot i (p2p context 2i,
// internal collective context 2i+1). Every process keeps a mask of the slots
// its live communicators use. Creating communicators from a parent is
// collective over the parent: one internal allgather on the parent's
// collective context carries (color, key, used-slot mask) from every member;
// every member then computes the same result: the lowest slot free in the
// union of the masks. Disjoint children of one split share that slot, which
// is safe because they have no member in common. A slot is reused only once
// every member of the new group has freed it (it is absent from all masks).
// Under MPI_THREAD_MULTIPLE, creations on different communicators may run
// concurrently in several threads of a process and pick the same slot: a
// second agreement round (reserve locally, all members confirm, else all
// retry) makes the choice safe without a process-wide lock, which could
// deadlock when processes enter the creations in different orders.
#include <algorithm>
#include <cstring>

#include "mpi_layer/mpi_impl.hpp"

namespace nmad::mpi {

namespace {

comm_obj* make_comm(state& s, int slot, std::vector<int> world_of, int my_world) {
  auto c = std::make_unique<comm_obj>();
  c->handle = static_cast<MPI_Comm>(s.comms.size());
  c->slot = slot;
  c->p2p_ctx = static_cast<std::uint32_t>(2 * slot);
  c->coll_ctx = static_cast<std::uint32_t>(2 * slot + 1);
  c->world_of = std::move(world_of);
  c->comm_of.assign(s.world_size, -1);
  for (int i = 0; i < c->size(); ++i) {
    c->comm_of[c->world_of[i]] = i;
    if (c->world_of[i] == my_world) c->rank = i;
  }
  s.used_slots[slot / 32] |= 1u << (slot % 32);
  comm_obj* p = c.get();
  s.comms.push_back(std::move(c));
  return p;
}

// Gathers n bytes from every member of c at every member (through c's rank
// 0, on c's collective context). Returns an MPI error code.
int allgather_internal(comm_obj& c, const void* mine, std::size_t n, std::vector<std::byte>& out,
                       std::string& detail) {
  nmad::session& s = *st().session;
  const int size = c.size();
  out.assign(n * size, std::byte{0});
  const nmad::tag_t tg = engine_tag(c.coll_ctx, kTagGather), tb = engine_tag(c.coll_ctx, kTagBcast);
  auto check = [&](nmad::errc e, nmad::request& r) {
    if (e == nmad::errc::ok) return true;
    detail = r.error_message();
    return false;
  };
  if (c.rank == 0) {
    std::memcpy(out.data(), mine, n);
    auto reqs = std::make_unique<nmad::request[]>(size);
    int err = MPI_SUCCESS;
    for (int r = 1; r < size; ++r)
      s.irecv(c.world_of[r], tg, out.data() + r * n, n, reqs[r]);
    for (int r = 1; r < size; ++r)
      if (!check(s.wait(reqs[r]), reqs[r])) err = from_errc(reqs[r].error());
    if (err != MPI_SUCCESS) return err;
    for (int r = 1; r < size; ++r) s.isend(c.world_of[r], tb, out.data(), out.size(), reqs[r]);
    for (int r = 1; r < size; ++r)
      if (!check(s.wait(reqs[r]), reqs[r])) err = from_errc(reqs[r].error());
    return err;
  }
  nmad::request sr, rr;
  s.isend(c.world_of[0], tg, mine, n, sr);
  s.irecv(c.world_of[0], tb, out.data(), out.size(), rr);
  const bool ok_s = check(s.wait(sr), sr);
  const bool ok_r = check(s.wait(rr), rr);
  if (!ok_s) return from_errc(sr.error());
  if (!ok_r) return from_errc(rr.error());
  return MPI_SUCCESS;
}

struct split_entry {
  int color;
  int key;
  std::uint32_t used[kContextSlots / 32];
};

int split(const char* fn, comm_obj* parent, int color, int key, MPI_Comm* newcomm) {
  state& s = st();
  const int n = parent->size();
  std::vector<split_entry> entries(n);
  int slot = -1;
  for (;;) {
    split_entry mine{};
    mine.color = color;
    mine.key = key;
    {
      std::lock_guard g(s.mu);
      std::memcpy(mine.used, s.used_slots.data(), sizeof mine.used);
    }
    std::vector<std::byte> all;
    std::string detail;
    int err = allgather_internal(*parent, &mine, sizeof mine, all, detail);
    if (err != MPI_SUCCESS) return mpi_raise(fn, parent, err, detail);
    std::memcpy(entries.data(), all.data(), all.size());
    std::uint32_t used[kContextSlots / 32] = {};
    for (const auto& e : entries)
      for (int w = 0; w < kContextSlots / 32; ++w) used[w] |= e.used[w];
    slot = -1;
    for (int i = 0; i < kContextSlots && slot < 0; ++i)
      if (!(used[i / 32] & (1u << (i % 32)))) slot = i;
    if (slot < 0)
      return mpi_raise(fn, parent, MPI_ERR_INTERN, "no free communicator context (too many live communicators)");
    if (s.thread_level < MPI_THREAD_MULTIPLE) break;
    // Another thread of this process may have taken the slot since the
    // snapshot (a concurrent creation on another communicator): reserve it
    // now, and agree with the other members; if anyone lost the race, all
    // release and try again with fresh masks.
    int ok = 1;
    const std::uint32_t bit = 1u << (slot % 32);
    {
      std::lock_guard g(s.mu);
      if (color != MPI_UNDEFINED) {
        if (s.used_slots[slot / 32] & bit) ok = 0;
        else s.used_slots[slot / 32] |= bit;
      }
    }
    std::vector<std::byte> oks;
    err = allgather_internal(*parent, &ok, sizeof ok, oks, detail);
    if (err != MPI_SUCCESS) return mpi_raise(fn, parent, err, detail);
    bool all_ok = true;
    for (int r = 0; r < n; ++r) {
      int v;
      std::memcpy(&v, oks.data() + r * sizeof v, sizeof v);
      all_ok &= v == 1;
    }
    if (all_ok) break;
    if (ok && color != MPI_UNDEFINED) {
      std::lock_guard g(s.mu);
      s.used_slots[slot / 32] &= ~bit;
    }
    std::this_thread::yield();
  }
  if (color == MPI_UNDEFINED) {
    *newcomm = MPI_COMM_NULL;
    return MPI_SUCCESS;
  }
  std::vector<std::pair<int, int>> members;  // (key, parent rank)
  for (int r = 0; r < n; ++r)
    if (entries[r].color == color) members.emplace_back(entries[r].key, r);
  std::stable_sort(members.begin(), members.end());
  std::vector<int> world_of;
  for (auto& [k, r] : members) world_of.push_back(parent->world_of[r]);
  std::lock_guard g(s.mu);
  comm_obj* c = make_comm(s, slot, std::move(world_of), s.world_rank);
  c->errhandler = parent->errhandler;
  *newcomm = c->handle;
  return MPI_SUCCESS;
}

}  // namespace

void init_comms(int world_rank, int world_size) {
  state& s = st();
  std::lock_guard g(s.mu);
  s.comms.clear();
  std::fill(s.used_slots.begin(), s.used_slots.end(), 0);
  s.comms.push_back(nullptr);  // MPI_COMM_NULL
  std::vector<int> all(world_size);
  for (int i = 0; i < world_size; ++i) all[i] = i;
  make_comm(s, 0, std::move(all), world_rank);  // MPI_COMM_WORLD
  make_comm(s, 1, {world_rank}, world_rank);    // MPI_COMM_SELF
}

comm_obj* lookup_comm(MPI_Comm c) {
  state& s = st();
  std::lock_guard g(s.mu);
  if (c <= 0 || static_cast<std::size_t>(c) >= s.comms.size()) return nullptr;
  comm_obj* p = s.comms[c].get();
  return (p && !p->freed) ? p : nullptr;
}

int check_buffer(int count, MPI_Datatype t, const void* buf, std::string& detail) {
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

extern "C" {

int PMPI_Comm_size(MPI_Comm comm, int* size) {
  if (!check_initialized("MPI_Comm_size")) return MPI_ERR_OTHER;
  comm_obj* c = lookup_comm(comm);
  if (!c) return mpi_raise("MPI_Comm_size", nullptr, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm));
  if (!size) return mpi_raise("MPI_Comm_size", c, MPI_ERR_ARG, "null size");
  *size = c->size();
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

int PMPI_Comm_dup(MPI_Comm comm, MPI_Comm* newcomm) {
  if (!check_initialized("MPI_Comm_dup")) return MPI_ERR_OTHER;
  comm_obj* c = lookup_comm(comm);
  if (!c) return mpi_raise("MPI_Comm_dup", nullptr, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm));
  if (!newcomm) return mpi_raise("MPI_Comm_dup", c, MPI_ERR_ARG, "null newcomm");
  return split("MPI_Comm_dup", c, 0, c->rank, newcomm);
}

int PMPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm* newcomm) {
  if (!check_initialized("MPI_Comm_split")) return MPI_ERR_OTHER;
  comm_obj* c = lookup_comm(comm);
  if (!c) return mpi_raise("MPI_Comm_split", nullptr, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm));
  if (!newcomm) return mpi_raise("MPI_Comm_split", c, MPI_ERR_ARG, "null newcomm");
  if (color < 0 && color != MPI_UNDEFINED)
    return mpi_raise("MPI_Comm_split", c, MPI_ERR_ARG, "negative color " + std::to_string(color));
  return split("MPI_Comm_split", c, color, key, newcomm);
}

int PMPI_Comm_free(MPI_Comm* comm) {
  if (!check_initialized("MPI_Comm_free")) return MPI_ERR_OTHER;
  if (!comm) return mpi_raise("MPI_Comm_free", nullptr, MPI_ERR_ARG, "null comm");
  comm_obj* c = lookup_comm(*comm);
  if (!c) return mpi_raise("MPI_Comm_free", nullptr, MPI_ERR_COMM, "invalid communicator " + std::to_string(*comm));
  if (*comm == MPI_COMM_WORLD || *comm == MPI_COMM_SELF)
    return mpi_raise("MPI_Comm_free", c, MPI_ERR_COMM, "predefined communicators cannot be freed");
  state& s = st();
  std::lock_guard g(s.mu);
  // The object stays (handles are not reused); its slot becomes free here.
  c->freed = true;
  s.used_slots[c->slot / 32] &= ~(1u << (c->slot % 32));
  *comm = MPI_COMM_NULL;
  return MPI_SUCCESS;
}

int PMPI_Comm_compare(MPI_Comm comm1, MPI_Comm comm2, int* result) {
  if (!check_initialized("MPI_Comm_compare")) return MPI_ERR_OTHER;
  comm_obj* a = lookup_comm(comm1);
  comm_obj* b = lookup_comm(comm2);
  if (!a || !b) return mpi_raise("MPI_Comm_compare", nullptr, MPI_ERR_COMM, "invalid communicator");
  if (!result) return mpi_raise("MPI_Comm_compare", a, MPI_ERR_ARG, "null result");
  if (a == b) *result = MPI_IDENT;
  else if (a->world_of == b->world_of) *result = MPI_CONGRUENT;
  else {
    auto x = a->world_of, y = b->world_of;
    std::sort(x.begin(), x.end());
    std::sort(y.begin(), y.end());
    *result = x == y ? MPI_SIMILAR : MPI_UNEQUAL;
  }
  return MPI_SUCCESS;
}

}  // extern "C"

// The public names: weak aliases, so profiling tools can interpose.
#pragma weak MPI_Comm_size = PMPI_Comm_size
#pragma weak MPI_Comm_rank = PMPI_Comm_rank
#pragma weak MPI_Comm_dup = PMPI_Comm_dup
#pragma weak MPI_Comm_split = PMPI_Comm_split
#pragma weak MPI_Comm_free = PMPI_Comm_free
#pragma weak MPI_Comm_compare = PMPI_Comm_compare
