// Synchronisation: fence, general active target (post/start/complete/
// wait/test), passive target (lock/unlock, lock_all/unlock_all, the
// flushes) and MPI_Win_sync. How completion works is at the top of rma.hpp.
#include <atomic>
#include <thread>

#include "mpi_layer/rma/rma.hpp"

namespace nmad::mpi::rma {

namespace {

constexpr int kAllAsserts = MPI_MODE_NOCHECK | MPI_MODE_NOSTORE | MPI_MODE_NOPUT | MPI_MODE_NOPRECEDE |
                            MPI_MODE_NOSUCCEED;

// One round of engine progress (with the polling discipline: under
// contention it gives the CPU away). Synchronisation calls that complete
// at once (on this process's own memory, or a direct window) still
// progress: a process that loops on them (a shared list polled through
// lock/get/unlock on itself) must keep serving the requests other
// processes send it. One call in 16 does it (a round of progress, and the
// polling discipline, which gives the CPU away on a contended machine,
// costs more than a direct operation itself).
void poke() {
  static std::atomic<unsigned> calls{0};
  if ((calls.fetch_add(1, std::memory_order_relaxed) & 15) == 15) st().session->progress();
}

int check_assert(const char* fn, window& w, int assert_) {
  if (assert_ & ~kAllAsserts)
    return raise_win(fn, &w, MPI_ERR_ASSERT, "unknown assertion bits " + std::to_string(assert_ & ~kAllAsserts));
  return MPI_SUCCESS;
}

// The window ranks of a group's members; false if one is not in the window.
bool group_ranks(window& w, MPI_Group g, std::vector<int>& out) {
  auto m = group_members(g);
  if (!m) return false;
  for (int world : *m) {
    const int r = (world >= 0 && static_cast<std::size_t>(world) < w.c->comm_of.size()) ? w.c->comm_of[world] : -1;
    if (r < 0) return false;
    out.push_back(r);
  }
  return true;
}

// Passive-target locks of a direct window: reader-writer words in the
// segment. Spins with engine progress between tries (the holder may need
// it), giving the CPU away on a contended machine; a dead target fails.
int direct_lock(window& w, int t, bool excl, std::string& detail) {
  std::atomic<std::uint32_t>& word = w.lines[t].lock_word;
  nmad::session& s = *st().session;
  for (;;) {
    std::uint32_t v = word.load(std::memory_order_relaxed);
    if (excl) {
      if (v == 0 && word.compare_exchange_weak(v, kExclusive, std::memory_order_acquire)) return MPI_SUCCESS;
    } else if (!(v & kExclusive) && word.compare_exchange_weak(v, v + 1, std::memory_order_acquire)) {
      return MPI_SUCCESS;
    }
    if (t != w.rank && !s.peer_alive(w.world_of(t))) {
      detail = "window rank " + std::to_string(t) + " failed while holding the lock";
      return MPI_ERR_PROC_FAILED;
    }
    if (s.progress_quiet() == 0) s.idle_poll();
    std::this_thread::yield();
  }
}

void direct_unlock(window& w, int t, bool excl) {
  std::atomic<std::uint32_t>& word = w.lines[t].lock_word;
  if (excl)
    word.store(0, std::memory_order_release);
  else
    word.fetch_sub(1, std::memory_order_release);
}

// A lock on this process's own memory (message-path window): through the
// lock manager, waiting for the grant.
int self_lock(window& w, int type, std::string& detail) {
  {
    std::lock_guard g(w.mu);
    if (lock_acquire_locked(w, w.rank, type)) return MPI_SUCCESS;
    w.queues[static_cast<std::size_t>(w.rank)]->waiting_lock = true;
  }
  return wait_for(w, {}, [&] { return !w.queues[static_cast<std::size_t>(w.rank)]->waiting_lock; }, detail);
}

int do_lock(const char* fn, window& w, int type, int t, int assert_) {
  std::string detail;
  const bool excl = type == MPI_LOCK_EXCLUSIVE;
  if (w.direct) {
    if (!(assert_ & MPI_MODE_NOCHECK))
      if (int e = direct_lock(w, t, excl, detail)) return raise_win(fn, &w, e, detail);
  } else if (t == w.rank) {
    if (!(assert_ & MPI_MODE_NOCHECK))
      if (int e = self_lock(w, type, detail)) return raise_win(fn, &w, e, detail);
  } else if (!(assert_ & MPI_MODE_NOCHECK)) {
    std::lock_guard g(w.mu);
    if (int e = send_control_locked(w, t, kind::lock, type, detail)) return raise_win(fn, &w, e, detail);
    w.lock_sent[static_cast<std::size_t>(t)] = true;
  }
  return MPI_SUCCESS;
}

// Ends the lock on t (its operations complete at the target first).
int do_unlock(const char* fn, window& w, int t, int type, bool nocheck) {
  std::string detail;
  const auto ti = static_cast<std::size_t>(t);
  int e = MPI_SUCCESS;
  if (w.direct || t == w.rank) poke();
  if (w.direct) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (!nocheck) direct_unlock(w, t, type == MPI_LOCK_EXCLUSIVE);
    if (target_failed(w, t, detail)) e = MPI_ERR_PROC_FAILED;
  } else if (t == w.rank) {
    if (!nocheck) {
      std::lock_guard g(w.mu);
      lock_release_locked(w, w.rank);
    }
  } else {
    {
      std::lock_guard g(w.mu);
      const bool sent = w.lock_sent[ti];
      if (sent || w.unflushed[ti] > 0) e = send_control_locked(w, t, sent ? kind::unlock : kind::flush, 0, detail);
      w.lock_sent[ti] = false;
      w.unflushed[ti] = 0;
    }
    if (e == MPI_SUCCESS) e = drain(w, t, detail);
  }
  if (e != MPI_SUCCESS) return raise_win(fn, &w, e, detail);
  return MPI_SUCCESS;
}

// Remote completion of every operation to t (flush) or local (flush_local).
int do_flush(const char* fn, window& w, int t, bool remote) {
  std::string detail;
  if (w.direct || t == w.rank) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    poke();
    if (target_failed(w, t, detail)) return raise_win(fn, &w, MPI_ERR_PROC_FAILED, detail);
    return MPI_SUCCESS;
  }
  int e = MPI_SUCCESS;
  if (remote) {
    std::lock_guard g(w.mu);
    if (w.unflushed[static_cast<std::size_t>(t)] > 0) {
      e = send_control_locked(w, t, kind::flush, 0, detail);
      w.unflushed[static_cast<std::size_t>(t)] = 0;
    }
  }
  if (e == MPI_SUCCESS) e = drain(w, t, detail);
  if (e != MPI_SUCCESS) return raise_win(fn, &w, e, detail);
  return MPI_SUCCESS;
}

