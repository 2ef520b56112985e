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
// All of it is engine state, under the engine lock. Nothing here
// allocates: the hooks live in the requests and messages.
#include <boost/intrusive/list.hpp>
#include <cstdint>
#include <vector>

#include "core/request.hpp"

namespace nmad {

// An arrived message no receive matched yet.
struct unexpected_message {
  posted_hook by_source;  // on its source's unexpected list
  posted_hook arrival;    // on the list of all unexpected messages
  message_state msg;
};

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

  // Sources are ranks 0..n-1.
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
  // probe's want, see core/session_flow.cpp).
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

 private:
  std::vector<posted_list> _posted;  // by source rank
  posted_list _posted_any;
  std::uint64_t _next_stamp = 1;
  std::size_t _nposted = 0;
  std::vector<unexpected_list> _unexpected;  // by source rank
  arrival_list _arrival;                     // all of them, oldest first
};

}  // namespace nmad
