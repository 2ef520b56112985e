/* Intercommunicator collectives with groups of different sizes (every
 * split of the world into a low group of k ranks and a high group of the
 * rest, 1 <= k < size): Alltoall and Ialltoall (equal blocks, one direction
 * only, different block sizes per direction), Reduce_scatter_block,
 * Ireduce_scatter_block, Reduce_scatter and Ireduce_scatter (MPI-3.1 5.10:
 * the reduction of the REMOTE group's vectors is scattered over the local
 * group; counts describe the local group, both groups reduce vectors of
 * the same length). Every value is checked. */
#include "mpitest.h"

#define T 12 /* Reduce_scatter: elements per vector (divisible by 1..4) */

static int low, lrank, lsize, rsize;
static MPI_Comm inter;

/* What local rank q of a group sends to remote rank j, element i. */
static int a2a_value(int from_low, int q, int j, int i) { return (from_low ? 1 : 2) * 1000000 + q * 10000 + j * 100 + i; }

static void check_alltoall(int scount, int rcount, int nonblocking, const char* what) {
  int* s = malloc(sizeof(int) * (size_t)(scount * rsize + 1));
  int* r = malloc(sizeof(int) * (size_t)(rcount * rsize + 1));
  for (int j = 0; j < rsize; ++j)
    for (int i = 0; i < scount; ++i) s[j * scount + i] = a2a_value(low, lrank, j, i);
  for (int i = 0; i < rcount * rsize; ++i) r[i] = -1;
  if (nonblocking) {
    MPI_Request q;
    MPI_Ialltoall(s, scount, MPI_INT, r, rcount, MPI_INT, inter, &q);
    MPI_Wait(&q, MPI_STATUS_IGNORE);
  } else {
    MPI_Alltoall(s, scount, MPI_INT, r, rcount, MPI_INT, inter);
  }
  for (int j = 0; j < rsize; ++j)
    for (int i = 0; i < rcount; ++i)
      CHECK(r[j * rcount + i] == a2a_value(!low, j, lrank, i), "%s (%s group rank %d of %d, %d remote): block %d[%d] = %d",
            what, low ? "low" : "high", lrank, lsize, rsize, j, i, r[j * rcount + i]);
  free(s);
  free(r);
}

/* Element e of the vector local rank q of a group gives. */
static long rs_value(int from_low, int q, int e) { return (from_low ? 1000L : 100000L) * (q + 1) + e; }
/* The reduction (sum) over the remote group of element e. */
static long rs_expected(int e) {
  long sum = 0;
  for (int q = 0; q < rsize; ++q) sum += rs_value(!low, q, e);
  return sum;
}

static void check_reduce_scatter(const int* counts, int block, int nonblocking, const char* what) {
  int total = 0, displ = 0;
  for (int i = 0; i < lsize; ++i) {
    if (i == lrank) displ = total;
    total += counts[i];
  }
  long* s = malloc(sizeof(long) * (size_t)(total + 1));
  long* r = malloc(sizeof(long) * (size_t)(counts[lrank] + 1));
  for (int e = 0; e < total; ++e) s[e] = rs_value(low, lrank, e);
  for (int i = 0; i <= counts[lrank]; ++i) r[i] = -1;
  MPI_Request q;
  if (block) {
    if (nonblocking) MPI_Ireduce_scatter_block(s, r, counts[0], MPI_LONG, MPI_SUM, inter, &q);
    else MPI_Reduce_scatter_block(s, r, counts[0], MPI_LONG, MPI_SUM, inter);
  } else {
    if (nonblocking) MPI_Ireduce_scatter(s, r, counts, MPI_LONG, MPI_SUM, inter, &q);
    else MPI_Reduce_scatter(s, r, counts, MPI_LONG, MPI_SUM, inter);
  }
  if (nonblocking) MPI_Wait(&q, MPI_STATUS_IGNORE);
  for (int i = 0; i < counts[lrank]; ++i)
    CHECK(r[i] == rs_expected(displ + i), "%s (%s group rank %d of %d, %d remote): element %d = %ld, expected %ld", what,
          low ? "low" : "high", lrank, lsize, rsize, i, r[i], rs_expected(displ + i));
  CHECK(r[counts[lrank]] == -1, "%s: wrote past its %d elements", what, counts[lrank]);
  free(s);
  free(r);
}

int main(int argc, char** argv) {
  mt_start("inter_coll_uneven", &argc, &argv);
  if (mt_size < 2) return mt_pass();
  for (int k = 1; k < mt_size; ++k) {
    low = mt_rank < k;
    MPI_Comm local;
    MPI_Comm_split(MPI_COMM_WORLD, low, mt_rank, &local);
    MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, low ? k : 0, 77, &inter);
    MPI_Comm_rank(inter, &lrank);
    MPI_Comm_size(inter, &lsize);
    MPI_Comm_remote_size(inter, &rsize);
    CHECK(lsize == (low ? k : mt_size - k) && rsize == mt_size - lsize, "group sizes %d / %d", lsize, rsize);
    for (int nb = 0; nb < 2; ++nb) {
      const char* a2a = nb ? "Ialltoall" : "Alltoall";
      check_alltoall(3, 3, nb, a2a);
      /* One direction only: the low group sends, the high group receives. */
      check_alltoall(low ? 2 : 0, low ? 0 : 2, nb, a2a);
      /* Low sends 2 per remote process, high sends 5. */
      check_alltoall(low ? 2 : 5, low ? 5 : 2, nb, a2a);
      /* Reduce_scatter_block: recvcount * local size is the same in both
       * groups (base * rsize * lsize elements). */
      int counts[8];
      for (int i = 0; i < lsize; ++i) counts[i] = 3 * rsize;
      check_reduce_scatter(counts, 1, nb, nb ? "Ireduce_scatter_block" : "Reduce_scatter_block");
      /* Reduce_scatter: uneven counts (a zero one too) summing to T. */
      int sum = 0;
      for (int i = 0; i < lsize - 1; ++i) sum += counts[i] = i;
      counts[lsize - 1] = T - sum;
      check_reduce_scatter(counts, 0, nb, nb ? "Ireduce_scatter" : "Reduce_scatter");
    }
    MPI_Comm_free(&inter);
    MPI_Comm_free(&local);
  }
  return mt_pass();
}
