#pragma once
// The collect layer's part of a gate: everything this process queues for
// one peer before the transfer layer takes it.
//
// A send request becomes chunk entries (chunk_entry.hpp). queue_piece()
// puts each on the gate's collect list, where the strategy (on_submit) and
// then the transfer layer find it -- unless flow control holds it back. So
// this is also where every message of the gate, inline or not,
//   * takes its sequence number (next_seq, per ordering domain: tag &
//     ordering_mask; a message is numbered when its first entry is
//     admitted, never before), and
//   * is charged the peer's credit ("Credits" in core/protocol/wire.hpp):
//     take_credit for a queued entry, take_inline_credit for the
//     small-message path, which skips the collect list but not this.
// A message whose first entry the credit does not cover waits, unnumbered,
// on `held` (in queue order; later pieces wait behind their message) and
// is admitted in queue order as credit comes back (on_credit). The peer may
// ask for a held message that one of its receives waits for (a *want*):
// the message then goes out at once as an *offer*, an uncharged rendezvous
// request naming that receive, which the peer accepts or declines
// (on_offer_taken, on_offer_declined).
//
// Also here: the gate's pools of entries and packet wrappers, its
// rendezvous requests awaiting their ready-to-receive (rdv_out, by cookie)
// and the bulk data the peer asked for (data_out), and the strategy that
// orders the collect list.
//
// Locking: every member, and every call, under the gate lock (gate.hpp).
// Nothing here sends: admitted entries go on the collect list and to the
// strategy; the session schedules the gate afterwards.
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/collect/chunk_entry.hpp"
#include "core/protocol/wire.hpp"
#include "core/request.hpp"
#include "core/strategy/strategy.hpp"
#include "core/transfer/packet_wrapper.hpp"
#include "core/transfer/track.hpp"  // stat_counter

namespace nmad {

// Sequence counters of one direction of a gate: a fixed table of
// kSeqBuckets counters, an ordering domain (tag & ordering mask) using the
// counter its hash selects, so that many distinct tags cost no memory.
// Domains that share a counter are ordered together; that never makes a
// message wait for a *receive*: the receiver only re-orders arrivals (a
// chunk waits for earlier chunks that are already on their way, see
// receive_path::find_message), and a message's sequence number is taken
// when its first piece is admitted (pack: at the first queued piece, not
// at pack_begin), so every earlier number is already being sent. Both sides
// use the same table size and hash (a protocol constant).
struct seq_table {
  static constexpr std::size_t kSeqBuckets = 256;
  static std::size_t bucket(std::uint64_t domain) {
    std::uint64_t h = domain * 0x9e3779b97f4a7c15ULL;
    return static_cast<std::size_t>(h >> 56);  // top 8 bits: kSeqBuckets = 256
  }
  std::uint32_t& get(std::uint64_t domain) { return counters[bucket(domain)]; }
  std::uint32_t counters[kSeqBuckets] = {};
};
static_assert(seq_table::kSeqBuckets == 256, "bucket() takes the hash's top 8 bits");

// A free list that only allocates when it grows (not thread-safe: each
// pool lives under one lock).
template <typename T>
class object_pool {
 public:
  object_pool() = default;
  object_pool(const object_pool&) = delete;
  object_pool& operator=(const object_pool&) = delete;
  ~object_pool() {
    for (T* p : _free) delete p;
  }
  T* get() {
    if (_free.empty()) return new T();
    T* p = _free.back();
    _free.pop_back();
    return p;
  }
  void put(T* p) { _free.push_back(p); }

 private:
  std::vector<T*> _free;
};

// Bulk data negotiated by a ready-to-receive, waiting for a track.
struct data_send {
  chunk_entry* entry;
  std::uint64_t cookie;   // receiver's data cookie
  std::uint64_t offset;   // absolute offset in the message
  std::uint64_t len;
  std::uint32_t rail;
};

class send_side {
 public:
  // A receive the peer waits for (a want chunk), by the peer's stamp:
  // offered = an offer for it is out; probe = release up to the first
  // match instead.
  struct want {
    std::uint64_t stamp, tag, mask;
    bool offered;
    bool probe;
  };
  // What a peer's control chunk asked for that the protocol forbids; the
  // caller fails the gate with `why` (nothing was changed).
  struct violation {
    bool found = false;
    std::string why;
  };

  // ---- set-up (before any traffic) ----
  // false: the self gate (no credit is ever charged).
  bool flow_control = false;
  std::uint64_t ordering_mask = ~std::uint64_t{0};
  // The session's progress-round counter (queued_round of admitted entries).
  const std::atomic<std::uint32_t>* rounds = nullptr;
  // Asked for each rendezvous request admitted: may the receiver read the
  // entry's bytes itself? If so it fills the entry's address (cookie2) and
  // key (rail) and answers true (the entry is then marked pullable).
  bool (*expose_pull)(send_side& self, chunk_entry& e) = nullptr;
  std::unique_ptr<strategy> strat;

