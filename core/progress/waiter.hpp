#pragma once
// The waiter: how every blocking call of the engine waits.
//
// How waiting works. A blocking call (wait, wait_any, probe, an express
// unpack, a blocking MPI collective...) gives the waiter a *condition* and
// the waiter alternates progress rounds and checks of the condition. What it
// does when a round found nothing to do is the *wait policy*:
//   * busy        poll again at once (lowest latency, burns its core);
//   * block       sleep until there is something to do;
//   * fixed_spin  poll for `spin` since the last useful round, then sleep
//                 (the default: a reply that comes within the spin costs no
//                 context switch, a long wait costs no CPU).
// Sleeping: the waiter arms every driver (driver::arm_wakeup: each adds the
// descriptors that become readable when it has work and makes its peers
// ring this process) plus the engine's own event descriptor, then sleeps in
// poll(2). A driver that has work pending answers busy and the thread polls
// instead; a driver that cannot wake a sleeper makes the sleep a short
// slice. Completions made by another thread of the process wake sleeping
// threads through the event descriptor (notify()), and so do submissions
// that leave work a sleeping thread armed too early to see (kick()).
//
// Several waiting threads (threaded waiters, policies block and
// fixed-spin): one of them at a time, the *leader*, runs progress rounds
// and spins or sleeps on the drivers as above; the others, *followers*,
// sleep on their own event descriptor without touching the engine, so k
// threads waiting together cost one poller, not k spinners fighting for
// the cores and the engine lock. A follower waiting for one request (a
// wake slot: the request's wake_fd) is woken when that request completes;
// one waiting for anything else (wait_any, a probe...) by every completion.
// A leader whose condition is met hands the role to a follower. Policy busy
// keeps every thread polling.
//
// Background progress (progress threads, see progress_thread.hpp). With
// enable_background(), one thread may run run_background(): it makes
// progress while the application is *outside* the library and work is in
// flight, and never stands in an application thread's way:
//   * idle (nothing in flight, or an application thread waits in the
//     library and so progresses itself) it sleeps on its own event
//     descriptor, unarmed: peers do not ring it, drivers do not wake it
//     (after polling the counts for set_background_spin(), if set);
//   * an application thread that returns to the application (the end of
//     its outermost engine call or blocking section, or of its wait) with
//     work in flight wakes it; it then leads in the background: rounds
//     while they find work, then a sleep armed on the drivers (policy
//     block), so a peer's packet or a submission wakes it;
//   * an application thread that comes to wait takes over at once: it
//     leads itself (no hand-off on the latency path) and tells the
//     background thread, which returns to its idle sleep after its round.
// Work in flight is counted by the engine (work_started/work_finished).
// The handshakes are store-then-load pairs on seq_cst atomics on both
// sides, so a wake-up is never lost; the idle sleep still has a long
// timeout as a safety net.
//
// Thread safety: wait() may be called from any number of threads at once.
// notify() and kick() are callable from any thread, with or without engine
// locks; below MPI_THREAD_MULTIPLE (`threaded == false`) there is no other
// thread to wake and they cost nothing.
#include <poll.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/common/fences.hpp"
#include "core/common/wait_policy.hpp"
#include "core/progress/load_monitor.hpp"
#include "core/transfer/driver.hpp"

namespace nmad {

struct wait_config {
  wait_policy policy = wait_policy::fixed_spin;
  std::chrono::nanoseconds spin = std::chrono::microseconds(100);
};

// "busy", "block", "fixed-spin"; parse_wait_policy accepts those and
// "spin" (= fixed-spin); false for anything else.
std::string_view wait_policy_name(wait_policy p);
bool parse_wait_policy(std::string_view text, wait_policy& out);

// What the waiter needs from the engine around it.
class wait_engine {
 public:
  virtual ~wait_engine() = default;
  // One round of progress; returns the work done (0 = nothing happened).
  virtual int progress_round() = 0;
  // Arms every driver (appends their descriptors after the waiter's own);
  // returns busy if one has work pending, cannot if one cannot wake us.
  virtual arm_result arm_drivers(std::vector<pollfd>& fds, int& timeout_ms) = 0;
  // Ends what arm_drivers started; `fds` is the whole array with revents.
  virtual void disarm_drivers(std::span<const pollfd> fds) = 0;
  // Whether packets are still queued or being sent (control packets too:
  // an acknowledgement owed to a peer is not a request of ours). Called by
  // the progress thread, no lock held, before it goes idle.
  virtual bool has_unsent() { return false; }
};

class waiter {
 public:
  // `threaded`: other threads may complete requests or wait concurrently.
  waiter(wait_engine& engine, bool threaded);
  ~waiter();
  waiter(const waiter&) = delete;
  waiter& operator=(const waiter&) = delete;

