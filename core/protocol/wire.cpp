#include "core/protocol/wire.hpp"

#include <cstring>

namespace nmad::wire {

bool packet_reader::begin(std::string& error) {
  packet_header h;
  if (_packet.size() < sizeof h) {
    error = "packet shorter than its header (" + std::to_string(_packet.size()) + " bytes)";
    return false;
  }
  std::memcpy(&h, _packet.data(), sizeof h);
  if (h.magic != packet_magic) {
    error = "bad packet magic (foreign or corrupted packet)";
    return false;
  }
  if (h.version != protocol_version) {
    error = "unsupported protocol version " + std::to_string(h.version);
    return false;
  }
  if (h.length != _packet.size()) {
    error = "packet length field " + std::to_string(h.length) + " != received " +
            std::to_string(_packet.size());
    return false;
  }
  _pos = sizeof h;
  _left = h.nchunks;
  return true;
}

bool packet_reader::next(chunk_view& out, std::string& error) {
  error.clear();
  if (_left == 0) {
    if (_pos != _packet.size()) error = "trailing bytes after the last chunk";
    return false;
  }
  if (_packet.size() - _pos < sizeof(chunk_header)) {
    error = "truncated chunk header";
    return false;
  }
  std::memcpy(&out.header, _packet.data() + _pos, sizeof(chunk_header));
  _pos += sizeof(chunk_header);
  const chunk_header& c = out.header;
  if (_packet.size() - _pos < c.payload) {
    error = "chunk payload runs past the packet end";
    return false;
  }
  const auto kind = static_cast<chunk_kind>(c.kind);
  switch (kind) {
    case chunk_kind::data:
      if (c.len != c.payload) { error = "data chunk length mismatch"; return false; }
      break;
    case chunk_kind::rdv_req:
    case chunk_kind::rtr:
    case chunk_kind::cancel_req:
    case chunk_kind::cancel_ack:
    case chunk_kind::credit:
    case chunk_kind::want:
    case chunk_kind::offer_ack:
    case chunk_kind::failure_notice:
      if (c.payload != 0) { error = "control chunk with payload"; return false; }
      // An empty rendezvous is legal: it is an empty synchronous send
      // asking to be told when it matched (answered by an empty rtr).
      break;
    default:
      error = "unknown chunk kind " + std::to_string(c.kind);
      return false;
  }
  if (c.offset + c.len < c.offset) { error = "chunk range overflows"; return false; }
  // (Only data and rendezvous requests have a range inside a message.)
  if ((kind == chunk_kind::data || kind == chunk_kind::rdv_req) && c.msg_len != unknown_msg_length &&
      c.offset + c.len > c.msg_len) {
    error = "chunk range beyond its message length";
    return false;
  }
  out.payload = _packet.subspan(_pos, c.payload);
  _pos += c.payload;
  --_left;
  return true;
}

}  // namespace nmad::wire
