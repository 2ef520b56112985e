// nmad-info: what this build of nmad can do on this machine — drivers and
// their capabilities, strategies, engine tunables, topology.
//   nmad-info [--drivers] [--strategies] [--config] [--topology]
#include <hwloc.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/strategy/strategy.hpp"
#include "core/transfer/driver.hpp"
#include "drivers/builtin.hpp"

namespace {

struct null_events final : nmad::driver_events {
  void on_connected(nmad::connection_id, int) override {}
  void on_packet(nmad::connection_id, std::span<const std::byte>) override {}
  void on_send_done(void*) override {}
  void on_recv_data_done(void*, std::size_t) override {}
  void on_connection_failed(nmad::connection_id, std::string_view) override {}
};

// The drivers of this build, as libnmad's session::create registers them
// (drivers/builtin.cpp), in registration order.
void print_drivers() {
  nmad::register_builtin_drivers();
  std::printf("Drivers:\n");
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
      std::printf("           latency %.2f us, bandwidth %.0f MB/s, overhead %.2f us (estimates)\n", c.latency_us,
                  c.bandwidth_mbps, c.overhead_us);
      std::printf("           address %s\n", drv->local_address().c_str());
    } catch (const std::exception& e) {
      std::printf("           unavailable: %s\n", e.what());
    }
  }
}

void print_strategies() {
  std::printf("Strategies:\n");
  for (const auto& s : nmad::strategy_registry())
    std::printf("  %-8s %s\n", std::string(s.name).c_str(), std::string(s.description).c_str());
}

void print_config() {
  struct knob {
    const char* name;
    const char* def;
    const char* what;
  };
  static const knob knobs[] = {
      {"NMAD_DRIVER", "auto", "network driver, or auto: per peer (shm here, tcp elsewhere)"},
      {"NMAD_DRIVERS", "", "several rails, e.g. shm+tcp or tcp+tcp: one track per listed driver"},
      {"NMAD_STRATEGY", "default", "packet scheduling strategy"},
      {"NMAD_RDV_THRESHOLD", "driver's/32768", "bytes from which messages go by rendezvous (unset: the driver's preference)"},
      {"NMAD_COPY_THRESHOLD", "256", "payloads up to this size are copied into the packet"},
      {"NMAD_CONNECT_TIMEOUT_MS", "30000", "time allowed to connect to every peer"},
      {"NMAD_FINALIZE_TIMEOUT_MS", "30000", "time allowed to flush sends at finalize"},
      {"NMAD_WAIT", "fixed-spin", "how blocking calls wait: busy, block, fixed-spin"},
      {"NMAD_WAIT_SPIN_US", "100", "fixed-spin: microseconds of polling before sleeping (20 if oversubscribed)"},
      {"NMAD_WAIT_YIELD", "auto", "give the CPU away on idle polls (auto: always if more processes than cores, else after 10 us idle)"},
      {"NMAD_ASYMMETRIC_FENCES", "1", "0: full fences on both sides of sleep/wake handshakes (no membarrier)"},
      {"NMAD_SHM_RING", "262144", "shm: bytes per ring (power of two)"},
      {"NMAD_SHM_CMA", "1", "shm: 0 = bulk data through the ring, not cross-memory attach"},
      {"NMAD_LOG", "warn", "log level: error, warn, info, debug"},
      {"NMAD_TCP_HOST", "127.0.0.1", "tcp: address to listen on and advertise"},
      {"NMAD_TCP_PORT", "0", "tcp: fixed listening port (0 = any)"},
      {"NMAD_TCP_HANDSHAKE_TIMEOUT_MS", "5000", "tcp: time a stranger has to present the job key"},
      {"NMAD_TCP_CONNECT_TIMEOUT_MS", "30000", "tcp: time a peer has to answer a connection"},
      {"NMAD_RUN_TIMEOUT", "none", "nmad-run: end the job after this many seconds"},
      {"NMAD_RUN_KILL_GRACE", "2", "nmad-run: seconds the others get after a rank fails"},
      {"NMAD_RUN_BIND", "auto", "nmad-run: bind local ranks to CPUs (core, auto: 2+ ranks that fit, none)"},
  };
  std::printf("Configuration (environment; * = set here):\n");
  for (const auto& k : knobs) {
    const char* v = std::getenv(k.name);
    std::printf("  %c %-30s %-10s %s\n", v ? '*' : ' ', k.name, v ? v : k.def, k.what);
  }
}

void print_topology() {
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) != 0 || hwloc_topology_load(topo) != 0) {
    std::printf("Topology: unavailable\n");
    return;
  }
  auto count = [&](hwloc_obj_type_t t) { return hwloc_get_nbobjs_by_type(topo, t); };
  std::printf("Topology: %d package(s), %d NUMA node(s), %d core(s), %d PU(s)\n", count(HWLOC_OBJ_PACKAGE),
              count(HWLOC_OBJ_NUMANODE), count(HWLOC_OBJ_CORE), count(HWLOC_OBJ_PU));
  hwloc_topology_destroy(topo);
}

}  // namespace

int main(int argc, char** argv) {
  bool all = argc == 1, drivers = all, strategies = all, config = all, topology = all;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--drivers") drivers = true;
    else if (a == "--strategies") strategies = true;
    else if (a == "--config") config = true;
    else if (a == "--topology") topology = true;
    else {
      std::fprintf(stderr, "usage: nmad-info [--drivers] [--strategies] [--config] [--topology]\n");
      return 2;
    }
  }
  std::printf("nmad (protocol version 1)\n");
  if (drivers) print_drivers();
  if (strategies) print_strategies();
  if (config) print_config();
  if (topology) print_topology();
  return 0;
}
