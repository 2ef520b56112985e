// Per-thread objects on the heap (see api/nmad/services/thread_heap.hpp).
//
// The thread's list of clean-ups hangs on a POSIX key, not on a
// thread_local: it costs no static TLS, and the key's destructor runs after
// the thread's C++ thread_local destructors; glibc calls it again while a
// pass left a new value (an object created during the clean-up).
#include "api/nmad/services/thread_heap.hpp"

#include <pthread.h>

#include <new>

namespace nmad::thread_heap {
namespace {

struct exit_fn {
  void (*fn)(void*);
  void* arg;
  exit_fn* next;
};

void run_all(void* head) {
  for (auto* n = static_cast<exit_fn*>(head); n;) {
    exit_fn* next = n->next;
    n->fn(n->arg);
    delete n;
    n = next;
  }
}

struct exit_key {
  pthread_key_t key{};
  bool ok = false;
  exit_key() { ok = pthread_key_create(&key, run_all) == 0; }
};
// Never destroyed: threads may outlive main, and the libraries are linked
// -z nodelete (run_all is never unloaded while a thread may still end).
const exit_key& the_key() {
  static const exit_key* const k = new exit_key();
  return *k;
}

}  // namespace

void at_thread_exit(void (*fn)(void*), void* arg) noexcept {
  const exit_key& k = the_key();
  if (!k.ok) return;
  auto* n = new (std::nothrow) exit_fn{fn, arg, static_cast<exit_fn*>(pthread_getspecific(k.key))};
  if (!n) return;
  if (pthread_setspecific(k.key, n) != 0) delete n;
}

}  // namespace nmad::thread_heap
