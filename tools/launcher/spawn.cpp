// nmad-run's job, starting its ranks (see launcher_internal.hpp): each
// rank's environment (PMI and NMAD_RUN_* variables over the launcher's own,
// minus inherited PMI_*), its CPU binding, fork/exec in a process group of
// its own on this host, and on other hosts ssh running a shell command that
// reads the job key and PMI address from stdin and ends the rank's group
// when that stdin closes.
#include "tools/launcher/launcher_internal.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string_view>

#include "api/nmad/services/config.hpp"
#include "core/common/proc_stat.hpp"
#include "tools/launcher/hosts.hpp"

extern char** environ;

namespace nmad::launcher::detail {
namespace {

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

}  // namespace

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

}  // namespace nmad::launcher::detail
