#pragma once
// The receive path: what becomes of a packet from the moment a driver
// hands it over until its bytes are in a receive's buffer.
//
// It owns
//   * arrival: the compact form of a whole small message
//     (wire::short_form), placed straight into a matching posted receive
//     when it is next in its ordering domain, and every other packet,
//     parsed chunk by chunk (wire::packet_reader);
//   * the receiver's flow control ("Credits" in core/protocol/wire.hpp):
//     each chunk charged to its peer's credit, released as receives take
//     what was kept, granted back a quarter window at a time, and the
//     wants of receives posted while half a peer's window is held here
//     (credit.cpp);
//   * order: a chunk that overtook an earlier message of its domain is
//     parked (gate::early) until that message is matched;
//   * matching (core/matching/): the posted receives, the unexpected
//     messages, and those a matched probe detached;
//   * placement: eager bytes copied into the receive's segments, or kept
//     for a receive or an unpack to come; rendezvous ranges asked for --
//     pulled through the driver, or a ready-to-receive queued on the
//     gate's collect list and the bulk data posted with the driver -- and
//     their arrival (rendezvous.cpp);
//   * every gate's receive side (gate.hpp: recv_seq, active, early,
//     rdv_in, ask_again, unpack_waiting, the rx_ credit counters).
// The session keeps the orchestration: it sets requests up and posts them
// through here (its API entry points), completes and fails them, and
// cleans up after a failed gate (gate_failed does the receive side).
//
// What it asks of the session is `host`: completing and failing requests,
// failing a gate (a protocol violation also closes it) and naming its
// failure, scheduling a gate again once a busy driver is free, and the
// peer's control chunks for the send side (ready-to-receive, cancel
// answers, credit, wants, offer answers). The calls are direct, not
// virtual -- completion is on every message's path: session_impl is the
// one host and defines them (core/session_progress.cpp, session_send.cpp);
// a unit test defines its own. The gates are the session's (made at
// set-up, never resized); scheduling is the scheduler's.
//
// Locking (LOCK ORDER in core/session_impl.hpp): everything above is under
// the matching lock, lock(). packet_arrived and recv_data_done (from a
// driver's poll, its lock held) and retry_asks (no lock held) take it;
// every other call expects it held. Under it the receive path takes a
// gate's lock to queue a control chunk, that gate's track locks to choose
// a rail, and a driver's lock only with try_lock (a busy driver is left
// to host::driver_busy). Host calls are made with the matching lock held:
// completions and failures are queued there, never run.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "api/nmad/nmad.hpp"
#include "core/common/engine_mutex.hpp"
#include "core/gate.hpp"
#include "core/matching/match_queues.hpp"
#include "core/protocol/wire.hpp"
#include "core/request.hpp"
#include "core/transfer/scheduler.hpp"

namespace nmad {

class receive_path {
 public:
  // What the receive path needs from the engine around it (see above).
  class host {
   public:
    // r is done: its callback runs, and it counts as complete, once the
    // thread leaves the engine.
    void complete(request_state& r);
    // r fails with e (a request already finished is left alone).
    void fail_request(request_state& r, errc e, std::string message);
    // The peer broke the protocol: g fails and its connections close.
    void protocol_violation(gate& g, const std::string& what);
    // g fails with `reason` (its clean-up runs at the next lock-free point).
    void fail_gate(gate& g, std::string reason);
    // "rank N failed: <reason>" for a request that fails because g did.
    std::string failure_text(const gate& g);
    // A driver of g was busy: call retry_asks(g), then schedule g, at the
    // thread's next lock-free point.
    void driver_busy(gate& g);
    // A control chunk for g's send side: rtr, cancel_ack, credit, want or
    // offer_ack (the session takes the gate lock).
    void send_side_chunk(gate& g, const wire::chunk_header& h);

   protected:
    host() = default;
    ~host() = default;
  };

  // `gates` by rank, filled at set-up before any traffic.
  receive_path(host& h, scheduler& sched, std::vector<std::unique_ptr<gate>>& gates, bool threaded);
  receive_path(const receive_path&) = delete;
  receive_path& operator=(const receive_path&) = delete;
  ~receive_path();

