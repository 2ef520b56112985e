#include "tools/launcher/launcher.hpp"

#include <arpa/inet.h>
#include <dirent.h>
#include <sys/mman.h>
#include <fcntl.h>
#include <sched.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "core/common/proc_stat.hpp"
#include "core/common/config.hpp"
#include "core/common/log.hpp"
#include "core/common/random.hpp"
#include "drivers/shm/shm_names.hpp"
#include "tools/launcher/binding.hpp"
#include "tools/launcher/hosts.hpp"
#include "tools/launcher/pmi_server.hpp"

extern char** environ;

namespace nmad::launcher {
namespace {

using steady = std::chrono::steady_clock;

std::string errno_text(int e) { return std::strerror(e); }

[[noreturn]] void sys_fail(const std::string& what, int err) {
  throw std::runtime_error(what + ": " + errno_text(err));
}

std::string format_seconds(double s) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

steady::duration to_duration(double s) {
  return std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(s));
}

std::optional<double> parse_seconds(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s.c_str(), &end);
  if (errno || *end || !std::isfinite(v) || v < 0 || v > 1e8) return std::nullopt;
  return v;
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

// In a freshly forked rank (async-signal-safe calls only): its own process
// group (unless own_group is false: see job::spawn_all), die with the
// launcher, and start from default signal dispositions and an empty mask.
void prepare_child(pid_t parent, bool own_group) {
  if (own_group) ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);  // the launcher is already gone
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  for (int sg = 1; sg < NSIG; ++sg)
    if (sg != SIGKILL && sg != SIGSTOP) ::sigaction(sg, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
}

// ---------------------------------------------------------------------------
struct rank_state {
  rank_result res;
  bool running = false;
  bool failure_reported = false;
  std::string host;   // empty: this machine
  int stdin_fd = -1;  // remote ranks: the pipe to ssh's stdin
  // Its process group (the rank's pid), everything it starts included; 0:
  // it shares the launcher's (rank 0 reading a terminal).
  pid_t pgid = 0;
  bool group_alive = false;  // the group may still have processes
};

enum class phase { running, grace, terminating, killing };

class job {
 public:
  explicit job(const job_options& o) : _o(o) {}
  job_result run();

 private:
  void report(const std::string& text) {
    if (_o.report) _o.report(text);
    else log_emit("nmad-run: " + text + "\n");  // never blocks the job on a full stderr pipe
  }
  std::vector<std::string> build_env(int rank, const std::string& pmi_fd_or_port,
                                     const rank_binding* binding = nullptr) const;
  void spawn_all(const std::string& path);
  void spawn_remote(int rank, const std::string& path);
  std::string remote_command(int rank, const std::string& path) const;
  std::string who(const rank_state& r) const;
  void kill_started(int sig);
  void reap();
  void on_exit(rank_state& r, int status);
  void on_abort(int rank, int code, const std::string& msg);
  void failure();
  void terminate_running(int sig);
  void signal_rank(rank_state& r, int sig);
  void reap_group(rank_state& r);
  int running_count() const;
  int groups_left() const;

