// Engine event traces: the per-thread buffers and the rank's file (see
// api/nmad/services/trace.hpp).
#include "api/nmad/services/trace.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <vector>

namespace nmad::trace {

namespace detail {
std::atomic<bool> g_enabled{false};
// Initial-exec like the engine's other thread-locals: a plain %fs-relative
// load on every hook (a pointer: see api/nmad/services/thread_heap.hpp).
[[gnu::tls_model("initial-exec")]] thread_local thread_buffer* t_buffer = nullptr;
}  // namespace detail

namespace {

using detail::thread_buffer;

// Every buffer ever attached, the file and whether a session traces: under
// g_lock (never taken on the message path, only to attach a thread, write
// a full buffer, at a thread's end, start and stop).
std::mutex g_lock;
std::vector<thread_buffer*>& buffers() {
  static std::vector<thread_buffer*>* v = new std::vector<thread_buffer*>;  // outlives every thread
  return *v;
}
std::vector<thread_buffer*>& free_buffers() {
  static std::vector<thread_buffer*>* v = new std::vector<thread_buffer*>;
  return *v;
}
int g_fd = -1;
bool g_active = false;
std::string g_file;
pthread_key_t g_exit_key;
pthread_once_t g_exit_once = PTHREAD_ONCE_INIT;

std::uint64_t monotonic_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<std::uint64_t>(t.tv_sec) * 1000000000u + static_cast<std::uint64_t>(t.tv_nsec);
}

// Writes all of [p, p + n) (g_lock held). A failing write stops tracing
// (said once on stderr): the job goes on.
void write_all(const void* p, std::size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0 && g_fd >= 0) {
    const ssize_t w = ::write(g_fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      std::fprintf(stderr, "nmad: NMAD_TRACE: writing '%s' failed (%s); tracing stops\n", g_file.c_str(),
                   w < 0 ? std::strerror(errno) : "no space");
      ::close(g_fd);
      g_fd = -1;
      detail::g_enabled.store(false, std::memory_order_relaxed);
      return;
    }
    c += w;
    n -= static_cast<std::size_t>(w);
  }
}

// Writes what b holds and the file lacks (g_lock held).
void write_pending(thread_buffer* b) {
  const std::uint32_t fill = b->fill.load(std::memory_order_acquire);
  if (fill > b->written) write_all(b->records + b->written, (fill - b->written) * sizeof(record));
  b->written = fill;
}

// A clock record: this instant as counter and CLOCK_MONOTONIC ns.
void emit_clock() {
  // The tightest of a few (counter, clock, counter) readings: a thread
  // preempted between two reads would pair the clock with a counter value
  // off by its time away, and shift every record of the process in the
  // merged timeline against the other ranks'.
  std::uint64_t best_gap = ~std::uint64_t{0}, best_at = 0, best_ns = 0;
  for (int i = 0; i < 16; ++i) {
    const std::uint64_t before = now();
    const std::uint64_t ns = monotonic_ns();
    const std::uint64_t after = now();
    if (after - before < best_gap) {
      best_gap = after - before;
      best_at = before + (after - before) / 2;
      best_ns = ns;
    }
  }
  emit_at(best_at, event::clock, -1, 0, 0, 0, 0, best_ns);
}

// At a thread's end: its records to the file, its buffer to the free list.
void thread_ended(void* p) {
  auto* b = static_cast<thread_buffer*>(p);
  std::lock_guard l(g_lock);
  write_pending(b);
  b->fill.store(0, std::memory_order_relaxed);
  b->written = 0;
  free_buffers().push_back(b);
  detail::t_buffer = nullptr;
}

void make_exit_key() { pthread_key_create(&g_exit_key, thread_ended); }

}  // namespace

