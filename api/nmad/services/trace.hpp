#pragma once
// Engine event traces (NMAD_TRACE, docs/TRACING.md).
//
// How it works. With NMAD_TRACE=<file> a session records what its engine
// does as fixed-size binary records: one per event (a send submitted, a
// packet built with its chunks, posted and completed on a track, a packet
// and its chunks arriving, a receive matched, rendezvous steps, progress
// task runs, waits, collective steps). Every thread appends to a buffer of
// its own (no lock, no atomic read-modify-write on the message path: one
// relaxed load, a timestamp, a 48-byte store and a release store of the
// buffer's fill level). A buffer is written to the rank's file when it is
// full, when its thread ends and when the session ends. `nmad-trace`
// (tools/nmad_trace.cpp) merges the files of a job into a Chrome trace
// event JSON timeline (Perfetto, chrome://tracing) or renders a PNG.
//
// Off (the default), each hook costs one predictable branch on a relaxed
// load: every hook in the engine is written
//   if (trace::enabled()) trace::emit(trace::event::..., ...);
//
// Clock. Records carry the CPU's time-stamp counter on x86-64 (constant
// and common to the cores of a host where the CPU says constant_tsc), else
// CLOCK_MONOTONIC nanoseconds. `clock` records (written when tracing
// starts, at every buffer write and when it stops) pair a counter value
// with CLOCK_MONOTONIC nanoseconds; the reader converts every record to
// CLOCK_MONOTONIC nanoseconds by the line through them. CLOCK_MONOTONIC is
// common to the processes of a host, so the ranks of a host share one time
// axis (ranks on different hosts: each host its own).
//
// File. `<file>.<rank>`, or the pattern itself with %r replaced by the rank
// and %p by the process id when it contains either. A file_header, then
// records in blocks (each block one thread's records in time order; blocks
// of different threads interleave). A reader must check the header's
// magic, version and record size and that the file ends on a record
// boundary. The records of one thread are in time order in the file
// (a record is stamped when it is written; spans are stamped at their end).
//
// Sessions. One session of a process traces at a time (the first that
// starts with NMAD_TRACE set; the file name takes its rank); later
// sessions trace once it stopped.
//
// Thread safety: enabled(), emit() and now() from any thread; start() and
// stop() by a session's set-up and shutdown.
#include <atomic>
#include <cstdint>
#include <string>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif
#include <time.h>

