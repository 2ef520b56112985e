// Cartesian process topologies (MPI-3.1 chapter 7): MPI_Dims_create,
// MPI_Cart_create/get/rank/coords/shift/sub/map, MPI_Cartdim_get,
// MPI_Topo_test; and the topology registry every kind shares (topo.hpp).
//
// A Cartesian communicator is an ordinary communicator (made by splitting
// the old one: ranks beyond the grid get MPI_COMM_NULL) plus a grid
// description attached to its handle. Ranks are laid out in row-major
// order, the last dimension varying fastest, as the standard requires.
// `reorder` is accepted and ignored (every rank keeps its old rank).
#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <mutex>
#include <vector>

#include "mpi_layer/mpi_impl.hpp"
#include "mpi_layer/topo.hpp"

namespace nmad::mpi {
namespace {

std::mutex& topo_mu() {
  static std::mutex m;
  return m;
}
std::map<MPI_Comm, std::shared_ptr<const topology>>& topologies() {
  static auto* m = new std::map<MPI_Comm, std::shared_ptr<const topology>>();  // never destroyed
  return *m;
}

using cart = topology;

int grid_size(const std::vector<int>& dims) {
  long long n = 1;
  for (int d : dims) {
    n *= d;
    if (n > INT_MAX) return -1;
  }
  return static_cast<int>(n);
}

void coords_of(const cart& t, int rank, int* coords, int maxdims) {
  int rest = rank;
  const int n = static_cast<int>(t.dims.size());
  for (int i = n - 1; i >= 0; --i) {
    const int c = rest % t.dims[i];
    rest /= t.dims[i];
    if (i < maxdims) coords[i] = c;
  }
}

// The rank at coords (periodic dimensions wrap); -1 if a coordinate is out
// of range in a non-periodic dimension.
int rank_of(const cart& t, const int* coords) {
  int r = 0;
  for (std::size_t i = 0; i < t.dims.size(); ++i) {
    int c = coords[i];
    const int d = t.dims[i];
    if (t.periods[i]) c = ((c % d) + d) % d;
    else if (c < 0 || c >= d) return -1;
    r = r * d + c;
  }
  return r;
}

// Looks up comm and its grid, raising the right error.
int need_cart(const char* fn, MPI_Comm comm, comm_obj*& c, std::shared_ptr<const cart>& t) {
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  c = lookup_comm(comm);
  if (!c) return mpi_raise_handle(fn, comm, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm));
  t = topology_of(comm);
  if (!t || t->k != topology::kind::cart)
    return mpi_raise(fn, c, MPI_ERR_TOPOLOGY, "communicator has no Cartesian topology");
  return MPI_SUCCESS;
}

int check_dims(const char* fn, comm_obj* c, int ndims, const int* dims, const int* periods) {
  if (ndims < 0) return mpi_raise(fn, c, MPI_ERR_DIMS, "negative ndims " + std::to_string(ndims));
  if (ndims > 0 && (!dims || !periods)) return mpi_raise(fn, c, MPI_ERR_ARG, "null dims or periods");
  for (int i = 0; i < ndims; ++i)
    if (dims[i] <= 0)
      return mpi_raise(fn, c, MPI_ERR_DIMS, "dims[" + std::to_string(i) + "] = " + std::to_string(dims[i]));
  return MPI_SUCCESS;
}

// ---- MPI_Dims_create --------------------------------------------------------
//
// "As close to each other as possible" (MPI-3.1 7.5.2), made precise: among
// every way of writing n as a product of k factors in non-increasing order,
// the one with the smallest difference between the largest and the smallest
// factor; ties go to the larger smallest factor, then the larger second
// smallest, and so on (72 over 2: 9 x 8; over 3: 6 x 4 x 3; 360 over 3:
// 10 x 6 x 6; 98784 over 5: 14 x 14 x 9 x 8 x 7 rather than
// 14 x 12 x 12 x 7 x 7). These are MPICH's answers: its table of 75,000
// cases (test/mpi/topo/baddims.h) and every n <= 3000 in 1 to 6 dimensions
// agree; Open MPI's greedy split gives 12 x 6 for 72. A depth-first search
// over the divisors of n, largest factor first, pruned by the best spread
// found so far, keeps it cheap for any int.

// pow(x, r) saturated at LLONG_MAX.
long long power(long long x, int r) {
  long long p = 1;
  for (int i = 0; i < r; ++i) {
    if (x != 0 && p > LLONG_MAX / x) return LLONG_MAX;
    p *= x;
  }
  return p;
}
// The largest x with x^r <= n (n >= 1, r >= 1).
long long root_floor(long long n, int r) {
  auto x = static_cast<long long>(std::pow(static_cast<double>(n), 1.0 / r));
  if (x < 1) x = 1;
  while (power(x + 1, r) <= n) ++x;
  while (x > 1 && power(x, r) > n) --x;
  return x;
}

class balanced_split {
 public:
  balanced_split(int n, int k) : _k(k), _cur(k) {
    for (long long d = 1; d * d <= n; ++d)
      if (n % d == 0) {
        _divisors.push_back(static_cast<int>(d));
        if (d * d != n) _divisors.push_back(static_cast<int>(n / d));
      }
    std::sort(_divisors.begin(), _divisors.end());
    search(n, 0, n);
  }
  const std::vector<int>& result() const { return _best; }

