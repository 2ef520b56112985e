/* Neighbourhood collectives: Neighbor_allgather(v), Neighbor_alltoall(v,w)
 * and their I forms on Cartesian grids (MPI_PROC_NULL edges untouched,
 * periodic dimensions of size 1 and 2 where both neighbours are the same
 * process or this one), on a graph with self-loops and repeated edges, on
 * distributed graphs (repeated edges, indegree != outdegree), with a
 * non-contiguous datatype, several pending at once, and the errors:
 * no topology / non-symmetric graph (MPI_ERR_TOPOLOGY), MPI_IN_PLACE,
 * negative counts, bad types, null request, a too long message. */
#include "mpitest.h"

#define MAXN 64
#define UNTOUCHED -999
#define CNT 3

static int me, n;

static int val(int sender, int block, int elem) { return sender * 10000 + block * 100 + elem; }

/* Topologies that match repeated edges in order: the block j of `s` that
 * arrives as receive block k of `me` (sources[k] == s, the m-th time s
 * appears there, is the m-th time me appears in s's destinations). */
static int sender_block(const int* sources, int k, const int* s_dests, int s_outdeg) {
  int m = 0;
  for (int i = 0; i < k; i++)
    if (sources[i] == sources[k]) m++;
  for (int j = 0; j < s_outdeg; j++)
    if (s_dests[j] == me && m-- == 0) return j;
  return -1;
}

/* ---- Cartesian ----------------------------------------------------------- */

/* nbrs[2i], nbrs[2i+1]: the -1 and +1 neighbours in dimension i. What
 * arrives in block 2i was sent by the -1 neighbour towards +1 (its block
 * 2i+1), and the other way round. */
static int cart_nbrs(MPI_Comm c, int* nbrs) {
  int nd;
  MPI_Cartdim_get(c, &nd);
  for (int i = 0; i < nd; i++) MPI_Cart_shift(c, i, 1, &nbrs[2 * i], &nbrs[2 * i + 1]);
  return 2 * nd;
}
static int cart_expect(const int* nbrs, int k, int e) {
  if (nbrs[k] == MPI_PROC_NULL) return UNTOUCHED;
  return val(nbrs[k], k % 2 == 0 ? k + 1 : k - 1, e);
}

