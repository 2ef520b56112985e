// shm driver.
//
// Set-up. open() creates this process's *doorbell* segment (shm_open, mode
// 0600) with a few request slots; local_address() is
// "shm:<host id>:<doorbell name>". To connect, a process creates a *pair*
// segment (header with ranks, pids and the job key, then two rings), claims
// a free doorbell slot of the peer (compare-and-swap) and writes the pair
// segment's name into it. The peer's poll() finds the slot, maps the
// segment, checks the key and rank, answers accepted or refused in the
// header and unlinks the name; both sides then report on_connected. A wrong
// key is refused and logged, and the connecting side fails.
//
// Data path. post_send_packet copies the gather list into the ring (or
// queues it while the ring is full); the peer delivers it from the ring.
// post_recv_data sends the peer a "recv posted" record with the cookie and
// the buffer addresses; post_send_data then copies with one
// process_vm_writev into them during poll() and sends "data done". If the
// kernel refuses cross-memory attach (EPERM/ENOSYS), that connection falls
// back to data fragments through the ring. post_get (rdma_get: the
// receiver pulls) reads the peer's buffer with process_vm_readv.
//
// Sleeping (arm_wakeup). Each process has a wake-up socket (a Unix datagram
// socket bound next to its doorbell in /dev/shm, named in the doorbell) and a count of its armed
// threads in the doorbell. A thread about to sleep raises the count, checks
// its rings once more, and sleeps in poll(2) on the socket and on a process
// descriptor (pidfd) of every peer. A writer, after publishing a record,
// looks at the reader's count (after a full fence, so one of the two sees
// the other) and sends one byte to its socket only if it sleeps: a busy
// reader costs the writer no system call. A writer whose ring is full sets
// the ring's want_space before sleeping; the reader wakes it when it has
// made room. Closing a connection rings the peer too.
//
// Failures. A peer that closes sets a flag in the pair segment; a peer that
// dies is found by kill(pid, 0) (checked every few milliseconds, and at
// once when its pidfd fires during a sleep). Malformed records, and ring
// positions or lengths that do not fit the ring, are a protocol error:
// nothing a peer writes into shared memory is used unchecked. Either way
// the connection fails once, and no cross-memory copy starts towards a
// peer known to be gone.
//
// Tunables (read once at open):
//   NMAD_SHM_RING       bytes per ring (default 1 MiB, at least 256 KiB)
//   NMAD_SHM_CMA        0 disables cross-memory attach (fragments only)
//   NMAD_SHM_CONNECT_TIMEOUT_MS  time a peer has to accept (default 30000)
#include "drivers/shm/shm_driver.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <random>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "core/common/fences.hpp"
#include "core/common/log.hpp"
#include "drivers/shm/shm_names.hpp"
#include "drivers/shm/shm_ring.hpp"

namespace nmad {
namespace {

using steady = std::chrono::steady_clock;

constexpr std::uint64_t kMagic = 0x32304d5344414d4eULL;  // "NMADSM02"
constexpr std::uint32_t kVersion = 2;
constexpr int kSlots = 64;
constexpr std::size_t kMaxPacket = 64 * 1024;
constexpr std::size_t kFragment = 32 * 1024;
constexpr std::size_t kMaxIov = 64;
constexpr std::size_t kMaxQueued = 64;
constexpr int kMaxRecordsPerPoll = 64;
constexpr auto kLivenessPeriod = std::chrono::milliseconds(5);
constexpr std::uint64_t kClockEvery = 64;  // polls between clock reads

enum record_kind : std::uint16_t {
  rk_packet = 1,       // an engine packet
  rk_recv_posted = 2,  // {cookie, niov, (addr, len) * niov}
  rk_data_done = 3,    // {cookie, length}
  rk_data_frag = 4,    // {cookie, offset} + bytes
};

struct tunables {
  std::size_t ring_bytes = 1 << 20;
  bool cma = true;
  std::chrono::milliseconds connect_timeout{30000};
};

tunables read_tunables() {
  tunables t;
  if (const char* v = std::getenv("NMAD_SHM_RING"))
    t.ring_bytes = std::max<std::size_t>(256 * 1024, shm::align8(std::strtoull(v, nullptr, 0)));
  if (const char* v = std::getenv("NMAD_SHM_CMA")) t.cma = std::strcmp(v, "0") != 0;
  if (const char* v = std::getenv("NMAD_SHM_CONNECT_TIMEOUT_MS"))
    t.connect_timeout = std::chrono::milliseconds(std::strtoll(v, nullptr, 0));
  return t;
}

struct doorbell_slot {
  std::atomic<std::uint32_t> state;  // 0 free, 1 being written, 2 ready
  char name[60];
};
struct doorbell {
  std::uint64_t magic;
  std::int32_t rank;
  std::int32_t pid;
  char wake_name[60];                                // wake-up socket in /dev/shm (NUL-terminated)
  alignas(64) std::atomic<std::uint32_t> pending;   // ready slots not yet served
  alignas(64) std::atomic<std::uint32_t> sleeping;  // threads of the owner armed to sleep
  doorbell_slot slots[kSlots];
};

struct pair_header {
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t ring_bytes;
  std::int32_t connector_rank, connector_pid;
  std::int32_t acceptor_rank, acceptor_pid;
  std::uint32_t key_len;
  char key[256];
  char connector_doorbell[60];        // so the acceptor can ring the connector
  std::atomic<std::uint32_t> state;   // 0 offered, 1 accepted, 2 refused
  std::atomic<std::uint32_t> closed[2];  // [0] acceptor, [1] connector
};

constexpr std::size_t header_bytes() { return shm::align8(sizeof(pair_header) + 63) & ~std::size_t{63}; }
std::size_t segment_bytes(std::size_t ring) { return header_bytes() + 2 * sizeof(shm::ring_control) + 2 * ring; }

std::string host_id() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::string boot;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::getline(f, boot);
  std::string id = std::string(host) + "/" + boot.substr(0, 8);
  std::replace(id.begin(), id.end(), ':', '_');
  return id;
}

bool same_key(std::string_view a, std::string_view b) {
  std::size_t diff = a.size() ^ b.size();
  for (std::size_t i = 0; i < std::max(a.size(), b.size()); ++i)
    diff |= static_cast<unsigned char>(i < a.size() ? a[i] : 0) ^ static_cast<unsigned char>(i < b.size() ? b[i] : 0);
  return diff == 0;
}

bool ptrace_allows_peers() {
  std::ifstream f("/proc/sys/kernel/yama/ptrace_scope");
  int scope = 0;
  if (f >> scope) return scope == 0;
  return true;  // no Yama: ordinary permission checks (same user) apply
}

int open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
  return -1;
#endif
}

