// What every collective call shares and is defined once: the
// communicators' transports, the registry of pending non-blocking
// collectives, the reducers of MPI operations, a call's v-blocks, its
// prologue and its launch, and MPI_Finalize's part (see call.hpp).
#include <algorithm>
#include <chrono>
#include <climits>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "api/nmad/services/config.hpp"
#include "mpi_layer/coll/call.hpp"
#include "mpi_layer/coll/direct.hpp"
#include "mpi_layer/coll/progress_hook.hpp"
#include "mpi_layer/coll/shm.hpp"

namespace nmad::mpi::coll_call {

const transport_ptr& transport_of(comm_obj& c) {
  if (c.coll_transport) return c.coll_transport;
  std::lock_guard guard(st().mu);
  const nmad::tag_t base = static_cast<nmad::tag_t>(0x800000u | c.coll_ctx) << coll::tag_bits_total;
  std::vector<int> members = c.world_of;
  if (c.inter) {
    const bool local_first = union_local_first(c);
    members = local_first ? c.local_world_of : c.world_of;
    const auto& second = local_first ? c.world_of : c.local_world_of;
    members.insert(members.end(), second.begin(), second.end());
  }
  c.coll_transport = std::make_shared<coll::session_transport>(*st().session, members, base);
  return c.coll_transport;
}


std::byte g_dummy[1];

}  // namespace nmad::mpi::coll_call

namespace nmad::mpi {
thread_local persistent_build* g_persistent_build = nullptr;
}  // namespace nmad::mpi

namespace nmad::mpi::coll_call {

namespace {

// ---- non-blocking collectives: hook and registry ----------------------------

struct nb_coll {
  transport_ptr tr;                         // outlives ex (declared first)
  std::shared_ptr<coll::executor> ex;
  const char* fn = "";
};

struct nb_state {
  std::mutex mu;
  std::unique_ptr<coll::progress_hook> hook;
  std::vector<std::weak_ptr<nb_coll>> live;     // for MPI_Finalize
  std::vector<std::shared_ptr<nb_coll>> abandoned;  // never destroyed
};

nb_state& nb() {
  static auto* s = new nb_state();  // never destroyed (see st())
  return *s;
}

void register_nb(const std::shared_ptr<nb_coll>& x) {
  nb_state& s = nb();
  std::lock_guard g(s.mu);
  if (!s.hook) s.hook = std::make_unique<coll::progress_hook>(*st().session);
  // (A persistent collective started again is pending again: its entry of
  // the previous start goes too, or the list would grow by one per start.)
  std::erase_if(s.live, [&](const std::weak_ptr<nb_coll>& w) {
    auto p = w.lock();
    return !p || p == x || p->ex->done();
  });
  s.live.push_back(x);
  s.hook->add(x->ex);
}


// ---- reducers ---------------------------------------------------------------

// Reduces `count` elements of an MPI datatype given as the schedule sees
// them: packed (or, for contiguous types, the data bytes starting at
// true_lb).
struct mpi_reducer final : coll::reducer {
  Op op;
  Datatype type;
  MPI_Datatype handle;
  bool contiguous;
  Aint true_lb = 0, extent = 0, true_extent = 0;
  BasicType basic = BasicType::Byte;  // predefined ops: the uniform basic type
  Count basics_per_elem = 0;

  mpi_reducer(const Op& o, const Datatype& t, MPI_Datatype h)
      : op(o), type(t), handle(h), contiguous(t.is_contiguous()) {
    true_lb = t.true_lb();
    extent = t.extent();
    true_extent = t.true_extent();
    if (op.is_predefined()) {
      if (auto b = t.uniform_basic_type()) {
        basic = *b;
        const auto bs = static_cast<Count>(basic_type_info(*b).size);
        basics_per_elem = bs ? t.size() / bs : 0;
      }
    }
  }

