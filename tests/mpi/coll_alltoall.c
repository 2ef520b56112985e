/* MPI_Alltoall: block sizes from 0 to > 64 KiB (linear, pairwise; Bruck at
 * >= 8 processes), bytes against ints, and a sub-communicator. */
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"

static int val(int src, int dst, int i) { return src * 1000003 + dst * 10007 + i; }

static void run(MPI_Comm comm) {
  int n, r;
  MPI_Comm_size(comm, &n);
  MPI_Comm_rank(comm, &r);
  const int counts[] = {0, 1, 60, 10000, 20000}; /* 20000 ints = 80 KB blocks */
  for (int k = 0; k < 5; ++k) {
    int cnt = counts[k];
    int* s = malloc(sizeof(int) * ((size_t)cnt * n + 1));
    int* d = malloc(sizeof(int) * ((size_t)cnt * n + 1));
    for (int p = 0; p < n; ++p)
      for (int i = 0; i < cnt; ++i) s[(long)p * cnt + i] = val(r, p, i);
    for (long i = 0; i < (long)cnt * n; ++i) d[i] = -1;
    CHECK(MPI_Alltoall(s, cnt, MPI_INT, d, cnt, MPI_INT, comm) == MPI_SUCCESS, "alltoall");
    for (int p = 0; p < n; ++p)
      for (int i = 0; i < cnt; ++i)
        CHECK(d[(long)p * cnt + i] == val(p, r, i), "cnt %d: from %d [%d] = %d", cnt, p, i, d[(long)p * cnt + i]);
    for (long i = 0; i < (long)cnt * n; ++i) d[i] = -1;
    CHECK(MPI_Alltoall(s, cnt * (int)sizeof(int), MPI_BYTE, d, cnt, MPI_INT, comm) == MPI_SUCCESS, "bytes");
    for (int p = 0; p < n; ++p)
      for (int i = 0; i < cnt; ++i) CHECK(d[(long)p * cnt + i] == val(p, r, i), "bytes: from %d [%d]", p, i);
    free(s);
    free(d);
  }
}

int main(int argc, char** argv) {
  mt_start("coll_alltoall", &argc, &argv);
  run(MPI_COMM_WORLD);
  MPI_Comm sub;
  MPI_Comm_split(MPI_COMM_WORLD, mt_rank % 2, -mt_rank, &sub); /* reversed rank order */
  run(sub);
  MPI_Comm_free(&sub);
  return mt_pass();
}
