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

#include <algorithm>
#include <cstring>
#include <mutex>
#include <thread>

#include "mpi_layer/comm_impl.hpp"

namespace nmad::mpi::comms {

namespace {

// Guards state::used_slots. A leaf lock: nothing else is taken or called
// while it is held, so engine progress (the idup task) may take it too.
std::mutex& slot_mu() {
  static std::mutex* m = new std::mutex();
  return *m;
}

}  // namespace

std::atomic<int> g_pending_nb{0};

void clear_slots() {
  state& s = st();
  std::lock_guard gs(slot_mu());
  std::fill(s.used_slots.begin(), s.used_slots.end(), 0);
}

void set_slot(comm_obj& c, int slot) {
  c.slot = slot;
  c.p2p_ctx = static_cast<std::uint32_t>(2 * slot);
  c.coll_ctx = static_cast<std::uint32_t>(2 * slot + 1);
  state& s = st();
  std::lock_guard g(slot_mu());
  s.used_slots[slot / 32] |= 1u << (slot % 32);
}

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

}  // namespace nmad::mpi::comms
