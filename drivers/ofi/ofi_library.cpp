// Loading libfabric at run time (see ofi_library.hpp).
#include "drivers/ofi/ofi_library.hpp"

#include <dlfcn.h>
#include <signal.h>

#include <cstring>
#include <filesystem>
#include <iterator>
#include <mutex>
#include <stdexcept>

#include "api/nmad/services/log.hpp"

namespace nmad::ofi_library {
namespace {

constexpr const char* kLibrary = "libfabric.so.1";

// The dispositions of the signals an application may care about, taken
// before a call that can run library constructors and put back after it
// where they changed.
class signal_dispositions {
 public:
  signal_dispositions() {
    for (std::size_t i = 0; i < std::size(kSignals); ++i) ::sigaction(kSignals[i], nullptr, &_saved[i]);
  }
  signal_dispositions(const signal_dispositions&) = delete;
  signal_dispositions& operator=(const signal_dispositions&) = delete;
  ~signal_dispositions() {
    for (std::size_t i = 0; i < std::size(kSignals); ++i) {
      struct sigaction now {};
      ::sigaction(kSignals[i], nullptr, &now);
      if (same(now, _saved[i])) continue;
      ::sigaction(kSignals[i], &_saved[i], nullptr);
      if (log_enabled(log_level::debug))
        log_write(log_level::debug, "ofi",
                  std::string("SIG") + ::sigabbrev_np(kSignals[i]) + " was taken over by " + owner(now) +
                      " while libfabric loaded its providers; its disposition is restored");
    }
  }

 private:
  static constexpr int kSignals[] = {SIGHUP, SIGINT,  SIGQUIT, SIGILL,  SIGTRAP, SIGABRT, SIGBUS,
                                     SIGFPE, SIGSEGV, SIGPIPE, SIGTERM, SIGUSR1, SIGUSR2, SIGCHLD};

  static void* handler(const struct sigaction& a) {
    return (a.sa_flags & SA_SIGINFO) ? reinterpret_cast<void*>(a.sa_sigaction)
                                     : reinterpret_cast<void*>(a.sa_handler);
  }
  static bool same(const struct sigaction& a, const struct sigaction& b) {
    return handler(a) == handler(b) && (a.sa_flags & SA_SIGINFO) == (b.sa_flags & SA_SIGINFO);
  }
  static std::string owner(const struct sigaction& a) {
    Dl_info d{};
    if (::dladdr(handler(a), &d) && d.dli_fname)
      return std::filesystem::path(d.dli_fname).filename().string();
    return "a handler";
  }

  struct sigaction _saved[std::size(kSignals)] {};
};

struct loaded {
  entry_points fns{};
  bool ok = false;
  std::string why;
};

template <typename F>
bool resolve(void* lib, const char* name, F& out, std::string& why) {
  ::dlerror();
  void* p = ::dlsym(lib, name);
  if (!p) {
    const char* e = ::dlerror();
    why = std::string(kLibrary) + " has no " + name + (e ? std::string(" (") + e + ")" : std::string());
    return false;
  }
  out = reinterpret_cast<F>(p);
  return true;
}

const loaded& load() {
  static const loaded result = [] {
    loaded r;
    void* lib = nullptr;
    {
      signal_dispositions keep;
      lib = ::dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
    }
    if (!lib) {
      const char* e = ::dlerror();
      r.why = e ? e : std::string(kLibrary) + ": not found";
      return r;
    }
    // The library stays loaded for the life of the process: its providers
    // keep threads and handlers.
    r.ok = resolve(lib, "fi_getinfo", r.fns.getinfo, r.why) && resolve(lib, "fi_freeinfo", r.fns.freeinfo, r.why) &&
           resolve(lib, "fi_dupinfo", r.fns.dupinfo, r.why) && resolve(lib, "fi_fabric", r.fns.fabric, r.why) &&
           resolve(lib, "fi_strerror", r.fns.strerror, r.why);
    return r;
  }();
  return result;
}

}  // namespace

const entry_points* get(std::string* why) {
  const loaded& l = load();
  if (!l.ok) {
    if (why) *why = l.why;
    return nullptr;
  }
  return &l.fns;
}

const entry_points& require() {
  std::string why;
  const entry_points* e = get(&why);
  if (!e) throw std::runtime_error("ofi driver: libfabric cannot be loaded: " + why);
  return *e;
}

int getinfo(const fi_info* hints, fi_info** out) {
  const entry_points& e = require();
  signal_dispositions keep;
  return e.getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, out);
}

const char* strerror(int errnum) {
  const entry_points* e = get();
  return e ? e->strerror(errnum) : std::strerror(errnum);
}

}  // namespace nmad::ofi_library
