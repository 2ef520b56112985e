// Cartesian process topologies (MPI-3.1 chapter 7): MPI_Dims_create,
// MPI_Cart_create/get/rank/coords/shift/sub/map, MPI_Cartdim_get,
// MPI_Topo_test.
//
// A Cartesian communicator is an ordinary communicator (made by splitting
// the old one: ranks beyond the grid get MPI_COMM_NULL) plus a grid
// description kept here, keyed by the communicator handle (handles are
// never reused, see comm.cpp). Ranks are laid out in row-major order, the
// last dimension varying fastest, as the standard requires. `reorder` is
// accepted and ignored: the engine has no placement information that would
// make another numbering better (every rank keeps its old rank).
#include <algorithm>
#include <map>
#include <mutex>
#include <vector>

#include "mpi_layer/mpi_impl.hpp"

namespace nmad::mpi {
namespace {

struct cart {
  std::vector<int> dims;
  std::vector<int> periods;  // 0/1
};

std::mutex& topo_mu() {
  static std::mutex m;
  return m;
}
std::map<MPI_Comm, cart>& carts() {
  static std::map<MPI_Comm, cart> m;
  return m;
}

// Copies the grid of comm into out; false if comm has no Cartesian topology.
bool cart_of(MPI_Comm comm, cart& out) {
  std::lock_guard g(topo_mu());
  auto it = carts().find(comm);
  if (it == carts().end()) return false;
  out = it->second;
  return true;
}

int grid_size(const std::vector<int>& dims) {
  long long n = 1;
  for (int d : dims) n *= d;
  return n > 0x7fffffff ? -1 : static_cast<int>(n);
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
int need_cart(const char* fn, MPI_Comm comm, comm_obj*& c, cart& t) {
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  c = lookup_comm(comm);
  if (!c) return mpi_raise_handle(fn, comm, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm));
  if (!cart_of(comm, t)) return mpi_raise(fn, c, MPI_ERR_TOPOLOGY, "communicator has no Cartesian topology");
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

void attach(MPI_Comm comm, cart t) {
  std::lock_guard g(topo_mu());
  carts()[comm] = std::move(t);
}

}  // namespace

void copy_topology(MPI_Comm from, MPI_Comm to) {
  std::lock_guard g(topo_mu());
  auto it = carts().find(from);
  if (it != carts().end()) carts()[to] = it->second;
}

}  // namespace nmad::mpi

using namespace nmad::mpi;

extern "C" {

int PMPI_Dims_create(int nnodes, int ndims, int dims[]) {
  const char* fn = "MPI_Dims_create";
  if (nnodes <= 0) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "nnodes " + std::to_string(nnodes) + " <= 0");
  if (ndims < 0) return mpi_raise(fn, nullptr, MPI_ERR_DIMS, "negative ndims");
  if (ndims > 0 && !dims) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null dims");
  long long fixed = 1;
  int free_dims = 0;
  for (int i = 0; i < ndims; ++i) {
    if (dims[i] < 0) return mpi_raise(fn, nullptr, MPI_ERR_DIMS, "dims[" + std::to_string(i) + "] < 0");
    if (dims[i] == 0) ++free_dims;
    else fixed *= dims[i];
  }
  if (nnodes % fixed != 0)
    return mpi_raise(fn, nullptr, MPI_ERR_DIMS,
                     std::to_string(nnodes) + " nodes cannot be split over the fixed dimensions (product " +
                         std::to_string(fixed) + ")");
  int rest = static_cast<int>(nnodes / fixed);
  if (free_dims == 0) {
    if (rest != 1)
      return mpi_raise(fn, nullptr, MPI_ERR_DIMS, "the fixed dimensions do not multiply to " + std::to_string(nnodes));
    return MPI_SUCCESS;
  }
  // Prime factors, largest first, each given to the free dimension with the
  // smallest product so far: dimensions as close to each other as possible.
  std::vector<int> factors;
  for (int p = 2; static_cast<long long>(p) * p <= rest; ++p)
    while (rest % p == 0) {
      factors.push_back(p);
      rest /= p;
    }
  if (rest > 1) factors.push_back(rest);
  std::sort(factors.rbegin(), factors.rend());
  std::vector<int> got(free_dims, 1);
  for (int f : factors) *std::min_element(got.begin(), got.end()) *= f;
  std::sort(got.rbegin(), got.rend());  // non-increasing, as the standard asks
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
  if (*comm_cart != MPI_COMM_NULL) attach(*comm_cart, std::move(t));
  return MPI_SUCCESS;
}

int PMPI_Topo_test(MPI_Comm comm, int* status) {
  const char* fn = "MPI_Topo_test";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  comm_obj* c = lookup_comm(comm);
  if (!c) return mpi_raise_handle(fn, comm, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm));
  if (!status) return mpi_raise(fn, c, MPI_ERR_ARG, "null status");
  cart t;
  *status = cart_of(comm, t) ? MPI_CART : MPI_UNDEFINED;
  return MPI_SUCCESS;
}

int PMPI_Cartdim_get(MPI_Comm comm, int* ndims) {
  comm_obj* c;
  cart t;
  if (int e = need_cart("MPI_Cartdim_get", comm, c, t)) return e;
  if (!ndims) return mpi_raise("MPI_Cartdim_get", c, MPI_ERR_ARG, "null ndims");
  *ndims = static_cast<int>(t.dims.size());
  return MPI_SUCCESS;
}

int PMPI_Cart_get(MPI_Comm comm, int maxdims, int dims[], int periods[], int coords[]) {
  comm_obj* c;
  cart t;
  if (int e = need_cart("MPI_Cart_get", comm, c, t)) return e;
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
  cart t;
  if (int e = need_cart("MPI_Cart_rank", comm, c, t)) return e;
  if (!rank || (!coords && !t.dims.empty())) return mpi_raise("MPI_Cart_rank", c, MPI_ERR_ARG, "null argument");
  const int r = rank_of(t, coords);
  if (r < 0) return mpi_raise("MPI_Cart_rank", c, MPI_ERR_ARG, "coordinates outside a non-periodic dimension");
  *rank = r;
  return MPI_SUCCESS;
}

int PMPI_Cart_coords(MPI_Comm comm, int rank, int maxdims, int coords[]) {
  comm_obj* c;
  cart t;
  if (int e = need_cart("MPI_Cart_coords", comm, c, t)) return e;
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
  cart t;
  if (int e = need_cart("MPI_Cart_shift", comm, c, t)) return e;
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
  cart t;
  if (int e = need_cart("MPI_Cart_sub", comm, c, t)) return e;
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
  attach(*newcomm, std::move(sub));  // all dims dropped: a 0-dimensional grid of one process
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
