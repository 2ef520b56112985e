// Fuzz target: the packet parser (core/protocol/wire.*) as the receive side
// uses it: the compact short form is recognised first, then the general
// packet is walked chunk by chunk. Contract checked here: every chunk the
// reader accepts has its payload inside the packet, a kind the engine
// handles, and a range that neither overflows nor passes its message
// length; a walk ends (no more chunks than bytes allow) with or without an
// error, and never reads outside the input.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>

#include "core/protocol/wire.hpp"

namespace {
void require(bool ok) {
  if (!ok) std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace nmad;
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  wire::short_header sh;
  if (wire::is_short(bytes, sh)) {
    require(size >= sizeof sh && sh.magic == wire::short_magic);
    return 0;
  }
  wire::packet_reader reader(bytes);
  std::string error;
  if (!reader.begin(error)) {
    require(!error.empty());
    return 0;
  }
  wire::chunk_view cv;
  std::size_t chunks = 0;
  const std::byte* const end = bytes.data() + bytes.size();
  while (reader.next(cv, error)) {
    ++chunks;
    require(chunks * sizeof(wire::chunk_header) <= size);
    const auto& h = cv.header;
    require(cv.payload.size() == h.payload);
    require(cv.payload.empty() || (cv.payload.data() >= bytes.data() && cv.payload.data() + cv.payload.size() <= end));
    const auto kind = static_cast<chunk_kind>(h.kind);
    require(kind == chunk_kind::data || kind == chunk_kind::rdv_req || kind == chunk_kind::rtr ||
            kind == chunk_kind::cancel_req || kind == chunk_kind::cancel_ack ||
            kind == chunk_kind::credit || kind == chunk_kind::want || kind == chunk_kind::offer_ack ||
            kind == chunk_kind::failure_notice);
    if (kind == chunk_kind::data) require(h.len == h.payload);
    else require(h.payload == 0);
    require(h.offset + h.len >= h.offset);
    // Touch every payload byte: a view outside the input is caught here.
    volatile unsigned sum = 0;
    for (std::byte b : cv.payload) sum = sum + static_cast<unsigned>(b);
  }
  return 0;
}
