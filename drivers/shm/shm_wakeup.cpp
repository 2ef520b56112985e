// shm driver: sleeping until there is work, and waking a sleeping peer
// (see shm_driver.cpp for the protocol).
#include "drivers/shm/shm_driver.hpp"
#include "drivers/shm/shm_internal.hpp"

namespace nmad::shm_impl {


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

}  // namespace nmad::shm_impl
