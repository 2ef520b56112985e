// Which communicators get hierarchical collectives, and with what levels
// (how a hierarchical collective runs: hierarchy.hpp builds its schedules).
//
// Levels: the hosts of the communicator's ranks (host name and boot id, or
// NMAD_EMULATED_HOSTS), then inside a host the package and the NUMA node
// each rank's binding lies in (the rules of MPI_COMM_TYPE_HW_GUIDED:
// NMAD_HW_BINDING, synthetic topologies). They are learnt once in MPI_Init
// by an allgather over MPI_COMM_WORLD of a 64-bit hash of each host
// identity and the two object labels (two hosts whose hashes collide would
// only be treated as one host: the algorithms stay correct). A level is
// used on a communicator when it divides its ranks (coll::choose_levels):
// every rank lies in one object of it (a rank bound to no single package
// leaves the package and NUMA levels out) and some part gets split into
// parts of which one holds several ranks.
// NMAD_COLL_HIER selects per collective (docs/CONFIGURATION.md):
//   auto (default)  hierarchical bcast and allreduce (and their
//                   non-blocking forms), and reduce when the flat binomial
//                   tree to its root would cross the outermost level more
//                   often than once per part but one (ranks dealt round
//                   robin over hosts; in blocks it already crosses that
//                   little); barrier flat: its messages carry no data, so
//                   the hierarchy saves no link bytes and only adds
//                   sequential phases. Measured on the emulated cluster
//                   (BENCHMARKS.md "Hierarchical collectives on an
//                   emulated cluster");
//   on              all four hierarchical, barrier too;
//   off             flat everywhere.
// Reductions with non-commutative ops always stay flat.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "api/nmad/services/config.hpp"
#include "api/nmad/services/log.hpp"
#include "mpi_layer/coll/bindings.hpp"
#include "mpi_layer/coll/shm.hpp"
#include "mpi_layer/mpi_impl.hpp"

