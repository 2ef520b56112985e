#pragma once
// nmad::coll — collective operations as *schedules*.
//
// A schedule is a list of ROUNDS; each round holds
//   * communication steps (send / receive of a byte range to / from a group
//     rank, with a small per-algorithm tag), all posted together when the
//     round starts, and
//   * local steps (reduce / copy), run in the order they were added once
//     every communication step of the round has completed.
// Round k+1 starts only when round k is entirely finished: that is the one
// dependency rule ("a step may depend on anything of the previous rounds";
// a receive followed by a reduce of what it received goes in ONE round).
//
// A schedule is BUILT once (see algorithms.hpp: build_allreduce(), ...),
// then EXECUTED by an executor, which any progress context may advance:
//
//   executor ex(build_allreduce(...), tr, tr.next_sequence());  // tr: a session_transport
//   while (!ex.advance()) { /* compute, or yield */ }   // never blocks
//   if (ex.error() != errc::ok) ... ex.error_message() ...
//
// Blocking collectives call coll::run() (advance until done); non-blocking
// ones keep the executor (e.g. inside an MPI_Request) and call advance() from
// MPI_Test/MPI_Wait or from an engine progress task.
//
// BUFFERS. Steps hold raw pointers: into the caller's send/receive buffers
// (which must stay valid and untouched, as for any pending MPI operation,
// until the executor is done) or into temporaries owned by the schedule
// (schedule::temp(), heap blocks that never move, freed with the schedule).
// A schedule can keep other objects alive for its lifetime (keep()): the MPI
// binding attaches its reducer and packing buffers there.
//
// OWNERSHIP. The executor owns its schedule (moved in) and the transport
// requests of the steps in flight. The transport and the reducer are
// borrowed: they must outlive the executor (or be kept alive with keep()).
// An executor must not be destroyed while requests are in flight: its
// destructor completes the schedule first (after an error: cancels the
// receives and drains the sends).
//
// THREAD SAFETY. One thread advances a given executor at a time. advance()
// enforces it with a try-lock: a call made while another thread is inside
// advance() returns false at once without doing anything, so an MPI_Wait
// spinning on advance() and a progress thread calling advance() may race
// safely. done()/error() may be read from any thread once advance() returned
// true (release/acquire on the done flag). Distinct executors are
// independent; they share the transport, which must be thread-safe (the
// session transport is: nmad::session is).
//
// TAGS. Each communication step carries a local tag (tag_bits_local bits)
// that the algorithm chooses identically on sender and receiver; the
// executor combines it with the collective's SEQUENCE number (tag_bits_seq
// bits) into a collective tag of tag_bits_total bits, which the transport
// maps into its own tag space. Two messages between the same pair with the
// same collective tag match in posting order (per-(peer, tag) ordering of
// the engine). Collectives with different sequence numbers never cross-match,
// so consecutive (or concurrent, non-blocking) collectives are independent as
// long as every member gives the same collective the same sequence number
// (MPI's rule that all members call collectives in the same order gives it).
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "api/nmad/nmad.hpp"