namespace detail {

thread_buffer* attach_thread() {
  pthread_once(&g_exit_once, make_exit_key);
  thread_buffer* b;
  {
    std::lock_guard l(g_lock);
    if (!free_buffers().empty()) {
      b = free_buffers().back();
      free_buffers().pop_back();
    } else {
      b = new thread_buffer;
      b->records = new record[thread_buffer::kRecords];
      buffers().push_back(b);
    }
    b->tid = static_cast<std::uint32_t>(::syscall(SYS_gettid));
  }
  t_buffer = b;
  pthread_setspecific(g_exit_key, b);
  return b;
}

void write_full(thread_buffer* b) {
  {
    std::lock_guard l(g_lock);
    write_pending(b);
    b->written = 0;
    b->fill.store(0, std::memory_order_relaxed);
  }
  if (enabled()) emit_clock();  // one more point of the clock line
}

}  // namespace detail

const char* event_name(event e) {
  switch (e) {
    case event::clock: return "clock";
    case event::send_submit: return "send_submit";
    case event::send_inline: return "send_inline";
    case event::recv_submit: return "recv_submit";
    case event::chunk: return "chunk";
    case event::packet_built: return "packet_built";
    case event::packet_post: return "packet_post";
    case event::packet_done: return "packet_done";
    case event::data_post: return "data_post";
    case event::data_done: return "data_done";
    case event::packet_arrive: return "packet_arrive";
    case event::chunk_arrive: return "chunk_arrive";
    case event::match: return "match";
    case event::send_done: return "send_done";
    case event::recv_done: return "recv_done";
    case event::rdv_ready_sent: return "rdv_ready_sent";
    case event::rdv_ready: return "rdv_ready";
    case event::rdv_data_done: return "rdv_data_done";
    case event::task_run: return "task_run";
    case event::wait: return "wait";
    case event::coll_step: return "coll_step";
    case event::session_begin: return "session_begin";
    case event::session_end: return "session_end";
    case event::rdv_pull: return "rdv_pull";
  }
  return nullptr;
}

std::string file_name(const std::string& pattern, int rank, int pid) {
  if (pattern.find("%r") == std::string::npos && pattern.find("%p") == std::string::npos)
    return pattern + "." + std::to_string(rank);
  std::string out;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size()) {
      const char c = pattern[i + 1];
      if (c == 'r' || c == 'p' || c == '%') {
        out += c == 'r' ? std::to_string(rank) : c == 'p' ? std::to_string(pid) : "%";
        ++i;
        continue;
      }
    }
    out += pattern[i];
  }
  return out;
}

bool start(const std::string& pattern, int rank, int size) {
  if (pattern.empty() || pattern == "0") return false;
  {
    std::lock_guard l(g_lock);
    if (g_active) return false;  // another session of this process traces
    const std::string name = file_name(pattern, rank, static_cast<int>(::getpid()));
    const int fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
      throw std::runtime_error("nmad: NMAD_TRACE=" + pattern + ": cannot create '" + name + "': " +
                               std::strerror(errno));
    g_fd = fd;
    g_file = name;
    g_active = true;
    // Records left from an earlier session stay out of this file.
    for (thread_buffer* b : buffers()) b->written = b->fill.load(std::memory_order_acquire);
    file_header h{};
    std::memcpy(h.magic, file_header::kMagic, sizeof h.magic);
    h.version = file_header::kVersion;
    h.record_size = sizeof(record);
    h.rank = rank;
    h.size = size;
    h.pid = static_cast<std::uint32_t>(::getpid());
#if defined(__x86_64__)
    h.counter_is_tsc = 1;
#endif
    ::gethostname(h.host, sizeof h.host - 1);
    write_all(&h, sizeof h);
  }
  detail::g_enabled.store(true, std::memory_order_relaxed);
  // Two clock points a millisecond apart: the counter's rate is known
  // even if the process never reaches stop().
  emit_clock();
  const std::uint64_t until = monotonic_ns() + 1000000;
  while (monotonic_ns() < until) {
  }
  emit_clock();
  emit(event::session_begin, size);
  return true;
}

void stop() {
  if (!enabled()) {
    std::lock_guard l(g_lock);
    if (!g_active) return;
  }
  emit(event::session_end);
  emit_clock();
  detail::g_enabled.store(false, std::memory_order_relaxed);
  std::lock_guard l(g_lock);
  for (thread_buffer* b : buffers()) write_pending(b);
  if (g_fd >= 0) ::close(g_fd);
  g_fd = -1;
  g_active = false;
}

}  // namespace nmad::trace
