// A rank that holds shared-memory connections to every peer, for
// shm_cleanup_test and ofi_multiprocess_test. After session set-up and one
// message with each peer it counts the /dev/shm entries that carry its own
// pid (none should remain: the shm driver unlinks its names once every peer
// has opened them, the ofi driver over libfabric's shm provider its
// segment, "nmad_<hex>_<pid>") and prints
//   held <n> pid <pid> rank <rank>
// then, by mode: `hold` sleeps (the test kills the launcher meanwhile),
// `die` kills rank 1 with SIGKILL while the others wait for it to fail,
// `quick` ends at once (a job that only sets up and closes), `term` prints
// which library handles SIGINT and SIGTERM ("handler of SIGTERM: default")
// and whether libfabric is mapped ("libfabric loaded: no"), and rank 1
// then raises SIGTERM (it must end by that signal).
#include <dlfcn.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>

#include "api/nmad/nmad.hpp"

using namespace nmad;

namespace {

int count_mine() {
  const std::string infix = "-" + std::to_string(::getpid()) + "-";
  const std::string suffix = "_" + std::to_string(::getpid());
  int n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm", ec)) {
    const std::string name = e.path().filename().string();
    const bool shm_name = name.rfind("nmad-", 0) == 0 && name.find(infix) != std::string::npos;
    const bool ofi_name = name.rfind("nmad_", 0) == 0 && name.size() > suffix.size() &&
                          name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    if (shm_name || ofi_name) {
      std::printf("still in /dev/shm: %s\n", name.c_str());
      ++n;
    }
  }
  return n;
}

// "default", "ignored", or the file name of the library the handler is in.
std::string handler_owner(int sig) {
  struct sigaction sa {};
  ::sigaction(sig, nullptr, &sa);
  void* h = (sa.sa_flags & SA_SIGINFO) ? reinterpret_cast<void*>(sa.sa_sigaction)
                                       : reinterpret_cast<void*>(sa.sa_handler);
  if (sa.sa_handler == SIG_DFL && !(sa.sa_flags & SA_SIGINFO)) return "default";
  if (sa.sa_handler == SIG_IGN && !(sa.sa_flags & SA_SIGINFO)) return "ignored";
  Dl_info d{};
  if (::dladdr(h, &d) && d.dli_fname) return std::filesystem::path(d.dli_fname).filename().string();
  return "unknown";
}

bool libfabric_mapped() {
  std::FILE* f = std::fopen("/proc/self/maps", "r");
  if (!f) return false;
  char line[4096];
  bool found = false;
  while (!found && std::fgets(line, sizeof line, f)) found = std::strstr(line, "/libfabric.so") != nullptr;
  std::fclose(f);
  return found;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "hold";
  auto s = session::create();
  const int me = s->rank();
  for (int p = 0; p < s->size(); ++p) {
    if (p == me) continue;
    request a, b;
    int in = -1;
    s->isend(p, 1, &me, sizeof me, a);
    s->irecv(p, 1, &in, sizeof in, b);
    if (s->wait(a) != errc::ok || s->wait(b) != errc::ok || in != p) {
      std::fprintf(stderr, "shm_hold_worker rank %d: hello with rank %d failed\n", me, p);
      return 1;
    }
  }
  std::printf("held %d pid %d rank %d\n", count_mine(), static_cast<int>(::getpid()), me);
  std::fflush(stdout);
  if (mode == "quick") return 0;
  if (mode == "term") {
    std::printf("rank %d: handler of SIGINT: %s\n", me, handler_owner(SIGINT).c_str());
    std::printf("rank %d: handler of SIGTERM: %s\n", me, handler_owner(SIGTERM).c_str());
    std::printf("rank %d: libfabric loaded: %s\n", me, libfabric_mapped() ? "yes" : "no");
    std::fflush(stdout);
    if (me == 1) ::raise(SIGTERM);
    std::this_thread::sleep_for(std::chrono::seconds(60));
    return 0;
  }
  if (mode == "die" && me == 1) ::raise(SIGKILL);
  if (mode == "die") {
    // Wait for the dead rank to be noticed: a receive from it fails.
    int x = 0;
    request r;
    s->irecv(1, 2, &x, sizeof x, r);
    const errc e = s->wait(r);
    std::printf("rank %d: receive from the killed rank ended: %s\n", me, std::string(to_string(e)).c_str());
    return e == errc::peer_failed ? 0 : 1;
  }
  std::this_thread::sleep_for(std::chrono::seconds(60));
  return 0;
}