 private:
  // Chooses factor `pos` (<= maxf) of the remaining product `rest`.
  void search(int rest, int pos, int maxf) {
    const int left = _k - pos;
    if (left == 1) {
      if (rest > maxf) return;
      _cur[pos] = rest;
      const long long spread = static_cast<long long>(_cur[0]) - rest;
      if (_best.empty() || spread < _best_spread ||
          (spread == _best_spread && std::lexicographical_compare(_best.rbegin(), _best.rend(), _cur.rbegin(), _cur.rend()))) {
        _best = _cur;
        _best_spread = spread;
      }
      return;
    }
    // The largest of `left` factors of rest is at least its left-th root.
    long long lo = root_floor(rest, left);
    if (power(lo, left) < rest) ++lo;
    for (auto it = std::lower_bound(_divisors.begin(), _divisors.end(), lo); it != _divisors.end(); ++it) {
      const int d = *it;
      if (d > maxf || d > rest) break;
      if (rest % d != 0) continue;
      // The smallest factor is at most the (left-1)-th root of what remains,
      // and that bound only shrinks as d grows: stop once it cannot win.
      const long long largest = pos == 0 ? d : _cur[0];
      const long long min_bound = root_floor(rest / d, left - 1);
      if (!_best.empty() && largest - min_bound > _best_spread) break;
      _cur[pos] = d;
      search(rest / d, pos + 1, d);
    }
  }

  int _k;
  std::vector<int> _divisors;
  std::vector<int> _cur, _best;
  long long _best_spread = LLONG_MAX;
};

}  // namespace

std::shared_ptr<const topology> topology_of(MPI_Comm comm) {
  std::lock_guard g(topo_mu());
  auto it = topologies().find(comm);
  return it == topologies().end() ? nullptr : it->second;
}

void attach_topology(MPI_Comm comm, topology t) {
  auto p = std::make_shared<const topology>(std::move(t));
  std::lock_guard g(topo_mu());
  topologies()[comm] = std::move(p);
}

void copy_topology(MPI_Comm from, MPI_Comm to) {
  std::lock_guard g(topo_mu());
  auto it = topologies().find(from);
  if (it != topologies().end()) topologies()[to] = it->second;  // immutable: shared
}

