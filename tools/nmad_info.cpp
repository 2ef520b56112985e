// nmad-info: what this build of nmad can do on this machine — drivers and
// their capabilities, strategies, engine tunables, topology, placement.
//   nmad-info [--drivers] [--strategies] [--config] [--topology [SPEC]]
//   nmad-info --sample    samples every network driver, caches and prints the profiles
//   nmad-info --placement [--topology SPEC] -n N [--progress POLICY|all] [--dedicated-cores K]
//   nmad-info --split-tree-table [CORES [MAX_N]]
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <optional>
#include <string>

#include "core/progress/progress_thread.hpp"
#include "core/strategy/strategy.hpp"
#include "core/topology/placement.hpp"
#include "core/topology/scheduling.hpp"
#include "core/topology/topology.hpp"
#include "core/transfer/driver.hpp"
#include "core/transfer/profile.hpp"
#include "drivers/builtin.hpp"
#include "drivers/ofi/ofi_driver.hpp"

namespace {

struct null_events final : nmad::driver_events {
  void on_connected(nmad::connection_id, int) override {}
  void on_packet(nmad::connection_id, std::span<const std::byte>) override {}
  void on_send_done(void*) override {}
  void on_recv_data_done(void*, std::size_t) override {}
  void on_connection_failed(nmad::connection_id, std::string_view) override {}
};

std::string utc_date(std::int64_t t) {
  const std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", &tm);
  return buf;
}

std::string size_text(std::size_t b) {
  if (b >= (1u << 20) && b % (1u << 20) == 0) return std::to_string(b >> 20) + " MiB";
  if (b >= 1024 && b % 1024 == 0) return std::to_string(b >> 10) + " KiB";
  return std::to_string(b) + " B";
}

// The profile cache: what --sample wrote or a multirail job sampled.
struct profile_cache {
  std::string path, state;  // state: why nothing is used, when so
  std::vector<nmad::driver_profile> profiles;
};

profile_cache read_profile_cache() {
  profile_cache c;
  c.path = nmad::profile_cache_path();
  if (c.path.empty()) {
    c.state = "no cache directory (set NMAD_PROFILE_CACHE, XDG_CACHE_HOME or HOME)";
    return c;
  }
  std::string warning, note;
  c.profiles = nmad::load_profiles(c.path, nmad::current_profile_key(), &warning, &note);
  if (!warning.empty()) c.state = "ignored, corrupt: " + warning;
  else if (!note.empty()) c.state = "ignored, stale: sampled on other hardware or another build";
  return c;
}

// Samples every network driver of the build and rewrites the cache.
int sample_all() {
  nmad::register_builtin_drivers();
  const std::string path = nmad::profile_cache_path();
  std::vector<nmad::driver_profile> got;
  int failures = 0;
  for (const auto& d : nmad::driver_registry()) {
    if (d.loopback) continue;
    std::printf("sampling %s ...\n", std::string(d.name).c_str());
    std::fflush(stdout);
    try {
      got.push_back(nmad::sample_driver(d));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "nmad-info: %s\n", e.what());
      ++failures;
    }
  }
  if (path.empty()) {
    std::fprintf(stderr, "nmad-info: no cache directory (set NMAD_PROFILE_CACHE, XDG_CACHE_HOME or HOME): not saved\n");
    return 1;
  }
  try {
    nmad::save_profiles(path, nmad::current_profile_key(), got);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nmad-info: %s\n", e.what());
    return 1;
  }
  std::printf("profiles cached in %s\n", path.c_str());
  return failures ? 1 : 0;
}

