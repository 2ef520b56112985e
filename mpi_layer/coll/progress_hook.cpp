#include "mpi_layer/coll/progress_hook.hpp"

#include <algorithm>

namespace nmad::coll {

progress_hook::progress_hook(nmad::session& s) : _s(s) {
  // Last: the task may run on another thread as soon as it is added.
  _task = nmad::layer::progress_task(_s, &progress_hook::task, this);
}

progress_hook::~progress_hook() {
  _task.reset();
  nmad::layer::background_work(_s, -static_cast<long>(_count.load(std::memory_order_acquire)));
}

void progress_hook::add(std::shared_ptr<executor> ex) {
  {
    std::lock_guard g(_mu);
    _incoming.push_back(std::move(ex));
    _count.fetch_add(1, std::memory_order_release);
  }
  // Keeps a progress thread advancing it while the application computes
  // (wakes it if it sleeps: the schedule's first round is not posted yet).
  nmad::layer::background_work(_s, 1);
}

std::size_t progress_hook::pending() const {
  std::lock_guard g(_mu);
  std::size_t n = _incoming.size();
  for (const auto& e : _list) n += !e->done();
  return n;
}

int progress_hook::task(void* self) { return static_cast<progress_hook*>(self)->run(); }

int progress_hook::run() {
  if (_count.load(std::memory_order_acquire) == 0) return 0;  // the common case: nothing pending
  // Nested round (advance() -> engine progress -> this task): nothing to do.
  if (_running.exchange(true, std::memory_order_acquire)) return 0;
  std::vector<std::shared_ptr<executor>> work;
  {
    std::lock_guard g(_mu);
    _list.insert(_list.end(), std::make_move_iterator(_incoming.begin()), std::make_move_iterator(_incoming.end()));
    _incoming.clear();
    work = _list;  // advance without holding _mu (add() must not wait on engine progress)
  }
  int work_done = 0;
  std::size_t dropped = 0;
  for (auto& ex : work)
    if (ex->advance()) ++work_done;
  {
    std::lock_guard g(_mu);
    dropped = std::erase_if(_list, [](const std::shared_ptr<executor>& e) { return e->done(); });
    _count.fetch_sub(dropped, std::memory_order_release);
  }
  if (dropped > 0) nmad::layer::background_work(_s, -static_cast<long>(dropped));
  _running.store(false, std::memory_order_release);
  return work_done;
}

}  // namespace nmad::coll
