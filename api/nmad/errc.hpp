#pragma once
// Error codes shared by every layer (public API; the engine includes this
// header through core/common/errc.hpp). An operation that fails reports one
// of these plus a human-readable message naming what failed (peer, size,
// call). No dependencies.
#include <cstdint>
#include <string_view>

namespace nmad {

enum class errc : int {
  ok = 0,
  truncated,         // incoming message larger than the posted receive buffer
  size_mismatch,     // unpack sequence does not match the packed message
  peer_failed,       // the peer's connection broke or the peer died
  invalid_argument,  // bad rank, null buffer with non-zero length, ...
  protocol_error,    // malformed or foreign bytes on a connection
  cancelled,         // request cancelled before it matched
  no_resource,       // a limit was hit (too many requests, out of memory)
  internal,          // a bug: please report
};

constexpr std::string_view to_string(errc e) noexcept {
  switch (e) {
    case errc::ok: return "success";
    case errc::truncated: return "message truncated";
    case errc::size_mismatch: return "pack/unpack size mismatch";
    case errc::peer_failed: return "peer failed";
    case errc::invalid_argument: return "invalid argument";
    case errc::protocol_error: return "protocol error";
    case errc::cancelled: return "cancelled";
    case errc::no_resource: return "no resource";
    case errc::internal: return "internal error";
  }
  return "unknown error";
}

}  // namespace nmad
