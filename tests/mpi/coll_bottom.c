/* MPI_BOTTOM with absolute addresses in the collectives that take byte
 * displacements: MPI_Neighbor_alltoallw and MPI_Ineighbor_alltoallw with
 * predefined types and displacements from MPI_Get_address (each neighbour's
 * block a separate allocation, as mpi4py's testNeighborAlltoallwBottom
 * does), the same with a derived type that carries the absolute address
 * itself, MPI_Alltoallw with such derived types; a block whose absolute
 * address is null (MPI_BOTTOM + 0 with a predefined type) is still
 * MPI_ERR_BUFFER. On a periodic ring (Cartesian, 1 dimension): block 0 goes
 * to and comes from the -1 neighbour, block 1 the +1 neighbour. */
#include "mpitest.h"

#define CNT 5

static int val(int sender, int block, int e) { return sender * 1000 + block * 100 + e; }

int main(int argc, char** argv) {
  mt_start("coll_bottom", &argc, &argv);
  const int me = mt_rank, n = mt_size;
  int dims[1] = {n}, periods[1] = {1};
  MPI_Comm ring;
  CHECK(MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring) == MPI_SUCCESS, "Cart_create");
  int nbr[2];
  MPI_Cart_shift(ring, 0, 1, &nbr[0], &nbr[1]);

  int* sblk[2];
  int* rblk[2];
  for (int k = 0; k < 2; k++) {
    sblk[k] = malloc(CNT * sizeof(int));
    rblk[k] = malloc(CNT * sizeof(int));
    CHECK(sblk[k] && rblk[k], "out of memory");
  }
  int counts[2] = {CNT, CNT};
  MPI_Aint sdispl[2], rdispl[2];
  MPI_Datatype ints[2] = {MPI_INT, MPI_INT};
  for (int k = 0; k < 2; k++) {
    MPI_Get_address(sblk[k], &sdispl[k]);
    MPI_Get_address(rblk[k], &rdispl[k]);
  }
  /* What arrives in block k was sent by nbr[k] as its block 1 - k. */
#define FILL()                                                        \
  for (int k = 0; k < 2; k++)                                         \
    for (int e = 0; e < CNT; e++) {                                   \
      sblk[k][e] = val(me, k, e);                                     \
      rblk[k][e] = -1;                                                \
    }
#define VERIFY(what)                                                                                         \
  for (int k = 0; k < 2; k++)                                                                                \
    for (int e = 0; e < CNT; e++)                                                                            \
      CHECK(rblk[k][e] == val(nbr[k], 1 - k, e), "%s: block %d element %d is %d, want %d", what, k, e,       \
            rblk[k][e], val(nbr[k], 1 - k, e));

  /* Predefined types, absolute displacements. */
  FILL();
  int err = MPI_Neighbor_alltoallw(MPI_BOTTOM, counts, sdispl, ints, MPI_BOTTOM, counts, rdispl, ints, ring);
  CHECK(err == MPI_SUCCESS, "MPI_Neighbor_alltoallw with MPI_BOTTOM: error %d", err);
  VERIFY("Neighbor_alltoallw(MPI_BOTTOM)");

  FILL();
  MPI_Request req;
  err = MPI_Ineighbor_alltoallw(MPI_BOTTOM, counts, sdispl, ints, MPI_BOTTOM, counts, rdispl, ints, ring, &req);
  CHECK(err == MPI_SUCCESS, "MPI_Ineighbor_alltoallw with MPI_BOTTOM: error %d", err);
  MPI_Wait(&req, MPI_STATUS_IGNORE);
  VERIFY("Ineighbor_alltoallw(MPI_BOTTOM)");

  /* Derived types holding the absolute address (displacements 0). */
  MPI_Datatype st[2], rt[2];
  for (int k = 0; k < 2; k++) {
    int bl = CNT;
    MPI_Type_create_struct(1, &bl, &sdispl[k], ints, &st[k]);
    MPI_Type_create_struct(1, &bl, &rdispl[k], ints, &rt[k]);
    MPI_Type_commit(&st[k]);
    MPI_Type_commit(&rt[k]);
  }
  int ones[2] = {1, 1};
  MPI_Aint zeros[2] = {0, 0};
  FILL();
  err = MPI_Neighbor_alltoallw(MPI_BOTTOM, ones, zeros, st, MPI_BOTTOM, ones, zeros, rt, ring);
  CHECK(err == MPI_SUCCESS, "MPI_Neighbor_alltoallw with MPI_BOTTOM and struct types: error %d", err);
  VERIFY("Neighbor_alltoallw(MPI_BOTTOM, struct types)");

  /* MPI_Alltoallw on WORLD: the block for rank p is the one of the ring
   * neighbour it is (others get nothing); with 1 or 2 processes both
   * neighbours are the same rank, which then gets (and sends) block 0. */
  int* acounts = calloc((size_t)n, sizeof(int));
  int* adispls = calloc((size_t)n, sizeof(int));
  MPI_Datatype* asend = malloc((size_t)n * sizeof(MPI_Datatype));
  MPI_Datatype* arecv = malloc((size_t)n * sizeof(MPI_Datatype));
  CHECK(acounts && adispls && asend && arecv, "out of memory");
  for (int p = 0; p < n; p++) asend[p] = arecv[p] = MPI_INT;
  const int used[2] = {1, nbr[0] != nbr[1]}; /* one block per distinct neighbour */
  for (int k = 0; k < 2; k++)
    if (used[k]) {
      acounts[nbr[k]] = 1;
      asend[nbr[k]] = st[k];
      arecv[nbr[k]] = rt[k];
    }
  FILL();
  err = MPI_Alltoallw(MPI_BOTTOM, acounts, adispls, asend, MPI_BOTTOM, acounts, adispls, arecv, MPI_COMM_WORLD);
  CHECK(err == MPI_SUCCESS, "MPI_Alltoallw with MPI_BOTTOM and struct types: error %d", err);
  for (int k = 0; k < 2; k++) {
    if (!used[k]) continue;
    /* nbr[k] sent us the block it keeps for us: 1 - k, or 0 when its two
     * neighbours are one rank. */
    const int from_block = nbr[0] == nbr[1] ? 0 : 1 - k;
    for (int e = 0; e < CNT; e++)
      CHECK(rblk[k][e] == val(nbr[k], from_block, e), "Alltoallw(MPI_BOTTOM): block %d element %d is %d, want %d", k,
            e, rblk[k][e], val(nbr[k], from_block, e));
  }

  /* A predefined type at absolute address 0 is still refused. */
  MPI_Comm_set_errhandler(ring, MPI_ERRORS_RETURN);
  MPI_Aint null_displ[2] = {0, 0};
  err = MPI_Neighbor_alltoallw(MPI_BOTTOM, counts, null_displ, ints, MPI_BOTTOM, counts, rdispl, ints, ring);
  char text[MPI_MAX_ERROR_STRING];
  CHECK(mt_error(err, text) == MPI_ERR_BUFFER, "MPI_BOTTOM + 0 with MPI_INT: error %d (%s)", err, text);

  for (int k = 0; k < 2; k++) {
    MPI_Type_free(&st[k]);
    MPI_Type_free(&rt[k]);
    free(sblk[k]);
    free(rblk[k]);
  }
  free(acounts);
  free(adispls);
  free(asend);
  free(arecv);
  MPI_Comm_free(&ring);
  return mt_pass();
}
