#pragma once
// A process started by nmad-run ends when nmad-run is gone (killed with
// SIGKILL, say), within seconds, even when it is not nmad-run's child (a
// wrapper script's program): PR_SET_PDEATHSIG only reaches the child.
//
// nmad-run gives its ranks NMAD_RUN_PID=<pid>:<start time> (the start time
// from /proc/<pid>/stat, so that a reused pid is never taken for it).
// watch_launcher() checks that this names a live process of this pid
// namespace, then starts one thread for the rest of the process's life,
// asleep on a pidfd of the launcher (or looking every 500 ms where the
// kernel has no pidfd). When the launcher has ended, the thread logs one
// line and sends SIGTERM, then SIGKILL 2 s later (nmad-run's own steps), to
// the process's group when it is one nmad-run made for a rank (so what the
// rank started ends too), else to the process alone.
//
// Called by bootstrap::from_environment once the PMI connection is up;
// later calls do nothing. Without NMAD_RUN_PID (another launcher, a
// singleton), or when it does not name a live process here, nothing is
// watched.
namespace nmad::bootstrap_detail {

void watch_launcher();

}  // namespace nmad::bootstrap_detail
