// MPI-IO collective data access, the background side: one session progress
// task advances every collective job started by a non-blocking or split
// form (twophase.cpp), and MPI_Finalize finishes those nobody waited for.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <iterator>
#include <mutex>
#include <vector>

#include "api/nmad/services/config.hpp"
#include "mpi_layer/file/file_impl.hpp"

namespace nmad::mpi::io {

namespace {

// One session progress task advances every collective job started by a
// non-blocking form (as coll/progress_hook.hpp does for executors): any
// engine progress round moves them, and background_work() keeps the
// progress thread (NMAD_PROGRESS) running them while the application
// computes. Never destroyed (a job may outlive MPI_Finalize, see
// io_finalize()).
struct job_hook {
  std::mutex task_mu;                 // registration of the task (never taken by the task)
  nmad::layer::progress_task task;    // hook_task, from the first job to io_finalize()
  std::mutex mu;                      // guards live and incoming
  std::vector<std::shared_ptr<collective_job>> live, incoming;
  std::atomic<std::size_t> count{0};  // jobs held (fast path: 0)
  std::atomic<bool> running{false};   // a round is advancing them (nested rounds return)
};

job_hook& hook() {
  static auto* h = new job_hook();
  return *h;
}

int hook_task(void*) {
  job_hook& k = hook();
  if (k.count.load(std::memory_order_acquire) == 0) return 0;
  if (k.running.exchange(true, std::memory_order_acquire)) return 0;
  std::vector<std::shared_ptr<collective_job>> work;
  {
    std::lock_guard g(k.mu);
    k.live.insert(k.live.end(), std::make_move_iterator(k.incoming.begin()), std::make_move_iterator(k.incoming.end()));
    k.incoming.clear();
    work = k.live;  // advanced without k.mu (a job's file step may finish meanwhile)
  }
  int finished = 0;
  for (auto& j : work) finished += advance_job(*j) ? 1 : 0;
  std::size_t dropped = 0;
  if (finished > 0) {
    std::lock_guard g(k.mu);
    dropped = std::erase_if(k.live, [](const std::shared_ptr<collective_job>& j) {
      return job_finished(*j);
    });
    k.count.fetch_sub(dropped, std::memory_order_release);
  }
  if (dropped > 0) nmad::layer::background_work(*st().session, -static_cast<long>(dropped));
  k.running.store(false, std::memory_order_release);
  return finished;
}

}  // namespace

void register_job(const std::shared_ptr<collective_job>& j) {
  job_hook& k = hook();
  {
    std::lock_guard g(k.task_mu);
    if (!k.task) k.task = nmad::layer::progress_task(*st().session, &hook_task, nullptr);
  }
  {
    std::lock_guard g(k.mu);
    k.incoming.push_back(j);
    k.count.fetch_add(1, std::memory_order_release);
  }
  nmad::layer::background_work(*st().session, 1);  // wakes the progress thread if it sleeps
}

void progress_collectives() { hook_task(nullptr); }

void io_finalize() {
  job_hook& k = hook();
  if (k.count.load(std::memory_order_acquire) > 0) {
    // Jobs nobody waited for: finished while every process can still take
    // part (bounded as for non-blocking collectives).
    std::chrono::milliseconds timeout{10000};
    try {
      timeout = nmad::config::milliseconds("NMAD_COLL_FINALIZE_TIMEOUT_MS");
    } catch (const std::exception&) {
    }
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    st().session->wait_until([&] {
      hook_task(nullptr);
      return k.count.load(std::memory_order_acquire) == 0 || std::chrono::steady_clock::now() >= deadline;
    });
  }
  std::lock_guard g(k.task_mu);
  k.task.reset();
  // Jobs still held stay in k.live, never destroyed (their executors may
  // have requests in flight).
}

}  // namespace nmad::mpi::io
