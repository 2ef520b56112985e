#pragma once
// The load monitor: whether this process competes for its CPUs *now*.
//
// Why. A thread that polls (a blocking wait spinning, a loop of MPI_Test
// calls) while the process it waits for is queued behind it on the same
// CPU delays exactly what it waits for: it should give its CPU away at
// once. On a machine with a CPU per runnable thread the same give-away
// only costs latency (a system call per idle poll). The job's own process
// count cannot tell the two apart: other jobs, a build, a second MPI job
// on the node all count. So the monitor samples the machine at run time.
//
// What it reads, at most once per `period` (default 20 ms; between
// samples contended() is one relaxed atomic load and a clock read):
//   * the number of runnable threads on the machine (the kernel's
//     nr_running: /proc/loadavg's fourth field), against the CPUs online;
//   * this process's involuntary context switches (getrusage): a thread
//     preempted by the scheduler several times in one period shares its
//     CPU with someone, whatever the run queue said at the sampling moment.
// The machine is *contended* when, in a sample, more threads are runnable
// than CPUs are online, or the process was preempted at least
// `preempt_threshold` times since the previous sample. The verdict turns
// contended only after `confirm` such samples in a row (default 2, that is
// 20-40 ms of contention): on an idle machine a kernel thread or a short
// process sometimes makes one reading busy, and a single reading held for
// 200 ms made a 2-rank job yield in its ping-pong (8-byte latency 0.39 ->
// 0.4-1.4 us, bimodal). The verdict is held
// for `hold` (default 200 ms) after the last contended sample, so that a
// moment when the waiting ranks all sleep (and the run queue looks short)
// does not flip the policy back and forth. A `static_contended` floor (the
// job alone puts more processes on this machine than it has CPUs) makes
// the verdict true whatever the samples say.
//
// Thread safety: contended() may be called from any number of threads; one
// of them takes each sample (the others keep the previous verdict).
// Cost: a sample is one pread(2) and one getrusage(2), about 2 us here.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

namespace nmad {

// What the monitor reads; system_load_probe reads the real machine, tests
// give a fake one (clock and counters under their control).
class load_probe {
 public:
  virtual ~load_probe() = default;
  // Monotonic clock.
  virtual std::int64_t now_ns() = 0;
  // Runnable threads on the machine, the caller included (-1: unknown).
  virtual int runnable() = 0;
  // CPUs online on the machine.
  virtual int cpus() = 0;
  // Involuntary context switches of this process so far (-1: unknown).
  virtual std::int64_t involuntary_switches() = 0;
  // Runnable threads of this process, the caller included (-1: unknown):
  // what runnable() counts that is not another job's.
  virtual int own_runnable() { return -1; }
};

// /proc/loadavg, sysconf(_SC_NPROCESSORS_ONLN), getrusage(RUSAGE_SELF),
// the states in /proc/self/task/*/stat.
std::unique_ptr<load_probe> make_system_load_probe();

struct load_monitor_config {
  std::chrono::nanoseconds period = std::chrono::milliseconds(20);
  std::chrono::nanoseconds hold = std::chrono::milliseconds(200);
  int preempt_threshold = 3;  // involuntary switches per period
  int confirm = 2;            // busy samples in a row before the verdict turns contended
};

class load_monitor {
 public:
  // `probe` must outlive the monitor.
  explicit load_monitor(load_probe& probe, load_monitor_config c = {});
  load_monitor(const load_monitor&) = delete;
  load_monitor& operator=(const load_monitor&) = delete;

  // The verdict (samples first if the period elapsed).
  bool contended() {
    const std::int64_t now = _probe.now_ns();
    if (now >= _next_sample_ns.load(std::memory_order_relaxed)) sample(now);
    return _static.load(std::memory_order_relaxed) || now < _contended_until_ns.load(std::memory_order_relaxed);
  }
  // The verdict of the last sample, without sampling (nmad-info, traces).
  bool last_verdict() const;
  void set_static_contended(bool c) { _static.store(c, std::memory_order_relaxed); }
  bool static_contended() const { return _static.load(std::memory_order_relaxed); }

  // What the last sample saw (for nmad-info and the profile sampler).
  struct reading {
    int runnable = -1;
    int cpus = 0;
    std::int64_t preemptions = -1;  // since the sample before
    bool contended = false;
  };
  reading last() const;
  // Samples now, whatever the period (the profile sampler: the load at the
  // moment it measured).
  reading sample_now();
  std::uint64_t samples() const { return _samples.load(std::memory_order_relaxed); }

 private:
  void sample(std::int64_t now);

  load_probe& _probe;
  const load_monitor_config _config;
  std::atomic<bool> _static{false};
  alignas(64) std::atomic<std::int64_t> _next_sample_ns{0};
  std::atomic<std::int64_t> _contended_until_ns{-1};
  std::atomic<std::int64_t> _last_switches{-1};
  std::atomic<int> _last_runnable{-1};
  std::atomic<int> _last_cpus{0};
  std::atomic<std::int64_t> _last_preemptions{-1};
  std::atomic<bool> _last_contended{false};  // the last sample's own reading
  std::atomic<int> _busy_streak{0};          // busy samples in a row (written by the sampling thread)
  std::atomic<std::uint64_t> _samples{0};
};

}  // namespace nmad
