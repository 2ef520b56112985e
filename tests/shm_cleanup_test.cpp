// The shm driver leaves nothing in /dev/shm and unlinks only its own job's
// names:
//  * in one process: a doorbell slot naming a segment of another job (or
//    any other file) never gets it unlinked, while a malformed
//    segment of this job is refused and removed; wireup_complete() unlinks
//    the doorbell and the wake-up socket at once;
//  * with real processes under nmad-run: after set-up no rank holds a name
//    in /dev/shm, and nothing of the job remains when a rank is killed with
//    SIGKILL, nor when the launcher itself is (its ranks die with it).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/transfer/driver.hpp"
#include "drivers/builtin.hpp"
#include "drivers/shm/shm_names.hpp"
#include "tests/test_paths.hpp"

namespace {

using namespace std::chrono_literals;

const bool kRegistered = (nmad::register_builtin_drivers(), true);

struct quiet_events final : nmad::driver_events {
  int connected = 0;
  void on_connected(nmad::connection_id, int) override { ++connected; }
  void on_packet(nmad::connection_id, std::span<const std::byte>) override {}
  void on_send_done(void*) override {}
  void on_recv_data_done(void*, std::size_t) override {}
  void on_connection_failed(nmad::connection_id, std::string_view) override {}
};

// The doorbell's layout as drivers/shm/shm_internal.hpp declares it (the
// same declarations give the same layout); the control case below fails if
// they ever differ.
struct slot_mirror {
  std::atomic<std::uint32_t> state;
  char name[60];
};
struct doorbell_mirror {
  std::uint64_t magic;
  std::int32_t rank;
  std::int32_t pid;
  char wake_name[60];
  alignas(64) std::atomic<std::uint32_t> pending;
  alignas(64) std::atomic<std::uint32_t> sleeping;
  slot_mirror slots[64];
};

bool shm_exists(const std::string& name) {  // name: "/..."
  struct stat st{};
  return ::stat(("/dev/shm" + name).c_str(), &st) == 0;
}

void make_segment(const std::string& name, std::size_t len) {
  int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  REQUIRE(fd >= 0);
  REQUIRE(::ftruncate(fd, static_cast<off_t>(len)) == 0);
  ::close(fd);
}

std::unique_ptr<nmad::driver> open_shm(const std::string& key, quiet_events& ev) {
  const nmad::driver_descriptor* d = nmad::find_driver("shm");
  REQUIRE(d != nullptr);
  auto drv = d->create();
  nmad::driver_config cfg;
  cfg.rank = 0;
  cfg.size = 2;
  cfg.job_key = key;
  cfg.events = &ev;
  drv->open(cfg);
  return drv;
}

std::string doorbell_name(const nmad::driver& drv) {
  const std::string a = drv.local_address();
  return a.substr(a.rfind(':') + 1);
}

}  // namespace