  // ---- set-up ----
  // This process's rank, the job's size (the sources matched) and the
  // ordering mask (a message's domain is tag & mask).
  void set_up(int rank, int size, tag_t ordering_mask);
  // Another thread may call from now on: the lock and counters are real.
  void enable_threads();
  // The matching lock (LOCK ORDER 2).
  domain_mutex& lock() const { return _lock; }

  // ---- driver events (the driver's poll lock held; take the matching lock) ----
  // A packet from g's peer (g not failed when it was looked up).
  void packet_arrived(gate& g, std::span<const std::byte> bytes);
  // Bulk data of a rendezvous landed (or `received` says how much did).
  void recv_data_done(rdv_recv* rr, std::size_t received);

  // ---- receives (matching lock held) ----
  // The first unexpected message matching (source, tag/mask), in arrival
  // order, taken off the unexpected lists; null if none.
  unexpected_message* take_first_unexpected(int source, tag_t tag, tag_t mask) {
    unexpected_message* u = _match.first_unexpected(source, tag, mask);
    if (u) _match.remove_unexpected(*u);
    return u;
  }
  // Posts r (set up by the session): it waits for a message. A peer
  // starved of credit hears what it waits for.
  void post(request_state& r) {
    _match.post(r);
    if (_starved_gates > 0) want_posted(r);
  }
  // Takes r off the posted list (and withdraws its wants); false if it was
  // not posted (matched meanwhile).
  bool withdraw(request_state& r) {
    if (!_match.unpost(r)) return false;
    if (r.wanted) unwant(r, nullptr);
    return true;
  }
  bool any_posted() const { return _match.any_posted(); }
  // Binds r to u (off every list) and frees u's record: what arrived is
  // placed, rendezvous ranges are asked for, r completes if the message is
  // whole.
  void take_unexpected(request_state& r, unexpected_message& u);
  // The first unexpected message matching (source, tag/mask) whose length
  // is known, in arrival order; fills st. Stays on the lists.
  unexpected_message* find_unexpected(int source, tag_t tag, tag_t mask, recv_status& st);
  // A matched probe keeps u off the lists until a receive takes it
  // (attach_to_receive); its chunks still arrive into it meanwhile.
  void detach(unexpected_message& u) {
    _match.remove_unexpected(u);
    _detached.push_back(u);
  }
  void attach_to_receive(unexpected_message& u) { _detached.erase(_detached.iterator_to(u)); }
  // A probe found nothing: a peer that holds messages back for want of
  // credit is asked to release them up to the first one matching.
  void probe_missed(int source, tag_t tag, tag_t mask) {
    if (_starved_gates > 0) want_for_probe(source, tag, mask);
  }
  // A matched receive got room (unpack) or will get no more (sealed):
  // bytes kept for it are placed, rendezvous ranges asked for, and it
  // completes once whole.
  void drain_buffered(request_state& r);
  void ask_rdvs(gate& g, request_state& r);
  void finish_recv_if_done(request_state& r);
  // Keeps g.unpack_waiting exact: r is on it while rendezvous pieces of
  // its message wait for the next unpack.
  void note_unpack_waiting(gate& g, request_state& r, bool waiting);

  // ---- deferred work and failure ----
  // Asks again the rendezvous a busy driver held up (no lock held).
  void retry_asks(gate& g);
  // The receive side of g's clean-up after its failure: the receives its
  // peer's messages were to complete fail with `msg`, and those posted for
  // it; any-source receives too when `none_alive` (no other peer left).
  void gate_failed(gate& g, const std::string& msg, bool none_alive);
  // Frees every unexpected message (end of the session, drivers closed).
  void free_messages();

  // ---- memory and statistics ----
  // Gives the allocator's free memory back once what peers made this
  // process keep fell well below its peak (no lock held).
  bool trim_due() const { return _trim_due.load(std::memory_order_relaxed); }
  void trim_if_due();
  std::uint64_t packets_received() const { return _packets_received.load(std::memory_order_relaxed); }
  std::uint64_t unexpected_messages() const { return _unexpected_messages.load(std::memory_order_relaxed); }
  std::uint64_t unexpected_queued() const { return _match.unexpected_queued(); }
  std::uint64_t unexpected_queued_max() const { return _match.unexpected_queued_max(); }

