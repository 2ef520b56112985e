#pragma once
// The NIC-driven scheduler: the heart of the transfer layer.
//
// Each track (one driver connection of a gate) keeps up to `window`
// packets posted. Whenever a track has room -- a send was queued, a packet
// left (send_done), credit or a ready-to-receive came back -- schedule()
// asks the gate's strategy for the next packet built from the collect list
// (core/collect/send_side.hpp), for that track, and posts it to the
// driver; negotiated bulk data (data_out) goes first, its receiver waits.
// The strategy sees the track exactly and the gate's other tracks as
// hints (track_view). A strategy may hold queued chunks while a track is
// busy (its completion schedules again); if after a pass every connected
// track is idle and chunks are still queued, a second pass overrules the
// holds and the oldest chunk goes.
//
// A driver another thread holds is not waited for: the host is told
// (driver_busy) and schedules the gate again once it is free. A driver
// that refuses for now (post_result::retry) keeps the packet on the track
// (track::retry) for the next pass; one that refuses for good fails the
// gate through the host, naming the broken connection where the driver
// knows it.
//
// Locks (LOCK ORDER in core/session_impl.hpp): schedule() takes the gate
// lock, each track's lock and try-locks its driver; send_done() comes from
// a driver's poll (its lock held) and takes the track's, then the gate's.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/gate.hpp"
#include "core/transfer/driver_slot.hpp"

namespace nmad {

class scheduler {
 public:
  // What the scheduler needs from the engine around it.
  class host {
   public:
    // g's driver was busy: schedule g again at the next lock-free point.
    virtual void driver_busy(gate& g) = 0;
    // A packet was posted: threads sleeping on the drivers re-arm.
    virtual void posted() = 0;
    // The driver refused a send for good: g fails with `reason`.
    virtual void send_refused(gate& g, std::string reason) = 0;
    // A packet carrying e left (gate lock held): e may be done.
    virtual void entry_sent(gate& g, chunk_entry& e) = 0;

   protected:
    ~host() = default;
  };

  scheduler(host& h, const std::atomic<std::uint32_t>& rounds) : _host(h), _rounds(rounds) {}
  scheduler(const scheduler&) = delete;
  scheduler& operator=(const scheduler&) = delete;

  // Eager chunks up to this many bytes are copied into the packet's
  // staging buffer rather than gathered (set-up).
  void set_copy_threshold(std::size_t bytes) { _copy_threshold = bytes; }

  // Fills g's tracks while they have room (no lock held).
  void schedule(gate& g);
  // A packet or bulk-data transfer left (from the driver's poll): the
  // track has room again, the entries it carried may be done.
  void send_done(packet_wrapper* pw);

  // The fast case, for a whole small message (tag, buf, len) when nothing
  // of g waits in its collect list or for its first track: the message
  // goes straight to the driver in the compact form (wire::short_form +
  // payload, copied once, by the driver), without chunk entry, packet
  // wrapper or completion round. It takes its sequence number and credit
  // from g's send side like any other send, and g's strategy allows or
  // refuses it (allow_inline). True: the driver took it (the send is
  // complete); false: the caller queues it the general way (credit short,
  // anything queued, a driver another thread holds, a refusal). Gate lock
  // held.
  bool send_inline(gate& g, std::uint64_t tag, const void* buf, std::size_t len);

  // What a strategy is told about track t (track lock held).
  track_view view_of(track& t) const {
    const unsigned round = _rounds.load(std::memory_order_relaxed);
    return {t.rail, t.caps, t.outstanding, t.inline_round == round, t.slot->drv.get(), t.conn,
            t.bytes_in_flight, t.incoming.load(std::memory_order_relaxed), t.window, true, round};
  }
  // A packet wrapper back to its gate's pool (that gate's lock held).
  static void put_wrapper(packet_wrapper* pw) { pw->owner->wrapper_pool.put(pw); }

 private:
  // A track of the gate the strategy is not building for (no lock: hints).
  track_view other_track_view(track& t) const {
    return {t.rail, t.caps, t.outstanding_hint.load(std::memory_order_relaxed), false, nullptr, t.conn,
            t.bytes_hint.load(std::memory_order_relaxed), t.incoming.load(std::memory_order_relaxed), t.window,
            t.connected.load(std::memory_order_acquire), _rounds.load(std::memory_order_relaxed)};
  }

  // A packet wrapper from g's pool, sized for t's driver (gate lock held).
  packet_wrapper* get_wrapper(gate& g, track& t);
  // Statistics: a track with nothing posted while its gate has work for it
  // is idle for want of a packet; the time is added up when it posts again
  // or the work is gone. Gate and track locks held.
  static void note_starved(gate& g, track& t);

  // Gate and track locks and the track's driver lock held; whether t has
  // something outstanding afterwards.
  bool schedule_track(gate& g, track& t, bool force);
  packet_wrapper* next_wrapper(gate& g, track& t, bool force);

  host& _host;
  const std::atomic<std::uint32_t>& _rounds;
  std::size_t _copy_threshold = 256;
};

}  // namespace nmad
