#pragma once
// The shm driver's internals, shared by its source files (shm_driver.cpp:
// set-up and data path; shm_connect.cpp: connections and liveness;
// shm_wakeup.cpp: sleeping and waking). Private to drivers/shm.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "api/nmad/services/config.hpp"
#include "core/common/fences.hpp"
#include "api/nmad/services/log.hpp"
#include "drivers/shm/shm_names.hpp"
#include "drivers/shm/shm_ring.hpp"
#include "api/nmad/services/shm_segment.hpp"


namespace nmad::shm_impl {


using steady = std::chrono::steady_clock;

// 03: the creator of a doorbell or pair segment holds a shared flock on it
// (sweep_stale_names() removes only segments with this magic; see
// shm_segment.hpp).
constexpr std::uint64_t kMagic = shm::kSegmentMagic;
constexpr std::uint32_t kVersion = 4;  // 3: stamped ring records; 4: 8-byte record headers
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
  // 256 KiB: holds a window of small messages and two maximal packets;
  // larger rings bought no bandwidth and cost cache and memory (a job's
  // N(N-1) rings are pre-faulted at set-up).
  std::size_t ring_bytes = 256 * 1024;
  bool cma = true;
  std::chrono::milliseconds connect_timeout{30000};
};

// The knobs (NMAD_SHM_*) and their ranges are in core/common/config_knobs.cpp.
inline tunables read_tunables() {
  tunables t;
  {
    // Rounded up to a power of two (ring positions are then masked); the
    // reader keeps it within 256 KiB..1 GiB.
    const std::uint64_t want = config::size("NMAD_SHM_RING");
    std::size_t bytes = 256 * 1024;
    while (bytes < want && bytes < (std::size_t{1} << 30)) bytes <<= 1;
    t.ring_bytes = bytes;
  }
  t.cma = config::flag("NMAD_SHM_CMA");
  t.connect_timeout = config::milliseconds("NMAD_SHM_CONNECT_TIMEOUT_MS");
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
  std::uint64_t ring_key;             // stamps of both rings (shm::ring), chosen by the connector
  char connector_doorbell[60];        // so the acceptor can ring the connector
  std::atomic<std::uint32_t> state;   // 0 offered, 1 accepted, 2 refused
  std::atomic<std::uint32_t> closed[2];  // [0] acceptor, [1] connector
};

constexpr std::size_t header_bytes() { return shm::align8(sizeof(pair_header) + 63) & ~std::size_t{63}; }
inline std::size_t segment_bytes(std::size_t ring) { return header_bytes() + 2 * sizeof(shm::ring_control) + 2 * ring; }

inline std::string host_id() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::string boot;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::getline(f, boot);
  std::string id = std::string(host) + "/" + boot.substr(0, 8);
  std::replace(id.begin(), id.end(), ':', '_');
  return id;
}

inline bool same_key(std::string_view a, std::string_view b) {
  std::size_t diff = a.size() ^ b.size();
  for (std::size_t i = 0; i < std::max(a.size(), b.size()); ++i)
    diff |= static_cast<unsigned char>(i < a.size() ? a[i] : 0) ^ static_cast<unsigned char>(i < b.size() ? b[i] : 0);
  return diff == 0;
}

inline bool ptrace_allows_peers() {
  std::ifstream f("/proc/sys/kernel/yama/ptrace_scope");
  int scope = 0;
  if (f >> scope) return scope == 0;
  return true;  // no Yama: ordinary permission checks (same user) apply
}

inline int open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
  return -1;
#endif
}

// Whether `name` (from shared memory) is a plausible segment name of ours:
// NUL-terminated inside its array, starts with '/', no other '/'.
inline bool valid_segment_name(const char* name, std::size_t cap) {
  const void* nul = std::memchr(name, 0, cap);
  if (!nul || name[0] != '/') return false;
  return std::memchr(name + 1, '/', static_cast<const char*>(nul) - name - 1) == nullptr;
}

