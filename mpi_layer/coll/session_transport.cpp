#include "mpi_layer/coll/session_transport.hpp"

#include <set>
#include <stdexcept>
#include <string>

namespace nmad::coll {

namespace {
std::vector<int> identity(int n) {
  std::vector<int> g(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) g[static_cast<std::size_t>(i)] = i;
  return g;
}
}  // namespace

session_transport::session_transport(nmad::session& s, std::vector<int> group, tag_t base_tag)
    : _s(s), _group(std::move(group)), _base(base_tag) {
  if (_group.empty()) throw std::invalid_argument("coll::session_transport: empty group");
  if (base_tag & ((tag_t{1} << tag_bits_total) - 1))
    throw std::invalid_argument("coll::session_transport: base tag has bits in the low " +
                                std::to_string(tag_bits_total) + " bits reserved for collectives");
  std::set<int> seen;
  for (std::size_t i = 0; i < _group.size(); ++i) {
    const int r = _group[i];
    if (r < 0 || r >= s.size())
      throw std::invalid_argument("coll::session_transport: group rank " + std::to_string(i) +
                                  " maps to session rank " + std::to_string(r) + ", outside the session");
    if (!seen.insert(r).second)
      throw std::invalid_argument("coll::session_transport: session rank " + std::to_string(r) + " listed twice");
    if (r == s.rank()) _rank = static_cast<int>(i);
  }
  if (_rank < 0) throw std::invalid_argument("coll::session_transport: this process is not in the group");
}

session_transport::session_transport(nmad::session& s, tag_t base_tag)
    : session_transport(s, identity(s.size()), base_tag) {}

errc session_transport::isend(int peer, tag_t tag, const void* ptr, std::size_t len, request& req) {
  if (peer < 0 || peer >= size()) return errc::invalid_argument;
  return _s.isend(_group[static_cast<std::size_t>(peer)], _base | tag, ptr, len, req);
}

errc session_transport::irecv(int peer, tag_t tag, void* ptr, std::size_t len, request& req) {
  if (peer < 0 || peer >= size()) return errc::invalid_argument;
  return _s.irecv(_group[static_cast<std::size_t>(peer)], _base | tag, ptr, len, req);
}

}  // namespace nmad::coll
