/* Blocking collectives on basic types: MPI_Barrier, MPI_Bcast (small and
 * rendezvous-sized, every root), MPI_Reduce (every root, several ops and
 * types) and MPI_Allreduce (in place too); a wrong op is reported. */
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"

int main(int argc, char** argv) {
  mt_start("coll_basic", &argc, &argv);
  int n = mt_size, r = mt_rank;
  for (int i = 0; i < 3; ++i) CHECK(MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS, "barrier");

  for (int root = 0; root < n; ++root) {
    for (long bytes = 1; bytes <= 300000; bytes *= 37) {
      unsigned char* buf = malloc(bytes);
      if (r == root) mt_fill(buf, bytes, root + (int)bytes);
      else memset(buf, 0, bytes);
      CHECK(MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD) == MPI_SUCCESS, "bcast");
      CHECK(mt_check(buf, bytes, root + (int)bytes) < 0, "bcast of %ld bytes from root %d", bytes, root);
      free(buf);
    }
    int v[5], out[5] = {0};
    for (int i = 0; i < 5; ++i) v[i] = (r + 1) * (i + 1);
    CHECK(MPI_Reduce(v, out, 5, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD) == MPI_SUCCESS, "reduce");
    if (r == root)
      for (int i = 0; i < 5; ++i) CHECK(out[i] == (i + 1) * n * (n + 1) / 2, "reduce sum [%d] = %d", i, out[i]);
    double d = r * 1.5, dmax = -1;
    CHECK(MPI_Reduce(&d, &dmax, 1, MPI_DOUBLE, MPI_MAX, root, MPI_COMM_WORLD) == MPI_SUCCESS, "reduce max");
    if (r == root) CHECK(dmax == (n - 1) * 1.5, "reduce max = %g", dmax);
  }

  /* Allreduce: small (recursive doubling) and large (Rabenseifner). */
  for (int count = 1; count <= 40000; count *= 20) {
    long* a = malloc(sizeof(long) * count);
    long* s = malloc(sizeof(long) * count);
    for (int i = 0; i < count; ++i) a[i] = (long)(r + 1) * i;
    CHECK(MPI_Allreduce(a, s, count, MPI_LONG, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS, "allreduce");
    for (int i = 0; i < count; ++i) CHECK(s[i] == (long)i * n * (n + 1) / 2, "allreduce[%d] = %ld", i, s[i]);
    /* In place. */
    for (int i = 0; i < count; ++i) s[i] = r - i;
    CHECK(MPI_Allreduce(MPI_IN_PLACE, s, count, MPI_LONG, MPI_MIN, MPI_COMM_WORLD) == MPI_SUCCESS, "in place");
    for (int i = 0; i < count; ++i) CHECK(s[i] == -i, "allreduce min in place[%d] = %ld", i, s[i]);
    free(a);
    free(s);
  }
  unsigned flags = 1u << r, all = 0;
  CHECK(MPI_Allreduce(&flags, &all, 1, MPI_UNSIGNED, MPI_BOR, MPI_COMM_WORLD) == MPI_SUCCESS, "bor");
  CHECK(all == (1u << n) - 1, "bor = %x", all);

  /* Collectives on a split communicator stay apart from MPI_COMM_WORLD's. */
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, r % 2, r, &half);
  int one = 1, count_half = 0;
  CHECK(MPI_Allreduce(&one, &count_half, 1, MPI_INT, MPI_SUM, half) == MPI_SUCCESS, "allreduce on split");
  CHECK(count_half == (n + 1 - r % 2) / 2, "split size by allreduce = %d", count_half);
  MPI_Comm_free(&half);

  /* Zero-byte operations (the short path: no data on any rank) leave the
   * buffers alone and keep the communicator usable for what follows,
   * blocking and non-blocking mixed. */
  {
    int guard[2] = {0x5a5a, 0x5a5a};
    for (int k = 0; k < 3; ++k) {
      CHECK(MPI_Allreduce(guard, guard + 1, 0, MPI_INT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS, "allreduce of 0");
      CHECK(MPI_Reduce(guard, guard + 1, 0, MPI_INT, MPI_SUM, k % n, MPI_COMM_WORLD) == MPI_SUCCESS, "reduce of 0");
      CHECK(MPI_Bcast(guard, 0, MPI_INT, k % n, MPI_COMM_WORLD) == MPI_SUCCESS, "bcast of 0");
      CHECK(MPI_Allreduce(NULL, NULL, 0, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD) == MPI_SUCCESS, "allreduce of 0, null");
      MPI_Request q;
      CHECK(MPI_Iallreduce(guard, guard + 1, 0, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q) == MPI_SUCCESS, "iallreduce 0");
      CHECK(MPI_Wait(&q, MPI_STATUS_IGNORE) == MPI_SUCCESS, "wait iallreduce of 0");
      int v = r + k, sum = -1;
      CHECK(MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS, "allreduce after 0");
      CHECK(sum == n * (n - 1) / 2 + n * k, "allreduce after the zero-byte ones: %d", sum);
    }
    CHECK(guard[0] == 0x5a5a && guard[1] == 0x5a5a, "zero-byte operations wrote %x %x", guard[0], guard[1]);
    /* Scatter, gather, allgather and alltoall of 0 bytes, where odd ranks
     * describe their (empty) blocks with a derived type and even ranks with
     * a predefined one, and the root passes MPI_IN_PLACE or not: every rank
     * must skip them alike, or the collectives after them would pair up
     * wrongly. */
    MPI_Datatype pair;
    MPI_Type_contiguous(2, MPI_INT, &pair);
    MPI_Type_commit(&pair);
    const MPI_Datatype mine = r % 2 ? pair : MPI_INT;
    for (int k = 0; k < 3; ++k) {
      const int root = k % n;
      void* inplace = r == root && k == 1 ? MPI_IN_PLACE : guard + 1;
      CHECK(MPI_Scatter(guard, 0, mine, inplace, 0, mine, root, MPI_COMM_WORLD) == MPI_SUCCESS, "scatter of 0");
      CHECK(MPI_Gather(r == root && k == 2 ? MPI_IN_PLACE : guard, 0, mine, guard + 1, 0, mine, root,
                       MPI_COMM_WORLD) == MPI_SUCCESS, "gather of 0");
      CHECK(MPI_Allgather(guard, 0, mine, guard + 1, 0, MPI_INT, MPI_COMM_WORLD) == MPI_SUCCESS, "allgather of 0");
      CHECK(MPI_Alltoall(k == 1 ? MPI_IN_PLACE : guard, 0, MPI_INT, guard + 1, 0, mine, MPI_COMM_WORLD) == MPI_SUCCESS,
            "alltoall of 0");
      int v = r * 3 + k, got[64];
      CHECK(n <= 64, "at most 64 ranks");
      CHECK(MPI_Allgather(&v, 1, MPI_INT, got, 1, MPI_INT, MPI_COMM_WORLD) == MPI_SUCCESS, "allgather after 0");
      for (int i = 0; i < n; ++i) CHECK(got[i] == i * 3 + k, "allgather after the zero-byte ones: [%d] = %d", i, got[i]);
    }
    MPI_Type_free(&pair);
    CHECK(guard[0] == 0x5a5a && guard[1] == 0x5a5a, "zero-byte operations wrote %x %x", guard[0], guard[1]);
  }

  /* Errors are reported, not crashes. */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  double x = 1, y;
  int err = MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_BAND, MPI_COMM_WORLD);
  int cls;
  MPI_Error_class(err, &cls);
  CHECK(cls == MPI_ERR_OP, "MPI_BAND on MPI_DOUBLE gave %d", err);
  err = MPI_Bcast(&x, 1, MPI_DOUBLE, n, MPI_COMM_WORLD);
  MPI_Error_class(err, &cls);
  CHECK(cls == MPI_ERR_ROOT, "root out of range gave %d", err);
  return mt_pass();
}
