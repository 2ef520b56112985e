#pragma once
// The driver interface: the bottom of the transfer layer.
//
// How this layer works. A driver moves bytes between this process and its
// peers over one kind of hardware or OS channel (tcp sockets, shared memory,
// libfabric). It knows nothing of tags, messages or strategies. It offers two
// kinds of transfers on a connection:
//   * packets: a small, self-contained byte string (at most
//     caps().max_packet_size bytes, given as an iovec gather list) that the
//     peer's driver delivers whole to the engine through
//     driver_events::on_packet();
//   * bulk data: a byte string sent with a 64-bit cookie that the receiver
//     has announced beforehand (rendezvous); the receiving driver places it
//     straight into the iovec posted with post_recv_data() for that cookie.
// The engine guarantees that post_recv_data(cookie) happens before the peer
// can post_send_data(cookie) (the receiver posts, then sends its
// ready-to-receive), so data never arrives for an unknown cookie unless the
// peer is broken or malicious; a driver treats that as a protocol error.
//
// Nothing here blocks. post_* answers posted (the driver owns the operation
// until it reports completion from poll()), retry (no resource right now:
// the caller keeps the operation and tries again later) or failed.
// Completions and arrivals are reported only from inside poll(), on the
// thread that calls poll(); a driver never calls the engine from another
// thread. Callbacks may call post_* and close_connection() again; a poll()
// from inside a callback does nothing. Callers serialise all calls into one
// driver instance: the engine holds the driver's poll lock around every
// call (see LOCK ORDER in core/session_impl.hpp), so a driver needs no lock
// of its own, and different drivers run on different threads at once. The iovec
// arrays passed to post_* are copied; the bytes they point to are not.
#include <poll.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace nmad {

using connection_id = std::uint32_t;
constexpr connection_id invalid_connection = ~connection_id{0};

// What a driver can do, filled once by open(). Strategies and gates choose
// drivers by these fields, never by name.
struct driver_caps {
  std::string name;                  // "tcp", for logs and nmad-info only
  std::size_t max_packet_size = 0;   // largest packet post_send_packet accepts
  std::size_t max_iov = 1;           // iovec entries per post_* call
  std::size_t max_sends_in_flight = 2;  // per connection, packets + data
  std::size_t max_inline = 0;        // largest send_inline() packet (0: none)
  bool gather_scatter = false;       // iov with >1 entry costs no extra copy
  bool zero_copy_data = false;       // bulk data moves user buffer <-> wire
  bool rdma_get = false;             // post_get works: a receiver pulls the
                                     // peer's memory (shm: cross-memory attach)
  std::size_t rdv_threshold = 0;     // messages of this size and up are best
                                     // sent by rendezvous over this driver
                                     // (0: the engine's default); the
                                     // gates it carries use it unless
                                     // NMAD_RDV_THRESHOLD says otherwise
  bool node_local = false;           // reaches only processes of this machine
                                     // (reachable() then means "same machine")
  double latency_us = 0;             // one-way small-packet latency estimate
  double bandwidth_mbps = 0;         // large-transfer bandwidth (MB/s)
  double overhead_us = 0;            // per-operation CPU overhead estimate
};

// The engine's side of a driver: called only from inside driver::poll().
class driver_events {
 public:
  virtual ~driver_events() = default;
  // A connection finished its handshake (both sides learn the peer's rank).
  virtual void on_connected(connection_id conn, int peer_rank) = 0;
  // A whole packet arrived. The bytes are valid only during the call.
  virtual void on_packet(connection_id conn,
                         std::span<const std::byte> packet) = 0;
  // A post_send_packet/post_send_data finished: its buffers may be reused.
  virtual void on_send_done(void* token) = 0;
  // A post_recv_data finished: `received` bytes were written to its iovec.
  virtual void on_recv_data_done(void* token, std::size_t received) = 0;
  // The connection broke (peer died, closed, or sent garbage). Every
  // operation still pending on it — even a send that finished but was not
  // reported yet — is dropped by the driver without further callbacks; the
  // engine fails them itself. Reported at most once.
  virtual void on_connection_failed(connection_id conn,
                                    std::string_view reason) = 0;
};

enum class post_result { posted, retry, failed };

// Lowers a poll(2) timeout (negative = unbounded) to at most `ms`.
inline void limit_sleep(int& timeout_ms, int ms) {
  if (timeout_ms < 0 || ms < timeout_ms) timeout_ms = ms;
}

// What arm_wakeup() found (see driver::arm_wakeup).
enum class arm_result {
  armed,   // nothing pending; the fds it added become readable on activity
  busy,    // work is pending right now: poll instead of sleeping
  cannot,  // this driver cannot wake a sleeper (the engine sleeps in slices)
};

