// nmad-info: what this build of nmad can do on this machine — drivers and
// their capabilities, strategies, engine tunables, topology, placement.
//   nmad-info [--drivers] [--strategies] [--config] [--topology [SPEC]]
//             (--config exits 1 when a knob's value would stop start-up)
//   nmad-info --knob-names   every knob of the table, one name a line
//   nmad-info --sample [--force]   samples every network driver, caches and prints the
//                         profiles (not one sampled while the machine was busy or
//                         implausible, unless --force)
//   nmad-info --placement [--topology SPEC] -n N [--progress POLICY|all] [--dedicated-cores K]
//   nmad-info --split-tree-table [CORES [MAX_N]]
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <optional>
#include <string>

#include "api/nmad/services/config.hpp"
#include "core/progress/progress_thread.hpp"
#include "core/strategy/strategy.hpp"
#include "api/nmad/services/placement.hpp"
#include "core/topology/scheduling.hpp"
#include "api/nmad/services/topology.hpp"
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
int sample_all(bool force) {
  nmad::register_builtin_drivers();
  const std::string path = nmad::profile_cache_path();
  std::vector<nmad::driver_profile> got;
  int failures = 0;
  for (const auto& d : nmad::driver_registry()) {
    if (d.loopback) continue;
    std::printf("sampling %s ...\n", std::string(d.name).c_str());
    std::fflush(stdout);
    try {
      nmad::driver_profile p = nmad::sample_driver(d);
      std::printf("  latency %.2f us, bandwidth %.0f MB/s; load while sampling: %s\n", p.latency_us(),
                  p.bandwidth_mbps(), p.load.text().c_str());
      if (!p.rejected.empty() && !force) {
        // Never cached: the figures measured the machine's load, not the driver.
        std::fprintf(stderr, "nmad-info: the %s profile is rejected, not cached: %s (--force caches it anyway)\n",
                     std::string(d.name).c_str(), p.rejected.c_str());
        ++failures;
        continue;
      }
      if (!p.rejected.empty())
        std::printf("  cached although implausible (--force): %s\n", p.rejected.c_str());
      got.push_back(std::move(p));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "nmad-info: %s\n", e.what());
      ++failures;
    }
  }
  if (got.empty()) {
    std::fprintf(stderr, "nmad-info: no profile to cache (the cache is left as it was)\n");
    return 1;
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
        std::printf("           load while sampled: %s\n", prof->load.text().c_str());
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
    if (d.name == "ofi") {
      std::printf("           providers best first, by %s:\n", nmad::ofi_provider_criteria().c_str());
      for (const auto& p : nmad::ofi_probe_providers()) {
        std::printf("           provider %-12s %s: %s\n", p.provider.c_str(), p.usable ? "usable" : "unusable",
                    p.detail.c_str());
        if (!p.ranking.empty()) std::printf("           %-21s ranked on: %s\n", "", p.ranking.c_str());
      }
    }
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

// Every knob of the table (core/common/config_knobs.cpp) with its value and
// where it came from, grouped by the part of nmad that reads it; then the
// NMAD_* names that are no knob. False when a value would stop a session
// (or nmad-run) from starting.
bool print_config() {
  namespace config = nmad::config;
  static const std::pair<std::string_view, const char*> groups[] = {
      {"engine", "engine"}, {"shm", "shm driver"}, {"tcp", "tcp driver"}, {"ofi", "ofi driver"},
      {"mpi", "MPI layer"}, {"launcher", "nmad-run and nmad-info"}, {"tools", "scripts"}, {"testing", "tests"},
  };
  std::printf("Configuration (NMAD_* environment variables; docs/CONFIGURATION.md says more):\n");
  bool ok = true;
  for (const auto& [scope, title] : groups) {
    std::printf(" %s\n", title);
    for (const config::knob& k : config::knobs()) {
      if (k.scope != scope) continue;
      const char* env = std::getenv(std::string(k.name).c_str());
      config::value v;
      const std::string why = config::parse(k, env ? std::optional<std::string_view>(env) : std::nullopt, v);
      const std::string name(k.name);
      if (!why.empty()) {
        ok = false;
        std::printf("  ! %s (a session or nmad-run refuses to start)\n", config::message(k.name, env, why).c_str());
      } else if (v.given) {
        std::printf("  %s = %s (environment)\n", name.c_str(), k.secret ? "(set, not shown)" : v.text.c_str());
      } else if (k.def.empty()) {
        std::printf("  %s (unset)\n", name.c_str());
      } else {
        std::printf("  %s = %s (default)\n", name.c_str(), std::string(k.def).c_str());
      }
      std::printf("      %s; takes %s\n", std::string(k.what).c_str(), config::accepts(k).c_str());
    }
  }
  const config::report r = config::scan_environment();
  if (!r.unknown.empty()) {
    std::printf(" NMAD_* names that are no knob\n");
    for (const auto& u : r.unknown) std::printf("  ? %s\n", config::unknown_message(u).c_str());
    try {
      if (config::word("NMAD_CONFIG_UNKNOWN") == "error") ok = false;
    } catch (const std::exception&) {
    }
  }
  return ok;
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
    bool valid = true;
    try {
      nmad::config::word("NMAD_PROGRESS");
    } catch (const std::exception&) {
      valid = false;
    }
    const std::string counts = std::to_string(n) + " rank(s) on " + std::to_string(t.pu_count()) + " CPU(s)";
    nmad::progress_mode mode;
    std::string what;
    if (!valid || !nmad::parse_progress_mode(text, mode))
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
  topo::thread_priorities prio;
  try {
    prio = topo::priorities_from_env();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nmad-info: %s\n", e.what());
    return 2;
  }
  std::printf("Thread priorities (0-20): %s; idle progress and internal threads are suspended\n",
              prio.to_string().c_str());
  return 0;
}

}  // namespace

