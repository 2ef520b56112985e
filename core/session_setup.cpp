// Session set-up: the engine's tunables, read once, and the constructor:
// the drivers opened and their addresses published (session_wiring.cpp),
// one gate per rank with a track per driver that reaches it, how threads
// wait and whether a progress thread runs, then connecting. Also switching
// threads on later, and replacing the strategy. The end of a session is
// session_shutdown.cpp.
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "api/nmad/services/config.hpp"
#include "api/nmad/services/log.hpp"
#include "core/session_impl.hpp"
#include "core/topology/scheduling.hpp"

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
  _max_eager = max_eager;
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

}  // namespace nmad
