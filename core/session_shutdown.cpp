// The end of a session: what is still queued or in flight is flushed
// (NMAD_FINALIZE_TIMEOUT_MS), peers are told of a failure seen here, the
// launcher hears of the end (PMI finalize), the statistics and the trace
// are written, and the engine's memory is freed once the drivers are
// closed. Also whether anything is still owed to a peer (the progress
// thread's question as well as finalize's).
#include <algorithm>
#include <chrono>

#include "api/nmad/services/log.hpp"
#include "core/session_impl.hpp"

namespace nmad {

void session_impl::shutdown() {
  _progress_thread.reset();  // its engine calls end before the engine does
  const std::chrono::milliseconds timeout = _finalize_timeout;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // Flush what is still queued or in flight (sends whose requests the
  // application already forgot still owe the peer their bytes).
  bool timed_out = false;
  _waiter.wait([&] {
    engine_scope scope(*this);
    bool busy = false;
    for (auto& g : _gates)
      if (gate_busy(*g)) busy = true;
    if (busy && std::chrono::steady_clock::now() > deadline) timed_out = true;
    return !busy || timed_out;
  });
  if (timed_out)
    log_write(log_level::warn, "session",
              "finalize: sends still pending after " + std::to_string(timeout.count()) + " ms; dropping them");
  engine_scope scope(*this);
  bool any_failed = false;
  for (auto& g : _gates) any_failed |= g->failed;
  if (any_failed) send_failure_notices();
  _finalizing = true;
  try {
    // Nobody closes a connection a peer might still read from.
    if (!any_failed) _boot->fence();
    _boot->finalize();
  } catch (const std::exception& e) {
    log_write(log_level::warn, "session", std::string("finalize: ") + e.what());
  }
  if (_print_stats) print_stats();
  if (_trace.on) trace::stop();
  _trace.on = false;
  std::lock_guard ml(_recv.lock());
  if (_recv.any_posted())
    log_write(log_level::warn, "session", "finalize with receives still posted");
}

void session_impl::send_failure_notices() {
  int cause;
  {
    std::lock_guard pl(_pending_lock);
    cause = _first_failed;
  }
  // The failure this process saw first, or the one a peer reported (this
  // process may have seen only the close it caused).
  if (cause >= 0 && _gates[cause]->cause_reported.load(std::memory_order_acquire) >= 0)
    cause = _gates[cause]->cause_reported.load(std::memory_order_acquire);
  if (cause < 0) return;
  std::vector<gate*> told;
  for (auto& gp : _gates) {
    gate& g = *gp;
    if (g.rank == _rank || g.rank == cause || g.failed.load(std::memory_order_acquire)) continue;
    bool connected = false;
    for (const track& t : g.tracks) connected |= t.connected.load(std::memory_order_acquire);
    if (!connected) continue;  // a peer never reached does not see us close
    {
      std::lock_guard gl(g.lock);
      chunk_entry& e = g.new_control(chunk_kind::failure_notice);
      e.tag = static_cast<std::uint64_t>(cause);
      g.queue_control(e);
    }
    schedule(g);
    told.push_back(&g);
  }
  if (told.empty()) return;
  // A notice is one small packet: it leaves at once unless the peer is gone
  // or its connection is full of data it no longer reads.
  const auto deadline = std::chrono::steady_clock::now() + std::min(_finalize_timeout, std::chrono::milliseconds(1000));
  _waiter.wait([&] {
    engine_scope scope(*this);
    bool left = true;
    for (gate* g : told)
      if (!g->notice_sent.load(std::memory_order_acquire) && !g->failed.load(std::memory_order_acquire)) left = false;
    return left || std::chrono::steady_clock::now() > deadline;
  });
}

session_impl::~session_impl() {
  delist(this);  // requests destroyed from now on leave it alone
  try {
    shutdown();
  } catch (...) {
  }
  // Drivers close their connections; then free what the engine still holds.
  for (auto& slot : _slots) slot->drv.reset();
  _recv.free_messages();
  for (auto& g : _gates) {
    g->collect.clear();
    g->held.clear();
    for (auto& [cookie, rr] : g->rdv_in) delete rr;
    for (auto& t : g->tracks) {
      while (!t.in_flight.empty()) {
        packet_wrapper& pw = t.in_flight.front();
        t.in_flight.pop_front();
        delete &pw;
      }
      delete t.retry;
    }
  }
}

// Whether g still has sends to flush (no lock held).
bool session_impl::has_unsent() {
  if (_pending_any.load(std::memory_order_acquire)) return true;
  for (auto& g : _gates)
    if (gate_busy(*g)) return true;
  return false;
}

bool session_impl::gate_busy(gate& g) {
  if (g.failed.load(std::memory_order_acquire)) return false;
  std::lock_guard gl(g.lock);
  if (!g.rdv_out.empty() || !g.collect.empty() || !g.data_out.empty() || !g.held.empty()) return true;
  for (track& t : g.tracks) {
    std::lock_guard tl(t.lock);
    if (t.outstanding > 0 || t.retry) return true;
  }
  return false;
}

}  // namespace nmad
