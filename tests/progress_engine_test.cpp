// The progress engine's task list (core/progress/progress_engine.hpp):
// options (once / until done, priority, scope), submission and
// cancellation from tasks, and the cancel guarantee across threads.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "core/progress/progress_engine.hpp"

using namespace nmad;

namespace {

struct log_task {
  std::string* log;
  char name;
  int runs = 0;
  int done_after = -1;  // until_done: report done on this run
  int work = 1;
};

task_result log_run(void* p) {
  auto* t = static_cast<log_task*>(p);
  *t->log += t->name;
  ++t->runs;
  return {t->work, t->done_after >= 0 && t->runs >= t->done_after};
}

}  // namespace

TEST_CASE("a round runs higher priorities first, submission order among equals") {
  progress_engine pe(false);
  std::string log;
  log_task a{&log, 'a'}, b{&log, 'b'}, c{&log, 'c'}, d{&log, 'd'};
  pe.submit(log_run, &a, {task_repeat::until_done, 5});
  pe.submit(log_run, &b, {task_repeat::until_done, 15});
  pe.submit(log_run, &c, {task_repeat::until_done, 5});
  pe.submit(log_run, &d, {task_repeat::until_done, 99});  // clamped to 20
  CHECK(pe.pending() == 4);
  CHECK(pe.run_round() == 4);
  CHECK(log == "dbac");
}

TEST_CASE("once runs one time; until_done runs until the task says so") {
  progress_engine pe(false);
  std::string log;
  log_task once{&log, 'o'}, three{&log, 't', 0, 3};
  pe.submit(log_run, &once, {task_repeat::once});
  pe.submit(log_run, &three, {task_repeat::until_done});
  for (int i = 0; i < 5; ++i) pe.run_round();
  CHECK(once.runs == 1);
  CHECK(three.runs == 3);
  CHECK(pe.pending() == 0);
  CHECK(pe.run_round() == 0);
}

TEST_CASE("work counts only what the tasks report") {
  progress_engine pe(false);
  std::string log;
  log_task idle{&log, 'i'};
  idle.work = 0;
  pe.submit(log_run, &idle);
  CHECK(pe.run_round() == 0);
  CHECK(idle.runs == 1);
  int counter = 0;
  pe.submit(progress_engine::work_fn{[](void* p) { return ++*static_cast<int*>(p) % 2; }}, &counter);
  CHECK(pe.run_round() == 1);
  CHECK(pe.run_round() == 0);
  CHECK(counter == 2);
}

TEST_CASE("scope: a placed runner runs only the tasks whose scope holds its CPU") {
  progress_engine pe(false);
  std::string log;
  log_task m{&log, 'm'}, n0{&log, 'n'}, n1{&log, 'N'}, c3{&log, 'c'};
  pe.submit(log_run, &m, {task_repeat::until_done, 10, {task_scope::kind::machine, 0}});
  pe.submit(log_run, &n0, {task_repeat::until_done, 10, {task_scope::kind::numa, 0}});
  pe.submit(log_run, &n1, {task_repeat::until_done, 10, {task_scope::kind::numa, 1}});
  pe.submit(log_run, &c3, {task_repeat::until_done, 10, {task_scope::kind::core, 3}});
  pe.run_round(runner_place{3, 0});
  CHECK(log == "mnc");
  log.clear();
  pe.run_round(runner_place{5, 1});
  CHECK(log == "mN");
  log.clear();
  pe.run_round();  // an application thread: every task
  CHECK(log == "mnNc");
}

namespace {
struct spawner {
  progress_engine* pe;
  std::string* log;
  log_task child;
  int id = 0;
  int runs = 0;
};
task_result spawn_then_cancel(void* p) {
  auto* s = static_cast<spawner*>(p);
  ++s->runs;
  *s->log += 's';
  if (s->runs == 1) s->pe->submit(log_run, &s->child, {task_repeat::until_done, 20});  // joins next round
  if (s->runs == 2) s->pe->cancel(s->id);  // itself
  return {1, false};
}
}  // namespace

TEST_CASE("a task may submit tasks (they join the next round) and cancel itself") {
  progress_engine pe(true);
  std::string log;
  spawner s{&pe, &log, log_task{&log, 'k'}};
  s.id = pe.submit(spawn_then_cancel, &s);
  pe.run_round();
  CHECK(log == "s");
  pe.run_round();
  CHECK(log == "sks");  // the child has priority 20
  pe.run_round();
  CHECK(log == "sksk");
  CHECK(s.runs == 2);
  CHECK(pe.pending() == 1);
}

TEST_CASE("once cancel returns, the task is not running and never runs again (threads)") {
  progress_engine pe(true);
  struct slow {
    std::atomic<int> inside{0};
    std::atomic<int> after_cancel{0};
    std::atomic<bool> cancelled{false};
  } st;
  const int id = pe.submit(
      [](void* p) -> task_result {
        auto* s = static_cast<slow*>(p);
        s->inside.fetch_add(1);
        if (s->cancelled.load()) s->after_cancel.fetch_add(1);
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        s->inside.fetch_sub(1);
        return {1, false};
      },
      &st);
  std::atomic<bool> stop{false};
  std::thread runner([&] {
    while (!stop.load()) pe.run_round();
  });
  while (pe.calls() < 5) std::this_thread::yield();
  pe.cancel(id);
  st.cancelled.store(true);
  CHECK(st.inside.load() == 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  stop.store(true);
  runner.join();
  CHECK(st.after_cancel.load() == 0);
  CHECK(pe.pending() == 0);
}

TEST_CASE("two threads running rounds: each task call is made by one thread at a time") {
  progress_engine pe(true);
  std::atomic<int> inside{0}, overlap{0}, calls{0};
  struct ctx {
    std::atomic<int>* inside;
    std::atomic<int>* overlap;
    std::atomic<int>* calls;
  } c{&inside, &overlap, &calls};
  pe.submit(
      [](void* p) -> task_result {
        auto* x = static_cast<ctx*>(p);
        if (x->inside->fetch_add(1) != 0) x->overlap->fetch_add(1);
        x->calls->fetch_add(1);
        x->inside->fetch_sub(1);
        return {1, false};
      },
      &c);
  std::vector<std::thread> ts;
  for (int i = 0; i < 3; ++i)
    ts.emplace_back([&] {
      for (int k = 0; k < 20000; ++k) pe.run_round();
    });
  for (auto& t : ts) t.join();
  CHECK(overlap.load() == 0);
  CHECK(calls.load() > 0);
}