  // ---- state (gate lock) ----
  object_pool<chunk_entry> entry_pool;      // control chunks, pack pieces
  object_pool<packet_wrapper> wrapper_pool;
  collect_list collect;                     // admitted, for the strategy and the tracks
  seq_table send_seq;                       // domain -> next
  std::unordered_map<std::uint64_t, chunk_entry*> rdv_out;  // cookie -> entry
  std::deque<data_send> data_out;
  std::uint64_t next_cookie = 1;
  // Credit charged by what was sent so far, and the most the peer allows.
  std::uint64_t tx_spent = 0;
  std::uint64_t tx_limit = wire::initial_credit;
  // Messages waiting for credit, unnumbered, in queue order: the first
  // entry of each (and the later pieces of a packed one behind it). The
  // receiver has seen nothing of them; they cost it nothing.
  collect_list held;
  std::uint64_t next_queue_order = 1;
  std::size_t held_pieces = 0;        // entries on `held` that open no message
  // Held first entries by tag, each in queue order (a want for one tag
  // finds its message without walking the whole queue).
  std::unordered_map<std::uint64_t, std::deque<chunk_entry*>> held_by_tag;
  std::vector<want> wants;            // by stamp
  // Held messages offered and not answered yet: nothing behind the first
  // of them is admitted meanwhile (a declined one goes back to its place).
  std::vector<chunk_entry*> offered;
  stat_counter rdv_requests;          // rendezvous sends queued (statistics)

  send_side() = default;
  send_side(const send_side&) = delete;
  send_side& operator=(const send_side&) = delete;

  // ---- queueing ----
  // The next sequence number of tag's ordering domain (taken: counted).
  std::uint32_t next_seq(std::uint64_t tag) { return seq_counter(tag)++; }
  // The counter itself (the small-message path reads the number, and takes
  // it only once the driver took the message).
  std::uint32_t& seq_counter(std::uint64_t tag) { return send_seq.get(tag & ordering_mask); }
  // Queues an entry of r: the first one of a message opens it (and carries
  // its credit) and waits on `held` while anything waits there or the
  // credit does not cover it; a later piece waits while its message does.
  // Otherwise the entry is admitted (numbered, on the collect list).
  void queue_piece(request_state& r, chunk_entry& e);

  // ---- control chunks (credit, want, rtr, answers, notices) ----
  // A control chunk of kind k from the pool: reset, pooled, priority 2 (it
  // overtakes data), no message length. The caller fills what its kind
  // carries, then queues it with queue_control().
  chunk_entry& new_control(chunk_kind k, std::uint8_t flags = 0) {
    chunk_entry* e = entry_pool.get();
    *e = chunk_entry{};
    e->pooled = true;
    e->kind = k;
    e->flags = flags;
    e->priority = 2;
    e->msg_len = chunk_entry::unknown_length;
    return *e;
  }
  // Control overtakes queued data: at the head of the collect list.
  void queue_control(chunk_entry& e) { collect.push_front(e); }

  // ---- the small-message path ----
  // Whether a whole message of len bytes may skip the collect list now:
  // nothing of the gate waits for credit or an answer to an offer, and the
  // credit covers it.
  bool inline_admits(std::size_t len) const {
    return held.empty() && offered.empty() && tx_spent + inline_cost(len) <= tx_limit;
  }
  // The message went out: its number is taken and its credit charged.
  void charge_inline(std::size_t len) { tx_spent += inline_cost(len); }
  static std::uint64_t inline_cost(std::size_t len) {
    return len + wire::own_credit(chunk_kind::data, len);  // a whole message's (it opens it)
  }

  // ---- the peer's control chunks ----
  // Credit: the peer allows up to wire::initial_credit + granted in all.
  violation on_credit(std::uint64_t granted);
  // A want (or its withdrawal: `withdrawn`) with the peer's stamp.
  violation on_want(std::uint64_t stamp, std::uint64_t tag, std::uint64_t mask, bool probe, bool withdrawn);
  // The answer to an offer (by its cookie). A declined offer goes back to
  // its place, unnumbered; if its request asked to be cancelled meanwhile
  // it is withdrawn and returned in *withdrawn (the caller completes it).
  violation on_offer_answer(std::uint64_t cookie, bool accepted, bool receive_gone, request_state** withdrawn);
  // An offered entry was taken by its receive (its answer, or its first
  // ready-to-receive, said so): an ordinary rendezvous from now on.
  void on_offer_taken(chunk_entry& e);

  // ---- cancel ----
  // r's message still waits for credit (unnumbered, every entry on
  // `held`): it is withdrawn, marked cancelled, and true is returned (the
  // caller completes r). False when the receiver may have seen it.
  bool withdraw_held(request_state& r);

 private:
  bool take_credit(chunk_entry& e);
  void admit_entry(request_state& r, chunk_entry& e);
  void hold(chunk_entry& e);
  void unhold(chunk_entry& e);
  void rehold(chunk_entry& e);
  void admit_held();
  chunk_entry* first_held_match(const want& w);
  void serve_wants(chunk_entry* fresh);
  void offer(chunk_entry& e, want& w);
  void release_through(chunk_entry& last);
  std::uint64_t offer_barrier() const;
  std::uint32_t round() const { return rounds ? rounds->load(std::memory_order_relaxed) : 0; }
};

}  // namespace nmad
