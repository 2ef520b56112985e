// The direct path of small blocking collectives (direct.hpp): the engine
// requests each thread keeps for them, the exchange that posts and waits
// for their messages, and the fast entries that skip building a call.
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "api/nmad/services/thread_heap.hpp"
#include "mpi_layer/coll/direct.hpp"

namespace nmad::mpi::coll_call {
namespace {

// The engine requests of one direct collective. An nmad::request is 1 KiB
// and making and destroying one costs about as much as the MPI layer's
// whole share of an 8-byte bcast; so each thread keeps kDirectProcs of them
// (behind a POSIX key: no static TLS) and reuses them, every request having
// ended when its collective returns. A collective started while the
// thread's set is in use (never in a correct program: collectives on one
// thread do not nest) makes its own, only as needed.
class request_slots {
 public:
  static constexpr int capacity = kDirectProcs;
  request_slots() {
    cache& c = thread_heap::thread_object<cache>::get();
    if (!c.busy) {
      c.busy = true;
      _cache = &c;
    }
  }
  request_slots(const request_slots&) = delete;
  request_slots& operator=(const request_slots&) = delete;
  ~request_slots() {
    clear();
    if (_cache) _cache->busy = false;
  }
  // Only once every request made has ended.
  void clear() {
    if (!_cache)
      for (int i = 0; i < _made; ++i) (*this)[i].~request();
    _made = 0;
  }
  nmad::request& make() {
    if (_cache) return _cache->reqs[static_cast<std::size_t>(_made++)];
    return *::new (static_cast<void*>(_raw[_made++])) nmad::request;
  }
  nmad::request& operator[](int i) {
    if (_cache) return _cache->reqs[static_cast<std::size_t>(i)];
    return *std::launder(reinterpret_cast<nmad::request*>(_raw[i]));
  }
  int size() const { return _made; }

 private:
  struct cache {
    std::array<nmad::request, capacity> reqs;
    bool busy = false;
  };
  cache* _cache = nullptr;
  alignas(nmad::request) unsigned char _raw[capacity][sizeof(nmad::request)];
  int _made = 0;
};

// The messages of one direct collective: posted, then waited for together
// (finish(): with the wait policy; on failure the receives still pending
// are cancelled, everything posted has ended, and call_error is thrown
// naming the peer).
class direct_exchange {
 public:
  explicit direct_exchange(comm_obj& c) : _tr(*transport_of(c)) {
    const std::uint64_t seq = _tr.next_sequence();
    _tag = (static_cast<nmad::tag_t>(seq) & ((nmad::tag_t{1} << coll::tag_bits_seq) - 1)) << coll::tag_bits_local;
  }
  // More messages of the same collective (same tags), with an error state of its own.
  explicit direct_exchange(const direct_exchange& same) : _tr(same._tr), _tag(same._tag) {}
  // local: the phase (0, 1), so that two phases between the same ranks
  // never match each other's messages.
  void post(bool send, int peer, std::uint32_t local, const std::byte* p, std::size_t bytes) {
    if (_e != nmad::errc::ok) return;
    nmad::request& q = _reqs.make();
    message& m = _msgs[_reqs.size() - 1];
    m.peer = peer;
    m.send = send;
    _e = send ? _tr.isend(peer, _tag | local, p, bytes, q)
              : _tr.irecv(peer, _tag | local, const_cast<std::byte*>(p), bytes, q);
    m.started = _e == nmad::errc::ok;  // one that did not start never completes
    if (_e != nmad::errc::ok) _failed_peer = peer;
    if (_e != nmad::errc::ok)
      _why = std::string(send ? "send to" : "receive from") + " rank " + std::to_string(peer) + " failed to start" +
             (q.error_message().empty() ? "" : ": " + q.error_message());
  }
  void finish() {
    if (wait() < 0) return;
    const int code = from_errc(_e);
    throw call_error(code == MPI_SUCCESS ? MPI_ERR_OTHER : code, _why);
  }
  // finish() without the throw: -1 when everything posted succeeded, else
  // the peer of the first message that failed (then error()/why() say how;
  // posting more does nothing).
  int wait() {
    const int n = _reqs.size();
    if (_e != nmad::errc::ok)
      for (int i = 0; i < n; ++i)
        if (_msgs[i].started && !_reqs[i].completed()) _tr.cancel(_reqs[i]);
    _tr.wait_until(
        [](void* a) {
          auto& me = *static_cast<direct_exchange*>(a);
          for (int i = 0; i < me._reqs.size(); ++i)
            if (me._msgs[i].started && !me._reqs[i].completed()) return false;
          return true;
        },
        this);
    for (int i = 0; i < n && _e == nmad::errc::ok; ++i) {
      const nmad::errc ei = _reqs[i].error();
      if (ei == nmad::errc::ok) continue;
      _e = ei;
      _failed_peer = _msgs[i].peer;
      _why = std::string(_msgs[i].send ? "send to" : "receive from") + " rank " + std::to_string(_msgs[i].peer) +
             " failed: " + std::string(nmad::to_string(ei)) +
             (_reqs[i].error_message().empty() ? "" : " (" + _reqs[i].error_message() + ")");
    }
    _reqs.clear();
    return _e == nmad::errc::ok ? -1 : _failed_peer;
  }
  const std::string& why() const { return _why; }