  wait_config config() const {
    return {_policy.load(std::memory_order_relaxed), std::chrono::nanoseconds(_spin_ns.load(std::memory_order_relaxed))};
  }
  // Whether idle rounds give the CPU away (sched_yield) while spinning: what
  // a contended machine needs (more runnable threads than CPUs: the process
  // a spinner waits for may be queued behind it on the same CPU).
  //   never           spin without yielding (NMAD_WAIT_YIELD=0)
  //   when_contended  yield while the load monitor says the machine is
  //                   contended (the default; without a monitor: never)
  //   always          yield on every idle round (NMAD_WAIT_YIELD=1)
  enum class yield_mode : std::uint8_t { never, when_contended, always };
  void set_yield_mode(yield_mode m) { _yield_mode.store(m, std::memory_order_relaxed); }
  yield_mode get_yield_mode() const { return _yield_mode.load(std::memory_order_relaxed); }
  // The monitor consulted in mode when_contended (null: none); it must
  // outlive the waiter's use of it.
  void set_load_monitor(load_monitor* m) { _load.store(m, std::memory_order_release); }
  load_monitor* the_load_monitor() const { return _load.load(std::memory_order_acquire); }
  // Whether an idle round should give the CPU away now.
  bool yield_now() const {
    switch (_yield_mode.load(std::memory_order_relaxed)) {
      case yield_mode::never: return false;
      case yield_mode::always: return true;
      case yield_mode::when_contended: break;
    }
    load_monitor* m = _load.load(std::memory_order_acquire);
    return m && m->contended();
  }
  // While contended, fixed-spin spins at most this long before it sleeps
  // (a sleeper woken by its peer's packet is scheduled at once, ahead of
  // threads that burned their share; a spinner competes with them).
  void set_contended_spin(std::chrono::nanoseconds d) { _contended_spin_ns.store(d.count(), std::memory_order_relaxed); }

  // The polling discipline of the calls that must not block (test,
  // iprobe, progress, MPI_Test* and their loops): a call whose progress
  // round found nothing to do calls idle_poll() before it returns. On a
  // contended machine (yield_now()) it gives the CPU away once, so that a
  // loop of such calls lets the processes it waits for run; otherwise it
  // costs one relaxed load and a clock read every few calls.
  void idle_poll() {
    if (yield_now()) idle_poll_yield();
  }
  std::uint64_t idle_yields() const { return _idle_yields.load(std::memory_order_relaxed); }
  // Otherwise, a fixed-spin leader that found nothing for this long gives
  // its CPU away every few idle rounds while it keeps spinning (negative:
  // never). The machine may be loaded by others, which the job's process
  // count does not show: the kernel may have put the process we wait for on
  // our core, and it runs only when we let it.
  void set_yield_after(std::chrono::nanoseconds d) { _yield_after_ns.store(d.count(), std::memory_order_relaxed); }
  // How many waiting threads may spin at once (the leader included; the
  // process's share of the cores). Followers beyond it sleep at once.
  void set_spinning_threads(int n) { _spin_slots.store(n - 1, std::memory_order_relaxed); }
  // Any thread, any time: waits already under way follow it from their next round.
  void set_config(const wait_config& c) {
    _policy.store(c.policy, std::memory_order_relaxed);
    _spin_ns.store(c.spin.count(), std::memory_order_relaxed);
  }

