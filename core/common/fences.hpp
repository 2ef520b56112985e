#pragma once
// Asymmetric fences for the "publish, then check whether anybody sleeps"
// handshakes of the message path.
//
// A writer publishes work (a ring position, a completed request) and then
// looks at a sleeper count; a sleeper raises the count and then looks for
// work. Without a full fence on both sides each could miss the other's
// store (x86 lets a load pass an earlier store) and the sleeper would sleep
// on work that is already there. The writer runs on every message, the
// sleeper only when it is about to block, so the cost is moved to the
// sleeper: it makes every other thread of the scope execute a full barrier
// (Linux membarrier, expedited), and the writer needs only a compiler
// barrier. Where membarrier is not available both sides use a real fence.
//
//   writer:  store work;   light_fence(scope);  load sleepers
//   sleeper: store count;  heavy_fence(scope);  load work
namespace nmad::fences {

enum class scope {
  process,  // threads of this process (e.g. a request completed by another thread)
  node,     // threads of every process that called enable(node) (shm peers)
};

// Registers this process for the heavy side of `s` (once; thread-safe).
// Returns whether the asymmetric form is in use; if not, light_fence(s) is
// a full fence.
bool enable(scope s);

// Whether enable(s) succeeded.
bool asymmetric(scope s);

inline void light_fence(scope s) {
  if (asymmetric(s)) __atomic_signal_fence(__ATOMIC_SEQ_CST);
  else __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

// The sleeper's side: a full barrier on every thread of the scope.
void heavy_fence(scope s);

}  // namespace nmad::fences