// Whether every answer this process sent has left (mu held). A get of a
// large contiguous block is answered from the window's memory in place:
// the exposure epoch ends only once the origin has taken it.
bool answers_left_locked(const window& w) {
  for (const auto& a : w.answers)
    if (!a->req.completed()) return false;
  return true;
}

bool passive_open_locked(const window& w) {
  if (w.lock_all) return true;
  for (int t : w.lock_type)
    if (t) return true;
  return false;
}

// A target rank argument: 0, or the error raised (MPI_PROC_NULL is the
// caller's to skip first).
int check_rank(const char* fn, window& w, int rank) {
  if (rank >= 0 && rank < w.size) return MPI_SUCCESS;
  return raise_win(fn, &w, MPI_ERR_RANK, "rank " + std::to_string(rank) + " is not in the window's group");
}

// The flushes need a passive-target epoch: 0, or MPI_ERR_RMA_SYNC raised.
int check_passive(const char* fn, window& w) {
  std::lock_guard g(w.mu);
  if (passive_open_locked(w)) return MPI_SUCCESS;
  return raise_win(fn, &w, MPI_ERR_RMA_SYNC, "no passive-target epoch is open");
}

// MPI_Win_flush and MPI_Win_flush_local.
int flush_one(const char* fn, MPI_Win win, int rank, bool remote) {
  int rc = MPI_SUCCESS;
  auto w = need_window(fn, win, rc);
  if (!w) return rc;
  if (rank == MPI_PROC_NULL) return MPI_SUCCESS;
  if (int e = check_rank(fn, *w, rank)) return e;
  if (int e = check_passive(fn, *w)) return e;
  return do_flush(fn, *w, rank, remote);
}

}  // namespace

}  // namespace nmad::mpi::rma

using namespace nmad::mpi;
using namespace nmad::mpi::rma;

