// Hierarchical collectives in the MPI layer: which communicators get them,
// and their levels (mpi_layer/coll/hierarchy.hpp builds the schedules).
//
// Levels: the hosts of the communicator's ranks (host name and boot id, or
// NMAD_EMULATED_HOSTS), learnt once in MPI_Init by an allgather over
// MPI_COMM_WORLD of a 64-bit hash of each identity (two hosts whose hashes
// collide would only be treated as one host: the algorithms stay correct).
// NMAD_COLL_HIER: `auto` (default) uses hierarchical barrier, bcast,
// reduce and allreduce (and their non-blocking forms) on a communicator
// whose ranks span several hosts with more than one rank on one of them;
// `off` keeps the flat algorithms everywhere. Reductions with
// non-commutative ops always stay flat.
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "core/common/log.hpp"
#include "mpi_layer/mpi_impl.hpp"

namespace nmad::mpi {
namespace {

std::mutex& hier_mu() {
  static std::mutex m;
  return m;
}

std::vector<int>& world_hosts() {
  static std::vector<int> v;  // world rank -> host number; empty: unknown
  return v;
}

std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

enum class hier_mode { automatic, off, invalid };
hier_mode mode() {
  static const hier_mode m = [] {
    const char* v = std::getenv("NMAD_COLL_HIER");
    if (!v || !*v || std::strcmp(v, "auto") == 0 || std::strcmp(v, "on") == 0) return hier_mode::automatic;
    if (std::strcmp(v, "off") == 0) return hier_mode::off;
    return hier_mode::invalid;
  }();
  return m;
}

}  // namespace

void init_world_hosts() {
  state& s = st();
  world_hosts().clear();
  if (mode() == hier_mode::invalid) {
    std::fprintf(stderr, "nmad MPI: MPI_Init: NMAD_COLL_HIER=%s is not auto, on or off: collectives stay flat\n",
                 std::getenv("NMAD_COLL_HIER"));
    return;
  }
  if (s.world_size < 2 || mode() == hier_mode::off) return;
  std::string id, detail;
  // A bad NMAD_EMULATED_HOSTS is raised by the calls that use it; here every
  // rank still takes part (with the real identity) so nobody waits.
  if (!host_identity(id, detail)) id = "unknown";
  const std::uint64_t mine = fnv1a(id);
  comm_obj* world = lookup_comm(MPI_COMM_WORLD);
  std::vector<std::byte> all;
  if (!world || comm_allgather(*world, &mine, sizeof mine, all, detail) != MPI_SUCCESS) {
    log_write(log_level::warn, "mpi", "could not learn the ranks' hosts (" + detail + "): collectives stay flat");
    return;
  }
  std::map<std::uint64_t, int> number;
  std::vector<int> hosts(static_cast<std::size_t>(s.world_size));
  for (int r = 0; r < s.world_size; ++r) {
    std::uint64_t h;
    std::memcpy(&h, all.data() + static_cast<std::size_t>(r) * sizeof h, sizeof h);
    hosts[r] = number.emplace(h, static_cast<int>(number.size())).first->second;
  }
  world_hosts() = std::move(hosts);
}

const coll::hierarchy* comm_hierarchy(comm_obj* c) {
  std::lock_guard g(hier_mu());
  if (c->hier_known) return c->hier.get();
  c->hier_known = true;
  const std::vector<int>& wh = world_hosts();
  if (c->inter || wh.empty()) return nullptr;
  std::vector<int> keys(c->world_of.size());
  for (std::size_t i = 0; i < keys.size(); ++i) keys[i] = wh[static_cast<std::size_t>(c->world_of[i])];
  const int n = static_cast<int>(keys.size());
  std::vector<std::vector<int>> levels;
  levels.push_back(std::move(keys));
  auto h = std::make_shared<const coll::hierarchy>(n, std::move(levels));
  if (!h->splits()) return nullptr;
  if (log_enabled(log_level::info))
    log_write(log_level::info, "mpi",
              "communicator " + std::to_string(c->handle) + " (" + std::to_string(c->size()) +
                  " ranks): hierarchical barrier, bcast, reduce and allreduce over its hosts");
  c->hier = std::move(h);
  return c->hier.get();
}

}  // namespace nmad::mpi
