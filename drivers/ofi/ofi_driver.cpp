// The ofi driver (see ofi_driver.hpp for what it offers).
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
#include "drivers/ofi/ofi_driver.hpp"

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "core/common/config.hpp"
#include "core/common/log.hpp"
#include "drivers/ofi/ofi_library.hpp"
#include "drivers/ofi/ofi_shm_segment.hpp"

namespace nmad {
namespace {

using steady = std::chrono::steady_clock;

constexpr std::size_t kMaxPacket = 32 * 1024;
// Packet buffers: at least this many, more for larger jobs (see open());
// with shm, half the provider's receive queue (rx_attr->size), up to
// kMaxRecvBuffersShm, all from one block left untouched until the provider
// writes in it. The other half of the queue is for data receives.
constexpr std::size_t kRecvBuffers = 64;
constexpr std::size_t kMaxRecvBuffersShm = 512;
// Buffers outside the credit windows: a few for the whole driver and a few
// per peer, for hellos, acks, refusals, byes and credit messages.
constexpr std::size_t kCtrlReserve = 8;
constexpr std::size_t kCtrlReservePerPeer = 4;
// Smallest window a peer gets (buffers are added up to the provider's limit
// to give every peer that many).
constexpr std::size_t kMinWindow = 8;
// Entries of the provider's receive queue left free of posted receives,
// for the odd unexpected arrival.
constexpr std::size_t kRecvQueueMargin = 32;
constexpr std::size_t kMinDataRecvs = 16;
constexpr std::size_t kMaxSendsInFlight = 64;
// How often connected shm peers are checked for being alive.
constexpr auto kLivenessPeriod = std::chrono::milliseconds(20);
constexpr int kCqBatch = 32;
constexpr int kMaxCqReadsPerPoll = 8;

constexpr std::uint64_t kDataBit = 1ull << 63;
constexpr std::uint64_t kCtrlBit = 1ull << 62;
constexpr std::uint64_t kIgnoreNonData = ~kDataBit;
constexpr std::uint64_t kCreditMask = 0xffffffffu;  // packet and credit tags: credits returned
constexpr connection_id kMaxConnId = (1u << 30) - 1;

std::uint64_t packet_tag(std::uint32_t peer_id) { return std::uint64_t{peer_id} << 32; }
std::uint64_t ctrl_tag(std::uint32_t peer_id) { return kCtrlBit | std::uint64_t{peer_id} << 32; }
std::uint64_t data_tag(std::uint32_t peer_id, std::uint64_t cookie) {
  return kDataBit | std::uint64_t{peer_id} << 32 | (cookie & 0xffffffffu);
}

const char* const kPreference[] = {"tcp;ofi_rxm", "udp;ofi_rxd", "shm"};

// ---- control messages ---------------------------------------------------------
enum class ctrl_type : std::uint8_t { hello = 1, ack = 2, refuse = 3, bye = 4, credit = 5 };
constexpr char kCtrlMagic[4] = {'N', 'M', 'O', 'F'};
constexpr std::uint16_t kCtrlVersion = 2;
constexpr std::uint32_t kMaxKey = 4096, kMaxAddr = 1024;

// hello, ack: the sender holds its shm segment's lock (see
// ofi_shm_segment.hpp), so the receiver may take a free lock for its death.
constexpr std::uint8_t kCtrlSegmentHeld = 1;

struct ctrl_header {
  char magic[4];
  std::uint16_t version;
  ctrl_type type;
  std::uint8_t flags;
  std::int32_t rank;
  std::uint32_t sender_id;  // the sender's connection id for the receiver
  std::uint32_t key_len;    // hello: the job key; refuse: the reason
  std::uint32_t addr_len;   // hello: the sender's endpoint name
  std::uint32_t window;     // hello, ack: packets the receiver may send the sender
};

std::vector<std::byte> make_ctrl(ctrl_type t, int rank, std::uint32_t sender_id, std::string_view text,
                                 std::string_view addr, std::uint32_t window = 0, std::uint8_t flags = 0) {
  ctrl_header h{};
  std::memcpy(h.magic, kCtrlMagic, 4);
  h.version = kCtrlVersion;
  h.type = t;
  h.rank = rank;
  h.sender_id = sender_id;
  h.key_len = static_cast<std::uint32_t>(text.size());
  h.addr_len = static_cast<std::uint32_t>(addr.size());
  h.window = window;
  h.flags = flags;
  std::vector<std::byte> out(sizeof h + text.size() + addr.size());
  std::memcpy(out.data(), &h, sizeof h);
  if (!text.empty()) std::memcpy(out.data() + sizeof h, text.data(), text.size());
  if (!addr.empty()) std::memcpy(out.data() + sizeof h + text.size(), addr.data(), addr.size());
  return out;
}

// ---- small helpers ------------------------------------------------------------
std::string fi_error(std::string_view prov, std::string_view call, int ret) {
  return "ofi driver (" + std::string(prov.empty() ? "no provider" : prov) + "): " + std::string(call) +
         " failed: " + ofi_library::strerror(ret < 0 ? -ret : ret);
}

// Transient refusals of the provider: the operation is tried again later.
bool transient(ssize_t r) { return r == -FI_EAGAIN || r == -FI_ENOMEM; }

std::string hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

std::string hex(std::string_view bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string s;
  for (unsigned char c : bytes) {
    s += digits[c >> 4];
    s += digits[c & 15];
  }
  return s;
}

bool unhex(std::string_view s, std::string& out) {
  if (s.size() % 2) return false;
  out.clear();
  for (std::size_t i = 0; i < s.size(); i += 2) {
    unsigned v = 0;
    auto [end, ec] = std::from_chars(s.data() + i, s.data() + i + 2, v, 16);
    if (ec != std::errc{} || end != s.data() + i + 2) return false;
    out += static_cast<char>(v);
  }
  return true;
}

// "ofi:<provider with ';' as ','>:<host>:<hex endpoint name>"
struct parsed_address {
  std::string provider, host, name;
};
bool parse_address(std::string_view a, parsed_address& p) {
  if (a.substr(0, 4) != "ofi:") return false;
  a.remove_prefix(4);
  const auto c1 = a.find(':');
  if (c1 == std::string_view::npos) return false;
  const auto c2 = a.find(':', c1 + 1);
  if (c2 == std::string_view::npos) return false;
  p.provider = std::string(a.substr(0, c1));
  std::replace(p.provider.begin(), p.provider.end(), ',', ';');
  p.host = std::string(a.substr(c1 + 1, c2 - c1 - 1));
  return !p.provider.empty() && unhex(a.substr(c2 + 1), p.name) && !p.name.empty() && p.name.size() <= kMaxAddr;
}

std::size_t total_len(std::span<const iovec> iov) {
  std::size_t n = 0;
  for (const iovec& v : iov) n += v.iov_len;
  return n;
}

struct info_deleter {
  void operator()(fi_info* i) const { ofi_library::require().freeinfo(i); }
};
using info_ptr = std::unique_ptr<fi_info, info_deleter>;

// What the driver asks of a provider.
info_ptr make_hints(const std::string& provider) {
  info_ptr h(ofi_library::require().dupinfo(nullptr));
  if (!h) throw std::runtime_error("ofi driver: fi_dupinfo failed (out of memory)");
  h->caps = FI_TAGGED | FI_SEND | FI_RECV;
  h->mode = FI_CONTEXT | FI_CONTEXT2;
  h->ep_attr->type = FI_EP_RDM;
  h->tx_attr->msg_order = FI_ORDER_SAS;
  h->rx_attr->msg_order = FI_ORDER_SAS;
  h->domain_attr->threading = FI_THREAD_DOMAIN;
  h->domain_attr->data_progress = FI_PROGRESS_MANUAL;
  h->domain_attr->resource_mgmt = FI_RM_ENABLED;
  // Every mode but local registration: those only concern RMA targets,
  // which this driver does not expose.
  h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
  if (!provider.empty()) h->fabric_attr->prov_name = ::strdup(provider.c_str());
  return h;
}

bool is_node_local(const fi_info* i) { return std::string_view(i->fabric_attr->prov_name) == "shm"; }

// The providers the driver can use, each with its entry of choice.
struct candidate {
  std::string provider;
  fi_info* info;  // inside the list it came from
};

std::vector<candidate> candidates(fi_info* list, const std::string& domain) {
  std::vector<candidate> out;
  for (fi_info* i = list; i; i = i->next) {
    const std::string prov = i->fabric_attr->prov_name;
    if (i->addr_format == FI_SOCKADDR_IN6) continue;  // one entry per provider: IPv4 or named
    auto it = std::find_if(out.begin(), out.end(), [&](const candidate& c) { return c.provider == prov; });
    const std::string dom = i->domain_attr->name ? i->domain_attr->name : "";
    const bool wanted = domain.empty() ? dom == "lo" : dom == domain;
    if (it == out.end()) {
      if (!domain.empty() && !wanted) continue;
      out.push_back({prov, i});
    } else if (wanted && std::string_view(it->info->domain_attr->name ? it->info->domain_attr->name : "") != dom &&
               domain.empty()) {
      it->info = i;  // the loopback domain over the first one listed
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const candidate& a, const candidate& b) {
    auto rank = [](const std::string& p) {
      for (std::size_t k = 0; k < std::size(kPreference); ++k)
        if (p == kPreference[k]) return static_cast<int>(k);
      return static_cast<int>(std::size(kPreference));
    };
    return rank(a.provider) < rank(b.provider);
  });
  return out;
}

// ---- the driver -----------------------------------------------------------------
enum class op_kind : std::uint8_t { rx_buffer, send, recv_data, ctrl_send, get };

struct op {
  fi_context2 ctx;  // first: libfabric hands back &ctx as op_context
  op_kind kind = op_kind::send;
  bool dead = false;      // its connection is gone: the completion is dropped
  bool report = true;     // send: tell the engine (not for copies of control)
  connection_id conn = invalid_connection;  // rx_buffer: whose packet it held last
  void* token = nullptr;
  std::uint64_t cookie = 0;
  std::size_t capacity = 0;
  ctrl_type ctrl = ctrl_type::hello;
  std::vector<std::byte> owned;  // bytes this op sends from, or receives into
  std::byte* rx = nullptr;       // rx_buffer: its kMaxPacket bytes in _rx_block
};

// await_ack: hello sent, no answer yet; ack_queued: hello accepted, the ack
// not taken by the provider yet (posts retry until it is, so no packet
// overtakes it).
enum class state { await_ack, ack_queued, established, failed };

struct conn {
  connection_id id = invalid_connection;
  int peer_rank = -1;
  fi_addr_t addr = FI_ADDR_NOTAVAIL;
  std::uint32_t peer_id = 0;  // the peer's connection id for us
  state st = state::await_ack;
  steady::time_point deadline;
  std::string fail_reason;
  std::size_t in_flight = 0;
  std::unordered_map<std::uint32_t, op*> recvs;  // by low cookie half
  std::unordered_set<op*> sends;
  // Credits (see the top of this file): packets we may still send, the
  // window the peer granted, and the buffers its packets used that are
  // posted again but not yet announced to it.
  std::uint32_t tx_credits = 0, tx_window = 0, rx_owed = 0;
  bool owing_listed = false;  // on _owing
  // shm: the peer's segment, probed for liveness once the peer said (hello,
  // ack) that it holds its lock.
  ofi_shm::peer_segment seg;
  bool probe = false;
};

class ofi_driver final : public driver {
 public:
  explicit ofi_driver(std::string forced) : _forced(std::move(forced)) {}
  ~ofi_driver() override;

