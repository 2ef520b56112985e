#pragma once
// The ofi driver's internals, shared by its files (see ofi_driver.cpp for
// the design): wire constants and control messages, the operation and
// connection records, and the driver class. Files by object:
//   ofi_driver.cpp     design notes, factories, statistics
//   ofi_provider.cpp   provider selection (hints, candidates, probing)
//   ofi_endpoint.cpp   open/close, connections, hellos and control messages,
//                      liveness of shm peers, failures
//   ofi_datapath.cpp   packet buffers and credits, sends, bulk data, the
//                      completion queue, poll, sleeping
//   ofi_mr_cache.cpp   RMA read: registration cache, expose/unexpose, reads
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
#include "api/nmad/services/config.hpp"
#include "api/nmad/services/log.hpp"
#include "drivers/ofi/ofi_library.hpp"
#include "drivers/ofi/ofi_ranking.hpp"
#include "drivers/ofi/ofi_shm_segment.hpp"

namespace nmad::ofi_detail {


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

inline std::uint64_t packet_tag(std::uint32_t peer_id) { return std::uint64_t{peer_id} << 32; }
inline std::uint64_t ctrl_tag(std::uint32_t peer_id) { return kCtrlBit | std::uint64_t{peer_id} << 32; }
inline std::uint64_t data_tag(std::uint32_t peer_id, std::uint64_t cookie) {
  return kDataBit | std::uint64_t{peer_id} << 32 | (cookie & 0xffffffffu);
}

// The driver's knobs, read in one place (ranges and defaults:
// core/common/config_knobs.cpp). `provider` is the provider a user forced
// (NMAD_OFI_PROVIDER, else libfabric's own FI_PROVIDER), `provider_source`
// which of the two said so; empty: the best by capability (survey below).
struct tunables {
  std::chrono::milliseconds connect_timeout{5000};  // NMAD_OFI_CONNECT_TIMEOUT_MS
  std::size_t mr_cache = 64;                        // NMAD_OFI_MR_CACHE
  std::string rma;                                  // NMAD_OFI_RMA: auto, on, off
  std::string provider, provider_source;
  std::string domain;                               // NMAD_OFI_DOMAIN
};
tunables read_tunables();

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

inline std::vector<std::byte> make_ctrl(ctrl_type t, int rank, std::uint32_t sender_id, std::string_view text,
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
inline std::string fi_error(std::string_view prov, std::string_view call, int ret) {
  return "ofi driver (" + std::string(prov.empty() ? "no provider" : prov) + "): " + std::string(call) +
         " failed: " + ofi_library::strerror(ret < 0 ? -ret : ret);
}

// Transient refusals of the provider: the operation is tried again later.
inline bool transient(ssize_t r) { return r == -FI_EAGAIN || r == -FI_ENOMEM; }

inline std::string hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

inline std::string hex(std::string_view bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string s;
  for (unsigned char c : bytes) {
    s += digits[c >> 4];
    s += digits[c & 15];
  }
  return s;
}

inline bool unhex(std::string_view s, std::string& out) {
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
inline bool parse_address(std::string_view a, parsed_address& p) {
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

inline std::size_t total_len(std::span<const iovec> iov) {
  std::size_t n = 0;
  for (const iovec& v : iov) n += v.iov_len;
  return n;
}

struct info_deleter {
  void operator()(fi_info* i) const { ofi_library::require().freeinfo(i); }
};
using info_ptr = std::unique_ptr<fi_info, info_deleter>;

// Provider selection (ofi_provider.cpp): what the driver asks of a provider,
// whether an entry's endpoints live in a file of /dev/shm, and the providers
// usable here with their entries of choice, best first by capability
// (ofi_ranking.hpp).
info_ptr make_hints(const std::string& provider);
// The entry's source address is an "fi_shm://" name: the shm provider's
// address scheme (fi_shm(7)), whose endpoints are files of /dev/shm named
// after it. What the segment work of ofi_shm_segment.hpp applies to.
bool in_shm_segment(const fi_info* i);

// A provider the driver can use, in its domain of choice.
struct candidate {
  std::string provider;
  fi_info* info = nullptr;      // its entry for the driver's needs
  fi_info* rma_info = nullptr;  // the same offered with RMA read, or null
  ofi_ranking::offer traits;    // what the ranking weighed
};

// One entry per provider of `list`, in the list's order: in `domain`, or,
// with none named, "lo" where the provider offers it, else its first
// (IPv6 entries left out: IPv4 or named ones are enough).
std::vector<candidate> candidates(fi_info* list, const std::string& domain);

// fi_getinfo asked for the driver's needs (restricted to the providers
// libfabric matches with `forced` when not empty), then again with
// FI_REMOTE_COMM, with FI_LOCAL_COMM and with RMA read in the hints: what
// each provider is offered for says what it can do (ofi_ranking.hpp).
// `ranked`: best first, a provider named exactly `forced` before the others
// (ofi_ranking::rank); it points into the lists, which the survey owns.
struct survey {
  info_ptr plain, remote, local, rma;
  int ret = 0, rma_ret = 0;  // fi_getinfo's answers to the plain and the RMA question
  std::vector<candidate> ranked;  // best first
};
survey survey_providers(const std::string& forced, const std::string& domain, bool want_rma);

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
  // A send the provider did not take (r != 0): retry for a full queue
  // (FI_EAGAIN, FI_ENOMEM), else c fails naming the call.
  post_result refused(conn& c, ssize_t r, const char* call);
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
  // shm: our endpoint is a file of /dev/shm (in_shm_segment); our segment,
  // held while we live; the next liveness check of the peers' segments.
  bool _shm_segment = false;
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


}  // namespace nmad::ofi_detail
