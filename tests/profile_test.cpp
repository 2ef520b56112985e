// Sampled driver profiles (core/transfer/profile.hpp): the measurement over
// a real loopback pair of each network driver, and the per-host cache —
// written, reused, invalidated by another key, ignored when corrupt.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <time.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/transfer/profile.hpp"
#include "drivers/builtin.hpp"
#include "tests/test_paths.hpp"

namespace {

using nmad_test::slurp;

const bool kRegistered = (nmad::register_builtin_drivers(), true);
namespace fs = std::filesystem;

// A fresh cache path under the test's temporary directory, set as
// NMAD_PROFILE_CACHE for the duration of a test case.
struct cache_dir {
  fs::path dir, file;
  cache_dir() {
    const char* tmp = std::getenv("TEST_TMPDIR");
    dir = fs::path(tmp && *tmp ? tmp : "/tmp") / ("nmad-profile-test-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    file = dir / "sub" / "profiles";
    ::setenv("NMAD_PROFILE_CACHE", file.c_str(), 1);
  }
  ~cache_dir() {
    ::unsetenv("NMAD_PROFILE_CACHE");
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream f(p, std::ios::trunc);
  f << text;
}

nmad::sample_options quick() {
  nmad::sample_options o;
  o.sizes = {8, 4096, 1u << 20};
  o.min_rounds = 3;
  o.seconds_per_size = 0.01;
  return o;
}

// A load probe whose machine is as the test says (the cache tests must not
// depend on what else runs beside them: a busy machine rejects samples).
struct fake_load final : nmad::load_probe {
  int run_queue = 1;  // the sampler's own thread
  int cpu_count = 2;
  std::int64_t switches = 0;
  std::int64_t switches_step = 0;  // added at each reading (preemptions during the sample)
  std::int64_t now_ns() override {
    timespec ts;
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
  }
  int own = -1;  // this process's runnable threads (-1: unknown, the sampler alone assumed)
  int runnable() override { return run_queue; }
  int own_runnable() override { return own; }
  int cpus() override { return cpu_count; }
  std::int64_t involuntary_switches() override { return switches += switches_step; }
};

// The cache tests: a quiet machine, and the figures accepted whatever they
// are (the machine running the tests may be busy with other tests: the
// checks are tested on their own below).
fake_load g_quiet;
nmad::sample_options quiet() {
  nmad::sample_options o;
  o.load = &g_quiet;
  o.check = false;
  return o;
}

}  // namespace

TEST_CASE("sampling measures every network driver over a real loopback pair") {
  for (const auto& d : nmad::driver_registry()) {
    if (d.loopback) continue;
    CAPTURE(std::string(d.name));
    const nmad::driver_profile p = nmad::sample_driver(d, quick());
    CHECK(p.driver == d.name);
    CHECK(p.sampled_at > 1700000000);
    REQUIRE(p.points.size() == 3);
    CHECK(p.points[0].bytes == 8);
    CHECK(p.points[2].bytes == (1u << 20));
    CHECK_FALSE(p.points[0].bulk);   // small: a packet
    CHECK(p.points[2].bulk);         // beyond the largest packet: bulk data
    for (const auto& pt : p.points) {
      CHECK(pt.one_way_us > 0);
      CHECK(pt.bandwidth_mbps == doctest::Approx(static_cast<double>(pt.bytes) / pt.one_way_us));
    }
    CHECK(p.latency_us() == p.points[0].one_way_us);
    CHECK(p.bandwidth_mbps() >= p.points[2].bandwidth_mbps);
  }
}

TEST_CASE("the cache is written at first use, then reused as is") {
  cache_dir c;
  CHECK(nmad::profile_cache_path() == c.file.string());
  const auto first = nmad::profiles_for({"tcp"}, true, quiet());
  REQUIRE(first.size() == 1);
  REQUIRE(fs::exists(c.file));
  const std::string text = slurp(c.file);
  CHECK(text.find("key " + nmad::current_profile_key().text()) != std::string::npos);
  CHECK(text.find("driver tcp ") != std::string::npos);
  // Asking again (even allowed to sample) reuses the cached figures: a new
  // measurement would not give the very same numbers, nor leave the file alone.
  const auto again = nmad::profiles_for({"tcp"}, true, quiet());
  REQUIRE(again.size() == 1);
  CHECK(again[0].sampled_at == first[0].sampled_at);
  REQUIRE(again[0].points.size() == first[0].points.size());
  for (std::size_t i = 0; i < first[0].points.size(); ++i)
    CHECK(again[0].points[i].one_way_us == doctest::Approx(first[0].points[i].one_way_us).epsilon(1e-5));
  CHECK(slurp(c.file) == text);
  // Without permission to sample, a driver not in the cache stays unprofiled.
  CHECK(nmad::profiles_for({"shm"}, false).empty());
  // caps take the figures.
  nmad::driver_caps caps;
  caps.latency_us = 20;
  caps.bandwidth_mbps = 1000;
  nmad::apply_profile(caps, again[0]);
  CHECK(caps.latency_us == again[0].latency_us());
  CHECK(caps.bandwidth_mbps == again[0].bandwidth_mbps());
}

TEST_CASE("a cache written under another key (hardware or library changed) is stale and replaced") {
  cache_dir c;
  nmad::profile_key other = nmad::current_profile_key();
  nmad::driver_profile fake;
  fake.driver = "tcp";
  fake.sampled_at = 1;
  fake.points.push_back({8, 123.0, 8 / 123.0, false});
  for (int field = 0; field < 4; ++field) {
    nmad::profile_key k = nmad::current_profile_key();
    if (field == 0) k.cpu_model += " (other)";
    if (field == 1) k.cores += 1;
    if (field == 2) k.topology = "0000000000000000";
    if (field == 3) k.library = "build-other";
    CAPTURE(field);
    nmad::save_profiles(c.file.string(), k, {fake});
    std::string warning, note;
    CHECK(nmad::load_profiles(c.file.string(), nmad::current_profile_key(), &warning, &note).empty());
    CHECK(warning.empty());
    CHECK(note.find("stale") != std::string::npos);
    CHECK(nmad::load_profiles(c.file.string(), k, &warning).size() == 1);  // its own key: fine
    CHECK(nmad::profiles_for({"tcp"}, false).empty());
  }
  const auto fresh = nmad::profiles_for({"tcp"}, true, quiet());
  REQUIRE(fresh.size() == 1);
  CHECK(fresh[0].sampled_at > 1);
  std::string warning;
  const auto cached = nmad::load_profiles(c.file.string(), nmad::current_profile_key(), &warning);
  CHECK(warning.empty());
  CHECK(cached.size() == 1);
}

TEST_CASE("a corrupt cache file is ignored with a warning, never trusted in part") {
  cache_dir c;
  const std::string key = "key " + nmad::current_profile_key().text() + "\n";
  const std::string bad[] = {
      "garbage\n",
      "",
      "nmad-profiles 1\n",
      "nmad-profiles 1\n" + key + "driver tcp 1795690000\npoint 8 2.5 3.2 packet\n",         // no end
      "nmad-profiles 1\n" + key + "driver tcp 1795690000\npoint 8 -2.5 3.2 packet\nend\n",   // negative time
      "nmad-profiles 1\n" + key + "driver tcp 1795690000\npoint 8 2.5 3.2 teleport\nend\n",  // unknown path
      "nmad-profiles 1\n" + key + "driver tcp 1795690000\npoint 64 2.5 3.2 packet\npoint 8 2.5 3.2 packet\nend\n",
      "nmad-profiles 1\n" + key + "driver tcp 1795690000\npoint 8 2.5 3.2 packet extra\nend\n",
      "nmad-profiles 1\n" + key + "point 8 2.5 3.2 packet\nend\n",
      "nmad-profiles 1\n" + key + "driver tcp 1795690000\nend\n",
      "nmad-profiles 1\n" + key + "driver shm 1795690000\npoint 8 0.3 26 packet\nend\nwhat\n",
  };
  for (const std::string& text : bad) {
    CAPTURE(text);
    write(c.file, text);
    std::string warning;
    CHECK(nmad::load_profiles(c.file.string(), nmad::current_profile_key(), &warning).empty());
    if (!text.empty()) CHECK(warning.find(c.file.string() + ":") == 0);
    CHECK(nmad::profiles_for({"tcp", "shm"}, false).empty());
  }
  // A well-formed file of the same key reads back; sampling repairs a bad one.
  write(c.file, "nmad-profiles 1\n" + key + "driver shm 1795690000\npoint 8 0.3 26.6667 packet\nend\n");
  std::string warning;
  auto good = nmad::load_profiles(c.file.string(), nmad::current_profile_key(), &warning);
  CHECK(warning.empty());
  REQUIRE(good.size() == 1);
  CHECK(good[0].latency_us() == doctest::Approx(0.3));
  write(c.file, "garbage\n");
  REQUIRE(nmad::profiles_for({"shm"}, true, quiet()).size() == 1);
  CHECK(nmad::load_profiles(c.file.string(), nmad::current_profile_key(), &warning).size() == 1);
}

TEST_CASE("the key and the knobs") {
  const nmad::profile_key k = nmad::current_profile_key();
  CHECK(k.cores > 0);
  CHECK_FALSE(k.cpu_model.empty());
  CHECK_FALSE(k.library.empty());
  CHECK(k.text().find('\n') == std::string::npos);
  ::setenv("NMAD_PROFILE", "sometimes", 1);
  CHECK_THROWS_WITH(nmad::profile_mode_from_env(), doctest::Contains("NMAD_PROFILE=\"sometimes\""));
  ::setenv("NMAD_PROFILE", "off", 1);
  CHECK(nmad::profile_mode_from_env() == nmad::profile_mode::off);
  ::unsetenv("NMAD_PROFILE");
  CHECK(nmad::profile_mode_from_env() == nmad::profile_mode::automatic);
  ::unsetenv("NMAD_PROFILE_CACHE");
  ::setenv("XDG_CACHE_HOME", "/x/cache", 1);
  CHECK(nmad::profile_cache_path() == "/x/cache/nmad/profiles");
  ::unsetenv("XDG_CACHE_HOME");
  ::setenv("HOME", "/home/someone", 1);
  CHECK(nmad::profile_cache_path() == "/home/someone/.cache/nmad/profiles");
}

TEST_CASE("a sample taken while the machine is busy is recorded with its load, rejected and never cached") {
  cache_dir c;
  fake_load busy;
  busy.run_queue = 5;  // four other runnable threads on 2 CPUs
  nmad::sample_options o = quick();
  o.load = &busy;
  bool sampled = false;
  for (const auto& d : nmad::driver_registry())
    if (d.name == std::string_view("tcp")) {
      const nmad::driver_profile p = nmad::sample_driver(d, o);
      CHECK(p.load.others_runnable == 4);
      CHECK(p.load.cpus == 2);
      CHECK(p.load.busy());
      CHECK(p.rejected.find("busy") != std::string::npos);
      CHECK(p.rejected.find("4 other runnable threads on 2 CPUs") != std::string::npos);
      sampled = true;
    }
  CHECK(sampled);
  // A session asking for profiles gets none (its estimates stay) and
  // nothing is cached.
  nmad::sample_options so;
  so.load = &busy;
  CHECK(nmad::profiles_for({"tcp"}, true, so).empty());
  CHECK_FALSE(fs::exists(c.file));
  // Preempted often while sampling counts as busy too, whatever the queue said.
  fake_load preempted;
  preempted.switches_step = 1000000;  // 10^6 per reading: far more than 1,000 a second
  so.load = &preempted;
  CHECK(nmad::profiles_for({"tcp"}, true, so).empty());
  CHECK_FALSE(fs::exists(c.file));
  // Quiet again: sampled and cached, with the load it was taken under.
  REQUIRE(nmad::profiles_for({"tcp"}, true, quiet()).size() == 1);
  REQUIRE(fs::exists(c.file));
  CHECK(slurp(c.file).find("\nload 0 2 ") != std::string::npos);
  std::string warning;
  const auto back = nmad::load_profiles(c.file, nmad::current_profile_key(), &warning);
  CHECK(warning.empty());
  REQUIRE(back.size() == 1);
  CHECK(back[0].load.others_runnable == 0);
  CHECK(back[0].load.cpus == 2);
  CHECK_FALSE(back[0].load.busy());
}

TEST_CASE("this process's own runnable threads are not another job's load") {
  cache_dir c;
  fake_load mine;
  mine.run_queue = 3;  // three runnable threads on 2 CPUs, all of them this process's
  mine.own = 3;
  nmad::sample_options o = quick();
  o.load = &mine;
  for (const auto& d : nmad::driver_registry())
    if (d.name == std::string_view("tcp")) {
      const nmad::driver_profile p = nmad::sample_driver(d, o);
      CHECK(p.load.others_runnable == 0);
      CHECK_FALSE(p.load.busy());
    }
  // One more thread than this process's: another job's, counted.
  mine.run_queue = 4;
  for (const auto& d : nmad::driver_registry())
    if (d.name == std::string_view("tcp")) {
      const nmad::driver_profile p = nmad::sample_driver(d, o);
      CHECK(p.load.others_runnable == 1);
      CHECK(p.load.busy());
    }
}

TEST_CASE("a sample under a real artificial load (busy processes beyond the CPUs) is rejected") {
  cache_dir c;
  const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  // Other processes, as another job on the machine would be (this
  // process's own threads are not counted as load).
  std::vector<pid_t> hogs;
  for (long i = 0; i < cpus + 1; ++i) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::alarm(120);  // never outlives a test run gone wrong
      for (volatile unsigned long n = 0;; n = n + 1) {
      }
    }
    hogs.push_back(pid);
  }
  // Let them all be running before the sampler looks.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  nmad::driver_profile p;
  for (const auto& d : nmad::driver_registry())
    if (d.name == std::string_view("tcp")) p = nmad::sample_driver(d, quick());
  const auto sessions = nmad::profiles_for({"tcp"}, true);
  for (pid_t pid : hogs) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  CAPTURE(p.load.text());
  CHECK(p.load.others_runnable >= cpus);
  CHECK(p.load.busy());
  CHECK_FALSE(p.rejected.empty());
  CHECK(sessions.empty());
  CHECK_FALSE(fs::exists(c.file));
}