  const job_options& _o;
  std::vector<rank_state> _ranks;
  std::unique_ptr<pmi_server> _server;
  std::vector<std::string> _auth;  // per rank: the PMI_PORT authentication token
  std::string _port_spec;
  std::string _remote_port_spec;  // PMI address for ranks on other hosts
  phase _phase = phase::running;
  steady::time_point _grace_deadline{};
  steady::time_point _kill_deadline{};
  bool _timed_out = false;
  int _interrupted = 0;
};

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

std::vector<std::string> job::build_env(int rank, const std::string& pmi, const rank_binding* binding) const {
  std::vector<std::string> env;
  auto name_of = [](std::string_view e) { return e.substr(0, e.find('=')); };
  auto set = [&](const std::string& entry) {
    std::string_view n = name_of(entry);
    std::erase_if(env, [&](const std::string& e) { return name_of(e) == n; });
    env.push_back(entry);
  };
  static const char* const dropped[] = {"PMI_FD",      "PMI_PORT",      "PMI_ID",       "PMI_RANK",
                                        "PMI_SIZE",    "PMI_DEBUG",     "PMI_SPAWNED",  "PMI_TOTALVIEW",
                                        "NMAD_PMI_AUTH"};
  for (char** e = environ; e && *e; ++e) {
    std::string_view n = name_of(*e);
    if (std::find(std::begin(dropped), std::end(dropped), n) != std::end(dropped)) continue;
    env.emplace_back(*e);
  }
  set("NMAD_JOB_KEY=" + _o.job_key);
  set("NMAD_RUN_SIZE=" + std::to_string(_o.nprocs));
  // Who to watch: a rank that outlives this launcher ends (core/bootstrap).
  if (const std::string start = process_start_time(::getpid()); !start.empty())
    set("NMAD_RUN_PID=" + std::to_string(::getpid()) + ":" + start);
  // The CPUs the job may use here (a bound rank sees only its own one):
  // what the engine compares the local rank count with.
  {
    cpu_set_t all;
    CPU_ZERO(&all);
    if (::sched_getaffinity(0, sizeof all, &all) == 0) set("NMAD_RUN_CPUS=" + std::to_string(CPU_COUNT(&all)));
  }
  // Where a bound rank's progress thread goes (unless the user said).
  if (binding && binding->bound && !binding->progress_cpus.empty() && !config::is_set("NMAD_PROGRESS_CPUS"))
    set("NMAD_PROGRESS_CPUS=" + topology::cpu_list(binding->progress_cpus));
  for (const auto& e : _o.env_set) set(e);
  if (_o.pmi_port) {
    set("PMI_PORT=" + pmi);
    set("PMI_ID=" + std::to_string(rank));
    set("NMAD_PMI_AUTH=" + _auth[static_cast<std::size_t>(rank)]);
  } else {
    set("PMI_FD=" + pmi);
  }
  set("PMI_RANK=" + std::to_string(rank));
  set("PMI_SIZE=" + std::to_string(_o.nprocs));
  return env;
}

void job::kill_started(int sig) {
  for (auto& r : _ranks)
    if (r.running) signal_rank(r, sig);
  for (auto& r : _ranks)
    if (r.running) {
      int st;
      while (::waitpid(r.res.pid, &st, 0) < 0 && errno == EINTR) {
      }
      r.running = false;
    }
}

void job::spawn_all(const std::string& path) {
  const pid_t parent = ::getpid();
  int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull < 0) sys_fail("nmad-run: cannot open /dev/null", errno);
  std::vector<char*> argv;
  for (const auto& a : _o.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  // Binding of local ranks (see job_options::bind, binding.hpp).
  int local_ranks = 0;
  for (int rank = 0; rank < _o.nprocs; ++rank) local_ranks += _ranks[rank].host.empty() ? 1 : 0;
  std::vector<rank_binding> bindings(static_cast<std::size_t>(local_ranks));
  if (_o.warn_oversubscribed)
    if (const auto cpus = topology::allowed_cpus(); !cpus.empty() && local_ranks > static_cast<int>(cpus.size()))
      report("warning: " + std::to_string(local_ranks) + " ranks on this host for " + std::to_string(cpus.size()) +
             " CPUs (oversubscribed): a waiting rank polls for at most 20 us (NMAD_WAIT_SPIN_US), giving its CPU "
             "away on every idle round (NMAD_WAIT_YIELD=auto), then sleeps until woken (NMAD_WAIT=fixed-spin), so "
             "the ranks it waits for get to run; latency is higher than with a core each. --oversubscribe or "
             "NMAD_RUN_OVERSUBSCRIBE=1 silences this");
  if (const auto allowed = topology::allowed_cpus(); !allowed.empty() && (_o.bind != "none" || _o.report_bindings))
    bindings = plan_bindings(local_ranks, _o.bind, launcher_topology(allowed), _o.progress_placement);
  else
    for (auto& b : bindings) b.reason = "--bind none: placement left to the kernel";
  int local_index = 0;
  // Each rank gets a process group of its own, so that ending it ends what
  // it started too (a wrapper script's program). Rank 0 keeps the
  // launcher's when it inherits a terminal the launcher reads in the
  // foreground: a background group reading its terminal would be stopped.
  const bool rank0_on_terminal = ::isatty(STDIN_FILENO) && ::tcgetpgrp(STDIN_FILENO) == ::getpgrp();

  for (int rank = 0; rank < _o.nprocs; ++rank) {
    if (!_ranks[rank].host.empty()) {
      if (_o.report_bindings)
        report("rank " + std::to_string(rank) + ": on host " + _ranks[rank].host + ", not bound by nmad-run");
      spawn_remote(rank, path);
      continue;
    }
    const rank_binding& binding = bindings[static_cast<std::size_t>(local_index++)];
    const bool bind = binding.bound;
    cpu_set_t rank_cpus;
    CPU_ZERO(&rank_cpus);
    for (int c : binding.cpus)
      if (bind && c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &rank_cpus);
    if (_o.report_bindings) {
      // One line per rank; a bound rank's line ends with where its
      // progress thread would go.
      std::string line = binding_line(rank, binding);
      if (binding.bound && !binding.progress_cpus.empty())
        line += "; progress thread (if NMAD_PROGRESS starts one): CPUs " + topology::cpu_list(binding.progress_cpus);
      report(line);
    }
    int sv[2] = {-1, -1};
    std::string pmi = _port_spec;
    if (!_o.pmi_port) {
      if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        int e = errno;
        ::close(devnull);
        kill_started(SIGKILL);
        sys_fail("nmad-run: socketpair", e);
      }
      pmi = std::to_string(sv[1]);
    }
    std::vector<std::string> env = build_env(rank, pmi, &binding);
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);