int usage() {
  std::fprintf(stderr,
               "usage: nmad-info [--drivers] [--strategies] [--config] [--topology [SPEC]]\n"
               "       nmad-info --knob-names   (every NMAD_* knob, one a line)\n"
               "       nmad-info --sample [--force]  (measure every network driver, cache and print the profiles;\n"
               "                    a profile taken on a busy machine or implausible is not cached unless --force)\n"
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
  bool sample = false, force = false, knob_names = false;
  bool all = argc == 1, drivers = all, strategies = all, config = all, topology = all, placement = false;
  std::optional<std::string> spec;
  int nranks = 0, dedicated = 0, table_cores = -1, table_max = 64;
  std::string policy;
  std::string knob_error;  // a bad NMAD_PROGRESS_PLACEMENT or _CORES stops --placement
  try {
    if (nmad::config::is_set("NMAD_PROGRESS_PLACEMENT")) policy = nmad::config::word("NMAD_PROGRESS_PLACEMENT");
    dedicated = static_cast<int>(nmad::config::integer("NMAD_PROGRESS_CORES"));
  } catch (const std::exception& e) {
    knob_error = e.what();
  }
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto has_value = [&] { return i + 1 < argc && argv[i + 1][0] != '-'; };
    if (a == "--drivers") drivers = true;
    else if (a == "--sample") sample = true;
    else if (a == "--force") force = true;
    else if (a == "--strategies") strategies = true;
    else if (a == "--config") config = true;
    else if (a == "--knob-names") knob_names = true;
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
  if (knob_names) {
    for (const auto& k : nmad::config::knobs()) std::printf("%s\n", std::string(k.name).c_str());
    return 0;
  }
  if (placement && !knob_error.empty()) {
    std::fprintf(stderr, "nmad-info: %s\n", knob_error.c_str());
    return 2;
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
    sample_status = sample_all(force);
    drivers = true;
  }
  if (placement) return print_placement(*machine, nranks, policy.empty() ? "auto" : policy, dedicated);
  std::printf("nmad (protocol version 1)\n");
  if (drivers) print_drivers();
  if (strategies) print_strategies();
  const bool config_ok = !config || print_config();
  if (topology) {
    if (machine) print_topology(*machine);
    else std::printf("Topology: unavailable\n");
  }
  return sample_status ? sample_status : config_ok ? 0 : 1;
}