  void open(const driver_config& config) override;
  const driver_caps& caps() const override { return _caps; }
  std::string local_address() const override { return _local; }
  bool reachable(std::string_view address) const override;
  connection_id connect(int peer_rank, std::string_view address) override;
  // The posts, poll() and close_connection() let no exception out: one
  // thrown inside (only std::bad_alloc is possible) fails the connection,
  // or every connection (poll), naming this process.
  post_result post_send_packet(connection_id id, std::span<const iovec> iov, void* token) override {
    return guarded(id, [&] { return send_packet(id, iov, token); });
  }
  post_result send_inline(connection_id id, std::span<const iovec> iov) override {
    return guarded(id, [&] { return inject_packet(id, iov); });
  }
  bool backlog(connection_id id) const override {
    auto it = _conns.find(id);
    return it != _conns.end() && it->second.in_flight > 0;
  }
  post_result post_send_data(connection_id id, std::uint64_t cookie, std::span<const iovec> iov,
                             void* token) override {
    return guarded(id, [&] { return send_data(id, cookie, iov, token); });
  }
  post_result post_recv_data(connection_id id, std::uint64_t cookie, std::span<const iovec> iov,
                             void* token) override {
    return guarded(id, [&] { return recv_data(id, cookie, iov, token); });
  }
  std::string failure_reason(connection_id id) const override {
    if (auto it = _conns.find(id); it != _conns.end())
      return it->second.st == state::failed ? it->second.fail_reason : std::string();
    if (auto it = _failed_reasons.find(id); it != _failed_reasons.end()) return it->second;
    return "connection closed";
  }
  post_result post_get(connection_id id, std::uint64_t remote_addr, std::uint64_t remote_key,
                       std::span<const iovec> dst, void* token) override {
    return guarded(id, [&] { return read_remote(id, remote_addr, remote_key, dst, token); });
  }
  bool expose(const void* ptr, std::size_t len, std::uint64_t& remote_addr, std::uint32_t& remote_key) override;
  void unexpose(const void* ptr, std::size_t len) override;
  int poll() override;
  // poll() without the failure reports: what may throw inside the driver.
  int progress();
  bool quiet() const override { return _conns.empty() && _ctrl_pending == 0 && _ctrl_queue.empty(); }
  void close_connection(connection_id id) override;
  void wireup_complete() override { _seg.withdraw(); }
  // What hellos and acks say of our segment.
  std::uint8_t segment_flags() const { return _seg.held() ? kCtrlSegmentHeld : 0; }
  arm_result arm_wakeup(std::vector<pollfd>& fds, int& timeout_ms) override;

  const std::string& provider() const { return _prov; }
  bool has_wait_fd() const { return _wait_fd >= 0; }
  ofi_flow_stats flow_stats() const {
    ofi_flow_stats st = _flow;
    st.packet_buffers = _rx_count;
    st.window = _window;
    st.data_recv_limit = _data_recv_max;
    st.data_recvs = _data_recvs;
    st.segment_held = _seg.held() && !_seg.withdrawn();
    return st;
  }
  ofi_rma_stats rma_stats() const {
    ofi_rma_stats st = _mr_stats;
    st.rma = _rma;
    st.cached = _regions.size();
    st.exposed = _exposures.size();
    return st;
  }

