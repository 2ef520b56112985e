/* Graph topologies: Graph_create (self-loops and repeated edges kept, a
 * graph smaller than the communicator), Graphdims_get, Graph_get,
 * Graph_neighbors_count, Graph_neighbors, Graph_map, Topo_test, dup, and
 * the error classes of bad graphs and of graph calls on other
 * communicators. */
#include "mpitest.h"

/* Node i of an n-node graph: i+1, i-1, i (self-loop), i+1 (again), i-1
 * (again), all mod n: symmetric, with repeated edges. */
static void ring_graph(int n, int* index, int* edges) {
  int k = 0;
  for (int i = 0; i < n; i++) {
    edges[k++] = (i + 1) % n;
    edges[k++] = (i + n - 1) % n;
    edges[k++] = i;
    edges[k++] = (i + 1) % n;
    edges[k++] = (i + n - 1) % n;
    index[i] = k;
  }
}

int main(int argc, char** argv) {
  mt_start("topo_graph", &argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const int n = mt_size;
  int index[64], edges[320];
  ring_graph(n, index, edges);

  int newrank = -2;
  CHECK(MPI_Graph_map(MPI_COMM_WORLD, n, index, edges, &newrank) == MPI_SUCCESS && newrank == mt_rank,
        "Graph_map keeps the rank (%d)", newrank);

  MPI_Comm g;
  CHECK(MPI_Graph_create(MPI_COMM_WORLD, n, index, edges, 1, &g) == MPI_SUCCESS, "Graph_create");
  CHECK(g != MPI_COMM_NULL, "every rank is a node");
  int st = -1;
  MPI_Topo_test(g, &st);
  CHECK(st == MPI_GRAPH, "Topo_test %d", st);
  int r = -1, sz = -1;
  MPI_Comm_rank(g, &r);
  MPI_Comm_size(g, &sz);
  CHECK(r == mt_rank && sz == n, "ranks kept (%d of %d)", r, sz);

  int nn = -1, ne = -1;
  MPI_Graphdims_get(g, &nn, &ne);
  CHECK(nn == n && ne == 5 * n, "Graphdims_get %d nodes %d edges", nn, ne);
  int gi[64], ge[320];
  MPI_Graph_get(g, n, 5 * n, gi, ge);
  for (int i = 0; i < n; i++) CHECK(gi[i] == index[i], "index[%d] = %d, want %d", i, gi[i], index[i]);
  for (int j = 0; j < 5 * n; j++) CHECK(ge[j] == edges[j], "edges[%d] = %d, want %d", j, ge[j], edges[j]);
  /* Short arrays get a prefix, nothing past it. */
  int si[2] = {-7, -7}, se[4] = {-7, -7, -7, -7};
  MPI_Graph_get(g, 1, 3, si, se);
  CHECK(si[0] == index[0] && si[1] == -7, "Graph_get maxindex 1");
  CHECK(se[0] == edges[0] && se[2] == edges[2] && se[3] == -7, "Graph_get maxedges 3");

  for (int q = 0; q < n; q++) {
    int cnt = -1, nb[8] = {-7, -7, -7, -7, -7, -7, -7, -7};
    MPI_Graph_neighbors_count(g, q, &cnt);
    CHECK(cnt == 5, "node %d has %d neighbours", q, cnt);
    MPI_Graph_neighbors(g, q, 8, nb);
    for (int k = 0; k < 5; k++) CHECK(nb[k] == edges[5 * q + k], "node %d neighbour %d = %d", q, k, nb[k]);
    CHECK(nb[5] == -7, "nothing written past the neighbours");
    int two[3] = {-7, -7, -7};
    MPI_Graph_neighbors(g, q, 2, two);
    CHECK(two[0] == edges[5 * q] && two[1] == edges[5 * q + 1] && two[2] == -7, "maxneighbors 2");
  }

  /* A duplicate keeps the graph. */
  MPI_Comm d;
  MPI_Comm_dup(g, &d);
  MPI_Topo_test(d, &st);
  CHECK(st == MPI_GRAPH, "dup keeps the graph (%d)", st);
  MPI_Graphdims_get(d, &nn, &ne);
  CHECK(nn == n && ne == 5 * n, "dup graph dims");
  MPI_Comm_free(&d);

  /* Errors on a graph communicator. */
  MPI_Comm_set_errhandler(g, MPI_ERRORS_RETURN);
  int cnt;
  CHECK(MPI_Graph_neighbors_count(g, n, &cnt) == MPI_ERR_RANK, "rank n is not a node");
  CHECK(MPI_Graph_neighbors_count(g, -1, &cnt) == MPI_ERR_RANK, "rank -1 is not a node");
  CHECK(MPI_Cartdim_get(g, &cnt) == MPI_ERR_TOPOLOGY, "Cartdim_get on a graph");
  {
    int dg_in, dg_out, w;
    CHECK(MPI_Dist_graph_neighbors_count(g, &dg_in, &dg_out, &w) == MPI_ERR_TOPOLOGY,
          "Dist_graph_neighbors_count on a graph");
  }
  MPI_Comm_free(&g);

  /* Graph calls on a communicator without a graph. */
  CHECK(MPI_Graphdims_get(MPI_COMM_WORLD, &nn, &ne) == MPI_ERR_TOPOLOGY, "Graphdims_get on world");
  CHECK(MPI_Graph_neighbors_count(MPI_COMM_WORLD, 0, &cnt) == MPI_ERR_TOPOLOGY, "neighbors_count on world");
  {
    int dims[1] = {n}, per[1] = {0};
    MPI_Comm cart;
    MPI_Cart_create(MPI_COMM_WORLD, 1, dims, per, 0, &cart);
    MPI_Comm_set_errhandler(cart, MPI_ERRORS_RETURN);
    CHECK(MPI_Graph_neighbors(cart, 0, 1, &cnt) == MPI_ERR_TOPOLOGY, "Graph_neighbors on a Cartesian grid");
    MPI_Comm_free(&cart);
  }

  /* Bad graphs. */
  {
    char text[MPI_MAX_ERROR_STRING];
    int bi[2] = {1, 2}, be[2] = {3, 0};
    MPI_Comm x;
    int e = MPI_Graph_create(MPI_COMM_WORLD, 1, bi, be, 0, &x);
    CHECK(mt_error(e, text) == MPI_ERR_ARG, "edge out of range: %s", text);
    e = MPI_Graph_create(MPI_COMM_WORLD, n + 1, index, edges, 0, &x);
    CHECK(mt_error(e, text) == MPI_ERR_ARG, "more nodes than processes: %s", text);
    if (n >= 2) {
      int dec[2] = {2, 1}, de[2] = {0, 1};
      e = MPI_Graph_create(MPI_COMM_WORLD, 2, dec, de, 0, &x);
      CHECK(mt_error(e, text) == MPI_ERR_ARG, "decreasing index: %s", text);
    }
    CHECK(MPI_Graph_map(MPI_COMM_WORLD, -1, index, edges, &newrank) == MPI_ERR_ARG, "negative nnodes");
  }

  /* A graph smaller than the communicator: the last rank is left out;
   * nnodes 0 leaves every rank out. */
  if (n > 1) {
    int si2[64], se2[320];
    ring_graph(n - 1, si2, se2);
    MPI_Comm small;
    CHECK(MPI_Graph_create(MPI_COMM_WORLD, n - 1, si2, se2, 0, &small) == MPI_SUCCESS, "smaller graph");
    CHECK((mt_rank == n - 1) == (small == MPI_COMM_NULL), "left-out rank gets MPI_COMM_NULL");
    if (small != MPI_COMM_NULL) {
      MPI_Graphdims_get(small, &nn, &ne);
      CHECK(nn == n - 1 && ne == 5 * (n - 1), "smaller graph dims %d %d", nn, ne);
      MPI_Comm_free(&small);
    }
    MPI_Graph_map(MPI_COMM_WORLD, n - 1, si2, se2, &newrank);
    CHECK(newrank == (mt_rank == n - 1 ? MPI_UNDEFINED : mt_rank), "Graph_map of the smaller graph: %d", newrank);
  }
  {
    MPI_Comm none;
    CHECK(MPI_Graph_create(MPI_COMM_WORLD, 0, NULL, NULL, 0, &none) == MPI_SUCCESS && none == MPI_COMM_NULL,
          "empty graph");
  }
  return mt_pass();
}
