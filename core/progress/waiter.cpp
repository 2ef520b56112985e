// The waiter (see waiter.hpp).
#include "core/progress/waiter.hpp"

#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <mutex>
#include <vector>

#include "api/nmad/services/thread_heap.hpp"
#include "api/nmad/services/trace.hpp"
#include "core/common/events.hpp"

namespace nmad {
namespace {

// A driver that cannot wake a sleeper (arm_result::cannot) makes sleeps
// slices of this length.
constexpr int kCannotSliceMs = 1;
// In fixed-spin, the clock is read once every this many idle rounds.
constexpr unsigned kClockEvery = 16;
// The progress thread's idle sleep: every wake-up is explicit, this only
// bounds what a lost one (a bug) could cost.
constexpr int kIdleSafetyMs = 1000;

// What a thread needs to sleep, made on its first sleep and reached
// through a POSIX key (api/nmad/services/thread_heap.hpp: no static TLS; the
// lookup is nothing next to the poll(2) it leads to).
// One event descriptor per thread: a completer may still write to it a
// moment after the thread stopped waiting (it read the descriptor from a
// wake slot before completing), even after the thread ended: so
// descriptors are never closed, an ending thread gives its own back to a
// pool the next threads take from (a stray count is drained before each
// sleep).
struct event_pool {
  std::mutex mu;
  std::vector<int> free;
};
event_pool& pool() {
  static event_pool* const p = new event_pool();  // never destroyed: threads may outlive main
  return *p;
}

struct thread_sleep {
  int fd = -1;
  std::vector<pollfd> fds;  // sleep_once's: this thread's, then the drivers'
  thread_sleep() = default;
  thread_sleep(const thread_sleep&) = delete;
  thread_sleep& operator=(const thread_sleep&) = delete;
  ~thread_sleep() {
    if (fd < 0) return;
    std::lock_guard g(pool().mu);
    pool().free.push_back(fd);
  }
  int event() {
    if (fd >= 0) return fd;
    {
      std::lock_guard g(pool().mu);
      if (!pool().free.empty()) {
        fd = pool().free.back();
        pool().free.pop_back();
        return fd;
      }
    }
    fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    return fd;
  }
  void drain() const {
    std::uint64_t v;
    while (::read(fd, &v, sizeof v) < 0 && errno == EINTR) {
    }
  }
};
thread_sleep& sleep_state() { return thread_heap::thread_object<thread_sleep>::get(); }

}  // namespace

std::string_view wait_policy_name(wait_policy p) {
  switch (p) {
    case wait_policy::busy: return "busy";
    case wait_policy::block: return "block";
    case wait_policy::fixed_spin: return "fixed-spin";
  }
  return "?";
}

bool parse_wait_policy(std::string_view text, wait_policy& out) {
  if (text == "busy") out = wait_policy::busy;
  else if (text == "block") out = wait_policy::block;
  else if (text == "fixed-spin" || text == "spin") out = wait_policy::fixed_spin;
  else return false;
  return true;
}

waiter::waiter(wait_engine& engine, bool threaded) : _engine(engine), _threaded(threaded) {
  if (threaded) fences::enable(fences::scope::process);
}

waiter::~waiter() = default;

[[gnu::tls_model("initial-exec")]] thread_local int waiter::t_blocking = 0;
[[gnu::tls_model("initial-exec")]] thread_local int waiter::t_uncounted = 0;
[[gnu::tls_model("initial-exec")]] thread_local bool waiter::t_background = false;

void waiter::wait(bool (*done)(void*), void* arg, std::atomic<int>* slot) {
  // done() may have side effects (MPI_Waitsome completes what it finds):
  // once it answered true it is never called again.
  if (!_bg) {
    if (done(arg)) return;
    wait_inner(done, arg, slot);
    return;
  }
  {
    // done() may start work (a collective's next round): not a return to
    // the application yet.
    ++t_blocking;
    const bool finished = done(arg);
    --t_blocking;
    if (finished) {
      returns_to_application();
      return;
    }
  }
  if (_in_flight.load(std::memory_order_relaxed) <= 0 && !_bg_busy.load(std::memory_order_relaxed)) {
    // Nothing for the progress thread (the usual blocking call: its
    // requests are not counted): no handshake on the latency path. Work
    // counted meanwhile may wake it while we wait; it then progresses
    // beside us, which is only wasteful.
    wait_inner(done, arg, slot);
    return;
  }
  {
    // This thread progresses while it waits: the progress thread steps
    // aside, and may be needed again when we return.
    struct waiting {
      waiter& w;
      explicit waiting(waiter& x) : w(x) { w.app_wait_begin(); }
      ~waiting() { w.app_wait_end(); }
    } scope(*this);
    wait_inner(done, arg, slot);
  }
}

void waiter::wait_inner(bool (*done)(void*), void* arg, std::atomic<int>* slot) {
  // A wait that did not find its condition done: one trace record at its end.
  struct traced {
    std::uint64_t t0 = trace::enabled() ? trace::now() : 0;
    ~traced() {
      if (!t0 || !trace::enabled()) return;
      const std::uint64_t t1 = trace::now();
      trace::emit_at(t1, trace::event::wait, -1, 0, 0, 0, t1 - t0, 0);
    }
  } traced_wait;
  // The time spent here, for the statistics (two clock reads per wait
  // that had to wait at all).
  struct timed {
    waiter& w;
    std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
    ~timed() {
      const auto d = std::chrono::steady_clock::now() - t0;
      w._wait_ns.fetch_add(static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count()),
                           std::memory_order_relaxed);
      w._waits.fetch_add(1, std::memory_order_relaxed);
    }
  } timed_wait{*this};
  if (!_threaded || _policy.load(std::memory_order_relaxed) == wait_policy::busy) {
    lead(done, arg);
    return;
  }
  for (;;) {
    bool expected = false;
    if (_leading.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) {
      lead(done, arg);
      _leading.store(false, std::memory_order_release);
      hand_over();
      return;
    }
    if (follow(done, arg, slot)) return;
  }
}

