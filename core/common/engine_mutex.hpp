#pragma once
// A recursive mutex that can be switched off.
//
// A session created below thread_level::multiple is called by one thread at
// a time (the application promised it), so the engine takes no lock and
// makes no atomic read-modify-write on its message path: lock() and
// unlock() are then a predictable branch. At multiple they are a real
// recursive mutex. The choice is made once, before the session is shared.
#include <mutex>

namespace nmad {

class engine_mutex {
 public:
  explicit engine_mutex(bool enabled = true) : _enabled(enabled) {}
  engine_mutex(const engine_mutex&) = delete;
  engine_mutex& operator=(const engine_mutex&) = delete;

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
  std::recursive_mutex _m;
};

}  // namespace nmad
