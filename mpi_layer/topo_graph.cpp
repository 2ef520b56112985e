// Graph and distributed-graph topologies (MPI-3.1 7.5.3, 7.5.4, 7.5.5):
// MPI_Graph_create/get/map, MPI_Graphdims_get, MPI_Graph_neighbors(_count),
// MPI_Dist_graph_create(_adjacent), MPI_Dist_graph_neighbors(_count).
//
// Both are ordinary communicators with a topology attached (topo.hpp).
// A graph topology keeps the whole graph, which every process passes
// identically; self-loops and repeated edges are kept as given. A
// distributed graph keeps only this process's in- and out-edges:
// MPI_Dist_graph_create_adjacent has them already; MPI_Dist_graph_create,
// where any process may give any edge, sends every edge (s -> d, w) to s as
// an out-edge and to d as an in-edge with one alltoall of counts and one
// alltoallv over comm_old; each process lists the edges it receives in the
// order (giving rank, position in that rank's input), which is the order
// MPI_Dist_graph_neighbors reports (the standard leaves it open).
//
// Arguments of the distributed-graph constructors differ between processes,
// so a bad one at one process must not leave the others waiting in the
// exchange: every process first checks its own, then all agree (one
// allreduce) and, if any failed, each returns an error (its own, or
// MPI_ERR_ARG naming the first failing rank). `info` is checked and
// otherwise unused; `reorder` is ignored (ranks are kept).
#include <algorithm>
#include <climits>
#include <map>
#include <string>
#include <vector>

#include "mpi_layer/mpi_impl.hpp"
#include "mpi_layer/topo.hpp"