TEST_CASE("a doorbell slot naming a segment that is not this job's: never unlinked") {
  const std::string key = "cleanup-test-key-" + std::to_string(::getpid());
  quiet_events ev;
  auto drv = open_shm(key, ev);
  const std::string db = doorbell_name(*drv);
  REQUIRE(shm_exists(db));
  const std::string stranger = "/nmad-other-job-pair-" + std::to_string(::getpid()) + "-0-victim";
  const std::string junk = "/" + nmad::shm::segment_prefix(key) + "pair-" + std::to_string(::getpid()) + "-9-junk";
  const std::string other = "/victim-" + std::to_string(::getpid());  // not nmad's at all
  make_segment(stranger, 1 << 20);
  make_segment(other, 1 << 20);
  make_segment(junk, 1 << 20);  // this job's name, but no nmad header in it
  int fd = ::shm_open(db.c_str(), O_RDWR, 0);
  REQUIRE(fd >= 0);
  void* p = ::mmap(nullptr, sizeof(doorbell_mirror), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  REQUIRE(p != MAP_FAILED);
  auto* bell = static_cast<doorbell_mirror*>(p);
  int slot = 0;
  for (const std::string* name : {&stranger, &other, &junk}) {
    std::snprintf(bell->slots[slot].name, sizeof bell->slots[slot].name, "%s", name->c_str());
    bell->slots[slot].state.store(2);
    bell->pending.fetch_add(1);
    ++slot;
  }
  for (int i = 0; i < 100 && bell->pending.load() != 0; ++i) drv->poll();
  CHECK(bell->pending.load() == 0);       // every slot was served
  CHECK(shm_exists(stranger));            // ... another job's name left in place
  CHECK(shm_exists(other));               // ... a name of nobody's job too
  CHECK_FALSE(shm_exists(junk));          // ... this job's bad segment refused and removed
  CHECK(ev.connected == 0);
  ::munmap(p, sizeof(doorbell_mirror));
  ::shm_unlink(stranger.c_str());
  ::shm_unlink(other.c_str());
  ::shm_unlink(junk.c_str());
}

TEST_CASE("wireup_complete unlinks the doorbell and the wake-up socket; the driver keeps working") {
  const std::string key = "cleanup-test-key2-" + std::to_string(::getpid());
  quiet_events ev;
  auto drv = open_shm(key, ev);
  const std::string db = doorbell_name(*drv);
  const std::string prefix = nmad::shm::segment_prefix(key);
  auto count_job = [&] {
    int n = 0;
    for (const auto& e : std::filesystem::directory_iterator("/dev/shm"))
      n += e.path().filename().string().rfind(prefix, 0) == 0;
    return n;
  };
  CHECK(shm_exists(db));
  CHECK(count_job() >= 1);
  drv->wireup_complete();
  CHECK_FALSE(shm_exists(db));
  CHECK(count_job() == 0);
  CHECK(drv->poll() >= 0);
  drv.reset();
  CHECK(count_job() == 0);
}

namespace {

// Ranks' pids from the worker's "held <n> pid <pid> rank <r>" lines; every
// rank must report 0 names held.
std::vector<int> held_lines(const std::string& out, int* held_total) {
  std::vector<int> pids;
  std::istringstream in(out);
  std::string line;
  *held_total = 0;
  while (std::getline(in, line)) {
    const auto at = line.find("held ");
    if (at == std::string::npos) continue;
    int held = -1, pid = -1, rank = -1;
    if (std::sscanf(line.c_str() + at, "held %d pid %d rank %d", &held, &pid, &rank) == 3) {
      pids.push_back(pid);
      *held_total += held;
    }
  }
  return pids;
}

std::vector<std::string> left_behind(const std::vector<int>& pids) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm")) {
    const std::string name = e.path().filename().string();
    if (name.rfind("nmad-", 0) != 0) continue;
    for (int pid : pids)
      if (name.find("-" + std::to_string(pid) + "-") != std::string::npos) out.push_back(name);
  }
  return out;
}

bool gone(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s;
  if (!std::getline(f, s)) return true;
  const auto close = s.rfind(')');
  return close != std::string::npos && close + 2 < s.size() && s[close + 2] == 'Z';
}

}  // namespace

TEST_CASE("a rank killed with SIGKILL: nothing of the job stays in /dev/shm") {
  auto r = nmad_test::run({nmad_test::runfile("tools/nmad-run"), "-n", "3", "--timeout", "60",
                           nmad_test::runfile("tests/workers/shm_hold_worker"), "die"},
                          nmad_test::run_options().timeout(90).set("NMAD_DRIVER", "shm"));
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  CHECK(r.status != 0);
  int held = -1;
  const auto pids = held_lines(r.out, &held);
  CHECK(pids.size() == 3);
  CHECK(held == 0);
  CHECK(left_behind(pids).empty());
}

TEST_CASE("the launcher killed with SIGKILL mid-run: its ranks die and leave nothing in /dev/shm") {
  int out[2];
  REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
  const std::string run = nmad_test::runfile("tools/nmad-run");
  const std::string worker = nmad_test::runfile("tests/workers/shm_hold_worker");
  const pid_t launcher = ::fork();
  REQUIRE(launcher >= 0);
  if (launcher == 0) {
    ::dup2(out[1], 1);
    ::setenv("NMAD_DRIVER", "shm", 1);
    ::execl(run.c_str(), run.c_str(), "-n", "3", "--timeout", "120", worker.c_str(), "hold", nullptr);
    ::_exit(127);
  }
  ::close(out[1]);
  std::string text;
  std::vector<int> pids;
  int held = -1;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  char buf[4096];
  while (pids.size() < 3 && std::chrono::steady_clock::now() < deadline) {
    pollfd p{out[0], POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    const ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n <= 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    pids = held_lines(text, &held);
  }
  INFO("launcher output:\n" << text);
  REQUIRE(pids.size() == 3);
  CHECK(held == 0);
  CHECK(::kill(launcher, SIGKILL) == 0);
  int st = 0;
  ::waitpid(launcher, &st, 0);
  ::close(out[0]);
  const auto until = std::chrono::steady_clock::now() + 20s;
  for (int pid : pids)
    while (!gone(pid) && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(20ms);
  for (int pid : pids) CHECK_MESSAGE(gone(pid), "rank pid " << pid << " outlived its launcher");
  const auto left = left_behind(pids);
  for (const auto& name : left) MESSAGE("left behind: /dev/shm/" << name);
  CHECK(left.empty());
}