// Whether `name` (from shared memory) is a plausible segment name of ours:
// NUL-terminated inside its array, starts with '/', no other '/'.
bool valid_segment_name(const char* name, std::size_t cap) {
  const void* nul = std::memchr(name, 0, cap);
  if (!nul || name[0] != '/') return false;
  return std::memchr(name + 1, '/', static_cast<const char*>(nul) - name - 1) == nullptr;
}

std::size_t total_len(std::span<const iovec> iov) {
  std::size_t n = 0;
  for (const auto& v : iov) n += v.iov_len;
  return n;
}

// Copies `n` bytes of `src` into the scatter list `dst` starting `offset`
// bytes into it. Returns false if the list is too short.
bool scatter(std::span<const iovec> dst, std::size_t offset, const std::byte* src, std::size_t n) {
  for (const iovec& v : dst) {
    if (n == 0) return true;
    if (offset >= v.iov_len) {
      offset -= v.iov_len;
      continue;
    }
    std::size_t k = std::min(n, v.iov_len - offset);
    std::memcpy(static_cast<std::byte*>(v.iov_base) + offset, src, k);
    src += k;
    n -= k;
    offset = 0;
  }
  return n == 0;
}

struct fd_holder {
  int fd = -1;
  fd_holder() = default;
  fd_holder(const fd_holder&) = delete;
  fd_holder& operator=(const fd_holder&) = delete;
  ~fd_holder() { reset(); }
  void reset(int v = -1) {
    if (fd >= 0) ::close(fd);
    fd = v;
  }
};

struct mapping {
  void* addr = nullptr;
  std::size_t len = 0;
  mapping() = default;
  mapping(const mapping&) = delete;
  mapping& operator=(const mapping&) = delete;
  ~mapping() { reset(); }
  void reset() {
    if (addr) ::munmap(addr, len);
    addr = nullptr;
    len = 0;
  }
};

class shm_driver final : public driver {
 public:
  ~shm_driver() override;
  void open(const driver_config& config) override;
  const driver_caps& caps() const override { return _caps; }
  std::string local_address() const override { return "shm:" + _host + ":" + _doorbell_name; }
  bool reachable(std::string_view address) const override {
    const std::string prefix = "shm:" + _host + ":";
    return address.substr(0, prefix.size()) == prefix;
  }
  connection_id connect(int peer_rank, std::string_view address) override;
  post_result post_send_packet(connection_id c, std::span<const iovec> iov, void* token) override;
  post_result send_inline(connection_id c, std::span<const iovec> iov) override;
  bool backlog(connection_id id) const override {
    auto it = _conns.find(id);
    if (it == _conns.end()) return false;
    const conn& c = *it->second;
    return !c.outq.empty() || (c.st == state::established && !c.tx.drained());
  }
  post_result post_send_data(connection_id c, std::uint64_t cookie, std::span<const iovec> iov,
                             void* token) override;
  post_result post_recv_data(connection_id c, std::uint64_t cookie, std::span<const iovec> iov,
                             void* token) override;
  post_result post_get(connection_id c, std::uint64_t remote_addr, std::uint64_t remote_key,
                       std::span<const iovec> dst, void* token) override;
  int poll() override;
  void close_connection(connection_id c) override;
  arm_result arm_wakeup(std::vector<pollfd>& fds, int& timeout_ms) override;
  void disarm_wakeup(std::span<const pollfd> mine) override;

 private:
  enum class state { offering, established, failed, closed };
  struct out_op {
    enum kind_t { packet, record, data } kind;
    std::uint16_t record_kind = 0;
    std::vector<iovec> iov;           // packet: caller's gather list
    std::vector<std::byte> bytes;     // record: its payload
    std::uint64_t cookie = 0;         // data
    std::size_t len = 0, sent = 0;    // data: total and done so far
    bool copied = false;              // data: bytes are in place, "done" not yet written
    void* token = nullptr;
  };
  struct recv_op {
    std::vector<iovec> iov;
    std::size_t len = 0;
    void* token = nullptr;
  };
  struct conn {
    connection_id id = 0;
    int peer_rank = -1;
    pid_t peer_pid = 0;
    bool connector = false;
    state st = state::offering;
    bool visible = false;  // on_connected was reported
    bool failure_reported = false;
    std::string fail_reason;
    mapping seg;
    pair_header* hdr = nullptr;
    shm::ring tx, rx;
    std::string seg_name;   // still linked while offering
    mapping peer_doorbell;  // the peer's doorbell (slot claimed; its sleeping count)
    int slot = -1;
    fd_holder peer_wake;    // connected to the peer's wake-up socket
    fd_holder pidfd;        // the peer process (readable once it exits)
    bool tx_dirty = false;  // records written since the peer was last rung
    steady::time_point deadline, next_liveness;
    bool cma = true;
    std::deque<out_op> outq;
    std::vector<void*> done, reporting;
    std::vector<std::pair<void*, std::size_t>> got, got_reporting;  // post_get completions
    std::unordered_map<std::uint64_t, recv_op> recvs;
    std::unordered_map<std::uint64_t, std::vector<iovec>> remote;  // peer's posted buffers
  };

  conn* find(connection_id id) {
    auto it = _conns.find(id);
    return it == _conns.end() ? nullptr : it->second.get();
  }
  conn& add_conn();
  void map_pair(conn& c, void* base);
  void fail(conn& c, std::string reason);
  void accept_requests();
  int progress_offer(conn& c);
  int read_records(conn& c);
  int flush(conn& c);
  bool write_record(conn& c, std::uint16_t kind, std::span<const std::byte> payload);
  void check_liveness(conn& c, steady::time_point now, bool force = false);
  int settle(conn& c);
  void queue_record(conn& c, std::uint16_t kind, std::vector<std::byte> payload);
  bool attach_peer(conn& c, const char* doorbell_name);
  void ring_peer(conn& c);
  void wake_peer(conn& c);

