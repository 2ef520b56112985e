#pragma once
// Scheduling policy for the engine's threads, as data: a priority (0 to 20,
// 20 the most urgent) per kind of thread, and whether a thread with nothing
// pending should be suspended. The progress engine asks these functions; it
// does not encode the policy itself.
//
// Defaults: progress threads 15 (they run briefly and must not wait behind
// the computation they overlap), application threads 10, internal threads
// (connection set-up, watchdogs) 5. Progress and internal threads with
// nothing pending are suspended (Taboada et al.: polling idle progress threads
// cost an Iscan 11.4 times its time); application threads are never
// suspended by the engine. NMAD_THREAD_PRIORITIES overrides the table, e.g.
// "progress=18,internal=2". Pure functions except priorities_from_env().
#include <optional>
#include <string>
#include <string_view>

namespace nmad::topology {

enum class thread_kind { application, progress, internal };

inline constexpr int min_thread_priority = 0;
inline constexpr int max_thread_priority = 20;

std::string_view name_of(thread_kind k);

struct thread_priorities {
  int application = 10;
  int progress = 15;
  int internal = 5;
  int of(thread_kind k) const;
  // "application=10,progress=15,internal=5".
  std::string to_string() const;
};

// Entries "kind=priority" separated by ',' over the defaults; nullopt for an
// unknown kind, a priority outside 0..20 or a malformed entry.
std::optional<thread_priorities> parse_thread_priorities(std::string_view spec);
// NMAD_THREAD_PRIORITIES, or the defaults; throws std::invalid_argument
// naming the variable when it is malformed.
thread_priorities priorities_from_env();

// The nice(2) value for a priority: 10 - priority (priority 10 is nice 0;
// above 10 needs CAP_SYS_NICE, which the engine tries and may not get).
int nice_of(int priority);

// Whether a thread of this kind with (or without) pending work keeps running.
enum class idle_action { keep_running, suspend };
idle_action when_idle(thread_kind k, bool has_pending);

}  // namespace nmad::topology
