#pragma once
// Hooks for layers built on the engine: the MPI layer, and runtimes that
// run schedules of their own (non-blocking collectives, collective I/O, an
// RPC runtime's background work). An application that sends and receives
// through nmad::session (nmad.hpp) needs none of this.
//
// What a layer gets here:
//   - progress tasks: functions every round of engine progress runs, for
//     work that must advance without its owner calling in (progress_task,
//     a handle that removes the task when it goes; add_session_task for a
//     task that lives as long as the session);
//   - background_work: tells a progress thread that such work exists, so
//     that it keeps running the tasks while the application computes;
//   - progress_all_drivers: the progress round of a call that must report
//     what has completed (MPI_Test), which waits for a driver another
//     thread is polling instead of skipping it;
//   - blocking_section: a blocking call made of several session calls
//     (isend then wait) wakes the progress thread once, at its end;
//   - copy_offload_min: from which size an eager isend's copy goes to the
//     progress thread (a layer that stages data decides with it);
//   - event sink: the engine's events (a rendezvous started, a rail failed,
//     ...) handed to the layer as they happen (what MPI_T events report).
//
// Threading: every function may be called from any thread unless its
// comment says otherwise; none may be called from a completion callback or
// a progress task unless its comment allows it.
#include <cstddef>
#include <cstdint>

#include "nmad.hpp"

namespace nmad::layer {

using task_fn = int (*)(void* arg);

// A progress task for as long as the handle lives: fn(arg) runs on every
// round of progress (from any thread that progresses, under the progress
// engine's task lock, one task at a time). It may start requests and
// submit or remove tasks but must not wait; it returns the amount of work
// it did (0 = nothing), which counts as progress for the round.
// Destroying (or reset()ting) the handle removes the task: once that
// returns, fn is not running and never runs again (from a task, a task's
// own removal takes effect after it returns). The session must outlive
// the handle.
class progress_task {
 public:
  progress_task() = default;
  progress_task(session& s, task_fn fn, void* arg);
  progress_task(progress_task&& other) noexcept;
  progress_task& operator=(progress_task&& other) noexcept;
  progress_task(const progress_task&) = delete;
  progress_task& operator=(const progress_task&) = delete;
  ~progress_task() { reset(); }

  void reset();
  explicit operator bool() const { return _session != nullptr; }

 private:
  session* _session = nullptr;
  int _id = -1;
};

// A progress task that runs for the rest of the session (the session
// removes it when it ends, after its last progress round): for work a
// layer registers once and never withdraws. Same rules for fn as above.
void add_session_task(session& s, task_fn fn, void* arg);

// Background work that is not a request (a schedule a progress task
// advances): +n when it starts, -n when it ends. While any is counted, the
// progress thread (NMAD_PROGRESS) keeps running the progress tasks when the
// application is outside the library. No-op without a progress thread.
// Any thread, progress tasks included.
void background_work(session& s, long delta);

// One round of progress like session::progress(), except that a driver
// another thread (the progress thread) is polling at that moment is waited
// for instead of skipped: on return, every event the drivers had delivered
// before the call has been handled, whoever polled it. For calls that must
// report what has completed (MPI_Test and its kind); a layer that found
// nothing then applies the polling discipline itself (session::idle_poll).
// Takes the drivers' locks: not from a progress task or completion
// callback.
int progress_all_drivers(session& s);

// A blocking call made of several session calls (isend then wait): the
// progress thread is not woken between them, only when the outermost
// section ends with work still in flight. Sections nest; a section begins
// and ends on one thread.
class blocking_section {
 public:
  explicit blocking_section(session& s);
  ~blocking_section();
  blocking_section(const blocking_section&) = delete;
  blocking_section& operator=(const blocking_section&) = delete;

 private:
  session& _session;
};

// Smallest eager isend whose copy goes to the progress thread; 0 when
// nothing is offloaded (no progress thread, or NMAD_COPY_OFFLOAD=off).
std::size_t copy_offload_min(const session& s);

// ---- engine events ----------------------------------------------------------------

enum class event_kind : unsigned {
  rdv_started = 0,        // a message (or pack piece) to `peer` goes by rendezvous
  rail_failed = 1,        // a driver connection to `peer` failed (`what`: driver, reason)
  unexpected_queued = 2,  // a message from `peer` arrived before its receive was posted
  progress_woken = 3,     // the progress thread woke up from a sleep
};
constexpr int event_kinds = 4;

struct event {
  event_kind kind = event_kind::rdv_started;
  int peer = -1;               // the peer's rank, -1 for none
  tag_t tag = 0;               // the message's tag (rdv_started, unexpected_queued)
  std::uint64_t size = 0;      // the message's length in bytes (same)
  std::uint64_t time_ns = 0;   // CLOCK_MONOTONIC, when it happened
  char what[96] = {};          // rail_failed: "driver: reason" (truncated)
};

// The sink receives every event of the kinds whose bit (1u << kind) is in
// `mask` (0: none). It runs on the thread where the event happens, under
// the engine's locks: it must copy the record and return, never call the
// engine, never block for long. It must stay callable for the rest of the
// process (the engine may still be inside it just after the mask changes).
// Process-wide (one engine per process). With mask 0 an event costs the
// engine one relaxed atomic load.
void set_event_sink(unsigned mask, void (*sink)(const event& e, void* arg), void* arg);

}  // namespace nmad::layer
