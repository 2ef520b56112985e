#pragma once
// nmad native C++ API: sessions, point-to-point requests and Madeleine-style
// pack/unpack.
//
// A session is this process's membership in a job (one per process). It
// holds one gate per peer; a gate sends through one track per driver. Sends
// are *collected* per gate; whenever a track has room, the session's
// strategy turns what is queued into the next packet (aggregating,
// reordering, splitting). The application never pushes packets itself.
//
// Matching: a receive names a source rank (or any_source) and a 64-bit tag
// with a mask (bits outside the mask are ignored, so mask 0 = any tag).
// Messages between a pair of processes are matched in the order they were
// sent within an *ordering domain*: tags that agree on
// options::ordering_mask (default: all bits, i.e. per (peer, tag) order).
//
// This header and the two it includes (errc.hpp, wait_policy.hpp) are the
// whole public interface: no engine header is reachable from here, and a
// request is opaque fixed-size storage the engine constructs its state in,
// so the engine's internals can change without changing libnmad.so's ABI.
//
// Requests are owned by the caller, must not move while pending, and are
// completed by progress (test, wait, wait_any, probe, or any other call that
// polls). Buffers of a pending request belong to the engine until it
// completes or is destroyed (destroying a pending request cancels it, see
// ~request). At thread_level::multiple (the default) every call is
// thread-safe; below it the application promises what the level says (as
// MPI's thread levels). Completion callbacks run on the thread that
// progressed the request, outside the engine's locks: they may start new
// requests and wait, but not restart their own request (see
// request::on_complete).
//
// Waiting: every blocking call (wait, wait_any, probe, wait_until, an
// express unpack, pack end) follows the session's wait policy: busy
// polling, blocking (sleep until a driver or another thread has news), or
// fixed-spin (poll for 100 µs, 20 µs on an oversubscribed machine, then block; the default).
// $NMAD_WAIT (busy, block, fixed-spin) and $NMAD_WAIT_SPIN_US choose it.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "errc.hpp"
#include "wait_policy.hpp"

namespace nmad {

using tag_t = std::uint64_t;
constexpr int any_source = -1;
constexpr tag_t full_mask = ~tag_t{0};

class session_impl;
class session;
struct unexpected_message;
struct request_storage;  // engine side (core/request.hpp)
struct session_factory;  // engine side (core/session_factory.hpp)

// Options of a send.
enum class send_flags : unsigned {
  none = 0,
  // The send completes only once the receiver matched it (MPI_Ssend): the
  // message always takes the rendezvous path, even when empty or small.
  synchronous = 1,
};

// Options of a send, for the overloads of isend and pack_connection that
// take them. `priority` is a hint for the strategy: 0 (normal) to 255;
// under `prio` a message of higher priority overtakes queued messages of
// other tags (never an earlier message of its own tag); strategies that
// do not order by priority ignore it. It travels in the chunk header.
struct send_options {
  send_flags flags = send_flags::none;
  std::uint8_t priority = 0;
};

// A message taken off the unexpected queue by session::improbe (matched
// probe, MPI_Mprobe): no other receive or probe can see it any more; it
// must be received with session::imrecv (exactly once).
class message_handle {
 public:
  bool valid() const { return _msg != nullptr; }

 private:
  friend class session;
  unexpected_message* _msg = nullptr;
};

// What a completed receive (or a probe) found.
struct recv_status {
  int source = -1;
  tag_t tag = 0;
  std::size_t length = 0;  // message length in bytes (probe: if known)
  errc error = errc::ok;
};

// One send or receive. Reusable after completion.
//
// Opaque: the engine's state of the request lives in _storage, constructed
// by the constructor and destroyed by the destructor (both in libnmad.so),
// so its layout is the engine's business; only sizeof/alignof(request) are
// part of the ABI. Every accessor is a call into the library.
class request {
 public:
  using callback = void (*)(request& req, void* arg);
  // Bytes reserved for the engine's state (checked by the engine at build
  // time, with room for it to grow without an ABI change).
  static constexpr std::size_t storage_size = 1024;

