// Asymmetric fences (see fences.hpp).
#include "core/common/fences.hpp"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace nmad::fences {
namespace {

long membarrier(int cmd) { return ::syscall(__NR_membarrier, cmd, 0, 0); }

std::atomic<bool> g_process{false}, g_node{false};
std::once_flag g_process_once, g_node_once;

// NMAD_ASYMMETRIC_FENCES=0 keeps full fences on both sides (for comparison).
bool allowed() {
  const char* v = std::getenv("NMAD_ASYMMETRIC_FENCES");
  return !(v && std::strcmp(v, "0") == 0);
}

}  // namespace

bool enable(scope s) {
  if (s == scope::process) {
    std::call_once(g_process_once, [] {
      if (!allowed()) return;
      const long q = membarrier(MEMBARRIER_CMD_QUERY);
      if (q > 0 && (q & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
          membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0)
        g_process.store(true, std::memory_order_release);
    });
    return g_process.load(std::memory_order_acquire);
  }
  std::call_once(g_node_once, [] {
    if (!allowed()) return;
    const long q = membarrier(MEMBARRIER_CMD_QUERY);
    if (q > 0 && (q & MEMBARRIER_CMD_GLOBAL_EXPEDITED) &&
        membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) == 0)
      g_node.store(true, std::memory_order_release);
  });
  return g_node.load(std::memory_order_acquire);
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