struct driver_config {
  int rank = 0;              // this process's rank in the job
  int size = 1;              // number of processes in the job
  std::string job_key;       // secret every connection must present
  driver_events* events = nullptr;
  // How many instances of the same driver this process opened before this
  // one (NMAD_DRIVERS=tcp+tcp: 0, then 1). A driver may read per-instance
  // settings with it (tcp: NMAD_TCP_HOSTS).
  int instance = 0;
};

class driver {
 public:
  virtual ~driver() = default;

  // Starts listening and fills caps(). Throws std::runtime_error with a
  // clear message on failure (port unavailable, device missing).
  virtual void open(const driver_config& config) = 0;
  virtual const driver_caps& caps() const = 0;
  // Address peers use to connect, published through the bootstrap.
  virtual std::string local_address() const = 0;
  // Whether the peer that published `address` can be reached through this
  // driver from here (shm: only on the same host). Symmetric: two processes
  // agree on it, so both pick the same driver for their pair.
  virtual bool reachable(std::string_view address) const { return !address.empty(); }

  // Starts connecting to `peer_rank` at `address` (from its local_address).
  // Returns at once; on_connected() (or on_connection_failed()) follows
  // from poll(). Connections from peers arrive by themselves and are
  // reported by on_connected() with a fresh connection_id.
  virtual connection_id connect(int peer_rank, std::string_view address) = 0;

  // Sends one packet (total length <= caps().max_packet_size). The iovec
  // array and the bytes it points to must stay valid until on_send_done.
  virtual post_result post_send_packet(connection_id conn,
                                       std::span<const iovec> iov,
                                       void* token) = 0;
  // The inline send of a small packet (total length <= caps().max_inline):
  // the driver takes a copy of the bytes now, in order after every packet
  // posted before, and the operation is over when it returns `posted` (no
  // on_send_done follows; the caller's buffers are free at once). `retry`
  // when it cannot do so right now (a full queue: the caller falls back to
  // post_send_packet later); `failed` like post_send_packet. Default:
  // drivers without it answer retry.
  virtual post_result send_inline(connection_id conn, std::span<const iovec> iov) {
    return post_result::retry;
  }
  // Whether bytes posted on `conn` still wait in the driver or in the
  // channel for the peer to take them (a busy track). Default: no.
  virtual bool backlog(connection_id conn) const { return false; }
  // Sends bulk data that the peer announced with post_recv_data(cookie).
  virtual post_result post_send_data(connection_id conn, std::uint64_t cookie,
                                     std::span<const iovec> iov,
                                     void* token) = 0;
  // Announces where the bulk data tagged `cookie` from `conn` goes. If the
  // peer sends more bytes than the iovec holds, the connection fails.
  // `retry` when the driver cannot hold one more receive now (the engine
  // asks the peer for the data only once its receive is posted, and tries
  // again from its pending work).
  virtual post_result post_recv_data(connection_id conn, std::uint64_t cookie,
                                     std::span<const iovec> iov,
                                     void* token) = 0;
  // Why `conn` is broken, as on_connection_failed says (or will say from
  // the next poll()), or empty while the driver knows of no failure. The
  // engine asks when a post was refused with `failed`, so that the gate's
  // failure names the cause (the peer died, closed the connection) rather
  // than the refusal. Default: empty.
  virtual std::string failure_reason(connection_id conn) const { return {}; }

  // rdma_get drivers only (caps().rdma_get): copies total(dst) bytes of the
  // peer's memory starting at `remote_addr` (an address the peer published,
  // with `remote_key` if its driver needs one) into `dst`. Completion is
  // reported by on_recv_data_done(token, bytes) from poll(). `failed` means
  // the peer's memory cannot be read this way (the caller falls back to the
  // peer pushing the data); a bad address fails the connection. Default:
  // not supported.
  virtual post_result post_get(connection_id conn, std::uint64_t remote_addr, std::uint64_t remote_key,
                               std::span<const iovec> dst, void* token) {
    return post_result::failed;
  }
  // The sender's side of post_get (rdma_get drivers): called, with the poll
  // lock held, when a rendezvous of [ptr, ptr+len) is offered for pulling.
  // Sets what a peer's post_get must pass to read `ptr`: `remote_addr` and
  // `remote_key` (32 bits: it travels in the rendezvous request). False if
  // the range cannot be exposed now (the rendezvous is then pushed). Every
  // expose that returned true is matched by exactly one unexpose(ptr, len)
  // once no peer reads the range any more (the receiver said it pulled it,
  // the send was withdrawn, the gate failed); unexpose may come from any
  // thread without the poll lock (a driver that registers memory defers
  // the release to its next call under the lock). Default: peers read by
  // address without a key (shm's cross-memory attach).
  virtual bool expose(const void* ptr, std::size_t len, std::uint64_t& remote_addr, std::uint32_t& remote_key) {
    remote_addr = reinterpret_cast<std::uintptr_t>(ptr);
    remote_key = 0;
    return true;
  }
  virtual void unexpose(const void* ptr, std::size_t len) {}