void waiter::idle_poll_yield() {
  _idle_yields.fetch_add(1, std::memory_order_relaxed);
  sched_yield();
}

void waiter::lead(bool (*done)(void*), void* arg) {
  using clock = std::chrono::steady_clock;
  unsigned idle = 0;
  clock::time_point spin_start{};
  bool yield = false;  // yield_now(), asked again every kClockEvery idle rounds
  for (;;) {
    const int work = _engine.progress_round();
    if (done(arg)) return;
    if (work > 0) {
      idle = 0;
      continue;
    }
    ++idle;
    if (idle % kClockEvery == 1) yield = yield_now();
    if (yield) sched_yield();
    switch (_policy.load(std::memory_order_relaxed)) {
      case wait_policy::busy:
        break;
      case wait_policy::block:
        if (sleep_once(done, arg)) return;
        break;
      case wait_policy::fixed_spin:
        // The spin is timed from the first clock reading (kClockEvery idle
        // rounds in): most waits end before it and never read the clock.
        if (idle == 1 && _spin_ns.load(std::memory_order_relaxed) <= 0) {
          if (sleep_once(done, arg)) return;
          idle = 0;
        } else if (idle % kClockEvery == 0) {
          const clock::time_point now = clock::now();
          if (idle == kClockEvery) {
            spin_start = now;
          } else if (std::int64_t spin = _spin_ns.load(std::memory_order_relaxed);
                     now - spin_start >= std::chrono::nanoseconds(
                                             yield ? std::min(spin, _contended_spin_ns.load(std::memory_order_relaxed))
                                                   : spin)) {
            if (sleep_once(done, arg)) return;
            idle = 0;  // spin again after a wake-up: the rest may follow soon
          } else if (const std::int64_t after = _yield_after_ns.load(std::memory_order_relaxed);
                     after >= 0 && now - spin_start >= std::chrono::nanoseconds(after)) {
            sched_yield();  // costs one system call when nobody else wants the CPU
          }
        }
        break;
    }
  }
}