TEST_CASE("check_profile: times must grow with size and stay near the driver's own estimate") {
  nmad::driver_caps est;
  est.latency_us = 0.3;
  est.bandwidth_mbps = 8000;
  nmad::driver_profile p;
  p.load.others_runnable = 0;
  p.load.cpus = 2;
  p.load.preemptions_per_s = 0;
  auto pt = [](std::size_t b, double us) {
    nmad::profile_point x;
    x.bytes = b;
    x.one_way_us = us;
    x.bandwidth_mbps = static_cast<double>(b) / us;
    return x;
  };
  p.points = {pt(8, 0.5), pt(1024, 0.8), pt(1 << 20, 150)};
  CHECK(nmad::check_profile(p, est).empty());
  // Non-monotonic: 1 KiB took less than half of 8 B (the 8-byte round trips
  // were preempted).
  p.points = {pt(8, 128), pt(1024, 0.9), pt(1 << 20, 150)};
  CHECK(nmad::check_profile(p, est).find("not monotonic") != std::string::npos);
  // Far from the estimate: a 128 us shm latency.
  p.points = {pt(8, 128), pt(1024, 130), pt(1 << 20, 600)};
  CHECK(nmad::check_profile(p, est).find("25 times the driver's estimate") != std::string::npos);
  // A bandwidth far under the estimate.
  p.points = {pt(8, 0.5), pt(1024, 5), pt(1 << 20, 20000)};
  CHECK(nmad::check_profile(p, est).find("bandwidth") != std::string::npos);
  // Busy beats everything else.
  p.load.others_runnable = 3;
  CHECK(nmad::check_profile(p, est).find("busy") != std::string::npos);
  p.load.others_runnable = 0;
  p.load.preemptions_per_s = 2000;
  CHECK(nmad::check_profile(p, est).find("busy") != std::string::npos);
  p.load.preemptions_per_s = 190;  // an idle virtual machine's timer and host noise
  CHECK(nmad::check_profile(p, est).find("busy") == std::string::npos);
  // Unknown load (no /proc): judged by the figures alone.
  p.load = {};
  p.points = {pt(8, 0.5), pt(1024, 0.8), pt(1 << 20, 150)};
  CHECK(nmad::check_profile(p, est).empty());
}