 private:
  void check(int ret, const char* call) const {
    if (ret < 0) throw std::runtime_error(fi_error(_prov, call, ret));
  }
  conn* find(connection_id id) {
    auto it = _conns.find(id);
    return it == _conns.end() ? nullptr : &it->second;
  }
  post_result check_postable(conn* c) const {
    if (!c || c->st == state::failed) return post_result::failed;
    if (c->st != state::established) return post_result::retry;
    return post_result::posted;
  }
  post_result send_packet(connection_id id, std::span<const iovec> iov, void* token);
  post_result inject_packet(connection_id id, std::span<const iovec> iov);
  post_result send_data(connection_id id, std::uint64_t cookie, std::span<const iovec> iov, void* token);
  post_result recv_data(connection_id id, std::uint64_t cookie, std::span<const iovec> iov, void* token);
  post_result read_remote(connection_id id, std::uint64_t remote_addr, std::uint64_t remote_key,
                          std::span<const iovec> dst, void* token);
  template <class F>
  post_result guarded(connection_id id, F&& f) noexcept {
    try {
      return f();
    } catch (const std::exception& e) {
      internal_error(id, e.what());
    } catch (...) {
      internal_error(id, "unknown exception");
    }
    return post_result::failed;
  }
  // An exception inside the driver: fails `id` (every connection when
  // invalid_connection), never throwing itself.
  void internal_error(connection_id id, const char* what) noexcept;
  conn& add_conn();
  bool insert_address(std::string_view name, fi_addr_t& out, std::string& why);
  // Posts a packet buffer; one the provider cannot take now is posted again
  // from the next poll(). Once posted, the peer whose packet it held is
  // owed a credit.
  void post_rx_buffer(op* o);
  // A credit owed to `id` for a buffer posted again.
  void owe_credit(connection_id id);
  // Sends credit messages to the peers owed half a window or more.
  void return_credits();
  // The tag of a packet to `c`, carrying what we owe it.
  std::uint64_t packet_tag_for(const conn& c) const {
    return packet_tag(c.peer_id) | std::min<std::uint64_t>(c.rx_owed, kCreditMask);
  }
  void credited(conn& c, std::uint64_t tag) {
    const std::uint64_t n = tag & kCreditMask;
    if (n == 0) return;
    c.tx_credits = static_cast<std::uint32_t>(std::min<std::uint64_t>(c.tx_credits + n, c.tx_window));
    _flow.credits_received += n;
  }
  // Fails every connection (an error of this process, not of a peer).
  void fail_all(const std::string& reason);
  // shm: connected peers whose segment nobody holds any more are gone.
  void check_liveness(steady::time_point now);
  // Sends a control message now, or from poll() once the provider takes
  // it (ofi_rxm answers FI_EAGAIN while it sets up its connection), in
  // order. An ack that goes out opens its connection for posts.
  void send_ctrl(fi_addr_t to, std::uint64_t tag, ctrl_type type, std::vector<std::byte> bytes, connection_id conn);
  // Posts the queued control messages; false if one still waits.
  bool flush_ctrl();
  // Reads the completion queue for the destructor, telling the engine
  // nothing: a bye marks its connection gone, everything else is released.
  void drain_quietly();
  void settle_quietly(op* o, const fi_cq_tagged_entry* e);
  void fail(conn& c, std::string reason);
  void complete(const fi_cq_tagged_entry& e);
  void complete_error(const fi_cq_err_entry& e);
  void on_ctrl(std::uint64_t tag, std::span<const std::byte> bytes);
  void release(op* o) {
    if (o->kind == op_kind::recv_data) --_data_recvs;
    _ops.erase(o);
    delete o;
  }
  // The registration cache (see the top of this file).
  struct region {
    std::uintptr_t base;
    std::size_t len;
    fid_mr* mr;
    std::uint64_t key;
    std::size_t refs;  // exposures using it
  };
  void apply_released();
  void trim_cache();
  void close_regions();
  op* new_op(op_kind k, connection_id c) {
    auto o = std::make_unique<op>();
    o->kind = k;
    o->conn = c;
    _ops.insert(o.get());
    if (k == op_kind::recv_data) ++_data_recvs;
    return o.release();
  }