extern "C" {

int PMPI_Win_fence(int assert_, MPI_Win win) {
  const char* fn = "MPI_Win_fence";
  int rc = MPI_SUCCESS;
  auto w = need_window(fn, win, rc);
  if (!w) return rc;
  if (int e = check_assert(fn, *w, assert_)) return e;
  {
    std::lock_guard g(w->mu);
    if (w->access_pscw || w->exposure_pscw || passive_open_locked(*w))
      return raise_win(fn, w.get(), MPI_ERR_RMA_SYNC, "a PSCW or passive-target epoch is open on the window");
  }
  std::string detail;
  int e = MPI_SUCCESS;
  if (w->direct) {
    // Direct operations are complete when issued; the members only meet.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    e = PMPI_Barrier(w->comm);
    if (e) detail = "the fence's barrier failed";
  } else if (assert_ & MPI_MODE_NOPRECEDE) {
    e = PMPI_Barrier(w->comm);
    if (e) detail = "the fence's barrier failed";
  } else {
    // Every member tells every target how many requests it sent it since
    // the last fence; a target leaves once it has served them all.
    std::vector<unsigned long long> counts(static_cast<std::size_t>(w->size));
    {
      std::lock_guard g(w->mu);
      for (int t = 0; t < w->size; ++t) {
        counts[static_cast<std::size_t>(t)] = w->sent[static_cast<std::size_t>(t)];
        w->sent[static_cast<std::size_t>(t)] = 0;
      }
    }
    unsigned long long mine = 0;
    e = PMPI_Reduce_scatter_block(counts.data(), &mine, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, w->comm);
    if (e) {
      detail = "the fence's count exchange failed";
    } else {
      {
        std::lock_guard g(w->mu);
        w->fence_expected += mine;
      }
      e = wait_for(*w, {}, [&] { return w->served >= w->fence_expected && w->inflight.empty() && answers_left_locked(*w); }, detail);
      if (e == MPI_SUCCESS) {
        std::lock_guard g(w->mu);
        e = take_errors_locked(*w, {}, detail);
        for (auto& u : w->unflushed) u = 0;
      }
      // Operations of the next epoch must not reach a member before it has
      // served this one's (a faster origin's get would read old data).
      if (e == MPI_SUCCESS && !(assert_ & MPI_MODE_NOSUCCEED)) {
        e = PMPI_Barrier(w->comm);
        if (e) detail = "the fence's barrier failed";
      }
    }
  }
  {
    std::lock_guard g(w->mu);
    w->fence_open = !(assert_ & MPI_MODE_NOSUCCEED);
  }
  if (e != MPI_SUCCESS) return raise_win(fn, w.get(), e, detail);
  return MPI_SUCCESS;
}

int PMPI_Win_post(MPI_Group group, int assert_, MPI_Win win) {
  const char* fn = "MPI_Win_post";
  int rc = MPI_SUCCESS;
  auto w = need_window(fn, win, rc);
  if (!w) return rc;
  if (int e = check_assert(fn, *w, assert_)) return e;
  std::vector<int> ranks;
  if (!group_ranks(*w, group, ranks))
    return raise_win(fn, w.get(), MPI_ERR_GROUP, "invalid group, or a member not in the window's group");
  std::lock_guard g(w->mu);
  if (w->exposure_pscw) return raise_win(fn, w.get(), MPI_ERR_RMA_SYNC, "an exposure epoch is already open");
  w->exposure_pscw = true;
  w->completes_expected += ranks.size();
  if (!(assert_ & MPI_MODE_NOCHECK)) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    for (int r : ranks) {
      auto out = std::make_unique<window::outgoing>();
      out->bytes.resize(4);
      st().session->isend(w->world_of(r), w->tag(kTagPost), out->bytes.data(), 4, out->req);
      w->answers.push_back(std::move(out));
    }
  }
  return MPI_SUCCESS;
}