// The drivers of this build, as libnmad's session::create registers them
// (drivers/builtin.cpp), in registration order.
void print_drivers() {
  nmad::register_builtin_drivers();
  const profile_cache cache = read_profile_cache();
  std::printf("Drivers (profile cache %s%s%s):\n", cache.path.empty() ? "none" : cache.path.c_str(),
              cache.state.empty() ? "" : ": ", cache.state.c_str());
  for (const auto& d : nmad::driver_registry()) {
    std::printf("  %-8s %s%s\n", std::string(d.name).c_str(), std::string(d.description).c_str(),
                d.loopback ? " [loopback: this process only]" : "");
    try {
      null_events ev;
      auto drv = d.create();
      nmad::driver_config cfg;
      cfg.rank = 0;
      cfg.size = 1;
      cfg.job_key = "nmad-info";
      cfg.events = &ev;
      drv->open(cfg);
      const auto& c = drv->caps();
      std::printf("           max packet %zu B, max iov %zu, sends in flight %zu\n", c.max_packet_size, c.max_iov,
                  c.max_sends_in_flight);
      std::printf("           gather/scatter %s, zero-copy data %s, rdma get %s\n", c.gather_scatter ? "yes" : "no",
                  c.zero_copy_data ? "yes" : "no", c.rdma_get ? "yes" : "no");
      if (c.rdv_threshold) std::printf("           rendezvous from %zu B\n", c.rdv_threshold);
      const nmad::driver_profile* prof = nullptr;
      for (const auto& p : cache.profiles)
        if (p.driver == d.name) prof = &p;
      if (!prof) {
        std::printf("           latency %.2f us, bandwidth %.0f MB/s, overhead %.2f us (estimates)\n", c.latency_us,
                    c.bandwidth_mbps, c.overhead_us);
      } else {
        std::printf("           latency %.2f us, bandwidth %.0f MB/s (sampled %s), overhead %.2f us (estimate)\n",
                    prof->latency_us(), prof->bandwidth_mbps(), utc_date(prof->sampled_at).c_str(), c.overhead_us);
        std::printf("           %-9s %12s %12s  %s\n", "size", "one-way us", "MB/s", "path");
        for (const auto& pt : prof->points)
          std::printf("           %-9s %12.2f %12.0f  %s\n", size_text(pt.bytes).c_str(), pt.one_way_us,
                      pt.bandwidth_mbps, pt.bulk ? "bulk data" : "packet");
      }
      std::printf("           address %s\n", drv->local_address().c_str());
    } catch (const std::exception& e) {
      std::printf("           unavailable: %s\n", e.what());
    }
    if (d.on_request) std::printf("           opened only when named in NMAD_DRIVER / NMAD_DRIVERS\n");
    if (d.name == "ofi")
      for (const auto& p : nmad::ofi_probe_providers())
        std::printf("           provider %-12s %s: %s\n", p.provider.c_str(), p.usable ? "usable" : "unusable",
                    p.detail.c_str());
  }
}

// Built-ins (C++ interface), then the plugins of NMAD_STRATEGY_PATH and
// the installed plugin directory with their interface version.
void print_strategies() {
  std::printf("Strategies (NMAD_STRATEGY):\n");
  for (const auto& s : nmad::list_strategies()) {
    if (s.interface_version == 0)
      std::printf("  %-20s %-10s %s\n", s.name.c_str(), s.origin.c_str(), s.description.c_str());
    else if (s.ok)
      std::printf("  %-20s plugin v%u  %s (%s)\n", s.name.c_str(), s.interface_version, s.description.c_str(),
                  s.origin.c_str());
    else
      std::printf("  %-20s unusable   %s\n", s.name.c_str(), s.description.c_str());
  }
  std::string dirs;
  for (const auto& d : nmad::strategy_plugin_dirs()) dirs += (dirs.empty() ? "" : ":") + d;
  std::printf("  plugin directories: %s\n", dirs.c_str());
}