static void test_cart(MPI_Comm c, const char* what) {
  int nbrs[2 * 8];
  const int nb = cart_nbrs(c, nbrs);
  int sbuf[MAXN * CNT], rbuf[MAXN * CNT * 2];

  /* alltoall */
  for (int k = 0; k < nb; k++)
    for (int e = 0; e < CNT; e++) sbuf[k * CNT + e] = val(me, k, e);
  for (int i = 0; i < nb * CNT; i++) rbuf[i] = UNTOUCHED;
  CHECK(MPI_Neighbor_alltoall(sbuf, CNT, MPI_INT, rbuf, CNT, MPI_INT, c) == MPI_SUCCESS, "%s alltoall", what);
  for (int k = 0; k < nb; k++)
    for (int e = 0; e < CNT; e++)
      CHECK(rbuf[k * CNT + e] == cart_expect(nbrs, k, e), "%s alltoall block %d (from %d) elem %d = %d, want %d", what,
            k, nbrs[k], e, rbuf[k * CNT + e], cart_expect(nbrs, k, e));

  /* Ineighbor_alltoall, completed by MPI_Test */
  for (int i = 0; i < nb * CNT; i++) rbuf[i] = UNTOUCHED;
  MPI_Request rq;
  CHECK(MPI_Ineighbor_alltoall(sbuf, CNT, MPI_INT, rbuf, CNT, MPI_INT, c, &rq) == MPI_SUCCESS, "%s ialltoall", what);
  int flag = 0;
  while (!flag) MPI_Test(&rq, &flag, MPI_STATUS_IGNORE);
  CHECK(rq == MPI_REQUEST_NULL, "completed request freed");
  for (int k = 0; k < nb; k++)
    for (int e = 0; e < CNT; e++)
      CHECK(rbuf[k * CNT + e] == cart_expect(nbrs, k, e), "%s ialltoall block %d elem %d = %d", what, k, e,
            rbuf[k * CNT + e]);

  /* allgather: the same block to every neighbour */
  for (int e = 0; e < CNT; e++) sbuf[e] = val(me, 7, e);
  for (int i = 0; i < nb * CNT; i++) rbuf[i] = UNTOUCHED;
  CHECK(MPI_Neighbor_allgather(sbuf, CNT, MPI_INT, rbuf, CNT, MPI_INT, c) == MPI_SUCCESS, "%s allgather", what);
  for (int k = 0; k < nb; k++)
    for (int e = 0; e < CNT; e++) {
      const int want = nbrs[k] == MPI_PROC_NULL ? UNTOUCHED : val(nbrs[k], 7, e);
      CHECK(rbuf[k * CNT + e] == want, "%s allgather block %d elem %d = %d, want %d", what, k, e, rbuf[k * CNT + e],
            want);
    }

  /* alltoallw: receive blocks through a strided type (every other int),
   * the gaps must stay untouched. */
  MPI_Datatype strided;
  MPI_Type_vector(CNT, 1, 2, MPI_INT, &strided);
  MPI_Type_commit(&strided);
  int scounts[16], rcounts[16];
  MPI_Aint sdispl[16], rdispl[16];
  MPI_Datatype stypes[16], rtypes[16];
  for (int k = 0; k < nb; k++) {
    for (int e = 0; e < CNT; e++) sbuf[k * CNT + e] = val(me, k, e);
    scounts[k] = CNT, sdispl[k] = (MPI_Aint)(k * CNT * sizeof(int)), stypes[k] = MPI_INT;
    rcounts[k] = 1, rdispl[k] = (MPI_Aint)(k * 2 * CNT * sizeof(int)), rtypes[k] = strided;
  }
  for (int i = 0; i < nb * CNT * 2; i++) rbuf[i] = UNTOUCHED;
  CHECK(MPI_Neighbor_alltoallw(sbuf, scounts, sdispl, stypes, rbuf, rcounts, rdispl, rtypes, c) == MPI_SUCCESS,
        "%s alltoallw", what);
  for (int k = 0; k < nb; k++)
    for (int e = 0; e < CNT; e++) {
      CHECK(rbuf[k * 2 * CNT + 2 * e] == cart_expect(nbrs, k, e), "%s alltoallw block %d elem %d = %d", what, k, e,
            rbuf[k * 2 * CNT + 2 * e]);
      CHECK(rbuf[k * 2 * CNT + 2 * e + 1] == UNTOUCHED, "%s alltoallw gap overwritten", what);
    }
  MPI_Type_free(&strided);
}

/* ---- graph ----------------------------------------------------------------- */

/* Node i: i+1, i-1, i, i+1, i-1 (mod n): symmetric, a self-loop, repeats. */
static int graph_nbrs(int i, int* out) {
  out[0] = (i + 1) % n, out[1] = (i + n - 1) % n, out[2] = i, out[3] = (i + 1) % n, out[4] = (i + n - 1) % n;
  return 5;
}
static int vcount(int sender, int block) { return 1 + (sender + block) % 3; }