int PMPI_Win_start(MPI_Group group, int assert_, MPI_Win win) {
  const char* fn = "MPI_Win_start";
  int rc = MPI_SUCCESS;
  auto w = need_window(fn, win, rc);
  if (!w) return rc;
  if (int e = check_assert(fn, *w, assert_)) return e;
  std::vector<int> ranks;
  if (!group_ranks(*w, group, ranks))
    return raise_win(fn, w.get(), MPI_ERR_GROUP, "invalid group, or a member not in the window's group");
  {
    std::lock_guard g(w->mu);
    if (w->access_pscw) return raise_win(fn, w.get(), MPI_ERR_RMA_SYNC, "an access epoch is already open");
  }
  if (!(assert_ & MPI_MODE_NOCHECK) && !ranks.empty()) {
    // Waits for every target's post.
    std::vector<std::unique_ptr<nmad::request>> reqs;
    std::vector<std::array<std::byte, 4>> bufs(ranks.size());
    nmad::session& s = *st().session;
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      reqs.push_back(std::make_unique<nmad::request>());
      s.irecv(w->world_of(ranks[i]), w->tag(kTagPost), bufs[i].data(), 4, *reqs.back());
    }
    std::string detail;
    const int e = wait_for(
        *w, ranks,
        [&] {
          for (auto& r : reqs)
            if (!r->completed()) return false;
          return true;
        },
        detail);
    if (e != MPI_SUCCESS) return raise_win(fn, w.get(), e, detail);
    for (auto& r : reqs)
      if (r->error() != nmad::errc::ok) return raise_win(fn, w.get(), from_errc(r->error()), r->error_message());
  }
  std::atomic_thread_fence(std::memory_order_seq_cst);
  std::lock_guard g(w->mu);
  w->access_pscw = true;
  w->access_group = std::move(ranks);
  return MPI_SUCCESS;
}

int PMPI_Win_complete(MPI_Win win) {
  const char* fn = "MPI_Win_complete";
  int rc = MPI_SUCCESS;
  auto w = need_window(fn, win, rc);
  if (!w) return rc;
  std::string detail;
  std::vector<int> group;
  int e = MPI_SUCCESS;
  {
    std::lock_guard g(w->mu);
    if (!w->access_pscw) return raise_win(fn, w.get(), MPI_ERR_RMA_SYNC, "no access epoch was started (MPI_Win_start)");
    group = w->access_group;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    for (int t : group) {
      e = send_control_locked(*w, t, kind::complete, 0, detail);
      if (e) break;
      w->unflushed[static_cast<std::size_t>(t)] = 0;
    }
  }
  if (e == MPI_SUCCESS) e = wait_for(*w, group, [&] {
    for (auto& r : w->inflight)
      for (int t : group)
        if (r->target == t) return false;
    return true;
  }, detail);
  if (e == MPI_SUCCESS) {
    std::lock_guard g(w->mu);
    e = take_errors_locked(*w, group, detail);
  }
  {
    std::lock_guard g(w->mu);
    w->access_pscw = false;
    w->access_group.clear();
  }
  if (e != MPI_SUCCESS) return raise_win(fn, w.get(), e, detail);
  return MPI_SUCCESS;
}

int PMPI_Win_wait(MPI_Win win) {
  const char* fn = "MPI_Win_wait";
  int rc = MPI_SUCCESS;
  auto w = need_window(fn, win, rc);
  if (!w) return rc;
  {
    std::lock_guard g(w->mu);
    if (!w->exposure_pscw) return raise_win(fn, w.get(), MPI_ERR_RMA_SYNC, "no exposure epoch was posted (MPI_Win_post)");
  }
  std::string detail;
  const int e =
      wait_for(*w, {}, [&] { return w->completes_seen >= w->completes_expected && answers_left_locked(*w); }, detail);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  {
    std::lock_guard g(w->mu);
    w->exposure_pscw = false;
  }
  if (e != MPI_SUCCESS) return raise_win(fn, w.get(), e, detail);
  return MPI_SUCCESS;
}

int PMPI_Win_test(MPI_Win win, int* flag) {
  const char* fn = "MPI_Win_test";
  int rc = MPI_SUCCESS;
  auto w = need_window(fn, win, rc);
  if (!w) return rc;
  if (!flag) return raise_win(fn, w.get(), MPI_ERR_ARG, "null flag");
  {
    std::lock_guard g(w->mu);
    if (!w->exposure_pscw) return raise_win(fn, w.get(), MPI_ERR_RMA_SYNC, "no exposure epoch was posted (MPI_Win_post)");
  }
  nmad::session& s = *st().session;
  const int work = nmad::layer::progress_all_drivers(s);
  agent_serve(*w);
  std::lock_guard g(w->mu);
  *flag = w->completes_seen >= w->completes_expected && answers_left_locked(*w);
  if (*flag) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    w->exposure_pscw = false;
  } else if (work == 0) {
    s.idle_poll();
  }
  return MPI_SUCCESS;
}

