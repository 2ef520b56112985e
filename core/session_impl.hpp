#pragma once
// The engine behind nmad::session: owns the drivers, the gates, the receive
// path (core/receive/) and the progress tasks.
//
// LOCK ORDER. There is no session-wide lock; the lock domains follow the
// layers (all of them are no-ops below thread_level::multiple):
//   1. a driver's poll lock   driver_slot::lock (recursive). Every call into
//                             a driver holds it. Taken *blocking* only by a
//                             thread that holds no other engine lock; with
//                             any lock below held, only try_lock: a driver
//                             found busy is not waited for, the work is
//                             deferred (a gate to schedule again, a
//                             rendezvous to ask again) and done by the
//                             thread's next lock-free point or progress
//                             round. A poller that finds it busy skips it.
//   2. the matching lock      receive_path::lock(): posted receives,
//                             unexpected and detached messages, every gate's
//                             receive side, receive requests.
//   3. a gate's lock          gate::lock: its collect list and send side.
//   4. a track's lock         track::lock: its send list (in flight, retry).
//   5. leaves                 _pending_lock (deferred work), the progress
//                             engine's submission lock, the waiter's own
//                             locks. The progress engine's task lock is
//                             try-locked by progress only with nothing held
//                             (tasks run under it and may take 1-5).
// A thread takes them in this order (skipping any), never the other way
// round; two locks of one level are never held at once. Driver events
// (packets, completions) arrive inside poll with lock 1 held and take 2-4
// as they need them.
//
// Failures and completions never run under locks: fail_gate() queues the
// gate's clean-up, complete() queues callbacks, and both run when the
// thread leaves the engine (the outermost engine_scope) or in a progress
// round, with no lock held.
#include <boost/intrusive/list.hpp>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "api/nmad/nmad.hpp"
#include "core/bootstrap/bootstrap.hpp"
#include "core/common/engine_mutex.hpp"
#include "api/nmad/services/trace.hpp"
#include "core/gate.hpp"
#include "core/matching/match_queues.hpp"
#include "core/progress/progress_engine.hpp"
#include "core/progress/progress_thread.hpp"
#include "core/progress/waiter.hpp"
#include "core/receive/receive_path.hpp"
#include "core/transfer/driver.hpp"
#include "core/transfer/driver_slot.hpp"
#include "core/transfer/scheduler.hpp"

namespace nmad {

class session_impl;

// A rendezvous entry offered for pulling (chunk_flag::pullable) leaves the
// gate's rdv_out: nobody reads its bytes any more, its exposure ends (see
// driver::expose). Called once per entry, with the gate lock held.
inline void end_exposure(gate& g, chunk_entry& e) {
  if (!(e.flags & chunk_flag::pullable)) return;
  e.flags &= static_cast<std::uint8_t>(~chunk_flag::pullable);
  g.tracks[0].slot->drv->unexpose(e.ptr, e.len);
}

class session_impl final : private wait_engine, private scheduler::host, private receive_path::host {
 public:
  explicit session_impl(const session_options& opts);
  ~session_impl();

  int rank() const { return _rank; }
  int size() const { return _size; }
  const std::string& strategy_name() const { return _strategy_name; }
  errc set_strategy(std::string_view name);

  // Send side.
  errc isend(int dest, tag_t tag, const void* buf, std::size_t len, request_state& r,
             send_flags flags = send_flags::none, std::uint8_t priority = 0);
  errc pack_begin(int dest, tag_t tag, request_state& r, std::uint8_t priority = 0);
  errc pack_piece(request_state& r, const void* buf, std::size_t len, pack_mode mode);
  errc pack_end(request_state& r);
  // pack_end without the wait: the request completes once every piece left.
  errc pack_seal(request_state& r);
  // Partitioned send (session::psend_begin / psend_piece).
  errc psend_begin(int dest, tag_t tag, std::uint64_t len, request_state& r, std::uint8_t priority);
  errc psend_piece(request_state& r, std::uint64_t offset, const void* buf, std::uint64_t len);