static void test_graph(MPI_Comm g) {
  int nbrs[5], sn[5];
  const int nb = graph_nbrs(me, nbrs);
  int sbuf[MAXN * CNT], rbuf[MAXN * CNT];
  int check_nbrs[8];
  MPI_Graph_neighbors(g, me, 8, check_nbrs);
  for (int k = 0; k < nb; k++) CHECK(check_nbrs[k] == nbrs[k], "graph neighbour %d", k);

  /* alltoall: block k of the receiver comes from the matching block of its source */
  for (int k = 0; k < nb; k++)
    for (int e = 0; e < 2; e++) sbuf[k * 2 + e] = val(me, k, e);
  for (int i = 0; i < nb * 2; i++) rbuf[i] = UNTOUCHED;
  CHECK(MPI_Neighbor_alltoall(sbuf, 2, MPI_INT, rbuf, 2, MPI_INT, g) == MPI_SUCCESS, "graph alltoall");
  for (int k = 0; k < nb; k++) {
    graph_nbrs(nbrs[k], sn);
    const int j = sender_block(nbrs, k, sn, 5);
    for (int e = 0; e < 2; e++)
      CHECK(rbuf[k * 2 + e] == val(nbrs[k], j, e), "graph alltoall block %d (from %d, its block %d) = %d", k, nbrs[k],
            j, rbuf[k * 2 + e]);
  }

  /* alltoallv: sizes depend on (sender, its block); receive blocks laid out
   * in reverse order. */
  int scounts[8], sdispls[8], rcounts[8], rdispls[8], pos = 0;
  for (int k = 0; k < nb; k++) {
    scounts[k] = vcount(me, k), sdispls[k] = pos;
    for (int e = 0; e < scounts[k]; e++) sbuf[pos + e] = val(me, k, e);
    pos += scounts[k];
  }
  pos = 0;
  for (int k = nb - 1; k >= 0; k--) {
    graph_nbrs(nbrs[k], sn);
    rcounts[k] = vcount(nbrs[k], sender_block(nbrs, k, sn, 5));
    rdispls[k] = pos;
    pos += rcounts[k] + 1; /* one-int gap after each block */
  }
  for (int i = 0; i < pos; i++) rbuf[i] = UNTOUCHED;
  CHECK(MPI_Neighbor_alltoallv(sbuf, scounts, sdispls, MPI_INT, rbuf, rcounts, rdispls, MPI_INT, g) == MPI_SUCCESS,
        "graph alltoallv");
  for (int k = 0; k < nb; k++) {
    graph_nbrs(nbrs[k], sn);
    const int j = sender_block(nbrs, k, sn, 5);
    for (int e = 0; e < rcounts[k]; e++)
      CHECK(rbuf[rdispls[k] + e] == val(nbrs[k], j, e), "graph alltoallv block %d elem %d = %d", k, e,
            rbuf[rdispls[k] + e]);
    CHECK(rbuf[rdispls[k] + rcounts[k]] == UNTOUCHED, "graph alltoallv gap after block %d", k);
  }

  /* Ineighbor_allgatherv: sender s sends 1 + s % 3 ints */
  const int mine = 1 + me % 3;
  for (int e = 0; e < mine; e++) sbuf[e] = val(me, 9, e);
  pos = 0;
  for (int k = 0; k < nb; k++) rcounts[k] = 1 + nbrs[k] % 3, rdispls[k] = pos, pos += rcounts[k];
  for (int i = 0; i < pos; i++) rbuf[i] = UNTOUCHED;
  MPI_Request rq;
  CHECK(MPI_Ineighbor_allgatherv(sbuf, mine, MPI_INT, rbuf, rcounts, rdispls, MPI_INT, g, &rq) == MPI_SUCCESS,
        "graph iallgatherv");
  MPI_Wait(&rq, MPI_STATUS_IGNORE);
  for (int k = 0; k < nb; k++)
    for (int e = 0; e < rcounts[k]; e++)
      CHECK(rbuf[rdispls[k] + e] == val(nbrs[k], 9, e), "graph iallgatherv block %d elem %d", k, e);
}

/* ---- distributed graphs ------------------------------------------------- */

static void ring_lists(int i, int* src, int* dst) {
  src[0] = (i + n - 1) % n, src[1] = (i + 2 * n - 2) % n, src[2] = (i + n - 1) % n;
  dst[0] = (i + 1) % n, dst[1] = (i + 2) % n, dst[2] = (i + 1) % n;
}