namespace nmad::coll {

using nmad::errc;
using nmad::request;
using nmad::tag_t;

constexpr unsigned tag_bits_local = 20;  // algorithm-chosen tag per step
constexpr unsigned tag_bits_seq = 20;    // sequence number of the collective
constexpr unsigned tag_bits_total = tag_bits_local + tag_bits_seq;  // 40

// Reduction of `count` elements: inout[k] = in[k] (op) inout[k] — the
// operand order of MPI_User_function / MPI_Reduce_local. Schedules always
// pass the operand from LOWER group ranks as `in`, so non-commutative ops
// get the MPI order r0 op r1 op ... op r(n-1). apply() may be called from
// any thread that advances a schedule (one at a time per schedule).
class reducer {
 public:
  virtual ~reducer() = default;
  virtual void apply(const void* in, void* inout, std::size_t count) = 0;
  // out = in (op) b without writing `in` or `b`: out is b, in, or a buffer
  // overlapping neither; `bytes` is the operands' length. Lets an algorithm
  // write its result into a buffer of its own instead of into one a peer
  // has just read (writing such cache lines costs a round of cross-core
  // invalidations) or after a full copy. The default copies b to out and
  // calls apply(); reducers with kernels taking a separate output override.
  virtual void apply_into(const void* in, const void* b, void* out, std::size_t count, std::size_t bytes);
  // Commutative ops allow algorithms that reorder operands (Rabenseifner,
  // pairwise reduce-scatter); non-commutative ones never get them.
  virtual bool commutative() const { return true; }
};

// Point-to-point over group ranks 0..size()-1. `tag` is a collective tag
// (< 2^tag_bits_total, see TAGS above). Requests are nmad::request (caller
// owned, must not move while pending); test() returns true once complete
// (success or error: read req.error()). Implementations must be
// thread-safe if several executors may run on different threads.
class transport {
 public:
  virtual ~transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual errc isend(int peer, tag_t tag, const void* ptr, std::size_t len, request& req) = 0;
  virtual errc irecv(int peer, tag_t tag, void* ptr, std::size_t len, request& req) = 0;
  // True once req is complete. Need not progress anything: the executor
  // calls progress() once before it tests the requests of a round.
  virtual bool test(request& req) = 0;
  // One round of progress, WITHOUT the polling discipline (never gives the
  // CPU away): whoever loops on advance() decides how to wait (a blocking
  // collective's wait_until, MPI_Test's progress, the progress hook), so
  // one advance() costs one round however many requests it tests.
  // Default: nothing (a transport whose test() progresses).
  virtual void progress() {}
  // Cancels a receive that has not matched (used after an error); true if
  // cancelled. Default: not supported.
  virtual bool cancel(request& req) { return false; }
  // Blocks until done(arg) is true (a blocking collective waiting for its
  // executor). Default: calls it in a loop; a transport over a session
  // waits with the session's wait policy instead (sleeping when idle).
  virtual void wait_until(bool (*done)(void*), void* arg) {
    while (!done(arg)) {
    }
  }
};

struct step {
  enum class kind : std::uint8_t { send, recv, reduce, reduce_into, copy, call };
  kind k = kind::send;
  int peer = -1;              // send/recv: group rank
  std::uint32_t tag = 0;      // send/recv: local tag (< 2^tag_bits_local)
  const std::byte* src = nullptr;  // send: data; reduce(_into): `in`; copy: source
  const std::byte* src2 = nullptr;  // reduce_into: the second operand
  std::byte* dst = nullptr;        // recv: buffer; reduce: `inout`; reduce_into: result; copy: target
  std::size_t bytes = 0;           // send/recv/copy/reduce_into: length in bytes
  std::size_t count = 0;           // reduce: element count
  reducer* red = nullptr;          // reduce
  std::function<void()>* fn = nullptr;  // call (owned by the schedule)
};

// Runs one local step (reduce, reduce_into, copy, call): what the executor
// does once a round's communication completed. May throw (a failing
// reducer or call).
void run_local_step(const step& s);

struct round {
  std::vector<step> comm;    // posted together when the round starts
  std::vector<step> local;   // run in order once every comm step completed
  bool empty() const { return comm.empty() && local.empty(); }
};

class schedule {
 public:
  schedule() = default;
  schedule(schedule&&) = default;
  schedule& operator=(schedule&&) = default;
  schedule(const schedule&) = delete;
  schedule& operator=(const schedule&) = delete;

  // --- building ---------------------------------------------------------
  // Ends the current round: later steps wait for everything added so far.
  // (No-op when the current round is still empty.)
  void new_round();
  void send(int peer, std::uint32_t tag, const void* buf, std::size_t bytes);
  void recv(int peer, std::uint32_t tag, void* buf, std::size_t bytes);
  // inout = in (op) inout, after this round's communication.
  void reduce(reducer& r, const void* in, void* inout, std::size_t count);
  // out = in (op) b (see reducer::apply_into); `bytes` = one operand's size.
  void reduce_into(reducer& r, const void* in, const void* b, void* out, std::size_t count, std::size_t bytes);
  // Skipped when bytes == 0 or src == dst.
  void copy(const void* src, void* dst, std::size_t bytes);
  // Runs fn() as a local step (after this round's communication, in order
  // with the other local steps), e.g. unpacking a received temporary into a
  // non-contiguous user buffer at the end of a collective. fn runs on
  // whichever thread advances the executor (possibly an engine progress
  // task, under the engine's task lock): it must not block or call the
  // engine.
  void call(std::function<void()> fn);
  // A schedule-owned buffer (stable address, lives as long as the schedule).
  std::byte* temp(std::size_t bytes);
  // Appends every round of `other` after this schedule's (a round boundary
  // in between), its group rank i becoming peer_map[i] here: a schedule
  // built for a sub-group (e.g. one side of an intercommunicator) becomes a
  // phase of a schedule over a larger group. Its tag blocks are shifted
  // past this schedule's, and its temporaries, kept objects and call steps
  // move along (their addresses do not change).
  void append(schedule&& other, std::span<const int> peer_map);
  // Keeps any object alive as long as the schedule (reducer, pack buffers).
  void keep(std::shared_ptr<void> obj) { _kept.push_back(std::move(obj)); }
  // A step run before round 0 at each executor::restart() (not at the
  // first run: the builder did that work already), e.g. packing a
  // non-contiguous send buffer into its temporary again, since a replayed
  // schedule (persistent collective) sends the buffer's contents at each
  // start. Same rules as call().
  void on_restart(std::function<void()> fn) {
    if (fn) _restarts.push_back(std::move(fn));
  }
  const std::vector<std::function<void()>>& restart_steps() const { return _restarts; }
  // Reserves a block of 2^tag_step_bits local tags for one algorithm phase;
  // every member must build the same phases in the same order.
  static constexpr unsigned tag_step_bits = 14;
  std::uint32_t tag_block();
  // Blocks reserved so far (the next tag_block()).
  std::uint32_t next_block() const { return _next_block; }
  // Reserves every block below `block` (no-op if already past it): a phase
  // that only some members build starts at the same block on all of them.
  void skip_to_block(std::uint32_t block);
  // Tag of step `i` in block `block` (i wraps modulo 2^tag_step_bits).
  static std::uint32_t make_tag(std::uint32_t block, std::size_t i);