  driver_config _cfg;
  driver_caps _caps;
  tunables _tun;
  std::string _host;
  std::string _doorbell_name;
  mapping _doorbell_map;
  doorbell* _doorbell = nullptr;
  std::string _wake_name;          // our wake-up socket ("/nmad-...-wake-...", under /dev/shm)
  fd_holder _wake;                 // bound to it; peers send a byte to wake us
  bool _liveness_due = false;      // a pidfd fired or a peer closed: check every peer now
  std::map<connection_id, std::unique_ptr<conn>> _conns;
  std::vector<std::unique_ptr<conn>> _graveyard;
  std::vector<conn*> _ids;          // poll()'s snapshot of _conns (a conn closed
                                    // meanwhile stays in _graveyard until poll ends)
  bool _ids_stale = true;           // _conns changed since the snapshot
  std::uint64_t _polls = 0;
  connection_id _next_id = 1;
  int _depth = 0;
  unsigned _names = 0;
};

std::string unique_name(const std::string& prefix, const char* what, unsigned& counter) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  char buf[60];
  std::snprintf(buf, sizeof buf, "/%s%s-%d-%u-%08x", prefix.c_str(), what, static_cast<int>(::getpid()), counter++,
                static_cast<unsigned>(rng()));
  return buf;
}

void shm_driver::open(const driver_config& config) {
  _cfg = config;
  _tun = read_tunables();
  _host = host_id();
  fences::enable(fences::scope::node);  // writers then skip the full fence (ring_peer)
  _caps.name = "shm";
  _caps.max_packet_size = kMaxPacket;
  _caps.max_iov = kMaxIov;
  _caps.max_sends_in_flight = kMaxQueued;
  _caps.max_inline = kMaxPacket;  // every packet is copied into the ring anyway
  _caps.gather_scatter = true;
  _caps.zero_copy_data = true;  // one copy, user buffer to user buffer (CMA)
  // Pulling needs the kernel to let this process read its peers' memory:
  // Yama's ptrace_scope above 0 forbids it between sibling processes.
  _caps.rdma_get = _tun.cma && ptrace_allows_peers();
  _caps.node_local = true;
  _caps.latency_us = 0.3;       // estimates until sampled
  _caps.bandwidth_mbps = 8000;
  _caps.overhead_us = 0.1;
  _doorbell_name = unique_name(shm::segment_prefix(_cfg.job_key), "db", _names);
  int fd = ::shm_open(_doorbell_name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) throw std::runtime_error("shm driver: cannot create " + _doorbell_name + ": " + std::strerror(errno));
  if (::ftruncate(fd, sizeof(doorbell)) != 0) {
    int err = errno;
    ::close(fd);
    ::shm_unlink(_doorbell_name.c_str());
    throw std::runtime_error(std::string("shm driver: ftruncate: ") + std::strerror(err));
  }
  void* p = ::mmap(nullptr, sizeof(doorbell), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) {
    ::shm_unlink(_doorbell_name.c_str());
    throw std::runtime_error(std::string("shm driver: mmap: ") + std::strerror(errno));
  }
  _doorbell_map.addr = p;
  _doorbell_map.len = sizeof(doorbell);
  _doorbell = new (p) doorbell{};
  _doorbell->rank = _cfg.rank;
  _doorbell->pid = ::getpid();
  // The wake-up socket. Without it this process cannot sleep (arm_wakeup
  // answers cannot and waits become short sleeps), but everything works.
  _wake_name = unique_name(shm::segment_prefix(_cfg.job_key), "wake", _names);
  const std::string wake_path = "/dev/shm" + _wake_name;
  {
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::snprintf(sa.sun_path, sizeof sa.sun_path, "%s", wake_path.c_str());
    _wake.reset(::socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (_wake.fd >= 0 && ::bind(_wake.fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
      const int err = errno;
      _wake.reset();
      errno = err;
    }
    if (_wake.fd >= 0) ::chmod(wake_path.c_str(), 0600);
  }
  if (_wake.fd >= 0) {
    std::snprintf(_doorbell->wake_name, sizeof _doorbell->wake_name, "%s", _wake_name.c_str());
  } else {
    log_write(log_level::info, "shm", "no wake-up socket (" + wake_path + ": " + std::strerror(errno) +
                                          "): waiting threads will sleep in short slices");
    _wake_name.clear();
  }
  _doorbell->pending.store(0, std::memory_order_relaxed);
  for (auto& s : _doorbell->slots) s.state.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  _doorbell->magic = kMagic;
}

shm_driver::~shm_driver() {
  for (auto& [id, c] : _conns) {
    if (c->hdr) c->hdr->closed[c->connector ? 1 : 0].store(1, std::memory_order_release);
    wake_peer(*c);
    if (!c->seg_name.empty()) ::shm_unlink(c->seg_name.c_str());
    if (c->slot >= 0 && c->peer_doorbell.addr)
      static_cast<doorbell*>(c->peer_doorbell.addr)->slots[c->slot].state.store(0, std::memory_order_release);
  }
  if (!_doorbell_name.empty()) ::shm_unlink(_doorbell_name.c_str());
  if (!_wake_name.empty()) ::unlink(("/dev/shm" + _wake_name).c_str());
}

shm_driver::conn& shm_driver::add_conn() {
  auto c = std::make_unique<conn>();
  c->id = _next_id++;
  c->cma = _tun.cma;
  conn& ref = *c;
  _conns[ref.id] = std::move(c);
  _ids_stale = true;
  return ref;
}

void shm_driver::map_pair(conn& c, void* base) {
  auto* bytes = static_cast<std::byte*>(base);
  c.hdr = static_cast<pair_header*>(base);
  const std::size_t ring = c.hdr->ring_bytes;
  auto* ctl = reinterpret_cast<shm::ring_control*>(bytes + header_bytes());
  std::byte* data0 = bytes + header_bytes() + 2 * sizeof(shm::ring_control);
  std::byte* data1 = data0 + ring;
  // ring 0: connector -> acceptor; ring 1: acceptor -> connector.
  shm::ring r0(&ctl[0], data0, ring), r1(&ctl[1], data1, ring);
  c.tx = c.connector ? r0 : r1;
  c.rx = c.connector ? r1 : r0;
}

connection_id shm_driver::connect(int peer_rank, std::string_view address) {
  conn& c = add_conn();
  c.connector = true;
  c.peer_rank = peer_rank;
  c.deadline = steady::now() + _tun.connect_timeout;
  const std::string prefix = "shm:" + _host + ":";
  if (address.substr(0, 4) != "shm:") {
    fail(c, "not an shm address: " + std::string(address));
    return c.id;
  }
  if (address.substr(0, prefix.size()) != prefix) {
    fail(c, "peer is on another host (" + std::string(address) + ")");
    return c.id;
  }
  const std::string db_name(address.substr(prefix.size()));
  int fd = ::shm_open(db_name.c_str(), O_RDWR, 0);
  if (fd < 0) {
    fail(c, "no such peer (" + db_name + ": " + std::strerror(errno) + ")");
    return c.id;
  }
  void* p = ::mmap(nullptr, sizeof(doorbell), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED || static_cast<doorbell*>(p)->magic != kMagic) {
    if (p != MAP_FAILED) ::munmap(p, sizeof(doorbell));
    fail(c, "peer's doorbell is not an nmad shm segment");
    return c.id;
  }
  c.peer_doorbell.addr = p;
  c.peer_doorbell.len = sizeof(doorbell);
  c.peer_pid = static_cast<doorbell*>(p)->pid;
  if (!attach_peer(c, nullptr)) return c.id;
  // The pair segment, offered to the peer.
  c.seg_name = unique_name(shm::segment_prefix(_cfg.job_key), "pair", _names);
  fd = ::shm_open(c.seg_name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  const std::size_t len = segment_bytes(_tun.ring_bytes);
  if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(len)) != 0) {
    if (fd >= 0) ::close(fd);
    fail(c, std::string("cannot create a shared segment: ") + std::strerror(errno));
    return c.id;
  }
  void* base = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) {
    fail(c, std::string("mmap: ") + std::strerror(errno));
    return c.id;
  }
  c.seg.addr = base;
  c.seg.len = len;
  auto* h = new (base) pair_header{};
  h->magic = kMagic;
  h->version = kVersion;
  h->ring_bytes = static_cast<std::uint32_t>(_tun.ring_bytes);
  h->connector_rank = _cfg.rank;
  h->connector_pid = ::getpid();
  h->key_len = static_cast<std::uint32_t>(std::min(_cfg.job_key.size(), sizeof h->key));
  std::memcpy(h->key, _cfg.job_key.data(), h->key_len);
  std::snprintf(h->connector_doorbell, sizeof h->connector_doorbell, "%s", _doorbell_name.c_str());
  auto* ctl = reinterpret_cast<shm::ring_control*>(static_cast<std::byte*>(base) + header_bytes());
  for (int i = 0; i < 2; ++i) {
    new (&ctl[i]) shm::ring_control{};
    ctl[i].capacity = _tun.ring_bytes;
  }
  map_pair(c, base);
  return c.id;
}