neighbourhood neighbours_of(const topology& t, int rank) {
  neighbourhood n;
  switch (t.k) {
    case topology::kind::cart: {
      std::vector<int> co(t.dims.size());
      coords_of(t, rank, co.data(), static_cast<int>(co.size()));
      for (std::size_t i = 0; i < t.dims.size(); ++i) {
        const int mine = co[i];
        const int tag_minus = static_cast<int>(2 * i), tag_plus = tag_minus + 1;
        co[i] = mine - 1;
        const int lower = rank_of(t, co.data());
        co[i] = mine + 1;
        const int upper = rank_of(t, co.data());
        co[i] = mine;
        n.sources.push_back(lower < 0 ? MPI_PROC_NULL : lower);
        n.sources.push_back(upper < 0 ? MPI_PROC_NULL : upper);
        n.destinations = n.sources;
        // Block 2i is sent towards -1 and received from -1, which sent it
        // towards +1: tags name the direction of travel.
        n.send_tags.push_back(tag_minus);
        n.send_tags.push_back(tag_plus);
        n.recv_tags.push_back(tag_plus);
        n.recv_tags.push_back(tag_minus);
      }
      break;
    }
    case topology::kind::graph: {
      const int begin = rank == 0 ? 0 : t.index[rank - 1];
      n.sources.assign(t.edges.begin() + begin, t.edges.begin() + t.index[rank]);
      n.destinations = n.sources;
      break;
    }
    case topology::kind::dist_graph:
      n.sources = t.sources;
      n.destinations = t.destinations;
      break;
  }
  if (n.recv_tags.empty()) n.recv_tags.assign(n.sources.size(), 0);
  if (n.send_tags.empty()) n.send_tags.assign(n.destinations.size(), 0);
  return n;
}

}  // namespace nmad::mpi

using namespace nmad::mpi;

extern "C" {

int PMPI_Dims_create(int nnodes, int ndims, int dims[]) {
  const char* fn = "MPI_Dims_create";
  if (nnodes <= 0) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "nnodes " + std::to_string(nnodes) + " <= 0");
  if (ndims < 0) return mpi_raise(fn, nullptr, MPI_ERR_DIMS, "negative ndims " + std::to_string(ndims));
  if (ndims > 0 && !dims) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null dims");
  long long fixed = 1;
  int free_dims = 0;
  for (int i = 0; i < ndims; ++i) {
    if (dims[i] < 0)
      return mpi_raise(fn, nullptr, MPI_ERR_DIMS, "dims[" + std::to_string(i) + "] = " + std::to_string(dims[i]));
    if (dims[i] == 0) ++free_dims;
    else if ((fixed *= dims[i]) > nnodes) fixed = static_cast<long long>(nnodes) + 1;  // cannot divide: stop growing
  }
  if (nnodes % fixed != 0)
    return mpi_raise(fn, nullptr, MPI_ERR_DIMS,
                     std::to_string(nnodes) + " nodes cannot be split over the fixed dimensions (their product " +
                         (fixed > nnodes ? std::string("exceeds it") : std::to_string(fixed)) + ")");
  const int rest = static_cast<int>(nnodes / fixed);
  if (free_dims == 0) {
    if (rest != 1)
      return mpi_raise(fn, nullptr, MPI_ERR_DIMS,
                       "the fixed dimensions multiply to " + std::to_string(fixed) + ", not " + std::to_string(nnodes));
    return MPI_SUCCESS;
  }
  const std::vector<int> got = balanced_split(rest, free_dims).result();  // non-increasing
  for (int i = 0, k = 0; i < ndims; ++i)
    if (dims[i] == 0) dims[i] = got[k++];
  return MPI_SUCCESS;
}

int PMPI_Cart_create(MPI_Comm comm_old, int ndims, const int dims[], const int periods[], int reorder,
                     MPI_Comm* comm_cart) {
  const char* fn = "MPI_Cart_create";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  comm_obj* c = lookup_comm(comm_old);
  if (!c) return mpi_raise_handle(fn, comm_old, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm_old));
  if (c->inter) return mpi_raise(fn, c, MPI_ERR_COMM, "intercommunicators cannot have a topology");
  if (!comm_cart) return mpi_raise(fn, c, MPI_ERR_ARG, "null comm_cart");
  if (int e = check_dims(fn, c, ndims, dims, periods)) return e;
  cart t;
  t.k = topology::kind::cart;
  t.dims.assign(dims, dims + ndims);
  for (int i = 0; i < ndims; ++i) t.periods.push_back(periods[i] ? 1 : 0);
  const int n = grid_size(t.dims);
  if (n < 0 || n > c->size())
    return mpi_raise(fn, c, MPI_ERR_DIMS,
                     "the grid needs " + std::to_string(n) + " processes, the communicator has " +
                         std::to_string(c->size()));
  (void)reorder;
  const int rank = c->rank;
  const int err = PMPI_Comm_split(comm_old, rank < n ? 0 : MPI_UNDEFINED, rank, comm_cart);
  if (err != MPI_SUCCESS) return err;
  if (*comm_cart != MPI_COMM_NULL) attach_topology(*comm_cart, std::move(t));
  return MPI_SUCCESS;
}