    int errpipe[2];
    if (::pipe2(errpipe, O_CLOEXEC) != 0) {
      int e = errno;
      ::close(devnull);
      if (sv[0] >= 0) ::close(sv[0]), ::close(sv[1]);
      kill_started(SIGKILL);
      sys_fail("nmad-run: pipe", e);
    }
    const bool own_group = !(rank == 0 && rank0_on_terminal);
    pid_t pid = ::fork();
    if (pid == 0) {
      // Child: async-signal-safe calls only.
      prepare_child(parent, own_group);
      if (bind) ::sched_setaffinity(0, sizeof rank_cpus, &rank_cpus);  // a plain system call
      if (sv[1] >= 0) ::fcntl(sv[1], F_SETFD, 0);
      if (rank != 0) ::dup2(devnull, STDIN_FILENO);
      ::execve(path.c_str(), argv.data(), envp.data());
      int e = errno;
      ssize_t w = ::write(errpipe[1], &e, sizeof e);
      (void)w;
      ::_exit(127);
    }
    int fork_errno = errno;
    ::close(errpipe[1]);
    if (sv[1] >= 0) ::close(sv[1]);
    if (pid < 0) {
      ::close(errpipe[0]);
      if (sv[0] >= 0) ::close(sv[0]);
      ::close(devnull);
      kill_started(SIGKILL);
      sys_fail("nmad-run: fork", fork_errno);
    }
    if (own_group) {
      ::setpgid(pid, pid);  // also here: no signal may find the group missing
      _ranks[rank].pgid = pid;
      _ranks[rank].group_alive = true;
    }
    _ranks[rank].res.pid = pid;
    _ranks[rank].running = true;
    int exec_errno = 0;
    ssize_t n;
    do n = ::read(errpipe[0], &exec_errno, sizeof exec_errno);
    while (n < 0 && errno == EINTR);
    ::close(errpipe[0]);
    if (n > 0) {
      if (sv[0] >= 0) ::close(sv[0]);
      ::close(devnull);
      kill_started(SIGKILL);
      throw usage_error("cannot execute '" + path + "': " + errno_text(exec_errno));
    }
    if (sv[0] >= 0) _server->add_connection(sv[0], rank);
  }
  ::close(devnull);
}

std::string job::who(const rank_state& r) const {
  return "rank " + std::to_string(r.res.rank) + (r.host.empty() ? "" : " on " + r.host) + " (pid " +
         std::to_string(r.res.pid) + ")";
}

