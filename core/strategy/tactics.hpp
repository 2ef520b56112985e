#pragma once
// The tactics every built-in strategy is made of: aggregate, split, pick a
// track, order by priority. Each is a small function over the collect list,
// a packet_builder and track views, with the same contract as
// strategy::build_packet (gate lock held, no blocking, entries only added
// through the builder). Plugins cannot call them (they are C++ and
// internal); examples/strategy_plugin shows the same ideas in C.
#include <cstdint>
#include <span>

#include "core/collect/chunk_entry.hpp"
#include "core/strategy/strategy.hpp"
#include "core/transfer/packet_builder.hpp"

namespace nmad::tactics {

// Protocol answers the peer is blocked on (ready-to-receive, cancel
// answer): sent before anything else. (A cancel request stays in its
// message's flow: it must not overtake the rendezvous it cancels.)
bool is_control(const chunk_entry& e);

// Inline sends on a quiet track only (strategy::allow_inline of the
// aggregating strategies): nothing posted on it, nothing sent inline in
// this progress round, no backlog in the driver. Once a packet is on its
// way, later sends wait in the collect list and leave together.
inline bool quiet_track(const track_view& t) { return t.outstanding == 0 && !t.just_sent && !t.backlog(); }

// The oldest chunk, whole or the prefix of it that fits.
bool take_oldest(collect_list& q, packet_builder& out);

// Chunks in queue order, as many as fit; the first may be cut to the
// packet, later ones are taken whole or left for the next packet (a
// message is never split just to fill a tail).
bool aggregate(collect_list& q, packet_builder& out);

// Like aggregate, but each next chunk is the one of highest priority
// among those that are first of their (peer, tag) flow in the first
// `scan` entries (control first, then priority, then age): a chunk may
// overtake chunks of other tags, never an earlier chunk of its own tag.
// Each pick walks up to `scan` entries (and 256 distinct tags).
bool aggregate_by_priority(collect_list& q, packet_builder& out, std::size_t scan = 64);

// Whether a chunk of priority above 0 waits in q.
bool any_priority(const collect_list& q);

// What waits in the queue, for holding decisions.
struct window_summary {
  std::size_t chunks = 0;
  std::uint64_t wire_bytes = 0;  // headers + payloads if all went whole
  bool all_small_data = true;    // only eager data chunks shorter than the limit
  bool any_express = false;
};
window_summary summarize(const collect_list& q, std::uint64_t small_limit);

// Pick a track: the connected one with room and the lowest latency
// estimate (null if none has room).
const track_view* lowest_latency_with_room(std::span<const track_view> tracks);

// When track t is expected to have sent what it holds (µs from now): its
// latency plus its outstanding and incoming bytes at its bandwidth.
double predicted_release_us(const track_view& t);

// Split a rendezvous range. Equal pieces (ranges of split_min and up, one
// per connected track, taken in turn from `next`), else whole to the next
// track. Returns the rail and shortens len to the piece.
std::uint32_t rotate_equal(std::span<const track_view> tracks, std::uint32_t& next, std::uint64_t& len,
                           std::uint64_t split_min = 256 * 1024);

// Split in proportion to the tracks' bandwidths, each track's share
// reduced by its predicted release time, so that every track finishes at
// the same moment; a range below split_min goes whole to the track that
// finishes it first. Returns the rail of the largest share; len becomes
// that share (4 KiB aligned).
std::uint32_t balance_by_bandwidth(std::span<const track_view> tracks, std::uint64_t& len,
                                   std::uint64_t split_min = 256 * 1024);

}  // namespace nmad::tactics
