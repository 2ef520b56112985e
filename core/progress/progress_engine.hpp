#pragma once
// The progress engine: the engine's background work as *tasks*, run by
// whichever thread makes progress — the application's threads when they
// call the library or wait in it, and progress threads while the
// application computes (PIOMan's model).
//
// Tasks. A task is a callback submitted with options:
//   * repeat: `once` runs it on the next round and forgets it; `until_done`
//     runs it on every round until it reports done (task_result::done);
//   * priority 0..20: a round runs higher priorities first (ties: in
//     submission order). The thread kinds' defaults are in topology's
//     placement policy (application, progress, internal);
//   * scope: the CPUs it may run on (machine, a NUMA node, a core). A
//     progress thread runs the tasks whose scope holds its CPU; a thread of
//     the application (not placed by us) runs every task.
// A task returns how much work it did (0: nothing happened, which is what
// lets an idle progress thread go to sleep) and whether it is done. A task
// may submit or cancel tasks (its own included) and may start requests; it
// must not wait (it runs inside a progress round, possibly on a progress
// thread that other waits rely on).
//
// Thread safety: submit() from any thread, also with engine locks held
// and from a task (it takes a leaf lock; the task joins at the next
// round). cancel() from any thread holding no engine lock, or from a task:
// once it returned, the task's callback is not running and never runs
// again (called from a task, that task's current call finishes).
// run_round() from any thread, one at a time: a thread that finds another
// running the tasks skips them (try-lock).
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "core/common/engine_mutex.hpp"

namespace nmad {

enum class task_repeat : std::uint8_t { once, until_done };

// Where a task may run: the whole machine, the CPUs of one NUMA node, or
// one CPU (hwloc's logical indexes of core/topology; index ignored for
// machine).
struct task_scope {
  enum class kind : std::uint8_t { machine, numa, core } level = kind::machine;
  int index = 0;
};

struct task_options {
  task_repeat repeat = task_repeat::until_done;
  int priority = 10;  // 0..20, clamped
  task_scope scope{};
};

struct task_result {
  int work = 0;       // > 0: something happened
  bool done = false;  // until_done: stop running it
};

// Where the thread running a round is: progress threads know their CPU and
// NUMA node; application threads pass `anywhere` (run every task).
struct runner_place {
  int cpu = -1;   // -1: anywhere
  int numa = -1;
  static runner_place anywhere() { return {}; }
  bool admits(const task_scope& s) const {
    if (cpu < 0 || s.level == task_scope::kind::machine) return true;
    if (s.level == task_scope::kind::numa) return numa < 0 || s.index == numa;
    return s.index == cpu;
  }
};

class progress_engine {
 public:
  using task_fn = task_result (*)(void* arg);

  // `threaded`: other threads may submit, cancel or run rounds (else no
  // lock is taken).
  explicit progress_engine(bool threaded) : _lock(threaded), _incoming_lock(threaded) {}
  // Before other threads use it (a progress thread is about to start).
  void set_threaded(bool on) {
    _lock.enable(on);
    _incoming_lock.enable(on);
  }
  progress_engine(const progress_engine&) = delete;
  progress_engine& operator=(const progress_engine&) = delete;

  // Adds a task; returns its id (> 0).
  int submit(task_fn fn, void* arg, task_options opts = {});
  // A task that is never done by itself: fn returns its work (the
  // session's add_progress_task).
  using work_fn = int (*)(void* arg);
  int submit(work_fn fn, void* arg, task_options opts = {});
  // Removes a task (see the guarantee above). Unknown ids are ignored.
  void cancel(int id);
  // Runs one round of the tasks `where` admits; returns the work done.
  // 0 at once if another thread is running them.
  int run_round(runner_place where = runner_place::anywhere());
  // Tasks submitted and not finished (cheap, no lock).
  std::size_t pending() const { return _count.load(std::memory_order_acquire); }
  // Statistics: rounds that ran tasks, task calls.
  std::uint64_t rounds() const { return _rounds.load(std::memory_order_relaxed); }
  std::uint64_t calls() const { return _calls.load(std::memory_order_relaxed); }

 private:
  struct task {
    int id;
    task_fn fn;      // one of these two
    work_fn work;
    void* arg;
    task_options opts;
    std::uint64_t order;  // submission order (ties in priority)
  };
  int add(task t);
  void merge_incoming();  // _lock held
  void drop_finished();   // _lock held

  engine_mutex _lock;              // _tasks, _finished, _running; run_round try-locks it
  std::vector<task> _tasks;        // by priority (high first), then submission
  std::vector<int> _finished;      // ids to drop after the current round
  bool _running = false;           // a round is running (a task may run progress again)
  domain_mutex _incoming_lock;     // leaf: _incoming, _next_id, _next_order
  std::vector<task> _incoming;     // submitted, not yet in _tasks
  std::atomic<std::size_t> _count{0};
  int _next_id = 1;
  std::uint64_t _next_order = 0;
  std::atomic<std::uint64_t> _rounds{0};
  std::atomic<std::uint64_t> _calls{0};
};

}  // namespace nmad