  request();
  request(const request&) = delete;
  request& operator=(const request&) = delete;
  // Destroying a pending request cancels it. A receive not matched yet is
  // withdrawn (it never takes a message: a later receive does); a send the
  // receiver has not seen yet is withdrawn, an unmatched rendezvous is
  // withdrawn from the receiver's queue (as cancel()). What is already
  // under way (a matched message's bytes, eager bytes the driver holds, a
  // rendezvous the receiver took) is waited for: the destructor may block
  // until that ends or its peer fails. The callback does not run (unless it
  // was already running). Afterwards nothing refers to the request or its
  // buffer. No other thread may use the request meanwhile; a request that
  // outlives its session is destroyed without a word.
  ~request();

  // Runs once when the request completes (success or error), outside the
  // engine's locks, just before completed() turns true (so the callback
  // may start other requests or wait, but not restart this one). Another
  // thread must not destroy the request before completed() is true.
  void on_complete(callback fn, void* arg);
  bool completed() const;
  errc error() const;
  // Names the failure: peer, sizes, reason. Empty on success.
  const std::string& error_message() const;
  // For receives: source, tag and length of the message received.
  recv_status status() const;

 private:
  friend struct request_storage;
  alignas(std::max_align_t) std::byte _storage[storage_size];
};

// Engine statistics (monotonic counters since session start).
struct session_stats {
  std::uint64_t packets_sent = 0;
  std::uint64_t chunks_sent = 0;        // data/control chunks in those packets
  std::uint64_t bytes_sent = 0;         // payload + headers via packets
  std::uint64_t rdv_data_sent = 0;      // bulk rendezvous transfers
  std::uint64_t packets_received = 0;
  std::uint64_t unexpected_messages = 0;
  std::uint64_t protocol_errors = 0;
  // Sends (packets and bulk transfers) posted per track index of the gates
  // (rails 3 and up counted in [3]): what each rail carried.
  std::uint64_t rail_sends[4] = {};
  // Copy offload (see session::isend): sends offloaded, and offload tasks
  // the progress thread ran that found messages to send (the others found
  // them sent already by the caller's own progress).
  std::uint64_t offloaded_sends = 0;
  std::uint64_t offload_tasks_by_thread = 0;
  // Packets that carried more than one chunk (aggregation at work).
  std::uint64_t aggregated_packets = 0;
  // Unexpected messages queued now (not a counter: it goes down as
  // receives take them) and the most ever queued at once.
  std::uint64_t unexpected_queued = 0;
  std::uint64_t unexpected_queued_max = 0;
  // Times the progress thread woke up from a sleep (0 without one).
  std::uint64_t progress_wakeups = 0;
  // Blocking calls that had to wait (their condition not met at once), and
  // the time they waited in all (ns).
  std::uint64_t waits = 0;
  std::uint64_t wait_ns = 0;
};

// Statistics of one track (one driver connection of a gate), send side,
// since the session started. Read at any time (a consistent snapshot of
// each counter, not of all of them together).
struct track_stats {
  std::string driver;               // the driver's name ("shm", "tcp", "self")
  std::uint64_t packets = 0;        // packets posted (small messages sent inline included)
  std::uint64_t chunks = 0;         // chunks those packets carried
  std::uint64_t chunks_max = 0;     // most chunks in one packet
  // Packets by the number of chunks they carried: 1, 2, 3-4, 5-8, 9-16,
  // 17-32, 33-64, 65 and more.
  std::uint64_t chunks_histogram[8] = {};
  std::uint64_t bytes = 0;          // packet bytes (headers and payload)
  std::uint64_t rdv_transfers = 0;  // bulk rendezvous transfers posted
  std::uint64_t rdv_bytes = 0;      // their bytes
  // Time the track had nothing posted while work for it was queued on its
  // gate (the strategy held it back, the driver refused or was busy).
  std::uint64_t idle_ns = 0;
  double chunks_per_packet() const { return packets ? static_cast<double>(chunks) / static_cast<double>(packets) : 0.0; }
};

// Statistics of the gate to one peer, send side.
struct gate_stats {
  int peer = -1;                    // the peer's rank (this process's own gate too)
  bool alive = true;                // false once the peer failed
  std::uint64_t rdv_requests = 0;   // messages (and pack pieces) sent by rendezvous
  std::vector<track_stats> tracks;  // by track index (rail)
};

// What the application promises about its threads (MPI's levels).
// single/funneled/serialized: one thread at a time calls the session;
// multiple: any thread, concurrently.
enum class thread_level { single, funneled, serialized, multiple };

struct session_options {
  thread_level threads = thread_level::multiple;
  std::string wait;              // "" = $NMAD_WAIT or "fixed-spin"; or busy, block
  std::string strategy;          // "" = $NMAD_STRATEGY or "default"
  std::string driver;            // "" = $NMAD_DRIVER or "auto" (per peer: shm on this host, else tcp)
  std::size_t rdv_threshold = 0; // 0 = $NMAD_RDV_THRESHOLD or driver default
  tag_t ordering_mask = full_mask;
  int connect_timeout_ms = 0;    // 0 = $NMAD_CONNECT_TIMEOUT_MS or 30000
  // Copy offload (see isend): -1 = $NMAD_COPY_OFFLOAD or its default,
  // 0 = off, n = eager isends of n bytes and up.
  long copy_offload = -1;
};

// How a piece of a packed message travels (pack_connection, isendv; see
// "Pack / unpack" below): express pieces may overtake, and are in the
// receiver's memory when its unpack() returns; cheaper ones may be delayed,
// reordered or aggregated.
enum class pack_mode { express, cheaper };

// One piece of a message sent with session::isendv.
struct send_piece {
  const void* buf;
  std::size_t len;
  pack_mode mode = pack_mode::cheaper;
};

class session {
 public:
  // Joins the job described by the environment (see core/bootstrap). Throws
  // std::runtime_error with a clear message if that fails. Registers the
  // drivers bundled with libnmad first (once per process).
  static std::unique_ptr<session> create(const session_options& opts = {});
  ~session();