  // Receive side.
  errc irecv(int source, tag_t tag, tag_t mask, void* buf, std::size_t len,
             request_state& r, bool sealed = true);
  // Partitioned receive (session::precv): segments of part_len bytes.
  errc precv(int source, tag_t tag, void* buf, std::uint64_t len, std::uint64_t part_len, request_state& r);
  bool parrived(const request_state& r, std::uint64_t first, std::uint64_t count);
  errc unpack_piece(request_state& r, void* buf, std::size_t len, pack_mode mode);
  errc unpack_end(request_state& r);
  bool iprobe(int source, tag_t tag, tag_t mask, recv_status& st);
  // Matched probe: detaches the first matching unexpected message whose
  // length is known; imrecv binds a receive to it.
  unexpected_message* improbe(int source, tag_t tag, tag_t mask, recv_status& st);
  errc imrecv(unexpected_message* u, void* buf, std::size_t len, request_state& r);
  int add_progress_task(int (*fn)(void*), void* arg);
  void remove_progress_task(int id);
  [[noreturn]] void abort(int exit_code, const std::string& message);
  bool cancel(request_state& r);
  bool cancel_send(request_state& r);                                   // lock held
  void handle_cancel_ack(gate& g, const wire::chunk_header& h);         // lock held

  // ~request of a pending request: cancels what has not started (a posted
  // receive, a send the receiver has not seen, an unmatched rendezvous) and
  // waits for what has (see ~request in api/nmad/nmad.hpp). A request of a
  // session that is gone is left alone. No lock held.
  static void abandon(request_state& r);
  // This session's serial number: a request started by it carries it, so a
  // request destroyed after its session (or under a later session at the
  // same address) is recognised.
  std::uint64_t serial() const { return _serial; }

  bool test(request_state& r);
  errc wait(request_state& r);
  int wait_any(std::span<request* const> reqs);
  // Blocking probe: returns once a matching message is here, or fails
  // with peer_failed once no live peer could send one.
  recv_status probe(int source, tag_t tag, tag_t mask);
  int progress(bool wait_busy_drivers = false);
  // Waits with the session's wait policy until done(arg) is true.
  void wait_until(bool (*done)(void*), void* arg) { _waiter.wait(done, arg); }
  waiter& the_waiter() { return _waiter; }
  const waiter& the_waiter() const { return _waiter; }
  thread_level level() const { return _level; }
  session_stats stats() const;
  std::vector<gate_stats> peer_stats() const;
  std::size_t rdv_threshold(int peer) const;
  std::size_t set_rdv_threshold(std::size_t bytes);
  void print_stats() const;  // NMAD_STATS=1, at the end (stderr)
  bool peer_alive(int rank) const;
  std::string local_address(std::string_view driver = {}) const;
  std::string driver_name() const;
  // The progress thread: "none (...)" or where it runs and why.
  const std::string& progress_description() const { return _progress_desc; }
  bool has_progress_thread() const { return _progress_thread != nullptr; }
  std::size_t copy_offload_min() const { return _copy_offload_min; }
  // Background work outside requests (a non-blocking collective's schedule):
  // keeps the progress thread running while > 0.
  void background_work(long delta);
  void notify_waiters() { _waiter.notify(); }
  void begin_blocking() { waiter::begin_blocking(); }
  void end_blocking() { _waiter.end_blocking(); }

  // Marks a thread inside the engine for a scope (every entry point opens
  // one first, before any lock). When the thread's outermost scope ends,
  // with no lock held, the work deferred meanwhile runs: gate failures,
  // gates and rendezvous waiting for a busy driver, then completion
  // callbacks (each request becomes complete once its callback returned),
  // so callbacks may call the session again, start requests, or wait.
  class engine_scope {
   public:
    explicit engine_scope(const session_impl& s) : _s(const_cast<session_impl&>(s)) { ++t_depth; }
    ~engine_scope() {
      if (--t_depth == 0) {
        if (_s._pending_any.load(std::memory_order_acquire) || deferred_waiting()) _s.leave_engine();
        if (_s._recv.trim_due()) _s._recv.trim_if_due();  // no lock held here
        _s._waiter.returns_to_application();  // the progress thread may have work
      }
    }
    engine_scope(const engine_scope&) = delete;
    engine_scope& operator=(const engine_scope&) = delete;

