#pragma once
// The ofi driver: libfabric reliable-datagram endpoints (FI_EP_RDM) with
// manual progress, driven from driver::poll(). One endpoint per driver
// instance; peers are entries of its address vector.
//
// Provider. NMAD_OFI_PROVIDER (else FI_PROVIDER) names the provider to use
// ("tcp;ofi_rxm", "shm", "udp;ofi_rxd", ...); open() fails with a message
// naming it when libfabric has no such provider or it lacks what the driver
// needs. Unforced, the driver takes, among the providers fi_getinfo offers
// with what it needs (FI_EP_RDM, FI_TAGGED, in-order sends FI_ORDER_SAS,
// manual progress, no local memory registration), the best by what they
// can do (ofi_ranking.hpp): one that reaches other hosts (offered for
// FI_REMOTE_COMM) and this one, then RMA read, the deeper receive queue,
// the larger inject size; ties in libfabric's order. Here: tcp;ofi_rxm. A
// provider not offered for FI_REMOTE_COMM (shm; net and sockets in domain
// lo) reaches only this host and makes the driver node_local: reachable()
// then says yes only for addresses published on the same host.
//
// Transfers. Everything is a tagged message (see ofi_driver.cpp for the tag
// layout): packets land in receive buffers posted in advance, bulk data of
// cookie C goes straight into the iovec post_recv_data(C) posted (the
// provider's own rendezvous moves large messages: ofi_rxm and shm pull them
// from the sender's buffer once matched, so zero_copy_data holds). Where
// the provider offers RMA (FI_RMA; NMAD_OFI_RMA=auto|on|off), rdma_get is
// advertised: expose() registers the sender's buffer (through a registration
// cache, NMAD_OFI_MR_CACHE) and the receiver's post_get() fi_read()s it.
//
// Flow control. A peer sends packets only against credits (a window of our
// packet buffers, granted at connection time and returned as they are
// posted again), and no more data receives are posted than the provider's
// receive queue holds next to the packet buffers: nothing ever arrives that
// the provider would have to keep unexpected. Out of credit or room, and on
// FI_EAGAIN/FI_ENOMEM, posts answer retry (see ofi_driver.cpp).
//
// Connections. RDM endpoints have none; the driver makes its own: connect()
// inserts the peer's address and sends a hello (rank, job key, own address);
// the peer checks the key, inserts the sender's address and answers with an
// ack (or a refusal the connecting side reports as the failure). Closing
// sends a bye the peer reports as "peer closed the connection".
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/transfer/driver.hpp"

namespace nmad {

// The driver with the provider chosen as above.
std::unique_ptr<driver> make_ofi_driver();
// The driver with `provider` forced (what NMAD_OFI_PROVIDER does), for the
// conformance test's run per provider.
std::unique_ptr<driver> make_ofi_driver_for(std::string_view provider);

// The RMA read rendezvous of an ofi driver (zeros for another driver):
// whether it is on (NMAD_OFI_RMA, the provider's FI_RMA), the registration
// cache's counters (expose() found a region: hit; registered one: miss;
// closed an unused one beyond NMAD_OFI_MR_CACHE: eviction), the regions held
// and exposures not yet released (unexpose() is applied by the driver's next
// poll()), and the reads post_get() started.
struct ofi_rma_stats {
  bool rma = false;
  std::uint64_t hits = 0, misses = 0, evictions = 0, reads = 0;
  std::size_t cached = 0, exposed = 0;
};
ofi_rma_stats ofi_driver_rma_stats(const driver& d);

// Flow control of an ofi driver (zeros for another driver): the packet
// buffers it posts, the window of packets each peer may send it, the data
// receives it lets the provider hold at once and holds now; how often a
// packet waited for credit, a data receive for room in the provider's
// queue, and any post for a transient refusal (FI_EAGAIN, FI_ENOMEM); the
// credits peers returned and the credit messages it sent; and (shm) whether
// its segment's name is still in /dev/shm, held by it.
struct ofi_flow_stats {
  std::size_t packet_buffers = 0, window = 0, data_recv_limit = 0, data_recvs = 0;
  std::uint64_t credit_waits = 0, data_recv_waits = 0, transient_retries = 0;
  std::uint64_t credits_received = 0, credit_messages = 0;
  bool segment_held = false;
};
ofi_flow_stats ofi_driver_flow_stats(const driver& d);

// What nmad-info prints: each provider libfabric offers for the driver's
// needs, best first (the order in which an unforced driver chooses), with
// what its place rests on (`ranking`: its reach, RMA read, receive queue
// and inject size), and whether the driver can open it (`detail`: why not,
// or its caps).
struct ofi_provider_status {
  std::string provider;
  bool usable = false;
  std::string detail;
  std::string ranking;
};
std::vector<ofi_provider_status> ofi_probe_providers();
// The criteria of that order, in one line.
std::string ofi_provider_criteria();

}  // namespace nmad
