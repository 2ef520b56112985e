/* Distributed graph topologies: Dist_graph_create_adjacent (weighted,
 * MPI_UNWEIGHTED, MPI_WEIGHTS_EMPTY), Dist_graph_create where processes
 * give each other's edges (the exchange builds every process's lists, in
 * the order: giving rank, then position), Dist_graph_neighbors(_count),
 * Topo_test, dup, info accepted, and errors: a bad argument at one process
 * fails the call everywhere instead of hanging. */
#include "mpitest.h"

#define MAXE 64

static int mod(int a, int n) { return ((a % n) + n) % n; }

/* The edges giver g passes to Dist_graph_create: g -> g+1 (weight
 * 100g+1), g -> g+3 (100g+3), and giver 0 also gives n-1 -> 0 (999). */
static int edges_of(int g, int n, int* s, int* d, int* w) {
  int k = 0;
  s[k] = g, d[k] = mod(g + 1, n), w[k++] = 100 * g + 1;
  s[k] = g, d[k] = mod(g + 3, n), w[k++] = 100 * g + 3;
  if (g == 0) s[k] = n - 1, d[k] = 0, w[k++] = 999;
  return k;
}

static void check_lists(MPI_Comm c, int want_in, const int* in, const int* inw, int want_out, const int* out,
                        const int* outw, int weighted, const char* what) {
  int ni = -1, no = -1, wt = -1;
  MPI_Dist_graph_neighbors_count(c, &ni, &no, &wt);
  CHECK(ni == want_in && no == want_out && wt == weighted, "%s: counts %d %d weighted %d, want %d %d %d", what, ni, no,
        wt, want_in, want_out, weighted);
  int s[MAXE], sw[MAXE], d[MAXE], dw[MAXE];
  for (int i = 0; i < MAXE; i++) s[i] = sw[i] = d[i] = dw[i] = -7;
  MPI_Dist_graph_neighbors(c, MAXE, s, sw, MAXE, d, dw);
  for (int i = 0; i < want_in; i++) {
    CHECK(s[i] == in[i], "%s: sources[%d] = %d, want %d", what, i, s[i], in[i]);
    if (weighted) CHECK(sw[i] == inw[i], "%s: sourceweights[%d] = %d, want %d", what, i, sw[i], inw[i]);
  }
  for (int i = 0; i < want_out; i++) {
    CHECK(d[i] == out[i], "%s: destinations[%d] = %d, want %d", what, i, d[i], out[i]);
    if (weighted) CHECK(dw[i] == outw[i], "%s: destweights[%d] = %d, want %d", what, i, dw[i], outw[i]);
  }
  CHECK(s[want_in] == -7 && d[want_out] == -7, "%s: nothing written past the lists", what);
  if (!weighted) CHECK(sw[0] == -7 && dw[0] == -7, "%s: unweighted: weight arrays untouched", what);
}