namespace nmad::mpi {
namespace {

struct arg_error {
  int code = MPI_SUCCESS;
  std::string detail;
  bool set(int c, std::string d) {
    if (code == MPI_SUCCESS) {
      code = c;
      detail = std::move(d);
    }
    return false;
  }
};

int open_comm(const char* fn, MPI_Comm comm, comm_obj*& c) {
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  c = lookup_comm(comm);
  if (!c) return mpi_raise_handle(fn, comm, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm));
  return MPI_SUCCESS;
}

// Looks up comm and its topology of kind k, raising the right error.
int need(const char* fn, MPI_Comm comm, topology::kind k, comm_obj*& c, std::shared_ptr<const topology>& t) {
  if (int e = open_comm(fn, comm, c)) return e;
  t = topology_of(comm);
  if (!t || t->k != k)
    return mpi_raise(fn, c, MPI_ERR_TOPOLOGY,
                     k == topology::kind::graph ? "communicator has no graph topology"
                                                : "communicator has no distributed graph topology");
  return MPI_SUCCESS;
}

// A graph communicator and one of its nodes (MPI_ERR_RANK otherwise).
int need_graph_node(const char* fn, MPI_Comm comm, int rank, comm_obj*& c, std::shared_ptr<const topology>& t) {
  if (int e = need(fn, comm, topology::kind::graph, c, t)) return e;
  const int n = static_cast<int>(t->index.size());
  if (rank < 0 || rank >= n)
    return mpi_raise(fn, c, MPI_ERR_RANK,
                     "rank " + std::to_string(rank) + " is not a node (0.." + std::to_string(n - 1) + ")");
  return MPI_SUCCESS;
}

// The graph of MPI_Graph_create/MPI_Graph_map, checked against a group of
// `size` processes.
int check_graph(const char* fn, comm_obj* c, int nnodes, const int* index, const int* edges) {
  const int size = c->size();
  if (nnodes < 0 || nnodes > size)
    return mpi_raise(fn, c, MPI_ERR_ARG,
                     "nnodes " + std::to_string(nnodes) + " outside 0.." + std::to_string(size) +
                         " (the communicator's size)");
  if (nnodes > 0 && !index) return mpi_raise(fn, c, MPI_ERR_ARG, "null index");
  for (int i = 0; i < nnodes; ++i) {
    const int prev = i == 0 ? 0 : index[i - 1];
    if (index[i] < prev)
      return mpi_raise(fn, c, MPI_ERR_ARG,
                       "index[" + std::to_string(i) + "] = " + std::to_string(index[i]) +
                           (i == 0 ? " is negative" : " < index[" + std::to_string(i - 1) + "] = " + std::to_string(prev)));
  }
  const int nedges = nnodes > 0 ? index[nnodes - 1] : 0;
  if (nedges > 0 && !edges) return mpi_raise(fn, c, MPI_ERR_ARG, "null edges");
  for (int j = 0; j < nedges; ++j)
    if (edges[j] < 0 || edges[j] >= nnodes)
      return mpi_raise(fn, c, MPI_ERR_ARG,
                       "edges[" + std::to_string(j) + "] = " + std::to_string(edges[j]) + " is not a node (0.." +
                           std::to_string(nnodes - 1) + ")");
  return MPI_SUCCESS;
}

// As many edges a -> b as b -> a for every pair: the graphs on which
// neighbourhood collectives are defined (MPI-3.1 7.6).
bool is_symmetric(const std::vector<int>& index, const std::vector<int>& edges) {
  std::map<std::pair<int, int>, long> balance;
  for (int a = 0, j = 0; a < static_cast<int>(index.size()); ++a)
    for (; j < index[a]; ++j) {
      const int b = edges[j];
      if (a == b) continue;
      balance[{std::min(a, b), std::max(a, b)}] += a < b ? 1 : -1;
    }
  for (const auto& [pair, n] : balance)
    if (n != 0) return false;
  return true;
}

bool is_unweighted(const int* w) { return w == MPI_UNWEIGHTED; }

// Checks `n` ranks of a neighbour list and their weights (when weighted).
bool check_list(arg_error& err, int size, int n, const int* ranks, const int* weights, bool weighted,
                const char* what, const char* wwhat) {
  if (n > 0 && !ranks) return err.set(MPI_ERR_ARG, std::string("null ") + what);
  if (weighted && n > 0 && (!weights || weights == MPI_WEIGHTS_EMPTY))
    return err.set(MPI_ERR_ARG, std::string(wwhat) + " is empty but " + std::to_string(n) + " edge(s) are weighted");
  for (int i = 0; i < n; ++i) {
    if (ranks[i] < 0 || ranks[i] >= size)
      return err.set(MPI_ERR_RANK, std::string(what) + "[" + std::to_string(i) + "] = " + std::to_string(ranks[i]) +
                                       " is not a rank of the " + std::to_string(size) + "-process communicator");
    if (weighted && weights[i] < 0)
      return err.set(MPI_ERR_ARG,
                     std::string(wwhat) + "[" + std::to_string(i) + "] = " + std::to_string(weights[i]) + " is negative");
  }
  return true;
}

void check_info(arg_error& err, MPI_Info info) {
  if (info != MPI_INFO_NULL && !info_get_entries(info))
    err.set(MPI_ERR_INFO, "invalid info handle " + std::to_string(info));
}

// Every process of c learns whether any failed its checks (and the first
// such rank); extra[] values are combined with MPI_MIN on the way. Returns
// the error this process raises, or MPI_SUCCESS if all passed.
int agree(const char* fn, comm_obj* c, const arg_error& err, int* extra, int nextra) {
  std::vector<int> v(1 + nextra);
  v[0] = err.code == MPI_SUCCESS ? INT_MAX : c->rank;
  for (int i = 0; i < nextra; ++i) v[1 + i] = extra[i];
  std::vector<int> all(v.size());
  if (int e = PMPI_Allreduce(v.data(), all.data(), static_cast<int>(v.size()), MPI_INT, MPI_MIN, c->handle)) return e;
  for (int i = 0; i < nextra; ++i) extra[i] = all[1 + i];
  if (err.code != MPI_SUCCESS) return mpi_raise(fn, c, err.code, err.detail);
  if (all[0] != INT_MAX)
    return mpi_raise(fn, c, MPI_ERR_ARG,
                     "rank " + std::to_string(all[0]) + " of the communicator gave invalid arguments (see its error)");
  return MPI_SUCCESS;
}

// A communicator over the same group as c (ranks kept) carrying t.
int make_dist_graph(comm_obj* c, topology t, MPI_Comm* out) {
  if (int e = PMPI_Comm_split(c->handle, 0, c->rank, out)) return e;
  attach_topology(*out, std::move(t));
  return MPI_SUCCESS;
}

}  // namespace
}  // namespace nmad::mpi

using namespace nmad::mpi;

