#pragma once
// The wire vocabulary: the kinds of chunk a packet carries and their flags.
// Shared by the collect layer (a chunk entry is queued with its kind and
// flags), the packet encoder and the receive path; it depends on nothing
// else in the engine (see wire.hpp for the header layouts and the credit
// rules).
#include <cstdint>

namespace nmad {

// A message length not announced yet (msg_len of a chunk whose message is
// still being packed).
constexpr std::uint64_t unknown_msg_length = ~std::uint64_t{0};

enum class chunk_kind : std::uint8_t {
  data = 1,     // eager bytes of a message
  rdv_req = 2,  // "I have len bytes at offset for you" (rendezvous request)
  rtr = 3,      // "send me [offset, offset+len) with this data cookie"
  cancel_req = 4,  // sender: "withdraw the rendezvous (tag, seq, cookie) if unmatched"
  cancel_ack = 5,  // receiver: answer to cancel_req (flag cancel_ok: withdrawn)
  credit = 6,      // receiver: "your eager credit is now initial + offset" (flow control)
  want = 7,        // receiver: "a receive (cookie2: its stamp) of tag/mask (cookie) waits:
                   // offer me the first message it matches that you hold for credit"
  offer_ack = 8,   // receiver: answer to an offer (cookie: the offer's sender cookie)
  failure_notice = 9,  // "I end my connections because rank <tag> failed" (sent by a
                       // process that saw a failure, before it closes: the peer then
                       // names the failure, not the close it caused)
};

namespace chunk_flag {
constexpr std::uint8_t last = 1;      // this piece ends its message
constexpr std::uint8_t discard = 2;   // rtr: receiver drops these bytes
constexpr std::uint8_t cancel_ok = 4; // cancel_ack: the message was withdrawn
constexpr std::uint8_t pullable = 8;  // rdv_req: cookie2 = sender's address of
                                      // `offset` (rail: its key, driver::expose);
                                      // the receiver may pull the bytes
constexpr std::uint8_t pulled = 16;   // rtr: the receiver pulled the range itself
                                      // (the sender's part is done)
constexpr std::uint8_t opens = 32;    // data/rdv_req: the chunk that opens its message
                                      // (charged the message's own credit)
constexpr std::uint8_t offer = 64;    // rdv_req: sent for a want, uncharged (cookie2:
                                      // the wanted receive's stamp)
constexpr std::uint8_t probe = 128;   // want: for a probe (release every held message
                                      // up to the first it matches)
// Kind-specific meanings of the low bits:
constexpr std::uint8_t withdrawn = 2; // want: the receive no longer waits;
                                      // offer_ack (declined): nor will it
constexpr std::uint8_t accepted = 4;  // offer_ack: a receive took the offer
}  // namespace chunk_flag

}  // namespace nmad
