// Intercommunicators: MPI_Intercomm_create and MPI_Intercomm_merge (what
// an intercommunicator holds: comm_impl.hpp).
//
// Both groups use the same slot, agreed by Intercomm_create as: allgather of
// masks in each local group, the two leaders exchange (group, union mask)
// over the peer communicator, each leader picks the lowest slot free in both
// unions (the same on both sides) and sends it, with the remote group, to
// its members. Merge agrees over the union team, as dup and split of an
// intercommunicator do.

#include <cstring>
#include <mutex>
#include <thread>

#include "mpi_layer/comm_impl.hpp"

namespace nmad::mpi::comms {

namespace {

// Internal tag (on a collective context) besides kTagGather/kTagBcast.
constexpr int kTagInterBcast = 3;  // Intercomm_create: leader -> local members

int wait_ok(nmad::request& r, std::string& detail) {
  const nmad::errc e = st().session->wait(r);
  if (e == nmad::errc::ok) return MPI_SUCCESS;
  detail = r.error_message();
  return from_errc(e);
}

// Sends n bytes to / receives n bytes from world rank peer on (ctx, tag).
int send_to(int peer, std::uint32_t ctx, int tag, const void* buf, std::size_t n, std::string& detail) {
  nmad::request r;
  st().session->isend(peer, engine_tag(ctx, tag), buf, n, r);
  return wait_ok(r, detail);
}
int recv_from(int peer, std::uint32_t ctx, int tag, void* buf, std::size_t n, std::string& detail) {
  nmad::request r;
  st().session->irecv(peer, engine_tag(ctx, tag), buf, n, r);
  return wait_ok(r, detail);
}

}  // namespace

}  // namespace nmad::mpi::comms

using namespace nmad::mpi;
using namespace nmad::mpi::comms;

