#include "core/transfer/packet_builder.hpp"

#include <algorithm>
#include <cstring>

#include "api/nmad/services/trace.hpp"
#include "core/protocol/wire.hpp"

namespace nmad {

packet_builder::packet_builder(packet_wrapper& pw, std::size_t max_packet,
                               std::size_t max_iov, std::size_t copy_threshold)
    : _pw(pw),
      _max_packet(std::min(max_packet, pw.staging_capacity)),
      _max_iov(std::min(max_iov, packet_wrapper::max_iov)),
      _copy_threshold(copy_threshold) {
  // Reserve the packet header; finish() fills it in.
  _pw.staging_used = sizeof(wire::packet_header);
  _pw.iov[0] = {_pw.staging.get(), sizeof(wire::packet_header)};
  _pw.niov = 1;
  _pw.length = sizeof(wire::packet_header);
}

bool packet_builder::header_fits() const {
  // A header goes to staging; it needs a new gather entry unless the last
  // entry is the staging tail it will extend.
  const iovec& last = _pw.iov[_pw.niov - 1];
  const bool extends = static_cast<std::byte*>(last.iov_base) + last.iov_len ==
                       _pw.staging.get() + _pw.staging_used;
  return _pw.ncarried < packet_wrapper::max_chunks && (extends || _pw.niov + 1 <= _max_iov) &&
         _pw.length + sizeof(wire::chunk_header) <= _max_packet;
}

std::size_t packet_builder::room() const {
  if (!header_fits()) return 0;
  return _max_packet - _pw.length - sizeof(wire::chunk_header);
}

std::size_t packet_builder::wire_size(const chunk_entry& e) {
  return sizeof(wire::chunk_header) + (e.kind == chunk_kind::data ? e.len : 0);
}

void packet_builder::append_bytes(const void* p, std::size_t n, bool copy) {
  if (n == 0) return;
  if (copy) {
    std::byte* dst = _pw.staging.get() + _pw.staging_used;
    std::memcpy(dst, p, n);
    _pw.staging_used += n;
    iovec& last = _pw.iov[_pw.niov - 1];
    if (static_cast<std::byte*>(last.iov_base) + last.iov_len == dst) {
      last.iov_len += n;  // contiguous with the previous staged bytes
    } else {
      _pw.iov[_pw.niov++] = {dst, n};
    }
  } else {
    _pw.iov[_pw.niov++] = {const_cast<void*>(p), n};
  }
  _pw.length += n;
}

bool packet_builder::add(collect_list& list, chunk_entry& e, std::uint64_t max_payload) {
  if (!header_fits()) return false;
  const std::size_t space = room();
  wire::chunk_header h{};
  h.kind = static_cast<std::uint8_t>(e.kind);
  h.priority = e.priority;
  h.tag = e.tag;
  h.seq = e.seq;
  h.rail = e.rail;
  h.offset = e.offset;
  h.msg_len = e.msg_len;
  h.cookie = e.cookie;
  h.cookie2 = e.cookie2;
  std::uint64_t take = 0;
  if (e.kind == chunk_kind::data) {
    take = std::min<std::uint64_t>({e.len, max_payload, space});
    if (take == 0 && e.len > 0) return false;
    // A small message goes whole (its receiver keeps it in one compact
    // record, see wire::small_message_max), in the next packet if need be.
    if (take < e.len && (e.flags & chunk_flag::opens) && wire::is_small_message(e.kind, e.msg_len)) return false;
    h.payload = static_cast<std::uint32_t>(take);
    h.len = take;
    h.flags = (take == e.len) ? e.flags : static_cast<std::uint8_t>(e.flags & ~chunk_flag::last);
  } else {
    h.len = e.len;
    h.flags = e.flags;
  }
  // Headers always go to staging, so consecutive headers merge into one entry.
  append_bytes(&h, sizeof h, true);
  if (trace::enabled()) trace::emit(trace::event::chunk, -1, 0, h.tag, h.seq, h.len, h.offset << 8 | h.kind);
  // Gather from the user buffer unless the payload is small or the gather
  // list is nearly full (the staging buffer always has room for a copy).
  if (take > 0) append_bytes(e.ptr, take, take <= _copy_threshold || _pw.niov + 2 > _max_iov);
  // (A gathered payload needs its own entry and one more for what follows.)
  _pw.nchunks++;
  _pw.carried[_pw.ncarried++] = &e;
  e.wrappers++;
  // The message's own credit travels once, on its first chunk.
  e.flags &= static_cast<std::uint8_t>(~chunk_flag::opens);
  if (e.kind == chunk_kind::data) {
    e.ptr += take;
    e.offset += take;
    e.len -= take;
    if (e.len == 0) list.erase(list.iterator_to(e));
  } else {
    list.erase(list.iterator_to(e));
  }
  return true;
}

std::size_t packet_builder::finish() {
  wire::packet_header ph{};
  ph.magic = wire::packet_magic;
  ph.version = wire::protocol_version;
  ph.nchunks = _pw.nchunks;
  ph.length = static_cast<std::uint32_t>(_pw.length);
  std::memcpy(_pw.staging.get(), &ph, sizeof ph);
  return _pw.length;
}

}  // namespace nmad
