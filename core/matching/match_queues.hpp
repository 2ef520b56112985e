#pragma once
// Receive matching: which posted receive a message arriving from a peer
// goes to, and which message that arrived earlier a new receive takes.
//
// The rules are MPI's. A receive names a source rank or any_source, and a
// tag with a mask. A message goes to the receive posted *first* among
// those that match it; a receive takes the message that arrived *first*
// among those that match it (messages of one peer arrive in its sending
// order: the gate re-orders them before they get here).
//
// The structures make the common cases cheap without giving up that order:
//   * posted receives: one list per source rank, plus one list of
//     any_source receives; every receive carries a posting stamp. A message
//     from rank s looks at the first matching receive of s's list and of the
//     any_source list and takes the one posted first. Nobody scans the
//     receives of other peers.
//   * unexpected messages: one list per source rank (a receive naming its
//     source scans only that), plus one list of all of them in arrival order
//     (for any_source receives and probes). Each message is on both.
// The receive path (core/receive/receive_path.hpp) owns one, under its
// matching lock. Nothing here allocates: the hooks live in the requests
// and messages.
//
// An unexpected message has one of two forms (unexpected_message::small):
//   * small: a whole eager message of at most wire::small_message_max
//     bytes, its payload inside the record (unexpected_small: 56 bytes,
//     one 64-byte heap block). Most unexpected traffic is this, and its
//     credit (wire::small_message_credit) is what the record costs.
//   * full (unexpected_full): any other, with the whole message_state
//     (chunks still arriving, buffered bytes, rendezvous ranges).
#include <boost/intrusive/list.hpp>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "core/protocol/wire.hpp"
#include "core/request.hpp"

namespace nmad {

struct unexpected_full;

// An arrived message no receive matched yet (the part both forms share).
struct unexpected_message {
  static constexpr int max_sources = 1 << 24;  // sources fit `source`

  posted_hook by_source;  // on its source's unexpected list
  posted_hook arrival;    // on the list of all unexpected messages
  std::uint64_t tag = 0;
  std::uint32_t seq = 0;
  std::uint32_t source : 24 = 0;
  std::uint32_t small_len : 7 = 0;  // small: payload bytes
  std::uint32_t small : 1 = 0;      // the form (see above)

  // The message's length, or message_state::unknown while not known.
  std::uint64_t length() const;
  // The full form's state (small == 0 only).
  message_state& state();
  // Frees u, whichever its form.
  static void destroy(unexpected_message* u);
};

struct unexpected_small : unexpected_message {
  std::byte bytes[wire::small_message_max];
};
// 56 bytes, which the allocator serves from a 64-byte block: what
// wire::small_message_credit charges.
static_assert(sizeof(unexpected_small) <= 56, "a small unexpected record must fit a 64-byte heap block");
static_assert(wire::small_message_max < 128, "small_len holds the payload length");

struct unexpected_full : unexpected_message {
  message_state msg;
};

inline message_state& unexpected_message::state() { return static_cast<unexpected_full*>(this)->msg; }
inline std::uint64_t unexpected_message::length() const {
  return small ? small_len : static_cast<const unexpected_full*>(this)->msg.total;
}
inline void unexpected_message::destroy(unexpected_message* u) {
  if (u->small) delete static_cast<unexpected_small*>(u);
  else delete static_cast<unexpected_full*>(u);
}

using posted_list = boost::intrusive::list<
    request_state,
    boost::intrusive::member_hook<request_state, posted_hook, &request_state::posted>,
    boost::intrusive::constant_time_size<false>>;
using unexpected_list = boost::intrusive::list<
    unexpected_message,
    boost::intrusive::member_hook<unexpected_message, posted_hook, &unexpected_message::by_source>,
    boost::intrusive::constant_time_size<false>>;
using arrival_list = boost::intrusive::list<
    unexpected_message,
    boost::intrusive::member_hook<unexpected_message, posted_hook, &unexpected_message::arrival>,
    boost::intrusive::constant_time_size<false>>;

class match_queues {
 public:
  static constexpr int any = -1;  // nmad::any_source

