// Drivers and gates: which drivers open (NMAD_DRIVER, NMAD_DRIVERS) and
// their sampled profiles, the addresses published for the peers, which
// drivers reach a peer (one track each), and connecting every gate before
// the session starts; a driver's local address and the names of the
// drivers in use.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <thread>

#include "api/nmad/services/log.hpp"
#include "core/session_impl.hpp"
#include "core/transfer/driver.hpp"
#include "core/transfer/profile.hpp"

namespace nmad {
namespace {

std::string list_names(auto registry) {
  std::string s;
  for (const auto& d : registry) {
    if (!s.empty()) s += ", ";
    s += d.name;
  }
  return s;
}

// The drivers a session may use for its peers: every registered one but
// loopback drivers (chosen by that capability, not by name).
std::vector<driver_descriptor> network_drivers() {
  std::vector<driver_descriptor> out;
  for (const driver_descriptor& d : driver_registry())
    if (!d.loopback) out.push_back(d);
  return out;
}

const driver_descriptor* find_network_driver(std::string_view name) {
  const driver_descriptor* d = find_driver(name);
  return d && !d->loopback ? d : nullptr;
}

// The driver of the session's own gate: the first registered loopback one.
const driver_descriptor& loopback_driver() {
  for (const driver_descriptor& d : driver_registry())
    if (d.loopback) return d;
  throw std::runtime_error(
      "nmad: no loopback driver registered (drivers are registered by register_builtin_drivers(), "
      "which session::create calls: link //libnmad:nmad, not only //core:engine)");
}

}  // namespace

void session_impl::open_drivers(const session_options& opts) {
  const std::string key = _boot->job_key();
  auto open_one = [&](std::unique_ptr<driver> d, int instance = 0) {
    auto slot = std::make_unique<driver_slot>();
    slot->engine = this;
    slot->lock.enable(_threaded);
    slot->drv = std::move(d);
    slot->instance = instance;
    driver_config cfg;
    cfg.rank = _rank;
    cfg.size = _size;
    cfg.job_key = key;
    cfg.events = slot.get();
    cfg.instance = instance;
    slot->drv->open(cfg);
    _slots.push_back(std::move(slot));
  };
  open_one(loopback_driver().create());
  if (opts.driver.find('+') != std::string::npos) {
    // Several rails: every listed driver opens (in this order: track 0 is
    // the first that reaches a peer), a name may repeat (tcp+tcp).
    _multirail = true;
    std::string rest = opts.driver;
    while (!rest.empty()) {
      const std::size_t plus = rest.find('+');
      const std::string name = rest.substr(0, plus);
      rest = plus == std::string::npos ? "" : rest.substr(plus + 1);
      const driver_descriptor* d = find_network_driver(name);
      if (!d)
        throw std::runtime_error("nmad: unknown driver '" + name + "' in '" + opts.driver +
                                 "' (available: " + list_names(network_drivers()) + ")");
      int instance = 0;
      for (const auto& sl : _slots)
        if (sl->drv->caps().name == name) ++instance;
      open_one(d->create(), instance);
    }
    return;
  }
  if (opts.driver.find(',') != std::string::npos) {
    // A list "shm,ofi": like auto among the listed drivers only (named, so
    // on-request drivers too, and one that does not open stops start-up);
    // per peer, the lowest-latency one that reaches it.
    std::string rest = opts.driver;
    for (;;) {
      const std::size_t comma = rest.find(',');
      const std::string name = rest.substr(0, comma);
      rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
      const driver_descriptor* d = find_network_driver(name);
      if (!d)
        throw std::runtime_error("nmad: unknown driver '" + name + "' in NMAD_DRIVER='" + opts.driver +
                                 "' (available: " + list_names(network_drivers()) + ")");
      for (const auto& sl : _slots)
        if (sl->drv->caps().name == name)
          throw std::runtime_error("nmad: driver '" + name + "' named twice in NMAD_DRIVER='" + opts.driver + "'");
      open_one(d->create());
      if (comma == std::string::npos) break;
    }
    std::stable_sort(_slots.begin() + 1, _slots.end(), [](const auto& a, const auto& b) {
      return a->drv->caps().latency_us < b->drv->caps().latency_us;
    });
    return;
  }
  if (opts.driver != "auto") {
    const driver_descriptor* d = find_network_driver(opts.driver);
    if (!d)
      throw std::runtime_error("nmad: unknown driver '" + opts.driver +
                               "' (available: auto, " + list_names(network_drivers()) + ")");
    open_one(d->create());
    return;
  }
  // auto: every driver that opens here; per peer, the lowest-latency one
  // that can reach it (reaching_slots, first).
  for (const auto& d : network_drivers()) {
    if (d.on_request) continue;
    try {
      open_one(d.create());
    } catch (const std::exception& e) {
      log_write(log_level::info, "session", std::string(d.name) + " unavailable: " + e.what());
    }
  }
  if (_slots.size() == 1) throw std::runtime_error("nmad: no network driver could be opened");
  std::stable_sort(_slots.begin() + 1, _slots.end(), [](const auto& a, const auto& b) {
    return a->drv->caps().latency_us < b->drv->caps().latency_us;
  });
}

// After the driver order is fixed (by the drivers' own estimates, which
// every process of the job shares: profiles differ between hosts and must
// not change which driver two peers pick), the tracks' caps take the
// sampled figures (see core/transfer/profile.hpp for when sampling runs).
void session_impl::apply_profiles() {
  const profile_mode mode = profile_mode_from_env();
  const std::vector<double> rail_bw = rail_bandwidths_from_env();
  std::vector<std::string> names;
  for (auto& s : _slots) {
    s->caps = s->drv->caps();
    if (s.get() != _slots[0].get()) names.push_back(s->caps.name);
  }
  if (!rail_bw.empty() && (!_multirail || rail_bw.size() != names.size()))
    throw std::runtime_error("nmad: NMAD_RAIL_BANDWIDTH gives " + std::to_string(rail_bw.size()) +
                             " bandwidth(s) but this job has " +
                             (_multirail ? std::to_string(names.size()) + " rails" : std::string("no rails")) +
                             " (it needs NMAD_DRIVERS=a+b, one figure per listed driver)");
  if (mode != profile_mode::off && !names.empty()) {
    const auto profiles = profiles_for(names, mode == profile_mode::sample || (_multirail && rail_bw.empty()));
    for (auto& s : _slots)
      for (const auto& p : profiles)
        if (p.driver == s->caps.name) apply_profile(s->caps, p);
  }
  // Given rail bandwidths win over estimates and samples.
  for (std::size_t i = 0; i < rail_bw.size(); ++i) _slots[i + 1]->caps.bandwidth_mbps = rail_bw[i];
}

std::string session_impl::host_key(int rank) { return "nmad.host." + std::to_string(rank); }

// Host name and boot id (two containers may share a host name, not CPUs).
std::string session_impl::host_identity() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "localhost");
  char boot[64] = {};
  if (std::FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
    if (!std::fgets(boot, sizeof boot, f)) boot[0] = 0;
    std::fclose(f);
  }
  std::string id = std::string(host) + "/" + boot;
  while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
  return id;
}