int main(int argc, char** argv) {
  mt_start("topo_dist_graph", &argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const int n = mt_size, me = mt_rank;
  char text[MPI_MAX_ERROR_STRING];

  /* Adjacent, weighted: in from me-1, me-2, me-1; out to me+1, me+2, me+1. */
  {
    int src[3] = {mod(me - 1, n), mod(me - 2, n), mod(me - 1, n)}, sw[3] = {10 * me, 10 * me + 1, 10 * me + 2};
    int dst[3] = {mod(me + 1, n), mod(me + 2, n), mod(me + 1, n)}, dw[3] = {20 * me, 20 * me + 1, 20 * me + 2};
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "hint_nobody_reads", "1");
    MPI_Comm g;
    CHECK(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 3, src, sw, 3, dst, dw, info, 1, &g) == MPI_SUCCESS,
          "create_adjacent weighted");
    MPI_Info_free(&info);
    int st = -1, r = -1;
    MPI_Topo_test(g, &st);
    MPI_Comm_rank(g, &r);
    CHECK(st == MPI_DIST_GRAPH && r == me, "Topo_test %d, rank %d", st, r);
    check_lists(g, 3, src, sw, 3, dst, dw, 1, "adjacent weighted");
    /* Short arrays: a prefix only. */
    int s2[3] = {-7, -7, -7}, w2[3] = {-7, -7, -7}, d2[1] = {-7};
    MPI_Dist_graph_neighbors(g, 2, s2, w2, 0, d2, MPI_UNWEIGHTED);
    CHECK(s2[0] == src[0] && s2[1] == src[1] && s2[2] == -7 && w2[1] == sw[1] && w2[2] == -7 && d2[0] == -7,
          "maxindegree 2, maxoutdegree 0");
    MPI_Comm d;
    MPI_Comm_dup(g, &d);
    check_lists(d, 3, src, sw, 3, dst, dw, 1, "dup of adjacent weighted");
    MPI_Comm_free(&d);
    MPI_Comm_set_errhandler(g, MPI_ERRORS_RETURN);
    int x;
    CHECK(MPI_Graphdims_get(g, &x, &x) == MPI_ERR_TOPOLOGY, "Graphdims_get on a distributed graph");
    CHECK(MPI_Cart_shift(g, 0, 1, &x, &x) == MPI_ERR_TOPOLOGY, "Cart_shift on a distributed graph");
    MPI_Comm_free(&g);
  }

  /* Adjacent, unweighted; and weighted without edges (MPI_WEIGHTS_EMPTY). */
  {
    int src[1] = {mod(me - 1, n)}, dst[1] = {mod(me + 1, n)};
    MPI_Comm g;
    CHECK(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, src, MPI_UNWEIGHTED, 1, dst, MPI_UNWEIGHTED,
                                         MPI_INFO_NULL, 0, &g) == MPI_SUCCESS,
          "create_adjacent unweighted");
    check_lists(g, 1, src, NULL, 1, dst, NULL, 0, "adjacent unweighted");
    MPI_Comm_free(&g);
    CHECK(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 0, NULL, MPI_WEIGHTS_EMPTY, 0, NULL, MPI_WEIGHTS_EMPTY,
                                         MPI_INFO_NULL, 0, &g) == MPI_SUCCESS,
          "create_adjacent without edges");
    check_lists(g, 0, NULL, NULL, 0, NULL, NULL, 1, "weighted, no edges");
    MPI_Comm_free(&g);
  }

  /* General form: every giver's edges reach both ends. */
  {
    int s[4], d[4], w[4];
    const int k = edges_of(me, n, s, d, w);
    /* As Dist_graph_create wants them: sources with degrees. */
    int srcs[2], degs[2], ns = 0;
    for (int i = 0; i < k; i++) {
      if (ns == 0 || srcs[ns - 1] != s[i]) srcs[ns] = s[i], degs[ns++] = 0;
      degs[ns - 1]++;
    }
    MPI_Comm g;
    CHECK(MPI_Dist_graph_create(MPI_COMM_WORLD, ns, srcs, degs, d, w, MPI_INFO_NULL, 0, &g) == MPI_SUCCESS,
          "Dist_graph_create");
    int in[MAXE], inw[MAXE], out[MAXE], outw[MAXE], ni = 0, no = 0;
    for (int giver = 0; giver < n; giver++) {
      int gs[4], gd[4], gw[4];
      const int gk = edges_of(giver, n, gs, gd, gw);
      for (int i = 0; i < gk; i++) {
        if (gs[i] == me) out[no] = gd[i], outw[no++] = gw[i];
        if (gd[i] == me) in[ni] = gs[i], inw[ni++] = gw[i];
      }
    }
    check_lists(g, ni, in, inw, no, out, outw, 1, "Dist_graph_create weighted");
    int st;
    MPI_Topo_test(g, &st);
    CHECK(st == MPI_DIST_GRAPH, "Topo_test %d", st);
    MPI_Comm_free(&g);

    /* Unweighted; odd ranks give no edge at all. */
    const int give = me % 2 == 0 ? ns : 0;
    CHECK(MPI_Dist_graph_create(MPI_COMM_WORLD, give, srcs, degs, d, MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &g) ==
              MPI_SUCCESS,
          "Dist_graph_create unweighted");
    ni = no = 0;
    for (int giver = 0; giver < n; giver += 2) {
      int gs[4], gd[4], gw[4];
      const int gk = edges_of(giver, n, gs, gd, gw);
      for (int i = 0; i < gk; i++) {
        if (gs[i] == me) out[no++] = gd[i];
        if (gd[i] == me) in[ni++] = gs[i];
      }
    }
    check_lists(g, ni, in, NULL, no, out, NULL, 0, "Dist_graph_create unweighted");
    MPI_Comm_free(&g);
  }

  /* A bad argument at one process: it gets its own error, the others
   * MPI_ERR_ARG naming it; nobody waits forever. */
  {
    int src[1] = {mod(me - 1, n)}, dst[1] = {me == n - 1 ? n : mod(me + 1, n)};
    MPI_Comm g = MPI_COMM_NULL;
    int e = MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, src, MPI_UNWEIGHTED, 1, dst, MPI_UNWEIGHTED,
                                           MPI_INFO_NULL, 0, &g);
    int cls = mt_error(e, text);
    if (me == n - 1) {
      CHECK(cls == MPI_ERR_RANK, "own bad destination: %s", text);
    } else {
      CHECK(cls == MPI_ERR_ARG, "another rank's bad destination: %s", text);
    }
    int one = 1, deg = 1, bad = -5, w = -1;
    e = MPI_Dist_graph_create(MPI_COMM_WORLD, 1, &me, &deg, me == 0 ? &bad : &one, MPI_UNWEIGHTED, MPI_INFO_NULL,
                              0, &g);
    cls = mt_error(e, text);
    CHECK(me == 0 ? cls == MPI_ERR_RANK : cls == MPI_ERR_ARG, "general form, bad destination at 0: %s", text);
    int zero = 0;
    e = MPI_Dist_graph_create(MPI_COMM_WORLD, 1, &me, &deg, &zero, &w, MPI_INFO_NULL, 0, &g);
    CHECK(mt_error(e, text) == MPI_ERR_ARG, "negative weight: %s", text);
    e = MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 0, NULL, MPI_UNWEIGHTED, 0, NULL, MPI_UNWEIGHTED,
                                       (MPI_Info)12345, 0, &g);
    CHECK(mt_error(e, text) == MPI_ERR_INFO, "invalid info: %s", text);
    e = MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, -1, NULL, MPI_UNWEIGHTED, 0, NULL, MPI_UNWEIGHTED,
                                       MPI_INFO_NULL, 0, &g);
    CHECK(mt_error(e, text) == MPI_ERR_ARG, "negative indegree: %s", text);
    int a, b, c;
    CHECK(MPI_Dist_graph_neighbors_count(MPI_COMM_WORLD, &a, &b, &c) == MPI_ERR_TOPOLOGY, "neighbors_count on world");
    CHECK(g == MPI_COMM_NULL, "no communicator from a failed creation");
  }
  return mt_pass();
}