// The shell command ssh runs on the remote host: read the job key, the
// rank's PMI token and the PMI address from stdin (none of them on a
// command line, where `ps` shows them to every user), set the PMI
// environment, start the program in a session (so a process group) of its
// own, and end that group when stdin closes (the launcher went away or
// ended the job): SIGTERM, SIGKILL 2 s later. When the program ends, what
// it left running in its group is ended too. Exits with the program's
// status (128+signal if it was killed).
std::string job::remote_command(int rank, const std::string& path) const {
  std::string env = "PMI_ID=" + std::to_string(rank) + " PMI_RANK=" + std::to_string(rank) +
                    " PMI_SIZE=" + std::to_string(_o.nprocs) + " NMAD_RUN_SIZE=" + std::to_string(_o.nprocs);
  bool tcp_host_set = false;
  auto add = [&](const std::string& entry) {
    env += " " + shell_quote(entry);
    tcp_host_set |= entry.rfind("NMAD_TCP_HOST=", 0) == 0;
  };
  // The launcher's NMAD_* settings travel with the job, as do -x variables.
  for (char** e = environ; e && *e; ++e) {
    std::string_view v = *e;
    if (v.rfind("NMAD_", 0) == 0 && v.rfind("NMAD_JOB_KEY=", 0) != 0 && v.rfind("NMAD_RUN_", 0) != 0 &&
        v.rfind("NMAD_PMI_AUTH=", 0) != 0)
      add(std::string(v));
  }
  for (const auto& e : _o.env_set) add(e);
  const std::string& host = _ranks[rank].host;
  if (!tcp_host_set) {
    const std::string ip = ipv4_of(host);
    if (!ip.empty()) env += " NMAD_TCP_HOST=" + ip;  // listen where peers can reach it
  }
  std::string prog;
  for (std::size_t i = 0; i < _o.argv.size(); ++i) prog += " " + shell_quote(i == 0 ? path : _o.argv[i]);
  char cwd[4096] = {};
  const std::string dir = ::getcwd(cwd, sizeof cwd) ? shell_quote(cwd) : "~";
  // (An asynchronous list's stdin is /dev/null in a non-interactive shell,
  // so the watcher reads the channel through fd 3.)
  // Run by sh whatever the remote login shell is (bash would print job
  // status lines for a killed rank).
  // (setsid makes the program a group leader, $p its group, when it runs
  // without forking: the case for a background job of a shell without job
  // control. Without setsid, only the program itself can be signalled.)
  const std::string end_group = "kill -TERM -$p 2>/dev/null || kill -TERM $p 2>/dev/null";
  const std::string script =
      "cd " + dir +
      " 2>/dev/null; IFS= read -r NMAD_JOB_KEY || exit 126; IFS= read -r NMAD_PMI_AUTH || exit 126; "
      "IFS= read -r PMI_PORT || exit 126; export NMAD_JOB_KEY NMAD_PMI_AUTH PMI_PORT; exec 3<&0; "
      "g=; command -v setsid >/dev/null 2>&1 && g=setsid; $g env " +
      env + prog + " </dev/null 3<&- & p=$!; (cat <&3 >/dev/null; " + end_group +
      "; sleep 2; kill -KILL -$p 2>/dev/null || kill -KILL $p 2>/dev/null) & w=$!; "
      "exec 3<&-; wait $p; s=$?; kill $w 2>/dev/null; if kill -0 -$p 2>/dev/null; then " + end_group +
      "; sleep 1; kill -KILL -$p 2>/dev/null; fi; exit $s";
  return "exec sh -c " + shell_quote(script);
}

void job::spawn_remote(int rank, const std::string& path) {
  std::vector<std::string> words;
  {
    std::string w;
    for (char c : _o.ssh_command + " ") {
      if (c == ' ' || c == '\t') {
        if (!w.empty()) words.push_back(w);
        w.clear();
      } else {
        w += c;
      }
    }
  }
  if (words.empty()) throw usage_error("empty ssh command (NMAD_RUN_SSH)");
  words.push_back(_ranks[rank].host);
  words.push_back(remote_command(rank, path));
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  int in[2];
  if (::pipe2(in, O_CLOEXEC) != 0) {
    int e = errno;
    kill_started(SIGKILL);
    sys_fail("nmad-run: pipe", e);
  }
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid == 0) {
    prepare_child(parent, true);
    ::dup2(in[0], STDIN_FILENO);
    ::execvp(argv[0], argv.data());
    ::_exit(127);
  }
  const int fork_errno = errno;
  ::close(in[0]);
  if (pid < 0) {
    ::close(in[1]);
    kill_started(SIGKILL);
    sys_fail("nmad-run: fork", fork_errno);
  }
  const std::string key_line =
      _o.job_key + "\n" + _auth[static_cast<std::size_t>(rank)] + "\n" + _remote_port_spec + "\n";
  ssize_t n = ::write(in[1], key_line.data(), key_line.size());  // fits in the pipe buffer
  (void)n;
  ::setpgid(pid, pid);
  _ranks[rank].pgid = pid;
  _ranks[rank].group_alive = true;
  _ranks[rank].res.pid = pid;
  _ranks[rank].running = true;
  _ranks[rank].stdin_fd = in[1];
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

}  // namespace

int rank_result::code() const {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}


