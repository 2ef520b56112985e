#pragma once
// A progress thread: runs the engine's progress while the application
// computes (the waiter's background mode, see waiter.hpp). One per session
// when NMAD_PROGRESS asks for it (see docs/CONFIGURATION.md):
//   none    no thread: the application's own threads progress when they
//           call the library or wait in it;
//   thread  one progress thread per process;
//   auto    (default) a thread when the machine has a core to spare for it
//           (more CPUs for the job on this machine than local ranks), none
//           otherwise.
// Where it runs: the CPUs nmad-run computed with the progress placement
// policy (NMAD_PROGRESS_CPUS, see api/nmad/services/placement.hpp), else the
// process's own CPUs. Its priority is the scheduling policy's for progress
// threads (core/topology/scheduling.hpp); raising it above the
// application's needs CAP_SYS_NICE, which is tried, and reported when
// refused.
//
// The thread sleeps, unarmed, while nothing is in flight or while an
// application thread waits in the library: it costs nothing to a job that
// does not compute with communication in flight.
//
// Thread safety: construct and destroy from one thread; the waiter must be
// in background mode (waiter::enable_background) before and outlive it.
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/progress/waiter.hpp"

namespace nmad {

enum class progress_mode { none, thread, automatic };
// "none", "thread", "auto"; false for anything else.
bool parse_progress_mode(std::string_view text, progress_mode& out);
std::string_view progress_mode_name(progress_mode m);
// Whether `m` starts a thread for `local_ranks` processes of the job on a
// machine where it has `job_cpus` CPUs (auto: one to spare).
bool starts_progress_thread(progress_mode m, int job_cpus, int local_ranks);

class progress_thread {
 public:
  struct options {
    std::vector<int> cpus;  // empty: the process's own affinity
    int priority = 15;      // 0..20 (scheduling.hpp)
  };
  // Starts the thread; `w` must be in background mode.
  progress_thread(waiter& w, options opts);
  ~progress_thread();  // stops and joins it
  progress_thread(const progress_thread&) = delete;
  progress_thread& operator=(const progress_thread&) = delete;

  // "CPUs 0-1, priority 15 (nice -5)" plus what could not be applied;
  // complete once the thread started (the constructor waits for that).
  const std::string& description() const { return _description; }

 private:
  waiter& _w;
  std::string _description;
  std::thread _thread;
};

}  // namespace nmad