  void apply(const void* in, void* inout, std::size_t count) override {
    const auto n = static_cast<Count>(count);
    if (op.is_predefined()) {
      if (basics_per_elem) apply_packed(op.predefined_op(), in, inout, n * basics_per_elem, basic);
      return;
    }
    if (contiguous) {  // the user function sees the buffers' own layout
      user(static_cast<const std::byte*>(in) - true_lb, static_cast<std::byte*>(inout) - true_lb, n);
      return;
    }
    // Non-contiguous: unpack both operands into the type's layout.
    const std::size_t span = static_cast<std::size_t>((n - 1) * (extent < 0 ? -extent : extent) + true_extent);
    std::vector<std::byte> a(span), b(span);
    const Aint shift = extent < 0 ? -(n - 1) * extent : 0;
    std::byte* ua = a.data() - true_lb + shift;
    std::byte* ub = b.data() - true_lb + shift;
    const Count bytes = type.packed_size(n);
    Count pos = 0;
    type.unpack(in, bytes, pos, ua, n);
    pos = 0;
    type.unpack(inout, bytes, pos, ub, n);
    user(ua, ub, n);
    pos = 0;
    type.pack(ub, n, inout, bytes, pos);
  }
  // The user function on n elements laid out as the type says: its count is
  // an int, so a reduction of more elements (a large-count _c collective)
  // calls it on consecutive slices of at most INT_MAX elements, which the
  // standard allows (the function combines elements one by one).
  void user(const std::byte* in, std::byte* inout, Count n) const {
    for (Count done = 0; done < n;) {
      const Count k = std::min<Count>(n - done, INT_MAX);
      op.reduce_user(in + done * extent, inout + done * extent, k, handle);
      done += k;
    }
  }
  void apply_into(const void* in, const void* b, void* out, std::size_t count, std::size_t bytes) override {
    if (op.is_predefined()) {
      if (basics_per_elem)
        apply_packed_into(op.predefined_op(), in, b, out, static_cast<Count>(count) * basics_per_elem, basic);
      return;
    }
    coll::reducer::apply_into(in, b, out, count, bytes);
  }
  bool commutative() const override { return op.is_commutative(); }
};


}  // namespace

void call::reduction(MPI_Op o, const tinfo& t) {
  std::string detail;
  Op op;
  if (int e = check_op(o, t.h, t.type(), true, op, detail)) fail(e, detail);
  red = std::make_shared<mpi_reducer>(op, t.type(), t.h);
}
call::vblocks call::blocks(const std::vector<std::byte*>& addr, const std::vector<Count>& counts,
                           const std::vector<const tinfo*>& types, bool send, bool preload) {
  const std::size_t n = addr.size();
  vblocks v;
  v.bytes.assign(n, 0);
  v.displs.assign(n, 0);
  bool direct = true;
  for (std::size_t i = 0; i < n; ++i) {
    v.bytes[i] = static_cast<std::size_t>(counts[i]) * types[i]->size;
    if (v.bytes[i] && !types[i]->contig) direct = false;
  }
  if (direct) {
    std::byte* lo = nullptr;
    for (std::size_t i = 0; i < n; ++i) {
      if (!v.bytes[i]) continue;
      std::byte* p = at(addr[i], types[i]->true_lb);
      if (!lo || p < lo) lo = p;
    }
    if (!lo) return v;
    v.base = lo;
    for (std::size_t i = 0; i < n; ++i)
      if (v.bytes[i]) v.displs[i] = static_cast<std::size_t>(at(addr[i], types[i]->true_lb) - lo);
    return v;
  }
  std::size_t total = 0;
  for (std::size_t i = 0; i < n; ++i) {
    v.displs[i] = total;
    total += v.bytes[i];
  }
  v.base = temp(total);
  for (std::size_t i = 0; i < n; ++i) {
    if (!v.bytes[i]) continue;
    std::byte* tmp = v.base + v.displs[i];
    const Datatype dt = types[i]->type();
    const Count cnt = counts[i];
    void* user = addr[i];
    if (send || preload) pack(dt, user, cnt, tmp, v.bytes[i]);
    if (!send)
      post.push_back([dt, tmp, user, cnt] {
        Count pos = 0;
        dt.unpack(tmp, dt.packed_size(cnt), pos, user, cnt);
      });
  }
  return v;
}
// The blocks of a v-collective's buffer: counts[i] elements of t at
// displs[i] extents from buf, one per peer (see blocks()).
call::vblocks vector_blocks(call& x, const void* buf, count_array counts, count_array displs, const tinfo& t,
                            const char* what, bool send, bool preload) {
  x.array(counts, send ? "sendcounts" : "recvcounts");
  x.array(displs, "displs");
  std::vector<std::byte*> addr(x.size);
  std::vector<Count> cnt(x.size);
  std::vector<const tinfo*> types(x.size, &t);
  for (int i = 0; i < x.size; ++i) {
    x.buffer(buf, counts[i], t, what);
    addr[i] = at(buf, static_cast<Aint>(displs[i]) * t.extent);
    cnt[i] = counts[i];
  }
  return x.blocks(addr, cnt, types, send, preload);
}

// Common prologue: communicator checks. Throws call_error.
void open(call& x, MPI_Comm comm) {
  x.c = lookup_comm(comm);
  if (!x.c) throw call_error(MPI_ERR_COMM, "invalid communicator");
  x.rank = x.c->rank;
  x.size = x.c->size();
  if (x.c->inter) {
    x.inter = true;
    x.lsize = static_cast<int>(x.c->local_world_of.size());
    const bool local_first = union_local_first(*x.c);
    x.lmap.resize(x.lsize);
    x.rmap.resize(x.size);
    for (int i = 0; i < x.lsize; ++i) x.lmap[i] = local_first ? i : x.size + i;
    for (int i = 0; i < x.size; ++i) x.rmap[i] = local_first ? x.lsize + i : i;
  }
}

namespace {

// How a finished run of a collective's executor completes its request.
int complete_from(request_obj& q, const nb_coll& j, std::string& detail) {
  empty_status(&q.local_status);
  int err = from_errc(j.ex->error());
  if (err == MPI_SUCCESS && j.ex->error() != nmad::errc::ok) err = MPI_ERR_OTHER;
  if (err != MPI_SUCCESS) detail = std::string(j.fn) + ": " + j.ex->error_message();
  q.local_status.MPI_ERROR = err;
  return err;
}

// A persistent collective's request (bindings.hpp, persistent_build): the
// schedule built once, kept by an idle executor; each MPI_Start replays it
// under the sequence number the request took at init, and hands it to the
// progress hook, as a non-blocking collective. The number is the init's
// because the inits are what every member calls in the same order (MPI
// 4.1 6.13: they follow the ordering rules of collectives); the starts of
// several persistent collectives may come in different orders on different
// members (MPICH's coll/p_order). Each run of one request reuses its tags:
// a member starts it again only once its previous run completed there, and
// messages between two members with one tag are matched in order, so a
// run's messages never meet the previous run's receives.
int make_persistent(call& x, MPI_Request* req) {
  const std::uint64_t seq = x.tr->next_sequence();
  auto job = std::make_shared<nb_coll>();
  job->tr = x.tr;
  job->fn = x.fn;
  job->ex = std::make_shared<coll::executor>(std::move(x.sch), *x.tr, coll::executor::idle_t{});
  request_obj* r = new_collective_request(x.c, job);
  r->persistent = true;
  r->active = false;
  r->on_start = [seq](request_obj& q) {
    auto j = std::static_pointer_cast<nb_coll>(q.extra);
    // (Wait/Test drop the completion hook once run: set it at each start.)
    q.on_complete = [](request_obj& rq, std::string& detail) {
      return complete_from(rq, *static_cast<nb_coll*>(rq.extra.get()), detail);
    };
    if (!j->ex->restart(seq)) register_nb(j);
    return MPI_SUCCESS;  // (a failed restart step is the run's error, reported at completion)
  };
  r->poll = [](request_obj& q) { return static_cast<nb_coll*>(q.extra.get())->ex->advance(); };
  *req = r->handle;
  return MPI_SUCCESS;
}

}  // namespace

int launch(call& x, MPI_Request* req) {
  if (x.red) x.sch.keep(x.red);
  if (x.temps) x.sch.keep(x.temps);
  if (!x.post.empty()) {
    x.sch.new_round();
    for (auto& f : x.post) x.sch.call(std::move(f));
    x.post.clear();
  }
  x.tr = transport_of(*x.c);
  if (x.persistent) {
    for (auto& f : x.repack) x.sch.on_restart(std::move(f));
    x.repack.clear();
    return make_persistent(x, req);
  }
  const std::uint64_t seq = x.tr->next_sequence();
  if (!req) {
    std::string why;
    const nmad::errc e = coll::run(std::move(x.sch), *x.tr, seq, &why);
    if (e == nmad::errc::ok) return MPI_SUCCESS;
    return mpi_raise(x.fn, x.c, from_errc(e) == MPI_SUCCESS ? MPI_ERR_OTHER : from_errc(e), why);
  }
  auto job = std::make_shared<nb_coll>();
  job->tr = x.tr;
  job->fn = x.fn;
  job->ex = std::make_shared<coll::executor>(std::move(x.sch), *x.tr, seq);
  request_obj* r = new_collective_request(x.c, job);
  r->poll = [](request_obj& q) { return static_cast<nb_coll*>(q.extra.get())->ex->advance(); };
  r->on_complete = [](request_obj& q, std::string& detail) {
    return complete_from(q, *static_cast<nb_coll*>(q.extra.get()), detail);
  };
  r->active = true;
  register_nb(job);
  *req = r->handle;
  return MPI_SUCCESS;
}

}  // namespace nmad::mpi::coll_call