   private:
    session_impl& _s;
  };

  // Driver events (called from driver_slot, its poll lock held). Arrivals
  // go to the receive path (core/receive/receive_path.hpp).
  void connected(driver_slot& slot, connection_id conn, int peer_rank);
  void packet_arrived(driver_slot& slot, connection_id conn, std::span<const std::byte> bytes) {
    gate* g = slot.gates.find(conn);
    if (g && !g->failed.load(std::memory_order_acquire)) _recv.packet_arrived(*g, bytes);
  }
  void send_done(packet_wrapper* pw) { _sched.send_done(pw); }  // from driver_slot::on_send_done
  void recv_data_done(rdv_recv* rr, std::size_t received) { _recv.recv_data_done(rr, received); }
  void connection_failed(driver_slot& slot, connection_id conn, std::string_view reason);

 private:
  // Set-up.
  void open_drivers(const session_options& opts);
  static std::string address_key(const driver_slot& s, int rank);
  static std::string host_key(int rank);
  static std::string host_identity();
  std::vector<driver_slot*> reaching_slots(int peer);  // multi-rail: every one, in order
  void connect_all(std::chrono::milliseconds timeout);
  // NMAD_PROFILE: fills every slot's caps from the drivers' (sampled) profiles.
  void apply_profiles();
  // NMAD_PROGRESS: decides and starts the progress thread (after connect_all).
  void start_progress(const std::string& mode);
  void enable_threads();  // progress threads force every lock on
  void shutdown();

  // Progress and scheduling.
  // One round; no lock held. wait_busy_drivers: a driver another thread
  // polls is waited for (its lock taken blocking) instead of skipped.
  int progress_now(bool wait_busy_drivers = false);
  void leave_engine();         // the outermost engine_scope ended
  int flush_pending();         // deferred failures and schedules (how many); no lock held
  // g is scheduled again (its rendezvous asked again first) at the
  // thread's next lock-free point.
  void defer_schedule(gate& g);
  void wait_until(request_state& r);
  // wait_engine (the waiter's view of the session).
  int progress_round() override;
  arm_result arm_drivers(std::vector<pollfd>& fds, int& timeout_ms) override;
  void disarm_drivers(std::span<const pollfd> fds) override;
  bool has_unsent() override;
  // The NIC-driven scheduler (core/transfer/scheduler.hpp): fills g's tracks.
  void schedule(gate& g) { _sched.schedule(g); }
  // Copy offload: leaves g's scheduling (the packet's copy) to the
  // progress thread, as a progress task; any thread's round may run it.
  void offload_schedule(gate& g);  // no lock held
  static task_result offload_task(void* g);
  track_view view_of(track& t) const { return _sched.view_of(t); }
  void put_wrapper(packet_wrapper* pw) { scheduler::put_wrapper(pw); }

  // Send helpers.
  static bool expose_pull_hook(send_side& side, chunk_entry& e);                  // send_side::expose_pull
  void entry_progress(gate& g, chunk_entry& e);  // gate lock held
  void finish_send_if_done(request_state& r);
  // The peer's control chunks for the send side (receive_path::host::
  // send_side_chunk; matching lock held, they take the gate lock). Flow
  // control (see "Credits" in core/protocol/wire.hpp): the send side is the
  // gate's send_side (core/collect/send_side.hpp); the session completes
  // what it withdraws and fails a gate that breaks the protocol.
  void handle_rtr(gate& g, const wire::chunk_header& h);
  void handle_credit(gate& g, const wire::chunk_header& h);
  void handle_want(gate& g, const wire::chunk_header& h);
  void handle_offer_ack(gate& g, const wire::chunk_header& h);
  // A send the receiver has seen nothing of (it waits for credit) is
  // withdrawn and completes as cancelled; false if it is not one.
  bool withdraw_held(gate& g, request_state& r);