static void test_dist_graph(void) {
  int src[3], dst[3], ssrc[3], sdst[3];
  ring_lists(me, src, dst);
  MPI_Comm g;
  MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 3, src, MPI_UNWEIGHTED, 3, dst, MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &g);
  int sbuf[64], rbuf[64];
  for (int k = 0; k < 3; k++)
    for (int e = 0; e < CNT; e++) sbuf[k * CNT + e] = val(me, k, e);
  for (int i = 0; i < 3 * CNT; i++) rbuf[i] = UNTOUCHED;
  CHECK(MPI_Neighbor_alltoall(sbuf, CNT, MPI_INT, rbuf, CNT, MPI_INT, g) == MPI_SUCCESS, "dist alltoall");
  for (int k = 0; k < 3; k++) {
    ring_lists(src[k], ssrc, sdst);
    const int j = sender_block(src, k, sdst, 3);
    for (int e = 0; e < CNT; e++)
      CHECK(rbuf[k * CNT + e] == val(src[k], j, e), "dist alltoall block %d (from %d block %d) elem %d = %d", k, src[k],
            j, e, rbuf[k * CNT + e]);
  }

  /* Ineighbor_alltoallv with MPI_Waitall, next to a pending Ineighbor_allgather
   * on the same communicator and a blocking barrier in between. */
  int counts[3] = {1, 2, 3}, displs[3] = {0, 1, 3}, rcounts[3], rdispls[3], pos = 0;
  int sv[6], rv[32], ag[16];
  for (int k = 0; k < 3; k++)
    for (int e = 0; e < counts[k]; e++) sv[displs[k] + e] = val(me, k, e);
  for (int k = 0; k < 3; k++) {
    ring_lists(src[k], ssrc, sdst);
    rcounts[k] = counts[sender_block(src, k, sdst, 3)];
    rdispls[k] = pos, pos += rcounts[k];
  }
  for (int i = 0; i < 32; i++) rv[i] = UNTOUCHED;
  MPI_Request rq[2];
  const int one = val(me, 5, 0);
  CHECK(MPI_Ineighbor_alltoallv(sv, counts, displs, MPI_INT, rv, rcounts, rdispls, MPI_INT, g, &rq[0]) == MPI_SUCCESS,
        "dist ialltoallv");
  CHECK(MPI_Ineighbor_allgather(&one, 1, MPI_INT, ag, 1, MPI_INT, g, &rq[1]) == MPI_SUCCESS, "dist iallgather");
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
  for (int k = 0; k < 3; k++) {
    ring_lists(src[k], ssrc, sdst);
    const int j = sender_block(src, k, sdst, 3);
    for (int e = 0; e < rcounts[k]; e++)
      CHECK(rv[rdispls[k] + e] == val(src[k], j, e), "dist ialltoallv block %d elem %d = %d", k, e, rv[rdispls[k] + e]);
    CHECK(ag[k] == val(src[k], 5, 0), "dist iallgather block %d = %d", k, ag[k]);
  }

  /* A too long message: 2 ints into 1-int blocks. */
  MPI_Comm_set_errhandler(g, MPI_ERRORS_RETURN);
  int e = MPI_Neighbor_alltoall(sbuf, 2, MPI_INT, rbuf, 1, MPI_INT, g);
  int cls;
  MPI_Error_class(e, &cls);
  CHECK(cls == MPI_ERR_TRUNCATE, "longer message than the block: class %d", cls);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Comm_free(&g);

  /* A star: everybody (0 too) sends to 0; 0 receives, sends only to itself. */
  int all[MAXN];
  for (int i = 0; i < n; i++) all[i] = i;
  int zero = 0;
  MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, me == 0 ? n : 0, all, MPI_UNWEIGHTED, 1, &zero, MPI_UNWEIGHTED,
                                 MPI_INFO_NULL, 0, &g);
  const int mine[2] = {val(me, 0, 0), val(me, 0, 1)};
  for (int i = 0; i < 2 * n; i++) rbuf[i] = UNTOUCHED;
  CHECK(MPI_Neighbor_allgather(mine, 2, MPI_INT, rbuf, 2, MPI_INT, g) == MPI_SUCCESS, "star allgather");
  for (int i = 0; i < n; i++)
    for (int e = 0; e < 2; e++)
      CHECK(rbuf[2 * i + e] == (me == 0 ? val(i, 0, e) : UNTOUCHED), "star block %d elem %d = %d", i, e, rbuf[2 * i + e]);
  MPI_Comm_free(&g);
}

/* ---- errors --------------------------------------------------------------- */

