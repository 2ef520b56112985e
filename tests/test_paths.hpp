#pragma once
// Small helpers for tests that start programs (nmad-run, workers).
//
//   nmad_test::runfile("tools/nmad-run")   absolute path of a Bazel runfile
//                                          (a `data` dep of the test), path
//                                          relative to the workspace root.
//   nmad_test::run({prog, args...}, opts)  runs a program with a time limit,
//                                          capturing stdout/stderr.
//   nmad_test::contains / count / slurp    text checks on what it printed,
//                                          and a whole file as a string.
//
// runfile() looks in $RUNFILES_DIR/nmad/, $TEST_SRCDIR/nmad/ (set by
// `bazel test`), then <this executable>.runfiles/nmad/ (running the test
// binary by hand from bazel-bin/). The workspace name is "nmad".
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

extern char** environ;

namespace nmad_test {

inline bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }
// Occurrences of needle in hay (overlapping ones too).
inline int count(const std::string& hay, const std::string& needle) {
  int n = 0;
  for (auto p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}
// The whole file (empty if it cannot be read).
inline std::string slurp(const std::filesystem::path& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

inline std::string runfile(const std::string& rel) {
  namespace fs = std::filesystem;
  std::vector<std::string> roots;
  for (const char* var : {"RUNFILES_DIR", "TEST_SRCDIR"})
    if (const char* v = std::getenv(var); v && *v) roots.emplace_back(v);
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) roots.push_back(exe.string() + ".runfiles");
  std::string searched;
  for (const auto& root : roots) {
    fs::path p = fs::path(root) / "nmad" / rel;
    if (fs::exists(p, ec)) return fs::absolute(p, ec).string();
    searched += " " + p.string();
  }
  throw std::runtime_error("runfile '" + rel + "' not found (looked at" + searched +
                           "); is it in the test's data?");
}

struct run_options {
  double timeout_s = 60;                                  // then the process group is SIGKILLed
  std::vector<std::pair<std::string, std::string>> env;   // set (over this process's environment)
  std::vector<std::string> unset_env;                     // remove
  bool search_path = false;                               // argv[0] searched in PATH (execvp)

  // Chainable: run_options().timeout(30).set("A", "1").unset("B")
  run_options& timeout(double s) { timeout_s = s; return *this; }
  run_options& set(std::string name, std::string value) {
    env.emplace_back(std::move(name), std::move(value));
    return *this;
  }
  run_options& unset(std::string name) { unset_env.push_back(std::move(name)); return *this; }
};

struct run_result {
  int status = -1;         // exit code, or 128+signal; -1 when it timed out
  bool timed_out = false;  // killed after timeout_s (or it left its output open)
  std::string out, err;
  double seconds = 0;
};

// Runs argv in its own process group; waits for it to exit and for its
// stdout/stderr to close (so a leftover grandchild holding them shows up as
// a timeout). Single-threaded callers only (uses fork).
inline run_result run(const std::vector<std::string>& argv, const run_options& o = {}) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const auto deadline = start + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(o.timeout_s));
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string s = *e;
    std::string name = s.substr(0, s.find('='));
    bool drop = false;
    for (const auto& u : o.unset_env) drop |= (u == name);
    for (const auto& kv : o.env) drop |= (kv.first == name);
    if (!drop) env.push_back(s);
  }
  for (const auto& kv : o.env) env.push_back(kv.first + "=" + kv.second);
  std::vector<char*> cargv, cenv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (auto& e : env) cenv.push_back(e.data());
  cenv.push_back(nullptr);

  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) || ::pipe2(err_pipe, O_CLOEXEC)) throw std::runtime_error("pipe failed");
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(out_pipe[1], 1);
    ::dup2(err_pipe[1], 2);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    if (o.search_path) ::execvpe(cargv[0], cargv.data(), cenv.data());
    else ::execve(cargv[0], cargv.data(), cenv.data());
    const char msg[] = "nmad_test::run: exec failed\n";
    ssize_t w = ::write(2, msg, sizeof msg - 1);
    (void)w;
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  run_result res;
  int fds[2] = {out_pipe[0], err_pipe[0]};
  std::string* bufs[2] = {&res.out, &res.err};
  bool exited = false;
  int wstatus = 0;
  for (;;) {
    if (!exited) {
      pid_t p = ::waitpid(pid, &wstatus, WNOHANG);
      if (p == pid) exited = true;
    }
    if (exited && fds[0] < 0 && fds[1] < 0) break;
    auto now = clock::now();
    if (now >= deadline) {
      res.timed_out = true;
      ::kill(-pid, SIGKILL);
      ::kill(pid, SIGKILL);
      if (!exited) ::waitpid(pid, &wstatus, 0);
      exited = true;
      break;
    }
    pollfd p[2];
    int n = 0;
    for (int i = 0; i < 2; ++i)
      if (fds[i] >= 0) p[n++] = pollfd{fds[i], POLLIN, 0};
    // Pipes open: wait on them; both closed: the child is about to be
    // reaped, check again shortly.
    int ms = n ? 50 : 5;
    if (n) ::poll(p, n, ms);
    else std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    for (int i = 0; i < 2; ++i) {
      if (fds[i] < 0) continue;
      char buf[4096];
      pollfd q{fds[i], POLLIN, 0};
      while (::poll(&q, 1, 0) > 0) {
        ssize_t r = ::read(fds[i], buf, sizeof buf);
        if (r > 0) {
          bufs[i]->append(buf, static_cast<std::size_t>(r));
          continue;
        }
        if (r < 0 && errno == EINTR) continue;
        ::close(fds[i]);
        fds[i] = -1;
        break;
      }
    }
  }
  for (int fd : fds)
    if (fd >= 0) ::close(fd);
  res.seconds = std::chrono::duration<double>(clock::now() - start).count();
  if (res.timed_out) res.status = -1;
  else if (WIFEXITED(wstatus)) res.status = WEXITSTATUS(wstatus);
  else if (WIFSIGNALED(wstatus)) res.status = 128 + WTERMSIG(wstatus);
  return res;
}

}  // namespace nmad_test