namespace nmad::mpi {
namespace {

std::mutex& hier_mu() {
  static std::mutex m;
  return m;
}

// Where each world rank is; empty: unknown (hierarchies off).
struct place {
  int host = 0;
  int package = -1;  // object label, negative: none (spans or absent)
  int numa = -1;
};
std::vector<place>& world_places() {
  static std::vector<place> v;
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

enum class hier_mode { automatic, on, off, invalid };
hier_mode mode() {
  static const hier_mode m = [] {
    std::string v;
    try {
      v = nmad::config::word("NMAD_COLL_HIER");  // a bad value stops MPI_Init before this
    } catch (const std::exception&) {
      return hier_mode::invalid;
    }
    if (v == "on") return hier_mode::on;
    if (v == "off") return hier_mode::off;
    return hier_mode::automatic;
  }();
  return m;
}

bool selected(hier_coll which) {
  switch (mode()) {
    case hier_mode::on: return true;
    case hier_mode::automatic: return which != hier_coll::barrier;
    default: return false;
  }
}

const char* const kLevelNames[] = {"host", "package", "numa"};

}  // namespace

void init_world_hosts() {
  state& s = st();
  world_places().clear();
  if (mode() == hier_mode::invalid) {
    std::fprintf(stderr, "nmad MPI: MPI_Init: NMAD_COLL_HIER=%s is not auto, on or off: collectives stay flat\n",
                 nmad::config::is_set("NMAD_COLL_HIER") ? std::getenv("NMAD_COLL_HIER") : "");
    return;
  }
  // (Learnt with NMAD_COLL_HIER=off too: the shared-memory collectives
  // need to know which communicators live on one host.)
  if (s.world_size < 2) return;
  std::string id, detail;
  // A bad NMAD_EMULATED_HOSTS or NMAD_HW_BINDING is raised by the calls
  // that use it; here every rank still takes part (with the real identity,
  // or located nowhere) so nobody waits.
  if (!host_identity(id, detail)) id = "unknown";
  std::int64_t mine[3] = {static_cast<std::int64_t>(fnv1a(id)), -1, -1};
  int package = -1, numa = -1;
  if (hw_locate_self(package, numa, detail)) mine[1] = package, mine[2] = numa;
  comm_obj* world = lookup_comm(MPI_COMM_WORLD);
  std::vector<std::byte> all;
  if (!world || comm_allgather(*world, mine, sizeof mine, all, detail) != MPI_SUCCESS) {
    log_write(log_level::warn, "mpi", "could not learn the ranks' hosts (" + detail + "): collectives stay flat");
    return;
  }
  std::map<std::int64_t, int> number;
  std::vector<place> places(static_cast<std::size_t>(s.world_size));
  for (int r = 0; r < s.world_size; ++r) {
    std::int64_t v[3];
    std::memcpy(v, all.data() + static_cast<std::size_t>(r) * sizeof v, sizeof v);
    place& p = places[static_cast<std::size_t>(r)];
    p.host = number.emplace(v[0], static_cast<int>(number.size())).first->second;
    p.package = v[1] < 0 ? -1 : static_cast<int>(v[1]);
    p.numa = v[2] < 0 ? -1 : static_cast<int>(v[2]);
  }
  world_places() = std::move(places);
  // The world's shared-memory area now, while every rank is here anyway:
  // MPI_Ibarrier uses an area only once it exists (its set-up is an
  // exchange a non-blocking call must not wait for), and a program whose
  // first collective on MPI_COMM_WORLD is an Ibarrier polled with MPI_Test
  // (graph codes) would otherwise never get one.
  try {
    shmcoll::area_of(*world);
  } catch (const std::exception& e) {
    log_write(log_level::warn, "mpi", std::string("no shared-memory collectives on MPI_COMM_WORLD: ") + e.what());
  }
}

bool comm_on_one_host(const comm_obj& c) {
  const std::vector<place>& wp = world_places();
  if (c.inter || wp.empty() || c.world_of.empty()) return false;
  const int host = wp[static_cast<std::size_t>(c.world_of[0])].host;
  for (int w : c.world_of)
    if (wp[static_cast<std::size_t>(w)].host != host) return false;
  return true;
}

namespace {

// The levels of c's ranks (null: flat), computed once.
std::shared_ptr<const coll::hierarchy> make_hierarchy(const comm_obj* c) {
  const std::vector<place>& wp = world_places();
  if (c->inter || wp.empty()) return nullptr;
  const int n = static_cast<int>(c->world_of.size());
  std::vector<std::vector<int>> candidates(3, std::vector<int>(static_cast<std::size_t>(n)));
  for (int i = 0; i < n; ++i) {
    const place& p = wp[static_cast<std::size_t>(c->world_of[static_cast<std::size_t>(i)])];
    candidates[0][i] = p.host;
    candidates[1][i] = p.package;
    candidates[2][i] = p.numa;
  }
  coll::chosen_levels chosen = coll::choose_levels(n, candidates);
  auto h = std::make_shared<const coll::hierarchy>(n, std::move(chosen.keys));
  if (!h->splits()) return nullptr;
  if (log_enabled(log_level::info)) {
    std::string names;
    for (int l : chosen.index) names += std::string(names.empty() ? "" : ", ") + kLevelNames[l];
    log_write(log_level::info, "mpi",
              "communicator " + std::to_string(c->handle) + " (" + std::to_string(c->size()) + " ranks): hierarchical " +
                  (mode() == hier_mode::on ? "barrier, bcast, reduce and allreduce" : "bcast, reduce and allreduce") +
                  " over levels " + names);
  }
  return h;
}

}  // namespace

namespace {

// Messages of the flat binomial reduce to `root` that cross between the
// parts of the outermost level (hosts, or the first level that divides).
int binomial_crossings(const coll::hierarchy& h, int root) {
  const int n = h.size();
  int crossings = 0;
  for (int i = 1; i < n; ++i) {  // relative rank i sends to i minus its lowest set bit
    const int from = (i + root) % n, to = ((i & (i - 1)) + root) % n;
    if (h.key(0, from) != h.key(0, to)) ++crossings;
  }
  return crossings;
}

}  // namespace

const coll::hierarchy* comm_hierarchy(comm_obj* c, hier_coll which, int root) {
  if (!selected(which)) return nullptr;
  if (!c->hier_known.load(std::memory_order_acquire)) {
    std::lock_guard g(hier_mu());
    if (!c->hier_known.load(std::memory_order_relaxed)) {
      c->hier = make_hierarchy(c);
      c->hier_known.store(true, std::memory_order_release);
    }
  }
  const coll::hierarchy* h = c->hier.get();
  // auto: a flat binomial reduce whose tree already crosses the outermost
  // level no more often than the hierarchy would (once per part but one:
  // ranks grouped in blocks, the usual placement) stays flat; the
  // hierarchy only adds phases there (measured, BENCHMARKS.md).
  if (h && which == hier_coll::reduce && mode() == hier_mode::automatic &&
      binomial_crossings(*h, root) <= static_cast<int>(h->children(0, 0).size()) - 1)
    return nullptr;
  return h;
}

}  // namespace nmad::mpi