std::string session_impl::address_key(const driver_slot& s, int rank) {
  return "nmad.addr." + std::string(s.drv->caps().name) + "." + std::to_string(s.instance) + "." +
         std::to_string(rank);
}

std::vector<driver_slot*> session_impl::reaching_slots(int peer) {
  std::vector<driver_slot*> out;
  std::string tried;
  for (std::size_t i = 1; i < _slots.size(); ++i) {
    driver& d = *_slots[i]->drv;
    std::string addr;
    try {
      addr = _boot->get(address_key(*_slots[i], peer));
    } catch (const std::exception&) {
      continue;  // the peer does not have this driver
    }
    if (d.reachable(addr)) {
      out.push_back(_slots[i].get());
      if (!_multirail) return out;  // the first (lowest latency) one only
    } else {
      tried += " " + std::string(d.caps().name);
    }
  }
  if (out.empty())
    throw std::runtime_error("nmad: rank " + std::to_string(_rank) + " has no driver that reaches rank " +
                             std::to_string(peer) + " (tried:" + tried + ")");
  return out;
}

void session_impl::connect_all(std::chrono::milliseconds timeout) {
  engine_scope scope(*this);
  // Higher ranks listen, lower ranks connect: exactly one connection a
  // pair. (The direction is not neutral over tcp loopback: with ranks bound
  // in order, the accepted and the connected socket of a pair do not cost
  // the same on each CPU; rank 0 connecting, as MPI peers whose first
  // sender connects do, measured 3.2-3.4 us one way against 4.6-4.8.)
  for (int p = _rank + 1; p < _size; ++p)
    for (track& t : _gates[p]->tracks) {
      std::lock_guard dl(t.slot->lock);
      driver& d = *t.slot->drv;
      // Known at once, so a refused or dead peer fails its gate (and this
      // wait) right away instead of at the timeout.
      t.slot->gates.set(d.connect(p, _boot->get(address_key(*t.slot, p))), _gates[p].get());
    }
  {
    std::lock_guard dl(_slots[0]->lock);
    _slots[0]->drv->connect(_rank, _slots[0]->drv->local_address());
  }
  _connecting = true;
  struct done_connecting {
    bool& flag;
    ~done_connecting() { flag = false; }
  } reset{_connecting};
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    bool all = true, failed = false;
    for (auto& g : _gates) {
      for (const track& t : g->tracks)
        if (!t.connected && !g->failed) all = false;
      failed |= g->failed;
    }
    if (all || failed) break;
    if (std::chrono::steady_clock::now() > deadline) {
      std::string missing;
      for (auto& g : _gates)
        for (const track& t : g->tracks)
          if (!t.connected) missing += " " + std::to_string(g->rank) + " (" + t.slot->drv->caps().name + ")";
      throw std::runtime_error("nmad: rank " + std::to_string(_rank) +
                               " could not connect to rank(s)" + missing + " within " +
                               std::to_string(timeout.count()) + " ms");
    }
    if (progress_now() == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  for (auto& g : _gates)
    if (g->failed)
      throw std::runtime_error("nmad: rank " + std::to_string(_rank) + " failed to connect to " +
                               peer_name(*g) + ": " + g->fail_reason);
  for (auto& slot : _slots) {
    std::lock_guard dl(slot->lock);
    slot->drv->wireup_complete();
  }
  log_write(log_level::info, "session",
            "connected to " + std::to_string(_size - 1) + " peer(s) over " + driver_name() + ", strategy " +
                _strategy_name);
}

std::string session_impl::local_address(std::string_view driver) const {
  for (std::size_t i = 1; i < _slots.size(); ++i)
    if (driver.empty() || _slots[i]->drv->caps().name == driver) return _slots[i]->drv->local_address();
  return {};
}

std::string session_impl::driver_name() const {
  // The drivers the gates to other processes use, e.g. "shm" or "shm+tcp".
  std::vector<std::string> names;
  for (const auto& g : _gates) {
    if (g->rank == _rank) continue;
    std::string n;
    for (const track& t : g->tracks) n += (n.empty() ? "" : "+") + std::string(t.slot->drv->caps().name);
    if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  }
  if (names.empty()) return std::string(_slots[_slots.size() > 1 ? 1 : 0]->drv->caps().name);
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : "+") + n;
  return out;
}

}  // namespace nmad