int PMPI_Win_lock(int lock_type, int rank, int assert_, MPI_Win win) {
  const char* fn = "MPI_Win_lock";
  int rc = MPI_SUCCESS;
  auto w = need_window(fn, win, rc);
  if (!w) return rc;
  if (int e = check_assert(fn, *w, assert_)) return e;
  if (lock_type != MPI_LOCK_SHARED && lock_type != MPI_LOCK_EXCLUSIVE)
    return raise_win(fn, w.get(), MPI_ERR_LOCKTYPE, "lock type " + std::to_string(lock_type) + " is neither MPI_LOCK_SHARED nor MPI_LOCK_EXCLUSIVE");
  if (rank == MPI_PROC_NULL) return MPI_SUCCESS;
  if (int e = check_rank(fn, *w, rank)) return e;
  {
    std::lock_guard g(w->mu);
    if (w->lock_type[static_cast<std::size_t>(rank)] || w->lock_all)
      return raise_win(fn, w.get(), MPI_ERR_RMA_SYNC, "this process already holds a lock on window rank " + std::to_string(rank));
    if (w->access_pscw) return raise_win(fn, w.get(), MPI_ERR_RMA_SYNC, "a PSCW access epoch is open");
  }
  if (int e = do_lock(fn, *w, lock_type, rank, assert_)) return e;
  std::lock_guard g(w->mu);
  w->lock_type[static_cast<std::size_t>(rank)] = lock_type | ((assert_ & MPI_MODE_NOCHECK) ? 0x10000 : 0);
  return MPI_SUCCESS;
}

int PMPI_Win_unlock(int rank, MPI_Win win) {
  const char* fn = "MPI_Win_unlock";
  int rc = MPI_SUCCESS;
  auto w = need_window(fn, win, rc);
  if (!w) return rc;
  if (rank == MPI_PROC_NULL) return MPI_SUCCESS;
  if (int e = check_rank(fn, *w, rank)) return e;
  int held = 0;
  {
    std::lock_guard g(w->mu);
    held = w->lock_type[static_cast<std::size_t>(rank)];
    if (!held) return raise_win(fn, w.get(), MPI_ERR_RMA_SYNC, "this process holds no lock on window rank " + std::to_string(rank));
  }
  const int e = do_unlock(fn, *w, rank, held & 0xffff, (held & 0x10000) != 0);
  std::lock_guard g(w->mu);
  w->lock_type[static_cast<std::size_t>(rank)] = 0;
  return e;
}

int PMPI_Win_lock_all(int assert_, MPI_Win win) {
  const char* fn = "MPI_Win_lock_all";
  int rc = MPI_SUCCESS;
  auto w = need_window(fn, win, rc);
  if (!w) return rc;
  if (int e = check_assert(fn, *w, assert_)) return e;
  {
    std::lock_guard g(w->mu);
    if (passive_open_locked(*w)) return raise_win(fn, w.get(), MPI_ERR_RMA_SYNC, "a passive-target epoch is already open");
  }
  const bool nocheck = (assert_ & MPI_MODE_NOCHECK) != 0;
  std::string detail;
  bool self = false;
  if (!nocheck) {
    if (w->direct) {
      for (int t = 0; t < w->size; ++t)
        if (int e = direct_lock(*w, t, false, detail)) {
          for (int u = 0; u < t; ++u) direct_unlock(*w, u, false);
          return raise_win(fn, w.get(), e, detail);
        }
    } else {
      if (int e = self_lock(*w, MPI_LOCK_SHARED, detail)) return raise_win(fn, w.get(), e, detail);
      self = true;
    }
  }
  std::lock_guard g(w->mu);
  w->lock_all = true;
  w->lock_all_nocheck = nocheck;
  w->lock_all_self = self;
  // Remote shared locks (message path) are requested lazily, with the
  // first operation towards each target.
  for (int t = 0; t < w->size; ++t) w->lock_sent[static_cast<std::size_t>(t)] = false;
  return MPI_SUCCESS;
}