void shm_driver::fail(conn& c, std::string reason) {
  if (c.st == state::failed || c.st == state::closed) return;
  c.st = state::failed;
  c.fail_reason = std::move(reason);
  if (c.visible)
    log_write(log_level::warn, "shm", "connection to rank " + std::to_string(c.peer_rank) + " failed: " + c.fail_reason);
  if (c.hdr) c.hdr->closed[c.connector ? 1 : 0].store(1, std::memory_order_release);
  if (c.st != state::offering) wake_peer(c);
  if (!c.seg_name.empty()) {
    ::shm_unlink(c.seg_name.c_str());
    c.seg_name.clear();
  }
  if (c.slot >= 0 && c.peer_doorbell.addr) {
    static_cast<doorbell*>(c.peer_doorbell.addr)->slots[c.slot].state.store(0, std::memory_order_release);
    c.slot = -1;
  }
  c.outq.clear();
  c.recvs.clear();
  c.done.clear();
  c.got.clear();
}

// Accepting side: serve the doorbell.
void shm_driver::accept_requests() {
  if (_doorbell->pending.load(std::memory_order_acquire) == 0) return;  // the common case
  for (int i = 0; i < kSlots; ++i) {
    doorbell_slot& s = _doorbell->slots[i];
    if (s.state.load(std::memory_order_acquire) != 2) continue;
    char name[sizeof s.name + 1] = {};
    std::memcpy(name, s.name, sizeof s.name);
    s.state.store(0, std::memory_order_release);
    _doorbell->pending.fetch_sub(1, std::memory_order_acq_rel);
    int fd = ::shm_open(name, O_RDWR, 0);
    if (fd < 0) continue;  // the offer was withdrawn
    struct stat st{};
    if (::fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) < header_bytes()) {
      ::close(fd);
      log_write(log_level::warn, "shm", "refused a connection: segment too small");
      continue;
    }
    void* base = ::mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (base == MAP_FAILED) continue;
    auto* h = static_cast<pair_header*>(base);
    std::string why;
    if (h->magic != kMagic || h->version != kVersion) why = "not an nmad shm peer";
    else if (segment_bytes(h->ring_bytes) != static_cast<std::size_t>(st.st_size) || h->ring_bytes % 8 ||
             h->ring_bytes < 2 * (kMaxPacket + 64))
      why = "bad segment geometry";
    else if (h->key_len > sizeof h->key || !same_key({h->key, h->key_len}, _cfg.job_key))
      why = "wrong job key";
    else if (h->connector_rank < 0 || h->connector_rank >= _cfg.size || h->connector_rank == _cfg.rank)
      why = "invalid rank " + std::to_string(h->connector_rank);
    if (!why.empty()) {
      log_write(log_level::warn, "shm", "refused a connection from pid " + std::to_string(h->connector_pid) + ": " + why);
      if (h->magic == kMagic) h->state.store(2, std::memory_order_release);
      ::munmap(base, static_cast<std::size_t>(st.st_size));
      ::shm_unlink(name);
      continue;
    }
    ::shm_unlink(name);  // both sides have it mapped: nothing left behind
    conn& c = add_conn();
    c.seg.addr = base;
    c.seg.len = static_cast<std::size_t>(st.st_size);
    c.peer_rank = h->connector_rank;
    c.peer_pid = h->connector_pid;
    char peer_db[sizeof h->connector_doorbell];
    std::memcpy(peer_db, h->connector_doorbell, sizeof peer_db);
    if (!attach_peer(c, peer_db)) {
      log_write(log_level::warn, "shm", "refused a connection from rank " + std::to_string(c.peer_rank) + ": " +
                                            c.fail_reason);
      h->state.store(2, std::memory_order_release);
      close_connection(c.id);
      continue;
    }
    map_pair(c, base);
    h->acceptor_rank = _cfg.rank;
    h->acceptor_pid = ::getpid();
    h->state.store(1, std::memory_order_release);
    wake_peer(c);  // the connector may be asleep waiting for the answer
    c.st = state::established;
    c.visible = true;
    c.next_liveness = steady::now() + kLivenessPeriod;
    _cfg.events->on_connected(c.id, c.peer_rank);
  }
}

