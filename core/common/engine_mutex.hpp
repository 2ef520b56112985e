#pragma once
// Mutexes that can be switched off, for the engine's lock domains.
//
// A session created below thread_level::multiple is called by one thread at
// a time (the application promised it), so the engine takes no lock and
// makes no atomic read-modify-write on its message path: lock() and
// unlock() are then a predictable branch. At multiple they are real
// mutexes. The choice is made once, before the session is shared.
//
// Both kinds are copyable *as new locks* (a copy is an unlocked mutex with
// the same switch), so objects holding one can live in containers that are
// filled before any locking happens (a gate's tracks); never copy one that
// is in use.
#include <atomic>
#include <mutex>

namespace nmad {

// A mutex of type Mutex behind the switch.
template <typename Mutex>
class switchable_mutex {
 public:
  explicit switchable_mutex(bool enabled = true) : _enabled(enabled) {}
  switchable_mutex(const switchable_mutex& o) : _enabled(o._enabled) {}
  switchable_mutex& operator=(const switchable_mutex&) = delete;

  void enable(bool on) { _enabled = on; }
  bool enabled() const { return _enabled; }

  void lock() {
    if (_enabled) _m.lock();
  }
  bool try_lock() { return !_enabled || _m.try_lock(); }
  void unlock() {
    if (_enabled) _m.unlock();
  }

 private:
  bool _enabled;
  Mutex _m;
};

// Recursive: the driver poll locks (a driver callback may post on the
// driver that is being polled) and the progress-task runner.
using engine_mutex = switchable_mutex<std::recursive_mutex>;
// Plain (not recursive): the matching, gate and track locks, and leaves.
using domain_mutex = switchable_mutex<std::mutex>;

// An atomic that a container may copy while nobody else uses it yet (see
// above); loads and stores are the plain std::atomic ones.
template <typename T>
struct copyable_atomic : std::atomic<T> {
  copyable_atomic(T v = T{}) : std::atomic<T>(v) {}
  copyable_atomic(const copyable_atomic& o) : std::atomic<T>(o.load(std::memory_order_relaxed)) {}
  copyable_atomic& operator=(T v) {
    this->store(v);
    return *this;
  }
};

}  // namespace nmad
