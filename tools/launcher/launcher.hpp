#pragma once
// nmad-run's engine: starts N local processes under a PMI-1 server, watches
// them and ends the job as a whole. Usable from tests (run_job) as well as
// from the nmad-run command (parse_command_line + run_job).
//
// Each rank gets, on top of the launcher's environment (minus inherited PMI_*
// variables): NMAD_JOB_KEY (32 random hex chars, fresh per job), NMAD_RUN_SIZE,
// NMAD_RUN_PID (the launcher's pid and start time, see
// core/bootstrap/launcher_watch.hpp), the -x variables, and PMI_FD (or
// PMI_PORT + PMI_ID), PMI_RANK, PMI_SIZE.
// Rank 0 inherits stdin; the others read /dev/null. stdout/stderr are shared.
//
// Failure handling: when a rank exits non-zero, is killed by a signal,
// calls PMI abort, or exits 0 without the PMI finalize that MPI_Finalize
// (or closing an nmad session) sends after having initialised, a line is reported, the other ranks get kill_grace_s to end
// on their own, then SIGTERM, then SIGKILL kill_escalation_s later. On
// timeout the ranks still running get SIGTERM at once (then SIGKILL).
//
// Nothing a rank starts outlives the job. Each rank runs in a process group
// of its own (rank 0 excepted when it inherits a terminal the launcher
// reads in the foreground), and every signal above goes to the whole group,
// so a wrapper script's program ends with it; processes that outlive their
// rank (left in the background) are ended the same way when every rank has
// ended, whatever the job's outcome (with one line saying so). The launcher
// is the subreaper of what its ranks start, so it reaps them. SIGTERM,
// SIGINT and SIGHUP to nmad-run (handle_signals) end the ranks' groups.
// Children carry PR_SET_PDEATHSIG=SIGKILL so they die with the launcher;
// a rank that is not its child (behind a wrapper) notices through
// NMAD_RUN_PID within seconds and ends its group (core/bootstrap).
#include <sys/types.h>

#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace nmad::launcher {

// Bad command line or unrunnable program: nmad-run prints it and exits 2.
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct job_options {
  int nprocs = 0;
  std::vector<std::string> argv;      // argv[0]: program, searched in PATH if it has no '/'
  std::vector<std::string> env_set;   // "VAR=VALUE", applied over the launcher's environment
  std::optional<double> timeout_s;    // whole-job limit; exit 124 when exceeded
  double kill_grace_s = 2.0;          // after a failure, before SIGTERM
  double kill_escalation_s = 2.0;     // after SIGTERM, before SIGKILL
  bool pmi_port = false;              // PMI_PORT=127.0.0.1:P + PMI_ID instead of PMI_FD
  // Binding of the ranks started on this machine (--bind or its alias
  // --bind-to, $NMAD_RUN_BIND), to the CPUs the rank placement of
  // core/topology gives them (scatter by NUMA, tools/launcher/binding.hpp):
  // "core": every local rank; "auto" (default): when two or more local
  // ranks fit the CPUs the launcher may use, else none (a single rank, or
  // more ranks than CPUs, keep every CPU: so do a rank's own threads then);
  // "none": placement left to the kernel. Bound ranks keep their core on a
  // machine loaded by other jobs, where the kernel would otherwise stack
  // communicating ranks on one core.
  std::string bind = "auto";
  // One line per rank through `report`: rank, CPUs, NUMA node, reason
  // (--report-bindings, $NMAD_RUN_REPORT_BINDINGS=1).
  bool report_bindings = false;
  // $NMAD_PROGRESS_PLACEMENT: under "smt" a rank keeps its core's first PU.
  std::string progress_placement;
  // Host of each rank (--host/--hostfile); empty: all on this machine. Ranks
  // on other hosts are started with `ssh_command HOST sh -c ...`, reach the
  // PMI server over TCP at pmi_host, and get NMAD_JOB_KEY, their PMI token
  // and the PMI address on their stdin (never on a command line). Closing
  // that stdin ends the remote rank and its process group (setsid there).
  std::vector<std::string> rank_hosts;
  std::string ssh_command = "ssh -o BatchMode=yes";  // $NMAD_RUN_SSH
  std::string pmi_host;               // $NMAD_RUN_PMI_HOST; default: chosen from the hosts
  std::size_t keylen_max = 256;       // PMI limits advertised by get_maxes
  std::size_t vallen_max = 1024;
  std::string job_key;                // empty: 32 random hex chars
  // One warning when this host gets more ranks than CPUs the launcher may
  // use, saying what the wait policy does about it. nmad-run turns it on
  // unless --oversubscribe or NMAD_RUN_OVERSUBSCRIBE=1.
  bool warn_oversubscribed = false;
  bool handle_signals = false;        // SIGINT/SIGTERM to the launcher: end the ranks, exit 128+sig
  // Receives each diagnostic line (without "nmad-run: " prefix or newline).
  // Default: "nmad-run: <text>\n" on stderr.
  std::function<void(const std::string&)> report;
};

struct rank_result {
  int rank = 0;
  pid_t pid = -1;
  int wait_status = 0;           // raw waitpid() status
  bool aborted = false;          // called PMI abort
  int abort_code = 0;
  bool ended_by_launcher = false;  // it was still running when we sent SIGTERM/SIGKILL
  // Exited 0 after PMI init without PMI finalize (MPI_Finalize, or closing
  // its nmad session): a failure, the job exits 1 at least.
  bool exited_without_finalize = false;
  // Exit code, or 128+signal.
  int code() const;
};

struct job_result {
  int exit_code = 0;       // what nmad-run exits with
  bool timed_out = false;
  int interrupted_by = 0;  // signal the launcher received (handle_signals)
  std::vector<rank_result> ranks;
};

// Parses `nmad-run` arguments (argv[0] is skipped). Defaults come from
// NMAD_RUN_TIMEOUT / NMAD_RUN_KILL_GRACE. Throws usage_error. Sets *help when
// --help was asked (then the options are not meaningful).
job_options parse_command_line(int argc, const char* const* argv, bool* help = nullptr);
std::string usage_text();

// Absolute or relative path of an executable program, searched like execvp
// (PATH, default /usr/local/bin:/usr/bin:/bin). Throws usage_error.
std::string resolve_program(const std::string& prog);

// n random lowercase hex characters from /dev/urandom.
std::string random_hex(std::size_t n);

// Runs the job to completion; never leaves a rank running. Throws usage_error
// for bad options / unrunnable program, std::runtime_error for system errors
// (after ending any rank already started).
job_result run_job(const job_options& opts);

}  // namespace nmad::launcher