int PMPI_Win_unlock_all(MPI_Win win) {
  const char* fn = "MPI_Win_unlock_all";
  int rc = MPI_SUCCESS;
  auto w = need_window(fn, win, rc);
  if (!w) return rc;
  std::string detail;
  int e = MPI_SUCCESS;
  {
    std::lock_guard g(w->mu);
    if (!w->lock_all) return raise_win(fn, w.get(), MPI_ERR_RMA_SYNC, "no MPI_Win_lock_all epoch is open");
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (!w->direct)
      for (int t = 0; t < w->size && e == MPI_SUCCESS; ++t) {
        if (t == w->rank) continue;
        const auto ti = static_cast<std::size_t>(t);
        if (w->lock_sent[ti] || w->unflushed[ti] > 0)
          e = send_control_locked(*w, t, w->lock_sent[ti] ? kind::unlock : kind::flush, 0, detail);
        w->lock_sent[ti] = false;
        w->unflushed[ti] = 0;
      }
  }
  if (e == MPI_SUCCESS && !w->direct) e = drain(*w, -1, detail);
  {
    std::lock_guard g(w->mu);
    if (w->direct && !w->lock_all_nocheck)
      for (int t = 0; t < w->size; ++t) direct_unlock(*w, t, false);
    if (w->lock_all_self) lock_release_locked(*w, w->rank);
    w->lock_all = false;
    w->lock_all_self = false;
    w->lock_all_nocheck = false;
  }
  if (e != MPI_SUCCESS) return raise_win(fn, w.get(), e, detail);
  return MPI_SUCCESS;
}

int PMPI_Win_flush(int rank, MPI_Win win) { return flush_one("MPI_Win_flush", win, rank, true); }

int PMPI_Win_flush_local(int rank, MPI_Win win) { return flush_one("MPI_Win_flush_local", win, rank, false); }

int PMPI_Win_flush_all(MPI_Win win) {
  const char* fn = "MPI_Win_flush_all";
  int rc = MPI_SUCCESS;
  auto w = need_window(fn, win, rc);
  if (!w) return rc;
  if (int e = check_passive(fn, *w)) return e;
  if (w->direct) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    poke();
    std::string detail;
    for (int t = 0; t < w->size; ++t)
      if (target_failed(*w, t, detail)) return raise_win(fn, w.get(), MPI_ERR_PROC_FAILED, detail);
    return MPI_SUCCESS;
  }
  for (int t = 0; t < w->size; ++t)
    if (int e = do_flush(fn, *w, t, true)) return e;
  return MPI_SUCCESS;
}

int PMPI_Win_flush_local_all(MPI_Win win) {
  const char* fn = "MPI_Win_flush_local_all";
  int rc = MPI_SUCCESS;
  auto w = need_window(fn, win, rc);
  if (!w) return rc;
  if (int e = check_passive(fn, *w)) return e;
  std::string detail;
  if (!w->direct)
    if (int e = drain(*w, -1, detail)) return raise_win(fn, w.get(), e, detail);
  poke();
  return MPI_SUCCESS;
}

int PMPI_Win_sync(MPI_Win win) {
  const char* fn = "MPI_Win_sync";
  int rc = MPI_SUCCESS;
  auto w = need_window(fn, win, rc);
  if (!w) return rc;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  // Serve what arrived, so that operations towards this process that have
  // reached it are visible in its memory after the call.
  poke();
  agent_serve(*w);
  return MPI_SUCCESS;
}

}  // extern "C"

#pragma weak MPI_Win_fence = PMPI_Win_fence
#pragma weak MPI_Win_post = PMPI_Win_post
#pragma weak MPI_Win_start = PMPI_Win_start
#pragma weak MPI_Win_complete = PMPI_Win_complete
#pragma weak MPI_Win_wait = PMPI_Win_wait
#pragma weak MPI_Win_test = PMPI_Win_test
#pragma weak MPI_Win_lock = PMPI_Win_lock
#pragma weak MPI_Win_unlock = PMPI_Win_unlock
#pragma weak MPI_Win_lock_all = PMPI_Win_lock_all
#pragma weak MPI_Win_unlock_all = PMPI_Win_unlock_all
#pragma weak MPI_Win_flush = PMPI_Win_flush
#pragma weak MPI_Win_flush_local = PMPI_Win_flush_local
#pragma weak MPI_Win_flush_all = PMPI_Win_flush_all
#pragma weak MPI_Win_flush_local_all = PMPI_Win_flush_local_all
#pragma weak MPI_Win_sync = PMPI_Win_sync