  std::string _forced;
  driver_config _cfg;
  driver_caps _caps;
  std::string _prov, _local, _host;
  std::string _name;  // our endpoint name (fi_getname)
  std::chrono::milliseconds _connect_timeout{5000};
  std::size_t _iov_limit = 1, _inject = 0;
  fid_fabric* _fabric = nullptr;
  fid_domain* _domain = nullptr;
  fid_cq* _cq = nullptr;
  fid_av* _av = nullptr;
  fid_ep* _ep = nullptr;
  int _wait_fd = -1;
  std::map<connection_id, conn> _conns;
  connection_id _next_id = 1;
  std::unordered_set<op*> _ops;  // every op libfabric holds
  std::vector<connection_id> _to_report;  // failed, not reported yet
  std::unordered_map<connection_id, std::string> _failed_reasons;  // reported: for failure_reason
  std::size_t _ctrl_pending = 0;
  std::vector<op*> _rx_idle;  // packet buffers to post again
  std::size_t _rx_count = 0;  // packet buffers, each kMaxPacket bytes of _rx_block
  std::unique_ptr<std::byte[]> _rx_block;
  struct queued_ctrl {
    fi_addr_t to;
    std::uint64_t tag;
    ctrl_type type;
    op* o;
  };
  std::deque<queued_ctrl> _ctrl_queue;
  int _depth = 0;
  bool _rx_error_logged = false;
  bool _rx_post_error_logged = false;
  // Credits and the receive queue's budget (see the top of this file).
  std::uint32_t _window = 0;            // granted to each peer
  std::uint32_t _credit_threshold = 1;  // owed this many: a credit message
  std::vector<connection_id> _owing;
  std::size_t _data_recvs = 0;          // data receives the provider holds
  std::size_t _data_recv_max = 0;
  ofi_flow_stats _flow;
  // shm: our segment, held while we live; the next liveness check.
  ofi_shm::segment_hold _seg;
  steady::time_point _next_liveness{};
  // RMA read rendezvous.
  bool _rma = false, _virt_addr = false, _prov_key = false, _mr_endpoint = false;
  bool _expose_error_logged = false;
  std::size_t _cache_max = 64;
  std::uint32_t _next_key = 1;
  std::list<region> _regions;  // most recently used first
  std::multimap<std::pair<std::uintptr_t, std::size_t>, std::list<region>::iterator> _exposures;
  std::mutex _released_lock;  // unexpose() from any thread
  std::vector<std::pair<std::uintptr_t, std::size_t>> _released;
  std::atomic<bool> _any_released{false};
  ofi_rma_stats _mr_stats;
};

ofi_driver::~ofi_driver() {
  if (_ep) {
    // Tell every peer still there that we are going (a bye each, after the
    // byes already in: an endpoint that left is not written to), then let
    // the provider move them out for a short while; nothing is reported to
    // the engine any more.
    drain_quietly();
    try {
      for (auto& [id, c] : _conns)
        if (c.st == state::established)
          send_ctrl(c.addr, ctrl_tag(c.peer_id), ctrl_type::bye, make_ctrl(ctrl_type::bye, _cfg.rank, c.id, {}, {}),
                    invalid_connection);
    } catch (const std::exception&) {
      // Out of memory for a bye: the peers see the endpoint go instead.
    }
    const auto end = steady::now() + std::chrono::milliseconds(200);
    while ((_ctrl_pending > 0 || !_ctrl_queue.empty()) && steady::now() < end) {
      flush_ctrl();
      drain_quietly();
    }
    if (_rma)
      log_write(log_level::info, "ofi",
                "RMA reads " + std::to_string(_mr_stats.reads) + ", registration cache: " +
                    std::to_string(_mr_stats.hits) + " hits, " + std::to_string(_mr_stats.misses) + " misses, " +
                    std::to_string(_mr_stats.evictions) + " evictions");
    close_regions();
    fi_close(&_ep->fid);
  }
  if (_av) fi_close(&_av->fid);
  if (_cq) fi_close(&_cq->fid);
  if (_domain) fi_close(&_domain->fid);
  if (_fabric) fi_close(&_fabric->fid);
  for (op* o : _ops) delete o;
}

void ofi_driver::drain_quietly() {
  for (int round = 0; round < 64; ++round) {
    fi_cq_tagged_entry e[kCqBatch];
    ssize_t n = fi_cq_read(_cq, e, kCqBatch);
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      if (fi_cq_readerr(_cq, &err, 0) > 0) settle_quietly(static_cast<op*>(err.op_context), nullptr);
      continue;
    }
    if (n <= 0) return;
    for (ssize_t i = 0; i < n; ++i) settle_quietly(static_cast<op*>(e[i].op_context), &e[i]);
  }
}

void ofi_driver::settle_quietly(op* o, const fi_cq_tagged_entry* e) {
  if (!o || !_ops.count(o)) return;
  if (o->kind == op_kind::rx_buffer) {  // not posted again: the endpoint closes
    ctrl_header h;
    if (e && (e->tag & kCtrlBit) && e->len >= sizeof h) {
      std::memcpy(&h, o->rx, sizeof h);
      conn* c = find(static_cast<connection_id>((e->tag >> 32) & kMaxConnId));
      if (std::memcmp(h.magic, kCtrlMagic, 4) == 0 && h.type == ctrl_type::bye && c && c->peer_id == h.sender_id)
        c->st = state::failed;
    }
    return;
  }
  if (o->kind == op_kind::ctrl_send) --_ctrl_pending;
  release(o);
}

void ofi_driver::close_regions() {
  _exposures.clear();
  for (region& r : _regions) fi_close(&r.mr->fid);
  _regions.clear();
}

void ofi_driver::apply_released() {
  if (!_any_released.load(std::memory_order_acquire)) return;
  std::vector<std::pair<std::uintptr_t, std::size_t>> done;
  {
    std::lock_guard l(_released_lock);
    done.swap(_released);
    _any_released.store(false, std::memory_order_relaxed);
  }
  for (const auto& k : done) {
    auto it = _exposures.find(k);
    if (it == _exposures.end()) continue;  // not exposed (a caller's mistake): nothing to release
    --it->second->refs;
    _exposures.erase(it);
  }
  trim_cache();
}

// Regions no exposure uses beyond _cache_max go, least recently used first.
void ofi_driver::trim_cache() {
  std::size_t idle = 0;
  for (const region& r : _regions) idle += r.refs == 0;
  for (auto it = _regions.end(); idle > _cache_max && it != _regions.begin();) {
    --it;
    if (it->refs) continue;
    fi_close(&it->mr->fid);
    it = _regions.erase(it);
    --idle;
    ++_mr_stats.evictions;
  }
}

bool ofi_driver::expose(const void* ptr, std::size_t len, std::uint64_t& remote_addr,
                        std::uint32_t& remote_key) try {
  if (!_rma || !_ep || !ptr || len == 0) return false;
  apply_released();
  const auto p = reinterpret_cast<std::uintptr_t>(ptr);
  auto it = std::find_if(_regions.begin(), _regions.end(),
                         [&](const region& r) { return r.base <= p && len <= r.len && p - r.base <= r.len - len; });
  if (it != _regions.end()) {
    ++_mr_stats.hits;
    _regions.splice(_regions.begin(), _regions, it);  // most recently used (it stays valid)
  } else {
    ++_mr_stats.misses;
    std::uint64_t want = 0;
    if (!_prov_key) {
      want = _next_key;
      _next_key = _next_key == 0xffffffffu ? 1 : _next_key + 1;
    }
    fid_mr* mr = nullptr;
    int ret = fi_mr_reg(_domain, ptr, len, FI_REMOTE_READ, 0, want, 0, &mr, nullptr);
    if (ret == 0 && _mr_endpoint) {
      ret = fi_mr_bind(mr, &_ep->fid, 0);
      if (ret == 0) ret = fi_mr_enable(mr);
    }
    const std::uint64_t key = ret == 0 ? fi_mr_key(mr) : 0;
    if (ret != 0 || key > 0xffffffffu || key == FI_KEY_NOTAVAIL) {
      if (mr) fi_close(&mr->fid);
      if (!_expose_error_logged)
        log_write(log_level::warn, "ofi",
                  ret != 0 ? fi_error(_prov, "fi_mr_reg", ret) + ": rendezvous data is pushed instead"
                           : "the provider's registration key does not fit in 32 bits: rendezvous data is pushed");
      _expose_error_logged = true;
      return false;
    }
    _regions.push_front({p, len, mr, key, 0});
    it = _regions.begin();
  }
  ++it->refs;
  _exposures.emplace(std::make_pair(p, len), it);
  remote_addr = _virt_addr ? p : p - it->base;
  remote_key = static_cast<std::uint32_t>(it->key);
  trim_cache();
  return true;
} catch (const std::exception&) {
  return false;  // no memory for the bookkeeping: the rendezvous is pushed
}

void ofi_driver::unexpose(const void* ptr, std::size_t len) {
  std::lock_guard l(_released_lock);
  _released.emplace_back(reinterpret_cast<std::uintptr_t>(ptr), len);
  _any_released.store(true, std::memory_order_release);
}

post_result ofi_driver::read_remote(connection_id id, std::uint64_t remote_addr, std::uint64_t remote_key,
                                    std::span<const iovec> dst, void* token) {
  // Anything but posted makes the engine ask the peer to push the range.
  conn* c = find(id);
  if (!_rma || !c || c->st != state::established || dst.empty() || dst.size() > _iov_limit ||
      c->in_flight >= kMaxSendsInFlight)
    return post_result::failed;
  apply_released();
  op* o = new_op(op_kind::get, id);
  o->token = token;
  o->capacity = total_len(dst);
  const ssize_t r = fi_readv(_ep, dst.data(), nullptr, dst.size(), c->addr, remote_addr, remote_key, &o->ctx);
  if (r == 0) {
    ++c->in_flight;
    c->sends.insert(o);
    ++_mr_stats.reads;
    return post_result::posted;
  }
  release(o);
  if (!transient(r)) fail(*c, fi_error(_prov, "fi_read", static_cast<int>(r)));
  return post_result::failed;
}

void ofi_driver::open(const driver_config& config) {
  if (_ep) throw std::runtime_error("ofi driver: already open");
  if (!config.events) throw std::runtime_error("ofi driver: no driver_events");
  if (config.size < 1 || config.rank < 0 || config.rank >= config.size)
    throw std::runtime_error("ofi driver: rank " + std::to_string(config.rank) + " out of range for job size " +
                             std::to_string(config.size));
  _cfg = config;
  // The knobs and their ranges: core/common/config_knobs.cpp.
  _connect_timeout = config::milliseconds("NMAD_OFI_CONNECT_TIMEOUT_MS");
  _cache_max = static_cast<std::size_t>(config::integer("NMAD_OFI_MR_CACHE"));
  const std::string rma_mode = config::word("NMAD_OFI_RMA");
  std::string forced = _forced, forced_by = "forced";
  if (forced.empty()) {
    if (config::is_set("NMAD_OFI_PROVIDER")) forced = config::text("NMAD_OFI_PROVIDER"), forced_by = "NMAD_OFI_PROVIDER";
    else if (const char* f = std::getenv("FI_PROVIDER"); f && *f) forced = f, forced_by = "FI_PROVIDER";
  }
  std::string domain = config::text("NMAD_OFI_DOMAIN");

  info_ptr hints = make_hints(forced);
  fi_info* raw = nullptr;
  int ret = ofi_library::getinfo(hints.get(), &raw);
  info_ptr list(raw);
  std::vector<candidate> cands;
  if (ret == 0) cands = candidates(list.get(), domain);
  if (cands.empty()) {
    const std::string where = domain.empty() ? "" : " with domain '" + domain + "' (NMAD_OFI_DOMAIN)";
    if (!forced.empty())
      throw std::runtime_error("ofi driver: provider '" + forced + "' (" + forced_by +
                               ") is not available here" + where + " for reliable tagged messages (fi_getinfo: " +
                               (ret ? ofi_library::strerror(-ret) : "no matching entry") + "); see fi_info -l");
    throw std::runtime_error("ofi driver: no libfabric provider offers reliable tagged messages here" + where +
                             " (fi_getinfo: " + (ret ? ofi_library::strerror(-ret) : "no matching entry") + ")");
  }
  fi_info* info = cands.front().info;
  _prov = cands.front().provider;
  // RMA read: the same provider and domain asked again with FI_RMA.
  info_ptr rma_list;
  if (rma_mode != "off") {
    info_ptr rma_hints = make_hints(_prov);
    rma_hints->caps |= FI_RMA | FI_READ | FI_REMOTE_READ;
    fi_info* rraw = nullptr;
    const int rret = ofi_library::getinfo(rma_hints.get(), &rraw);
    rma_list.reset(rraw);
    const std::string dom = info->domain_attr->name ? info->domain_attr->name : "";
    fi_info* with_rma = nullptr;
    if (rret == 0)
      for (const candidate& c : candidates(rma_list.get(), dom))
        if (c.provider == _prov) with_rma = c.info;
    if (with_rma) {
      info = with_rma;
      _rma = true;
    } else if (rma_mode == "on") {
      throw std::runtime_error("ofi driver: NMAD_OFI_RMA=on but provider '" + _prov +
                               "' offers no RMA read (FI_RMA) here" +
                               (rret ? std::string(" (fi_getinfo: ") + ofi_library::strerror(-rret) + ")" : std::string()));
    }
  }
  _virt_addr = (info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) != 0;
  _prov_key = (info->domain_attr->mr_mode & FI_MR_PROV_KEY) != 0;
  _mr_endpoint = (info->domain_attr->mr_mode & FI_MR_ENDPOINT) != 0;

  check(ofi_library::require().fabric(info->fabric_attr, &_fabric, nullptr), "fi_fabric");
  check(fi_domain(_fabric, info, &_domain, nullptr), "fi_domain");
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_TAGGED;
  cq_attr.size = 0;
  cq_attr.wait_obj = FI_WAIT_FD;
  if (fi_cq_open(_domain, &cq_attr, &_cq, nullptr) != 0) {
    cq_attr.wait_obj = FI_WAIT_NONE;  // no descriptor: arm_wakeup answers busy
    check(fi_cq_open(_domain, &cq_attr, &_cq, nullptr), "fi_cq_open");
  } else if (fi_control(&_cq->fid, FI_GETWAIT, &_wait_fd) != 0) {
    _wait_fd = -1;
  }
  fi_av_attr av_attr{};
  av_attr.type = FI_AV_MAP;
  if (fi_av_open(_domain, &av_attr, &_av, nullptr) != 0) {
    av_attr.type = FI_AV_TABLE;
    check(fi_av_open(_domain, &av_attr, &_av, nullptr), "fi_av_open");
  }
  check(fi_endpoint(_domain, info, &_ep, nullptr), "fi_endpoint");
  check(fi_ep_bind(_ep, &_cq->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)");
  check(fi_ep_bind(_ep, &_av->fid, 0), "fi_ep_bind(av)");
  if (is_node_local(info)) {
    // The shm provider names its segment after the process id: two
    // processes of one host in different pid namespaces (containers,
    // sandboxes) would open each other's. A name of our own instead (it
    // also lets us find our segments again: see ofi_shm_segment.hpp).
    const std::string own = ofi_shm::make_endpoint_name();
    if (fi_setname(&_ep->fid, const_cast<char*>(own.c_str()), own.size() + 1) != 0)
      log_write(log_level::info, "ofi", "the shm provider keeps its own endpoint name (fi_setname refused)");
  }
  check(fi_enable(_ep), "fi_enable");
  char name[kMaxAddr];
  std::size_t len = sizeof name;
  check(fi_getname(&_ep->fid, name, &len), "fi_getname");
  _name.assign(name, len);
  if (is_node_local(info)) {
    const std::string file = ofi_shm::segment_file(_name);
    if (ofi_shm::is_driver_segment(file) && !_seg.take(file))
      log_write(log_level::warn, "ofi", "cannot hold the shm segment /dev/shm/" + file +
                                             ": peers will not notice this process dying");
    // What earlier processes of this user left (killed before they
    // withdrew their names).
    for (const std::string& left : ofi_shm::reap_abandoned_segments(std::chrono::seconds(2)))
      log_write(log_level::info, "ofi", "removed /dev/shm/" + left + " (left by a process that is gone)");
  }
  _host = hostname();
  std::string prov_field = _prov;
  std::replace(prov_field.begin(), prov_field.end(), ';', ',');
  _local = "ofi:" + prov_field + ":" + _host + ":" + hex(_name);

  _iov_limit = std::max<std::size_t>(1, std::min<std::size_t>(info->tx_attr->iov_limit, info->rx_attr->iov_limit));
  _inject = info->tx_attr->inject_size;

  _caps = {};
  _caps.name = "ofi";
  _caps.max_packet_size = kMaxPacket;
  _caps.max_iov = std::min<std::size_t>(_iov_limit, 64);
  _caps.max_sends_in_flight = kMaxSendsInFlight;
  _caps.max_inline = std::min<std::size_t>(_inject, kMaxPacket);
  _caps.gather_scatter = _iov_limit > 1;
  _caps.zero_copy_data = true;  // the provider moves bytes from/to the caller's iovec
  _caps.rdma_get = _rma;
  _caps.node_local = is_node_local(info);
  // Estimates, placed behind the built-in drivers of the same reach (the
  // session's automatic choice never takes ofi; NMAD_DRIVER=ofi does).
  _caps.latency_us = _caps.node_local ? 2 : 25;
  _caps.bandwidth_mbps = _caps.node_local ? 5000 : 1000;
  _caps.overhead_us = 1;

  // Packet buffers, credit windows and the data receives' budget, from the
  // provider's receive queue (see the top of this file).
  const std::size_t queue = info->rx_attr->size ? info->rx_attr->size : 1024;
  const std::size_t peers = static_cast<std::size_t>(std::max(1, _cfg.size - 1));
  const std::size_t reserve = kCtrlReserve + kCtrlReservePerPeer * peers;
  _rx_count = std::max(kRecvBuffers, reserve + kMinWindow * peers);
  if (_caps.node_local) _rx_count = std::max(_rx_count, std::min(queue / 2, kMaxRecvBuffersShm));
  if (queue > kRecvQueueMargin + kMinDataRecvs)
    _rx_count = std::min(_rx_count, queue - kRecvQueueMargin - kMinDataRecvs);
  _rx_count = std::max<std::size_t>(_rx_count, 2 * peers + kCtrlReserve);
  const std::size_t share = _rx_count > reserve ? (_rx_count - reserve) / peers : 0;
  _window = static_cast<std::uint32_t>(std::clamp<std::size_t>(share, 2, kCreditMask));
  if (share < 2)
    log_write(log_level::warn, "ofi",
              "the provider's receive queue (" + std::to_string(queue) + ") is short for " + std::to_string(peers) +
                  " peers: credit windows of 2 packets exceed the packet buffers");
  _credit_threshold = std::max<std::uint32_t>(1, (_window + 1) / 2);
  _data_recv_max = queue > _rx_count + kRecvQueueMargin + kMinDataRecvs ? queue - _rx_count - kRecvQueueMargin
                                                                          : kMinDataRecvs;
  _rx_block.reset(new std::byte[_rx_count * kMaxPacket]);  // not initialised: pages stay untouched
  for (std::size_t i = 0; i < _rx_count; ++i) {
    op* o = new_op(op_kind::rx_buffer, invalid_connection);
    o->rx = _rx_block.get() + i * kMaxPacket;
    post_rx_buffer(o);
  }
  if (_rx_post_error_logged)
    throw std::runtime_error("ofi driver (" + _prov + "): the provider refuses receive buffers (see the log)");
  log_write(log_level::info, "ofi",
            "provider " + _prov + " (domain " + std::string(info->domain_attr->name ? info->domain_attr->name : "?") +
                "), address " + _local + ", " + std::to_string(_rx_count) + " packet buffers, window " +
                std::to_string(_window) + " per peer, " + std::to_string(_data_recv_max) + " data receives");
}

void ofi_driver::post_rx_buffer(op* o) {
  ssize_t r = fi_trecv(_ep, o->rx, kMaxPacket, nullptr, FI_ADDR_UNSPEC, 0, kIgnoreNonData, &o->ctx);
  if (r == 0) {
    const connection_id owed = o->conn;
    o->conn = invalid_connection;
    if (owed != invalid_connection) owe_credit(owed);
    return;
  }
  _rx_idle.push_back(o);  // posted again by the next poll()
  if (transient(r)) {
    ++_flow.transient_retries;
    return;
  }
  // The provider refuses packet buffers for good: no peer can send us
  // anything any more (its credits would run out, unanswered).
  if (!_rx_post_error_logged)
    log_write(log_level::error, "ofi", fi_error(_prov, "fi_trecv (packet buffer)", static_cast<int>(r)));
  _rx_post_error_logged = true;
  fail_all("this process's provider refuses receive buffers (" +
           fi_error(_prov, "fi_trecv (packet buffer)", static_cast<int>(r)) + ")");
}

void ofi_driver::owe_credit(connection_id id) {
  conn* c = find(id);
  if (!c || c->st != state::established) return;
  ++c->rx_owed;
  if (c->rx_owed >= _credit_threshold && !c->owing_listed) {
    c->owing_listed = true;
    _owing.push_back(id);
  }
}

// Peers owed half a window or more whose packets have not carried it back
// meanwhile get a credit message (it costs no credit: see the top).
void ofi_driver::return_credits() {
  std::vector<connection_id> owing;
  owing.swap(_owing);
  for (connection_id id : owing) {
    conn* c = find(id);
    if (!c) continue;
    c->owing_listed = false;
    if (c->st != state::established || c->rx_owed < _credit_threshold) continue;
    const std::uint64_t tag = ctrl_tag(c->peer_id) | std::min<std::uint64_t>(c->rx_owed, kCreditMask);
    c->rx_owed = 0;
    ++_flow.credit_messages;
    send_ctrl(c->addr, tag, ctrl_type::credit, make_ctrl(ctrl_type::credit, _cfg.rank, c->id, {}, {}), c->id);
  }
}

void ofi_driver::fail_all(const std::string& reason) {
  for (auto& [id, c] : _conns) fail(c, reason);
}

void ofi_driver::internal_error(connection_id id, const char* what) noexcept {
  try {
    const std::string reason = std::string("internal error in this process's ofi driver: ") + what;
    log_write(log_level::error, "ofi", reason);
    if (id == invalid_connection) {
      fail_all(reason);
    } else if (conn* c = find(id)) {
      fail(*c, reason);
    }
  } catch (...) {
    // Out of memory even for the message: the connection stays as it is.
  }
}

void ofi_driver::check_liveness(steady::time_point now) {
  if (now < _next_liveness) return;
  _next_liveness = now + kLivenessPeriod;
  for (auto& [id, c] : _conns) {
    if (c.st == state::failed || !c.probe || c.seg.held()) continue;
    c.seg.reap();
    fail(c, "peer process died (nobody holds its shared-memory endpoint " + c.seg.file() + " any more) [" + _prov +
                "]");
  }
}

bool ofi_driver::reachable(std::string_view address) const {
  parsed_address p;
  if (!parse_address(address, p)) return false;
  if (p.provider != _prov) return false;
  return !_caps.node_local || p.host == _host;
}

conn& ofi_driver::add_conn() {
  while (_conns.count(_next_id) || _next_id == 0) _next_id = (_next_id % kMaxConnId) + 1;
  conn& c = _conns[_next_id];
  c.id = _next_id;
  _next_id = (_next_id % kMaxConnId) + 1;
  return c;
}

bool ofi_driver::insert_address(std::string_view name, fi_addr_t& out, std::string& why) {
  std::string copy(name);
  int n = fi_av_insert(_av, copy.data(), 1, &out, 0, nullptr);
  if (n == 1) return true;
  why = fi_error(_prov, "fi_av_insert", n < 0 ? n : -FI_EINVAL);
  return false;
}

void ofi_driver::send_ctrl(fi_addr_t to, std::uint64_t tag, ctrl_type type, std::vector<std::byte> bytes,
                           connection_id conn) {
  op* o = new_op(op_kind::ctrl_send, conn);
  o->ctrl = type;
  o->owned = std::move(bytes);
  _ctrl_queue.push_back({to, tag, type, o});
  flush_ctrl();
}

bool ofi_driver::flush_ctrl() {
  while (!_ctrl_queue.empty()) {
    queued_ctrl& q = _ctrl_queue.front();
    op* o = q.o;
    conn* c = o->conn == invalid_connection ? nullptr : find(o->conn);
    if (o->conn != invalid_connection && (!c || c->st == state::failed)) {  // its connection went meanwhile
      release(o);
      _ctrl_queue.pop_front();
      continue;
    }
    ssize_t r = fi_tsend(_ep, o->owned.data(), o->owned.size(), nullptr, q.to, q.tag, &o->ctx);
    if (transient(r)) return false;
    const ctrl_type type = q.type;
    _ctrl_queue.pop_front();
    if (r != 0) {
      release(o);
      if (c) fail(*c, fi_error(_prov, "fi_tsend (control message)", static_cast<int>(r)));
      continue;
    }
    ++_ctrl_pending;
    if (c && type == ctrl_type::ack && c->st == state::ack_queued) c->st = state::established;
  }
  return true;
}

// An shm peer's endpoint `name`: its segment must exist, and where the
// driver named it, it is opened into `seg` for the liveness checks; one
// that nobody holds and whose pid does not run here belongs to a process
// that is gone. (Other names, and other providers: true.)
bool shm_peer_alive(const std::string& name, ofi_shm::peer_segment& seg, std::string& why) {
  if (name.compare(0, 9, "fi_shm://") != 0) return true;
  const std::string file = ofi_shm::segment_file(name);
  if (file.empty() || ::access(("/dev/shm/" + file).c_str(), F_OK) != 0) {
    why = "the peer's shared-memory endpoint is gone (" + (file.empty() ? std::string("bad name") : file) + ")";
    return false;
  }
  int pid = 0;
  if (!ofi_shm::is_driver_segment(file, &pid)) return true;
  if (!seg.open(file)) {
    why = "the peer's shared-memory endpoint is gone (" + file + ")";
    return false;
  }
  if (!seg.held() && ::kill(pid, 0) != 0 && errno == ESRCH) {
    seg.reap();
    why = "the peer process is gone (nobody holds its shared-memory endpoint " + file + ")";
    return false;
  }
  return true;
}

connection_id ofi_driver::connect(int peer_rank, std::string_view address) {
  conn& c = add_conn();
  c.peer_rank = peer_rank;
  c.deadline = steady::now() + _connect_timeout;
  parsed_address p;
  std::string why;
  if (!_ep) {
    fail(c, "driver not open");
  } else if (peer_rank < 0 || peer_rank >= _cfg.size || peer_rank == _cfg.rank) {
    fail(c, "peer rank out of range");
  } else if (!parse_address(address, p)) {
    fail(c, "bad address '" + std::string(address) + "' (want ofi:provider:host:name)");
  } else if (p.provider != _prov) {
    fail(c, "the peer uses provider " + p.provider + ", this process " + _prov);
  } else if (_caps.node_local && p.host != _host) {
    fail(c, "the peer is on another host (" + p.host + ") and provider " + _prov + " reaches this host only");
  } else if (!shm_peer_alive(p.name, c.seg, why)) {
    fail(c, why);
  } else if (!insert_address(p.name, c.addr, why)) {
    fail(c, why);
  } else {
    send_ctrl(c.addr, ctrl_tag(0), ctrl_type::hello,
              make_ctrl(ctrl_type::hello, _cfg.rank, c.id, _cfg.job_key, _name, _window, segment_flags()), c.id);
  }
  return c.id;
}

post_result ofi_driver::send_packet(connection_id id, std::span<const iovec> iov, void* token) {
  conn* c = find(id);
  if (post_result r = check_postable(c); r != post_result::posted) return r;
  const std::size_t len = total_len(iov);
  if (len > kMaxPacket || iov.size() > 64) return post_result::failed;
  if (c->in_flight >= kMaxSendsInFlight) return post_result::retry;
  if (c->tx_credits == 0) {
    ++_flow.credit_waits;
    return post_result::retry;
  }
  op* o = new_op(op_kind::send, id);
  o->token = token;
  const std::uint64_t tag = packet_tag_for(*c);
  ssize_t r;
  if (iov.size() <= _iov_limit) {
    r = fi_tsendv(_ep, iov.data(), nullptr, iov.size(), c->addr, tag, &o->ctx);
  } else {  // more pieces than the provider takes: one copy
    o->owned.resize(len);
    std::size_t pos = 0;
    for (const iovec& v : iov) {
      if (v.iov_len) std::memcpy(o->owned.data() + pos, v.iov_base, v.iov_len);
      pos += v.iov_len;
    }
    r = fi_tsend(_ep, o->owned.data(), len, nullptr, c->addr, tag, &o->ctx);
  }
  if (r == 0) {
    ++c->in_flight;
    c->sends.insert(o);
    --c->tx_credits;
    c->rx_owed = 0;  // carried by the tag
    return post_result::posted;
  }
  release(o);
  if (transient(r)) {
    ++_flow.transient_retries;
    return post_result::retry;
  }
  fail(*c, fi_error(_prov, "fi_tsend (packet)", static_cast<int>(r)));
  return post_result::failed;
}

post_result ofi_driver::inject_packet(connection_id id, std::span<const iovec> iov) {
  conn* c = find(id);
  if (post_result r = check_postable(c); r != post_result::posted) return r;
  const std::size_t len = total_len(iov);
  if (len > _caps.max_inline || len == 0) return post_result::retry;
  if (c->tx_credits == 0) {
    ++_flow.credit_waits;
    return post_result::retry;
  }
  std::byte buf[4096];
  if (len > sizeof buf) return post_result::retry;
  std::size_t pos = 0;
  for (const iovec& v : iov) {
    if (v.iov_len) std::memcpy(buf + pos, v.iov_base, v.iov_len);
    pos += v.iov_len;
  }
  ssize_t r = fi_tinject(_ep, buf, len, c->addr, packet_tag_for(*c));
  if (r == 0) {
    --c->tx_credits;
    c->rx_owed = 0;
    return post_result::posted;
  }
  if (transient(r)) {
    ++_flow.transient_retries;
    return post_result::retry;
  }
  fail(*c, fi_error(_prov, "fi_tinject (packet)", static_cast<int>(r)));
  return post_result::failed;
}

post_result ofi_driver::send_data(connection_id id, std::uint64_t cookie, std::span<const iovec> iov,
                                  void* token) {
  conn* c = find(id);
  if (post_result r = check_postable(c); r != post_result::posted) return r;
  if (iov.size() > _iov_limit) return post_result::failed;
  if (c->in_flight >= kMaxSendsInFlight) return post_result::retry;
  op* o = new_op(op_kind::send, id);
  o->token = token;
  o->cookie = cookie;
  ssize_t r = iov.empty() ? fi_tsend(_ep, nullptr, 0, nullptr, c->addr, data_tag(c->peer_id, cookie), &o->ctx)
                          : fi_tsendv(_ep, iov.data(), nullptr, iov.size(), c->addr, data_tag(c->peer_id, cookie),
                                      &o->ctx);
  if (r == 0) {
    ++c->in_flight;
    c->sends.insert(o);
    return post_result::posted;
  }
  release(o);
  if (transient(r)) {
    ++_flow.transient_retries;
    return post_result::retry;
  }
  fail(*c, fi_error(_prov, "fi_tsend (data)", static_cast<int>(r)));
  return post_result::failed;
}

post_result ofi_driver::recv_data(connection_id id, std::uint64_t cookie, std::span<const iovec> iov,
                                  void* token) {
  conn* c = find(id);
  if (post_result r = check_postable(c); r != post_result::posted) return r;
  if (iov.size() > _iov_limit) return post_result::failed;
  const auto low = static_cast<std::uint32_t>(cookie);
  if (c->recvs.count(low)) return post_result::failed;  // posted already (or same low half)
  if (_data_recvs >= _data_recv_max) {  // the provider's queue is for packet buffers too
    ++_flow.data_recv_waits;
    return post_result::retry;
  }
  op* o = new_op(op_kind::recv_data, id);
  o->token = token;
  o->cookie = cookie;
  o->capacity = total_len(iov);
  // The local connection id is what the peer puts in its data tags.
  const std::uint64_t tag = data_tag(c->id, cookie);
  const ssize_t r = iov.empty() ? fi_trecv(_ep, nullptr, 0, nullptr, FI_ADDR_UNSPEC, tag, 0, &o->ctx)
                                : fi_trecvv(_ep, iov.data(), nullptr, iov.size(), FI_ADDR_UNSPEC, tag, 0, &o->ctx);
  if (r != 0) {
    release(o);
    if (transient(r)) {
      ++_flow.transient_retries;
      ++_flow.data_recv_waits;
      return post_result::retry;
    }
    fail(*c, "this process's provider refused the receive: " + fi_error(_prov, "fi_trecv (data)", static_cast<int>(r)));
    return post_result::failed;
  }
  c->recvs.emplace(low, o);
  return post_result::posted;
}

void ofi_driver::close_connection(connection_id id) {
  conn* c = find(id);
  if (!c) return;
  try {
    if (c->st == state::established)
      send_ctrl(c->addr, ctrl_tag(c->peer_id), ctrl_type::bye, make_ctrl(ctrl_type::bye, _cfg.rank, c->id, {}, {}),
                invalid_connection);
  } catch (const std::exception&) {
    // No memory for a bye: the peer finds the connection silent instead.
  }
  fail(*c, "closed");
  std::erase(_to_report, id);
  _conns.erase(id);
}

// Fails a connection: its pending operations die silently (receives are
// cancelled so libfabric lets go of the caller's buffers); the failure is
// reported from poll().
void ofi_driver::fail(conn& c, std::string reason) {
  if (c.st == state::failed) return;
  c.st = state::failed;
  c.fail_reason = reason;
  for (auto& [low, o] : c.recvs) {
    o->dead = true;
    fi_cancel(&_ep->fid, &o->ctx);
  }
  c.recvs.clear();
  for (op* o : c.sends) o->dead = true;
  c.sends.clear();
  c.in_flight = 0;
  c.tx_credits = 0;
  c.rx_owed = 0;
  if (reason != "closed") {
    log_write(log_level::warn, "ofi",
              "connection to rank " + std::to_string(c.peer_rank) + " (" + _prov + ") failed: " + reason);
    _to_report.push_back(c.id);
  }
}

void ofi_driver::complete(const fi_cq_tagged_entry& e) {
  op* o = static_cast<op*>(e.op_context);
  if (!o || !_ops.count(o)) return;  // an inject or a stranger: nothing to do
  switch (o->kind) {
    case op_kind::rx_buffer: {
      const std::span<const std::byte> bytes(o->rx, e.len);
      o->conn = invalid_connection;
      if (e.tag & kCtrlBit) {
        on_ctrl(e.tag, bytes);
      } else {
        const auto id = static_cast<connection_id>((e.tag >> 32) & kMaxConnId);
        conn* c = find(id);
        if (c && c->st == state::established) {
          credited(*c, e.tag);  // before the engine may answer
          o->conn = id;         // owed a credit once the buffer is posted again
          _cfg.events->on_packet(id, bytes);
        }
      }
      post_rx_buffer(o);
      return;
    }
    case op_kind::ctrl_send:
      --_ctrl_pending;
      release(o);
      return;
    case op_kind::send: {
      const bool dead = o->dead;
      void* token = o->token;
      conn* c = dead ? nullptr : find(o->conn);
      if (c) {
        c->sends.erase(o);
        --c->in_flight;
      }
      release(o);
      if (c) _cfg.events->on_send_done(token);
      return;
    }
    case op_kind::recv_data: {
      const bool dead = o->dead;
      void* token = o->token;
      const connection_id id = o->conn;
      const auto low = static_cast<std::uint32_t>(o->cookie);
      release(o);
      if (dead) return;
      if (conn* c = find(id)) c->recvs.erase(low);
      _cfg.events->on_recv_data_done(token, e.len);
      return;
    }
    case op_kind::get: {  // an RMA read: the whole iovec is in
      const bool dead = o->dead;
      void* token = o->token;
      const std::size_t n = o->capacity;
      conn* c = dead ? nullptr : find(o->conn);
      if (c) {
        c->sends.erase(o);
        --c->in_flight;
      }
      release(o);
      if (c) _cfg.events->on_recv_data_done(token, n);
      return;
    }
  }
}

void ofi_driver::complete_error(const fi_cq_err_entry& e) {
  op* o = static_cast<op*>(e.op_context);
  if (!o || !_ops.count(o)) return;
  char buf[256];
  const char* detail = fi_cq_strerror(_cq, e.prov_errno, e.err_data, buf, sizeof buf);
  const std::string text = std::string(ofi_library::strerror(e.err)) + (detail && *detail ? std::string(" (") + detail + ")" : "");
  switch (o->kind) {
    case op_kind::rx_buffer:
      if (e.err != FI_ECANCELED) {
        if (!_rx_error_logged)
          log_write(log_level::warn, "ofi", "packet receive failed (" + _prov + "): " + text);
        _rx_error_logged = true;
        // A packet larger than the buffers (FI_ETRUNC) fails its sender.
        const auto id = static_cast<connection_id>((e.tag >> 32) & kMaxConnId);
        if (conn* c = find(id); c && !(e.tag & kCtrlBit))
          fail(*c, "protocol error: packet larger than " + std::to_string(kMaxPacket) + " bytes (" + text + ")");
      }
      o->conn = invalid_connection;
      if (_ep) post_rx_buffer(o);
      return;
    case op_kind::ctrl_send: {
      --_ctrl_pending;
      const connection_id id = o->conn;
      release(o);
      if (conn* c = find(id); c && c->st == state::await_ack)
        fail(*c, "cannot reach the peer: " + text + " [" + _prov + "]");
      return;
    }
    case op_kind::send:
    case op_kind::get:
    case op_kind::recv_data: {
      const bool dead = o->dead;
      const connection_id id = o->conn;
      const std::uint64_t cookie = o->cookie;
      const bool recv = o->kind == op_kind::recv_data;
      const bool get = o->kind == op_kind::get;
      release(o);
      if (dead || e.err == FI_ECANCELED) return;
      conn* c = find(id);
      if (!c) return;
      if (get)
        fail(*c, "RMA read of the peer's rendezvous data failed: " + text + " [" + _prov + "]");
      else if (recv && e.err == FI_ETRUNC)
        fail(*c, "protocol error: data for cookie " + std::to_string(cookie) + " exceeds the bytes posted (" + text +
                     ")");
      else
        fail(*c, std::string(recv ? "data receive" : "send") + " failed: " + text + " [" + _prov + "]");
      return;
    }
  }
}

void ofi_driver::on_ctrl(std::uint64_t tag, std::span<const std::byte> bytes) {
  ctrl_header h;
  if (bytes.size() < sizeof h) return;
  std::memcpy(&h, bytes.data(), sizeof h);
  if (std::memcmp(h.magic, kCtrlMagic, 4) != 0 || h.version != kCtrlVersion) return;
  if (h.key_len > kMaxKey || h.addr_len > kMaxAddr || sizeof h + h.key_len + h.addr_len > bytes.size()) return;
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()) + sizeof h, h.key_len);
  const std::string_view addr(reinterpret_cast<const char*>(bytes.data()) + sizeof h + h.key_len, h.addr_len);
  const auto my_id = static_cast<connection_id>((tag >> 32) & kMaxConnId);
  switch (h.type) {
    case ctrl_type::hello: {
      if (addr.empty()) return;
      fi_addr_t from;
      std::string why;
      if (!insert_address(addr, from, why)) {
        log_write(log_level::warn, "ofi", "refused a hello: " + why);
        return;
      }
      std::string refusal;
      if (text.size() != _cfg.job_key.size() || std::memcmp(text.data(), _cfg.job_key.data(), text.size()) != 0)
        refusal = "wrong job key";
      else if (h.rank < 0 || h.rank >= _cfg.size || h.rank == _cfg.rank)
        refusal = "rank " + std::to_string(h.rank) + " out of range";
      if (!refusal.empty()) {
        log_write(log_level::warn, "ofi", "refused a hello from a peer claiming rank " + std::to_string(h.rank) + ": " + refusal);
        send_ctrl(from, ctrl_tag(h.sender_id), ctrl_type::refuse, make_ctrl(ctrl_type::refuse, _cfg.rank, 0, refusal, {}),
                  invalid_connection);
        return;
      }
      conn& c = add_conn();
      c.peer_rank = h.rank;
      c.addr = from;
      c.peer_id = h.sender_id;
      c.st = state::ack_queued;
      c.tx_credits = c.tx_window = h.window;
      // shm: the peer's segment, for the liveness checks (it exists: the
      // peer is waiting for our answer).
      if (_caps.node_local && (h.flags & kCtrlSegmentHeld)) c.probe = shm_peer_alive(std::string(addr), c.seg, why);
      send_ctrl(from, ctrl_tag(h.sender_id), ctrl_type::ack,
                make_ctrl(ctrl_type::ack, _cfg.rank, c.id, {}, {}, _window, segment_flags()), c.id);
      log_write(log_level::info, "ofi", "connected to rank " + std::to_string(c.peer_rank) + " (" + _prov + ")");
      _cfg.events->on_connected(c.id, c.peer_rank);
      return;
    }
    case ctrl_type::ack: {
      conn* c = find(my_id);
      if (!c || c->st != state::await_ack) return;
      if (h.rank != c->peer_rank) {
        fail(*c, "peer at that address is rank " + std::to_string(h.rank));
        return;
      }
      c->peer_id = h.sender_id;
      c->st = state::established;
      c->tx_credits = c->tx_window = h.window;
      c->probe = c->seg.is_open() && (h.flags & kCtrlSegmentHeld);
      log_write(log_level::info, "ofi", "connected to rank " + std::to_string(c->peer_rank) + " (" + _prov + ")");
      _cfg.events->on_connected(c->id, c->peer_rank);
      return;
    }
    case ctrl_type::refuse: {
      conn* c = find(my_id);
      if (c && c->st == state::await_ack) fail(*c, "rank " + std::to_string(h.rank) + " refused: " + std::string(text));
      return;
    }
    case ctrl_type::bye: {
      conn* c = find(my_id);
      if (c && c->st == state::established && c->peer_id == h.sender_id) fail(*c, "peer closed the connection");
      return;
    }
    case ctrl_type::credit: {
      conn* c = find(my_id);
      if (c && c->st == state::established && c->peer_id == h.sender_id) credited(*c, tag);
      return;
    }
  }
}

