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
// looks at the reader's count and sends one byte to its socket only if it
// sleeps: a busy reader costs the writer no system call. The two sides are
// ordered by an asymmetric fence (core/common/fences.hpp): the sleeper
// pays a membarrier, the writer only a compiler barrier. A writer whose ring is full sets
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
// Names of dead processes. The doorbell and wake-up socket are unlinked
// once wire-up is over, pair segments once answered; a process killed
// before that (with its launcher: nobody left to clean up) leaves them.
// Every open() first sweeps /dev/shm for such names of this user, of any
// job, removing only what is provably dead (shm_sweep.cpp): a doorbell or
// pair segment is created, then flocked (shared) by its creator for as long
// as it needs the name, and only then gets its magic; an exclusive lock
// that succeeds on a segment carrying the magic means its creator is gone
// (the kernel drops a dead process's locks, in any pid namespace). A
// wake-up socket is dead when connecting to it is refused.
//
// Tunables (read once at open):
//   NMAD_SHM_RING       bytes per ring (default 256 KiB; a power of two from 256 KiB to 1 GiB)
//   NMAD_SHM_CMA        0 disables cross-memory attach (fragments only)
//   NMAD_SHM_CONNECT_TIMEOUT_MS  time a peer has to accept (default 30000)
#include "drivers/shm/shm_driver.hpp"
#include "drivers/shm/shm_internal.hpp"

namespace nmad::shm_impl {


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
  // The receiver pulls a rendezvous with one copy (cross-memory attach):
  // from 8 KiB that beats two copies through the ring (ping-pong 8-32 KiB).
  _caps.rdv_threshold = _tun.cma ? 8 * 1024 : 0;
  _caps.gather_scatter = true;
  _caps.zero_copy_data = true;  // one copy, user buffer to user buffer (CMA)
  // Pulling needs the kernel to let this process read its peers' memory:
  // Yama's ptrace_scope above 0 forbids it between sibling processes.
  _caps.rdma_get = _tun.cma && ptrace_allows_peers();
  _caps.node_local = true;
  _caps.latency_us = 0.3;       // estimates until sampled
  _caps.bandwidth_mbps = 8000;
  _caps.overhead_us = 0.1;
  sweep_stale_names();  // what processes killed during wire-up left behind
  _doorbell_name = unique_name(shm::segment_prefix(_cfg.job_key), "db", _names);
  // Its lock is held as long as this process lives.
  std::string why;
  const shm::locked_segment seg = shm::create_locked(_doorbell_name, sizeof(doorbell), false, why);
  if (!seg.base) throw std::runtime_error("shm driver: " + why);
  _doorbell_lock.reset(seg.lock_fd);
  void* p = seg.base;
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
  wireup_complete();  // the names go now if they are still there
}

shm_driver::conn& shm_driver::add_conn() {
  auto c = std::make_unique<conn>();
  c->id = _next_id++;
  c->cma = _tun.cma;
  conn& ref = *c;
  if (ref.id >= _by_id.size()) _by_id.resize(static_cast<std::size_t>(ref.id) + 1, nullptr);
  _by_id[ref.id] = c.get();
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
  const std::uint64_t key = c.hdr->ring_key;  // read once: never trusted again
  shm::ring r0(&ctl[0], data0, ring, key), r1(&ctl[1], data1, ring, key);
  c.tx = c.connector ? r0 : r1;
  c.rx = c.connector ? r1 : r0;
}

void shm_driver::fail(conn& c, std::string reason) {
  if (c.st == state::failed || c.st == state::closed) return;
  const bool was_offering = c.st == state::offering;
  c.st = state::failed;
  c.fail_reason = std::move(reason);
  if (c.visible)
    log_write(log_level::warn, "shm", "connection to rank " + std::to_string(c.peer_rank) + " failed: " + c.fail_reason);
  if (c.hdr) c.hdr->closed[c.connector ? 1 : 0].store(1, std::memory_order_release);
  if (!was_offering) wake_peer(c);
  if (!c.seg_name.empty()) {
    ::shm_unlink(c.seg_name.c_str());
    c.seg_name.clear();
    c.seg_lock.reset();
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

std::string shm_driver::failure_reason(connection_id id) const {
  const conn* c = find(id);
  if (!c || c->st == state::closed) return "connection closed";
  return c->st == state::failed ? c->fail_reason : std::string();
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
    peer_closed(*c);  // never copy from a peer known to be gone
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
    if (h.kind() != rk_packet && p.size() >= 16) {
      std::memcpy(&cookie, p.data(), 8);
      std::memcpy(&x, p.data() + 8, 8);
    }
    switch (h.kind()) {
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
        fail(c, "protocol error: unknown record kind " + std::to_string(h.kind()));
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
        peer_closed(c);  // never copy towards a peer known to be gone
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
    if (c.closed_by_peer)  // the deaths found with it first (peer_closed)
      for (conn* o : _ids)
        if (o != &c && o->st == state::failed && !o->closed_by_peer) work += settle(*o);
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
  // The "nothing to do" checks of the helpers are made here, inline: an
  // idle poll is what a waiting thread runs in a loop.
  if (_doorbell->pending.load(std::memory_order_acquire) != 0) accept_requests();
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
      if (c->st == state::established && !c->outq.empty()) work += flush(*c);
      if (c->st == state::established && c->tx_dirty) ring_peer(*c);
      if (c->st == state::established && clock_due) check_liveness(*c, now, force_liveness);
    }
    if (!c->done.empty() || !c->got.empty() || c->st == state::failed) work += settle(*c);
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
  c->seg_lock.reset();
  _by_id[id] = nullptr;
  auto it = _conns.find(id);
  _graveyard.push_back(std::move(it->second));
  _conns.erase(it);
  _ids_stale = true;
  if (_depth == 0) _graveyard.clear();
}
}  // namespace nmad::shm_impl

namespace nmad {
std::unique_ptr<driver> make_shm_driver() { return std::make_unique<shm_impl::shm_driver>(); }
}  // namespace nmad