void print_config() {
  struct knob {
    const char* name;
    const char* def;
    const char* what;
  };
  static const knob knobs[] = {
      {"NMAD_DRIVER", "auto", "network driver, auto: per peer (shm here, tcp elsewhere), or a list (shm,ofi): per peer among those"},
      {"NMAD_DRIVERS", "", "several rails, e.g. shm+tcp or tcp+tcp: one track per listed driver"},
      {"NMAD_STRATEGY", "default", "packet scheduling strategy: a name (built-in or plugin) or a plugin's path"},
      {"NMAD_STRATEGY_PATH", "", "colon-separated directories searched for libnmad_strategy_<name>.so"},
      {"NMAD_RDV_THRESHOLD", "driver's/32768", "bytes from which messages go by rendezvous (unset: the driver's preference)"},
      {"NMAD_COPY_THRESHOLD", "256", "payloads up to this size are copied into the packet"},
      {"NMAD_UNEXPECTED_MAX", "64M", "eager bytes peers may make this process buffer unexpectedly (shared by its peers; 0 = unlimited)"},
      {"NMAD_CONNECT_TIMEOUT_MS", "30000", "time allowed to connect to every peer"},
      {"NMAD_FINALIZE_TIMEOUT_MS", "30000", "time allowed to flush sends at finalize"},
      {"NMAD_WAIT", "fixed-spin", "how blocking calls wait: busy, block, fixed-spin"},
      {"NMAD_WAIT_SPIN_US", "100", "fixed-spin: microseconds of polling before sleeping (20 if oversubscribed)"},
      {"NMAD_WAIT_YIELD", "auto", "give the CPU away on idle polls (auto: always if more processes than cores, else after 10 us idle)"},
      {"NMAD_ASYMMETRIC_FENCES", "1", "0: full fences on both sides of sleep/wake handshakes (no membarrier)"},
      {"NMAD_SHM_RING", "262144", "shm: bytes per ring (power of two)"},
      {"NMAD_SHM_CMA", "1", "shm: 0 = bulk data through the ring, not cross-memory attach"},
      {"NMAD_PROFILE", "auto", "driver profiles: auto (cached; sampled when a multirail job has none), sample, off"},
      {"NMAD_PROFILE_CACHE", "~/.cache/nmad/profiles", "file of the sampled driver profiles (else $XDG_CACHE_HOME/nmad/profiles)"},
      {"NMAD_STATS", "0", "1: print per-gate and per-track send statistics on stderr when a session ends"},
      {"NMAD_TRACE", "", "record engine events to FILE.<rank> (or a name with %r/%p); nmad-trace merges them"},
      {"NMAD_LOG", "warn", "log level: error, warn, info, debug"},
      {"NMAD_OFI_PROVIDER", "", "ofi: libfabric provider to use, e.g. tcp;ofi_rxm, shm (else FI_PROVIDER, else chosen)"},
      {"NMAD_OFI_DOMAIN", "lo", "ofi: libfabric domain (interface) to use (default lo where offered)"},
      {"NMAD_OFI_CONNECT_TIMEOUT_MS", "5000", "ofi: time a peer has to answer the hello"},
      {"NMAD_OFI_RMA", "auto", "ofi: rendezvous by RMA read: auto (where the provider has FI_RMA), on, off"},
      {"NMAD_OFI_MR_CACHE", "64", "ofi: unused memory registrations kept (LRU); 0: register per rendezvous"},
      {"NMAD_TCP_HOST", "127.0.0.1", "tcp: address to listen on and advertise"},
      {"NMAD_TCP_HOSTS", "", "tcp: one address per tcp rail (NMAD_DRIVERS=tcp+tcp: a,b), instead of NMAD_TCP_HOST"},
      {"NMAD_RAIL_BANDWIDTH", "", "MB/s of each rail of NMAD_DRIVERS (e.g. 100,25): what split_balance divides data by"},
      {"NMAD_TCP_PORT", "0", "tcp: fixed listening port (0 = any)"},
      {"NMAD_TCP_HANDSHAKE_TIMEOUT_MS", "5000", "tcp: time a stranger has to present the job key"},
      {"NMAD_TCP_CONNECT_TIMEOUT_MS", "30000", "tcp: time a peer has to answer a connection"},
      {"NMAD_TCP_PENDING_PER_HOST", "256", "tcp: handshakes one address may hold pending; more are refused"},
      {"NMAD_TCP_PENDING_MAX", "nofile/4 (16-256)", "tcp: handshakes pending in all; then the oldest silent 1 s goes, or new ones wait"},
      {"NMAD_RUN_OVERSUBSCRIBE", "0", "nmad-run: 1 = no warning for more ranks than CPUs on this host"},
      {"NMAD_PMI_AUTH", "(from nmad-run)", "this rank's token for nmad-run's PMI port (PMI_PORT)"},
      {"NMAD_RUN_PID", "(from nmad-run)", "nmad-run's pid:start time; a rank ends its process group once nmad-run is gone"},
      {"NMAD_TCP_USER_TIMEOUT_MS", "0", "tcp: fail a connection whose peer host stops answering this long (0 = kernel's)"},
      {"NMAD_TCP_FRAGMENT", "512K", "tcp: bulk data longer than this goes in fragments of this size (0 = whole)"},
      {"NMAD_TCP_SOCKBUF", "256K", "tcp: SO_SNDBUF and SO_RCVBUF of every socket (0 = kernel's autotuning)"},
      {"NMAD_RUN_TIMEOUT", "none", "nmad-run: end the job after this many seconds"},
      {"NMAD_RUN_KILL_GRACE", "2", "nmad-run: seconds the others get after a rank fails"},
      {"NMAD_RUN_BIND", "auto", "nmad-run: bind local ranks as placed (core, auto: 2+ ranks that fit, none)"},
      {"NMAD_RUN_REPORT_BINDINGS", "0", "nmad-run: 1 = one line per rank: CPUs, NUMA node, reason"},
      {"NMAD_TOPOLOGY", "", "topology to place on: synthetic description or hwloc XML file (default: this machine)"},
      {"NMAD_PROGRESS", "auto", "progress thread: none, thread (one per process), auto (a thread when a core is spare)"},
      {"NMAD_COPY_OFFLOAD", "off", "progress thread copies eager isends from a size on: off, on (16K), or bytes, e.g. 4K"},
      {"NMAD_PROGRESS_SPIN_US", "auto", "progress thread polls this long before sleeping (auto: 1000 with offload and a spare core, 0 without offload, 50 after led work on a full machine)"},
      {"NMAD_PROGRESS_CPUS", "", "CPUs of the progress thread (nmad-run sets it from the placement), e.g. 0-3"},
      {"NMAD_PROGRESS_PLACEMENT", "auto", "progress threads: bind, numa, dedicated, smt, odd-even, split-tree, float, auto"},
      {"NMAD_PROGRESS_CORES", "0", "dedicated placement: size of the progress core pool (0 = every free core)"},
      {"NMAD_THREAD_PRIORITIES", "", "priorities 0-20 per thread kind, e.g. progress=18,internal=2"},
      {"NMAD_COLL_HIER", "auto", "MPI hierarchical collectives (hosts, packages, NUMA nodes): auto (bcast, reduce, allreduce), on (barrier too), off"},
      {"NMAD_EMULATED_HOSTS", "", "testing: host names of the world ranks for MPI splits, e.g. n0*8,n1*8"},
      {"NMAD_HW_BINDING", "", "testing: bindings MPI hardware splits see: affinity, placement, none, 0-3;4-7"},
  };
  std::printf("Configuration (environment; * = set here):\n");
  for (const auto& k : knobs) {
    const char* v = std::getenv(k.name);
    std::printf("  %c %-30s %-10s %s\n", v ? '*' : ' ', k.name, v ? v : k.def, k.what);
  }
}

