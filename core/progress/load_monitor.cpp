// The load monitor (see load_monitor.hpp).
#include "core/progress/load_monitor.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <string>

#include "core/common/proc_stat.hpp"

namespace nmad {
namespace {

class system_probe final : public load_probe {
 public:
  system_probe() : _fd(::open("/proc/loadavg", O_RDONLY | O_CLOEXEC)) {
    const long n = ::sysconf(_SC_NPROCESSORS_ONLN);
    _cpus = n > 0 ? static_cast<int>(n) : 1;
  }
  ~system_probe() override {
    if (_fd >= 0) ::close(_fd);
  }
  std::int64_t now_ns() override {
    timespec ts;
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
  }
  // "0.52 0.58 0.59 3/471 12345": the fourth field is runnable/total.
  int runnable() override {
    if (_fd < 0) return -1;
    char buf[128];
    const ssize_t n = ::pread(_fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return -1;
    buf[n] = 0;
    const char* p = buf;
    for (int field = 0; field < 3; ++field) {
      while (*p && *p != ' ') ++p;
      while (*p == ' ') ++p;
    }
    char* end = nullptr;
    const long r = std::strtol(p, &end, 10);
    if (end == p || *end != '/' || r < 0) return -1;
    return static_cast<int>(r);
  }
  int cpus() override { return _cpus; }
  int own_runnable() override {
    DIR* d = ::opendir("/proc/self/task");
    if (!d) return -1;
    int n = 0;
    while (const dirent* e = ::readdir(d)) {
      if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
      // A thread that ended meanwhile reads as nothing.
      if (proc_stat_fields(std::string("/proc/self/task/") + e->d_name + "/stat").starts_with("R")) ++n;
    }
    ::closedir(d);
    return n;
  }
  std::int64_t involuntary_switches() override {
    rusage u;
    if (::getrusage(RUSAGE_SELF, &u) != 0) return -1;
    return u.ru_nivcsw;
  }

 private:
  int _fd;
  int _cpus = 1;
};

}  // namespace

std::unique_ptr<load_probe> make_system_load_probe() { return std::make_unique<system_probe>(); }

load_monitor::load_monitor(load_probe& probe, load_monitor_config c) : _probe(probe), _config(c) {}

void load_monitor::sample(std::int64_t now) {
  // One thread samples; the others keep the verdict they have.
  std::int64_t due = _next_sample_ns.load(std::memory_order_relaxed);
  if (now < due || !_next_sample_ns.compare_exchange_strong(due, now + _config.period.count(),
                                                             std::memory_order_relaxed))
    return;
  const int runnable = _probe.runnable();
  const int cpus = _probe.cpus();
  const std::int64_t switches = _probe.involuntary_switches();
  const std::int64_t before = _last_switches.exchange(switches, std::memory_order_relaxed);
  const std::int64_t preempted = switches >= 0 && before >= 0 ? switches - before : -1;
  const bool busy = (runnable >= 0 && runnable > cpus) || preempted >= _config.preempt_threshold;
  const int streak = busy ? _busy_streak.load(std::memory_order_relaxed) + 1 : 0;
  _busy_streak.store(streak, std::memory_order_relaxed);
  if (streak >= _config.confirm) _contended_until_ns.store(now + _config.hold.count(), std::memory_order_relaxed);
  _last_runnable.store(runnable, std::memory_order_relaxed);
  _last_cpus.store(cpus, std::memory_order_relaxed);
  _last_preemptions.store(preempted, std::memory_order_relaxed);
  _last_contended.store(busy, std::memory_order_relaxed);
  _samples.fetch_add(1, std::memory_order_relaxed);
}

bool load_monitor::last_verdict() const {
  return _static.load(std::memory_order_relaxed) || _last_contended.load(std::memory_order_relaxed);
}

load_monitor::reading load_monitor::last() const {
  reading r;
  r.runnable = _last_runnable.load(std::memory_order_relaxed);
  r.cpus = _last_cpus.load(std::memory_order_relaxed);
  r.preemptions = _last_preemptions.load(std::memory_order_relaxed);
  r.contended = last_verdict();
  return r;
}

load_monitor::reading load_monitor::sample_now() {
  const std::int64_t now = _probe.now_ns();
  _next_sample_ns.store(now, std::memory_order_relaxed);
  sample(now);
  return last();
}

}  // namespace nmad