int ofi_driver::poll() {
  if (!_ep || _depth > 0) return 0;
  struct depth_guard {
    int& depth;
    ~depth_guard() { --depth; }
  } guard{++_depth};
  int work = 0;
  try {
    work = progress();
  } catch (const std::exception& e) {
    internal_error(invalid_connection, e.what());
  } catch (...) {
    internal_error(invalid_connection, "unknown exception");
  }
  // Failures, each reported once; the connection then goes.
  while (!_to_report.empty()) {
    const connection_id id = _to_report.front();
    _to_report.erase(_to_report.begin());
    auto it = _conns.find(id);
    if (it == _conns.end()) continue;
    std::string reason;
    reason.swap(it->second.fail_reason);
    _conns.erase(it);
    _failed_reasons[id] = reason;
    _cfg.events->on_connection_failed(id, reason);
    ++work;
  }
  return work;
}

int ofi_driver::progress() {
  apply_released();
  int work = 0;
  if (!_rx_idle.empty()) {
    std::vector<op*> idle;
    idle.swap(_rx_idle);
    for (op* o : idle) post_rx_buffer(o);
  }
  bool drained = false;
  for (int round = 0; round < kMaxCqReadsPerPoll; ++round) {
    fi_cq_tagged_entry e[kCqBatch];
    ssize_t n = fi_cq_read(_cq, e, kCqBatch);
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      if (fi_cq_readerr(_cq, &err, 0) > 0) complete_error(err);
      ++work;
      continue;
    }
    if (n <= 0) {
      if (n != -FI_EAGAIN && n != 0) {
        log_write(log_level::error, "ofi", fi_error(_prov, "fi_cq_read", static_cast<int>(n)));
      }
      drained = true;
      break;
    }
    for (ssize_t i = 0; i < n; ++i) complete(e[i]);
    work += static_cast<int>(n);
    if (n < kCqBatch) {
      drained = true;
      break;
    }
  }
  if (!_owing.empty()) return_credits();
  if (!_ctrl_queue.empty()) flush_ctrl();
  // Handshakes past their deadline.
  const steady::time_point now = steady::now();
  for (auto& [id, c] : _conns)
    if (c.st == state::await_ack && now > c.deadline)
      fail(c, "no answer to the hello within " + std::to_string(_connect_timeout.count()) +
                  " ms (peer not running, or not polling?) [" + _prov + "]");
  // shm peers gone without a bye; only once everything they sent before
  // (a bye among it) has been read.
  if (drained && _caps.node_local) check_liveness(now);
  return work;
}