 private:
  coll::session_transport& _tr;  // the communicator's (it outlives the call)
  nmad::tag_t _tag = 0;
  request_slots _reqs;
  struct message {  // what _reqs[i] is
    int peer = -1;
    bool send = false;
    bool started = false;  // posted (else it never completes)
  };
  std::array<message, request_slots::capacity> _msgs{};
  nmad::errc _e = nmad::errc::ok;
  int _failed_peer = -1;  // when a post failed to start: its peer
  std::string _why;
};

}  // namespace

shmcoll::area* shm_area(call& x) {
  const int state = x.c->shm_state.load(std::memory_order_acquire);
  if (state == 1) return x.c->shm_area.get();
  if (state == 2) return nullptr;
  try {
    return shmcoll::area_of(*x.c);
  } catch (const call_error&) {
    throw;
  } catch (const std::runtime_error& e) {
    x.fail(MPI_ERR_PROC_FAILED, std::string("setting up the shared-memory collectives: ") + e.what());
  }
  return nullptr;
}
std::string shm_failure(int rank) {
  return "rank " + std::to_string(rank) + " failed (found dead while waiting for it in shared memory)";
}

// The end of a direct collective: unpack steps, nothing left to launch.
void direct_done(call& x) {
  for (auto& f : x.post) f();
  x.post.clear();
  x.nothing = true;
}

// s: the root's data (bcast: the buffer; scatter: every block; gather: this
// rank's block, null for MPI_IN_PLACE); r: where this rank's data goes
// (bcast: the buffer; scatter: this rank's block, null for MPI_IN_PLACE;
// gather at the root: every block).
void direct(call& x, rooted op, int root, const std::byte* s, std::byte* r, std::size_t block) {
  direct_exchange ex(*x.c);
  if (x.rank == root) {
    for (int i = 0; i < x.size; ++i) {
      if (i == root) continue;
      const std::size_t off = op == rooted::bcast ? 0 : static_cast<std::size_t>(i) * block;
      if (op == rooted::gather) ex.post(false, i, 0, r + off, block);
      else ex.post(true, i, 0, s + off, block);
    }
    if (op == rooted::scatter && r && block) std::memcpy(r, s + static_cast<std::size_t>(root) * block, block);
    if (op == rooted::gather && s && block) std::memcpy(r + static_cast<std::size_t>(root) * block, s, block);
  } else if (op == rooted::gather) {
    ex.post(true, root, 0, s, block);
  } else {
    ex.post(false, root, 0, r, block);
  }
  ex.finish();
  direct_done(x);
}

namespace {

// The communicator of a fast call with this root, or null.
comm_obj* fast_comm(MPI_Comm comm, int root) {
  const state& g = st();
  if (!g.initialized.load(std::memory_order_acquire) || g.finalized.load(std::memory_order_acquire)) return nullptr;
  comm_obj* c = lookup_comm(comm);
  if (!c || c->inter) return nullptr;
  const int size = c->size();
  return size >= 2 && size <= kDirectProcs && root >= 0 && root < size ? c : nullptr;
}

// Where `count` elements of dt start in buf, and their bytes (1 to
// kDirectBytes per block), when dt is a predefined type and buf a real
// buffer; else null.
std::byte* plain_block(const void* buf, int count, MPI_Datatype dt, std::size_t& bytes) {
  if (count <= 0 || !buf || buf == MPI_IN_PLACE) return nullptr;
  const tinfo* t = predefined_tinfo(dt);
  if (!t || !t->contig || t->size == 0) return nullptr;
  bytes = static_cast<std::size_t>(count) * t->size;
  return bytes <= kDirectBytes ? at(buf, t->true_lb) : nullptr;
}

// Runs the direct exchange; errors are raised on c as the full path does.
template <class Post>
int run_fast(const char* fn, comm_obj* c, Post&& post) {
  try {
    direct_exchange ex(*c);
    post(ex);
    ex.finish();
  } catch (const call_error& e) {
    return mpi_raise(fn, c, e.code, e.what());
  } catch (const std::bad_alloc&) {
    return mpi_raise(fn, c, MPI_ERR_NO_MEM, "out of memory for the collective's requests");
  }
  return MPI_SUCCESS;
}

// The shared-memory area for a fast call (its set-up failing is the
// call's error, raised on c).
int shm_fast(const char* fn, comm_obj* c, shmcoll::area*& area) {
  const int state = c->shm_state.load(std::memory_order_acquire);
  if (state != 0) {  // decided: one load on every call after the first
    area = state == 1 ? c->shm_area.get() : nullptr;
    return MPI_SUCCESS;
  }
  try {
    area = shmcoll::area_of(*c);
  } catch (const std::runtime_error& e) {
    return mpi_raise(fn, c, MPI_ERR_PROC_FAILED, std::string("setting up the shared-memory collectives: ") + e.what());
  }
  return MPI_SUCCESS;
}
// Runs `op` (area& -> the rank found dead, or -1) on c's shared-memory
// area for a fast call: its result, or kDeclined when c has no area.
template <typename Op>
int run_shm_fast(const char* fn, comm_obj* c, Op op) {
  shmcoll::area* area = nullptr;
  if (const int e = shm_fast(fn, c, area)) return e;
  if (!area) return kDeclined;
  const int dead = op(*area);
  return dead < 0 ? MPI_SUCCESS : mpi_raise(fn, c, MPI_ERR_PROC_FAILED, shm_failure(dead));
}

}  // namespace

int bcast_fast(const char* fn, void* buf, int count, MPI_Datatype dt, int root, MPI_Comm comm) {
  comm_obj* c = fast_comm(comm, root);
  std::size_t bytes = 0;
  std::byte* p = c ? plain_block(buf, count, dt, bytes) : nullptr;
  if (!p) return kDeclined;
  // Shared memory first: on one host it beats the hierarchy's phases
  // (the full path below decides the same way).
  if (const int e = run_shm_fast(fn, c, [&](shmcoll::area& a) { return shmcoll::bcast(a, root, p, bytes); });
      e != kDeclined)
    return e;
  if (comm_hierarchy(c, hier_coll::bcast)) return kDeclined;
  return run_fast(fn, c, [&](direct_exchange& ex) {
    if (c->rank != root) return ex.post(false, root, 0, p, bytes);
    for (int i = 0; i < c->size(); ++i)
      if (i != root) ex.post(true, i, 0, p, bytes);
  });
}

// Scatter (gather = false) or gather. `mine` is this rank's block (scatter:
// rbuf, gather: sbuf; MPI_IN_PLACE allowed at the root), `all` the root's
// blocks (scatter: sbuf, gather: rbuf).
int rooted_fast(const char* fn, bool gather, const void* mine, int mcount, MPI_Datatype mtype, const void* all,
                int acount, MPI_Datatype atype, int root, MPI_Comm comm) {
  comm_obj* c = fast_comm(comm, root);
  if (!c) return kDeclined;
  const bool is_root = c->rank == root, inplace = is_root && mine == MPI_IN_PLACE;
  std::size_t block = 0, ablock = 0;
  std::byte* m = inplace ? nullptr : plain_block(mine, mcount, mtype, block);
  if (!m && !inplace) return kDeclined;
  std::byte* a = nullptr;
  if (is_root) {
    a = plain_block(all, acount, atype, ablock);
    if (!a || (!inplace && ablock != block)) return kDeclined;  // the full path reports a mismatch
    block = ablock;
  }
  if (const int e = run_shm_fast(fn, c,
                                 [&](shmcoll::area& sa) {
                                   return gather ? shmcoll::gather(sa, root, m, a, block)
                                                 : shmcoll::scatter(sa, root, a, m, block);
                                 });
      e != kDeclined)
    return e;
  return run_fast(fn, c, [&](direct_exchange& ex) {
    if (!is_root) return ex.post(gather, root, 0, m, block);
    for (int i = 0; i < c->size(); ++i) {
      std::byte* b = a + static_cast<std::size_t>(i) * block;
      if (i == root) {
        if (m) gather ? std::memcpy(b, m, block) : std::memcpy(m, b, block);
      } else {
        ex.post(!gather, i, 0, b, block);
      }
    }
  });
}

void direct_barrier(call& x) {
  direct_exchange ex(*x.c);
  if (x.rank == 0) {
    for (int i = 1; i < x.size; ++i) ex.post(false, i, 0, g_dummy, 0);
    const int failed = ex.wait();
    const std::uint32_t word = failed < 0 ? 0 : static_cast<std::uint32_t>(failed) + 1;
    if (failed >= 0) {
      // A fresh exchange for the releases (the first keeps the error).
      direct_exchange release(ex);
      for (int i = 1; i < x.size; ++i)
        if (i != failed) release.post(true, i, 1, reinterpret_cast<const std::byte*>(&word), sizeof word);
      release.wait();  // a second failure changes nothing: the first is reported
      ex.finish();
    }
    for (int i = 1; i < x.size; ++i) ex.post(true, i, 1, reinterpret_cast<const std::byte*>(&word), sizeof word);
    ex.finish();
  } else {
    std::uint32_t word = 0;
    ex.post(true, 0, 0, g_dummy, 0);
    ex.post(false, 0, 1, reinterpret_cast<std::byte*>(&word), sizeof word);
    ex.finish();
    if (word != 0)
      x.fail(MPI_ERR_PROC_FAILED, "rank " + std::to_string(word - 1) + " failed (rank 0 did not hear from it)");
  }
  x.nothing = true;
}

namespace {

// A pending shared-memory MPI_Ibarrier (the request's extra).
struct shm_ibarrier_job {
  std::shared_ptr<shmcoll::area> area;  // mapped while the request lives
  std::uint64_t op = 0;
  int state = -2;  // shmcoll::ibarrier_test: -2 pending, -1 done, else a dead member
  unsigned polls = 0;
};

}  // namespace

bool shm_ibarrier(call& x, MPI_Request* req) {
  if (x.inter || x.c->shm_state.load(std::memory_order_acquire) != 1) return false;
  auto job = std::make_shared<shm_ibarrier_job>();
  job->area = x.c->shm_area;
  if (const int dead = shmcoll::ibarrier_start(*job->area, job->op); dead >= 0)
    x.fail(MPI_ERR_PROC_FAILED, shm_failure(dead));
  request_obj* r = new_collective_request(x.c, job);
  r->memory_completion = true;
  r->poll = [](request_obj& q) {
    auto& j = *static_cast<shm_ibarrier_job*>(q.extra.get());
    if (j.state == -2) j.state = shmcoll::ibarrier_test(*j.area, j.op, (++j.polls & 7) == 0);
    return j.state != -2;
  };
  r->on_complete = [](request_obj& q, std::string& detail) {
    const auto& j = *static_cast<shm_ibarrier_job*>(q.extra.get());
    empty_status(&q.local_status);
    int err = MPI_SUCCESS;
    if (j.state >= 0) {
      err = MPI_ERR_PROC_FAILED;
      detail = "MPI_Ibarrier: " + shm_failure(j.state);
    }
    q.local_status.MPI_ERROR = err;
    return err;
  };
  r->active = true;
  *req = r->handle;
  x.nothing = true;
  return true;
}

namespace {

// A shared-memory allreduce (the request's extra).
struct shm_allreduce_job {
  std::shared_ptr<shmcoll::area> area;  // mapped while the request lives
  std::shared_ptr<coll::reducer> red;
  shmcoll::iallreduce st;
  int state = -2;  // shmcoll::iallreduce_test: -2 pending, -1 done, else a dead member
  const char* fn = "";
  ~shm_allreduce_job() {
    if (state == -2 && st.op != 0) shmcoll::iallreduce_drop(*area, st);
  }
};

bool shm_allreduce_advance(shm_allreduce_job& j) {
  if (j.state == -2) j.state = shmcoll::iallreduce_test(*j.area, j.st);
  return j.state != -2;
}

bool shm_allreduce_poll(request_obj& q) { return shm_allreduce_advance(*static_cast<shm_allreduce_job*>(q.extra.get())); }

// The started ones, for MPI_Finalize (which completes them, as the
// schedules of the other non-blocking collectives; freed requests too).
struct shm_started {
  std::mutex mu;
  std::vector<std::weak_ptr<shm_allreduce_job>> jobs;
};
shm_started& started() {
  static auto* s = new shm_started();  // never destroyed (see st())
  return *s;
}
void note_started(const std::shared_ptr<shm_allreduce_job>& j) {
  shm_started& s = started();
  std::lock_guard g(s.mu);
  // (A persistent job started again is pending again: its entry of the
  // previous start goes too, or the list would grow by one per start.)
  std::erase_if(s.jobs, [&](const std::weak_ptr<shm_allreduce_job>& w) {
    auto p = w.lock();
    return !p || p == j || p->state != -2;
  });
  s.jobs.push_back(j);
}

int shm_allreduce_complete(request_obj& q, std::string& detail) {
  const auto& j = *static_cast<shm_allreduce_job*>(q.extra.get());
  empty_status(&q.local_status);
  int err = MPI_SUCCESS;
  if (j.state >= 0) {
    err = MPI_ERR_PROC_FAILED;
    detail = std::string(j.fn) + ": " + shm_failure(j.state);
  }
  q.local_status.MPI_ERROR = err;
  return err;
}

}  // namespace

bool shm_iallreduce(call& x, const std::byte* mine, std::byte* result, std::size_t bytes, std::size_t count,
                    bool contig, MPI_Request* req) {
  if (x.inter || !contig || bytes == 0 || bytes > shmcoll::kBigBytes ||
      x.c->shm_state.load(std::memory_order_acquire) != 1)
    return false;
  auto job = std::make_shared<shm_allreduce_job>();
  job->area = x.c->shm_area;
  job->red = x.red;
  job->fn = x.fn;
  job->st.mine = mine;
  job->st.result = result;
  job->st.bytes = bytes;
  job->st.count = count;
  job->st.red = job->red.get();
  request_obj* r = new_collective_request(x.c, job);
  r->memory_completion = true;
  r->poll = shm_allreduce_poll;
  if (x.persistent) {
    r->persistent = true;
    r->active = false;
    r->on_start = [](request_obj& q) {
      auto& j = *static_cast<shm_allreduce_job*>(q.extra.get());
      q.on_complete = shm_allreduce_complete;  // (dropped by Wait/Test once run)
      j.state = -2;
      j.st.phase = 0;
      j.st.dead = -1;
      j.st.polls = 0;
      shmcoll::iallreduce_start(*j.area, j.st);
      note_started(std::static_pointer_cast<shm_allreduce_job>(q.extra));
      return MPI_SUCCESS;
    };
  } else {
    r->on_complete = shm_allreduce_complete;
    shmcoll::iallreduce_start(*job->area, job->st);
    note_started(job);
    r->active = true;
  }
  *req = r->handle;
  x.nothing = true;
  return true;
}

bool shm_iallreduce_finish_all() {
  std::vector<std::shared_ptr<shm_allreduce_job>> live;
  {
    shm_started& s = started();
    std::lock_guard g(s.mu);
    for (auto& w : s.jobs)
      if (auto p = w.lock()) live.push_back(std::move(p));
  }
  bool all = true;
  for (auto& j : live) all = shm_allreduce_advance(*j) && all;
  return all;
}

}  // namespace nmad::mpi::coll_call

namespace nmad::mpi {

int coll_direct_step(comm_obj& c, bool root_sends, std::byte* p, std::size_t bytes, std::byte* all,
                     std::string& why) {
  coll_call::direct_exchange ex(c);
  if (c.rank == 0) {
    for (int i = 1; i < c.size(); ++i)
      ex.post(root_sends, i, 0, root_sends ? p : all + static_cast<std::size_t>(i) * bytes, bytes);
  } else {
    ex.post(!root_sends, 0, 0, p, bytes);
  }
  const int failed = ex.wait();
  if (failed >= 0) why = ex.why();
  return failed;
}

}  // namespace nmad::mpi
