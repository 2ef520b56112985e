// The waiter (core/progress/waiter.hpp) against a scripted engine: which
// policy polls, which sleeps, that a sleeper is woken by its descriptors and
// by notify() from another thread (sleeps are unbounded here, so a lost
// wake-up hangs the test instead of passing late), and that a condition that
// answered true is never asked again.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "core/progress/waiter.hpp"

using namespace nmad;

namespace {

// An engine whose progress rounds do work while `work_left` > 0, and whose
// drivers are one pipe: readable = activity.
struct scripted_engine final : wait_engine {
  std::atomic<int> rounds{0}, arms{0}, disarms{0};
  std::atomic<int> work_left{0};
  arm_result answer = arm_result::armed;
  int pipe_fd[2] = {-1, -1};
  bool pipe_readable_seen = false;

  scripted_engine() { REQUIRE(::pipe(pipe_fd) == 0); }
  ~scripted_engine() override {
    ::close(pipe_fd[0]);
    ::close(pipe_fd[1]);
  }
  int progress_round() override {
    ++rounds;
    if (work_left.load() > 0) {
      --work_left;
      return 1;
    }
    return 0;
  }
  arm_result arm_drivers(std::vector<pollfd>& fds, int& timeout_ms) override {
    ++arms;
    fds.push_back({pipe_fd[0], POLLIN, 0});
    return answer;
  }
  void disarm_drivers(std::span<const pollfd> fds) override {
    ++disarms;
    if (fds.back().revents & POLLIN) {
      pipe_readable_seen = true;
      char b;
      (void)!::read(pipe_fd[0], &b, 1);
    }
  }
};

// After `delay`, sets `flag` and makes the engine's descriptor readable (the
// "packet" that completes what the waiter waits for).
std::thread activity_after(scripted_engine& e, std::atomic<bool>& flag, std::chrono::milliseconds delay) {
  return std::thread([&e, &flag, delay] {
    std::this_thread::sleep_for(delay);
    flag = true;
    (void)!::write(e.pipe_fd[1], "x", 1);
  });
}

}  // namespace

TEST_CASE("busy: polls until done, never arms the drivers") {
  scripted_engine e;
  waiter w(e, false);
  w.set_config({wait_policy::busy, std::chrono::nanoseconds(0)});
  int calls = 0;
  w.wait([&] { return ++calls > 1000; });
  CHECK(calls == 1001);
  CHECK(e.rounds >= 1000);
  CHECK(e.arms == 0);
  CHECK(w.sleeps() == 0);
}

TEST_CASE("block: sleeps as soon as a round finds nothing, woken by driver activity") {
  scripted_engine e;
  waiter w(e, false);
  w.set_config({wait_policy::block, std::chrono::nanoseconds(0)});
  w.set_max_sleep_ms(-1);
  std::atomic<bool> flag{false};
  std::thread peer = activity_after(e, flag, std::chrono::milliseconds(50));
  w.wait([&] { return flag.load(); });
  peer.join();
  CHECK(e.arms >= 1);
  CHECK(e.arms == e.disarms);
  CHECK(w.sleeps() >= 1);
  CHECK(e.pipe_readable_seen);
}

TEST_CASE("block: a driver with work pending (busy) is polled, not slept on") {
  scripted_engine e;
  e.answer = arm_result::busy;
  waiter w(e, false);
  w.set_config({wait_policy::block, std::chrono::nanoseconds(0)});
  w.set_max_sleep_ms(-1);
  int calls = 0;
  w.wait([&] { return ++calls > 50; });
  CHECK(e.arms >= 1);
  CHECK(e.arms == e.disarms);
  CHECK(w.sleeps() == 0);
}

TEST_CASE("fixed-spin: useful rounds keep it spinning; it sleeps only after the spin") {
  scripted_engine e;
  waiter w(e, false);
  w.set_config({wait_policy::fixed_spin, std::chrono::seconds(30)});
  e.work_left = 100;
  int calls = 0;
  w.wait([&] { return ++calls > 5000; });
  CHECK(w.sleeps() == 0);  // 30 s of spin never ran out
  CHECK(e.arms == 0);

  // A zero spin sleeps at once, like block.
  w.set_config({wait_policy::fixed_spin, std::chrono::nanoseconds(0)});
  w.set_max_sleep_ms(-1);
  std::atomic<bool> flag{false};
  std::thread peer = activity_after(e, flag, std::chrono::milliseconds(20));
  w.wait([&] { return flag.load(); });
  peer.join();
  CHECK(w.sleeps() >= 1);
}

TEST_CASE("threaded: notify() from another thread wakes a sleeper (no driver activity at all)") {
  scripted_engine e;
  waiter w(e, true);
  w.set_config({wait_policy::block, std::chrono::nanoseconds(0)});
  w.set_max_sleep_ms(-1);  // a lost wake-up would hang here
  for (int round = 0; round < 200; ++round) {
    std::atomic<bool> flag{false};
    std::thread completer([&] {
      if (round % 2) std::this_thread::sleep_for(std::chrono::microseconds(200));
      flag.store(true, std::memory_order_release);
      w.notify();
    });
    w.wait([&] { return flag.load(std::memory_order_acquire); });
    completer.join();
  }
  CHECK(e.arms == e.disarms);
}

TEST_CASE("several threads sleep at once; each is woken by its own completion") {
  scripted_engine e;
  waiter w(e, true);
  w.set_config({wait_policy::block, std::chrono::nanoseconds(0)});
  w.set_max_sleep_ms(-1);
  constexpr int kThreads = 4;
  std::atomic<int> done_mask{0};
  std::vector<std::thread> sleepers;
  for (int t = 0; t < kThreads; ++t)
    sleepers.emplace_back([&, t] { w.wait([&] { return (done_mask.load() >> t) & 1; }); });
  for (int t = 0; t < kThreads; ++t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    done_mask.fetch_or(1 << t);
    w.notify();
  }
  for (auto& th : sleepers) th.join();
  CHECK(done_mask.load() == (1 << kThreads) - 1);
}

TEST_CASE("a condition that answered true is never asked again (it may have side effects)") {
  for (wait_policy p : {wait_policy::busy, wait_policy::block, wait_policy::fixed_spin}) {
    scripted_engine e;
    waiter w(e, false);
    w.set_config({p, std::chrono::nanoseconds(0)});
    w.set_max_sleep_ms(5);
    int calls = 0, after_true = 0;
    bool answered = false;
    w.wait([&] {
      if (answered) ++after_true;
      answered = ++calls >= 7;
      return answered;
    });
    CHECK(after_true == 0);
    CHECK(calls == 7);
  }
}

TEST_CASE("policy names") {
  wait_policy p{};
  CHECK(parse_wait_policy("busy", p));
  CHECK(p == wait_policy::busy);
  CHECK(parse_wait_policy("spin", p));
  CHECK(p == wait_policy::fixed_spin);
  CHECK(wait_policy_name(wait_policy::block) == "block");
  CHECK_FALSE(parse_wait_policy("nap", p));
}