// Connecting side: claim a slot, then wait for the answer.
int shm_driver::progress_offer(conn& c) {
  auto* db = static_cast<doorbell*>(c.peer_doorbell.addr);
  if (steady::now() > c.deadline) {
    fail(c, "the peer did not accept in time");
    return 1;
  }
  if (c.slot < 0) {
    for (int i = 0; i < kSlots; ++i) {
      std::uint32_t expected = 0;
      if (db->slots[i].state.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
        std::snprintf(db->slots[i].name, sizeof db->slots[i].name, "%s", c.seg_name.c_str());
        db->slots[i].state.store(2, std::memory_order_release);
        db->pending.fetch_add(1, std::memory_order_seq_cst);
        c.slot = i;
        if (db->sleeping.load(std::memory_order_seq_cst) > 0) wake_peer(c);
        return 1;
      }
    }
    if (::kill(c.peer_pid, 0) != 0 && errno == ESRCH) fail(c, "peer process is gone");
    return 0;
  }
  const std::uint32_t answer = c.hdr->state.load(std::memory_order_acquire);
  if (answer == 0) {
    if (::kill(c.peer_pid, 0) != 0 && errno == ESRCH) fail(c, "peer process is gone");
    return 0;
  }
  c.slot = -1;  // the peer freed it
  ::shm_unlink(c.seg_name.c_str());
  c.seg_name.clear();
  if (answer != 1) {
    fail(c, "the peer refused the connection (job key or rank)");
    return 1;
  }
  c.st = state::established;
  c.visible = true;
  c.next_liveness = steady::now() + kLivenessPeriod;
  _cfg.events->on_connected(c.id, c.peer_rank);
  return 1;
}

bool shm_driver::write_record(conn& c, std::uint16_t kind, std::span<const std::byte> payload) {
  iovec v{const_cast<std::byte*>(payload.data()), payload.size()};
  return c.tx.write(kind, {&v, 1}, payload.size());
}

void shm_driver::queue_record(conn& c, std::uint16_t kind, std::vector<std::byte> payload) {
  if (c.outq.empty() && write_record(c, kind, payload)) {
    c.tx_dirty = true;
    ring_peer(c);
    return;
  }
  out_op op;
  op.kind = out_op::record;
  op.record_kind = kind;
  op.bytes = std::move(payload);
  c.outq.push_back(std::move(op));
}

post_result shm_driver::post_send_packet(connection_id id, std::span<const iovec> iov, void* token) {
  conn* c = find(id);
  if (!c || c->st == state::failed || c->st == state::closed) return post_result::failed;
  if (c->st != state::established) return post_result::retry;
  const std::size_t len = total_len(iov);
  if (len > kMaxPacket || iov.size() > kMaxIov) return post_result::failed;
  if (c->outq.empty() && c->tx.write(rk_packet, iov, len)) {
    c->done.push_back(token);
    c->tx_dirty = true;
    ring_peer(*c);
    return post_result::posted;
  }
  if (c->outq.size() >= kMaxQueued) return post_result::retry;
  out_op op;
  op.kind = out_op::packet;
  op.iov.assign(iov.begin(), iov.end());
  op.len = len;
  op.token = token;
  c->outq.push_back(std::move(op));
  return post_result::posted;
}

post_result shm_driver::send_inline(connection_id id, std::span<const iovec> iov) {
  conn* c = find(id);
  if (!c || c->st == state::failed || c->st == state::closed) return post_result::failed;
  if (c->st != state::established || !c->outq.empty()) return post_result::retry;
  const std::size_t len = total_len(iov);
  if (len > kMaxPacket || iov.size() > kMaxIov) return post_result::failed;
  if (!c->tx.write(rk_packet, iov, len)) return post_result::retry;
  c->tx_dirty = true;
  ring_peer(*c);
  return post_result::posted;
}

post_result shm_driver::post_send_data(connection_id id, std::uint64_t cookie, std::span<const iovec> iov,
                                       void* token) {
  conn* c = find(id);
  if (!c || c->st == state::failed || c->st == state::closed) return post_result::failed;
  if (c->st != state::established) return post_result::retry;
  if (c->outq.size() >= kMaxQueued) return post_result::retry;
  out_op op;
  op.kind = out_op::data;
  op.iov.assign(iov.begin(), iov.end());
  op.cookie = cookie;
  op.len = total_len(iov);
  op.token = token;
  c->outq.push_back(std::move(op));  // the copy happens in poll()
  return post_result::posted;
}

