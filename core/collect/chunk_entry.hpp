#pragma once
// The collect layer: what the application submitted and the network has not
// taken yet.
//
// Every send becomes one or more chunk entries queued on its gate's collect
// list, in submission order. A chunk entry is a piece of a message (eager
// data, or a rendezvous request for a large piece) or a protocol control
// item (a ready-to-receive answer). Each carries the metadata strategies and
// the receiver need: 64-bit tag, per-(gate, ordering domain) sequence
// number, absolute offset and length within its message, priority, flags.
// Strategies take entries off the list (whole, or a prefix of a data entry)
// when they build a packet. Enqueuing never allocates: the hook lives in the
// entry, and entries are embedded in requests or come from a pool.
#include <boost/intrusive/list.hpp>
#include <cstddef>
#include <cstdint>

#include "core/protocol/vocabulary.hpp"

namespace nmad {

struct request_state;

// What the application said about a chunk (strategies read them; they do
// not travel).
namespace chunk_hint {
constexpr std::uint8_t express = 1;  // pack_mode::express: the receiver waits for it
constexpr std::uint8_t cheaper = 2;  // pack_mode::cheaper: may be delayed or reordered
}  // namespace chunk_hint

using collect_hook = boost::intrusive::list_member_hook<
    boost::intrusive::link_mode<boost::intrusive::safe_link>>;

struct chunk_entry {
  collect_hook hook;              // on gate::collect while queued
  chunk_kind kind = chunk_kind::data;
  std::uint8_t flags = 0;
  std::uint8_t priority = 0;      // 0 = normal; higher may overtake
  bool pooled = false;            // returned to the session pool when done
  std::uint8_t hints = 0;         // chunk_hint bits
  request_state* req = nullptr;   // owning send request (null for control)
  std::uint64_t tag = 0;
  std::uint32_t seq = 0;
  std::uint32_t rail = 0;         // rtr: track index the data must use;
                                  // rdv_req with pullable: the key of
                                  // driver::expose for the receiver's post_get
  const std::byte* ptr = nullptr; // data: next byte to send
  std::uint64_t offset = 0;       // data/rdv_req: absolute offset in message
  std::uint64_t len = 0;          // data: bytes left to packetize
  std::uint64_t msg_len = 0;      // total message length, or unknown_length
  std::uint64_t cookie = 0;       // rdv_req: sender cookie; rtr: sender cookie
  std::uint64_t cookie2 = 0;      // rtr: receiver's data cookie; rdv_req with
                                  // pullable: sender's address of `offset`
  std::uint64_t rdv_left = 0;     // rdv_req: bytes not yet asked for by rtr
  std::uint32_t wrappers = 0;     // packet/data wrappers still carrying it
  bool awaiting_ack = false;      // rdv_req of an empty synchronous send:
                                  // done only once the receiver's rtr came
  std::uint32_t queued_round = 0; // the engine's progress round when queued (age)
  // Flow control (sender): the entry's place in its gate's queue order, and
  // its kind while it is offered as a rendezvous request (send_side.hpp).
  std::uint64_t queue_order = 0;
  chunk_kind held_kind = chunk_kind::data;

  static constexpr std::uint64_t unknown_length = unknown_msg_length;
};

using collect_list = boost::intrusive::list<
    chunk_entry,
    boost::intrusive::member_hook<chunk_entry, collect_hook, &chunk_entry::hook>,
    boost::intrusive::constant_time_size<false>>;

}  // namespace nmad
