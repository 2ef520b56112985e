// The ofi driver's order of providers (see ofi_ranking.hpp).
#include "drivers/ofi/ofi_ranking.hpp"

#include <algorithm>
#include <numeric>
#include <tuple>

namespace nmad::ofi_ranking {

bool better(const offer& a, const offer& b, bool want_rma) {
  // Larger is better in every field; the tuples compare in the criteria's order.
  auto key = [&](const offer& o) {
    return std::make_tuple(o.remote, o.this_host(), want_rma && o.rma_read, o.rx_queue, o.inject);
  };
  return key(a) > key(b);
}

std::vector<std::size_t> rank(const std::vector<offer>& offers, bool want_rma, std::string_view named) {
  std::vector<std::size_t> order(offers.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const bool na = !named.empty() && offers[a].provider == named;
    const bool nb = !named.empty() && offers[b].provider == named;
    if (na != nb) return na;
    return better(offers[a], offers[b], want_rma);
  });
  return order;
}

std::string describe(const offer& o) {
  std::string s = o.node_local() ? "this host only" : o.this_host() ? "other hosts and this one" : "other hosts only";
  s += o.rma_read ? ", RMA read" : ", no RMA read";
  s += ", receive queue " + std::to_string(o.rx_queue);
  s += ", inject " + std::to_string(o.inject) + " B";
  return s;
}

}  // namespace nmad::ofi_ranking