static void test_errors(MPI_Comm cart) {
  int s[64] = {0}, r[64];
  MPI_Request rq;
  CHECK(MPI_Neighbor_alltoall(s, 1, MPI_INT, r, 1, MPI_INT, MPI_COMM_WORLD) == MPI_ERR_TOPOLOGY,
        "no topology: MPI_ERR_TOPOLOGY");
  CHECK(MPI_Ineighbor_allgather(s, 1, MPI_INT, r, 1, MPI_INT, MPI_COMM_WORLD, &rq) == MPI_ERR_TOPOLOGY,
        "no topology (I form)");
  MPI_Comm_set_errhandler(cart, MPI_ERRORS_RETURN);
  CHECK(MPI_Neighbor_alltoall(MPI_IN_PLACE, 1, MPI_INT, r, 1, MPI_INT, cart) == MPI_ERR_BUFFER, "MPI_IN_PLACE");
  CHECK(MPI_Neighbor_allgather(s, -1, MPI_INT, r, 1, MPI_INT, cart) == MPI_ERR_COUNT, "negative count");
  CHECK(MPI_Neighbor_alltoall(s, 1, MPI_DATATYPE_NULL, r, 1, MPI_INT, cart) == MPI_ERR_TYPE, "null type");
  CHECK(MPI_Ineighbor_alltoall(s, 1, MPI_INT, r, 1, MPI_INT, cart, NULL) == MPI_ERR_ARG, "null request");
  int cnt[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  CHECK(MPI_Neighbor_alltoallv(s, cnt, NULL, MPI_INT, r, cnt, cnt, MPI_INT, cart) == MPI_ERR_ARG, "null sdispls");
  /* Neighbourhood collectives need a symmetric graph. */
  if (n >= 2) {
    int index[MAXN], edges[1] = {1};
    for (int i = 0; i < n; i++) index[i] = 1;
    MPI_Comm g;
    MPI_Graph_create(MPI_COMM_WORLD, n, index, edges, 0, &g);
    MPI_Comm_set_errhandler(g, MPI_ERRORS_RETURN);
    CHECK(MPI_Neighbor_allgather(s, 1, MPI_INT, r, 1, MPI_INT, g) == MPI_ERR_TOPOLOGY, "non-symmetric graph");
    MPI_Comm_free(&g);
  }
}

int main(int argc, char** argv) {
  mt_start("coll_neighbor", &argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  me = mt_rank, n = mt_size;

  /* 2-D grid, periodic in dimension 0 only; 1-D periodic ring (size 1: both
   * neighbours are this process; size 2: both are the other one). */
  int dims[2] = {0, 0}, periods[2] = {1, 0};
  MPI_Dims_create(n, 2, dims);
  MPI_Comm grid, ring, zero;
  MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &grid);
  test_cart(grid, "2-D grid");
  int rdims[1] = {n}, rper[1] = {1};
  MPI_Cart_create(MPI_COMM_WORLD, 1, rdims, rper, 0, &ring);
  test_cart(ring, "ring");
  int nper[1] = {0};
  MPI_Comm line;
  MPI_Cart_create(MPI_COMM_WORLD, 1, rdims, nper, 0, &line);
  test_cart(line, "line");
  /* A 0-dimensional grid has no neighbours: nothing moves. */
  int none[2] = {0, 0};
  MPI_Cart_sub(grid, none, &zero);
  int r0 = UNTOUCHED;
  CHECK(MPI_Neighbor_allgather(&me, 1, MPI_INT, &r0, 1, MPI_INT, zero) == MPI_SUCCESS && r0 == UNTOUCHED,
        "0-dimensional grid");
  MPI_Comm_free(&zero);

  int index[MAXN], edges[MAXN * 5], k = 0;
  for (int i = 0; i < n; i++) index[i] = (k += graph_nbrs(i, edges + k));
  MPI_Comm g;
  MPI_Graph_create(MPI_COMM_WORLD, n, index, edges, 0, &g);
  test_graph(g);

  test_dist_graph();
  test_errors(grid);

  MPI_Comm_free(&g);
  MPI_Comm_free(&line);
  MPI_Comm_free(&ring);
  MPI_Comm_free(&grid);
  return mt_pass();
}