  // --- inspection -------------------------------------------------------
  const std::vector<round>& rounds() const { return _rounds; }
  std::size_t max_comm_per_round() const;
  std::size_t temp_bytes() const { return _temp_bytes; }
  std::string describe() const;  // one line per round, for debugging/tests

 private:
  round& current();
  std::vector<round> _rounds;
  bool _open = false;  // current round accepts more steps
  std::vector<std::unique_ptr<std::byte[]>> _temps;
  std::size_t _temp_bytes = 0;
  std::vector<std::shared_ptr<void>> _kept;
  std::vector<std::unique_ptr<std::function<void()>>> _calls;  // stable addresses
  std::vector<std::function<void()>> _restarts;
  std::uint32_t _next_block = 0;
};

class executor {
 public:
  // seq: the collective's sequence number (same on every member; see TAGS).
  executor(schedule&& s, transport& t, std::uint64_t seq);
  // An idle executor (done(), nothing run): a schedule kept for replay,
  // each run begun by restart() (persistent collectives).
  struct idle_t {};
  executor(schedule&& s, transport& t, idle_t);
  executor(const executor&) = delete;
  executor& operator=(const executor&) = delete;
  ~executor();

  // Posts what is ready, tests what is pending, runs local steps whose
  // round completed; never blocks. Returns true once the whole schedule is
  // done (successfully or not). See THREAD SAFETY above.
  bool advance();
  bool done() const { return _done.load(std::memory_order_acquire); }
  // Gives up on a schedule that cannot finish (MPI_Finalize with a
  // collective some member never started): fails it with errc::cancelled
  // and cancels its receives still waiting for a match. Sends in flight
  // cannot be withdrawn, so the executor may stay unfinished: its owner
  // must then keep it (and the transport) alive instead of destroying it.
  // Returns done(). Call only when no other thread advances it.
  bool abandon();
  // REPLAY. Runs the same schedule again under sequence number seq, from
  // round 0, after its restart steps (schedule::on_restart): the buffers,
  // temporaries and steps are the ones built once. Requires done() (the
  // previous run finished, or none began) and that no other thread is
  // inside advance(); advance() calls racing with it afterwards are safe.
  // A restart step that throws fails the run (errc::internal) without
  // posting anything: done() at once. Returns done().
  bool restart(std::uint64_t seq);
  errc error() const { return _error; }                 // valid once done
  const std::string& error_message() const { return _error_message; }
  const schedule& sched() const { return _sched; }
  std::uint64_t sequence() const { return _seq; }

 private:
  bool advance_locked();
  void fail(errc e, std::string msg);
  tag_t full_tag(std::uint32_t local) const;
  schedule _sched;
  transport& _t;
  std::uint64_t _seq;
  std::unique_ptr<request[]> _reqs;
  std::vector<std::uint8_t> _pending;  // per comm step of the current round
  std::size_t _npending = 0;
  std::size_t _round = 0;
  bool _posted = false;
  std::atomic<bool> _busy{false};
  std::atomic<bool> _done{false};
  errc _error = errc::ok;
  std::string _error_message;
};

// Runs a schedule to completion (blocking collective). Returns its status.
errc run(schedule&& s, transport& t, std::uint64_t seq, std::string* error_message = nullptr);

}  // namespace nmad::coll
