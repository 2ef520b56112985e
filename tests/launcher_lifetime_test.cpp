// Nothing a job started outlives it: ranks behind a wrapper (`sh -c
// 'prog; echo'`) and what they start in the background end with the job,
// whether it ends by --timeout, by a failure elsewhere, by SIGTERM, SIGINT
// or SIGHUP to nmad-run, normally with processes left behind, or because
// nmad-run itself was killed with SIGKILL (then the ranks notice within
// seconds, without being nmad-run's children).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/test_paths.hpp"

namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

using nmad_test::slurp;

struct temp_dir {
  std::string path;
  temp_dir() {
    const char* base = std::getenv("TEST_TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/nmad_lifetime_test.XXXXXX";
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
    fs::create_directory(path + "/pids");
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

bool alive(pid_t pid) {
  if (::kill(pid, 0) != 0) return errno != ESRCH;
  std::ifstream st("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(st, line);
  const auto close = line.rfind(')');
  return !(close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z');
}

// The pids the job's processes wrote into DIR/pids (one file each).
std::vector<std::pair<std::string, pid_t>> recorded(const temp_dir& d) {
  std::vector<std::pair<std::string, pid_t>> out;
  for (const auto& e : fs::directory_iterator(d.path + "/pids")) {
    if (e.path().extension() == ".tmp") continue;  // being written (see pmi_worker)
    std::ifstream f(e.path());
    pid_t pid = 0;
    if (f >> pid && pid > 0) out.emplace_back(e.path().filename().string(), pid);
  }
  return out;
}

// Waits until `n` pid files are there (at most 30 s).
bool wait_recorded(const temp_dir& d, std::size_t n) {
  for (int i = 0; i < 3000; ++i) {
    if (recorded(d).size() >= n) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

// Every recorded process is gone within `limit`.
void check_all_gone(const temp_dir& d, std::size_t expected, std::chrono::milliseconds limit) {
  const auto procs = recorded(d);
  CHECK(procs.size() == expected);
  const auto until = std::chrono::steady_clock::now() + limit;
  for (const auto& [name, pid] : procs) {
    while (alive(pid) && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(10ms);
    CHECK_MESSAGE(!alive(pid), name << " (pid " << pid << ") outlived the job");
    if (alive(pid)) ::kill(pid, SIGKILL);  // ours: started by this test's job
  }
}

// The rank: a shell that starts a `sleep` in the background and the PMI
// worker in the foreground (an nmad rank behind a wrapper), recording
// their pids; the worker writes its own (WORKER_PID_DIR).
std::vector<std::string> wrapped_rank(const temp_dir& d, const std::string& scenario, const std::string& arg) {
  return {"/bin/sh", "-c",
          "sleep 60 & echo $! > \"$1/pids/sleep.$PMI_RANK\"; \"$0\" " + scenario + " " + arg + "; echo after",
          nmad_test::runfile("tests/pmi_worker"), d.path};
}

std::vector<std::string> job_argv(std::vector<std::string> options, const std::vector<std::string>& rank) {
  options.insert(options.begin(), nmad_test::runfile("tools/nmad-run"));
  options.insert(options.end(), rank.begin(), rank.end());
  return options;
}

// Starts argv (stdout/stderr to files of `dir`, WORKER_PID_DIR set).
pid_t spawn(const std::vector<std::string>& argv, const temp_dir& d) {
  const pid_t p = ::fork();
  REQUIRE(p >= 0);
  if (p != 0) return p;
  ::setpgid(0, 0);
  const int out = ::open((d.path + "/out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  const int err = ::open((d.path + "/err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ::dup2(out, 1);
  ::dup2(err, 2);
  const int devnull = ::open("/dev/null", O_RDONLY);
  ::dup2(devnull, 0);
  ::setenv("WORKER_PID_DIR", (d.path + "/pids").c_str(), 1);
  std::vector<char*> a;
  for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  ::execv(a[0], a.data());
  ::_exit(127);
}

int wait_exit(pid_t pid, std::chrono::seconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  int st = 0;
  while (::waitpid(pid, &st, WNOHANG) != pid) {
    if (std::chrono::steady_clock::now() > until) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &st, 0);
      return -1;
    }
    std::this_thread::sleep_for(10ms);
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

}  // namespace

TEST_CASE("--timeout ends what wrapped ranks started, not only the wrappers") {
  temp_dir d;
  const pid_t launcher = spawn(job_argv({"-n", "2", "--timeout", "1.5"}, wrapped_rank(d, "sleep", "60")), d);
  REQUIRE(wait_recorded(d, 4));  // per rank: the sleep and the worker
  const int status = wait_exit(launcher, 30s);
  INFO("stderr:\n" << slurp(d.path + "/err"));
  CHECK(status == 124);
  // nmad-run returns once its children are gone; what they started is gone
  // by then too (a little slack for the kernel to finish their exit).
  check_all_gone(d, 4, 2000ms);
  CHECK(slurp(d.path + "/out").find("after") == std::string::npos);
}

TEST_CASE("a failure elsewhere ends a wrapped rank's processes") {
  temp_dir d;
  // Rank 1 (a plain shell) exits 3 after 0.5 s; rank 0 is a wrapped worker.
  // Both leave a `sleep` in the background.
  const std::vector<std::string> rank = {
      "/bin/sh", "-c",
      "sleep 60 & echo $! > \"$1/pids/sleep.$PMI_RANK\"; if [ \"$PMI_RANK\" = 1 ]; then sleep 0.5; exit 3; fi; "
      "\"$0\" sleep 60",
      nmad_test::runfile("tests/pmi_worker"), d.path};
  const pid_t launcher = spawn(job_argv({"-n", "2", "--timeout", "30", "--kill-grace", "0.3"}, rank), d);
  const int status = wait_exit(launcher, 30s);
  INFO("stderr:\n" << slurp(d.path + "/err"));
  CHECK(status == 3);
  check_all_gone(d, 3, 2000ms);  // two sleeps, rank 0's worker
}

TEST_CASE("SIGTERM, SIGINT or SIGHUP to nmad-run ends wrapped ranks and what they started") {
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) {
    CAPTURE(sig);
    temp_dir d;
    const pid_t launcher = spawn(job_argv({"-n", "2", "--timeout", "60"}, wrapped_rank(d, "sleep", "60")), d);
    REQUIRE(wait_recorded(d, 4));
    ::kill(launcher, sig);
    const int status = wait_exit(launcher, 30s);
    INFO("stderr:\n" << slurp(d.path + "/err"));
    CHECK(status == 128 + sig);
    check_all_gone(d, 4, 2000ms);
  }
}

TEST_CASE("a job that ends normally ends what its ranks left running, and says so") {
  temp_dir d;
  const std::vector<std::string> rank = {"/bin/sh", "-c", "sleep 60 & echo $! > \"$0/pids/sleep.$PMI_RANK\"; exit 0",
                                         d.path};
  const pid_t launcher = spawn(job_argv({"-n", "2", "--timeout", "30"}, rank), d);
  const int status = wait_exit(launcher, 30s);
  const std::string err = slurp(d.path + "/err");
  INFO("stderr:\n" << err);
  CHECK(status == 0);  // the job's own outcome
  CHECK(err.find("nmad-run: processes started by rank(s) 0 1 outlived them; ending them") != std::string::npos);
  check_all_gone(d, 2, 500ms);
}

TEST_CASE("nmad-run killed with SIGKILL: wrapped ranks notice within seconds and end with what they started") {
  temp_dir d;
  const pid_t launcher = spawn(job_argv({"-n", "2", "--timeout", "60"}, wrapped_rank(d, "sleep", "60")), d);
  REQUIRE(wait_recorded(d, 4));
  std::this_thread::sleep_for(300ms);  // the workers are past their PMI start-up
  ::kill(launcher, SIGKILL);
  CHECK(wait_exit(launcher, 10s) == 128 + SIGKILL);
  const auto t0 = std::chrono::steady_clock::now();
  check_all_gone(d, 4, 5000ms);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(s < 5);
  const std::string err = slurp(d.path + "/err");
  INFO("stderr:\n" << err);
  CHECK(err.find(") is gone: ending this rank and what it started (its process group)") != std::string::npos);
}