  int rank() const;
  int size() const;
  std::string_view strategy_name() const;
  // Selects another registered strategy; only while nothing is queued.
  errc set_strategy(std::string_view name);

  // Starts sending len bytes at buf to `dest` with `tag`. The buffer must
  // stay untouched until the request completes. A send completes once its
  // bytes are on their way (eager) or were taken by the receiver
  // (rendezvous); while the receiver keeps its whole window of this
  // process's unexpected messages (flow control, NMAD_UNEXPECTED_MAX) a
  // send waits here, in order, until the receiver takes some.
  // Copy offload: with a progress thread and an eager message to another
  // rank (shorter than the gate's rendezvous threshold) of at least
  // layer::copy_offload_min() bytes (layer.hpp), isend only queues it and returns; the progress thread
  // builds the packet and hands it to the driver (the copy into shared
  // memory, the socket write) while the caller goes on. A wait or progress
  // call of the caller's thread before that does it itself; the order of
  // messages is kept either way. Inside a blocking section (the caller
  // waits at once) nothing is offloaded.
  errc isend(int dest, tag_t tag, const void* buf, std::size_t len,
             request& req, send_flags flags = send_flags::none);
  // The same with options (a priority for the strategy).
  errc isend(int dest, tag_t tag, const void* buf, std::size_t len,
             request& req, const send_options& opts);
  // One message made of several pieces, gathered from their buffers and
  // sent without waiting, each with its pack_mode (as pack_connection::pack
  // does, but the caller does not wait: req completes once every piece
  // has left, and the buffers must stay untouched until then). The
  // receiver sees one message of the pieces' total length (irecv, or an
  // unpack_connection piece by piece). Errors as isend; an error met after
  // the first piece completes req with it (the result is that error too).
  errc isendv(int dest, tag_t tag, std::span<const send_piece> pieces, request& req);
  // Starts receiving into buf (capacity len) a message from `source` (or
  // any_source) whose tag matches `tag` on the bits of `mask`.
  errc irecv(int source, tag_t tag, void* buf, std::size_t len, request& req,
             tag_t mask = full_mask);

