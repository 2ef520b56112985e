// Session set-up and tear-down: bootstrap, drivers, wiring the gates.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <thread>

#include "core/common/config.hpp"
#include "core/common/log.hpp"
#include "core/session_impl.hpp"
#include "core/topology/scheduling.hpp"
#include "core/topology/topology.hpp"
#include "core/transfer/driver.hpp"
#include "core/transfer/profile.hpp"

namespace nmad {
namespace {

// Every tunable of the engine core, in one place (documented in
// docs/CONFIGURATION.md and printed by nmad-info).
struct core_tunables {
  std::string strategy = "default";      // NMAD_STRATEGY
  std::string driver = "auto";           // NMAD_DRIVER: a name, or auto = per peer;
                                         // NMAD_DRIVERS=a+b (or NMAD_DRIVER=a+b): one track each
  std::size_t rdv_threshold = 32 * 1024; // NMAD_RDV_THRESHOLD (bytes)
  bool rdv_threshold_set = false;        // it was: every gate uses it
  std::size_t copy_threshold = 256;      // NMAD_COPY_THRESHOLD (bytes)
  std::chrono::milliseconds connect_timeout{30000};   // NMAD_CONNECT_TIMEOUT_MS
  std::chrono::milliseconds finalize_timeout{30000};  // NMAD_FINALIZE_TIMEOUT_MS
  std::string wait = "fixed-spin";       // NMAD_WAIT: busy, block, fixed-spin
  long wait_spin_us = -1;                // NMAD_WAIT_SPIN_US (fixed-spin: spin before blocking;
                                         // default 100, 20 on an oversubscribed machine)
  std::string wait_yield = "auto";       // NMAD_WAIT_YIELD: yield while polling (auto: while contended)
  std::string progress = "auto";         // NMAD_PROGRESS: none, thread, auto
  std::size_t copy_offload = 0;          // NMAD_COPY_OFFLOAD: the smallest size offloaded (0: off)
  std::uint64_t unexpected_max = 64ull << 20;  // NMAD_UNEXPECTED_MAX: eager bytes buffered
                                               // unexpectedly per process (0: unlimited)
  bool stats = false;                    // NMAD_STATS: 0 or 1
  std::string trace;                     // NMAD_TRACE: event trace file (empty: off)
  long progress_spin_us = -1;            // NMAD_PROGRESS_SPIN_US: the progress thread's spin
                                         // before sleeping (default 0; 1000 with copy offload
                                         // and a core to spare)
};

// Every knob is read through the configuration reader (core/common/
// config.hpp), which has checked them all when the session started: a bad
// value never reaches here.
core_tunables read_tunables() {
  core_tunables t;
  t.strategy = config::text("NMAD_STRATEGY");
  t.driver = config::is_set("NMAD_DRIVERS") ? config::text("NMAD_DRIVERS") : config::text("NMAD_DRIVER");
  const auto rdv = config::optional_size("NMAD_RDV_THRESHOLD");
  t.rdv_threshold_set = rdv.has_value();
  if (rdv) t.rdv_threshold = *rdv;
  t.copy_threshold = config::size("NMAD_COPY_THRESHOLD");
  t.connect_timeout = config::milliseconds("NMAD_CONNECT_TIMEOUT_MS");
  t.finalize_timeout = config::milliseconds("NMAD_FINALIZE_TIMEOUT_MS");
  t.wait = config::word("NMAD_WAIT");
  if (auto v = config::optional_duration("NMAD_WAIT_SPIN_US")) t.wait_spin_us = v->count();
  t.wait_yield = config::word("NMAD_WAIT_YIELD");
  t.progress = config::word("NMAD_PROGRESS");
  t.copy_offload = config::size("NMAD_COPY_OFFLOAD");
  if (auto v = config::optional_duration("NMAD_PROGRESS_SPIN_US")) t.progress_spin_us = v->count();
  t.unexpected_max = config::size("NMAD_UNEXPECTED_MAX");
  t.stats = config::flag("NMAD_STATS");
  t.trace = config::text("NMAD_TRACE");
  return t;
}

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

session_impl::session_impl(const session_options& opts)
    : _level(opts.threads),
      _threaded(opts.threads == thread_level::multiple),
      _pending_lock(opts.threads == thread_level::multiple),
      _waiter(*this, opts.threads == thread_level::multiple),
      _tasks(opts.threads == thread_level::multiple),
      _recv(*this, _sched, _gates, opts.threads == thread_level::multiple) {
  // Every NMAD_* value is checked before anything starts; a bad one stops
  // the session naming it (config.hpp: "The start-up check").
  const std::vector<std::string> unknown_knobs = config::check_environment();
  const core_tunables t = read_tunables();
  {
    const std::string w = opts.wait.empty() ? t.wait : opts.wait;
    wait_config wc;
    if (!parse_wait_policy(w, wc.policy))
      throw std::runtime_error("nmad: unknown wait policy '" + w + "' (NMAD_WAIT: busy, block, fixed-spin)");
    wc.spin = std::chrono::microseconds(t.wait_spin_us < 0 ? 100 : t.wait_spin_us);
    _waiter.set_config(wc);
  }
  _boot = bootstrap::from_environment();
  _rank = _boot->rank();
  _size = _boot->size();
  log_set_rank(_rank);
  // Unknown NMAD_* names: said once per job, by rank 0 (nmad-run has said
  // it already for its jobs).
  if (_rank == 0 && !config::is_set("NMAD_RUN_SIZE"))
    for (const std::string& w : unknown_knobs) log_write(log_level::warn, "config", w);
  _trace.on = trace::start(t.trace, _rank, _size);  // a bad file name fails here, before connecting
  _sched.set_copy_threshold(t.copy_threshold);
  _unexpected_max = t.unexpected_max;
  _print_stats = t.stats;
  _finalize_timeout = t.finalize_timeout;

  // A built-in, registered or plugin strategy (throws naming what is wrong:
  // unknown name, file, symbol, interface versions).
  _strategy_source = resolve_strategy(opts.strategy.empty() ? t.strategy : opts.strategy);
  _strategy_name = std::string(_strategy_source->name());

  session_options o = opts;
  if (o.driver.empty()) o.driver = t.driver;
  open_drivers(o);
  apply_profiles();

  // The rendezvous threshold must leave room for a chunk header in a packet
  // of every driver in use.
  std::size_t max_packet = ~std::size_t{0};
  for (std::size_t i = 1; i < _slots.size(); ++i)
    max_packet = std::min(max_packet, _slots[i]->drv->caps().max_packet_size);
  std::size_t max_eager = max_packet - sizeof(wire::packet_header) - sizeof(wire::chunk_header);
  // Asked for (options, NMAD_RDV_THRESHOLD): every gate uses it. Else each
  // gate takes its first driver's preference, or the engine default.
  const bool asked = opts.rdv_threshold || t.rdv_threshold_set;
  _rdv_threshold = opts.rdv_threshold ? opts.rdv_threshold : t.rdv_threshold;
  auto clamp = [&](std::size_t v) { return std::max<std::size_t>(1, std::min(v, max_eager + 1)); };
  _rdv_threshold = clamp(_rdv_threshold);

  // Publish every network driver's address, then pick one driver per peer.
  for (std::size_t i = 1; i < _slots.size(); ++i)
    _boot->put(address_key(*_slots[i], _rank), _slots[i]->drv->local_address());
  // And this host's identity: peers on it share its CPUs even when no
  // node-local driver joins them (NMAD_DRIVER=tcp), which decides whether a
  // progress thread has a core to spare.
  const std::string own_host = host_identity();
  _boot->put(host_key(_rank), own_host);
  _boot->fence();
  _gates.resize(_size);
  _recv.set_up(_rank, _size, opts.ordering_mask);
  for (int r = 0; r < _size; ++r) {
    auto g = std::make_unique<gate>();
    g->owner = this;
    g->rounds = &_rounds;
    g->ordering_mask = opts.ordering_mask;
    g->expose_pull = &session_impl::expose_pull_hook;
    g->rank = r;
    g->lock.enable(_threaded);
    g->strat = _strategy_source->create();
    // Flow control: the process's bound shared by its peers, at least the
    // initial credit per peer (see "Credits" in core/protocol/wire.hpp).
    g->flow_control = r != _rank;
    if (!g->flow_control) g->tx_limit = ~std::uint64_t{0};
    g->rx_window = _unexpected_max == 0
                       ? std::uint64_t{1} << 62
                       : std::max<std::uint64_t>(wire::initial_credit,
                                                 _unexpected_max / static_cast<std::uint64_t>(std::max(1, _size - 1)));
    const std::vector<driver_slot*> slots =
        r == _rank ? std::vector<driver_slot*>{_slots[0].get()} : reaching_slots(r);
    g->tracks.resize(slots.size());  // never resized again: tracks stay put
    const std::size_t preferred = slots[0]->drv->caps().rdv_threshold;
    g->rdv_threshold = asked || preferred == 0 ? _rdv_threshold : clamp(preferred);
    for (std::size_t i = 0; i < slots.size(); ++i) {
      track& tr = g->tracks[i];
      tr.slot = slots[i];
      tr.rail = static_cast<std::uint32_t>(i);
      tr.caps = &tr.slot->caps;
      tr.lock.enable(_threaded);
      tr.max_inline = tr.caps->max_inline;
      tr.window = static_cast<std::uint32_t>(
          std::max<std::size_t>(1, std::min<std::size_t>(2, tr.slot->drv->caps().max_sends_in_flight)));
    }
    _gates[r] = std::move(g);
  }
  // More processes on this machine than CPUs this process may use: spinning
  // waiters give their CPU away on every idle round.
  auto node_local_peer = [&](int r) {
    for (std::size_t i = 1; i < _slots.size(); ++i) {
      driver& d = *_slots[i]->drv;
      if (!d.caps().node_local) continue;
      try {
        if (d.reachable(_boot->get(address_key(*_slots[i], r)))) return true;
      } catch (const std::exception&) {
      }
    }
    return false;
  };
  auto same_host = [&](int r) {
    try {
      return _boot->get(host_key(r)) == own_host;
    } catch (const std::exception&) {
      return false;
    }
  };
  int local = 1;
  for (int r = 0; r < _size; ++r)
    if (r != _rank && (node_local_peer(r) || same_host(r))) ++local;
  _local_processes = local;
  cpu_set_t set;
  CPU_ZERO(&set);
  // The job's CPUs on this machine: what nmad-run could use (it may bind
  // each rank to one of them), else this process's own affinity.
  int cpus = ::sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
  if (auto v = config::optional_integer("NMAD_RUN_CPUS")) cpus = static_cast<int>(*v);
  const bool oversubscribed = local > cpus;
  // Yielding follows the load monitor (auto): the job alone oversubscribing
  // the machine is its floor; other jobs show in its samples.
  _load_monitor.set_static_contended(oversubscribed);
  _waiter.set_load_monitor(&_load_monitor);
  _waiter.set_yield_mode(t.wait_yield == "1"   ? waiter::yield_mode::always
                         : t.wait_yield == "0" ? waiter::yield_mode::never
                                               : waiter::yield_mode::when_contended);
  _waiter.set_yield_after(std::chrono::microseconds(t.wait_yield == "0" ? -1 : 10));
  // This process's share of the CPUs: the leader spins on one, followers
  // may spin on the rest (none here: they sleep until their completion).
  _waiter.set_spinning_threads(std::max(1, cpus / std::max(1, local)));
  // Contended, a spinner delays the process it waits for: spin less (20 us
  // unless NMAD_WAIT_SPIN_US says otherwise), then sleep.
  if (t.wait_spin_us >= 0) _waiter.set_contended_spin(std::chrono::microseconds(t.wait_spin_us));
  connect_all(opts.connect_timeout_ms > 0 ? std::chrono::milliseconds(opts.connect_timeout_ms) : t.connect_timeout);
  _job_cpus = cpus;
  start_progress(t.progress);
  // Copy offload needs the progress thread (nothing else copies while the
  // caller goes on).
  std::size_t offload = 0;
  if (opts.copy_offload >= 0) offload = static_cast<std::size_t>(opts.copy_offload);
  else offload = t.copy_offload;
  _copy_offload_min = _progress_thread ? offload : 0;
  if (_progress_thread) {
    // Offloading pays only if the thread sees the work at once: it spins
    // a while before sleeping (waking it costs more than a copy).
    // Only on a core of its own: a spinner on a full machine takes the
    // CPU of a process that has work. There (placement pair: on the core
    // of a partner that waits) it spins only a little after the work it
    // led, for the peer's next packet (a rendezvous request after our
    // ready-to-receive): sleeping there costs the peer a wake-up, and the
    // pull starts a wake-up late.
    const bool spare_core = _job_cpus > _local_processes;
    const long spin_us = t.progress_spin_us >= 0 ? t.progress_spin_us : spare_core ? (offload ? 1000 : 0) : 50;
    _waiter.set_background_spin(std::chrono::microseconds(spin_us), spare_core);
    _progress_desc += offload ? "; copy offload from " + std::to_string(offload) + " B" : "; copy offload off";
    if (spin_us > 0)
      _progress_desc += "; spins " + std::to_string(spin_us) + " us before sleeping" +
                        (spare_core ? "" : " (after work it led only: no core to spare)");
  }
  _serial = enlist(this);  // last: a session whose set-up threw never was live
}

void session_impl::start_progress(const std::string& text) {
  progress_mode m = progress_mode::automatic;
  parse_progress_mode(text, m);  // checked by read_tunables
  if (m == progress_mode::none) {
    _progress_desc = "none (NMAD_PROGRESS=none: the application's threads progress when they call the library)";
    return;
  }
  const std::string counts = std::to_string(_local_processes) + " local process(es) on " +
                             std::to_string(_job_cpus) + " CPU(s)";
  if (!starts_progress_thread(m, _job_cpus, _local_processes)) {
    _progress_desc = "none (auto: " + counts +
                     ", no core to spare; waits progress, NMAD_PROGRESS=thread forces a thread)";
    return;
  }
  progress_thread::options o;
  if (const std::string v = config::text("NMAD_PROGRESS_CPUS"); !v.empty()) o.cpus = *config::parse_cpu_list(v);
  try {
    o.priority = topology::priorities_from_env().progress;
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(std::string("nmad: ") + e.what());
  }
  enable_threads();
  _progress_thread = std::make_unique<progress_thread>(_waiter, o);
  _progress_desc = std::string("thread (") + (m == progress_mode::thread ? "NMAD_PROGRESS=thread" : "auto: " + counts) +
                   "): " + _progress_thread->description();
}

void session_impl::enable_threads() {
  if (!_threaded) {
    // Everything a second thread may touch gets its lock (no other thread
    // runs yet: the switches are safe).
    _threaded = true;
    _recv.enable_threads();
    _pending_lock.enable(true);
    for (auto& g : _gates) {
      g->lock.enable(true);
      for (track& tr : g->tracks) tr.lock.enable(true);
    }
    for (auto& slot : _slots) slot->lock.enable(true);
    _tasks.set_threaded(true);
  }
  _waiter.enable_background();
}

void session_impl::background_work(long delta) {
  if (!_waiter.background() || delta == 0) return;
  if (delta > 0) {
    _waiter.work_started(delta);
    if (t_depth == 0) _waiter.returns_to_application();
  } else {
    _waiter.work_finished(-delta);
  }
}

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
      chunk_entry* e = g.entry_pool.get();
      *e = chunk_entry{};
      e->pooled = true;
      e->kind = chunk_kind::failure_notice;
      e->priority = 2;
      e->tag = static_cast<std::uint64_t>(cause);
      e->msg_len = chunk_entry::unknown_length;
      g.collect.push_front(*e);
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

session_stats session_impl::stats() const {
  session_stats out;
  auto get = [](const std::atomic<std::uint64_t>& c) { return c.load(std::memory_order_relaxed); };
  for (const gate_stats& g : peer_stats())
    for (std::size_t i = 0; i < g.tracks.size(); ++i) {
      const track_stats& t = g.tracks[i];
      out.packets_sent += t.packets;
      out.chunks_sent += t.chunks;
      out.bytes_sent += t.bytes;
      out.rdv_data_sent += t.rdv_transfers;
      out.rail_sends[std::min<std::size_t>(i, 3)] += t.packets + t.rdv_transfers;
    }
  out.packets_received = _recv.packets_received();
  out.unexpected_messages = _recv.unexpected_messages();
  out.protocol_errors = get(_stats.protocol_errors);
  out.offloaded_sends = get(_stats.offloaded_sends);
  out.offload_tasks_by_thread = get(_stats.offload_tasks_by_thread);
  return out;
}

std::vector<gate_stats> session_impl::peer_stats() const {
  std::vector<gate_stats> out;
  out.reserve(_gates.size());
  for (const auto& gp : _gates) {
    const gate& g = *gp;
    gate_stats gs;
    gs.peer = g.rank;
    gs.alive = !g.failed.load(std::memory_order_acquire);
    gs.rdv_requests = g.rdv_requests.get();
    for (const track& t : g.tracks) {
      const track_counters& c = t.stats;
      track_stats ts;
      ts.driver = std::string(t.slot->drv->caps().name);
      const std::uint64_t inl = c.inline_sends.get();
      ts.packets = c.packets.get() + inl;
      ts.chunks = c.chunks.get() + inl;
      ts.chunks_max = std::max<std::uint64_t>(c.chunks_max.get(), inl ? 1 : 0);
      for (int b = 0; b < 8; ++b) ts.chunks_histogram[b] = c.chunks_histogram[b].get();
      ts.chunks_histogram[0] += inl;
      ts.bytes = c.bytes.get() + c.inline_bytes.get();
      ts.rdv_transfers = c.rdv_transfers.get();
      ts.rdv_bytes = c.rdv_bytes.get();
      ts.idle_ns = c.idle_ns.get();
      gs.tracks.push_back(std::move(ts));
    }
    out.push_back(std::move(gs));
  }
  return out;
}

// One block per process on stderr, written at once (ranks print together).
void session_impl::print_stats() const {
  const session_stats st = stats();
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line,
                "nmad stats: rank %d (strategy %s): packets sent %llu (chunks %llu, bytes %llu), rendezvous "
                "transfers %llu, packets received %llu, unexpected messages %llu, protocol errors %llu\n",
                _rank, _strategy_name.c_str(), static_cast<unsigned long long>(st.packets_sent),
                static_cast<unsigned long long>(st.chunks_sent), static_cast<unsigned long long>(st.bytes_sent),
                static_cast<unsigned long long>(st.rdv_data_sent), static_cast<unsigned long long>(st.packets_received),
                static_cast<unsigned long long>(st.unexpected_messages),
                static_cast<unsigned long long>(st.protocol_errors));
  out += line;
  static const char* const buckets[8] = {"1", "2", "3-4", "5-8", "9-16", "17-32", "33-64", "65+"};
  for (const gate_stats& g : peer_stats()) {
    std::uint64_t any = g.rdv_requests;
    for (const track_stats& t : g.tracks) any += t.packets + t.rdv_transfers;
    if (!any) continue;  // nothing sent to that peer
    std::snprintf(line, sizeof line, "  rank %d -> rank %d%s: rendezvous sends %llu\n", _rank, g.peer,
                  g.alive ? "" : " (failed)", static_cast<unsigned long long>(g.rdv_requests));
    out += line;
    for (std::size_t i = 0; i < g.tracks.size(); ++i) {
      const track_stats& t = g.tracks[i];
      std::snprintf(line, sizeof line,
                    "    track %zu (%s): packets %llu, bytes %llu, chunks %llu (per packet: mean %.2f, max %llu), "
                    "rendezvous transfers %llu (%llu bytes), idle with work queued %.3f ms\n",
                    i, t.driver.c_str(), static_cast<unsigned long long>(t.packets),
                    static_cast<unsigned long long>(t.bytes), static_cast<unsigned long long>(t.chunks),
                    t.chunks_per_packet(), static_cast<unsigned long long>(t.chunks_max),
                    static_cast<unsigned long long>(t.rdv_transfers), static_cast<unsigned long long>(t.rdv_bytes),
                    static_cast<double>(t.idle_ns) / 1e6);
      out += line;
      if (t.packets) {
        out += "      chunks per packet:";
        for (int b = 0; b < 8; ++b)
          if (t.chunks_histogram[b]) {
            std::snprintf(line, sizeof line, " %s: %llu", buckets[b],
                          static_cast<unsigned long long>(t.chunks_histogram[b]));
            out += line;
          }
        out += "\n";
      }
    }
  }
  std::fwrite(out.data(), 1, out.size(), stderr);
  std::fflush(stderr);
}

bool session_impl::peer_alive(int rank) const {
  if (rank < 0 || rank >= _size) return false;
  return !_gates[rank]->failed.load(std::memory_order_acquire);
}

// Strategies are per gate: each is replaced under its gate's lock, so a
// send racing with the change sees the old one or the new one.
errc session_impl::set_strategy(std::string_view name) {
  std::shared_ptr<const strategy_source> d;
  try {
    d = resolve_strategy(name);
  } catch (const std::exception& e) {
    log_write(log_level::warn, "session", e.what());
    return errc::invalid_argument;
  }
  for (auto& g : _gates) {
    std::lock_guard gl(g->lock);
    if (!g->collect.empty()) return errc::no_resource;
  }
  std::vector<std::unique_ptr<strategy>> made;
  try {
    for (std::size_t i = 0; i < _gates.size(); ++i) made.push_back(d->create());
  } catch (const std::exception& e) {
    log_write(log_level::warn, "session", e.what());
    return errc::invalid_argument;
  }
  for (std::size_t i = 0; i < _gates.size(); ++i) {
    std::lock_guard gl(_gates[i]->lock);
    _gates[i]->strat = std::move(made[i]);
  }
  std::lock_guard pl(_pending_lock);
  _strategy_source = d;
  _strategy_name = std::string(d->name());
  return errc::ok;
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

std::string session_impl::peer_name(const gate& g) const { return "rank " + std::to_string(g.rank); }

}  // namespace nmad
