// The launcher watchdog (see launcher_watch.hpp).
#include "core/bootstrap/launcher_watch.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "core/common/proc_stat.hpp"
#include "api/nmad/services/config.hpp"
#include "api/nmad/services/log.hpp"

namespace nmad::bootstrap_detail {
namespace {

std::atomic<bool> g_started{false};

int open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  errno = ENOSYS;
  return -1;
#endif
}

void end_this(pid_t launcher, bool whole_group) {
  log_write(log_level::error, "bootstrap",
            "nmad-run (pid " + std::to_string(launcher) + ") is gone: ending this " +
                (whole_group ? "rank and what it started (its process group)" : "process") +
                ": SIGTERM, SIGKILL in 2 s");
  log_flush(1000);
  const pid_t target = whole_group ? 0 : ::getpid();
  ::kill(target, SIGTERM);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  ::kill(target, SIGKILL);
}

}  // namespace

void watch_launcher() {
  const std::string text = config::text("NMAD_RUN_PID");
  if (text.empty() || g_started.exchange(true)) return;
  const char* v = text.c_str();
  // "<pid>:<start time>"
  char* end = nullptr;
  errno = 0;
  const long pid = std::strtol(v, &end, 10);
  if (errno || end == v || *end != ':' || pid <= 1 || pid > (1L << 30)) {
    log_write(log_level::warn, "bootstrap", std::string("NMAD_RUN_PID='") + v + "' is not PID:START; not watching the launcher");
    return;
  }
  const std::string start = end + 1;
  // The pidfd first, then the check that it is the launcher's: a pid
  // reused in between would show another start time.
  const int pidfd = open_pidfd(static_cast<pid_t>(pid));
  if (start.empty() || process_start_time(static_cast<pid_t>(pid)) != start) {
    if (pidfd >= 0) ::close(pidfd);
    log_write(log_level::debug, "bootstrap",
              std::string("NMAD_RUN_PID=") + v + " names no live process here (another pid namespace?); not watching the launcher");
    return;
  }
  const pid_t launcher = static_cast<pid_t>(pid);
  const pid_t launcher_group = ::getpgid(launcher);
  // A rank's own group (nmad-run gives each rank one) holds what the rank
  // started; when the rank shares the launcher's group, only this process.
  const bool whole_group = launcher_group > 0 && ::getpgrp() != launcher_group;
  std::thread([launcher, pidfd, start, whole_group] {
    if (pidfd >= 0) {
      pollfd p{pidfd, POLLIN, 0};
      while (::poll(&p, 1, -1) < 0 && errno == EINTR) {
      }
    } else {
      while (process_start_time(launcher) == start) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    end_this(launcher, whole_group);
  }).detach();
}

}  // namespace nmad::bootstrap_detail