extern "C" {

int PMPI_Intercomm_create(MPI_Comm local_comm, int local_leader, MPI_Comm peer_comm, int remote_leader, int tag,
                          MPI_Comm* newintercomm) {
  const char* fn = "MPI_Intercomm_create";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  int err;
  comm_obj* lc = intra_arg(fn, local_comm, err);
  if (!lc) return err;
  if (!newintercomm) return mpi_raise(fn, lc, MPI_ERR_ARG, "null newintercomm");
  if (local_leader < 0 || local_leader >= lc->size())
    return mpi_raise(fn, lc, MPI_ERR_RANK,
                     "local_leader " + std::to_string(local_leader) + " not in [0, " +
                         std::to_string(lc->size()) + ")");
  if (tag < 0) return mpi_raise(fn, lc, MPI_ERR_TAG, "tag " + std::to_string(tag) + " is negative");
  state& s = st();
  const bool leader = lc->rank == local_leader;
  const int W = s.world_size;
  comm_obj* pc = nullptr;
  int peer_world = -1;
  // Only the leaders use peer_comm and remote_leader. A leader that finds
  // them invalid still takes part in its group's first step and tells its
  // members (they fail with MPI_ERR_ARG); the remote group, which it cannot
  // reach, is left waiting.
  int leader_err = MPI_SUCCESS;
  std::string leader_detail;
  if (leader) {
    pc = lookup_comm(peer_comm);
    if (!pc) {
      leader_err = MPI_ERR_COMM;
      leader_detail = "invalid peer communicator " + std::to_string(peer_comm);
    } else if (remote_leader < 0 || remote_leader >= pc->size()) {
      leader_err = MPI_ERR_RANK;
      leader_detail = "remote_leader " + std::to_string(remote_leader) + " not in [0, " +
                      std::to_string(pc->size()) + ") of the peer communicator";
    } else if (peer_world = pc->world_of[remote_leader]; lc->comm_of[peer_world] >= 0) {
      leader_err = MPI_ERR_RANK;
      leader_detail = "remote_leader is a member of the local group";
    }
  }
  const team lt = team_of(*lc);
  const int ptag = user_internal_tag(tag);
  const std::uint32_t pctx = pc ? pc->coll_ctx : 0;
  // Leader <-> leader: [n, confirm, W world ranks, union mask]; leader ->
  // members: [slot (-1: the groups overlap, -2: the leader's arguments are
  // invalid), confirm, n, W world ranks].
  std::vector<std::uint32_t> mine(2 + W + kMaskWords), theirs(2 + W + kMaskWords);
  std::vector<int> down(3 + W);
  std::string detail;
  for (;;) {
    split_entry me{};
    me.confirm = need_confirm();
    snapshot_mask(me.used);
    std::vector<std::byte> all;
    if (int e = allgather_team(lt, &me, sizeof me, all, detail)) return mpi_raise(fn, lc, e, detail);
    std::uint32_t used[kMaskWords] = {};
    std::uint32_t confirm = 0;
    for (int r = 0; r < lc->size(); ++r) {
      split_entry e;
      std::memcpy(&e, all.data() + r * sizeof e, sizeof e);
      for (int w = 0; w < kMaskWords; ++w) used[w] |= e.used[w];
      confirm |= e.confirm != 0;
    }
    if (leader && leader_err) {
      down.assign(3 + W, 0);
      down[0] = -2;
      for (int r = 0; r < lc->size(); ++r)
        if (r != lc->rank) send_to(lc->world_of[r], lc->coll_ctx, kTagInterBcast, down.data(), down.size() * 4, detail);
      return mpi_raise(fn, lc, leader_err, leader_detail);
    }
    if (leader) {
      mine[0] = static_cast<std::uint32_t>(lc->size());
      mine[1] = confirm;
      for (int i = 0; i < lc->size(); ++i) mine[2 + i] = static_cast<std::uint32_t>(lc->world_of[i]);
      std::memcpy(mine.data() + 2 + W, used, sizeof used);
      nmad::request sr, rr;
      s.session->isend(peer_world, engine_tag(pctx, ptag), mine.data(), mine.size() * 4, sr);
      s.session->irecv(peer_world, engine_tag(pctx, ptag), theirs.data(), theirs.size() * 4, rr);
      const int e1 = wait_ok(sr, detail), e2 = wait_ok(rr, detail);
      if (e1 || e2) return mpi_raise(fn, lc, e1 ? e1 : e2, detail);
      const int rn = static_cast<int>(theirs[0]);
      bool overlap = false;
      for (int i = 0; i < rn; ++i) overlap |= lc->comm_of[theirs[2 + i]] >= 0;
      for (int w = 0; w < kMaskWords; ++w) used[w] |= theirs[2 + W + w];
      down.assign(3 + W, 0);
      down[0] = overlap ? -1 : lowest_free(used);
      down[1] = (confirm | theirs[1]) ? 1 : 0;
      down[2] = rn;
      for (int i = 0; i < rn; ++i) down[3 + i] = static_cast<int>(theirs[2 + i]);
      for (int r = 0; r < lc->size(); ++r)
        if (r != lc->rank)
          if (int e = send_to(lc->world_of[r], lc->coll_ctx, kTagInterBcast, down.data(), down.size() * 4, detail))
            return mpi_raise(fn, lc, e, detail);
    } else if (int e = recv_from(lc->world_of[local_leader], lc->coll_ctx, kTagInterBcast, down.data(),
                                 down.size() * 4, detail)) {
      return mpi_raise(fn, lc, e, detail);
    }
    if (down[0] == -1) return mpi_raise(fn, lc, MPI_ERR_COMM, "the local and remote groups overlap");
    if (down[0] == -2)
      return mpi_raise(fn, lc, MPI_ERR_ARG,
                       "the local leader (rank " + std::to_string(local_leader) +
                           ") was given an invalid peer_comm or remote_leader");
    if (down[0] < 0)
      return mpi_raise(fn, lc, MPI_ERR_INTERN, "no free communicator context (too many live communicators)");
    if (!down[1]) break;
    // Confirmation round (see comm_context.cpp): local allgather of the
    // reservations, the leaders combine both groups' verdicts and tell
    // their members.
    const int slot = down[0];
    const int ok = reserve(slot, true);
    std::vector<std::byte> oks;
    if (int e = allgather_team(lt, &ok, sizeof ok, oks, detail)) return mpi_raise(fn, lc, e, detail);
    int all_ok = 1;
    for (int r = 0; r < lc->size(); ++r) {
      int v;
      std::memcpy(&v, oks.data() + r * sizeof v, sizeof v);
      all_ok &= v == 1;
    }
    if (leader) {
      int other = 0;
      nmad::request sr, rr;
      s.session->isend(peer_world, engine_tag(pctx, ptag), &all_ok, sizeof all_ok, sr);
      s.session->irecv(peer_world, engine_tag(pctx, ptag), &other, sizeof other, rr);
      const int e1 = wait_ok(sr, detail), e2 = wait_ok(rr, detail);
      if (e1 || e2) return mpi_raise(fn, lc, e1 ? e1 : e2, detail);
      all_ok &= other;
      for (int r = 0; r < lc->size(); ++r)
        if (r != lc->rank)
          if (int e = send_to(lc->world_of[r], lc->coll_ctx, kTagInterBcast, &all_ok, sizeof all_ok, detail))
            return mpi_raise(fn, lc, e, detail);
    } else if (int e = recv_from(lc->world_of[local_leader], lc->coll_ctx, kTagInterBcast, &all_ok, sizeof all_ok,
                                 detail)) {
      return mpi_raise(fn, lc, e, detail);
    }
    if (all_ok) break;
    if (ok) unreserve(slot);
    std::this_thread::yield();
  }
  std::vector<int> remote(down.begin() + 3, down.begin() + 3 + down[2]);
  std::lock_guard g(s.mu);
  comm_obj* n = make_inter(s, down[0], lc->world_of, std::move(remote));
  n->errhandler = lc->errhandler;
  n->session = lc->session;  // derived from the same session
  *newintercomm = n->handle;
  return MPI_SUCCESS;
}

int PMPI_Intercomm_merge(MPI_Comm intercomm, int high, MPI_Comm* newintracomm) {
  const char* fn = "MPI_Intercomm_merge";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  comm_obj* c = lookup_comm(intercomm);
  if (!c) return mpi_raise(fn, nullptr, MPI_ERR_COMM, "invalid communicator " + std::to_string(intercomm));
  if (!c->inter) return mpi_raise(fn, c, MPI_ERR_COMM, "not an intercommunicator");
  if (!newintracomm) return mpi_raise(fn, c, MPI_ERR_ARG, "null newintracomm");
  bool local_first = false;
  const team t = union_team(*c, local_first);
  std::vector<split_entry> entries;
  int slot = -1;
  if (int e = agree(fn, c, t, 0, high ? 1 : 0, entries, slot)) return e;
  // The group that passed high = true goes last; if both passed the same
  // value, the union team's order (lower first world rank first).
  const int na = local_first ? c->local_size() : c->size();
  const bool a_high = entries[0].key != 0, b_high = entries[na].key != 0;
  std::vector<int> world_of;
  if (a_high && !b_high) {
    world_of.assign(t.world_of.begin() + na, t.world_of.end());
    world_of.insert(world_of.end(), t.world_of.begin(), t.world_of.begin() + na);
  } else {
    world_of = t.world_of;
  }
  state& s = st();
  std::lock_guard g(s.mu);
  comm_obj* n = make_comm(s, slot, std::move(world_of), s.world_rank);
  n->errhandler = c->errhandler;
  n->session = c->session;  // derived from the same session
  *newintracomm = n->handle;
  return MPI_SUCCESS;
}

}  // extern "C"

// The public names: weak aliases, so profiling tools can interpose.
#pragma weak MPI_Intercomm_create = PMPI_Intercomm_create
#pragma weak MPI_Intercomm_merge = PMPI_Intercomm_merge