  // Partitioned messages (what MPI 4's partitioned communication is made
  // of): one message of a length known at the start whose sender hands
  // its pieces to the engine one by one, in any order, as each becomes
  // ready; the receiver learns which of its own equal parts arrived.
  //
  // Sender: psend_begin opens the message (nothing leaves yet; a message
  // of length 0 leaves at once). psend_piece queues the bytes
  // [offset, offset + n) of the message from buf (which must stay
  // untouched until the request completes); each piece is a chunk of the
  // message on the gate's collect list, so the strategy decides how
  // pieces ready close together are grouped into packets (`aggreg` puts
  // what is queued into one; `default` sends each at once), and a piece
  // of the rendezvous size goes by rendezvous. Pieces must not overlap
  // and must together cover the message exactly; the request completes
  // once the last byte was handed over and every piece has left (as a
  // send). psend_piece may be called from several threads at once for
  // the same request. Destroyed before every byte was handed over, the
  // request waits only for the pieces it has (the receiver then never
  // completes: its message is not whole). Errors: invalid_argument (a piece out of the
  // message, an empty piece, the message already whole, not a request
  // opened by psend_begin); peer_failed.
  errc psend_begin(int dest, tag_t tag, std::size_t len, request& req,
                   const send_options& opts = {});
  errc psend_piece(request& req, std::size_t offset, const void* buf, std::size_t n);
  // Receiver: receives a message from `source` (not any_source) with
  // exactly `tag` into buf (capacity len), seen as parts of part_len
  // bytes each (the last one shorter if part_len does not divide len).
  // The parts need not be the sender's pieces. parrived() tells whether
  // the parts [first, first + count) are wholly in memory (true: the
  // caller may read them, even while the rest still arrives); it makes no
  // progress itself. A message longer than len is truncated (the request
  // completes with errc::truncated); one shorter completes with its
  // length in status(), and parts it does not cover never arrive.
  errc precv(int source, tag_t tag, void* buf, std::size_t len, std::size_t part_len,
             request& req);
  bool parrived(const request& req, std::size_t first, std::size_t count = 1) const;

  bool test(request& req);           // progresses; true once complete
  errc wait(request& req);           // progresses until complete
  // Waits until one of reqs completes; returns its index (-1 if reqs is
  // empty or all are null/complete-and-consumed is the caller's business).
  int wait_any(std::span<request* const> reqs);
  // Looks for a matching message not yet received; fills st if found.
  bool iprobe(int source, tag_t tag, recv_status& st, tag_t mask = full_mask);
  // Blocking probe (waits with the wait policy). If `source` failed and no
  // matching message of it is here, returns with error peer_failed instead
  // of waiting forever; so does an any_source probe once every other rank
  // failed. Receives fail the same way (see docs/ARCHITECTURE.md).
  recv_status probe(int source, tag_t tag, tag_t mask = full_mask);
  // Matched probe: like iprobe, but the message found is detached from the
  // unexpected queue into `msg` (only messages whose length is known).
  bool improbe(int source, tag_t tag, recv_status& st, message_handle& msg,
               tag_t mask = full_mask);
  // Receives a message detached by improbe into buf (capacity len); msg is
  // consumed (invalid afterwards). Truncation is reported as by irecv. A
  // detached message never received is freed with the session.
  errc imrecv(message_handle& msg, void* buf, std::size_t len, request& req);
  // Cancels a receive that has not matched yet (true: it completed with
  // errc::cancelled). For a send, a message still waiting for the
  // receiver's credit (flow control: the receiver has seen nothing of it)
  // is withdrawn at once (true, errc::cancelled); otherwise asks the
  // receiver to withdraw a rendezvous message no receive has matched yet
  // (true: asked), and the send then completes either with
  // errc::cancelled (never received) or normally. Eager sends already on
  // their way complete by themselves and are not cancelled.
  bool cancel(request& req);

  // Waits (wait policy above) until done(arg) returns true; done() is
  // called without engine locks after each round of progress. For layers
  // above the engine whose completion is not one request.
  void wait_until(bool (*done)(void*), void* arg);
  template <typename F>
  void wait_until(F&& done) {
    wait_until([](void* f) -> bool { return (*static_cast<std::remove_reference_t<F>*>(f))(); }, &done);
  }
  // Something a wait_until() condition looks at changed outside the engine
  // (another thread completed a layer's own request, e.g. an MPI
  // generalized request): wakes the threads sleeping in a wait so that
  // they look again. Any thread; cheap when nobody sleeps.
  void notify_waiters();
  // The wait policy of every blocking call from now on (any thread).
  void set_wait_policy(wait_policy policy, std::chrono::nanoseconds spin = std::chrono::microseconds(100));
  wait_policy get_wait_policy() const;
  // Its spin (fixed-spin: how long a waiting thread polls before it sleeps).
  std::chrono::nanoseconds get_wait_spin() const;