// Sleeps on the thread's own event descriptor while another thread leads.
// Woken by the completion it waits for (its slot), by any completion (no
// slot), or by the leader leaving; the caller then checks again.
bool waiter::follow(bool (*done)(void*), void* arg, std::atomic<int>* slot) {
  // fixed-spin: first watch the condition (not the engine) for the spin
  // time: a completion the leader makes meanwhile is seen at once, without
  // a wake-up. Yield when the node is oversubscribed.
  // Only while the process has a core to spare (set_spinning_threads).
  if (_policy.load(std::memory_order_relaxed) == wait_policy::fixed_spin &&
      _spin_slots.fetch_sub(1, std::memory_order_acq_rel) > 0) {
    using clock = std::chrono::steady_clock;
    const auto until = clock::now() + std::chrono::nanoseconds(_spin_ns.load(std::memory_order_relaxed));
    int result = -1;  // -1: spin over, 0: lead, 1: done
    for (unsigned i = 1; result < 0; ++i) {
      if (done(arg)) result = 1;
      else if (!_leading.load(std::memory_order_acquire)) result = 0;
      else if (i % 64 == 0 && clock::now() >= until) break;
      else __builtin_ia32_pause();
    }
    _spin_slots.fetch_add(1, std::memory_order_acq_rel);
    if (result >= 0) return result == 1;
  } else if (_policy.load(std::memory_order_relaxed) == wait_policy::fixed_spin) {
    _spin_slots.fetch_add(1, std::memory_order_acq_rel);
  }
  thread_sleep& me = sleep_state();
  const int own = me.event();
  if (own < 0) {  // no descriptor: poll like a leader would, in turn
    sched_yield();
    return done(arg);
  }
  me.drain();
  // Register on the slot unless the completion already claimed it (it then
  // comes in a moment: no sleep for that).
  if (slot) {
    int expected = -1;
    if (!slot->compare_exchange_strong(expected, own, std::memory_order_acq_rel)) {
      sched_yield();
      return done(arg);
    }
  }
  {
    std::lock_guard g(_sleeping_mu);
    _sleeping.push_back({own, slot == nullptr});
  }
  _sleepers.fetch_add(1, std::memory_order_seq_cst);
  fences::heavy_fence(fences::scope::process);  // notify() fences lightly
  bool finished = done(arg);
  // The leader's hand_over() reads _sleeping under the mutex after it
  // cleared _leading: registered above, we are either seen or see it free.
  if (!finished && _leading.load(std::memory_order_acquire)) {
    pollfd p{own, POLLIN, 0};
    _sleeps.fetch_add(1, std::memory_order_relaxed);
    ::poll(&p, 1, _max_sleep_ms.load(std::memory_order_relaxed));
    finished = done(arg);
  }
  if (slot) {
    // Still ours (no completion claimed it): take it back. Claimed: the
    // request may already be gone, never touch it again.
    if (!finished) {
      int mine = own;
      slot->compare_exchange_strong(mine, -1, std::memory_order_acq_rel);
    }
  }
  _sleepers.fetch_sub(1, std::memory_order_relaxed);
  unregister_sleeper(own);
  return finished;
}

void waiter::unregister_sleeper(int fd) {
  std::lock_guard g(_sleeping_mu);
  for (auto it = _sleeping.begin(); it != _sleeping.end(); ++it)
    if (it->fd == fd) {
      _sleeping.erase(it);
      return;
    }
}

void waiter::hand_over() {
  const std::uint64_t one = 1;
  std::lock_guard g(_sleeping_mu);
  // The leader itself is not registered any more: any entry is a follower
  // (or a sleeping leader of a moment ago that will look again anyway).
  if (_sleeping.empty()) return;
  const int fd = _sleeping.front().fd;
  while (::write(fd, &one, sizeof one) < 0 && errno == EINTR) {
  }
}

