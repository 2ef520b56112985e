// The ofi driver (see ofi_driver.hpp for what it offers): its design, and
// its factories. The code is split by object (ofi_internal.hpp lists the
// files): provider selection, endpoint and connections, data path,
// registration cache, libfabric loading, shm segments.
//
// Tunables (read once by open(); a malformed value makes open() throw):
//   NMAD_OFI_PROVIDER            provider to use (else FI_PROVIDER, else chosen)
//   NMAD_OFI_DOMAIN              domain (network interface) to use; default
//                                "lo" where the provider offers it (loopback,
//                                like NMAD_TCP_HOST's 127.0.0.1), else the first
//   NMAD_OFI_CONNECT_TIMEOUT_MS  time a peer has to answer a hello (5000): a
//                                dead address shows only this way (ofi_rxm
//                                retries a refused connection by itself)
//   NMAD_OFI_RMA                 auto (RMA read rendezvous where the provider
//                                offers FI_RMA), on (required: open fails
//                                without), off (tagged messages only)
//   NMAD_OFI_MR_CACHE            registrations kept once unused (64; 0: each
//                                exposure registers and deregisters)
//
// RMA read rendezvous. With RMA, rdma_get is advertised: the engine's
// expose() registers the sender's buffer (FI_REMOTE_READ, the key this
// driver chooses, or the provider's with FI_MR_PROV_KEY: it must fit in 32
// bits, else that rendezvous is pushed) and the receiver's post_get()
// fi_read()s it. Addresses are virtual where the provider's mr_mode has
// FI_MR_VIRT_ADDR, else offsets into the registered region (expose() says
// which). Registrations are cached: a region covering the range is reused
// (hit), else one is registered (miss); regions no exposure uses stay, the
// NMAD_OFI_MR_CACHE most recently used of them, the rest are closed (least
// recently used first). A region freed by the application while cached is
// harmless with the providers this driver accepts: none pins memory
// (FI_MR_LOCAL is refused), a registration only names an address range the
// provider reads at the time of a read, and reads happen only while the
// exposure that published the key lasts (the engine's send is pending, so
// the buffer is alive). unexpose() may come from another thread: it only
// queues the range; the next poll()/expose()/post_get() applies it.
//
// Tag layout (64 bits). Bit 63 set: bulk data, bits 62..32 the receiver's
// connection id for the sender, bits 31..0 the low half of the cookie. Bit 63
// clear: a packet (bit 62 clear) or a control message (bit 62 set), bits
// 61..32 the receiver's connection id for the sender (0 in a hello). Packet
// and control receive buffers are posted with bit 63 only significant, so
// one pool takes both; data receives match their tag exactly. Two cookies
// posted on one connection must differ in their low 32 bits (post_recv_data
// refuses the second): the engine's cookies are counters, far from that.
//
// Credits. A packet (or control message) that reaches a peer with none of
// its packet buffers posted is an unexpected message for the provider: the
// shm provider keeps it in an entry of the same fixed queue (rx_attr->size)
// that posted receives use, and once that queue is full it stops reading
// its command queue at the message it cannot place, behind which the data
// that would free entries waits (the job hangs, or a later receive fails
// with FI_ENOMEM). So nothing is sent that has no buffer waiting for it:
// each side grants each peer a window of its packet buffers (in the hello
// and the ack); a packet costs the sender one credit; the receiver owes the
// peer a credit for each of its packets once the buffer is posted again,
// and returns what it owes in the low 32 bits of the tag of its next packet
// to that peer, or in a credit message once it owes half the window
// (credit messages cost no credit: at most two are on their way per peer,
// which the buffers kept outside the windows absorb with hellos, acks and
// byes). Out of credit, post_send_packet and send_inline answer retry.
// Bulk data is never unexpected: the engine asks for it only after
// post_recv_data posted its receive, and the driver posts no more data
// receives than the provider's queue has room for next to the packet
// buffers (beyond that, and on FI_EAGAIN/FI_ENOMEM, post_recv_data answers
// retry and the engine asks again later). Every transient refusal of the
// provider (FI_EAGAIN, FI_ENOMEM) is a retry, never a failure.
//
// Errors. Nothing the driver calls from poll() or a post throws out of it:
// an error of the provider fails the connection it concerns, with a reason
// that says whether the peer or this process's provider refused; an error
// no connection explains (a packet buffer the provider refuses for good, an
// exception inside the driver) fails every connection, naming this process.
//
// Shared-memory segments (shm provider): see ofi_shm_segment.hpp. The
// driver names its endpoint, holds its segment's lock, withdraws its name
// once wire-up is over, notices a connected peer whose segment nobody holds
// any more (a peer killed by a signal: shm itself never reports it), and at
// open removes the segments of earlier processes that nobody holds.
//
// Progress: poll() reads the completion queue (fi_cq_read drives the
// provider's manual progress), reports completions, then reports the
// connections that failed. Every operation handed to libfabric is an `op`
// that lives until libfabric reports it, even when its connection failed
// first (it is then marked dead and its completion is dropped; a posted
// receive is cancelled with fi_cancel so the caller's buffer is released).
//
// Sleeping: the completion queue is opened with a file-descriptor wait
// object (FI_WAIT_FD) where the provider has one; arm_wakeup() asks
// fi_trywait() and sleeps on that descriptor, or answers busy when work is
// pending. A provider without one makes arm_wakeup() answer busy: the
// waiter then keeps polling (it spins), never sleeping past an arrival.
#include "drivers/ofi/ofi_internal.hpp"

namespace nmad {

using ofi_detail::ofi_driver;

std::unique_ptr<driver> make_ofi_driver() { return std::make_unique<ofi_driver>(std::string()); }

std::unique_ptr<driver> make_ofi_driver_for(std::string_view provider) {
  return std::make_unique<ofi_driver>(std::string(provider));
}

ofi_rma_stats ofi_driver_rma_stats(const driver& d) {
  const auto* o = dynamic_cast<const ofi_driver*>(&d);
  return o ? o->rma_stats() : ofi_rma_stats{};
}

ofi_flow_stats ofi_driver_flow_stats(const driver& d) {
  const auto* o = dynamic_cast<const ofi_driver*>(&d);
  return o ? o->flow_stats() : ofi_flow_stats{};
}

}  // namespace nmad