  // Returns once done(arg) is true; progresses meanwhile. done() is called
  // without engine locks, after each round and before each sleep, and never
  // again once it answered true (it may complete things as it looks).
  // `slot`: where a follower waiting for exactly one completion leaves its
  // event descriptor (notify(slot) wakes it); null for other conditions.
  void wait(bool (*done)(void*), void* arg, std::atomic<int>* slot = nullptr);
  template <typename F>
  void wait(F&& done) {
    wait([](void* f) -> bool { return (*static_cast<std::remove_reference_t<F>*>(f))(); }, &done);
  }

  // A request with wake slot `slot` is about to complete: takes the slot
  // (the descriptor of a follower sleeping for it, or -1) and marks it
  // taken, so no follower starts sleeping on it any more. Call *before*
  // the store that completes the request (after it, the request may be
  // gone), then notify(fd) after it.
  int claim(std::atomic<int>& slot) {
    if (!_threaded) return -1;
    return slot.exchange(kSlotClaimed, std::memory_order_acq_rel);
  }
  static constexpr int kSlotClaimed = -2;

  // Something a waiting thread may be waiting for happened (a request
  // completed; `fd` is what claim() returned for it): wakes the follower
  // sleeping for it and the threads waiting for anything. Call after the
  // change is visible (e.g. after the release store that completes a request).
  void notify(int fd = -1) {
    if (!_threaded) return;
    if (fd >= 0) wake_one(fd);
    fences::light_fence(fences::scope::process);  // sleepers fence heavily
    if (_sleepers.load(std::memory_order_relaxed) > 0) wake_sleepers();
  }
  // Work was handed to a driver that sleeping threads armed before it
  // existed (e.g. a queued send): make them re-arm.
  void kick() { notify(); }

  // Longest single sleep in milliseconds (-1: unbounded). Every wake-up is
  // explicit; the bound only caps the cost of one a driver cannot arrange.
  void set_max_sleep_ms(int ms) { _max_sleep_ms.store(ms, std::memory_order_relaxed); }

  // Statistics: how often a thread went to sleep.
  std::uint64_t sleeps() const { return _sleeps.load(std::memory_order_relaxed); }
  // The progress thread's wake-ups (sleeps it came back from), and the
  // waits that had to wait (not done at once) with their total time.
  std::uint64_t background_wakeups() const { return _bg_wakeups.load(std::memory_order_relaxed); }
  std::uint64_t waits() const { return _waits.load(std::memory_order_relaxed); }
  std::uint64_t wait_ns() const { return _wait_ns.load(std::memory_order_relaxed); }

  // ---- background progress -------------------------------------------------
  // Before the progress thread starts and before any request: other threads
  // will wait, complete and progress (threaded from now on).
  void enable_background();
  bool background() const { return _bg; }
  // How long the progress thread keeps polling once out of work before it
  // sleeps (0: sleeps at once). Waking a sleeping thread costs the waker a
  // system call and, on a virtual machine, an interrupt between CPUs
  // (about 10 us here): what copy offload cannot afford. A spinning thread
  // sees new work in a memory load. Costs its CPU while it spins.
  // It spins after the work it led in the background (the application
  // computes, requests are in flight: the peer's answer is near) and in
  // its idle phase while the application computes (its next request then
  // needs no wake-up). `while_app_waits`: also while an application thread
  // waits in the library, progressing itself. Only worth it on a core of
  // the thread's own; on a full machine the core is another process's,
  // often the very process whose answer that application thread expects.
  void set_background_spin(std::chrono::nanoseconds d, bool while_app_waits = true) {
    _bg_spin_ns.store(d.count(), std::memory_order_relaxed);
    _bg_spin_waiting.store(while_app_waits, std::memory_order_relaxed);
  }
  // The progress thread's body; returns after stop_background().
  void run_background();
  void stop_background();
  // A request (or other background work: a collective schedule) is in
  // flight / is not any more. Any thread, any lock held; only while
  // background() (the engine checks, to keep the counter off the
  // message path otherwise).
  void work_started(long n = 1) { _in_flight.fetch_add(n, std::memory_order_seq_cst); }
  void work_finished(long n = 1) { _in_flight.fetch_sub(n, std::memory_order_seq_cst); }
  // A blocking call made of several engine calls (MPI_Recv: irecv, then
  // wait): the calling thread does not count as returning to the
  // application until the outermost section ends. Nests.
  // Requests started inside a blocking section are waited for by their
  // own thread: they are not counted as work for the progress thread.
  static void begin_blocking() {
    ++t_blocking;
    ++t_uncounted;
  }
  void end_blocking() {
    --t_uncounted;
    if (--t_blocking == 0) returns_to_application();
  }
  // Whether the calling thread is the progress thread (in run_background).
  static bool on_progress_thread() { return t_background; }
  // Whether a request started now on this thread counts (background mode).
  bool counts_work() const { return _bg && t_uncounted == 0; }
  // The calling thread leaves the engine for the application: wakes the
  // idle progress thread if work is in flight and nobody else progresses.
  void returns_to_application() {
    if (_bg && t_blocking == 0) app_returns_slow();
  }

