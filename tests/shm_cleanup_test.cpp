// The shm driver leaves nothing in /dev/shm and unlinks only its own job's
// names:
//  * in one process: a doorbell slot naming a segment of another job (or
//    any other file) never gets it unlinked, while a malformed
//    segment of this job is refused and removed; wireup_complete() unlinks
//    the doorbell and the wake-up socket at once;
//  * with real processes under nmad-run: after set-up no rank holds a name
//    in /dev/shm, and nothing of the job remains when a rank is killed with
//    SIGKILL, nor when the launcher itself is (its ranks die with it);
//  * names left by processes killed during wire-up (launcher and ranks
//    gone, nobody to clean up) are removed by the next job of the same user
//    on the host, and only those whose owners are provably dead: a live
//    process's names stay, whatever their age.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
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
#include "tests/workers/shm_hold_report.hpp"

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

using nmad_test::held_lines;  // the ranks' pids; every rank must report 0 names held

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

namespace {

// /dev/shm names that carry `pid` (as nmad-<tag>-<what>-<pid>-...).
std::vector<std::string> names_of(int pid) { return left_behind({pid}); }

bool has_kind(const std::vector<std::string>& names, const std::string& what) {
  for (const auto& n : names)
    if (n.find("-" + what + "-") != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("nmad-run killed with SIGKILL during wire-up: the next job removes what its ranks left in /dev/shm") {
  const std::string run = nmad_test::runfile("tools/nmad-run");
  const std::string worker = nmad_test::runfile("tests/workers/shm_hold_worker");
  const char* base = std::getenv("TEST_TMPDIR");
  std::string dir_tmpl = std::string(base && *base ? base : "/tmp") + "/nmad_shm_cleanup.XXXXXX";
  REQUIRE(::mkdtemp(dir_tmpl.data()) != nullptr);
  const std::string dir = dir_tmpl;
  // Rank 1 starts 30 s late: rank 0 waits in wire-up, its doorbell and
  // wake-up socket in /dev/shm.
  const pid_t launcher = ::fork();
  REQUIRE(launcher >= 0);
  if (launcher == 0) {
    ::setenv("NMAD_DRIVER", "shm", 1);
    const int devnull = ::open("/dev/null", O_WRONLY);
    ::dup2(devnull, 1);
    ::dup2(devnull, 2);
    ::execl(run.c_str(), run.c_str(), "-n", "2", "--timeout", "60", "/bin/sh", "-c",
            "echo $$ > \"$1/pid.$PMI_RANK\"; [ \"$PMI_RANK\" = 1 ] && sleep 30; exec \"$0\" hold", worker.c_str(),
            dir.c_str(), nullptr);
    ::_exit(127);
  }
  int rank0 = 0;
  std::vector<std::string> names;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < deadline) {
    if (rank0 == 0) std::ifstream(dir + "/pid.0") >> rank0;
    if (rank0 > 0) names = names_of(rank0);
    if (has_kind(names, "db") && has_kind(names, "wake")) break;
    std::this_thread::sleep_for(10ms);
  }
  REQUIRE(rank0 > 0);
  REQUIRE(has_kind(names, "db"));
  REQUIRE(has_kind(names, "wake"));
  CHECK(::kill(launcher, SIGKILL) == 0);
  ::waitpid(launcher, nullptr, 0);
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (!gone(rank0) && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(10ms);
  REQUIRE(gone(rank0));
  // Nobody was left to clean up.
  const auto left = names_of(rank0);
  CHECK(has_kind(left, "db"));
  CHECK(has_kind(left, "wake"));
  // The next job of this user on this host takes them away.
  auto r = nmad_test::run({run, "-n", "2", "--timeout", "60", worker, "quick"},
                          nmad_test::run_options().timeout(90).set("NMAD_DRIVER", "shm"));
  INFO("next job stdout:\n" << r.out << "\nstderr:\n" << r.err);
  CHECK(r.status == 0);
  const auto after = names_of(rank0);
  for (const auto& n : after) MESSAGE("still in /dev/shm: " << n);
  CHECK(after.empty());
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

namespace {

// The doorbell's magic as drivers/shm/shm_internal.hpp has it ("NMADSM03":
// its creator holds a flock on it), and the one before ("NMADSM02").
constexpr std::uint64_t kMagic = 0x33304d5344414d4eULL;
constexpr std::uint64_t kOldMagic = 0x32304d5344414d4eULL;

void make_file(const std::string& name, std::uint64_t magic) {  // name: "/..."
  int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  REQUIRE(fd >= 0);
  REQUIRE(::ftruncate(fd, 4096) == 0);
  if (magic) REQUIRE(::pwrite(fd, &magic, sizeof magic, 0) == static_cast<ssize_t>(sizeof magic));
  ::close(fd);
}

// A Unix datagram socket bound at /dev/shm<name>; closed unless keep.
int bind_socket(const std::string& name, bool keep) {
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::snprintf(sa.sun_path, sizeof sa.sun_path, "/dev/shm%s", name.c_str());
  int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
  if (keep) return fd;
  ::close(fd);
  return -1;
}

}  // namespace

TEST_CASE("opening the shm driver removes the names of processes provably gone, and only those") {
  char tag[16];
  std::snprintf(tag, sizeof tag, "%08x", static_cast<unsigned>(::getpid()) * 2654435761u);
  const std::string p = std::string("/nmad-") + tag + "-";
  const std::string dead_db = p + "db-1-0-dead", dead_pair = p + "pair-1-1-dead", newborn = p + "db-1-2-newborn",
                    old_db = p + "db-1-3-oldversion", held = p + "db-1-4-held", dead_wake = p + "wake-1-5-dead",
                    live_wake = p + "wake-1-6-live", foreign = p + "db-1-7-foreign", other = "/nmad-notatag-db-1-8",
                    dead_coll = p + "coll-1-9-dead";  // the MPI layer's collective segment
  struct unlink_all {  // whatever the outcome
    std::vector<std::string> names;
    ~unlink_all() {
      for (const auto& n : names) {
        ::shm_unlink(n.c_str());
        ::unlink(("/dev/shm" + n).c_str());
      }
    }
  } cleanup{{dead_db, dead_pair, newborn, old_db, held, dead_wake, live_wake, foreign, other, dead_coll}};
  make_file(dead_db, kMagic);      // its creator's lock is gone
  make_file(dead_coll, kMagic);
  make_file(dead_pair, kMagic);
  make_file(newborn, 0);           // no magic yet: its creator may be about to lock it
  make_file(old_db, kOldMagic);    // a version without the lock: nothing proves it dead
  make_file(other, kMagic);        // not an nmad name
  make_file(foreign, kMagic);  // another user's, where this process may give it away (root, not in a sandbox)
  const bool foreign_owned = ::chown(("/dev/shm" + foreign).c_str(), 65534, 65534) == 0;
  // A live creator: a child holding the shared lock.
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t holder = ::fork();
  REQUIRE(holder >= 0);
  if (holder == 0) {
    int fd = ::shm_open(held.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 || ::flock(fd, LOCK_SH) != 0 || ::ftruncate(fd, 4096) != 0 ||
        ::pwrite(fd, &kMagic, sizeof kMagic, 0) != static_cast<ssize_t>(sizeof kMagic))
      ::_exit(1);
    (void)!::write(ready[1], "x", 1);
    ::pause();
    ::_exit(0);
  }
  char c;
  REQUIRE(::read(ready[0], &c, 1) == 1);
  bind_socket(dead_wake, false);
  const int live_fd = bind_socket(live_wake, true);
  // This process's own driver: live names.
  quiet_events ev1, ev2;
  auto mine = open_shm("sweep-test-key-" + std::to_string(::getpid()), ev1);
  const std::string my_db = doorbell_name(*mine);

  auto next = open_shm("sweep-test-key2-" + std::to_string(::getpid()), ev2);  // sweeps
  CHECK_FALSE(shm_exists(dead_db));
  CHECK_FALSE(shm_exists(dead_pair));
  CHECK_FALSE(shm_exists(dead_wake));
  CHECK_FALSE(shm_exists(dead_coll));
  CHECK(shm_exists(newborn));
  CHECK(shm_exists(old_db));
  CHECK(shm_exists(held));
  CHECK(shm_exists(live_wake));
  CHECK(shm_exists(other));
  CHECK(shm_exists(my_db));
  if (foreign_owned) CHECK(shm_exists(foreign));

  // Once the holder is killed, its segment goes at the next open.
  ::kill(holder, SIGKILL);
  ::waitpid(holder, nullptr, 0);
  ::close(live_fd);
  quiet_events ev3;
  auto third = open_shm("sweep-test-key3-" + std::to_string(::getpid()), ev3);
  CHECK_FALSE(shm_exists(held));
  CHECK_FALSE(shm_exists(live_wake));
  CHECK(shm_exists(my_db));

  ::close(ready[0]);
  ::close(ready[1]);
}