std::string resolve_program(const std::string& prog) {
  if (prog.empty()) throw usage_error("missing program to run");
  auto check = [](const std::string& p, std::string* why) {
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) {
      *why = errno_text(errno);
      return false;
    }
    if (S_ISDIR(st.st_mode)) {
      *why = "is a directory";
      return false;
    }
    if (!S_ISREG(st.st_mode) || ::access(p.c_str(), X_OK) != 0) {
      *why = "not executable (permission denied)";
      return false;
    }
    return true;
  };
  std::string why;
  if (prog.find('/') != std::string::npos) {
    if (check(prog, &why)) return prog;
    throw usage_error("cannot execute '" + prog + "': " + why);
  }
  const char* path_env = std::getenv("PATH");
  std::string path = path_env ? path_env : "/usr/local/bin:/usr/bin:/bin";
  std::string first_problem;
  std::size_t i = 0;
  for (;;) {
    std::size_t j = path.find(':', i);
    std::string dir = path.substr(i, j == std::string::npos ? std::string::npos : j - i);
    if (dir.empty()) dir = ".";
    std::string cand = dir + "/" + prog;
    if (check(cand, &why)) return cand;
    if (first_problem.empty() && why.find("No such file") == std::string::npos)
      first_problem = "'" + cand + "': " + why;
    if (j == std::string::npos) break;
    i = j + 1;
  }
  if (!first_problem.empty()) throw usage_error("cannot execute " + first_problem);
  throw usage_error("'" + prog + "': command not found (searched PATH)");
}

std::string usage_text() {
  return "Usage: nmad-run -n N [--timeout SECONDS] [--kill-grace SECONDS] [-x VAR[=VALUE]]... [--] program "
         "[args...]\n"
         "  -n, -np N             number of processes (ranks) to start, N >= 1\n"
         "  --timeout SECONDS     end the job after SECONDS (exit 124); default $NMAD_RUN_TIMEOUT or none\n"
         "  --kill-grace SECONDS  after a rank fails, time the others get before SIGTERM;\n"
         "                        default $NMAD_RUN_KILL_GRACE or 2\n"
         "  -x VAR=VALUE          set VAR in the ranks' environment (-x VAR: forward VAR)\n"
         "  --bind core|none|auto bind each local rank to the core (or CPU) the placement gives it:\n"
         "                        scatter by NUMA node, spread inside it (auto: only when 2 or more\n"
         "                        local ranks fit the CPUs); default $NMAD_RUN_BIND or auto;\n"
         "                        --bind-to is the same option\n"
         "  --report-bindings     print each rank's CPUs, NUMA node and why (also\n"
         "                        $NMAD_RUN_REPORT_BINDINGS=1)\n"
         "  --pmi-port            serve PMI over TCP (PMI_PORT) instead of inherited sockets (PMI_FD)\n"
         "  --host H[:N],...      run ranks on these hosts, N slots each (default 1); -n defaults to the\n"
         "                        total; hosts other than this machine are started with $NMAD_RUN_SSH\n"
         "                        (default 'ssh -o BatchMode=yes'); their PMI address is $NMAD_RUN_PMI_HOST\n"
         "  --hostfile FILE       the same from a file: 'host', 'host:N' or 'host slots=N' per line\n"
         "  --oversubscribe       no warning when this host gets more ranks than CPUs (also\n"
         "                        $NMAD_RUN_OVERSUBSCRIBE=1)\n"
         "  -h, --help            this help\n";
}