bool waiter::sleep_once(bool (*done)(void*), void* arg) {
  thread_sleep& me = sleep_state();
  std::vector<pollfd>& fds = me.fds;
  fds.clear();
  int own = -1;
  if (_threaded) {
    own = me.event();
    if (own >= 0) {
      me.drain();  // a wake-up meant for an earlier sleep
      std::lock_guard g(_sleeping_mu);
      _sleeping.push_back({own, true});
    }
    fds.push_back({own, POLLIN, 0});  // fd -1 is ignored by poll(2)
  }
  _sleepers.fetch_add(1, std::memory_order_seq_cst);
  if (_threaded) fences::heavy_fence(fences::scope::process);  // notify() fences lightly
  bool finished = done(arg);
  if (!finished) {
    int timeout = _max_sleep_ms.load(std::memory_order_relaxed);
    const arm_result r = _engine.arm_drivers(fds, timeout);
    if (r != arm_result::busy) {
      if (r == arm_result::cannot) limit_sleep(timeout, kCannotSliceMs);
      // A completion by another thread between the check above and here
      // has written our event descriptor: poll returns at once.
      finished = done(arg);
      if (!finished) {
        _sleeps.fetch_add(1, std::memory_order_relaxed);
        if (::poll(fds.data(), fds.size(), timeout) < 0)
          for (pollfd& p : fds) p.revents = 0;  // EINTR: just go round again
      }
    }
    _engine.disarm_drivers(fds);
  }
  _sleepers.fetch_sub(1, std::memory_order_relaxed);
  if (own >= 0) unregister_sleeper(own);
  return finished;
}

// ---- background progress ---------------------------------------------------

void waiter::enable_background() {
  _bg = true;
  _threaded = true;
  fences::enable(fences::scope::process);
}

bool waiter::background_should_run() const {
  return _in_flight.load(std::memory_order_seq_cst) > 0 && _app_waiting.load(std::memory_order_seq_cst) == 0;
}

void waiter::app_wait_begin() {
  _app_waiting.fetch_add(1, std::memory_order_seq_cst);
  // Leading in the background (maybe asleep on the drivers, which makes
  // peers ring us): tell it to step aside now.
  if (_bg_busy.load(std::memory_order_seq_cst))
    if (const int fd = _bg_fd.load(std::memory_order_relaxed); fd >= 0) wake_one(fd);
}

void waiter::app_wait_end() {
  if (_app_waiting.fetch_sub(1, std::memory_order_seq_cst) == 1) returns_to_application();
}

void waiter::app_returns_slow() {
  // Pairs with run_background: it stores _bg_idle then loads the counts;
  // we changed a count (seq_cst) before and load _bg_idle now.
  if (!_bg_idle.load(std::memory_order_seq_cst)) return;
  if (_app_waiting.load(std::memory_order_seq_cst) > 0) return;
  if (_in_flight.load(std::memory_order_seq_cst) <= 0) return;
  if (!_bg_idle.exchange(false, std::memory_order_seq_cst)) return;  // someone else woke it
  if (const int fd = _bg_fd.load(std::memory_order_seq_cst); fd >= 0) wake_one(fd);
}

