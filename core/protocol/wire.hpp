#pragma once
// The engine's wire format: what one packet looks like.
//
//   packet_header | chunk_header [payload] | chunk_header [payload] | ...
//
// A packet carries any number of chunks, possibly of different messages,
// peers' control items and tags. Each chunk header carries everything the
// receiver needs to re-assemble a message whose pieces were aggregated with
// others, overtaken, or split across tracks: tag, sequence number in its
// ordering domain, absolute offset and length, the message length when the
// sender knows it, and the `last` flag on the piece that ends the message.
// Integers are in the sender's byte order; the magic rejects foreign-endian
// or foreign packets. decode_packet() validates every length before use, so
// malformed bytes from a peer produce a protocol error, never a bad read.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "core/protocol/vocabulary.hpp"

namespace nmad::wire {

constexpr std::uint32_t packet_magic = 0x4e4d4144;  // "NMAD"
constexpr std::uint16_t protocol_version = 3;  // 3: failure_notice

struct packet_header {
  std::uint32_t magic;
  std::uint16_t version;
  std::uint16_t nchunks;
  std::uint32_t length;    // whole packet, headers included
  std::uint32_t reserved;
};
static_assert(sizeof(packet_header) == 16);

struct chunk_header {
  std::uint8_t kind;       // chunk_kind
  std::uint8_t flags;      // chunk_flag
  std::uint8_t priority;
  std::uint8_t reserved;
  std::uint32_t payload;   // bytes following this header (data chunks)
  std::uint64_t tag;
  std::uint32_t seq;
  std::uint32_t rail;      // rtr: track index for the data; rdv_req with
                           // pullable: the sender driver's key (driver::expose)
  std::uint64_t offset;    // absolute offset in the message
  std::uint64_t len;       // range length (data: == payload)
  std::uint64_t msg_len;   // total length or unknown_msg_length
  std::uint64_t cookie;    // rdv_req/rtr: sender's cookie
  std::uint64_t cookie2;   // rtr: receiver's data cookie
};
static_assert(sizeof(chunk_header) == 64);

// The compact form of the commonest packet: one whole message of eager
// bytes (offset 0, last piece, length = the rest of the packet). 16 bytes
// of header instead of 80; the receiver decodes it in place. Sent only by
// the engine's inline path (see scheduler::send_inline).
//
//   short_header | payload
constexpr std::uint32_t short_magic = 0x534d414e;  // "NAMS": differs from packet_magic

struct short_header {
  std::uint32_t magic;
  std::uint32_t seq;
  std::uint64_t tag;
};
static_assert(sizeof(short_header) == 16);

// The compact form's header of message (tag, seq).
inline short_header short_form(std::uint64_t tag, std::uint32_t seq) { return {short_magic, seq, tag}; }

// Whether `packet` is in the compact form (then h holds its header).
inline bool is_short(std::span<const std::byte> packet, short_header& h) {
  if (packet.size() < sizeof h) return false;
  std::memcpy(&h, packet.data(), sizeof h);
  return h.magic == short_magic;
}

// ---- Credits (flow control: what a peer can make a receiver hold) ----------
//
// Everything a receiver keeps for a peer before a receive wants it (eager
// bytes, the bookkeeping of an unexpected message, rendezvous request or
// empty message, chunks parked for reordering) is bounded by credits per
// gate. A data chunk costs its payload; the chunk that opens a message
// (flag `opens`: the first chunk of its first entry, eager or rendezvous
// request) costs message_credit more, the receiver's bookkeeping of it.
// Other control chunks (rtr, cancel_*, credit, want, offer_ack) cost
// nothing: they leave nothing behind at the receiver, so they can always
// be sent. Later rendezvous pieces of an opened (packed) message cost
// nothing either: they are ranges of a message already paid for.
//
// A sender starts with initial_credit per gate; the receiver grants more
// with `credit` chunks whose `offset` is the total extra credit granted so
// far (cumulative, so a lost ordering between two credit chunks is harmless:
// the sender keeps the larger). The receiver grants its window (what it
// accepts to hold for that peer) on the first charged chunk, then returns
// credit as what it holds leaves (placed in a receive, or dropped), in
// batches of a quarter window. A peer that exceeds its credit breaks the
// protocol (the receiver closes the gate).
//
// A message the sender cannot afford waits, unnumbered, in the sender's
// memory (its `held` queue, in order) until credit comes back; eager bytes
// that do not fit but whose message credit does go as a rendezvous request.
// So that no receive waits forever for a message held behind messages
// nobody receives yet, a receiver whose window for a peer is half full
// sends a `want` (tag, mask and the receive's posting stamp) for every
// receive posted for that peer; the sender answers with an *offer*: the
// first held message the receive matches, as an uncharged rendezvous
// request (flag `offer`, cookie2 = the stamp). The receiver accepts it only
// for that receive, if it is still the first posted receive the message
// matches (offer_ack `accepted`, then the rendezvous goes on), else declines
// it and the sender puts it back in its place, unnumbered (a message
// offered for one receive is never anybody else's unexpected message, so
// the order of a peer's messages is kept). A want for a probe (flag
// `probe`) releases the held messages up to the first it matches, in
// order, as uncharged rendezvous requests: a probe must see the message,
// and the messages before it may not be overtaken.
//
// A small message (eager data, at most small_message_max bytes long in
// all, msg_len known on its opening chunk) is kept by an unexpected
// receiver in a compact record of its own, payload inside (see
// core/matching/match_queues.hpp): its own credit is what makes it cost
// small_message_credit in all, payload included. Such a message is never
// split over packets (packet_builder), so its one chunk both opens and
// ends it.
constexpr std::uint64_t initial_credit = 64 * 1024;
constexpr std::uint64_t message_credit = 320;  // >= an unexpected message's own memory
constexpr std::uint64_t small_message_max = 8;
constexpr std::uint64_t small_message_credit = 64;  // >= a compact unexpected record (payload included)
// Whether a data message of msg_len bytes (unknown_length: not known yet)
// is a small one.
inline bool is_small_message(chunk_kind kind, std::uint64_t msg_len) {
  return kind == chunk_kind::data && msg_len <= small_message_max;
}
// What the message opened by a chunk (kind, msg_len) costs beyond its
// payload: the receiver's bookkeeping of it while unexpected.
inline std::uint64_t own_credit(chunk_kind kind, std::uint64_t msg_len) {
  return is_small_message(kind, msg_len) ? small_message_credit - msg_len : message_credit;
}
// The credit a chunk (kind, payload bytes, flags, announced message
// length) costs; a sender's entry costs the same computed on the whole
// entry (the `opens` flag travels on its first chunk only).
inline std::uint64_t chunk_credit(chunk_kind kind, std::uint64_t payload, std::uint8_t flags,
                                  std::uint64_t msg_len) {
  const std::uint64_t own = (flags & chunk_flag::opens) ? own_credit(kind, msg_len) : 0;
  if (kind == chunk_kind::data) return payload + own;
  if (kind == chunk_kind::rdv_req) return own;
  return 0;
}

// A decoded chunk: header plus a view of its payload inside the packet.
struct chunk_view {
  chunk_header header;
  std::span<const std::byte> payload;
};

// Walks a packet; returns false and sets `error` at the first defect.
class packet_reader {
 public:
  explicit packet_reader(std::span<const std::byte> packet) : _packet(packet) {}
  // Checks the packet header. Must succeed before next().
  bool begin(std::string& error);
  // Decodes the next chunk; false at the end (error empty) or on a defect.
  bool next(chunk_view& out, std::string& error);

 private:
  std::span<const std::byte> _packet;
  std::size_t _pos = 0;
  std::uint16_t _left = 0;
};

}  // namespace nmad::wire
