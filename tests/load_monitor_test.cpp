// The load monitor (core/progress/load_monitor.hpp) against a fake probe
// whose clock, run queue and preemption count the test sets: when it
// samples, what makes the machine contended, how long the verdict holds;
// the waiter's polling discipline built on it (idle_poll and the yield
// modes); and the system probe reading this machine.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "core/progress/load_monitor.hpp"
#include "core/progress/waiter.hpp"

using namespace nmad;
using namespace std::chrono_literals;

namespace {

struct fake_probe final : load_probe {
  std::int64_t clock = 1'000'000'000;
  int run_queue = 1;
  int cpu_count = 2;
  std::int64_t switches = 0;
  int reads = 0;
  std::int64_t now_ns() override { return clock; }
  int runnable() override {
    ++reads;
    return run_queue;
  }
  int cpus() override { return cpu_count; }
  std::int64_t involuntary_switches() override { return switches; }
  void advance(std::chrono::nanoseconds d) { clock += d.count(); }
};

struct idle_engine final : wait_engine {
  int progress_round() override { return 0; }
  arm_result arm_drivers(std::vector<pollfd>&, int&) override { return arm_result::armed; }
  void disarm_drivers(std::span<const pollfd>) override {}
};

// A verdict on the first busy sample (the default waits for two in a row,
// tested on its own below).
const load_monitor_config kAtOnce{std::chrono::milliseconds(20), std::chrono::milliseconds(200), 3, 1};

}  // namespace

TEST_CASE("by default one busy reading is not contention: two in a row are") {
  fake_probe p;
  load_monitor m(p);
  p.run_queue = 2;
  CHECK_FALSE(m.contended());
  p.run_queue = 3;  // a kernel thread woke at the sampling instant
  p.advance(20ms);
  CHECK_FALSE(m.contended());
  CHECK(m.last().runnable == 3);
  p.run_queue = 2;
  p.advance(20ms);
  CHECK_FALSE(m.contended());  // the spike is gone: never contended
  p.run_queue = 4;  // real contention: seen twice in a row
  p.advance(20ms);
  CHECK_FALSE(m.contended());
  p.advance(20ms);
  CHECK(m.contended());
  p.run_queue = 2;
  p.advance(20ms);
  CHECK(m.contended());  // held
}

TEST_CASE("an idle machine is not contended; a run queue longer than the CPUs is") {
  fake_probe p;
  load_monitor m(p, kAtOnce);
  p.run_queue = 2;  // one runnable thread per CPU: not contended
  CHECK_FALSE(m.contended());
  CHECK(m.last().runnable == 2);
  CHECK(m.last().cpus == 2);
  p.run_queue = 3;
  p.advance(25ms);
  CHECK(m.contended());
  CHECK(m.last().contended);
  CHECK(m.last().runnable == 3);
}

TEST_CASE("samples are taken at most once per period; the clock decides") {
  fake_probe p;
  load_monitor m(p, kAtOnce);
  m.contended();
  CHECK(p.reads == 1);
  for (int i = 0; i < 1000; ++i) m.contended();  // same instant: no new sample
  CHECK(p.reads == 1);
  p.advance(19ms);
  m.contended();
  CHECK(p.reads == 1);
  p.advance(1ms);  // 20 ms: the period
  m.contended();
  CHECK(p.reads == 2);
  CHECK(m.samples() == 2);
  // A run queue that grows between samples is seen only at the next one.
  p.run_queue = 8;
  CHECK_FALSE(m.contended());
  p.advance(20ms);
  CHECK(m.contended());
}

TEST_CASE("the verdict holds for the hold time after the last contended sample, then lapses") {
  fake_probe p;
  load_monitor m(p, {20ms, 200ms, 3, 1});
  p.run_queue = 5;
  CHECK(m.contended());
  p.run_queue = 1;  // the waiting ranks went to sleep: the queue looks short
  for (int t = 20; t < 200; t += 20) {
    p.advance(20ms);
    CAPTURE(t);
    CHECK(m.contended());
    CHECK_FALSE(m.last().contended);  // the sample itself saw no contention
  }
  p.advance(20ms);  // 200 ms after the contended sample
  CHECK_FALSE(m.contended());
  // Contended again: held again from this sample.
  p.run_queue = 3;
  p.advance(20ms);
  CHECK(m.contended());
}