namespace nmad::trace {

// What a record means. Fields not named are 0. `peer` is the other rank
// (-1: none), `track` the rail, `tag`/`seq` the message's tag and sequence
// number in its ordering domain, `len` a byte count. The numbers are part
// of the file format: never renumber, only add.
enum class event : std::uint16_t {
  clock = 1,          // ts: counter; extra: CLOCK_MONOTONIC ns at the same instant
  send_submit = 2,    // isend/pack: peer, tag, len (message length; pack: 0)
  send_inline = 3,    // a whole small message posted and completed at once: peer, track, tag, seq, len
  recv_submit = 4,    // irecv: peer (-1: any source), tag, len (capacity)
  chunk = 5,          // a chunk put into the packet being built on this thread: tag, seq,
                      // len (bytes of payload), extra = offset << 8 | chunk kind
  packet_built = 6,   // the packet those chunks (the chunk records just before it on this
                      // thread) form: peer, track, len (bytes), seq = number of chunks
  packet_post = 7,    // a packet handed to the driver: peer, track, len; extra = packet id
  packet_done = 8,    // its send completed: peer, track, len; extra = packet id
  data_post = 9,      // rendezvous data handed to the driver: peer, track, len, tag = cookie; extra = id
  data_done = 10,     // its send completed: peer, track, len; extra = id
  packet_arrive = 11, // a packet received: peer, len, seq = 1 for the compact one-message form
  chunk_arrive = 12,  // one of its chunks: peer, tag, seq, len, extra = offset << 8 | chunk kind
  match = 13,         // a receive bound to a message: peer, tag, seq, len (message length if known)
  send_done = 14,     // a send request completed: peer, tag, len
  recv_done = 15,     // a receive request completed: peer, tag, seq, len (bytes received)
  rdv_ready_sent = 16,// receiver queued a ready-to-receive: peer, track, len; extra = offset
  rdv_ready = 17,     // sender got a ready-to-receive: peer, track, len; extra = offset
  rdv_data_done = 18, // receiver's rendezvous data all in: peer, track, len; extra = offset
  task_run = 19,      // a progress task ran: ts = its end; len = duration (counter units); extra = work
  wait = 20,          // a wait that did not find its condition met at once: ts = its end;
                      // len = duration (counter units)
  coll_step = 21,     // a collective's step: peer, tag = operation id, seq = step, len = bytes
  session_begin = 22, // peer = number of ranks
  session_end = 23,
  rdv_pull = 24,      // receiver reads rendezvous data from the sender's memory: peer, track, tag,
                      // seq, len; extra = offset
  last_ = rdv_pull
};

// Chunk kinds as in core/collect/chunk_entry.hpp's chunk_kind (the reader
// prints their names; kept here so that this header stands alone).
inline const char* chunk_kind_name(unsigned k) {
  switch (k) {
    case 1: return "data";
    case 2: return "rdv_req";
    case 3: return "rtr";
    case 4: return "cancel_req";
    case 5: return "cancel_ack";
    case 6: return "credit";
    case 7: return "want";
    case 8: return "offer_ack";
    case 9: return "failure_notice";
    default: return "?";
  }
}

const char* event_name(event e);  // "packet_post", ...; nullptr: not an event

struct record {
  std::uint64_t ts;      // counter (see Clock)
  std::uint16_t kind;    // event
  std::uint16_t track;
  std::uint32_t tid;     // kernel thread id
  std::int32_t peer;
  std::uint32_t seq;
  std::uint64_t tag;
  std::uint64_t len;
  std::uint64_t extra;
};
static_assert(sizeof(record) == 48);

struct file_header {
  static constexpr char kMagic[8] = {'N', 'M', 'A', 'D', 'T', 'R', 'C', '\n'};
  static constexpr std::uint32_t kVersion = 1;
  char magic[8];
  std::uint32_t version;
  std::uint32_t record_size;  // sizeof(record)
  std::int32_t rank;
  std::int32_t size;
  std::uint32_t pid;
  std::uint32_t counter_is_tsc;  // 1: ts is the time-stamp counter; 0: CLOCK_MONOTONIC ns
  char host[64];                 // gethostname(), NUL-terminated
  char reserved[32];
};
static_assert(sizeof(file_header) == 128);

// ---- recording -----------------------------------------------------------------

// The counter records carry.
inline std::uint64_t now() {
#if defined(__x86_64__)
  return __rdtsc();
#else
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<std::uint64_t>(t.tv_sec) * 1000000000u + static_cast<std::uint64_t>(t.tv_nsec);
#endif
}

namespace detail {
extern std::atomic<bool> g_enabled;

// One thread's buffer (owned by the process-wide list of buffers; reused
// by a later thread once its thread ended).
struct thread_buffer {
  static constexpr std::uint32_t kRecords = 16384;  // 768 KiB
  std::atomic<std::uint32_t> fill{0};  // records written (owner stores, writers load)
  std::uint32_t written = 0;           // of them, already in the file (under the buffer's lock)
  std::uint32_t tid = 0;
  record* records = nullptr;
};
[[gnu::tls_model("initial-exec")]] extern thread_local thread_buffer* t_buffer;
thread_buffer* attach_thread();       // first record of a thread
void write_full(thread_buffer* b);    // the buffer is full: to the file
}  // namespace detail

// Whether a session traces: the one branch a hook costs when off.
inline bool enabled() { return detail::g_enabled.load(std::memory_order_relaxed); }

// Appends one record to this thread's buffer (call only when enabled()).
inline void emit_at(std::uint64_t ts, event kind, int peer, unsigned track, std::uint64_t tag, std::uint32_t seq,
                    std::uint64_t len, std::uint64_t extra) {
  detail::thread_buffer* b = detail::t_buffer;
  if (!b) [[unlikely]] b = detail::attach_thread();
  std::uint32_t i = b->fill.load(std::memory_order_relaxed);
  if (i == detail::thread_buffer::kRecords) [[unlikely]] {
    detail::write_full(b);
    i = 0;
  }
  b->records[i] = record{ts, static_cast<std::uint16_t>(kind), static_cast<std::uint16_t>(track), b->tid,
                         peer, seq, tag, len, extra};
  b->fill.store(i + 1, std::memory_order_release);
}
inline void emit(event kind, int peer = -1, unsigned track = 0, std::uint64_t tag = 0, std::uint32_t seq = 0,
                 std::uint64_t len = 0, std::uint64_t extra = 0) {
  emit_at(now(), kind, peer, track, tag, seq, len, extra);
}

// A record whose instant comes before a call that hands something to
// another process (a packet to a driver), written after the call once its
// outcome is known: stamp() before, emit_stamped() after. It keeps the
// earlier time unless this thread wrote records meanwhile (then it takes
// the current time, so that a thread's records stay in time order).
struct stamp {
  std::uint64_t ts = 0;
  std::uint32_t fill = 0;
};
inline stamp stamp_now() {
  const detail::thread_buffer* b = detail::t_buffer;
  return {now(), b ? b->fill.load(std::memory_order_relaxed) : ~std::uint32_t{0}};
}
inline void emit_stamped(stamp s, event kind, int peer, unsigned track, std::uint64_t tag, std::uint32_t seq,
                         std::uint64_t len, std::uint64_t extra = 0) {
  const detail::thread_buffer* b = detail::t_buffer;
  const bool quiet = b && b->fill.load(std::memory_order_relaxed) == s.fill;
  emit_at(quiet ? s.ts : now(), kind, peer, track, tag, seq, len, extra);
}

// The file a pattern names for a rank: pattern.<rank>, or %r and %p
// replaced when it holds either ("%%" is one '%').
std::string file_name(const std::string& pattern, int rank, int pid);

// A session starts tracing (pattern: NMAD_TRACE's value; empty or "0":
// off). Returns whether this session traces; throws std::runtime_error
// naming the file when it cannot be created.
bool start(const std::string& pattern, int rank, int size);
// The tracing session ends: every thread's records to the file, closed.
void stop();

}  // namespace nmad::trace
