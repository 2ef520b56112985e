// The progress thread (see progress_thread.hpp).
#include "core/progress/progress_thread.hpp"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <future>

#include "core/topology/scheduling.hpp"
#include "api/nmad/services/topology.hpp"

namespace nmad {

bool parse_progress_mode(std::string_view text, progress_mode& out) {
  if (text == "none") out = progress_mode::none;
  else if (text == "thread") out = progress_mode::thread;
  else if (text == "auto") out = progress_mode::automatic;
  else return false;
  return true;
}

std::string_view progress_mode_name(progress_mode m) {
  switch (m) {
    case progress_mode::none: return "none";
    case progress_mode::thread: return "thread";
    case progress_mode::automatic: return "auto";
  }
  return "?";
}

bool starts_progress_thread(progress_mode m, int job_cpus, int local_ranks) {
  return m == progress_mode::thread || (m == progress_mode::automatic && job_cpus > local_ranks);
}

namespace {

// Binds and prioritises the calling thread; returns what was done.
std::string place_self(const progress_thread::options& o) {
  std::string d;
  if (!o.cpus.empty()) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c : o.cpus)
      if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
    if (::sched_setaffinity(0, sizeof set, &set) == 0)
      d = "CPUs " + topology::cpu_list(o.cpus);
    else
      d = "CPUs " + topology::cpu_list(o.cpus) + " refused (" + std::strerror(errno) + "), left unbound";
  } else {
    d = "CPUs " + topology::cpu_list(topology::allowed_cpus()) + " (the process's own)";
  }
  const int nice = topology::nice_of(o.priority);
  const pid_t tid = static_cast<pid_t>(::syscall(SYS_gettid));
  d += ", priority " + std::to_string(o.priority) + " (nice " + std::to_string(nice) + ")";
  if (::setpriority(PRIO_PROCESS, static_cast<id_t>(tid), nice) != 0)
    d += std::string(" not applied: ") + std::strerror(errno);
  return d;
}

}  // namespace

progress_thread::progress_thread(waiter& w, options opts) : _w(w) {
  std::promise<std::string> placed;
  std::future<std::string> placed_f = placed.get_future();
  _thread = std::thread([this, opts = std::move(opts), &placed] {
    ::pthread_setname_np(::pthread_self(), "nmad-progress");
    placed.set_value(place_self(opts));
    _w.run_background();
  });
  _description = placed_f.get();
}

progress_thread::~progress_thread() {
  _w.stop_background();
  if (_thread.joinable()) _thread.join();
}

}  // namespace nmad