namespace topo = nmad::topology;

// The machine to describe or place on: SPEC, else NMAD_TOPOLOGY / HWLOC_*,
// else this machine as far as this process may use it.
topo::machine_topology pick_topology(const std::optional<std::string>& spec) {
  if (spec) return topo::load_spec(*spec);
  topo::machine_topology t = topo::from_env();
  if (t.this_system()) {
    try {
      return topo::restrict_to(t, topo::allowed_cpus());
    } catch (const topo::topology_error&) {
    }
  }
  return t;
}

void print_topology(const topo::machine_topology& t) {
  std::printf("Topology (%s): %s\n", t.source().c_str(), t.summary().c_str());
  for (const auto& node : t.numa_nodes()) {
    std::vector<int> cpus;
    for (int c : node.cores)
      for (int cpu : t.cpus_of_core(c)) cpus.push_back(cpu);
    std::printf("  NUMA node %d: %zu core(s), CPUs %s\n", node.label, node.cores.size(), topo::cpu_list(cpus).c_str());
  }
}

std::string where(const topo::machine_topology& t, const std::vector<int>& cpus, int numa) {
  return "CPUs " + topo::cpu_list(cpus) + " (NUMA node " + std::to_string(t.numa_nodes()[numa].label) + ")";
}

void print_progress(const topo::machine_topology& t, const topo::job_placement& j, topo::progress_policy p) {
  std::printf("Progress threads (%s):\n", std::string(topo::name_of(p)).c_str());
  for (const auto& th : j.progress) {
    std::printf("  rank %d: %s: %s\n", th.rank, where(t, th.cpus, th.numa).c_str(), th.reason.c_str());
  }
  if (j.split) {
    std::printf("  split-tree cost T(S,%d) for S = 0..%d:", j.split->n, j.split->height);
    for (long c : j.split->cost) std::printf(" %s", c < 0 ? "-" : std::to_string(c).c_str());
    std::printf(" (P = %d)\n", j.split->progress_cores);
  }
}

