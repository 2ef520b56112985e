#pragma once
// Per-thread objects kept out of the library's static TLS.
//
// libnmad.so and libmpi.so must load with dlopen at any time (Python's
// ctypes and mpi4py, Julia, R, Java load MPI that way). A library whose
// code reaches any thread_local through the initial-exec model (one
// %fs-relative access, what the message path wants) has its WHOLE
// thread-local segment placed in the static TLS block, and what glibc keeps
// free there for libraries loaded after start-up is a few hundred bytes
// shared by all of them (glibc.rtld.optional_static_tls, 512 by default):
// past it, dlopen fails with "cannot allocate memory in static TLS block".
// So the engine's thread-locals are a few scalars and pointers on the
// message path (48 bytes in libmpi.so; tests/mpi_dlopen_test and tools/test
// hold the libraries to 64), and the rest lives on the heap:
//
// * on the message path, behind one initial-exec pointer that stays null
//   until the thread first needs the object:
//
//     [[gnu::tls_model("initial-exec")]] thread_local my_state* t_state = nullptr;
//     my_state& state() { return t_state ? *t_state : thread_heap::create(t_state); }
//
//   create() builds a T, stores it in the pointer and destroys it when the
//   thread ends, the pointer set back to null first;
// * off it (a thread's sleep, a plugin's error message), behind a POSIX
//   key, with no thread-local storage at all (a pthread_getspecific call,
//   a few ns, per access): thread_object<T>::get().
//
// Both are destroyed after the thread's C++ thread_local destructors
// (which may still use them); an object made again while the thread ends
// is destroyed too. On the main thread they live until the process ends.
#include <pthread.h>

#include <new>
#include <stdexcept>

namespace nmad::thread_heap {

// Runs fn(arg) when the calling thread ends (see above). Never throws
// (registration that fails leaves arg alive: a leak, not a crash).
void at_thread_exit(void (*fn)(void*), void* arg) noexcept;

template <class T>
[[gnu::noinline, gnu::cold]] T& create(T*& slot) {
  T* p = new T();
  slot = p;
  at_thread_exit(
      [](void* s) {
        T*& owner = *static_cast<T**>(s);
        T* obj = owner;
        owner = nullptr;
        delete obj;
      },
      &slot);
  return *p;
}

// A per-thread T behind a POSIX key, made on the thread's first get().
// Use it with a T of the using file's own (an unnamed namespace), so that
// each library keeps its own key.
template <class T>
class thread_object {
 public:
  static T& get() {
    const holder& h = the_holder();
    if (void* p = h.ok ? pthread_getspecific(h.key) : nullptr) return *static_cast<T*>(p);
    return make(h);
  }
  // The thread's T if it has one, else null.
  static T* peek() {
    const holder& h = the_holder();
    return h.ok ? static_cast<T*>(pthread_getspecific(h.key)) : nullptr;
  }

 private:
  struct holder {
    pthread_key_t key{};
    bool ok = false;
    holder() { ok = pthread_key_create(&key, [](void* p) { delete static_cast<T*>(p); }) == 0; }
  };
  // Never destroyed: threads may outlive main, and the libraries are
  // linked -z nodelete (the key's destructor is never unloaded).
  static const holder& the_holder() {
    static const holder* const h = new holder();
    return *h;
  }
  [[gnu::noinline, gnu::cold]] static T& make(const holder& h) {
    if (!h.ok) throw std::runtime_error("nmad: no POSIX thread-specific key left (PTHREAD_KEYS_MAX)");
    T* p = new T();
    if (pthread_setspecific(h.key, p) != 0) {
      delete p;
      throw std::bad_alloc();
    }
    return *p;
  }
};

}  // namespace nmad::thread_heap
