// shm driver: connecting, accepting, attaching to a peer's doorbell, and
// noticing a peer that closed or died (see shm_driver.cpp for the design).
#include "drivers/shm/shm_driver.hpp"
#include "core/common/random.hpp"
#include "drivers/shm/shm_internal.hpp"

namespace nmad::shm_impl {


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
  // Locked (shared) while offered. Populated: the pages of both rings are
  // allocated and mapped now, at set-up, not one fault per 4 KiB on the
  // first lap of every ring (the first messages of a job paid one fault on
  // each side).
  const std::size_t len = segment_bytes(_tun.ring_bytes);
  std::string why;
  const shm::locked_segment seg = shm::create_locked(c.seg_name, len, true, why);
  if (!seg.base) {
    c.seg_name.clear();  // (nothing left to unlink)
    fail(c, "cannot create a shared segment: " + why);
    return c.id;
  }
  c.seg_lock.reset(seg.lock_fd);
  void* base = seg.base;
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
  h->ring_key = std::stoull(random_hex(16), nullptr, 16);
  std::snprintf(h->connector_doorbell, sizeof h->connector_doorbell, "%s", _doorbell_name.c_str());
  auto* ctl = reinterpret_cast<shm::ring_control*>(static_cast<std::byte*>(base) + header_bytes());
  for (int i = 0; i < 2; ++i) {
    new (&ctl[i]) shm::ring_control{};
    ctl[i].capacity = _tun.ring_bytes;
  }
  map_pair(c, base);
  return c.id;
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
    // Only this job's names are ever unlinked here. Another nmad job's
    // offer is opened only to answer "refused" in its header (its owner
    // then unlinks it); any other name is not touched at all.
    const bool ours = job_segment_name(name, sizeof name, _cfg.job_key);
    if (!ours && (!valid_segment_name(name, sizeof name) || std::strncmp(name, "/nmad-", 6) != 0)) {
      log_write(log_level::warn, "shm", "refused a connection: the offered segment is not an nmad segment");
      continue;
    }
    int fd = ::shm_open(name, O_RDWR, 0);
    if (fd < 0) continue;  // the offer was withdrawn
    struct stat st{};
    if (::fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) < header_bytes()) {
      ::close(fd);
      log_write(log_level::warn, "shm", "refused a connection: segment too small");
      continue;
    }
    void* base = ::mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_POPULATE, fd, 0);  // (see connect)
    ::close(fd);
    if (base == MAP_FAILED) continue;
    auto* h = static_cast<pair_header*>(base);
    std::string why;
    if (h->magic != kMagic || h->version != kVersion) why = "not an nmad shm peer";
    else if (segment_bytes(h->ring_bytes) != static_cast<std::size_t>(st.st_size) || h->ring_bytes % 16 ||
             h->ring_bytes < 2 * (kMaxPacket + 64))
      why = "bad segment geometry";
    else if (h->key_len > sizeof h->key || !same_key({h->key, h->key_len}, _cfg.job_key))
      why = "wrong job key";
    else if (!ours)
      why = "segment name is not one of this job's";
    else if (h->connector_rank < 0 || h->connector_rank >= _cfg.size || h->connector_rank == _cfg.rank)
      why = "invalid rank " + std::to_string(h->connector_rank);
    if (!why.empty()) {
      log_write(log_level::warn, "shm", "refused a connection from pid " + std::to_string(h->connector_pid) + ": " + why);
      if (h->magic == kMagic) h->state.store(2, std::memory_order_release);
      ::munmap(base, static_cast<std::size_t>(st.st_size));
      if (ours) ::shm_unlink(name);
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
    if (peer_gone(c)) fail(c, "peer process is gone");
    return 0;
  }
  const std::uint32_t answer = c.hdr->state.load(std::memory_order_acquire);
  if (answer == 0) {
    if (peer_gone(c)) fail(c, "peer process is gone");
    return 0;
  }
  c.slot = -1;  // the peer freed it
  ::shm_unlink(c.seg_name.c_str());
  c.seg_name.clear();
  c.seg_lock.reset();
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

// Maps the peer's doorbell (if not yet: acceptor side, by the name the
// connector gave) and connects to its wake-up socket and a process descriptor.
// False (connection failed, reason in c.fail_reason) if the doorbell is not
// one of this job's.
bool shm_driver::attach_peer(conn& c, const char* doorbell_name) {
  if (!c.peer_doorbell.addr) {
    if (!job_segment_name(doorbell_name, sizeof(pair_header::connector_doorbell), _cfg.job_key)) {
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

// Every peer has mapped our doorbell and connected to our wake-up socket
// (see driver::wireup_complete): their names go now, so nothing of this
// process stays in /dev/shm whatever way it ends. The mapping and the bound
// socket live on (a connected datagram socket does not need the name).
void shm_driver::wireup_complete() {
  if (_names_withdrawn) return;
  _names_withdrawn = true;
  if (!_doorbell_name.empty()) ::shm_unlink(_doorbell_name.c_str());
  if (!_wake_name.empty()) ::unlink(("/dev/shm" + _wake_name).c_str());
}

bool shm_driver::peer_gone(const conn& c) const {
  if (c.pidfd.fd >= 0) {
    pollfd p{c.pidfd.fd, POLLIN, 0};
    return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)) != 0;
  }
  return c.peer_pid > 0 && ::kill(c.peer_pid, 0) != 0 && errno == ESRCH;
}

void shm_driver::peer_closed(conn& c) {
  for (conn* o : _ids)
    if (o != &c && (o->st == state::established || o->st == state::offering) && o->peer_pid > 0 && peer_gone(*o))
      fail(*o, "peer process died");
  if (c.st == state::established) read_records(c);  // what the peer wrote before closing
  c.closed_by_peer = true;
  fail(c, "peer closed the connection");
}

void shm_driver::check_liveness(conn& c, steady::time_point now, bool force) {
  if (!force && now < c.next_liveness) return;
  c.next_liveness = now + kLivenessPeriod;
  if (c.hdr->closed[c.connector ? 0 : 1].load(std::memory_order_acquire)) peer_closed(c);
  else if (peer_gone(c)) fail(c, "peer process died");
}
}  // namespace nmad::shm_impl