inline std::size_t total_len(std::span<const iovec> iov) {
  std::size_t n = 0;
  for (const auto& v : iov) n += v.iov_len;
  return n;
}

// Whether `name` ("/<name>", from a doorbell slot or a pair header) names a
// segment of the job with key `job_key`: the only names this driver ever
// opens for a peer or unlinks (a stranger must not make it remove others').
inline bool job_segment_name(const char* name, std::size_t cap, std::string_view job_key) {
  if (!valid_segment_name(name, cap)) return false;
  const std::string prefix = shm::segment_prefix(job_key);
  return std::string_view(name + 1).substr(0, prefix.size()) == prefix;
}

// Copies `n` bytes of `src` into the scatter list `dst` starting `offset`
// bytes into it. Returns false if the list is too short.
inline bool scatter(std::span<const iovec> dst, std::size_t offset, const std::byte* src, std::size_t n) {
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
    const conn* found = id < _by_id.size() ? _by_id[id] : nullptr;
    if (!found) return false;
    const conn& c = *found;
    return !c.outq.empty() || (c.st == state::established && !c.tx.drained());
  }
  post_result post_send_data(connection_id c, std::uint64_t cookie, std::span<const iovec> iov,
                             void* token) override;
  post_result post_recv_data(connection_id c, std::uint64_t cookie, std::span<const iovec> iov,
                             void* token) override;
  std::string failure_reason(connection_id c) const override;
  post_result post_get(connection_id c, std::uint64_t remote_addr, std::uint64_t remote_key,
                       std::span<const iovec> dst, void* token) override;
  int poll() override;
  void close_connection(connection_id c) override;
  void wireup_complete() override;
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
    bool closed_by_peer = false;  // failed because the peer closed (reported after other deaths)
    std::string fail_reason;
    mapping seg;
    pair_header* hdr = nullptr;
    shm::ring tx, rx;
    std::string seg_name;   // still linked while offering
    fd_holder seg_lock;     // the pair segment, flocked (shared) while seg_name is linked
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

  conn* find(connection_id id) const {
    return id < _by_id.size() ? _by_id[id] : nullptr;
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
  // Whether c's peer process has ended: its pidfd is readable (also while
  // the ended process waits for its parent to reap it, which kill(pid, 0)
  // does not tell), or, without one, kill(pid, 0) finds no process.
  bool peer_gone(const conn& c) const;
  // c's peer closed: fails every other connection whose peer has ended
  // (a peer often closes because a third process died: it gave up a
  // collective with it and ended), drains what c's peer wrote, then fails
  // c. settle() reports such a failure after every other one, so the
  // engine, which names the first failure it saw, names the death.
  void peer_closed(conn& c);
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
  fd_holder _doorbell_lock;        // the doorbell, flocked (shared) for the process's life
  mapping _doorbell_map;
  doorbell* _doorbell = nullptr;
  bool _names_withdrawn = false;   // wireup_complete: doorbell and wake-up names unlinked
  std::string _wake_name;          // our wake-up socket ("/nmad-...-wake-...", under /dev/shm)
  fd_holder _wake;                 // bound to it; peers send a byte to wake us
  bool _liveness_due = false;      // a pidfd fired or a peer closed: check every peer now
  std::map<connection_id, std::unique_ptr<conn>> _conns;
  std::vector<conn*> _by_id;        // _conns by id (ids are small and dense): find()
  std::vector<std::unique_ptr<conn>> _graveyard;
  std::vector<conn*> _ids;          // poll()'s snapshot of _conns (a conn closed
                                    // meanwhile stays in _graveyard until poll ends)
  bool _ids_stale = true;           // _conns changed since the snapshot
  std::uint64_t _polls = 0;
  connection_id _next_id = 1;
  int _depth = 0;
  unsigned _names = 0;
};


using shm::unique_name;

// Unlinks the doorbells, pair segments and wake-up sockets in /dev/shm of
// this user whose owners are provably gone (shm_sweep.cpp). Returns how
// many.
int sweep_stale_names();

}  // namespace nmad::shm_impl