post_result shm_driver::post_recv_data(connection_id id, std::uint64_t cookie, std::span<const iovec> iov,
                                       void* token) {
  conn* c = find(id);
  if (!c || c->st == state::failed || c->st == state::closed) return post_result::failed;
  if (c->st != state::established) return post_result::retry;
  if (c->recvs.count(cookie)) return post_result::failed;  // already posted
  recv_op r;
  r.iov.assign(iov.begin(), iov.end());
  r.len = total_len(iov);
  r.token = token;
  // Tell the peer where the bytes go: {cookie, niov, (addr, len)*}.
  std::vector<std::byte> rec(16 + 16 * iov.size());
  const std::uint64_t n = iov.size();
  std::memcpy(rec.data(), &cookie, 8);
  std::memcpy(rec.data() + 8, &n, 8);
  for (std::size_t i = 0; i < iov.size(); ++i) {
    const std::uint64_t a = reinterpret_cast<std::uintptr_t>(iov[i].iov_base), l = iov[i].iov_len;
    std::memcpy(rec.data() + 16 + 16 * i, &a, 8);
    std::memcpy(rec.data() + 24 + 16 * i, &l, 8);
  }
  c->recvs[cookie] = std::move(r);
  queue_record(*c, rk_recv_posted, std::move(rec));
  return post_result::posted;
}

// Receiver-pulled rendezvous: one process_vm_readv from the peer's buffer
// into ours, done here (the caller matched the message and wants the bytes
// now); the completion is reported by the next poll().
post_result shm_driver::post_get(connection_id id, std::uint64_t remote_addr, std::uint64_t,
                                 std::span<const iovec> dst, void* token) {
  conn* c = find(id);
  if (!c || c->st != state::established) return post_result::failed;
  if (!c->cma) return post_result::failed;  // the sender pushes instead
  if (c->hdr->closed[c->connector ? 0 : 1].load(std::memory_order_acquire)) {
    fail(*c, "peer closed the connection");  // never copy from a peer known to be gone
    return post_result::failed;
  }
  const std::size_t len = total_len(dst);
  std::size_t copied = 0;
  while (copied < len) {
    // The destination list, advanced past what is already copied.
    std::vector<iovec> local;
    std::size_t skip = copied;
    for (const iovec& v : dst) {
      if (skip >= v.iov_len) {
        skip -= v.iov_len;
        continue;
      }
      local.push_back({static_cast<std::byte*>(v.iov_base) + skip, v.iov_len - skip});
      skip = 0;
    }
    iovec remote{reinterpret_cast<void*>(static_cast<std::uintptr_t>(remote_addr + copied)), len - copied};
    const ssize_t n = ::process_vm_readv(c->peer_pid, local.data(), local.size(), &remote, 1, 0);
    if (n > 0) {
      copied += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EPERM || errno == ENOSYS)) {
      log_write(log_level::info, "shm", std::string("cross-memory attach refused (") + std::strerror(errno) +
                                            "): the sender pushes the data");
      c->cma = false;
      return post_result::failed;
    }
    fail(*c, n < 0 && errno == ESRCH ? "peer process is gone"
                                     : "cannot read the peer's rendezvous buffer (bad address from the peer)");
    return post_result::failed;
  }
  c->got.emplace_back(token, copied);
  return post_result::posted;
}

int shm_driver::read_records(conn& c) {
  int work = 0;
  shm::record_header h;
  std::span<const std::byte> p;
  while (work < kMaxRecordsPerPoll && c.st == state::established) {
    const shm::peek_result pr = c.rx.peek(h, p);
    if (pr == shm::peek_result::empty) break;
    if (pr == shm::peek_result::corrupt) {
      fail(c, "protocol error: ring positions or record length outside the ring");
      return work + 1;
    }
    ++work;
    std::uint64_t cookie = 0, x = 0;
    if (h.kind != rk_packet && p.size() >= 16) {
      std::memcpy(&cookie, p.data(), 8);
      std::memcpy(&x, p.data() + 8, 8);
    }
    switch (h.kind) {
      case rk_packet:
        if (p.size() > kMaxPacket) {
          fail(c, "protocol error: oversized packet");
          return work;
        }
        _cfg.events->on_packet(c.id, p);  // delivered in place
        break;
      case rk_recv_posted: {
        if (p.size() < 16 || x > kMaxIov * 16 || p.size() != 16 + 16 * x) {
          fail(c, "protocol error: malformed recv-posted record");
          return work;
        }
        std::vector<iovec> iov(x);
        for (std::size_t i = 0; i < x; ++i) {
          std::uint64_t a, l;
          std::memcpy(&a, p.data() + 16 + 16 * i, 8);
          std::memcpy(&l, p.data() + 24 + 16 * i, 8);
          iov[i] = {reinterpret_cast<void*>(static_cast<std::uintptr_t>(a)), static_cast<std::size_t>(l)};
        }
        c.remote[cookie] = std::move(iov);
        break;
      }
      case rk_data_frag: {
        auto it = c.recvs.find(cookie);
        if (p.size() < 16 || it == c.recvs.end() ||
            !scatter(it->second.iov, static_cast<std::size_t>(x), p.data() + 16, p.size() - 16)) {
          fail(c, "protocol error: data fragment for an unknown cookie or beyond its buffer");
          return work;
        }
        break;
      }
      case rk_data_done: {
        auto it = c.recvs.find(cookie);
        if (p.size() != 16 || it == c.recvs.end() || x > it->second.len) {
          fail(c, "protocol error: data for an unknown cookie or longer than posted");
          return work;
        }
        void* token = it->second.token;
        c.recvs.erase(it);
        c.rx.consume(h);
        _cfg.events->on_recv_data_done(token, static_cast<std::size_t>(x));
        continue;
      }
      default:
        fail(c, "protocol error: unknown record kind " + std::to_string(h.kind));
        return work;
    }
    if (c.st == state::established) c.rx.consume(h);
  }
  // Made room: wake the writer if it sleeps on a full ring.
  if (work > 0 && c.st == state::established) {
    fences::light_fence(fences::scope::node);  // our head store, then its request
    if (c.rx.space_wanted()) wake_peer(c);
  }
  return work;
}

