#pragma once
// nmad-run's engine, shared by its files (launcher.hpp for the behaviour and
// exit statuses): the state of each rank and the job that starts, watches
// and ends them. Files by concept:
//   launcher.cpp      the job's life: signals through a self-pipe, the poll
//                     loop, time-outs and escalation, reaping ranks and what
//                     they started, failures and the exit status; run_job
//   spawn.cpp         starting the ranks: their environment and binding,
//                     fork/exec on this host, ssh and the remote shell
//                     command on other hosts
//   command_line.cpp  nmad-run's options and usage, finding the program
//   binding.cpp, hosts.cpp, pmi_server.cpp: CPU binding, host lists, the
//                     PMI-1 server
#include "tools/launcher/launcher.hpp"

#include <sys/types.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "api/nmad/services/log.hpp"
#include "tools/launcher/binding.hpp"
#include "tools/launcher/pmi_server.hpp"

namespace nmad::launcher::detail {

using steady = std::chrono::steady_clock;

inline std::string errno_text(int e) { return std::strerror(e); }

[[noreturn]] inline void sys_fail(const std::string& what, int err) {
  throw std::runtime_error(what + ": " + errno_text(err));
}

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

}  // namespace nmad::launcher::detail
