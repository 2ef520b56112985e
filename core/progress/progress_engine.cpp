// The progress engine's task list (see progress_engine.hpp).
#include "core/progress/progress_engine.hpp"

#include "api/nmad/services/trace.hpp"

#include <algorithm>

namespace nmad {

int progress_engine::submit(task_fn fn, void* arg, task_options opts) {
  return add({0, fn, nullptr, arg, opts, 0});
}

int progress_engine::submit(work_fn fn, void* arg, task_options opts) {
  opts.repeat = task_repeat::until_done;
  return add({0, nullptr, fn, arg, opts, 0});
}

int progress_engine::add(task t) {
  t.opts.priority = std::clamp(t.opts.priority, 0, 20);
  std::lock_guard g(_incoming_lock);
  t.id = _next_id++;
  t.order = _next_order++;
  _incoming.push_back(t);
  _count.fetch_add(1, std::memory_order_acq_rel);
  return t.id;
}

void progress_engine::cancel(int id) {
  // Waits for a round another thread runs (the guarantee); a task
  // cancelling (itself or another) holds the lock already: recursive.
  std::lock_guard g(_lock);
  merge_incoming();
  const bool known = std::any_of(_tasks.begin(), _tasks.end(), [id](const task& t) { return t.id == id; });
  if (!known) return;
  if (std::find(_finished.begin(), _finished.end(), id) == _finished.end()) _finished.push_back(id);
  if (!_running) drop_finished();
}

void progress_engine::merge_incoming() {
  // _count is _tasks plus _incoming (finished ones already dropped): the
  // common round with nothing submitted takes no lock here.
  if (_count.load(std::memory_order_acquire) == _tasks.size()) return;
  std::vector<task> in;
  {
    std::lock_guard g(_incoming_lock);
    if (_incoming.empty()) return;
    in.swap(_incoming);
  }
  for (task& t : in) {
    // After every task of a higher or equal priority (stable: submission
    // order among equals).
    auto at = std::find_if(_tasks.begin(), _tasks.end(),
                           [&](const task& o) { return o.opts.priority < t.opts.priority; });
    _tasks.insert(at, t);
  }
}

void progress_engine::drop_finished() {
  if (_finished.empty()) return;
  const std::size_t before = _tasks.size();
  std::erase_if(_tasks, [&](const task& t) {
    return std::find(_finished.begin(), _finished.end(), t.id) != _finished.end();
  });
  _finished.clear();
  _count.fetch_sub(before - _tasks.size(), std::memory_order_acq_rel);
}

int progress_engine::run_round(runner_place where) {
  if (_count.load(std::memory_order_acquire) == 0) return 0;
  std::unique_lock g(_lock, std::try_to_lock);
  if (!g.owns_lock() || _running) return 0;  // another thread, or a task running progress
  _running = true;
  merge_incoming();
  int work = 0;
  // Tasks submitted meanwhile wait in _incoming: indexes stay valid.
  for (std::size_t i = 0; i < _tasks.size(); ++i) {
    const task t = _tasks[i];
    if (!where.admits(t.opts.scope)) continue;
    if (!_finished.empty() && std::find(_finished.begin(), _finished.end(), t.id) != _finished.end()) continue;
    const std::uint64_t t0 = trace::enabled() ? trace::now() : 0;
    const task_result r = t.fn ? t.fn(t.arg) : task_result{t.work(t.arg), false};
    if (t0) {
      const std::uint64_t t1 = trace::now();
      trace::emit_at(t1, trace::event::task_run, -1, 0, 0, 0, t1 - t0, static_cast<std::uint64_t>(r.work));
    }
    _calls.fetch_add(1, std::memory_order_relaxed);
    if (r.work > 0) work += r.work;
    if (t.opts.repeat == task_repeat::once || r.done)
      if (std::find(_finished.begin(), _finished.end(), t.id) == _finished.end()) _finished.push_back(t.id);
  }
  drop_finished();
  _running = false;
  _rounds.fetch_add(1, std::memory_order_relaxed);
  return work;
}

}  // namespace nmad