  // Makes progress: completes sends, reads arrivals, accepts and
  // authenticates connections. Returns how much work it did (0 = idle).
  virtual int poll() = 0;

  // A cheap hint for the engine's poll loop: true when poll() would
  // certainly find nothing to do right now (no connection at all, or, for
  // the self driver, nothing posted). The engine then skips most polls of
  // this driver (it still polls it now and then).
  virtual bool quiet() const { return false; }

  // Closes one connection (e.g. after its peer sent garbage). No callback.
  virtual void close_connection(connection_id conn) = 0;

  // Every connection this process makes or accepts over this driver is
  // established (the session's start-up wire-up is over; nobody connects to
  // it later). A driver may now withdraw what only newcomers need: the shm
  // driver unlinks its doorbell and wake-up names, so a job killed from now
  // on (even by SIGKILL, launcher included) leaves nothing in /dev/shm.
  // Called once, with the poll lock held. Default: nothing.
  virtual void wireup_complete() {}

  // ---- sleeping until there is work (the waiter's block policy) ----
  // Before a thread of this process sleeps, the engine arms every driver:
  // the driver appends the descriptors whose readiness means "poll me"
  // (sockets, a doorbell its peers ring, process descriptors of its peers)
  // to `fds`, may lower `timeout_ms` (e.g. to a handshake deadline), and
  // from then on makes sure its peers wake this process when they give it
  // work (a packet, bulk data, room in a full queue, a close). It answers
  // busy when work is already pending (the caller polls instead) and cannot
  // when it has no way to wake a sleeper. Several threads may be armed at
  // once (every arm is matched by one disarm). Serialised with poll() like
  // every other call; the sleep itself happens outside the driver.
  virtual arm_result arm_wakeup(std::vector<pollfd>& fds, int& timeout_ms) { return arm_result::cannot; }
  // The sleep ended (activity, timeout or another reason). `mine` are the
  // entries this driver appended, with poll(2)'s revents filled in.
  virtual void disarm_wakeup(std::span<const pollfd> mine) {}
};

// ---- the driver registry ----------------------------------------------------
// How drivers reach the engine. The core links no driver: the code that
// bundles the core with drivers registers each driver it was built with,
// explicitly and in one place (drivers/builtin.cpp, called by
// session::create in libnmad/session_create.cpp), before the first session
// opens. A session then chooses among the registered drivers by what they
// are (loopback or network) and by their caps, never by a compiled-in list.
//
// The table is owned by the core (core/transfer/registry.cpp): append-only,
// fixed capacity, so a span or pointer it handed out stays valid for the
// life of the process. All three functions are thread-safe; a driver
// registered while a session opens may or may not be seen by that session.
// The version of the driver interface (driver, driver_caps, driver_events,
// driver_config, driver_descriptor): raised whenever one of them changes
// in layout or meaning. A descriptor carries the version its driver was
// compiled against; register_driver refuses any other.
constexpr std::uint32_t kDriverAbiVersion = 1;

struct driver_descriptor {
  std::string_view name;         // static storage (a literal): kept as is
  std::string_view description;
  std::unique_ptr<driver> (*create)();
  // Reaches only this process itself (the self driver): every session
  // opens the first registered one for its own gate; it is never chosen
  // for a peer, listed as a network driver, or named in NMAD_DRIVER.
  bool loopback = false;
  // Opened only when named (NMAD_DRIVER, NMAD_DRIVERS): the automatic
  // per-peer choice leaves it out (the ofi driver: libfabric would be
  // started in every job for paths the built-in drivers already serve).
  bool on_request = false;
  // Left to its default: the version this driver was compiled against.
  std::uint32_t abi_version = kDriverAbiVersion;
};
// Adds `d` in registration order. False (and nothing added) when a driver
// of that name is registered already, it was compiled against another
// version of the interface, or the table is full (see the log).
bool register_driver(const driver_descriptor& d);
// Every registered driver, in registration order.
std::span<const driver_descriptor> driver_registry();
// The registered driver called `name`, or null.
const driver_descriptor* find_driver(std::string_view name);

}  // namespace nmad
