#pragma once
// Wire format of the tcp driver (private to drivers/tcp and its tests).
//
// All integers are in the host's byte order: a job runs on one architecture,
// and a peer of the other endianness fails the magic checks.
//
// Handshake. The connecting side sends a hello followed by key_len bytes of
// job key; the accepting side checks it and answers with an ack carrying its
// own rank. An accepting side that refuses simply closes the socket.
// After the handshake, each direction is a sequence of frames: a
// frame_header then `length` body bytes.
//
// Bulk data goes as one or more data frames with the receiver's cookie: a
// transfer cut in fragments sends `kind_data_more` frames then one
// `kind_data` frame that ends it. The stream keeps a transfer's fragments in
// order, so the receiver places each after the previous one; frames of
// other transfers and packets may come between them.
#include <cstdint>
#include <type_traits>

namespace nmad::tcp_wire {

constexpr std::uint32_t protocol_version = 1;
constexpr std::uint32_t max_key_len = 4096;

struct hello {
  char magic[4] = {'N', 'M', 'A', 'D'};
  std::uint32_t version = protocol_version;
  std::int32_t rank = -1;
  std::uint32_t key_len = 0;  // followed by key_len bytes of job key
};

struct ack {
  char magic[4] = {'N', 'M', 'A', 'K'};
  std::uint32_t version = protocol_version;
  std::int32_t rank = -1;  // the accepting side's rank
  std::uint32_t reserved = 0;
};

constexpr std::uint32_t frame_magic = 0x4e4d4652;  // "NMFR"
enum frame_kind : std::uint32_t { kind_packet = 1, kind_data = 2, kind_data_more = 3 };

struct frame_header {
  std::uint32_t magic = frame_magic;
  std::uint32_t kind = kind_packet;
  std::uint64_t length = 0;  // body bytes that follow
  std::uint64_t cookie = 0;  // data frames: the receiver's cookie
};

static_assert(sizeof(hello) == 16 && std::is_trivially_copyable_v<hello>);
static_assert(sizeof(ack) == 16 && std::is_trivially_copyable_v<ack>);
static_assert(sizeof(frame_header) == 24 &&
              std::is_trivially_copyable_v<frame_header>);

}  // namespace nmad::tcp_wire
