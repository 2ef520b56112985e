// The RMA agent: the target's side of the message path (rma.hpp). One
// progress task of the session serves the request headers of every
// window; requests of one origin are served in order from its queue, a
// request whose data follows in a second message waits for it, and a
// request behind a lock its origin has asked for but not yet been granted
// waits for the grant. Also the lock manager and the memory operations
// (scatter, gather, accumulate) both paths use.
#include <algorithm>
#include <cstring>

#include "api/nmad/layer.hpp"
#include "mpi_layer/rma/rma.hpp"

namespace nmad::mpi::rma {

namespace {

struct registry {
  std::mutex mu;
  std::vector<std::shared_ptr<window>> windows;
  bool task = false;
};
registry& reg() {
  static registry* r = new registry();
  return *r;
}

int agent_task(void*) {
  registry& r = reg();
  std::unique_lock g(r.mu, std::try_to_lock);
  if (!g.owns_lock()) return 0;  // an application thread serves (or a window is being freed)
  int work = 0;
  for (auto& w : r.windows) work += agent_serve(*w);
  return work;
}

void post_header(window& w) {
  st().session->irecv(nmad::any_source, w.tag(kTagRequest), w.hdr_buf.data(), w.hdr_buf.size(), w.hdr_req);
  w.hdr_posted = true;
}

// Sends an answer (ack + data) to origin o on `tag`; the bytes stay with
// the window until they have left.
void answer(window& w, int o, std::uint32_t tag, int error, const std::byte* data, std::size_t len,
            const std::byte* zero_copy = nullptr, bool raw = false) {
  auto out = std::make_unique<window::outgoing>();
  out->origin = o;
  out->in_place = zero_copy != nullptr;
  wire_ack ack{error, 0};
  if (raw && error == MPI_SUCCESS) {
    // The data alone (kFlagRawAnswer), from the window in place when it
    // is one block.
    const std::byte* from = zero_copy;
    if (!from) {
      out->bytes.assign(data, data + len);
      from = out->bytes.data();
    }
    st().session->isend(w.world_of(o), w.tag(static_cast<int>(tag)), from, len, out->req);
  } else if (raw) {
    out->bytes.resize(sizeof ack);
    std::memcpy(out->bytes.data(), &ack, sizeof ack);
    st().session->isend(w.world_of(o), w.tag(static_cast<int>(tag)), out->bytes.data(), out->bytes.size(), out->req);
  } else if (zero_copy) {
    // Large contiguous get: the ack, then the window's bytes in place.
    out->bytes.resize(sizeof ack);
    std::memcpy(out->bytes.data(), &ack, sizeof ack);
    const nmad::send_piece pieces[2] = {{out->bytes.data(), sizeof ack, nmad::pack_mode::express},
                                        {zero_copy, len, nmad::pack_mode::cheaper}};
    st().session->isendv(w.world_of(o), w.tag(static_cast<int>(tag)), pieces, out->req);
  } else {
    out->bytes.resize(sizeof ack + len);
    std::memcpy(out->bytes.data(), &ack, sizeof ack);
    if (len) std::memcpy(out->bytes.data() + sizeof ack, data, len);
    st().session->isend(w.world_of(o), w.tag(static_cast<int>(tag)), out->bytes.data(), out->bytes.size(), out->req);
  }
  w.answers.push_back(std::move(out));
}

// The target address of a request and whether its blocks lie in the
// window (dynamic windows: in one attached region).
bool locate(window& w, const origin_queue::item& it, std::byte*& at) {
  std::int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (const wire_block& b : it.blocks) {
    lo = std::min(lo, b.off);
    hi = std::max(hi, b.off + b.len);
  }
  if (it.blocks.empty()) lo = hi = 0;
  if (w.fl == flavor::dynamic) {
    const auto first = static_cast<std::uintptr_t>(it.h.target_off + lo);
    const auto last = static_cast<std::uintptr_t>(it.h.target_off + hi);
    at = reinterpret_cast<std::byte*>(static_cast<std::uintptr_t>(it.h.target_off));
    return it.blocks.empty() || attached_covers(w, first, last);
  }
  at = static_cast<std::byte*>(w.base) + it.h.target_off;
  return it.blocks.empty() || (it.h.target_off + lo >= 0 && it.h.target_off + hi <= w.bytes);
}

std::size_t total_len(const std::vector<wire_block>& b) {
  std::size_t n = 0;
  for (const wire_block& x : b) n += static_cast<std::size_t>(x.len);
  return n;
}

// Serves one request whose data (if any) is here. Returns false when it
// must wait (a lock not granted: the request is consumed all the same).
void execute(window& w, int o, origin_queue& q, origin_queue::item& it) {
  const wire_header& h = it.h;
  const kind k = static_cast<kind>(h.kind);
  switch (k) {
    case kind::lock:
      if (!lock_acquire_locked(w, o, h.lock_type ? MPI_LOCK_EXCLUSIVE : MPI_LOCK_SHARED)) q.waiting_lock = true;
      return;
    case kind::unlock:
      lock_release_locked(w, o);
      answer(w, o, h.tag, q.first_error, nullptr, 0);
      q.first_error = MPI_SUCCESS;
      return;
    case kind::flush:
      answer(w, o, h.tag, q.first_error, nullptr, 0);
      q.first_error = MPI_SUCCESS;
      return;
    case kind::complete:
      ++w.completes_seen;
      return;
    default:
      break;
  }
  std::byte* at = nullptr;
  if (!locate(w, it, at)) {
    if (q.first_error == MPI_SUCCESS) q.first_error = MPI_ERR_RMA_RANGE;
    if (k != kind::put && k != kind::acc)
      answer(w, o, h.tag, MPI_ERR_RMA_RANGE, nullptr, 0, nullptr, (h.flags & kFlagRawAnswer) != 0);
    return;
  }
  const std::size_t n = it.blocks.size();
  switch (k) {
    case kind::put:
      if (!it.follow_direct) scatter_blocks(at, it.blocks.data(), n, it.data.data());
      return;
    case kind::get: {
      const std::size_t len = total_len(it.blocks);
      const bool raw = (h.flags & kFlagRawAnswer) != 0;
      if (n == 1 && len > kInlineBytes) {
        answer(w, o, h.tag, MPI_SUCCESS, nullptr, len, at + it.blocks[0].off, raw);
      } else {
        std::vector<std::byte> tmp(len);
        gather_blocks(at, it.blocks.data(), n, tmp.data());
        answer(w, o, h.tag, MPI_SUCCESS, tmp.data(), len, nullptr, raw);
      }
      return;
    }
    case kind::acc:
    case kind::get_acc: {
      std::vector<std::byte> old(k == kind::get_acc ? h.result_len : 0);
      {
        std::lock_guard d(w.data_mu);
        accumulate_blocks(at, it.blocks.data(), n, it.data.data(), h.data_len, static_cast<PredefinedOp>(h.op),
                          static_cast<BasicType>(h.basic), old.empty() ? nullptr : old.data());
      }
      if (k == kind::get_acc) answer(w, o, h.tag, MPI_SUCCESS, old.data(), old.size());
      return;
    }
    case kind::cas: {
      const std::size_t sz = h.data_len / 2;
      std::vector<std::byte> old(sz);
      {
        std::lock_guard d(w.data_mu);
        std::byte* p = at + (n ? it.blocks[0].off : 0);
        std::memcpy(old.data(), p, sz);
        if (std::memcmp(p, it.data.data(), sz) == 0) std::memcpy(p, it.data.data() + sz, sz);
      }
      answer(w, o, h.tag, MPI_SUCCESS, old.data(), sz);
      return;
    }
    default:
      if (q.first_error == MPI_SUCCESS) q.first_error = MPI_ERR_INTERN;
      return;
  }
}

// Parses the header just received from world rank `src` into its origin's queue.
void take_header(window& w, int src, std::size_t got) {
  const int o = (src >= 0 && static_cast<std::size_t>(src) < w.c->comm_of.size()) ? w.c->comm_of[src] : -1;
  if (o < 0 || got < sizeof(wire_header)) return;  // not a member: a foreign message, dropped
  auto it = std::make_unique<origin_queue::item>();
  std::memcpy(&it->h, w.hdr_buf.data(), sizeof(wire_header));
  const wire_header& h = it->h;
  std::size_t pos = sizeof(wire_header);
  if (h.flags & kFlagFollow) {
    it->need_follow = true;
    if (!(h.flags & kFlagBlocksFollow)) {
      if (got < pos + h.nblocks * sizeof(wire_block)) return;
      it->blocks.resize(h.nblocks);
      std::memcpy(it->blocks.data(), w.hdr_buf.data() + pos, h.nblocks * sizeof(wire_block));
    }
  } else {
    const std::size_t need = pos + h.nblocks * sizeof(wire_block) + h.data_len;
    if (got < need) return;
    it->blocks.resize(h.nblocks);
    std::memcpy(it->blocks.data(), w.hdr_buf.data() + pos, h.nblocks * sizeof(wire_block));
    pos += h.nblocks * sizeof(wire_block);
    it->data.assign(w.hdr_buf.data() + pos, w.hdr_buf.data() + pos + h.data_len);
  }
  w.queues[static_cast<std::size_t>(o)]->items.push_back(std::move(it));
}

// Posts the follow-up receive of the item at the front of o's queue.
void post_follow(window& w, int o, origin_queue::item& it) {
  const wire_header& h = it.h;
  nmad::session& s = *st().session;
  const nmad::tag_t tag = w.tag(static_cast<int>(h.tag | kFollowTagBit));
  if (!(h.flags & kFlagBlocksFollow) && static_cast<kind>(h.kind) == kind::put && it.blocks.size() == 1) {
    std::byte* at = nullptr;
    if (locate(w, it, at)) {
      it.follow_direct = true;
      s.irecv(w.world_of(o), tag, at + it.blocks[0].off, h.data_len, it.follow);
      it.follow_posted = true;
      return;
    }
  }
  const std::size_t bl = (h.flags & kFlagBlocksFollow) ? h.nblocks * sizeof(wire_block) : 0;
  it.data.resize(bl + h.data_len);
  s.irecv(w.world_of(o), tag, it.data.data(), it.data.size(), it.follow);
  it.follow_posted = true;
}

// Whether a get of o is still being taken out of the window's memory in
// place: o's unlock (or flush) waits for it, since the memory may change
// as soon as the lock is released.
bool in_place_pending(const window& w, int o) {
  for (const auto& a : w.answers)
    if (a->origin == o && a->in_place && !a->req.completed()) return true;
  return false;
}

// Serves what o's queue can serve now.
int advance(window& w, int o) {
  origin_queue& q = *w.queues[static_cast<std::size_t>(o)];
  int work = 0;
  while (!q.items.empty() && !q.waiting_lock) {
    origin_queue::item& it = *q.items.front();
    if (it.need_follow) {
      if (!it.follow_posted) post_follow(w, o, it);
      if (!it.follow.completed()) break;
      if (it.follow.error() != nmad::errc::ok) {
        if (q.first_error == MPI_SUCCESS) q.first_error = from_errc(it.follow.error());
        q.items.pop_front();
        ++w.served;
        continue;
      }
      if (it.h.flags & kFlagBlocksFollow) {
        const std::size_t bl = it.h.nblocks * sizeof(wire_block);
        it.blocks.resize(it.h.nblocks);
        std::memcpy(it.blocks.data(), it.data.data(), bl);
        it.data.erase(it.data.begin(), it.data.begin() + static_cast<std::ptrdiff_t>(bl));
      }
      it.need_follow = false;
    }
    const kind k = static_cast<kind>(it.h.kind);
    if ((k == kind::unlock || k == kind::flush) && in_place_pending(w, o)) break;
    execute(w, o, q, it);
    q.items.pop_front();
    ++w.served;
    ++work;
  }
  return work;
}

}  // namespace

bool attached_covers(const window& w, std::uintptr_t first, std::uintptr_t last) {
  std::uintptr_t at = first;
  for (bool moved = true; moved && at < last;) {
    moved = false;
    for (const attached_region& r : w.regions)
      if (at >= r.base && at < r.base + r.size) {
        at = r.base + r.size;
        moved = true;
      }
  }
  return at >= last;
}

void scatter_blocks(std::byte* at, const wire_block* b, std::size_t n, const std::byte* data) {
  for (std::size_t i = 0; i < n; ++i) {
    std::memcpy(at + b[i].off, data, static_cast<std::size_t>(b[i].len));
    data += b[i].len;
  }
}

void gather_blocks(const std::byte* at, const wire_block* b, std::size_t n, std::byte* out) {
  for (std::size_t i = 0; i < n; ++i) {
    std::memcpy(out, at + b[i].off, static_cast<std::size_t>(b[i].len));
    out += b[i].len;
  }
}

void accumulate_blocks(std::byte* at, const wire_block* b, std::size_t n, const std::byte* data, std::size_t len,
                       PredefinedOp op, BasicType basic, std::byte* old) {
  if (op == PredefinedOp::NoOp) {  // (MPI_Get_accumulate's fetch alone)
    if (old) gather_blocks(at, b, n, old);
    return;
  }
  const std::size_t esize = basic_type_info(basic).size;
  if (len == 0 || esize == 0) return;
  const auto count = static_cast<Count>(len / esize);
  if (n == 1) {  // one block of memory is the packed layout itself
    std::byte* p = at + b[0].off;
    if (old) std::memcpy(old, p, len);
    apply_packed(op, data, p, count, basic);
    return;
  }
  std::vector<std::byte> tmp(len);
  gather_blocks(at, b, n, tmp.data());
  if (old) std::memcpy(old, tmp.data(), len);
  apply_packed(op, data, tmp.data(), count, basic);
  scatter_blocks(at, b, n, tmp.data());
}

bool lock_acquire_locked(window& w, int o, int type) {
  const bool excl = type == MPI_LOCK_EXCLUSIVE;
  if (w.lock_waiters.empty() && w.excl_holder < 0 && (!excl || w.shared_holders == 0)) {
    if (excl)
      w.excl_holder = o;
    else
      ++w.shared_holders;
    return true;
  }
  w.lock_waiters.push_back(o * 2 + (excl ? 1 : 0));
  return false;
}

void lock_release_locked(window& w, int o) {
  if (w.excl_holder == o)
    w.excl_holder = -1;
  else if (w.shared_holders > 0)
    --w.shared_holders;
  while (!w.lock_waiters.empty()) {
    const int v = w.lock_waiters.front();
    const int o2 = v / 2;
    const bool excl = (v & 1) != 0;
    if (w.excl_holder >= 0 || (excl && w.shared_holders > 0)) break;
    if (excl)
      w.excl_holder = o2;
    else
      ++w.shared_holders;
    w.lock_waiters.pop_front();
    w.queues[static_cast<std::size_t>(o2)]->waiting_lock = false;
    if (excl) break;
  }
}

int agent_serve(window& w) {
  std::unique_lock g(w.mu, std::try_to_lock);
  if (!g.owns_lock()) return 0;
  int work = 0;
  for (int round = 0; round < 64; ++round) {
    int got = 0;
    while (w.hdr_posted && w.hdr_req.completed()) {
      w.hdr_posted = false;
      if (w.hdr_req.error() == nmad::errc::ok) take_header(w, w.hdr_req.status().source, w.hdr_req.status().length);
      post_header(w);
      ++got;
      if (got > 256) break;
    }
    int served = 0;
    for (int o = 0; o < w.size; ++o)
      if (!w.queues[static_cast<std::size_t>(o)]->items.empty()) served += advance(w, o);
    work += got + served;
    if (got + served == 0) break;
  }
  while (!w.answers.empty() && w.answers.front()->req.completed()) {
    w.answers.pop_front();
    ++work;
  }
  if (!w.inflight.empty()) reap_locked(w);
  return work;
}

void agent_add(const std::shared_ptr<window>& w) {
  {
    std::lock_guard g(w->mu);
    w->queues.resize(static_cast<std::size_t>(w->size));
    for (auto& q : w->queues) q = std::make_unique<origin_queue>();
    post_header(*w);
  }
  registry& r = reg();
  std::lock_guard g(r.mu);
  r.windows.push_back(w);
  if (!r.task) {
    r.task = true;
    nmad::layer::add_session_task(*st().session, &agent_task, nullptr);
  }
  if (st().session->has_progress_thread()) {
    // Passive-target progress: the progress thread keeps serving while
    // the application computes.
    w->background = true;
    nmad::layer::background_work(*st().session, 1);
  }
}

void agent_remove(window& w) {
  registry& r = reg();
  {
    std::lock_guard g(r.mu);
    std::erase_if(r.windows, [&](const std::shared_ptr<window>& p) { return p.get() == &w; });
  }
  std::lock_guard g(w.mu);
  if (w.hdr_posted) {
    st().session->cancel(w.hdr_req);
    w.hdr_posted = false;
  }
  if (w.background) {
    w.background = false;
    nmad::layer::background_work(*st().session, -1);
  }
}

}  // namespace nmad::mpi::rma
