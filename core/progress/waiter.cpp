// The waiter (see waiter.hpp).
#include "core/progress/waiter.hpp"

#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace nmad {
namespace {

// A driver that cannot wake a sleeper (arm_result::cannot) makes sleeps
// slices of this length.
constexpr int kCannotSliceMs = 1;
// In fixed-spin, the clock is read once every this many idle rounds.
constexpr unsigned kClockEvery = 16;

// One event descriptor per thread, made on its first sleep, closed when the
// thread ends.
struct thread_event {
  int fd = -1;
  ~thread_event() {
    if (fd >= 0) ::close(fd);
  }
  int get() {
    if (fd < 0) fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    return fd;
  }
  void drain() const {
    std::uint64_t v;
    while (::read(fd, &v, sizeof v) < 0 && errno == EINTR) {
    }
  }
};
thread_local thread_event t_event;

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

void waiter::wait(bool (*done)(void*), void* arg) {
  using clock = std::chrono::steady_clock;
  // done() may have side effects (MPI_Waitsome completes what it finds):
  // once it answered true it is never called again.
  if (done(arg)) return;
  unsigned idle = 0;
  clock::time_point spin_start{};
  for (;;) {
    const int work = _engine.progress_round();
    if (done(arg)) return;
    if (work > 0) {
      idle = 0;
      continue;
    }
    ++idle;
    if (_yield.load(std::memory_order_relaxed)) sched_yield();
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
          } else if (now - spin_start >= std::chrono::nanoseconds(_spin_ns.load(std::memory_order_relaxed))) {
            if (sleep_once(done, arg)) return;
            idle = 0;  // spin again after a wake-up: the rest may follow soon
          }
        }
        break;
    }
  }
}

bool waiter::sleep_once(bool (*done)(void*), void* arg) {
  thread_local std::vector<pollfd> fds;
  fds.clear();
  int own = -1;
  if (_threaded) {
    own = t_event.get();
    if (own >= 0) {
      t_event.drain();  // a wake-up meant for an earlier sleep
      std::lock_guard g(_sleeping_mu);
      _sleeping.push_back(own);
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
  if (own >= 0) {
    std::lock_guard g(_sleeping_mu);
    auto it = std::find(_sleeping.begin(), _sleeping.end(), own);
    if (it != _sleeping.end()) _sleeping.erase(it);
  }
  return finished;
}

void waiter::wake_sleepers() {
  const std::uint64_t one = 1;
  std::lock_guard g(_sleeping_mu);
  for (int fd : _sleeping)
    while (::write(fd, &one, sizeof one) < 0 && errno == EINTR) {
    }
}

}  // namespace nmad
