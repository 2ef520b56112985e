#pragma once
// packet_builder: the only way a strategy writes a packet. It appends chunk
// headers and payload references to a packet wrapper while enforcing the
// track's limits (packet size, gather entries, chunks per packet), and takes
// entries off the collect list once they are fully packed. Small payloads
// are copied into the wrapper's staging buffer (cheaper than a gather entry);
// larger ones are sent straight from the user's buffer.
#include <cstdint>

#include "core/collect/chunk_entry.hpp"
#include "core/transfer/packet_wrapper.hpp"

namespace nmad {

class packet_builder {
 public:
  packet_builder(packet_wrapper& pw, std::size_t max_packet, std::size_t max_iov,
                 std::size_t copy_threshold);

  bool empty() const { return _pw.nchunks == 0; }
  std::size_t chunks() const { return _pw.nchunks; }
  // True if one more chunk header fits (packet size, gather list, chunks).
  bool header_fits() const;
  // Payload bytes one more chunk could carry (0 if not even a header fits).
  std::size_t room() const;
  // Wire size of entry e if added whole (header + payload).
  static std::size_t wire_size(const chunk_entry& e);
  // Adds (a prefix of, for data) entry e: at most max_payload payload bytes.
  // Removes e from `list` once it is fully packed. Returns false if nothing
  // could be added (packet full; a small message, see
  // wire::small_message_max, is added whole or not at all).
  bool add(collect_list& list, chunk_entry& e,
           std::uint64_t max_payload = ~std::uint64_t{0});
  // Writes the packet header; returns the packet's wire length.
  std::size_t finish();

 private:
  void append_bytes(const void* p, std::size_t n, bool copy);
  packet_wrapper& _pw;
  std::size_t _max_packet;
  std::size_t _max_iov;
  std::size_t _copy_threshold;
};

}  // namespace nmad