int print_placement(const topo::machine_topology& t, int n, const std::string& policy, int dedicated) {
  std::vector<topo::progress_policy> policies;
  if (policy == "all") {
    policies = topo::all_progress_policies();
  } else if (auto p = topo::parse_progress_policy(policy)) {
    policies.push_back(*p);
  } else {
    std::fprintf(stderr, "nmad-info: unknown progress placement '%s' (bind, numa, dedicated, smt, odd-even, "
                         "split-tree, float, auto, all)\n", policy.c_str());
    return 2;
  }
  print_topology(t);
  auto first = topo::place_job(t, n, {policies.front(), dedicated});
  std::printf("Ranks (%d, scatter by NUMA):\n", n);
  for (const auto& r : first.ranks)
    std::printf("  rank %d: %s: %s\n", r.rank, where(t, r.cpus, r.numa).c_str(), r.reason.c_str());
  // What NMAD_PROGRESS decides for these ranks (the engine's rule).
  {
    const char* env = std::getenv("NMAD_PROGRESS");
    const std::string text = env && *env ? env : "auto";
    const std::string counts = std::to_string(n) + " rank(s) on " + std::to_string(t.pu_count()) + " CPU(s)";
    nmad::progress_mode mode;
    std::string what;
    if (!nmad::parse_progress_mode(text, mode))
      what = "unknown value (none, thread, auto): the ranks would refuse to start";
    else if (mode == nmad::progress_mode::none)
      what = "no progress thread (waits progress)";
    else if (!nmad::starts_progress_thread(mode, t.pu_count(), n))
      what = "auto: no progress thread (" + counts + ": none to spare; NMAD_PROGRESS=thread forces one)";
    else if (mode == nmad::progress_mode::thread)
      what = "one progress thread per rank, placed as below";
    else
      what = "auto: one progress thread per rank (" + counts + " leave room), placed as below";
    std::printf("NMAD_PROGRESS=%s: %s\n", text.c_str(), what.c_str());
  }
  for (auto p : policies) print_progress(t, topo::place_job(t, n, {p, dedicated}), p);
  const auto prio = topo::priorities_from_env();
  std::printf("Thread priorities (0-20): %s; idle progress and internal threads are suspended\n",
              prio.to_string().c_str());
  return 0;
}

}  // namespace