arm_result ofi_driver::arm_wakeup(std::vector<pollfd>& fds, int& timeout_ms) {
  if (!_ep) return arm_result::armed;
  // Buffers or control messages the provider refused are retried by poll().
  if (!_to_report.empty() || _wait_fd < 0 || !_rx_idle.empty() || !_ctrl_queue.empty() || !_owing.empty())
    return arm_result::busy;
  fid* f = &_cq->fid;
  if (fi_trywait(_fabric, &f, 1) != FI_SUCCESS) return arm_result::busy;
  fds.push_back({_wait_fd, POLLIN, 0});
  for (auto& [id, c] : _conns)
    if (c.st == state::await_ack) {
      limit_sleep(timeout_ms, 10);
      break;
    }
  return arm_result::armed;
}

}  // namespace

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

std::vector<ofi_provider_status> ofi_probe_providers() {
  std::vector<ofi_provider_status> out;
  const std::string domain = config::text("NMAD_OFI_DOMAIN");
  info_ptr hints = make_hints("");
  fi_info* raw = nullptr;
  const int ret = ofi_library::getinfo(hints.get(), &raw);
  info_ptr list(raw);
  if (ret != 0) {
    out.push_back({"(none)", false, std::string("fi_getinfo: ") + ofi_library::strerror(-ret)});
    return out;
  }
  struct quiet_events final : driver_events {
    void on_connected(connection_id, int) override {}
    void on_packet(connection_id, std::span<const std::byte>) override {}
    void on_send_done(void*) override {}
    void on_recv_data_done(void*, std::size_t) override {}
    void on_connection_failed(connection_id, std::string_view) override {}
  } ev;
  for (const candidate& c : candidates(list.get(), domain)) {
    ofi_provider_status s{c.provider, false, {}};
    try {
      ofi_driver d(c.provider);
      d.open({0, 1, "nmad-info", &ev});
      const driver_caps& k = d.caps();
      s.usable = true;
      s.detail = std::string("domain ") + (c.info->domain_attr->name ? c.info->domain_attr->name : "?") +
                 ", max iov " + std::to_string(k.max_iov) + ", inline " + std::to_string(k.max_inline) + " B" +
                 ", sleep on " + (d.has_wait_fd() ? "the CQ's wait fd" : "nothing (busy)") +
                 (k.rdma_get ? ", RMA read rendezvous" : ", no RMA read") +
                 (k.node_local ? ", this host only" : "");
    } catch (const std::exception& e) {
      s.detail = e.what();
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace nmad
