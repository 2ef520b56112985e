#pragma once
// Background advancement of non-blocking collectives by the engine.
//
// A progress_hook registers ONE session progress task (nmad::layer::
// progress_task, api/nmad/layer.hpp) that advances every executor handed to it, on every
// round of engine progress made by any thread (a wait on some unrelated
// request, a progress thread, another collective...). Executors are dropped
// from the hook once done; their owner still sees done()/error().
//
// The MPI binding keeps one hook per session and, for MPI_Ixxx, does
//   auto ex = std::make_shared<executor>(build_xxx(...), tr, tr.next_sequence());
//   hook.add(ex);            // progressed in the background from now on
//   ... MPI_Test: ex->advance()  /  MPI_Wait: while (!ex->advance()) {}
// Calling advance() from the owner at the same time is safe (the executor's
// try-lock: one thread advances it at a time, others return at once).
//
// Thread safety: add() may be called from any thread (it takes the hook's
// own short lock, which the task does not hold while it advances
// schedules). The task runs under the engine's task lock (engine rule); a
// nested progress round (the task advancing a schedule makes the engine
// progress, which runs the task again) returns at once.
// Lifetime: destroy the hook before the session; the destructor unregisters
// the task (executors still held are released, not completed).
#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "api/nmad/layer.hpp"
#include "mpi_layer/coll/schedule.hpp"

namespace nmad::coll {

class progress_hook {
 public:
  explicit progress_hook(nmad::session& s);
  ~progress_hook();
  progress_hook(const progress_hook&) = delete;
  progress_hook& operator=(const progress_hook&) = delete;

  void add(std::shared_ptr<executor> ex);
  std::size_t pending() const;  // executors not seen done yet

 private:
  static int task(void* self);
  int run();
  nmad::session& _s;
  mutable std::mutex _mu;  // guards _list and _incoming
  std::vector<std::shared_ptr<executor>> _list;
  std::vector<std::shared_ptr<executor>> _incoming;  // added while the task runs
  std::atomic<bool> _running{false};
  std::atomic<std::size_t> _count{0};  // executors held (fast path: 0)
  nmad::layer::progress_task _task;     // runs task(this); removed first
};

}  // namespace nmad::coll
