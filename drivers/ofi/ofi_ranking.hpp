#pragma once
// The order in which the ofi driver considers the providers libfabric offers
// for its needs: by what each one can do, never by its name.
//
// Contract. rank() takes one offer per candidate (a provider in its domain
// of choice), in libfabric's order, and answers the positions of the offers
// best first. Each criterion below decides only between offers equal in
// the ones before it; offers equal in all keep libfabric's order (its own
// preference: the order in which it lists providers). The offer with the
// first position is the one the driver opens; a provider the user names
// (NMAD_OFI_PROVIDER, FI_PROVIDER) comes first whatever it can do.
//
//   1. Reaches other hosts. The ofi driver is nmad's network rail (the
//      built-in shm driver serves this host). An offer that does not is
//      node-local: the driver's caps().node_local, and reachable() refuses
//      the addresses of other hosts.
//   2. Reaches this host as well. The processes of a job on one host talk
//      to each other through it too; fi_getinfo(3): a provider with
//      FI_REMOTE_COMM but not FI_LOCAL_COMM "cannot be used to communicate
//      with processes on the same system".
//   3. RMA read, where the RMA rendezvous is wanted (NMAD_OFI_RMA not off):
//      the receiver reads the sender's buffer instead of the provider's own
//      rendezvous.
//   4. The deeper receive queue (rx_attr->size): the driver's packet buffers
//      and its data receives share it; deeper, more of both are posted
//      before posts answer retry.
//   5. The larger inject size (tx_attr->inject_size): sends up to it are
//      inline (send_inline), completed as soon as the provider takes them.
//
// Not weighed, for fi_getinfo does not say: whether the completion queue
// has a wait descriptor (NMAD_WAIT=block sleeps on it; known once a queue
// is opened, which nmad-info --drivers does per provider), and whether a
// provider's reliability is its own or a utility layer's.
//
// Where the facts come from (ofi_provider.cpp): fi_getinfo asked for the
// driver's needs, then again with one more capability in the hints, so that
// the provider's own filtering answers whether it has it, also where it does
// not report the bit in the entries it returns for the plain question (here
// tcp;ofi_rxm, udp;ofi_rxd and shm report neither FI_LOCAL_COMM nor
// FI_REMOTE_COMM).
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace nmad::ofi_ranking {

struct offer {
  std::string provider, domain;
  bool remote = false;    // offered when FI_REMOTE_COMM is asked for
  bool local = false;     // offered when FI_LOCAL_COMM is asked for
  bool rma_read = false;  // offered with FI_RMA | FI_READ | FI_REMOTE_READ
  std::size_t rx_queue = 0;  // rx_attr->size
  std::size_t inject = 0;    // tx_attr->inject_size
  // Reaches this host only: not offered for other hosts. (A provider that
  // libfabric offers reaches some process; shm here is offered for neither
  // FI_LOCAL_COMM nor FI_REMOTE_COMM.)
  bool node_local() const { return !remote; }
  // Reaches processes of this host: says so, or reaches nothing else.
  bool this_host() const { return local || !remote; }
};

// Whether `a` ranks before `b` (the criteria above; RMA read counts only
// when `want_rma`).
bool better(const offer& a, const offer& b, bool want_rma);

// The positions in `offers`, best first (a stable order: see above). The
// offers of a provider named exactly `named` (what the user forced, when
// not empty) come before all others: libfabric also matches with a name
// the utility providers layered over it ("net" gives net;ofi_rxm too).
std::vector<std::size_t> rank(const std::vector<offer>& offers, bool want_rma, std::string_view named = {});

// The facts the ranking weighs, in its order, for nmad-info and the log:
// "other hosts and this one, RMA read, receive queue 2048, inject 64 B".
std::string describe(const offer& o);

// The criteria in one line, for nmad-info.
inline constexpr const char* kCriteria =
    "reach (other hosts, then this host too), RMA read, receive queue, inject size; ties in libfabric's order";

}  // namespace nmad::ofi_ranking