 private:
  void lead(bool (*done)(void*), void* arg);        // returns once done() is true
  bool follow(bool (*done)(void*), void* arg, std::atomic<int>* slot);  // true: done
  bool sleep_once(bool (*done)(void*), void* arg);  // true: done() answered true
  void wake_sleepers();
  void unregister_sleeper(int fd);
  static void wake_one(int fd);
  void wait_inner(bool (*done)(void*), void* arg, std::atomic<int>* slot);
  void hand_over();  // the leader left: wake one follower to take its place
  void app_returns_slow();
  bool background_should_run() const;  // work in flight, no application thread waiting
  void lead_background();
  bool spin_for_work();
  void app_wait_begin();
  void app_wait_end();
  void idle_poll_yield();

  wait_engine& _engine;
  bool _threaded;
  std::atomic<wait_policy> _policy{wait_policy::fixed_spin};
  std::atomic<std::int64_t> _spin_ns{100000};
  std::atomic<yield_mode> _yield_mode{yield_mode::when_contended};
  std::atomic<load_monitor*> _load{nullptr};
  std::atomic<std::int64_t> _contended_spin_ns{20000};
  std::atomic<std::uint64_t> _idle_yields{0};
  std::atomic<std::int64_t> _yield_after_ns{10000};
  std::atomic<int> _max_sleep_ms{200};
  alignas(64) std::atomic<int> _sleepers{0};
  alignas(64) std::atomic<bool> _leading{false};  // a thread runs the progress rounds
  std::atomic<int> _spin_slots{0};                 // followers that may still spin
  struct sleeper {
    int fd;
    bool any;  // wakes on every completion (else only on its slot's)
  };
  std::mutex _sleeping_mu;         // guards _sleeping
  std::vector<sleeper> _sleeping;  // the sleeping threads (leader and followers)
  alignas(64) std::atomic<std::uint64_t> _sleeps{0};
  std::atomic<std::uint64_t> _bg_wakeups{0};
  alignas(64) std::atomic<std::uint64_t> _waits{0}, _wait_ns{0};
  // Background progress (see above).
  bool _bg = false;
  alignas(64) std::atomic<long> _in_flight{0};
  alignas(64) std::atomic<int> _app_waiting{0};  // application threads inside wait()
  alignas(64) std::atomic<bool> _bg_idle{false};  // in its idle sleep
  std::atomic<bool> _bg_busy{false};              // leading in the background
  std::atomic<bool> _bg_stop{false};
  std::atomic<int> _bg_fd{-1};                     // its event descriptor
  std::atomic<std::int64_t> _bg_spin_ns{0};        // set_background_spin
  std::atomic<bool> _bg_spin_waiting{true};          // set_background_spin
  // Blocking sections open on this thread; the progress thread holds one
  // for its whole life (it never wakes itself).
  [[gnu::tls_model("initial-exec")]] static thread_local int t_blocking;
  [[gnu::tls_model("initial-exec")]] static thread_local int t_uncounted;  // open blocking sections
  [[gnu::tls_model("initial-exec")]] static thread_local bool t_background;  // in run_background
};

}  // namespace nmad