void waiter::run_background() {
  ++t_blocking;  // its own engine calls never wake it
  t_background = true;
  thread_sleep& me = sleep_state();
  const int own = me.event();
  _bg_fd.store(own, std::memory_order_seq_cst);
  while (!_bg_stop.load(std::memory_order_seq_cst)) {
    if (!background_should_run() && !spin_for_work()) {
      if (own >= 0) me.drain();  // wake-ups meant for an earlier sleep
      _bg_idle.store(true, std::memory_order_seq_cst);
      if (!background_should_run() && !_bg_stop.load(std::memory_order_seq_cst)) {
        pollfd p{own, POLLIN, 0};
        _sleeps.fetch_add(1, std::memory_order_relaxed);
        ::poll(&p, own >= 0 ? 1 : 0, own >= 0 ? kIdleSafetyMs : 1);
        _bg_wakeups.fetch_add(1, std::memory_order_relaxed);
        if (events::wanted(layer::event_kind::progress_woken))
          events::emit_message(layer::event_kind::progress_woken, -1, 0, 0);
      }
      _bg_idle.store(false, std::memory_order_seq_cst);
      continue;
    }
    _bg_busy.store(true, std::memory_order_seq_cst);
    lead_background();
    _bg_busy.store(false, std::memory_order_seq_cst);
  }
  t_background = false;
  --t_blocking;
}

// Policy block: rounds while they find work, then a sleep armed on the
// drivers; back to idle once nothing is in flight or the application waits.
void waiter::lead_background() {
  auto leave = [](void* self) -> bool {
    waiter& w = *static_cast<waiter*>(self);
    if (w._bg_stop.load(std::memory_order_seq_cst) || w._app_waiting.load(std::memory_order_seq_cst) > 0) return true;
    // Nothing in flight, and nothing owed to a peer either.
    return w._in_flight.load(std::memory_order_seq_cst) <= 0 && !w._engine.has_unsent();
  };
  using clock = std::chrono::steady_clock;
  const std::int64_t spin = _bg_spin_ns.load(std::memory_order_relaxed);
  clock::time_point last_work = clock::now();
  unsigned idle = 0;
  for (;;) {
    if (leave(this)) return;
    if (_engine.progress_round() > 0) {
      if (spin > 0) last_work = clock::now();
      idle = 0;
      continue;
    }
    // With a spin, rounds go on until it ran out since the last work.
    if (spin > 0 && (++idle % kClockEvery != 0 || clock::now() - last_work < std::chrono::nanoseconds(spin))) {
      // An application thread of the process (or a peer) that becomes
      // runnable on this CPU must not wait for the spin's end: yield.
      if (idle % kClockEvery == 0) sched_yield();
      else __builtin_ia32_pause();
      continue;
    }
    if (sleep_once(leave, this)) return;
    if (spin > 0) last_work = clock::now();
  }
}

// The idle progress thread's spin (set_background_spin): true once there
// is work for it, false when the spin ran out (or there is none).
bool waiter::spin_for_work() {
  const std::int64_t spin = _bg_spin_ns.load(std::memory_order_relaxed);
  if (spin <= 0) return false;
  const bool when_waiting = _bg_spin_waiting.load(std::memory_order_relaxed);
  using clock = std::chrono::steady_clock;
  const clock::time_point until = clock::now() + std::chrono::nanoseconds(spin);
  for (unsigned i = 1;; ++i) {
    if (_bg_stop.load(std::memory_order_relaxed)) return false;
    if (background_should_run()) return true;
    // An application thread waits and progresses itself: it wakes us when
    // it returns to the application with work in flight.
    if (!when_waiting && _app_waiting.load(std::memory_order_relaxed) > 0) return false;
    if (i % 64 == 0) {
      if (clock::now() >= until) return false;
      sched_yield();  // see lead_background
    } else {
      __builtin_ia32_pause();
    }
  }
}

void waiter::stop_background() {
  _bg_stop.store(true, std::memory_order_seq_cst);
  if (const int fd = _bg_fd.load(std::memory_order_seq_cst); fd >= 0) wake_one(fd);
}

void waiter::wake_one(int fd) {
  const std::uint64_t one = 1;
  while (::write(fd, &one, sizeof one) < 0 && errno == EINTR) {
  }
}

void waiter::wake_sleepers() {
  std::lock_guard g(_sleeping_mu);
  for (const sleeper& z : _sleeping)
    if (z.any) wake_one(z.fd);
}

}  // namespace nmad
