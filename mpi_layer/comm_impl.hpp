#pragma once
// Communicators, private to the MPI layer: what the files that create them
// share.
//   comm.cpp          MPI_COMM_WORLD/SELF, size/rank, dup, split, create,
//                     create_group, free, compare, names, info hints
//   intercomm.cpp     Intercomm_create, Intercomm_merge
//   comm_context.cpp  context agreement: the used-slot mask, the team's
//                     allgather, the confirmation round
//   comm_idup.cpp     MPI_Comm_idup: the non-blocking agreement and the
//                     progress task that advances it
//
// A communicator uses context slot i (p2p context 2i, internal collective
// context 2i+1), agreed by a *team* of processes when it is created (see
// comm_context.cpp).
//
// Intercommunicators: world_of/comm_of are the REMOTE group (what p2p calls
// address), local_world_of and rank the local group. Both groups use the
// same slot (see intercomm.cpp). An any-source receive on an
// intercommunicator can only match the remote group: no other live
// communicator of these processes has its context.
// Operations over both groups (dup, split, merge) use the "union team":
// the group whose first member has the lower world rank first, then the
// other, on the intercommunicator's collective context.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mpi_layer/mpi_impl.hpp"

namespace nmad::mpi::comms {

// User tags of Comm_create_group / Intercomm_create, kept apart from the
// small internal tags (kTagGather, kTagBcast, intercomm.cpp's).
inline int user_internal_tag(int tag) { return static_cast<int>(0x80000000u | static_cast<std::uint32_t>(tag)); }

// A set of processes agreeing on something: members in an order every one
// of them knows, this process at index me, messages on context ctx with
// tags tg (to the first member) and tb (from it).
struct team {
  std::vector<int> world_of;
  int me = 0;
  std::uint32_t ctx = 0;
  int tg = kTagGather, tb = kTagBcast;
  int size() const { return static_cast<int>(world_of.size()); }
};


inline team team_of(const comm_obj& c) { return team{c.world_of, c.rank, c.coll_ctx}; }

// Both groups of an intercommunicator (see above).
inline team union_team(const comm_obj& c, bool& local_first) {
  local_first = c.local_world_of[0] < c.world_of[0];
  team t;
  const auto& a = local_first ? c.local_world_of : c.world_of;
  const auto& b = local_first ? c.world_of : c.local_world_of;
  t.world_of = a;
  t.world_of.insert(t.world_of.end(), b.begin(), b.end());
  t.me = (local_first ? 0 : static_cast<int>(c.world_of.size())) + c.rank;
  t.ctx = c.coll_ctx;
  return t;
}

// ---- creation (comm.cpp) ----
// Registers c (s.mu held); slot -1: not yet agreed (MPI_Comm_idup).
comm_obj* add_comm(state& s, std::unique_ptr<comm_obj> c, int slot);
// An intracommunicator of these members (s.mu held).
comm_obj* make_comm(state& s, int slot, std::vector<int> world_of, int my_world);
// An intercommunicator (s.mu held): this process is in local.
comm_obj* make_inter(state& s, int slot, std::vector<int> local, std::vector<int> remote);
// An intracommunicator argument (raises MPI_ERR_COMM otherwise).
comm_obj* intra_arg(const char* fn, MPI_Comm comm, int& err);
// The hints of a communicator made with `info` (MPI_INFO_NULL: none) and
// the send priority they ask for (-1: none); an invalid info or priority is
// raised on c.
int hints_of(const char* fn, comm_obj* c, MPI_Info info, info_entries& hints, int& prio);

// ---- context agreement (comm_context.cpp) ----
constexpr int kMaskWords = kContextSlots / 32;

struct split_entry {
  int color;
  int key;
  int confirm;  // this member asks for the confirmation round
  std::uint32_t used[kMaskWords];
};

// Creations in progress in this process that may reserve a slot at any
// moment from engine progress (MPI_Comm_idup): while there are any, every
// blocking creation confirms its slot (see agree()).
extern std::atomic<int> g_pending_nb;

// Empties the used-slot mask (MPI_Init).
void clear_slots();
// Gives c slot and its contexts, and marks the slot used.
void set_slot(comm_obj& c, int slot);
// Whether a creation starting now needs the confirmation round: under
// MPI_THREAD_MULTIPLE (another thread may create concurrently) or while an
// idup of this process may reserve a slot from engine progress.
int need_confirm();
// The lowest slot not in used (kMaskWords words), or -1.
int lowest_free(const std::uint32_t* used);
// This process's used-slot mask (kMaskWords words).
void snapshot_mask(std::uint32_t* out);
// Confirmation round: reserves slot locally if `want`; 0 if a concurrent
// creation took it since the masks were gathered.
int reserve(int slot, bool want);
void unreserve(int slot);
// Gathers n bytes from every member of t at every member (through the
// first member). Returns an MPI error code.
int allgather_team(const team& t, const void* mine, std::size_t n, std::vector<std::byte>& out, std::string& detail);
// Collective over t: gathers every member's (color, key) into entries and
// agrees on a context slot free at every member. Members with color
// MPI_UNDEFINED help agree but reserve nothing. Errors are raised on errc.
int agree(const char* fn, comm_obj* errc, const team& t, int color, int key, std::vector<split_entry>& entries,
          int& slot);

}  // namespace nmad::mpi::comms