  // One round of progress; work done. A round that found nothing follows
  // the polling discipline (idle_poll()).
  int progress();
  // One round of progress without the polling discipline (never gives the
  // CPU away), for a layer that loops on its own condition and applies the
  // discipline once per iteration itself (a collective's executor). May be
  // called from a progress task or completion callback.
  int progress_quiet();
  // The polling discipline of calls that must not block: a call whose
  // progress found nothing to do ends with idle_poll(). On a contended
  // machine (more runnable threads than CPUs, measured at run time; see
  // NMAD_WAIT_YIELD in docs/CONFIGURATION.md) it gives the CPU away once,
  // so that a loop of such calls lets the processes it waits for run;
  // elsewhere it costs next to nothing. test(), iprobe(), improbe() and
  // progress() call it themselves; a layer above that polls through
  // layer::progress_all_drivers() calls it when its own test found nothing.
  void idle_poll();
  // Whether idle_poll() gives the CPU away now (the machine is contended):
  // for a layer that spins on its own memory before it polls, so that it
  // stops spinning at once where the process it waits for needs the CPU.
  bool contended() const;
  // The progress thread: "none (why)" or "thread (why): CPUs ..., priority".
  std::string progress_description() const;
  // Whether one runs: the layers above must then guard what its progress
  // tasks and completion callbacks touch, whatever the thread level.
  bool has_progress_thread() const;
  // Ends the whole job: tells the launcher (which ends every rank) and
  // exits this process with exit_code. Never returns.
  [[noreturn]] void abort(int exit_code, const std::string& message);
  session_stats stats() const;
  // Per gate and per track statistics, one entry per rank (this process
  // included), in rank order. NMAD_STATS=1 prints them when the session
  // ends.
  std::vector<gate_stats> peer_stats() const;
  // The rendezvous threshold of the gate to `peer` (0 for no such rank):
  // messages of this many bytes and up go by rendezvous.
  std::size_t rdv_threshold(int peer) const;
  // Sets every gate's, from the next message on (one already queued keeps
  // its path; the receiver takes either), clamped to [1, the longest
  // eager message + 1]; returns the value set. Any thread.
  std::size_t set_rdv_threshold(std::size_t bytes);
  // Per-peer liveness: false once the peer's connection failed.
  bool peer_alive(int rank) const;
  // Address peers use to reach this process through `driver` (default: the
  // preferred network driver); empty if that driver is not open.
  std::string local_address(std::string_view driver = {}) const;
  // The drivers the gates to other processes use ("shm", "tcp", "shm+tcp").
  std::string driver_name() const;


 private:
  friend struct session_factory;
  friend struct layer_access;  // the hooks of layer.hpp
  friend class pack_connection;
  friend class unpack_connection;
  session_impl& impl() { return *_impl; }
  explicit session(std::unique_ptr<session_impl> impl);
  std::unique_ptr<session_impl> _impl;
};

// Madeleine-style incremental messages. Sender:
//   auto p = pack_begin(s, dest, tag); p.pack(&n, sizeof n, pack_mode::express);
//   p.pack(body, n, pack_mode::cheaper); p.end();
// Receiver:
//   auto u = unpack_begin(s, src, tag); u.unpack(&n, sizeof n,
//   pack_mode::express);  /* n readable now */ u.unpack(body, n,
//   pack_mode::cheaper); u.end();  /* body readable now */
//
// Send side: express pieces are queued at high priority (they may overtake
// cheaper ones); every piece's buffer must stay valid until end() returns.
// Receive side: an express piece is in memory when unpack() returns; a
// cheaper piece only after end() (the engine may delay, reorder or
// aggregate it). The unpack sequence must cover exactly the packed bytes;
// otherwise end() reports errc::size_mismatch or errc::truncated.
// (pack_mode is declared above, with send_piece.)

class pack_connection {
 public:
  pack_connection(session& s, int dest, tag_t tag);
  // With options: every piece carries opts.priority (an express piece at
  // least 1, so it may overtake cheaper pieces of other messages).
  pack_connection(session& s, int dest, tag_t tag, const send_options& opts);
  pack_connection(pack_connection&&) = delete;
  ~pack_connection();  // ends the message if end() was not called
  errc pack(const void* buf, std::size_t len, pack_mode mode = pack_mode::cheaper);
  errc end();          // sends what is left and waits for every piece
 private:
  session& _session;
  request _req;
  bool _ended = false;
};

class unpack_connection {
 public:
  // source may be any_source; source() tells who matched once known.
  unpack_connection(session& s, int source, tag_t tag);
  unpack_connection(unpack_connection&&) = delete;
  ~unpack_connection();
  errc unpack(void* buf, std::size_t len, pack_mode mode = pack_mode::cheaper);
  errc end();          // waits for every cheaper piece
  int source() const;
 private:
  session& _session;
  request _req;
  bool _ended = false;
};

}  // namespace nmad