extern "C" {

int PMPI_Graph_create(MPI_Comm comm_old, int nnodes, const int index[], const int edges[], int reorder,
                      MPI_Comm* comm_graph) {
  const char* fn = "MPI_Graph_create";
  comm_obj* c;
  if (int e = open_comm(fn, comm_old, c)) return e;
  if (c->inter) return mpi_raise(fn, c, MPI_ERR_COMM, "intercommunicators cannot have a topology");
  if (!comm_graph) return mpi_raise(fn, c, MPI_ERR_ARG, "null comm_graph");
  if (int e = check_graph(fn, c, nnodes, index, edges)) return e;
  (void)reorder;
  topology t;
  t.k = topology::kind::graph;
  t.index.assign(index, index + nnodes);
  t.edges.assign(edges, edges + (nnodes > 0 ? index[nnodes - 1] : 0));
  t.symmetric = is_symmetric(t.index, t.edges);
  if (int e = PMPI_Comm_split(comm_old, c->rank < nnodes ? 0 : MPI_UNDEFINED, c->rank, comm_graph)) return e;
  if (*comm_graph != MPI_COMM_NULL) attach_topology(*comm_graph, std::move(t));
  return MPI_SUCCESS;
}

int PMPI_Graphdims_get(MPI_Comm comm, int* nnodes, int* nedges) {
  const char* fn = "MPI_Graphdims_get";
  comm_obj* c;
  std::shared_ptr<const topology> t;
  if (int e = need(fn, comm, topology::kind::graph, c, t)) return e;
  if (!nnodes || !nedges) return mpi_raise(fn, c, MPI_ERR_ARG, "null nnodes or nedges");
  *nnodes = static_cast<int>(t->index.size());
  *nedges = static_cast<int>(t->edges.size());
  return MPI_SUCCESS;
}

int PMPI_Graph_get(MPI_Comm comm, int maxindex, int maxedges, int index[], int edges[]) {
  const char* fn = "MPI_Graph_get";
  comm_obj* c;
  std::shared_ptr<const topology> t;
  if (int e = need(fn, comm, topology::kind::graph, c, t)) return e;
  if (maxindex < 0 || maxedges < 0)
    return mpi_raise(fn, c, MPI_ERR_ARG,
                     "negative maxindex " + std::to_string(maxindex) + " or maxedges " + std::to_string(maxedges));
  const int ni = std::min(maxindex, static_cast<int>(t->index.size()));
  const int ne = std::min(maxedges, static_cast<int>(t->edges.size()));
  if ((ni > 0 && !index) || (ne > 0 && !edges)) return mpi_raise(fn, c, MPI_ERR_ARG, "null index or edges");
  std::copy_n(t->index.begin(), ni, index);
  std::copy_n(t->edges.begin(), ne, edges);
  return MPI_SUCCESS;
}

int PMPI_Graph_neighbors_count(MPI_Comm comm, int rank, int* nneighbors) {
  const char* fn = "MPI_Graph_neighbors_count";
  comm_obj* c;
  std::shared_ptr<const topology> t;
  if (int e = need_graph_node(fn, comm, rank, c, t)) return e;
  if (!nneighbors) return mpi_raise(fn, c, MPI_ERR_ARG, "null nneighbors");
  *nneighbors = t->index[rank] - (rank == 0 ? 0 : t->index[rank - 1]);
  return MPI_SUCCESS;
}

int PMPI_Graph_neighbors(MPI_Comm comm, int rank, int maxneighbors, int neighbors[]) {
  const char* fn = "MPI_Graph_neighbors";
  comm_obj* c;
  std::shared_ptr<const topology> t;
  if (int e = need_graph_node(fn, comm, rank, c, t)) return e;
  if (maxneighbors < 0) return mpi_raise(fn, c, MPI_ERR_ARG, "negative maxneighbors " + std::to_string(maxneighbors));
  const int begin = rank == 0 ? 0 : t->index[rank - 1];
  const int k = std::min(maxneighbors, t->index[rank] - begin);
  if (k > 0 && !neighbors) return mpi_raise(fn, c, MPI_ERR_ARG, "null neighbors");
  std::copy_n(t->edges.begin() + begin, k, neighbors);
  return MPI_SUCCESS;
}

int PMPI_Graph_map(MPI_Comm comm, int nnodes, const int index[], const int edges[], int* newrank) {
  const char* fn = "MPI_Graph_map";
  comm_obj* c;
  if (int e = open_comm(fn, comm, c)) return e;
  if (!newrank) return mpi_raise(fn, c, MPI_ERR_ARG, "null newrank");
  if (int e = check_graph(fn, c, nnodes, index, edges)) return e;
  *newrank = c->rank < nnodes ? c->rank : MPI_UNDEFINED;
  return MPI_SUCCESS;
}

int PMPI_Dist_graph_create_adjacent(MPI_Comm comm_old, int indegree, const int sources[], const int sourceweights[],
                                    int outdegree, const int destinations[], const int destweights[], MPI_Info info,
                                    int reorder, MPI_Comm* comm_dist_graph) {
  const char* fn = "MPI_Dist_graph_create_adjacent";
  comm_obj* c;
  if (int e = open_comm(fn, comm_old, c)) return e;
  if (c->inter) return mpi_raise(fn, c, MPI_ERR_COMM, "intercommunicators cannot have a topology");
  if (!comm_dist_graph) return mpi_raise(fn, c, MPI_ERR_ARG, "null comm_dist_graph");
  (void)reorder;
  arg_error err;
  const bool weighted = !is_unweighted(sourceweights) && !is_unweighted(destweights);
  if (indegree < 0 || outdegree < 0)
    err.set(MPI_ERR_ARG, "negative indegree " + std::to_string(indegree) + " or outdegree " + std::to_string(outdegree));
  else if (is_unweighted(sourceweights) != is_unweighted(destweights) &&
           (is_unweighted(sourceweights) ? outdegree : indegree) > 0)
    err.set(MPI_ERR_ARG, is_unweighted(sourceweights) ? "sourceweights is MPI_UNWEIGHTED but destweights is not"
                                                      : "destweights is MPI_UNWEIGHTED but sourceweights is not");
  else if (check_list(err, c->size(), indegree, sources, sourceweights, weighted, "sources", "sourceweights"))
    check_list(err, c->size(), outdegree, destinations, destweights, weighted, "destinations", "destweights");
  check_info(err, info);
  if (int e = agree(fn, c, err, nullptr, 0)) return e;
  topology t;
  t.k = topology::kind::dist_graph;
  t.weighted = weighted;
  t.sources.assign(sources, sources + indegree);
  t.destinations.assign(destinations, destinations + outdegree);
  if (weighted) {
    t.source_weights.assign(sourceweights, sourceweights + indegree);
    t.dest_weights.assign(destweights, destweights + outdegree);
  }
  return make_dist_graph(c, std::move(t), comm_dist_graph);
}

int PMPI_Dist_graph_create(MPI_Comm comm_old, int n, const int sources[], const int degrees[],
                           const int destinations[], const int weights[], MPI_Info info, int reorder,
                           MPI_Comm* comm_dist_graph) {
  const char* fn = "MPI_Dist_graph_create";
  comm_obj* c;
  if (int e = open_comm(fn, comm_old, c)) return e;
  if (c->inter) return mpi_raise(fn, c, MPI_ERR_COMM, "intercommunicators cannot have a topology");
  if (!comm_dist_graph) return mpi_raise(fn, c, MPI_ERR_ARG, "null comm_dist_graph");
  (void)reorder;
  const int size = c->size();
  arg_error err;
  bool weighted = !is_unweighted(weights);
  long long nedges = 0;
  if (n < 0) {
    err.set(MPI_ERR_ARG, "negative n " + std::to_string(n));
  } else if (n > 0 && (!sources || !degrees)) {
    err.set(MPI_ERR_ARG, "null sources or degrees");
  } else {
    for (int i = 0; i < n; ++i) {
      if (degrees[i] < 0) {
        err.set(MPI_ERR_ARG, "degrees[" + std::to_string(i) + "] = " + std::to_string(degrees[i]) + " is negative");
        break;
      }
      nedges += degrees[i];
    }
    if (nedges > INT_MAX / 3) err.set(MPI_ERR_ARG, std::to_string(nedges) + " edges are too many");
    if (err.code == MPI_SUCCESS && check_list(err, size, n, sources, nullptr, false, "sources", ""))
      check_list(err, size, static_cast<int>(nedges), destinations, weights, weighted, "destinations", "weights");
  }
  check_info(err, info);
  // MPI_UNWEIGHTED must be given by all processes or none (MPI-3.1 7.5.4),
  // but one without edges may give anything: those with edges decide.
  int vote = n > 0 ? (weighted ? 0 : 1) : 2;  // MIN: 0 weighted, 1 unweighted, 2 no edges anywhere
  if (int e = agree(fn, c, err, &vote, 1)) return e;
  const bool local_weighted = weighted;
  weighted = vote == 0 || (vote == 2 && weighted);

  // Records (in/out, peer, weight) for each process, in input order.
  enum : int { in_edge = 0, out_edge = 1 };
  std::vector<std::vector<int>> to(size);
  for (int i = 0, k = 0; i < n; ++i)
    for (int j = 0; j < degrees[i]; ++j, ++k) {
      const int s = sources[i], d = destinations[k], w = local_weighted ? weights[k] : 0;
      to[s].insert(to[s].end(), {out_edge, d, w});
      to[d].insert(to[d].end(), {in_edge, s, w});
    }
  std::vector<int> scounts(size), sdispls(size), rcounts(size), rdispls(size), sbuf;
  for (int p = 0; p < size; ++p) {
    scounts[p] = static_cast<int>(to[p].size());
    sdispls[p] = static_cast<int>(sbuf.size());
    sbuf.insert(sbuf.end(), to[p].begin(), to[p].end());
  }
  if (int e = PMPI_Alltoall(scounts.data(), 1, MPI_INT, rcounts.data(), 1, MPI_INT, comm_old)) return e;
  long long total = 0;
  for (int p = 0; p < size; ++p) {
    rdispls[p] = static_cast<int>(total);
    total += rcounts[p];
  }
  if (total > INT_MAX) return mpi_raise(fn, c, MPI_ERR_ARG, "this process has more than INT_MAX/3 edges");
  std::vector<int> rbuf(static_cast<std::size_t>(total) + 1);
  sbuf.push_back(0);  // non-empty buffers even without edges
  if (int e = PMPI_Alltoallv(sbuf.data(), scounts.data(), sdispls.data(), MPI_INT, rbuf.data(), rcounts.data(),
                             rdispls.data(), MPI_INT, comm_old))
    return e;
  topology t;
  t.k = topology::kind::dist_graph;
  t.weighted = weighted;
  for (long long r = 0; r + 2 < total; r += 3) {
    const bool out = rbuf[r] == out_edge;
    (out ? t.destinations : t.sources).push_back(rbuf[r + 1]);
    if (weighted) (out ? t.dest_weights : t.source_weights).push_back(rbuf[r + 2]);
  }
  return make_dist_graph(c, std::move(t), comm_dist_graph);
}

int PMPI_Dist_graph_neighbors_count(MPI_Comm comm, int* indegree, int* outdegree, int* weighted) {
  const char* fn = "MPI_Dist_graph_neighbors_count";
  comm_obj* c;
  std::shared_ptr<const topology> t;
  if (int e = need(fn, comm, topology::kind::dist_graph, c, t)) return e;
  if (!indegree || !outdegree || !weighted) return mpi_raise(fn, c, MPI_ERR_ARG, "null indegree, outdegree or weighted");
  *indegree = static_cast<int>(t->sources.size());
  *outdegree = static_cast<int>(t->destinations.size());
  *weighted = t->weighted ? 1 : 0;
  return MPI_SUCCESS;
}

int PMPI_Dist_graph_neighbors(MPI_Comm comm, int maxindegree, int sources[], int sourceweights[], int maxoutdegree,
                              int destinations[], int destweights[]) {
  const char* fn = "MPI_Dist_graph_neighbors";
  comm_obj* c;
  std::shared_ptr<const topology> t;
  if (int e = need(fn, comm, topology::kind::dist_graph, c, t)) return e;
  if (maxindegree < 0 || maxoutdegree < 0)
    return mpi_raise(fn, c, MPI_ERR_ARG,
                     "negative maxindegree " + std::to_string(maxindegree) + " or maxoutdegree " +
                         std::to_string(maxoutdegree));
  const int ni = std::min(maxindegree, static_cast<int>(t->sources.size()));
  const int no = std::min(maxoutdegree, static_cast<int>(t->destinations.size()));
  if ((ni > 0 && !sources) || (no > 0 && !destinations))
    return mpi_raise(fn, c, MPI_ERR_ARG, "null sources or destinations");
  std::copy_n(t->sources.begin(), ni, sources);
  std::copy_n(t->destinations.begin(), no, destinations);
  // Weights only for a weighted graph, into arrays the caller really gave.
  auto usable = [](const int* w) { return w && w != MPI_UNWEIGHTED && w != MPI_WEIGHTS_EMPTY; };
  if (t->weighted && usable(sourceweights)) std::copy_n(t->source_weights.begin(), ni, sourceweights);
  if (t->weighted && usable(destweights)) std::copy_n(t->dest_weights.begin(), no, destweights);
  return MPI_SUCCESS;
}

}  // extern "C"

#pragma weak MPI_Graph_create = PMPI_Graph_create
#pragma weak MPI_Graphdims_get = PMPI_Graphdims_get
#pragma weak MPI_Graph_get = PMPI_Graph_get
#pragma weak MPI_Graph_neighbors_count = PMPI_Graph_neighbors_count
#pragma weak MPI_Graph_neighbors = PMPI_Graph_neighbors
#pragma weak MPI_Graph_map = PMPI_Graph_map
#pragma weak MPI_Dist_graph_create_adjacent = PMPI_Dist_graph_create_adjacent
#pragma weak MPI_Dist_graph_create = PMPI_Dist_graph_create
#pragma weak MPI_Dist_graph_neighbors_count = PMPI_Dist_graph_neighbors_count
#pragma weak MPI_Dist_graph_neighbors = PMPI_Dist_graph_neighbors
