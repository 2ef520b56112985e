#pragma once
// coll::transport over an nmad::session.
//
// A session_transport is one collective CONTEXT (e.g. one MPI communicator):
//   * a translation table group rank -> session rank (the group's members in
//     group-rank order; this process must be one of them),
//   * a 64-bit base tag reserved for this context: its low tag_bits_total
//     (40) bits must be zero; the upper 24 bits are the caller's (e.g. a
//     "collective" flag bit plus the communicator's context id) and must not
//     collide with any other traffic on the session,
//   * a sequence counter: next_sequence() gives each collective of this
//     context its number; the executor mixes it into every tag, so two
//     consecutive (or concurrently pending) collectives never cross-match.
// Tag on the wire = base_tag | (seq mod 2^20) << 20 | local step tag.
//
// Thread-safe: the session is, and the sequence counter is atomic. (Callers
// must still start the collectives of one context in the same order on
// every member, as MPI requires, so that they get the same numbers.)
#include <atomic>
#include <vector>

#include "mpi_layer/coll/schedule.hpp"

namespace nmad::coll {

class session_transport final : public transport {
 public:
  // group[i] = session rank of group rank i. Throws std::invalid_argument
  // if the table is empty, names a rank twice or out of the session, does
  // not contain this process, or if base_tag has bits in the low 40.
  session_transport(nmad::session& s, std::vector<int> group, tag_t base_tag);
  // The whole session as the group (group rank = session rank).
  session_transport(nmad::session& s, tag_t base_tag);

  int rank() const override { return _rank; }
  int size() const override { return static_cast<int>(_group.size()); }
  errc isend(int peer, tag_t tag, const void* ptr, std::size_t len, request& req) override;
  errc irecv(int peer, tag_t tag, void* ptr, std::size_t len, request& req) override;
  bool test(request& req) override { return req.completed(); }
  void progress() override { _s.progress_quiet(); }
  bool cancel(request& req) override { return _s.cancel(req); }
  void wait_until(bool (*done)(void*), void* arg) override { _s.wait_until(done, arg); }

  // Collectives on one communicator are started one at a time (the
  // standard's rule), so no read-modify-write is needed: an atomic load
  // and store keep a concurrent reader defined without a locked
  // instruction on every collective.
  std::uint64_t next_sequence() {
    const std::uint64_t s = _seq.load(std::memory_order_relaxed);
    _seq.store(s + 1, std::memory_order_relaxed);
    return s;
  }
  tag_t base_tag() const { return _base; }
  int session_rank(int group_rank) const { return _group.at(static_cast<std::size_t>(group_rank)); }
  nmad::session& session() { return _s; }

 private:
  nmad::session& _s;
  std::vector<int> _group;
  int _rank = -1;
  tag_t _base;
  std::atomic<std::uint64_t> _seq{0};
};

}  // namespace nmad::coll