int PMPI_Topo_test(MPI_Comm comm, int* status) {
  const char* fn = "MPI_Topo_test";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  comm_obj* c = lookup_comm(comm);
  if (!c) return mpi_raise_handle(fn, comm, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm));
  if (!status) return mpi_raise(fn, c, MPI_ERR_ARG, "null status");
  const auto t = topology_of(comm);
  *status = !t                                   ? MPI_UNDEFINED
            : t->k == topology::kind::cart       ? MPI_CART
            : t->k == topology::kind::graph      ? MPI_GRAPH
                                                 : MPI_DIST_GRAPH;
  return MPI_SUCCESS;
}

int PMPI_Cartdim_get(MPI_Comm comm, int* ndims) {
  comm_obj* c;
  std::shared_ptr<const cart> tp;
  if (int e = need_cart("MPI_Cartdim_get", comm, c, tp)) return e;
  const cart& t = *tp;
  if (!ndims) return mpi_raise("MPI_Cartdim_get", c, MPI_ERR_ARG, "null ndims");
  *ndims = static_cast<int>(t.dims.size());
  return MPI_SUCCESS;
}

int PMPI_Cart_get(MPI_Comm comm, int maxdims, int dims[], int periods[], int coords[]) {
  comm_obj* c;
  std::shared_ptr<const cart> tp;
  if (int e = need_cart("MPI_Cart_get", comm, c, tp)) return e;
  const cart& t = *tp;
  const int n = std::min<int>(maxdims, static_cast<int>(t.dims.size()));
  if (n > 0 && (!dims || !periods || !coords)) return mpi_raise("MPI_Cart_get", c, MPI_ERR_ARG, "null array");
  for (int i = 0; i < n; ++i) {
    dims[i] = t.dims[i];
    periods[i] = t.periods[i];
  }
  if (n > 0) coords_of(t, c->rank, coords, n);
  return MPI_SUCCESS;
}

int PMPI_Cart_rank(MPI_Comm comm, const int coords[], int* rank) {
  comm_obj* c;
  std::shared_ptr<const cart> tp;
  if (int e = need_cart("MPI_Cart_rank", comm, c, tp)) return e;
  const cart& t = *tp;
  if (!rank || (!coords && !t.dims.empty())) return mpi_raise("MPI_Cart_rank", c, MPI_ERR_ARG, "null argument");
  const int r = rank_of(t, coords);
  if (r < 0) return mpi_raise("MPI_Cart_rank", c, MPI_ERR_ARG, "coordinates outside a non-periodic dimension");
  *rank = r;
  return MPI_SUCCESS;
}

int PMPI_Cart_coords(MPI_Comm comm, int rank, int maxdims, int coords[]) {
  comm_obj* c;
  std::shared_ptr<const cart> tp;
  if (int e = need_cart("MPI_Cart_coords", comm, c, tp)) return e;
  const cart& t = *tp;
  if (rank < 0 || rank >= c->size())
    return mpi_raise("MPI_Cart_coords", c, MPI_ERR_RANK, "rank " + std::to_string(rank) + " out of range");
  if (maxdims < static_cast<int>(t.dims.size()))
    return mpi_raise("MPI_Cart_coords", c, MPI_ERR_ARG,
                     "maxdims " + std::to_string(maxdims) + " < ndims " + std::to_string(t.dims.size()));
  if (!coords && !t.dims.empty()) return mpi_raise("MPI_Cart_coords", c, MPI_ERR_ARG, "null coords");
  coords_of(t, rank, coords, maxdims);
  return MPI_SUCCESS;
}