int usage() {
  std::fprintf(stderr,
               "usage: nmad-info [--drivers] [--strategies] [--config] [--topology [SPEC]]\n"
               "       nmad-info --sample   (measure every network driver, cache and print the profiles)\n"
               "       nmad-info --placement [--topology SPEC] -n N [--progress POLICY|all] [--dedicated-cores K]\n"
               "       nmad-info --split-tree-table [CORES [MAX_N]]\n"
               "SPEC: a synthetic topology (\"pack:2 numa:2 core:12 pu:2\") or an hwloc XML file;\n"
               "POLICY: bind, numa, dedicated, smt, odd-even, split-tree, float, auto (default $NMAD_PROGRESS_PLACEMENT\n"
               "        or auto)\n");
  return 2;
}

bool parse_int(const char* s, int lo, int hi, int* out) {
  char* end = nullptr;
  long v = std::strtol(s, &end, 10);
  if (!*s || *end || v < lo || v > hi) return false;
  *out = static_cast<int>(v);
  return true;
}

int main(int argc, char** argv) {
  bool sample = false;
  bool all = argc == 1, drivers = all, strategies = all, config = all, topology = all, placement = false;
  std::optional<std::string> spec;
  int nranks = 0, dedicated = 0, table_cores = -1, table_max = 64;
  std::string policy;
  if (const char* v = std::getenv("NMAD_PROGRESS_PLACEMENT"); v && *v) policy = v;
  if (const char* v = std::getenv("NMAD_PROGRESS_CORES"); v && *v && !parse_int(v, 0, 1 << 20, &dedicated)) {
    std::fprintf(stderr, "nmad-info: NMAD_PROGRESS_CORES='%s' is not a number of cores\n", v);
    return 2;
  }
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto has_value = [&] { return i + 1 < argc && argv[i + 1][0] != '-'; };
    if (a == "--drivers") drivers = true;
    else if (a == "--sample") sample = true;
    else if (a == "--strategies") strategies = true;
    else if (a == "--config") config = true;
    else if (a == "--topology") {
      topology = true;
      if (has_value()) spec = argv[++i];
    } else if (a == "--placement") placement = true;
    else if (a == "-n" && i + 1 < argc) {
      if (!parse_int(argv[++i], 1, 1 << 20, &nranks)) return usage();
    } else if (a == "--progress" && i + 1 < argc) policy = argv[++i];
    else if (a == "--dedicated-cores" && i + 1 < argc) {
      if (!parse_int(argv[++i], 0, 1 << 20, &dedicated)) return usage();
    } else if (a == "--split-tree-table") {
      table_cores = 64;
      if (has_value() && !parse_int(argv[++i], 1, 1 << 16, &table_cores)) return usage();
      if (has_value() && !parse_int(argv[++i], 1, 1 << 16, &table_max)) return usage();
    } else {
      return usage();
    }
  }
  if (table_cores > 0) {
    std::fputs(topo::split_tree_table(table_cores, table_max).c_str(), stdout);
    return 0;
  }
  if (placement && nranks < 1) {
    std::fprintf(stderr, "nmad-info: --placement needs -n N (the number of ranks on the machine)\n");
    return usage();
  }
  std::optional<topo::machine_topology> machine;
  if (topology || placement) {
    try {
      machine = pick_topology(spec);
    } catch (const std::exception& e) {
      if (placement || spec) {
        std::fprintf(stderr, "nmad-info: %s\n", e.what());
        return 2;
      }
    }
  }
  int sample_status = 0;
  if (sample) {
    sample_status = sample_all();
    drivers = true;
  }
  if (placement) return print_placement(*machine, nranks, policy.empty() ? "auto" : policy, dedicated);
  std::printf("nmad (protocol version 1)\n");
  if (drivers) print_drivers();
  if (strategies) print_strategies();
  if (config) print_config();
  if (topology) {
    if (machine) print_topology(*machine);
    else std::printf("Topology: unavailable\n");
  }
  return sample_status;
}
