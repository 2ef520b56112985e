// Asymmetric fences (see fences.hpp).
#include "core/common/fences.hpp"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "api/nmad/services/config.hpp"

namespace nmad::fences {
namespace {

long membarrier(int cmd) { return ::syscall(__NR_membarrier, cmd, 0, 0); }

std::atomic<bool> g_process{false}, g_node{false};
std::once_flag g_process_once, g_node_once;

// NMAD_ASYMMETRIC_FENCES=0 keeps full fences on both sides (for comparison).
// (A bad value is refused by the start-up check; here it keeps the default.)
bool allowed() {
  try {
    return config::flag("NMAD_ASYMMETRIC_FENCES");
  } catch (const std::exception&) {
    return true;
  }
}

// Registers once for `cmd` if the kernel has `expedited`; sets `flag`.
bool register_once(std::once_flag& once, std::atomic<bool>& flag, int expedited, int cmd) {
  std::call_once(once, [&] {
    if (!allowed()) return;
    const long q = membarrier(MEMBARRIER_CMD_QUERY);
    if (q > 0 && (q & expedited) && membarrier(cmd) == 0) flag.store(true, std::memory_order_release);
  });
  return flag.load(std::memory_order_acquire);
}

}  // namespace

bool enable(scope s) {
  return s == scope::process
             ? register_once(g_process_once, g_process, MEMBARRIER_CMD_PRIVATE_EXPEDITED,
                             MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED)
             : register_once(g_node_once, g_node, MEMBARRIER_CMD_GLOBAL_EXPEDITED,
                             MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED);
}

bool asymmetric(scope s) {
  return (s == scope::process ? g_process : g_node).load(std::memory_order_relaxed);
}

void heavy_fence(scope s) {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  if (s == scope::process) {
    if (asymmetric(s)) membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED);
    return;
  }
  // Peers may use the light side even if this process could not register
  // (or chose not to): reach them whenever the kernel has the command.
  static const bool supported = [] {
    const long q = membarrier(MEMBARRIER_CMD_QUERY);
    return q > 0 && (q & MEMBARRIER_CMD_GLOBAL_EXPEDITED);
  }();
  if (supported) membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED);
}

}  // namespace nmad::fences
