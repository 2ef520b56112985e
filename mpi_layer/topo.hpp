#pragma once
// Process topologies, private to the MPI layer (MPI-3.1 chapter 7).
//
// A topology is attached to an ordinary intracommunicator, keyed by its
// handle (handles are never reused, see comm.cpp), and never changes once
// attached: readers get a shared pointer to an immutable object, so a
// neighbourhood collective can use it without holding any lock.
//   topo.cpp        the registry, Cartesian topologies, Dims_create, Topo_test
//   topo_graph.cpp  graph and distributed-graph topologies
//   coll/neighbor.cpp  neighbourhood collectives over all three kinds
// Ranks are never reordered (`reorder` is accepted and ignored): the engine
// has no placement information that would make another numbering better.
#include <memory>
#include <vector>

#include "mpi_layer/mpi_impl.hpp"

namespace nmad::coll {
class schedule;
}

namespace nmad::mpi {

struct topology {
  enum class kind { cart, graph, dist_graph };
  kind k = kind::cart;
  // cart: the grid (row-major, the last dimension varying fastest); zero
  // dimensions is a grid of one process.
  std::vector<int> dims;
  std::vector<int> periods;  // 0/1
  // graph: the whole graph as given to MPI_Graph_create (index[i] = end of
  // node i's edges in `edges`).
  std::vector<int> index;
  std::vector<int> edges;
  bool symmetric = true;  // as many edges a->b as b->a for every pair (neighbourhood collectives need it)
  // dist_graph: this process's edges only, in the order MPI_Dist_graph_neighbors
  // reports them; weights empty when unweighted.
  std::vector<int> sources, source_weights;
  std::vector<int> destinations, dest_weights;
  bool weighted = false;
};

// The topology of comm, or null if it has none. Thread-safe.
std::shared_ptr<const topology> topology_of(MPI_Comm comm);
// Attaches t to a communicator that has no topology yet. Thread-safe.
void attach_topology(MPI_Comm comm, topology t);

// The neighbours of `rank` as neighbourhood collectives see them (MPI-3.1
// 7.6): block k of the receive buffer comes from sources[k], block k of the
// send buffer goes to destinations[k]. Cartesian: for each dimension the -1
// then the +1 neighbour (MPI_PROC_NULL off a non-periodic edge); graph:
// MPI_Graph_neighbors order for both; distributed graph: its sources and
// destinations. recv_tags/send_tags: the tag of each block's message (a
// small integer). Cartesian messages carry their direction, so that what a
// process sends towards -1 is what its -1 neighbour receives from +1 even
// when both are the same process (periodic dimensions of size 1 or 2);
// other kinds use one tag and match repeated edges in order.
struct neighbourhood {
  std::vector<int> sources, destinations;
  std::vector<int> recv_tags, send_tags;
};
neighbourhood neighbours_of(const topology& t, int rank);

}  // namespace nmad::mpi