 private:
  // Arrival (receive_path.cpp).
  void handle_short(gate& g, const wire::short_header& h, std::span<const std::byte> payload);
  void handle_chunk(gate& g, const wire::chunk_header& h, std::span<const std::byte> payload);
  message_state* find_message(gate& g, const wire::chunk_header& h, std::span<const std::byte> payload,
                              bool& created);
  message_state* new_message(gate& g, const wire::chunk_header& h, std::span<const std::byte> payload);
  void drain_early(gate& g);
  void note_arrivals(gate& g, message_state& m);
  void handle_cancel_req(gate& g, const wire::chunk_header& h);
  // Placement (receive_path.cpp).
  void bind(request_state& r, message_state&& m);
  void place(request_state& r, std::uint64_t offset, std::span<const std::byte> bytes);
  std::uint64_t copy_into_segments(request_state& r, std::uint64_t offset, std::span<const std::byte> bytes);
  void take_small(gate& g, request_state& r, unexpected_small& u);
  // The first segment that can hold `offset`, and in `base` the message
  // offset where it starts: by division for a precv's equal parts, else
  // the first one (a walk from the start).
  static std::size_t segment_at(const request_state& r, std::uint64_t offset, std::uint64_t& base) {
    if (r.uniform_len == 0 || r.segments.size() == 0) {
      base = 0;
      return 0;
    }
    const std::uint64_t i = std::min<std::uint64_t>(offset / r.uniform_len, r.segments.size() - 1);
    base = i * r.uniform_len;
    return static_cast<std::size_t>(i);
  }
  // Rendezvous (rendezvous.cpp).
  track& pick_rail(gate& g, std::uint64_t& n, const message_state& m, std::uint64_t offset);
  void queue_rtr(gate& g, std::uint8_t flags, std::uint32_t rail, std::uint64_t offset, std::uint64_t len,
                 std::uint64_t sender_cookie, std::uint64_t recv_cookie);
  void ask_later(gate& g, request_state& r);
  // Flow control, receive side (credit.cpp): charge what a peer's chunk
  // costs (false: the peer exceeded its credit, the gate fails), release
  // what left our buffers, announce credit when a quarter window is due;
  // the wants of receives posted while half a peer's window is held here.
  bool charge(gate& g, std::uint64_t cost);
  void release(gate& g, std::uint64_t n);
  void grant_if_due(gate& g);
  void starve(gate& g);
  void send_want(gate& g, std::uint64_t stamp, tag_t tag, tag_t mask, std::uint8_t flags, request_state* r);
  void want_posted(request_state& r);                 // r was just posted
  void unwant(request_state& r, const gate* except);  // r left the posted list
  void want_for_probe(int source, tag_t tag, tag_t mask);
  void note_probe_answered(gate& g, tag_t tag);
  void answer_offer(gate& g, std::uint64_t cookie, std::uint8_t flags);

  void count(std::atomic<std::uint64_t>& c) {
    if (_threaded) c.fetch_add(1, std::memory_order_relaxed);
    else c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }

  host& _host;
  scheduler& _sched;
  std::vector<std::unique_ptr<gate>>& _gates;
  mutable domain_mutex _lock;  // the matching lock
  bool _threaded;
  int _rank = 0;
  int _size = 1;
  tag_t _ordering_mask = full_mask;
  match_queues _match;        // posted receives, unexpected messages
  unexpected_list _detached;  // taken by a matched probe, no receive yet (freed at the end)
  // Flow control: the credit held by every peer's kept data here and its
  // peak since the last trim, the gates with rx_starved (posted receives
  // send wants while > 0), and whether a trim is due.
  std::uint64_t _fc_held = 0;
  std::uint64_t _fc_peak = 0;
  int _starved_gates = 0;
  std::atomic<bool> _trim_due{false};
  std::atomic<std::uint64_t> _packets_received{0}, _unexpected_messages{0};
};

}  // namespace nmad