  match_queues() = default;
  match_queues(const match_queues&) = delete;
  match_queues& operator=(const match_queues&) = delete;
  ~match_queues();

  // Sources are ranks 0..n-1 (n at most unexpected_message::max_sources).
  void resize(int nsources);

  static bool matches(int source_filter, std::uint64_t tag_filter, std::uint64_t mask, int source,
                      std::uint64_t tag) {
    if (source_filter != any && source_filter != source) return false;
    return ((tag ^ tag_filter) & mask) == 0;
  }

  // ---- posted receives ----
  // Appends r (its source_filter, tag_filter and tag_mask set) and stamps it.
  void post(request_state& r);
  // The receive posted first among those that match a message (source,
  // tag); null if none. It stays posted (see unpost).
  request_state* first_posted(int source, std::uint64_t tag);
  // Removes r if it is posted; false if it was not.
  bool unpost(request_state& r);
  bool any_posted() const;
  // A stamp of the posting order for something that is not a receive (a
  // probe's want, see core/receive/credit.cpp).
  std::uint64_t take_stamp() { return _next_stamp++; }
  // Removes every receive posted for `source` (any: the any_source ones),
  // calling f(r) on each after its removal.
  template <typename F>
  void drain_posted(int source, F&& f) {
    posted_list& l = source == any ? _posted_any : _posted[static_cast<std::size_t>(source)];
    while (!l.empty()) {
      request_state& r = l.front();
      l.pop_front();
      --_nposted;
      f(r);
    }
  }

  // f(r) on each receive posted for `source` (any: the any_source ones),
  // in posting order (f must not remove it).
  template <typename F>
  void for_each_posted(int source, F&& f) {
    for (request_state& r : source == any ? _posted_any : _posted[static_cast<std::size_t>(source)]) f(r);
  }
  // Whether a receive with this posting stamp is posted for `source` or
  // any_source.
  bool posted_with_stamp(int source, std::uint64_t stamp) const;

  // ---- unexpected messages ----
  void add_unexpected(unexpected_message& u);
  // The first arrived among those matching (source or any, tag/mask).
  unexpected_message* first_unexpected(int source, std::uint64_t tag, std::uint64_t mask);
  void remove_unexpected(unexpected_message& u);
  // f(u) on each unexpected message of `source` (f must not remove it).
  template <typename F>
  void for_each_unexpected(int source, F&& f) {
    for (unexpected_message& u : _unexpected[static_cast<std::size_t>(source)]) f(u);
  }
  // Frees every unexpected message (end of the session).
  void free_unexpected();
  // How many unexpected messages are queued now, and the most there ever
  // were (changed under the matching lock, read from any thread).
  std::uint64_t unexpected_queued() const { return _unexpected_len.load(std::memory_order_relaxed); }
  std::uint64_t unexpected_queued_max() const { return _unexpected_hwm.load(std::memory_order_relaxed); }
  // A new small unexpected message (see above), not on any list yet.
  static unexpected_message* make_small(int source, std::uint64_t tag, std::uint32_t seq,
                                        std::span<const std::byte> payload);
  // A new full one holding m (its source, tag and seq copied), not on any list yet.
  static unexpected_full* make_full(message_state&& m);
  // make_small from the records kept for reuse (in the steady state an
  // unexpected small message then costs no allocation).
  unexpected_message* new_small(int source, std::uint64_t tag, std::uint32_t seq,
                                std::span<const std::byte> payload);
  // Gives back a small record that is on no list: kept for reuse (at most
  // kSmallKept of them, 16 KiB, not charged to any peer), else freed.
  void free_small(unexpected_small* u);
  static constexpr std::size_t kSmallKept = 256;

 private:
  std::vector<posted_list> _posted;  // by source rank
  posted_list _posted_any;
  std::uint64_t _next_stamp = 1;
  std::size_t _nposted = 0;
  std::vector<unexpected_list> _unexpected;  // by source rank
  arrival_list _arrival;                     // all of them, oldest first
  std::vector<unexpected_small*> _small_kept;  // small records for reuse
  std::atomic<std::uint64_t> _unexpected_len{0}, _unexpected_hwm{0};
};

}  // namespace nmad
