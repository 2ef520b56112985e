// nmad-run's job, its life once started (see launcher_internal.hpp): the
// signals it waits for through a self-pipe, the poll loop serving the PMI
// server, the time-out and the grace, SIGTERM and SIGKILL steps after a
// failure, reaping ranks and what they left running in their process
// groups, the report of each rank's end, and the job's exit status; and
// run_job, which checks the ranks' settings before any starts.
#include "tools/launcher/launcher_internal.hpp"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <optional>

#include "api/nmad/services/config.hpp"
#include "core/common/random.hpp"
#include "drivers/shm/shm_names.hpp"
#include "tools/launcher/hosts.hpp"

namespace nmad::launcher::detail {
namespace {

std::string format_seconds(double s) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

steady::duration to_duration(double s) {
  return std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(s));
}

std::string signal_name(int sig) {
  const char* d = ::strsignal(sig);
  return d ? d : "unknown signal";
}

// ---------------------------------------------------------------------------
// Self-pipe for SIGCHLD (and SIGINT/SIGTERM when asked): the handler writes
// the signal number; the poll loop reads it. One job per process at a time.
std::atomic<int> g_sig_write_fd{-1};
std::atomic<bool> g_job_active{false};

extern "C" void on_signal(int sig) {
  int saved = errno;
  int fd = g_sig_write_fd.load(std::memory_order_relaxed);
  if (fd >= 0) {
    unsigned char b = static_cast<unsigned char>(sig);
    ssize_t r = ::write(fd, &b, 1);
    (void)r;
  }
  errno = saved;
}

class signal_guard {
 public:
  explicit signal_guard(bool handle_term) {
    if (g_job_active.exchange(true)) throw std::runtime_error("nmad-run: only one job per process at a time");
    if (::pipe2(_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
      int e = errno;
      g_job_active = false;
      sys_fail("pipe", e);
    }
    g_sig_write_fd = _pipe[1];
    install(SIGCHLD, 0);
    if (handle_term) {
      install(SIGINT, 1);
      install(SIGTERM, 2);
      install(SIGHUP, 3);  // the ranks are not in the terminal's process group: it is ours to pass on
    }
  }
  ~signal_guard() {
    for (int i = 0; i < 4; ++i)
      if (_installed[i]) ::sigaction(_signo[i], &_old[i], nullptr);
    g_sig_write_fd = -1;
    ::close(_pipe[0]);
    ::close(_pipe[1]);
    g_job_active = false;
  }
  int read_fd() const { return _pipe[0]; }

 private:
  void install(int sig, int slot) {
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | (sig == SIGCHLD ? SA_NOCLDSTOP : 0);
    ::sigaction(sig, &sa, &_old[slot]);
    _signo[slot] = sig;
    _installed[slot] = true;
  }
  int _pipe[2] = {-1, -1};
  struct sigaction _old[4] {};
  int _signo[4] = {0, 0, 0, 0};
  bool _installed[4] = {false, false, false, false};
};

// Shared-memory segments a rank's shm driver left behind (it unlinks them
// itself when it closes normally; a killed rank cannot). Only this job's
// (the names carry a hash of the job key) and only that rank's (its pid).
void remove_shm_leftovers(const std::string& job_key, pid_t pid) {
  DIR* d = ::opendir("/dev/shm");
  if (!d) return;
  while (dirent* e = ::readdir(d))
    if (shm::segment_of(e->d_name, job_key, pid)) ::shm_unlink(("/" + std::string(e->d_name)).c_str());
  ::closedir(d);
}

}  // namespace

int job::running_count() const {
  int n = 0;
  for (const auto& r : _ranks) n += r.running;
  return n;
}

// Ranks that have ended but whose process group still has processes.
int job::groups_left() const {
  int n = 0;
  for (const auto& r : _ranks) n += !r.running && r.group_alive;
  return n;
}

// The rank and everything it started (its process group), or the rank
// alone when it has no group of its own.
void job::signal_rank(rank_state& r, int sig) {
  if (r.pgid > 0 && (r.running || r.group_alive)) {
    if (::kill(-r.pgid, sig) == 0) return;
    if (errno == ESRCH) r.group_alive = false;
  }
  if (r.running) ::kill(r.res.pid, sig);
}

// Collects what is left of an ended rank's group: members that became our
// children (the launcher is their subreaper) are reaped; the group is gone
// when no process of it remains (or none we may signal).
void job::reap_group(rank_state& r) {
  if (r.pgid <= 0 || !r.group_alive) return;
  for (;;) {
    siginfo_t si{};
    if (::waitid(P_PGID, static_cast<id_t>(r.pgid), &si, WEXITED | WNOHANG | WNOWAIT) != 0 || si.si_pid == 0) break;
    if (si.si_pid == r.res.pid && r.running) break;  // the rank itself: reap() reads its status
    ::waitpid(si.si_pid, nullptr, WNOHANG);
  }
  if (!r.running && ::kill(-r.pgid, 0) != 0) r.group_alive = false;
}

std::string job::who(const rank_state& r) const {
  return "rank " + std::to_string(r.res.rank) + (r.host.empty() ? "" : " on " + r.host) + " (pid " +
         std::to_string(r.res.pid) + ")";
}

// Every running rank, and what ended ranks left running in their group.
void job::terminate_running(int sig) {
  for (auto& r : _ranks) {
    if (r.running) r.res.ended_by_launcher = true;
    if (r.running || r.group_alive) signal_rank(r, sig);
  }
}

void job::failure() {
  if (_phase != phase::running) return;
  _phase = phase::grace;
  _grace_deadline = steady::now() + to_duration(_o.kill_grace_s);
}

void job::on_abort(int rank, int code, const std::string& msg) {
  auto& r = _ranks[rank];
  if (r.res.aborted) return;
  r.res.aborted = true;
  r.res.abort_code = code;
  if (!r.res.ended_by_launcher) {
    report("rank " + std::to_string(rank) + " (pid " + std::to_string(r.res.pid) + ") called abort (exit code " +
           std::to_string(code) + ")" + (msg.empty() ? "" : ": " + msg));
    r.failure_reported = true;
  }
  failure();
}

void job::on_exit(rank_state& r, int status) {
  r.running = false;
  r.res.wait_status = status;
  if (r.stdin_fd >= 0) {
    ::close(r.stdin_fd);
    r.stdin_fd = -1;
  }
  if (r.host.empty()) remove_shm_leftovers(_o.job_key, r.res.pid);
  if (r.res.ended_by_launcher) {
    _server->rank_exited(r.res.rank);
    return;
  }
  if (r.res.code() == 0) {
    // A PMI client that initialised must say goodbye: exiting 0 without it
    // (exit() before MPI_Finalize) is an error, as with other MPI launchers.
    _server->drain(r.res.rank);
    if (_server->initialised(r.res.rank) && !_server->finalized(r.res.rank) && !r.res.aborted) {
      r.res.exited_without_finalize = true;
      if (!r.failure_reported && _phase == phase::running)  // not the consequence of another failure
        report(who(r) + " exited with status 0 without calling MPI_Finalize (nor closing its nmad session) "
                        "after initialising: the job fails");
      r.failure_reported = true;
      failure();
    }
    _server->rank_exited(r.res.rank);
    return;
  }
  if (!r.failure_reported) {
    const std::string who = this->who(r);
    if (!r.host.empty() && WIFEXITED(status) && WEXITSTATUS(status) == 255) {
      // ssh's own failures exit 255 (its message is on stderr already).
      if (!_server->connected(r.res.rank))
        report("rank " + std::to_string(r.res.rank) + ": ssh to " + r.host +
               " failed (ssh exit status 255, see its message above): the rank was not started there");
      else
        report(who + " exited with status 255: the program's status, or ssh lost its connection to " + r.host);
    } else if (WIFSIGNALED(status)) {
      int sig = WTERMSIG(status);
      report(who + " was killed by signal " + std::to_string(sig) + " (" + signal_name(sig) + ")" +
             (WCOREDUMP(status) ? " (core dumped)" : ""));
    } else {
      report(who + " exited with status " + std::to_string(WEXITSTATUS(status)));
    }
    r.failure_reported = true;
  }
  failure();
  _server->rank_exited(r.res.rank);  // after the report: may fail a pending barrier
}

void job::reap() {
  for (auto& r : _ranks) {
    if (r.running) {
      int st = 0;
      pid_t p;
      do p = ::waitpid(r.res.pid, &st, WNOHANG);
      while (p < 0 && errno == EINTR);
      if (p == r.res.pid) on_exit(r, st);
      else if (p < 0 && errno == ECHILD) on_exit(r, 0);  // reaped elsewhere: nothing known
    }
    reap_group(r);  // after the rank itself: its status is ours to read first
  }
}

job_result job::run() {
  if (_o.nprocs < 1) throw usage_error("the number of processes must be at least 1");
  if (_o.argv.empty() || _o.argv[0].empty()) throw usage_error("missing program to run");
  if (_o.kill_grace_s < 0 || _o.kill_escalation_s < 0) throw usage_error("negative kill delay");
  if (_o.timeout_s && !(*_o.timeout_s > 0)) throw usage_error("the timeout must be positive");
  const std::string path = resolve_program(_o.argv[0]);

  const auto start = steady::now();
  signal_guard sig(_o.handle_signals);
  // What a rank's wrapper leaves behind when it dies (its program, say)
  // comes to us rather than to init: its end wakes us (SIGCHLD) and we
  // reap it (reap_group). For this job only (run_job may run in a program
  // that does more).
  int was_subreaper = 0;
  ::prctl(PR_GET_CHILD_SUBREAPER, &was_subreaper);
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  struct subreaper_reset {
    int was;
    ~subreaper_reset() { ::prctl(PR_SET_CHILD_SUBREAPER, was); }
  } subreaper_guard{was_subreaper};
  _ranks.resize(static_cast<std::size_t>(_o.nprocs));
  for (int i = 0; i < _o.nprocs; ++i) _ranks[i].res.rank = i;

  static std::atomic<int> job_counter{0};
  std::string kvsname = "nmad_kvs_" + std::to_string(::getpid()) + "_" + std::to_string(job_counter++);
  pmi_server::limits lim;
  lim.keylen_max = _o.keylen_max;
  lim.vallen_max = _o.vallen_max;
  _server = std::make_unique<pmi_server>(_o.nprocs, kvsname, lim);
  _server->on_abort = [this](int rank, int code, const std::string& msg) { on_abort(rank, code, msg); };
  _server->on_report = [this](const std::string& text) { report(text); };
  _auth.clear();
  {
    const std::string all = random_hex(32 * static_cast<std::size_t>(_o.nprocs));
    for (int i = 0; i < _o.nprocs; ++i) _auth.push_back(all.substr(32 * static_cast<std::size_t>(i), 32));
  }
  _server->set_auth_tokens(_auth);

  if (_o.pmi_port) {
    int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0) sys_fail("nmad-run: socket", errno);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(lfd, 1024) != 0 ||
        ::getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      int e = errno;
      ::close(lfd);
      sys_fail("nmad-run: cannot listen on 127.0.0.1", e);
    }
    _port_spec = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
    _server->add_listener(lfd);
  }

  for (int i = 0; i < _o.nprocs; ++i)
    if (i < static_cast<int>(_o.rank_hosts.size()) && !is_local_host(_o.rank_hosts[i])) _ranks[i].host = _o.rank_hosts[i];
  if (std::any_of(_ranks.begin(), _ranks.end(), [](const rank_state& r) { return !r.host.empty(); })) {
    // Ranks on other hosts reach the PMI server over TCP. Loopback-range
    // hosts (tests) use 127.0.0.1; otherwise this machine's address.
    std::string bind_host = _o.pmi_host;
    if (bind_host.empty()) {
      bool all_loopback = true;
      for (const auto& r : _ranks)
        if (!r.host.empty()) all_loopback &= ipv4_of(r.host).rfind("127.", 0) == 0;
      char name[256] = {};
      ::gethostname(name, sizeof name - 1);
      bind_host = all_loopback ? "127.0.0.1" : ipv4_of(name);
      if (bind_host.empty())
        throw usage_error("cannot find an address of this machine for remote ranks; set NMAD_RUN_PMI_HOST");
    }
    int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0) sys_fail("nmad-run: socket", errno);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    if (::inet_pton(AF_INET, bind_host.c_str(), &a.sin_addr) != 1) {
      ::close(lfd);
      throw usage_error("NMAD_RUN_PMI_HOST='" + bind_host + "' is not an IPv4 address");
    }
    socklen_t len = sizeof a;
    if (::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(lfd, 1024) != 0 ||
        ::getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      int e = errno;
      ::close(lfd);
      sys_fail("nmad-run: cannot listen on " + bind_host, e);
    }
    _remote_port_spec = bind_host + ":" + std::to_string(ntohs(a.sin_port));
    _server->add_listener(lfd);
  }

  spawn_all(path);

  bool check_children = true;
  bool leftovers_reported = false;
  std::optional<steady::time_point> give_up_on_groups;
  std::vector<pollfd> fds;
  while (running_count() > 0 || groups_left() > 0) {
    if (check_children) {
      check_children = false;
      reap();
    }
    if (running_count() == 0) {
      if (groups_left() == 0) break;
      // Every rank has ended, but processes they started have not: they
      // are ended like ranks (SIGTERM, then SIGKILL), whatever the job's
      // outcome; after that, a bounded wait for the group to empty.
      if (!leftovers_reported) {
        leftovers_reported = true;
        std::string which;
        for (const auto& r : _ranks)
          if (r.group_alive) which += " " + std::to_string(r.res.rank);
        report("processes started by rank(s)" + which + " outlived them; ending them");
      }
      if (_phase == phase::running || _phase == phase::grace) {
        terminate_running(SIGTERM);
        _phase = phase::terminating;
        _kill_deadline = steady::now() + to_duration(_o.kill_escalation_s);
      }
      if (_phase == phase::killing && !give_up_on_groups) give_up_on_groups = steady::now() + std::chrono::seconds(5);
      if (give_up_on_groups && steady::now() >= *give_up_on_groups) {
        report("processes of rank(s) still running after SIGKILL; leaving them");
        break;
      }
    }
    const auto now = steady::now();
    if (_phase == phase::running && _o.timeout_s && now >= start + to_duration(*_o.timeout_s)) {
      _timed_out = true;
      std::string still;
      for (const auto& r : _ranks)
        if (r.running) still += " " + std::to_string(r.res.rank);
      report("job timed out after " + format_seconds(*_o.timeout_s) + " s; ranks still running:" + still);
      terminate_running(SIGTERM);
      _phase = phase::terminating;
      _kill_deadline = now + to_duration(_o.kill_escalation_s);
    }
    if (_phase == phase::grace && now >= _grace_deadline) {
      terminate_running(SIGTERM);
      _phase = phase::terminating;
      _kill_deadline = now + to_duration(_o.kill_escalation_s);
    }
    if (_phase == phase::terminating && now >= _kill_deadline) {
      terminate_running(SIGKILL);
      _phase = phase::killing;
    }

    std::optional<steady::time_point> wake;
    if (_phase == phase::running && _o.timeout_s) wake = start + to_duration(*_o.timeout_s);
    if (_phase == phase::grace) wake = _grace_deadline;
    if (_phase == phase::terminating) wake = _kill_deadline;
    int timeout_ms = -1;
    if (wake) {
      auto ms = std::chrono::ceil<std::chrono::milliseconds>(*wake - now).count();
      timeout_ms = static_cast<int>(std::clamp<long long>(ms, 0, 1 << 30));
    }
    if (const int server_ms = _server->poll_timeout_ms(); server_ms >= 0 && (timeout_ms < 0 || server_ms < timeout_ms))
      timeout_ms = server_ms;
    // A group's last processes may not be our children (nothing wakes us
    // when they end): look again every 50 ms.
    if (groups_left() > 0 && (timeout_ms < 0 || timeout_ms > 50)) timeout_ms = 50;

    fds.clear();
    fds.push_back(pollfd{sig.read_fd(), POLLIN, 0});
    _server->fill_pollfds(fds);
    int n = ::poll(fds.data(), fds.size(), timeout_ms);
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      terminate_running(SIGKILL);
      kill_started(SIGKILL);
      sys_fail("nmad-run: poll", e);
    }
    if (n == 0) {
      check_children |= groups_left() > 0;
      continue;
    }
    _server->handle(fds, 1);  // before reaping: read what exiting ranks wrote
    if (fds[0].revents & POLLIN) {
      unsigned char buf[64];
      ssize_t got;
      while ((got = ::read(sig.read_fd(), buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < got; ++i) {
          int s = buf[i];
          if (s == SIGCHLD) {
            check_children = true;
          } else if (s == SIGINT || s == SIGTERM || s == SIGHUP) {
            if (_interrupted == 0) {
              _interrupted = s;
              report(std::string("received ") + (s == SIGINT ? "SIGINT" : s == SIGTERM ? "SIGTERM" : "SIGHUP") +
                     "; terminating the ranks");
            }
            if (_phase == phase::running || _phase == phase::grace) {
              terminate_running(SIGTERM);
              _phase = phase::terminating;
              _kill_deadline = steady::now() + to_duration(_o.kill_escalation_s);
            } else if (_phase == phase::terminating && s != _interrupted) {
              terminate_running(SIGKILL);
              _phase = phase::killing;
            }
          }
        }
      }
    }
  }
  _server->close_all();
  // What a slow stderr reader has not taken yet: a bounded wait for it.
  log_flush(2000);

  job_result res;
  res.timed_out = _timed_out;
  res.interrupted_by = _interrupted;
  int worst = 0;
  for (const auto& r : _ranks) {
    res.ranks.push_back(r.res);
    if (!r.res.ended_by_launcher) worst = std::max(worst, r.res.code());
    if (r.res.exited_without_finalize) worst = std::max(worst, 1);
    if (r.res.aborted) worst = std::max(worst, r.res.abort_code > 0 && r.res.abort_code < 256 ? r.res.abort_code : 1);
  }
  if (_timed_out) res.exit_code = 124;
  else if (_interrupted) res.exit_code = 128 + _interrupted;
  else res.exit_code = std::min(worst, 255);
  return res;
}

}  // namespace nmad::launcher::detail

namespace nmad::launcher {

int rank_result::code() const {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

std::string random_hex(std::size_t n) {
  try {
    return nmad::random_hex(n);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("nmad-run: ") + e.what());
  }
}

job_result run_job(const job_options& opts) {
  job_options o = opts;
  // The ranks' NMAD_* settings (this environment and -x), checked before
  // any rank starts: a bad value stops the job with one message naming it
  // (the ranks would each refuse it), an unknown name is said once here
  // (the ranks, seeing NMAD_RUN_SIZE, stay quiet about it).
  {
    std::vector<std::string> entries = config::environment_entries();
    entries.insert(entries.end(), o.env_set.begin(), o.env_set.end());
    std::vector<std::string> warnings;
    try {
      warnings = config::check(entries);
    } catch (const config::config_error& e) {
      throw usage_error(e.what());
    }
    for (const std::string& w : warnings) {
      if (o.report) o.report("warning: " + w);
      else log_emit("nmad-run: warning: " + w + "\n");
    }
  }
  if (o.job_key.empty()) o.job_key = random_hex(32);
  detail::job j(o);
  return j.run();
}

}  // namespace nmad::launcher
