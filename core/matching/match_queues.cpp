// Receive matching (see match_queues.hpp).
#include "core/matching/match_queues.hpp"

#include <new>
#include <stdexcept>
#include <string>

namespace nmad {

match_queues::~match_queues() {
  for (auto& l : _posted) l.clear();
  _posted_any.clear();
  free_unexpected();
  for (unexpected_small* u : _small_kept) delete u;
}

void match_queues::resize(int nsources) {
  if (nsources < 0 || nsources > unexpected_message::max_sources)
    throw std::length_error("matching: " + std::to_string(nsources) + " sources, at most " +
                            std::to_string(unexpected_message::max_sources));
  _posted = std::vector<posted_list>(static_cast<std::size_t>(nsources));
  _unexpected = std::vector<unexpected_list>(static_cast<std::size_t>(nsources));
}

void match_queues::post(request_state& r) {
  r.post_stamp = _next_stamp++;
  (r.source_filter == any ? _posted_any : _posted[static_cast<std::size_t>(r.source_filter)]).push_back(r);
  ++_nposted;
}

request_state* match_queues::first_posted(int source, std::uint64_t tag) {
  if (_nposted == 0) return nullptr;
  posted_list& mine = _posted[static_cast<std::size_t>(source)];
  request_state* best = nullptr;
  for (request_state& r : mine)
    if (((tag ^ r.tag_filter) & r.tag_mask) == 0) {
      best = &r;
      break;
    }
  // An any_source receive posted earlier goes first. Only stamps below
  // the best so far matter, and the list is in stamp order.
  for (request_state& r : _posted_any) {
    if (best && r.post_stamp > best->post_stamp) break;
    if (((tag ^ r.tag_filter) & r.tag_mask) == 0) {
      best = &r;
      break;
    }
  }
  return best;
}

bool match_queues::unpost(request_state& r) {
  if (!r.posted.is_linked()) return false;
  (r.source_filter == any ? _posted_any : _posted[static_cast<std::size_t>(r.source_filter)])
      .erase(posted_list::s_iterator_to(r));
  --_nposted;
  return true;
}

bool match_queues::any_posted() const { return _nposted > 0; }

bool match_queues::posted_with_stamp(int source, std::uint64_t stamp) const {
  for (const request_state& r : _posted[static_cast<std::size_t>(source)])
    if (r.post_stamp == stamp) return true;
  for (const request_state& r : _posted_any)
    if (r.post_stamp == stamp) return true;
  return false;
}

void match_queues::add_unexpected(unexpected_message& u) {
  _unexpected[u.source].push_back(u);
  _arrival.push_back(u);
  // One writer (the matching lock): plain read-modify-write of each.
  const std::uint64_t n = _unexpected_len.load(std::memory_order_relaxed) + 1;
  _unexpected_len.store(n, std::memory_order_relaxed);
  if (n > _unexpected_hwm.load(std::memory_order_relaxed)) _unexpected_hwm.store(n, std::memory_order_relaxed);
}

unexpected_message* match_queues::first_unexpected(int source, std::uint64_t tag, std::uint64_t mask) {
  if (source == any) {
    for (unexpected_message& u : _arrival)
      if (((u.tag ^ tag) & mask) == 0) return &u;
    return nullptr;
  }
  for (unexpected_message& u : _unexpected[static_cast<std::size_t>(source)])
    if (((u.tag ^ tag) & mask) == 0) return &u;
  return nullptr;
}

void match_queues::remove_unexpected(unexpected_message& u) {
  _unexpected[u.source].erase(unexpected_list::s_iterator_to(u));
  _arrival.erase(arrival_list::s_iterator_to(u));
  _unexpected_len.store(_unexpected_len.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
}

void match_queues::free_unexpected() {
  while (!_arrival.empty()) {
    unexpected_message& u = _arrival.front();
    _arrival.pop_front();
    _unexpected[u.source].erase(unexpected_list::s_iterator_to(u));
    unexpected_message::destroy(&u);
  }
  _unexpected_len.store(0, std::memory_order_relaxed);
}

namespace {
// Builds a small record in `where` (raw storage of an unexpected_small).
unexpected_small* place_small(void* where, int source, std::uint64_t tag, std::uint32_t seq,
                              std::span<const std::byte> payload) {
  auto* u = ::new (where) unexpected_small;
  u->tag = tag;
  u->seq = seq;
  u->source = static_cast<std::uint32_t>(source);
  u->small = 1;
  u->small_len = static_cast<std::uint32_t>(payload.size());
  if (!payload.empty()) std::memcpy(u->bytes, payload.data(), payload.size());
  return u;
}
}  // namespace

unexpected_message* match_queues::make_small(int source, std::uint64_t tag, std::uint32_t seq,
                                             std::span<const std::byte> payload) {
  return place_small(::operator new(sizeof(unexpected_small)), source, tag, seq, payload);
}

unexpected_message* match_queues::new_small(int source, std::uint64_t tag, std::uint32_t seq,
                                            std::span<const std::byte> payload) {
  if (_small_kept.empty()) return make_small(source, tag, seq, payload);
  unexpected_small* u = _small_kept.back();
  _small_kept.pop_back();
  return place_small(u, source, tag, seq, payload);  // fresh hooks and fields
}

void match_queues::free_small(unexpected_small* u) {
  if (_small_kept.size() >= kSmallKept) {
    delete u;
    return;
  }
  u->~unexpected_small();
  _small_kept.push_back(u);
}

unexpected_full* match_queues::make_full(message_state&& m) {
  auto* u = new unexpected_full;
  u->tag = m.tag;
  u->seq = m.seq;
  u->source = static_cast<std::uint32_t>(m.source);
  u->msg = std::move(m);
  u->msg.unexpected = u;
  return u;
}

}  // namespace nmad
