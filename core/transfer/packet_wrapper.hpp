#pragma once
// A packet wrapper is one network operation in preparation or in flight on a
// track: either a packet (packet header + chunks, built by a strategy) or a
// bulk-data transfer answering a ready-to-receive. Wrappers come from the
// session's pool; each owns a staging buffer (headers and small payloads are
// copied there) and a gather list pointing into it and into user buffers.
#include <sys/uio.h>

#include <array>
#include <boost/intrusive/list.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/collect/chunk_entry.hpp"

namespace nmad {

class gate;

struct packet_wrapper {
  static constexpr std::size_t max_iov = 64;
  static constexpr std::size_t max_chunks = 256;

  enum class kind : std::uint8_t { packet, data };

  boost::intrusive::list_member_hook<
      boost::intrusive::link_mode<boost::intrusive::safe_link>> track_hook;
  kind type = kind::packet;
  gate* owner = nullptr;
  std::uint32_t rail = 0;

  // Staging area (capacity = the driver's max packet size).
  std::unique_ptr<std::byte[]> staging;
  std::size_t staging_capacity = 0;
  std::size_t staging_used = 0;

  std::array<iovec, max_iov> iov{};
  std::size_t niov = 0;
  std::size_t length = 0;        // bytes on the wire (packet or data)
  std::uint16_t nchunks = 0;

  // Chunk entries this wrapper carries (their `wrappers` count includes it).
  std::array<chunk_entry*, max_chunks> carried{};
  std::size_t ncarried = 0;

  // kind::data: the receiver's cookie for this transfer.
  std::uint64_t data_cookie = 0;

  void reset() {
    type = kind::packet;
    owner = nullptr;
    rail = 0;
    staging_used = 0;
    niov = 0;
    length = 0;
    nchunks = 0;
    ncarried = 0;
    data_cookie = 0;
  }
};

using track_wrapper_list = boost::intrusive::list<
    packet_wrapper,
    boost::intrusive::member_hook<
        packet_wrapper,
        boost::intrusive::list_member_hook<
            boost::intrusive::link_mode<boost::intrusive::safe_link>>,
        &packet_wrapper::track_hook>,
    boost::intrusive::constant_time_size<false>>;

}  // namespace nmad