namespace nmad::mpi {

using coll_call::call;
using coll_call::launch;
using coll_call::nb;
using coll_call::nb_coll;
using coll_call::nb_state;
using coll_call::transport_of;

// Schedules built by other binding files (neighbor.cpp) take the same
// road as the collectives above: transport, sequence number, run or request.
int launch_schedule(const char* fn, comm_obj* c, coll::schedule&& s, MPI_Request* req) {
  call x(fn);
  x.c = c;
  x.sch = std::move(s);
  return launch(x, req);
}

std::shared_ptr<coll::session_transport> collective_transport(comm_obj& c) { return transport_of(c); }

void coll_finalize() {
  nb_state& s = nb();
  std::vector<std::shared_ptr<nb_coll>> pending;
  {
    std::lock_guard g(s.mu);
    for (auto& w : s.live)
      if (auto p = w.lock(); p && !p->ex->done()) pending.push_back(std::move(p));
    s.live.clear();
  }
  std::chrono::milliseconds timeout{10000};
  try {
    timeout = nmad::config::milliseconds("NMAD_COLL_FINALIZE_TIMEOUT_MS");  // checked at MPI_Init
  } catch (const std::exception&) {
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  st().session->wait_until([&] {
    bool all_done = coll_call::shm_iallreduce_finish_all();
    for (auto& p : pending) all_done = p->ex->advance() && all_done;
    return all_done || std::chrono::steady_clock::now() >= deadline;
  });
  std::lock_guard g(s.mu);
  s.hook.reset();  // before the session; no executor is advanced by it any more
  for (auto& p : pending) {
    if (p->ex->done()) continue;
    if (p->ex->abandon()) continue;
    s.abandoned.push_back(p);  // sends still in flight: never destroyed
  }
  std::lock_guard g2(st().mu);
  for (auto& c : st().comms)
    if (c) {
      c->coll_transport.reset();
      shmcoll::release(*c);
    }
}

}  // namespace nmad::mpi