int PMPI_Cart_shift(MPI_Comm comm, int direction, int disp, int* rank_source, int* rank_dest) {
  comm_obj* c;
  std::shared_ptr<const cart> tp;
  if (int e = need_cart("MPI_Cart_shift", comm, c, tp)) return e;
  const cart& t = *tp;
  if (direction < 0 || direction >= static_cast<int>(t.dims.size()))
    return mpi_raise("MPI_Cart_shift", c, MPI_ERR_ARG, "direction " + std::to_string(direction) + " out of range");
  if (!rank_source || !rank_dest) return mpi_raise("MPI_Cart_shift", c, MPI_ERR_ARG, "null rank_source/rank_dest");
  std::vector<int> co(t.dims.size());
  coords_of(t, c->rank, co.data(), static_cast<int>(co.size()));
  const int mine = co[direction];
  co[direction] = mine + disp;
  const int d = rank_of(t, co.data());
  co[direction] = mine - disp;
  const int s = rank_of(t, co.data());
  *rank_dest = d < 0 ? MPI_PROC_NULL : d;
  *rank_source = s < 0 ? MPI_PROC_NULL : s;
  return MPI_SUCCESS;
}

int PMPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm* newcomm) {
  comm_obj* c;
  std::shared_ptr<const cart> tp;
  if (int e = need_cart("MPI_Cart_sub", comm, c, tp)) return e;
  const cart& t = *tp;
  if (!newcomm || (!remain_dims && !t.dims.empty()))
    return mpi_raise("MPI_Cart_sub", c, MPI_ERR_ARG, "null argument");
  std::vector<int> co(t.dims.size());
  coords_of(t, c->rank, co.data(), static_cast<int>(co.size()));
  // Members with the same coordinates in the dropped dimensions share a
  // sub-grid; the key (the old rank) keeps row-major order inside it.
  int color = 0;
  cart sub;
  for (std::size_t i = 0; i < t.dims.size(); ++i) {
    if (remain_dims[i]) {
      sub.dims.push_back(t.dims[i]);
      sub.periods.push_back(t.periods[i]);
    } else {
      color = color * t.dims[i] + co[i];
    }
  }
  const int err = PMPI_Comm_split(comm, color, c->rank, newcomm);
  if (err != MPI_SUCCESS) return err;
  // Every dimension kept: the same grid; every one dropped (or none to
  // begin with): a 0-dimensional grid of one process (MPI-3.1 7.5.7).
  attach_topology(*newcomm, std::move(sub));
  return MPI_SUCCESS;
}

int PMPI_Cart_map(MPI_Comm comm, int ndims, const int dims[], const int periods[], int* newrank) {
  const char* fn = "MPI_Cart_map";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  comm_obj* c = lookup_comm(comm);
  if (!c) return mpi_raise_handle(fn, comm, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm));
  if (!newrank) return mpi_raise(fn, c, MPI_ERR_ARG, "null newrank");
  if (int e = check_dims(fn, c, ndims, dims, periods)) return e;
  const int n = grid_size(std::vector<int>(dims, dims + ndims));
  if (n < 0 || n > c->size()) return mpi_raise(fn, c, MPI_ERR_DIMS, "the grid is larger than the communicator");
  *newrank = c->rank < n ? c->rank : MPI_UNDEFINED;
  return MPI_SUCCESS;
}

}  // extern "C"

#pragma weak MPI_Dims_create = PMPI_Dims_create
#pragma weak MPI_Cart_create = PMPI_Cart_create
#pragma weak MPI_Topo_test = PMPI_Topo_test
#pragma weak MPI_Cartdim_get = PMPI_Cartdim_get
#pragma weak MPI_Cart_get = PMPI_Cart_get
#pragma weak MPI_Cart_rank = PMPI_Cart_rank
#pragma weak MPI_Cart_coords = PMPI_Cart_coords
#pragma weak MPI_Cart_shift = PMPI_Cart_shift
#pragma weak MPI_Cart_sub = PMPI_Cart_sub
#pragma weak MPI_Cart_map = PMPI_Cart_map