int shm_driver::flush(conn& c) {
  if (c.outq.empty()) return 0;
  c.tx_dirty = true;  // conservatively: ring_peer() checks the reader anyway
  int work = 0;
  for (auto it = c.outq.begin(); it != c.outq.end() && c.st == state::established;) {
    out_op& op = *it;
    bool finished = false;
    if (op.kind == out_op::packet) {
      if (!c.tx.write(rk_packet, op.iov, op.len)) break;  // keep packet order
      c.done.push_back(op.token);
      finished = true;
    } else if (op.kind == out_op::record) {
      if (!write_record(c, op.record_kind, op.bytes)) break;
      finished = true;
    } else {  // data: may wait for the peer's buffers without holding others
      auto r = c.remote.find(op.cookie);
      if (r == c.remote.end()) {
        ++it;
        continue;
      }
      if (!op.copied && c.cma && c.hdr->closed[c.connector ? 0 : 1].load(std::memory_order_acquire)) {
        fail(c, "peer closed the connection");  // never copy towards a peer known to be gone
        return work + 1;
      }
      if (!op.copied && c.cma) {
        std::vector<iovec> remote = r->second;
        ssize_t n = ::process_vm_writev(c.peer_pid, op.iov.data(), op.iov.size(), remote.data(), remote.size(), 0);
        if (n == static_cast<ssize_t>(op.len)) {
          op.copied = true;
          op.sent = op.len;
        } else if (n < 0 && (errno == EPERM || errno == ENOSYS || errno == EFAULT)) {
          log_write(log_level::info, "shm", std::string("cross-memory attach refused (") + std::strerror(errno) +
                                                "): data goes through the ring");
          c.cma = false;
        } else if (n < 0 && errno == ESRCH) {
          fail(c, "peer process is gone");
          return work + 1;
        } else {
          fail(c, "cross-memory copy incomplete");  // e.g. remote buffer shorter than the data
          return work + 1;
        }
      }
      if (!op.copied) {  // fragments through the ring
        bool full = false;
        while (op.sent < op.len) {
          const std::size_t k = std::min(kFragment, op.len - op.sent);
          std::vector<std::byte> frag(16 + k);
          std::memcpy(frag.data(), &op.cookie, 8);
          const std::uint64_t off = op.sent;
          std::memcpy(frag.data() + 8, &off, 8);
          // gather k bytes from op.iov at offset op.sent
          std::size_t skip = op.sent, got = 0;
          for (const iovec& v : op.iov) {
            if (got == k) break;
            if (skip >= v.iov_len) {
              skip -= v.iov_len;
              continue;
            }
            std::size_t m = std::min(k - got, v.iov_len - skip);
            std::memcpy(frag.data() + 16 + got, static_cast<std::byte*>(v.iov_base) + skip, m);
            got += m;
            skip = 0;
          }
          if (!write_record(c, rk_data_frag, frag)) {
            full = true;
            break;
          }
          op.sent += k;
          ++work;
        }
        if (full) break;
        op.copied = true;
      }
      std::byte done[16];
      const std::uint64_t len = op.len;
      std::memcpy(done, &op.cookie, 8);
      std::memcpy(done + 8, &len, 8);
      if (!write_record(c, rk_data_done, done)) break;
      c.remote.erase(r);
      c.done.push_back(op.token);
      finished = true;
    }
    if (finished) {
      ++work;
      it = c.outq.erase(it);
    }
  }
  return work;
}

void shm_driver::check_liveness(conn& c, steady::time_point now, bool force) {
  if (!force && now < c.next_liveness) return;
  c.next_liveness = now + kLivenessPeriod;
  if (c.hdr->closed[c.connector ? 0 : 1].load(std::memory_order_acquire)) {
    // Drain what the peer wrote before closing, then fail.
    read_records(c);
    fail(c, "peer closed the connection");
  } else if (::kill(c.peer_pid, 0) != 0 && errno == ESRCH) {
    fail(c, "peer process died");
  }
}

int shm_driver::settle(conn& c) {
  if (c.done.empty() && c.got.empty() && c.st != state::failed) return 0;  // the idle poll
  int work = 0;
  c.reporting.swap(c.done);
  for (std::size_t i = 0; i < c.reporting.size() && c.st == state::established; ++i, ++work)
    _cfg.events->on_send_done(c.reporting[i]);
  c.reporting.clear();
  c.got_reporting.swap(c.got);
  for (std::size_t i = 0; i < c.got_reporting.size() && c.st == state::established; ++i, ++work)
    _cfg.events->on_recv_data_done(c.got_reporting[i].first, c.got_reporting[i].second);
  c.got_reporting.clear();
  // A broken connection, or a connect() that never got through, is
  // reported once.
  if (c.st == state::failed && !c.failure_reported && (c.visible || c.connector)) {
    c.failure_reported = true;
    _cfg.events->on_connection_failed(c.id, c.fail_reason);
    ++work;
  }
  return work;
}

int shm_driver::poll() {
  if (_depth > 0) return 0;  // nested from a callback
  ++_depth;
  int work = 0;
  accept_requests();
  // The clock is read once every kClockEvery polls: reading it on every
  // poll cost a third of an idle poll.
  const bool force_liveness = _liveness_due;
  _liveness_due = false;
  const bool clock_due = force_liveness || (++_polls % kClockEvery) == 0;
  const steady::time_point now = clock_due ? steady::now() : steady::time_point{};
  if (_ids_stale) {
    _ids.clear();
    for (auto& [id, c] : _conns) _ids.push_back(c.get());
    _ids_stale = false;
  }
  for (std::size_t k = 0; k < _ids.size(); ++k) {
    conn* c = _ids[k];
    if (c->st == state::closed) continue;  // by a callback of this poll
    if (c->st == state::offering) work += progress_offer(*c);
    if (c->st == state::established) {
      work += read_records(*c);
      if (c->st == state::established) work += flush(*c);
      if (c->st == state::established) ring_peer(*c);
      if (c->st == state::established && clock_due) check_liveness(*c, now, force_liveness);
    }
    work += settle(*c);
  }
  --_depth;
  if (!_graveyard.empty()) _graveyard.clear();
  return work;
}

