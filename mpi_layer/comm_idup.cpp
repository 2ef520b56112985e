// MPI_Comm_idup and MPI_Comm_idup_with_info: a non-blocking agreement,
// advanced both by the owner (MPI_Wait/Test poll the request) and by a
// session progress task, so it completes while its process is in any MPI
// call that makes engine progress (a blocking receive as much as a Wait on
// some other request): no order of idups and other calls across processes
// can deadlock it.
// Each round, every member sends its used-slot mask to every other member
// (all-to-all on the parent's collective context, tag kTagIdup | sequence
// number of the idup on the parent, which every member counts alike since
// collective calls on a communicator are ordered); the lowest slot free in
// all masks is reserved where free, then every member sends its verdict to
// every other; if all reserved it the communicator is ready, else all
// release and start a new round. While an idup is pending in a process,
// that process's blocking creations use their confirmation round too
// (g_pending_nb), since the idup may reserve a slot at any moment.
// Locks: the task runs with the engine's lock held; it takes only the slot
// lock (leaf, comm_context.cpp) and the idup's own mutex (try_lock: never
// waits), never state::mu.

#include <algorithm>
#include <memory>
#include <mutex>

#include "mpi_layer/comm_impl.hpp"

namespace nmad::mpi::comms {

namespace {

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

}  // namespace

}  // namespace nmad::mpi::comms

using namespace nmad::mpi;
using namespace nmad::mpi::comms;

extern "C" {

// Non-blocking (see the file comment): the new handle is returned at
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
    n->session = c->session;  // derived from the same session
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

}  // extern "C"

// The public names: weak aliases, so profiling tools can interpose.
#pragma weak MPI_Comm_idup_with_info = PMPI_Comm_idup_with_info
#pragma weak MPI_Comm_idup = PMPI_Comm_idup