job_options parse_command_line(int argc, const char* const* argv, bool* help) {
  job_options o;
  if (help) *help = false;
  // The knobs through the configuration reader; a bad value keeps the
  // default here and stops run_job (one message, exit 2).
  auto knob = [](auto read) {
    try {
      read();
    } catch (const config::config_error&) {
    }
  };
  knob([&] {
    if (const double t = config::duration("NMAD_RUN_TIMEOUT").count() / 1e6; t > 0) o.timeout_s = t;
  });
  knob([&] { o.kill_grace_s = config::duration("NMAD_RUN_KILL_GRACE").count() / 1e6; });
  bool have_n = false;
  std::vector<host_slot> hosts;
  o.ssh_command = config::text("NMAD_RUN_SSH");
  knob([&] { o.bind = config::word("NMAD_RUN_BIND"); });
  knob([&] { o.report_bindings = config::flag("NMAD_RUN_REPORT_BINDINGS"); });
  knob([&] { o.progress_placement = config::word("NMAD_PROGRESS_PLACEMENT"); });
  o.warn_oversubscribed = true;
  knob([&] { o.warn_oversubscribed = !config::flag("NMAD_RUN_OVERSUBSCRIBE"); });
  knob([&] { o.pmi_host = config::text("NMAD_RUN_PMI_HOST"); });
  int i = 1;
  auto value_of = [&](const std::string& opt, std::string_view arg, std::size_t prefix) -> std::string {
    if (arg.size() > prefix) {
      std::string_view rest = arg.substr(prefix);
      if (rest.front() == '=') rest.remove_prefix(1);
      return std::string(rest);
    }
    if (i + 1 >= argc) throw usage_error("option " + opt + " needs a value");
    return argv[++i];
  };
  for (; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a.empty() || a[0] != '-' || a == "-") break;
    if (a == "-h" || a == "--help") {
      if (help) *help = true;
      return o;
    }
    if (a == "-np" || a.starts_with("-np=") || a == "--np" || a.starts_with("--np=") || a == "-n" ||
        (a.starts_with("-n") && !a.starts_with("--"))) {
      std::size_t prefix = a.starts_with("--np") ? 4 : a.starts_with("-np") ? 3 : 2;
      std::string v = value_of("-n", a, prefix);
      char* end = nullptr;
      errno = 0;
      long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end || errno || n < 1 || n > 100000)
        throw usage_error("-n needs a number of processes >= 1, got '" + v + "'");
      o.nprocs = static_cast<int>(n);
      have_n = true;
    } else if (a == "--timeout" || a.starts_with("--timeout=")) {
      std::string v = value_of("--timeout", a, 9);
      auto s = parse_seconds(v);
      if (!s || *s <= 0) throw usage_error("--timeout needs a positive number of seconds, got '" + v + "'");
      o.timeout_s = *s;
    } else if (a == "--kill-grace" || a.starts_with("--kill-grace=")) {
      std::string v = value_of("--kill-grace", a, 12);
      auto s = parse_seconds(v);
      if (!s) throw usage_error("--kill-grace needs a number of seconds >= 0, got '" + v + "'");
      o.kill_grace_s = *s;
    } else if (a == "-x" || a == "--export" || a.starts_with("--export=")) {
      std::string v = value_of("-x", a, a == "-x" ? 2 : 8);
      auto eq = v.find('=');
      std::string name = v.substr(0, eq);
      if (name.empty()) throw usage_error("-x needs VAR or VAR=VALUE, got '" + v + "'");
      if (eq != std::string::npos) {
        o.env_set.push_back(v);
      } else if (const char* cur = std::getenv(name.c_str())) {
        o.env_set.push_back(name + "=" + cur);
      }  // else: VAR unset here, nothing to forward
    } else if (a == "--bind-to" || a.starts_with("--bind-to=")) {
      o.bind = value_of("--bind-to", a, 9);
    } else if (a == "--bind" || a.starts_with("--bind=")) {
      o.bind = value_of("--bind", a, 6);
    } else if (a == "--report-bindings") {
      o.report_bindings = true;
    } else if (a == "--oversubscribe") {
      o.warn_oversubscribed = false;
    } else if (a == "--pmi-port") {
      o.pmi_port = true;
    } else if (a == "--host" || a.starts_with("--host=") || a == "-H") {
      for (auto& h : parse_host_list(value_of("--host", a, a == "-H" ? 2 : 6))) hosts.push_back(h);
    } else if (a == "--hostfile" || a.starts_with("--hostfile=") || a == "-f") {
      for (auto& h : parse_hostfile(value_of("--hostfile", a, a == "-f" ? 2 : 10))) hosts.push_back(h);
    } else {
      throw usage_error("unknown option '" + std::string(a) + "'");
    }
  }
  for (; i < argc; ++i) o.argv.emplace_back(argv[i]);
  if (!have_n && !hosts.empty()) {
    o.nprocs = total_slots(hosts);  // one rank per slot
    have_n = true;
  }
  if (!have_n) throw usage_error("missing -n N (the number of processes)");
  if (!hosts.empty()) o.rank_hosts = place_ranks(hosts, o.nprocs);
  if (o.argv.empty()) throw usage_error("missing program to run");
  if (o.bind != "auto" && o.bind != "core" && o.bind != "none")
    throw usage_error("--bind (--bind-to, NMAD_RUN_BIND) must be core, none or auto, got '" + o.bind + "'");
  return o;
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
  job j(o);
  return j.run();
}

}  // namespace nmad::launcher