TEST_CASE("preemptions count: a process preempted often shares its CPU, whatever the run queue said") {
  fake_probe p;
  load_monitor m(p, {20ms, 100ms, 3, 1});
  p.run_queue = 1;
  p.switches = 100;
  CHECK_FALSE(m.contended());  // first sample: no previous count to compare with
  p.advance(20ms);
  p.switches = 102;  // 2 in a period: below the threshold (a tick, a kernel thread)
  CHECK_FALSE(m.contended());
  CHECK(m.last().preemptions == 2);
  p.advance(20ms);
  p.switches = 110;  // 8: someone else runs on our CPU
  CHECK(m.contended());
  CHECK(m.last().preemptions == 8);
}

TEST_CASE("an unknown run queue or preemption count never makes the machine contended by itself") {
  fake_probe p;
  load_monitor m(p);
  p.run_queue = -1;
  p.switches = -1;
  CHECK_FALSE(m.contended());
  p.advance(20ms);
  CHECK_FALSE(m.contended());
  CHECK(m.last().runnable == -1);
  CHECK(m.last().preemptions == -1);
}

TEST_CASE("the static floor (the job alone oversubscribes the machine) makes it contended whatever the samples") {
  fake_probe p;
  load_monitor m(p);
  m.set_static_contended(true);
  p.run_queue = 1;
  CHECK(m.contended());
  CHECK(m.last_verdict());
  m.set_static_contended(false);
  p.advance(20ms);
  CHECK_FALSE(m.contended());
}

TEST_CASE("sample_now measures at once, whatever the period") {
  fake_probe p;
  load_monitor m(p);
  m.contended();
  p.run_queue = 6;
  CHECK(m.sample_now().contended);
  CHECK(m.sample_now().runnable == 6);
  CHECK(p.reads == 3);
}

TEST_CASE("many threads asking at once: one sample per period, every answer consistent") {
  fake_probe p;  // clock frozen: exactly one sample however many threads race
  load_monitor m(p, kAtOnce);
  p.run_queue = 4;
  std::atomic<int> yes{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 4; ++i)
    ts.emplace_back([&] {
      for (int k = 0; k < 10000; ++k) m.contended();
      if (m.contended()) ++yes;
    });
  for (auto& t : ts) t.join();
  CHECK(m.samples() == 1);
  CHECK(yes.load() == 4);
}

TEST_CASE("waiter: idle_poll gives the CPU away only when the yield mode and the monitor say so") {
  fake_probe p;
  load_monitor m(p, kAtOnce);
  idle_engine e;
  waiter w(e, false);
  // No monitor: never.
  w.idle_poll();
  CHECK(w.idle_yields() == 0);
  w.set_load_monitor(&m);
  p.run_queue = 1;
  for (int i = 0; i < 10; ++i) w.idle_poll();
  CHECK(w.idle_yields() == 0);  // idle machine: polling stays as fast as it was
  p.run_queue = 5;
  p.advance(20ms);
  for (int i = 0; i < 10; ++i) w.idle_poll();
  CHECK(w.idle_yields() == 10);  // contended: every idle poll yields
  w.set_yield_mode(waiter::yield_mode::never);
  w.idle_poll();
  CHECK(w.idle_yields() == 10);
  p.run_queue = 1;
  p.advance(1s);
  w.set_yield_mode(waiter::yield_mode::always);
  w.idle_poll();
  CHECK(w.idle_yields() == 11);
  CHECK(w.yield_now());
  w.set_yield_mode(waiter::yield_mode::when_contended);
  CHECK_FALSE(w.yield_now());
}

TEST_CASE("system probe: reads this machine's run queue, CPUs and preemptions") {
  auto probe = make_system_load_probe();
  const long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  CHECK(probe->cpus() == online);
  const int r = probe->runnable();
  CHECK(r >= 1);  // this thread runs
  CHECK(probe->involuntary_switches() >= 0);
  const std::int64_t t0 = probe->now_ns();
  std::this_thread::sleep_for(2ms);
  CHECK(probe->now_ns() - t0 >= 2'000'000);
  // Busy threads beyond the CPUs show in the run queue (a real load, not a
  // timing: the count is read while they certainly run).
  std::atomic<bool> stop{false};
  std::vector<std::thread> hogs;
  for (long i = 0; i < online + 2; ++i)
    hogs.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
      }
    });
  int seen = 0;
  for (int i = 0; i < 50 && seen <= online; ++i) {
    seen = std::max(seen, probe->runnable());
    std::this_thread::sleep_for(1ms);
  }
  stop = true;
  for (auto& t : hogs) t.join();
  CHECK(seen > online);
  load_monitor m(*probe);
  (void)m.contended();
  CHECK(m.samples() == 1);
}