void shm_driver::close_connection(connection_id id) {
  conn* c = find(id);
  if (!c) return;
  c->st = state::closed;
  if (c->hdr) c->hdr->closed[c->connector ? 1 : 0].store(1, std::memory_order_release);
  wake_peer(*c);
  if (!c->seg_name.empty()) ::shm_unlink(c->seg_name.c_str());
  c->seg_name.clear();
  auto it = _conns.find(id);
  _graveyard.push_back(std::move(it->second));
  _conns.erase(it);
  _ids_stale = true;
  if (_depth == 0) _graveyard.clear();
}

// Maps the peer's doorbell (if not yet: acceptor side, by the name the
// connector gave) and connects to its wake-up socket and a process descriptor.
// False (connection failed, reason in c.fail_reason) if the doorbell is not
// one of this job's.
bool shm_driver::attach_peer(conn& c, const char* doorbell_name) {
  if (!c.peer_doorbell.addr) {
    if (!valid_segment_name(doorbell_name, sizeof(pair_header::connector_doorbell)) ||
        std::string_view(doorbell_name + 1).substr(0, shm::segment_prefix(_cfg.job_key).size()) !=
            shm::segment_prefix(_cfg.job_key)) {
      fail(c, "the peer's doorbell name is not one of this job's");
      return false;
    }
    int fd = ::shm_open(doorbell_name, O_RDWR, 0);
    void* p = fd < 0 ? MAP_FAILED : ::mmap(nullptr, sizeof(doorbell), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (fd >= 0) ::close(fd);
    if (p == MAP_FAILED) {
      fail(c, std::string("cannot map the peer's doorbell: ") + std::strerror(errno));
      return false;
    }
    c.peer_doorbell.addr = p;
    c.peer_doorbell.len = sizeof(doorbell);
    auto* db = static_cast<doorbell*>(p);
    if (db->magic != kMagic || db->pid != c.peer_pid) {
      fail(c, "the peer's doorbell does not belong to it");
      return false;
    }
  }
  auto* db = static_cast<doorbell*>(c.peer_doorbell.addr);
  char wake[sizeof db->wake_name];
  std::memcpy(wake, db->wake_name, sizeof wake);
  if (wake[0] && valid_segment_name(wake, sizeof wake)) {
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::snprintf(sa.sun_path, sizeof sa.sun_path, "/dev/shm%s", wake);
    c.peer_wake.reset(::socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (c.peer_wake.fd >= 0 && ::connect(c.peer_wake.fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0)
      c.peer_wake.reset();
  }
  c.pidfd.reset(open_pidfd(c.peer_pid));
  return true;
}

// After writing records: wake the peer if it sleeps. The (light) fence
// orders our tail store before the load of its count (it raises the count
// and fences heavily before re-checking its rings), so either it sees the
// record or we see it asleep.
void shm_driver::ring_peer(conn& c) {
  if (!c.tx_dirty) return;
  c.tx_dirty = false;
  fences::light_fence(fences::scope::node);
  auto* db = static_cast<const doorbell*>(c.peer_doorbell.addr);
  if (db && db->sleeping.load(std::memory_order_relaxed) > 0) wake_peer(c);
}

void shm_driver::wake_peer(conn& c) {
  if (c.peer_wake.fd < 0) return;
  const char b = 1;
  // A full queue (EAGAIN) already wakes the peer; a peer gone (ECONNREFUSED)
  // is found by the liveness checks.
  while (::send(c.peer_wake.fd, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno == EINTR) {
  }
}

arm_result shm_driver::arm_wakeup(std::vector<pollfd>& fds, int& timeout_ms) {
  if (_wake.fd < 0) return arm_result::cannot;
  // First every "I sleep" store: the count, and the requests for room in
  // full rings. Then the heavy side of the handshake (see
  // core/common/fences.hpp), then the looks at the rings: a record
  // published before the barrier is seen below; a writer publishing after
  // it sees the count and wakes us.
  _doorbell->sleeping.fetch_add(1, std::memory_order_seq_cst);
  for (auto& [id, cp] : _conns)
    if (cp->st == state::established && !cp->outq.empty()) cp->tx.request_space();
  fences::heavy_fence(fences::scope::node);
  arm_result result = arm_result::armed;
  if (_doorbell->pending.load(std::memory_order_seq_cst) > 0) result = arm_result::busy;
  fds.push_back({_wake.fd, POLLIN, 0});
  for (auto& [id, cp] : _conns) {
    conn& c = *cp;
    if (c.st == state::offering) {
      limit_sleep(timeout_ms, 1);  // connection set-up polls in slices
      continue;
    }
    if (!c.done.empty() || !c.got.empty() ||
        (c.st == state::failed && !c.failure_reported && (c.visible || c.connector))) {
      result = arm_result::busy;
      continue;
    }
    if (c.st != state::established) continue;
    if (c.hdr->closed[c.connector ? 0 : 1].load(std::memory_order_acquire)) {
      _liveness_due = true;
      result = arm_result::busy;
      continue;
    }
    if (c.rx.readable()) result = arm_result::busy;
    if (!c.outq.empty()) {
      // The reader may have made room before it could see the request.
      if (flush(c) > 0 || !c.done.empty()) result = arm_result::busy;
      ring_peer(c);
    }
    if (c.pidfd.fd >= 0) fds.push_back({c.pidfd.fd, POLLIN, 0});
    else limit_sleep(timeout_ms, static_cast<int>(kLivenessPeriod.count()));
  }
  return result;
}

void shm_driver::disarm_wakeup(std::span<const pollfd> mine) {
  if (_wake.fd < 0) return;
  _doorbell->sleeping.fetch_sub(1, std::memory_order_seq_cst);
  if (mine.empty()) return;
  if (mine[0].revents & POLLIN) {
    char buf[64];
    while (::recv(_wake.fd, buf, sizeof buf, MSG_DONTWAIT) > 0) {
    }
  }
  for (std::size_t i = 1; i < mine.size(); ++i)
    if (mine[i].revents) _liveness_due = true;  // a peer exited
}

}  // namespace

std::unique_ptr<driver> make_shm_driver() { return std::make_unique<shm_driver>(); }

}  // namespace nmad
