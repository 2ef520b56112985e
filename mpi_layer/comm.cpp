// Communicators: MPI_COMM_WORLD/SELF, size/rank, dup/idup, split,
// create, create_group, free, compare, names, info hints, and
// intercommunicators (Intercomm_create, Intercomm_merge, remote group).
//
// Context agreement: a communicator uses context slot i (p2p context 2i,
// internal collective context 2i+1). Every process keeps a mask of the slots
// its live communicators use. Creating a communicator is collective over a
// *team* (the parent's members; for MPI_Comm_create_group only the group;
// for intercommunicator operations both groups): one internal allgather on
// a collective context carries (color, key, used-slot mask) from every
// member; every member then computes the same result: the lowest slot free
// in the union of the masks. Disjoint children of one split share that
// slot, which is safe because they have no member in common. A slot is
// reused only once every member of the new group has freed it (it is
// absent from all masks).
// Under MPI_THREAD_MULTIPLE, creations on different communicators may run
// concurrently in several threads of a process and pick the same slot (so
// may a pending MPI_Comm_idup, which reserves from engine progress): a
// second agreement round (reserve locally, all members confirm, else all
// retry) makes the choice safe without a process-wide lock, which could
// deadlock when processes enter the creations in different orders. It runs
// when any member asks for it (thread level MULTIPLE or an idup pending).
//
// Intercommunicators: world_of/comm_of are the REMOTE group (what p2p calls
// address), local_world_of and rank the local group. Both groups use the
// same slot, agreed by Intercomm_create as: allgather of masks in each
// local group, the two leaders exchange (group, union mask) over the peer
// communicator, each leader picks the lowest slot free in both unions (the
// same on both sides) and sends it, with the remote group, to its members.
// An any-source receive on an intercommunicator can only match the remote
// group: no other live communicator of these processes has its context.
// Operations over both groups (dup, split, merge) use the "union team":
// the group whose first member has the lower world rank first, then the
// other, on the intercommunicator's collective context.

#include <algorithm>
#include <cstring>
#include <mutex>

#include "mpi_layer/mpi_impl.hpp"