  // Receive entry points' helpers (core/session_recv.cpp): a request set
  // up as a receive, then matched or posted by the receive path.
  void setup_recv(request_state& r, int source, tag_t tag, tag_t mask, void* buf, std::size_t len,
                  bool sealed);
  errc post_recv(request_state& r, int source, tag_t tag, tag_t mask);
  void protocol_violation(gate& g, const std::string& what);

  // Completion and failure.
  void abandon_request(request_state& r);  // see abandon()
  static std::uint64_t enlist(session_impl* s);  // among the live sessions; returns its serial
  static void delist(session_impl* s);
  void complete(request_state& r);
  void run_deferred();  // no lock held
  static void trace_completion(const request_state& r);  // NMAD_TRACE: send_done / recv_done
  void publish(request_state& r);  // marks r complete and wakes its waiter
  void fail_request(request_state& r, errc e, std::string message);
  // Marks g failed now; its clean-up (failing its requests, reclaiming its
  // wrappers, closing its connections if `close`) runs at the thread's
  // next lock-free point. Any lock may be held.
  void fail_gate(gate& g, std::string reason, bool close = false);
  // scheduler::host
  void driver_busy(gate& g) override { defer_schedule(g); }
  void posted() override { _waiter.kick(); }
  void send_refused(gate& g, std::string reason) override { fail_gate(g, std::move(reason)); }
  void entry_sent(gate& g, chunk_entry& e) override { entry_progress(g, e); }
  // receive_path::host: its calls are defined with the session's
  // (core/session_progress.cpp, session_send.cpp).
  friend class receive_path::host;
  void clean_up_failed(gate& g, bool close);  // no lock held
  bool gate_busy(gate& g);                    // flush pending? (no lock held)
  void count(std::atomic<std::uint64_t>& c, std::uint64_t n = 1) {
    if (_threaded) c.fetch_add(n, std::memory_order_relaxed);
    else c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  bool no_live_peer() const;  // every other rank failed (size > 1)
  std::string peer_name(const gate& g) const;
  // "rank N failed: <reason>" for a request that fails because g failed,
  // naming the first failure this process saw if that was another peer's
  // (a peer that gave up a collective because a third one died, then
  // closed its connections, did not fail first). _pending_lock not held.
  std::string failure_text(const gate& g);
  // " (after rank N failed, as rank M reported)" if g's peer sent a
  // failure_notice, else empty.
  std::string reported_cause(const gate& g) const;
  // Before ending its connections after a failure: tells every live
  // connected peer which failure it was (failure_notice), and waits a
  // little for the notices to leave.
  void send_failure_notices();

  // Engine scopes open on this thread. Thread-locals on the message path
  // use the initial-exec model: a plain %fs-relative access instead of a
  // __tls_get_addr call. They are scalars and pointers only, so that the
  // library still loads with dlopen (api/nmad/services/thread_heap.hpp).
  [[gnu::tls_model("initial-exec")]] static thread_local int t_depth;
  // Completions whose callback has not run yet (run when the thread
  // leaves the engine, see engine_scope).
  struct deferred_completion {
    session_impl* s;
    request_state* r;
  };
  struct deferred_queue {
    static constexpr std::size_t kInline = 16;
    std::size_t size = 0;
    deferred_completion items[kInline];
    std::vector<deferred_completion> spill;  // beyond kInline
    bool empty() const { return size == 0; }
    void push(deferred_completion d) {
      if (size < kInline) items[size] = d;
      else spill.push_back(d);
      ++size;
    }
  };
  // What a thread keeps between engine calls, on the heap: null until the
  // thread first defers a completion or sleeps.
  struct thread_work {
    deferred_queue deferred;
    std::vector<deferred_completion> batch;  // run_deferred's
    // arm_drivers -> disarm_drivers (one arm per thread at a time): the
    // descriptors each driver slot added, and which slots were armed.
    std::vector<std::size_t> arm_counts;
    std::vector<bool> armed;
  };
  [[gnu::tls_model("initial-exec")]] static thread_local thread_work* t_work;
  static thread_work& work_of_thread();
  static bool deferred_waiting() {
    const thread_work* w = t_work;
    return w && !w->deferred.empty();
  }
  std::uint64_t _serial = 0;  // see serial(); registered among the live sessions
  thread_level _level = thread_level::multiple;
  bool _threaded = true;                   // _level == multiple
  domain_mutex _pending_lock;              // leaf: the deferred work below
  std::atomic<bool> _pending_any{false};
  std::vector<gate*> _pending_gates;       // to schedule again (a driver was busy)
  struct failure {
    gate* g;
    bool close;
  };
  std::vector<failure> _failures;          // to clean up
  int _first_failed = -1;                  // the first gate failure seen: its rank,
  std::string _first_failure;              // and "rank N failed: <reason>"
  // Whether the machine is contended now (the waiter's yield and spin
  // decisions, idle test calls); declared before the waiter, which uses it.
  std::unique_ptr<load_probe> _load_probe = make_system_load_probe();
  load_monitor _load_monitor{*_load_probe};
  waiter _waiter;
  std::unique_ptr<bootstrap> _boot;
  int _rank = 0;
  int _size = 1;
  std::string _strategy_name;
  std::shared_ptr<const strategy_source> _strategy_source;  // creates each gate's instance
  std::size_t _rdv_threshold = 0;  // asked for, or the default (gates may prefer their driver's)
  std::size_t _max_eager = 0;      // the longest message a packet of every driver carries
  bool _print_stats = false;  // NMAD_STATS=1
  std::chrono::milliseconds _finalize_timeout{30000};  // NMAD_FINALIZE_TIMEOUT_MS, read at start-up
  // NMAD_TRACE: this session records events (api/nmad/services/trace.hpp); stops
  // at shutdown, or when a failing set-up destroys the members.
  struct trace_session {
    bool on = false;
    ~trace_session() {
      if (on) trace::stop();
    }
  } _trace;
  std::size_t _copy_offload_min = 0;          // NMAD_COPY_OFFLOAD (0: off), with a progress thread only
  std::atomic<int> _flushing{0};             // flush_pending calls holding taken work
  std::atomic<int> _offloads_queued{0};       // offload tasks not run yet (sleepers must not sleep)
  int _local_processes = 1;  // processes of the job on this machine (this one included)
  int _job_cpus = 1;         // CPUs the job may use on this machine
  // Flow control: NMAD_UNEXPECTED_MAX (0: unlimited), shared by the peers'
  // receive windows (gate::rx_window).
  std::uint64_t _unexpected_max = 0;

  std::vector<std::unique_ptr<driver_slot>> _slots;  // [0] = self, then network drivers by preference
  std::vector<std::unique_ptr<gate>> _gates;         // indexed by rank
  struct counters {
    // (Packets, chunks, bytes and bulk transfers sent are counted per
    // track: track::stats; packets and unexpected messages received by
    // the receive path.)
    std::atomic<std::uint64_t> protocol_errors{0}, offloaded_sends{0}, offload_tasks_by_thread{0};
  };
  counters _stats;
  std::atomic<bool> _finalizing{false};
  progress_engine _tasks;  // progress tasks, run by progress_now
  std::atomic<unsigned> _rounds{0};  // progress rounds (quiet drivers are polled every 64th)
  scheduler _sched{*this, _rounds};  // after _rounds (it reads it)
  receive_path _recv;                // after _sched and _gates (it uses them)
  bool _connecting = false;  // connect_all: every driver is polled every round
  bool _multirail = false;   // NMAD_DRIVERS=a+b: one track per listed driver
  std::unique_ptr<progress_thread> _progress_thread;  // NMAD_PROGRESS (stopped first at shutdown)
  std::string _progress_desc = "none";
};

}  // namespace nmad