namespace nmad::mpi {

namespace {

// Internal tags (on a collective context) besides kTagGather/kTagBcast.
constexpr int kTagInterBcast = 3;  // Intercomm_create: leader -> local members
// User tags of Comm_create_group / Intercomm_create, kept apart from the
// small internal tags above.
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

team team_of(const comm_obj& c) { return team{c.world_of, c.rank, c.coll_ctx}; }

// Both groups of an intercommunicator (see the file comment).
team union_team(const comm_obj& c, bool& local_first) {
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

// Guards state::used_slots. A leaf lock: nothing else is taken or called
// while it is held, so engine progress (the idup task) may take it too.
std::mutex& slot_mu() {
  static std::mutex* m = new std::mutex();
  return *m;
}

// Creations in progress in this process that may reserve a slot at any
// moment from engine progress (MPI_Comm_idup): while there are any, every
// blocking creation confirms its slot (see agree()).
std::atomic<int> g_pending_nb{0};

void set_slot(comm_obj& c, int slot) {
  c.slot = slot;
  c.p2p_ctx = static_cast<std::uint32_t>(2 * slot);
  c.coll_ctx = static_cast<std::uint32_t>(2 * slot + 1);
  state& s = st();
  std::lock_guard g(slot_mu());
  s.used_slots[slot / 32] |= 1u << (slot % 32);
}

// Registers c (s.mu held); slot -1: not yet agreed (MPI_Comm_idup).
comm_obj* add_comm(state& s, std::unique_ptr<comm_obj> c, int slot) {
  c->handle = static_cast<MPI_Comm>(s.comms.size());
  if (slot >= 0) set_slot(*c, slot);
  comm_obj* p = c.get();
  s.comms.push_back(std::move(c));
  return p;
}

// An intracommunicator of these members (s.mu held).
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

// An intercommunicator (s.mu held): this process is in local.
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

// Gathers n bytes from every member of t at every member (through the
// first member). Returns an MPI error code.
int allgather_team(const team& t, const void* mine, std::size_t n, std::vector<std::byte>& out, std::string& detail) {
  nmad::session& s = *st().session;
  const int size = t.size();
  out.assign(n * size, std::byte{0});
  const nmad::tag_t tg = engine_tag(t.ctx, t.tg), tb = engine_tag(t.ctx, t.tb);
  auto check = [&](nmad::errc e, nmad::request& r) {
    if (e == nmad::errc::ok) return true;
    detail = r.error_message();
    return false;
  };
  if (t.me == 0) {
    std::memcpy(out.data(), mine, n);
    auto reqs = std::make_unique<nmad::request[]>(size);
    int err = MPI_SUCCESS;
    for (int r = 1; r < size; ++r) s.irecv(t.world_of[r], tg, out.data() + r * n, n, reqs[r]);
    for (int r = 1; r < size; ++r)
      if (!check(s.wait(reqs[r]), reqs[r])) err = from_errc(reqs[r].error());
    if (err != MPI_SUCCESS) return err;
    for (int r = 1; r < size; ++r) s.isend(t.world_of[r], tb, out.data(), out.size(), reqs[r]);
    for (int r = 1; r < size; ++r)
      if (!check(s.wait(reqs[r]), reqs[r])) err = from_errc(reqs[r].error());
    return err;
  }
  nmad::request sr, rr;
  s.isend(t.world_of[0], tg, mine, n, sr);
  s.irecv(t.world_of[0], tb, out.data(), out.size(), rr);
  const bool ok_s = check(s.wait(sr), sr);
  const bool ok_r = check(s.wait(rr), rr);
  if (!ok_s) return from_errc(sr.error());
  if (!ok_r) return from_errc(rr.error());
  return MPI_SUCCESS;
}

constexpr int kMaskWords = kContextSlots / 32;

struct split_entry {
  int color;
  int key;
  int confirm;  // this member asks for the confirmation round
  std::uint32_t used[kMaskWords];
};

// Whether a creation starting now needs the confirmation round: under
// MPI_THREAD_MULTIPLE (another thread may create concurrently) or while an
// idup of this process may reserve a slot from engine progress.
int need_confirm() {
  return st().thread_level == MPI_THREAD_MULTIPLE || g_pending_nb.load() > 0 ? 1 : 0;
}

int lowest_free(const std::uint32_t* used) {
  for (int i = 0; i < kContextSlots; ++i)
    if (!(used[i / 32] & (1u << (i % 32)))) return i;
  return -1;
}

void snapshot_mask(std::uint32_t* out) {
  state& s = st();
  std::lock_guard g(slot_mu());
  std::memcpy(out, s.used_slots.data(), sizeof(std::uint32_t) * kMaskWords);
}

// Confirmation round: reserves slot locally if `want`; 0 if a concurrent
// creation took it since the masks were gathered.
int reserve(int slot, bool want) {
  if (!want) return 1;
  state& s = st();
  std::lock_guard g(slot_mu());
  const std::uint32_t bit = 1u << (slot % 32);
  if (s.used_slots[slot / 32] & bit) return 0;
  s.used_slots[slot / 32] |= bit;
  return 1;
}
void unreserve(int slot) {
  state& s = st();
  std::lock_guard g(slot_mu());
  s.used_slots[slot / 32] &= ~(1u << (slot % 32));
}

// Collective over t: gathers every member's (color, key) into entries and
// agrees on a context slot free at every member. Members with color
// MPI_UNDEFINED help agree but reserve nothing. Errors are raised on errc.
int agree(const char* fn, comm_obj* errc, const team& t, int color, int key, std::vector<split_entry>& entries,
          int& slot) {
  const int n = t.size();
  entries.assign(n, split_entry{});
  for (;;) {
    split_entry mine{};
    mine.color = color;
    mine.key = key;
    mine.confirm = need_confirm();
    snapshot_mask(mine.used);
    std::vector<std::byte> all;
    std::string detail;
    int err = allgather_team(t, &mine, sizeof mine, all, detail);
    if (err != MPI_SUCCESS) return mpi_raise(fn, errc, err, detail);
    std::memcpy(entries.data(), all.data(), all.size());
    std::uint32_t used[kMaskWords] = {};
    bool confirm = false;
    for (const auto& e : entries) {
      for (int w = 0; w < kMaskWords; ++w) used[w] |= e.used[w];
      confirm |= e.confirm != 0;
    }
    slot = lowest_free(used);
    if (slot < 0)
      return mpi_raise(fn, errc, MPI_ERR_INTERN, "no free communicator context (too many live communicators)");
    if (!confirm) return MPI_SUCCESS;
    // Another thread of this process (or an idup, from engine progress)
    // may have taken the slot since the snapshot: reserve it now, and agree
    // with the other members; if anyone lost the race, all release and try
    // again with fresh masks. Every member sees the same `confirm`.
    const bool want = color != MPI_UNDEFINED;
    const int ok = reserve(slot, want);
    std::vector<std::byte> oks;
    err = allgather_team(t, &ok, sizeof ok, oks, detail);
    if (err != MPI_SUCCESS) return mpi_raise(fn, errc, err, detail);
    bool all_ok = true;
    for (int r = 0; r < n; ++r) {
      int v;
      std::memcpy(&v, oks.data() + r * sizeof v, sizeof v);
      all_ok &= v == 1;
    }
    if (all_ok) return MPI_SUCCESS;
    if (ok && want) unreserve(slot);
    std::this_thread::yield();
  }
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

// ---- MPI_Comm_idup -------------------------------------------------------
// A non-blocking agreement, advanced both by the owner (MPI_Wait/Test poll
// the request) and by a session progress task, so it completes while its
// process is in any MPI call that makes engine progress (a blocking receive
// as much as a Wait on some other request): no order of idups and other
// calls across processes can deadlock it.
// Each round, every member sends its used-slot mask to every other member
// (all-to-all on the parent's collective context, tag kTagIdup | sequence
// number of the idup on the parent, which every member counts alike since
// collective calls on a communicator are ordered); the lowest slot free in
// all masks is reserved where free, then every member sends its verdict to
// every other; if all reserved it the communicator is ready, else all
// release and start a new round. While an idup is pending in a process,
// that process's blocking creations use their confirmation round too
// (g_pending_nb), since the idup may reserve a slot at any moment.
// Locks: the task runs with the engine's lock held; it takes only slot_mu
// (leaf) and the idup's own mutex (try_lock: never waits), never state::mu.
constexpr int kTagIdup = 0x40000000;

struct idup_op {
  std::mutex mu;                 // one advancer at a time (try_lock)
  team t;
  comm_obj* result = nullptr;    // ready == false until agreed
  int phase = 0;                 // 0: masks in flight, 1: verdicts in flight
  int slot = -1;
  bool reserved = false;
  std::vector<std::uint32_t> mask;  // mine
  std::vector<std::uint32_t> masks;  // everyone's (n * kMaskWords)
  int ok = 0;
  std::vector<int> oks;
  std::unique_ptr<nmad::request[]> sreq, rreq;
  std::atomic<bool> done{false};
  int error = MPI_SUCCESS;
  std::string detail;
};

// Posts this round's phase: my buffer to every other member, theirs into
// place. Called by the advancer (or before the op is shared).
void idup_post(idup_op& op) {
  nmad::session& s = *st().session;
  const int n = op.t.size();
  const nmad::tag_t tag = engine_tag(op.t.ctx, op.t.tg);
  for (int r = 0; r < n; ++r) {
    if (r == op.t.me) continue;
    if (op.phase == 0) {
      s.isend(op.t.world_of[r], tag, op.mask.data(), kMaskWords * 4, op.sreq[r]);
      s.irecv(op.t.world_of[r], tag, op.masks.data() + r * kMaskWords, kMaskWords * 4, op.rreq[r]);
    } else {
      s.isend(op.t.world_of[r], tag, &op.ok, sizeof op.ok, op.sreq[r]);
      s.irecv(op.t.world_of[r], tag, &op.oks[r], sizeof op.ok, op.rreq[r]);
    }
  }
}

void idup_start_round(idup_op& op) {
  op.phase = 0;
  snapshot_mask(op.mask.data());
  std::copy(op.mask.begin(), op.mask.end(), op.masks.begin() + op.t.me * kMaskWords);
  idup_post(op);
}

void idup_finish(idup_op& op, int error, const std::string& detail) {
  if (error != MPI_SUCCESS && op.reserved) unreserve(op.slot);
  op.error = error;
  op.detail = detail;
  if (error == MPI_SUCCESS) {
    op.result->slot = op.slot;
    op.result->p2p_ctx = static_cast<std::uint32_t>(2 * op.slot);
    op.result->coll_ctx = static_cast<std::uint32_t>(2 * op.slot + 1);
    op.result->ready.store(true, std::memory_order_release);
  }
  g_pending_nb.fetch_sub(1);
  op.done.store(true, std::memory_order_release);
}

// Advances op as far as it can without waiting; true once done.
bool idup_advance(idup_op& op) {
  if (op.done.load(std::memory_order_acquire)) return true;
  std::unique_lock g(op.mu, std::try_to_lock);
  if (!g.owns_lock()) return false;
  for (;;) {
    if (op.done.load(std::memory_order_relaxed)) return true;
    const int n = op.t.size();
    for (int r = 0; r < n; ++r)
      if (r != op.t.me && (!op.sreq[r].completed() || !op.rreq[r].completed())) return false;
    for (int r = 0; r < n; ++r) {
      if (r == op.t.me) continue;
      for (nmad::request* q : {&op.sreq[r], &op.rreq[r]})
        if (q->error() != nmad::errc::ok) {
          idup_finish(op, from_errc(q->error()), q->error_message());
          return true;
        }
    }
    if (op.phase == 0) {
      std::uint32_t used[kMaskWords] = {};
      for (int r = 0; r < n; ++r)
        for (int w = 0; w < kMaskWords; ++w) used[w] |= op.masks[r * kMaskWords + w];
      op.slot = lowest_free(used);
      if (op.slot < 0) {
        idup_finish(op, MPI_ERR_INTERN, "no free communicator context (too many live communicators)");
        return true;
      }
      op.ok = reserve(op.slot, true);
      op.reserved = op.ok != 0;
      op.oks[op.t.me] = op.ok;
      op.phase = 1;
      idup_post(op);
      continue;
    }
    bool all_ok = true;
    for (int r = 0; r < n; ++r) all_ok &= op.oks[r] == 1;
    if (all_ok) {
      idup_finish(op, MPI_SUCCESS, {});
      return true;
    }
    if (op.reserved) unreserve(op.slot);
    op.reserved = false;
    idup_start_round(op);
  }
}

struct idup_list {
  std::mutex mu;  // guards ops (leaf: no call is made while it is held)
  std::vector<std::shared_ptr<idup_op>> ops;
  std::once_flag registered;
};
idup_list& idups() {
  static idup_list* l = new idup_list();
  return *l;
}

// The session progress task: advances every pending idup.
int idup_task(void*) {
  idup_list& l = idups();
  std::vector<std::shared_ptr<idup_op>> ops;
  {
    std::lock_guard g(l.mu);
    if (l.ops.empty()) return 0;
    ops = l.ops;
  }
  int work = 0;
  for (auto& op : ops) work += idup_advance(*op) ? 1 : 0;
  if (work) {
    std::lock_guard g(l.mu);
    std::erase_if(l.ops, [](auto& o) { return o->done.load(std::memory_order_acquire); });
  }
  return work;
}

// An intracommunicator argument (raises MPI_ERR_COMM otherwise).
comm_obj* intra_arg(const char* fn, MPI_Comm comm, int& err) {
  comm_obj* c = lookup_comm(comm);
  err = MPI_SUCCESS;
  if (!c) err = mpi_raise(fn, nullptr, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm));
  else if (c->inter)
    err = mpi_raise(fn, c, MPI_ERR_COMM, "communicator " + std::to_string(comm) + " is an intercommunicator");
  return err ? nullptr : c;
}

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

}  // namespace

int comm_split(const char* fn, comm_obj* parent, int color, int key, MPI_Comm* newcomm) {
  return split(fn, parent, color, key, newcomm);
}

int comm_allgather(const comm_obj& c, const void* mine, std::size_t n, std::vector<std::byte>& all,
                   std::string& detail) {
  return allgather_team(team_of(c), mine, n, all, detail);
}

void init_comms(int world_rank, int world_size) {
  state& s = st();
  std::lock_guard g(s.mu);
  s.comms.clear();
  {
    std::lock_guard gs(slot_mu());
    std::fill(s.used_slots.begin(), s.used_slots.end(), 0);
  }
  s.comms.push_back(nullptr);  // MPI_COMM_NULL
  std::vector<int> all(world_size);
  for (int i = 0; i < world_size; ++i) all[i] = i;
  comm_obj* world = make_comm(s, 0, std::move(all), world_rank);
  world->name = "MPI_COMM_WORLD";
  comm_obj* self = make_comm(s, 1, {world_rank}, world_rank);
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

// The hints of a communicator made with `info` (MPI_INFO_NULL: none) and
// the send priority they ask for (-1: none); an invalid info or priority is
// raised on c.
static int hints_of(const char* fn, comm_obj* c, MPI_Info info, info_entries& hints, int& prio) {
  if (info != MPI_INFO_NULL) {
    auto e = info_get_entries(info);
    if (!e) return mpi_raise(fn, c, MPI_ERR_INFO, "invalid info handle " + std::to_string(info));
    hints = std::move(*e);
  }
  std::string detail;
  if (int pe = priority_hint(hints, prio, detail)) return mpi_raise(fn, c, pe, detail);
  return MPI_SUCCESS;
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

// Non-blocking (see "MPI_Comm_idup" above): the new handle is returned at
// once but is valid (found by lookup) only once the request completes;
// attributes are copied, and the error handler and hints inherited, here.
// hints: those of the new communicator and its send priority (prio), or
// null: the parent's (MPI_Comm_idup).
static int idup(const char* fn, comm_obj* c, const info_entries* hints, int prio, MPI_Comm* newcomm,
                MPI_Request* request) {
  state& s = st();
  auto op = std::make_shared<idup_op>();
  {
    std::lock_guard g(s.mu);
    auto n = std::make_unique<comm_obj>();
    n->ready.store(false);
    n->inter = c->inter;
    n->world_of = c->world_of;
    n->comm_of = c->comm_of;
    n->local_world_of = c->local_world_of;
    n->rank = c->rank;
    n->errhandler = c->errhandler;
    n->hints = hints ? *hints : c->hints;
    n->send_priority.store(hints ? static_cast<std::uint8_t>(prio < 0 ? 0 : prio)
                                 : c->send_priority.load(std::memory_order_relaxed),
                           std::memory_order_relaxed);
    op->result = add_comm(s, std::move(n), -1);
    op->t.tg = op->t.tb = kTagIdup | (c->nb_seq++ & 0x3fffffff);
  }
  bool local_first = false;
  team t = c->inter ? union_team(*c, local_first) : team_of(*c);
  op->t.world_of = std::move(t.world_of);
  op->t.me = t.me;
  op->t.ctx = t.ctx;
  const int n = op->t.size();
  op->mask.assign(kMaskWords, 0);
  op->masks.assign(static_cast<std::size_t>(n) * kMaskWords, 0);
  op->oks.assign(n, 0);
  op->sreq = std::make_unique<nmad::request[]>(n);
  op->rreq = std::make_unique<nmad::request[]>(n);
  copy_topology(c->handle, op->result->handle);
  std::string detail;
  if (int e = copy_attrs(*c, *op->result, detail)) {
    std::lock_guard g(s.mu);
    op->result->freed = true;
    return mpi_raise(fn, c, e, detail);
  }
  // Counted before the snapshot, so that any blocking creation whose
  // snapshot follows confirms its slot.
  g_pending_nb.fetch_add(1);
  idup_start_round(*op);
  idup_list& l = idups();
  std::call_once(l.registered, [&] { nmad::layer::add_session_task(*s.session, idup_task, nullptr); });
  {
    std::lock_guard g(l.mu);
    l.ops.push_back(op);
  }
  request_obj* r = new_request();
  r->type = request_obj::kind::generic;
  r->comm = c;
  r->active = true;
  r->poll = [op](request_obj& rq) {
    if (!idup_advance(*op)) return false;
    empty_status(&rq.local_status);
    rq.local_status.MPI_ERROR = op->error;
    return true;
  };
  r->on_complete = [op](request_obj&, std::string& d) {
    d = op->detail;
    return op->error;
  };
  r->extra = op;
  *newcomm = op->result->handle;
  *request = r->handle;
  return MPI_SUCCESS;
}

int PMPI_Comm_idup(MPI_Comm comm, MPI_Comm* newcomm, MPI_Request* request) {
  const char* fn = "MPI_Comm_idup";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  comm_obj* c = lookup_comm(comm);
  if (!c) return mpi_raise(fn, nullptr, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm));
  if (!newcomm || !request) return mpi_raise(fn, c, MPI_ERR_ARG, "null newcomm or request");
  return idup(fn, c, nullptr, -1, newcomm, request);
}

// MPI 4.0 7.4.2: MPI_Comm_idup whose new communicator's hints are those of
// info (MPI_INFO_NULL: none), as MPI_Comm_dup_with_info.
int PMPI_Comm_idup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm* newcomm, MPI_Request* request) {
  const char* fn = "MPI_Comm_idup_with_info";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  comm_obj* c = lookup_comm(comm);
  if (!c) return mpi_raise(fn, nullptr, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm));
  if (!newcomm || !request) return mpi_raise(fn, c, MPI_ERR_ARG, "null newcomm or request");
  info_entries hints;
  int prio = -1;
  if (int e = hints_of(fn, c, info, hints, prio)) return e;
  return idup(fn, c, &hints, prio, newcomm, request);
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
  *newcomm = n->handle;
  return MPI_SUCCESS;
}

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
    // Confirmation round (see the file comment): local allgather of the
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
  *newintracomm = n->handle;
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

// The public names: weak aliases, so profiling tools can interpose.
#pragma weak MPI_Comm_size = PMPI_Comm_size
#pragma weak MPI_Comm_rank = PMPI_Comm_rank
#pragma weak MPI_Comm_remote_size = PMPI_Comm_remote_size
#pragma weak MPI_Comm_test_inter = PMPI_Comm_test_inter
#pragma weak MPI_Comm_dup = PMPI_Comm_dup
#pragma weak MPI_Comm_dup_with_info = PMPI_Comm_dup_with_info
#pragma weak MPI_Comm_idup_with_info = PMPI_Comm_idup_with_info
#pragma weak MPI_Comm_idup = PMPI_Comm_idup
#pragma weak MPI_Comm_split = PMPI_Comm_split
#pragma weak MPI_Comm_create = PMPI_Comm_create
#pragma weak MPI_Comm_create_group = PMPI_Comm_create_group
#pragma weak MPI_Intercomm_create = PMPI_Intercomm_create
#pragma weak MPI_Intercomm_merge = PMPI_Intercomm_merge
#pragma weak MPI_Comm_free = PMPI_Comm_free
#pragma weak MPI_Comm_compare = PMPI_Comm_compare
#pragma weak MPI_Comm_set_name = PMPI_Comm_set_name
#pragma weak MPI_Comm_get_name = PMPI_Comm_get_name
#pragma weak MPI_Comm_set_info = PMPI_Comm_set_info
#pragma weak MPI_Comm_get_info = PMPI_Comm_get_info
