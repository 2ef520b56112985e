/* MPI_Gather: every root, tiny / medium / > 64 KiB blocks (binomial and
 * linear algorithms), different send and receive datatypes with the same
 * signature, zero counts, and MPI_ERR_ROOT / MPI_ERR_COUNT with
 * MPI_ERRORS_RETURN. */
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"

static int val(int rank, int i) { return rank * 1000003 + i * 7 + 1; }

int main(int argc, char** argv) {
  mt_start("coll_gather", &argc, &argv);
  int n = mt_size, r = mt_rank;
  const int counts[] = {0, 1, 37, 20000}; /* 20000 ints = 80 KB per rank */
  for (int root = 0; root < n; ++root) {
    for (int k = 0; k < 4; ++k) {
      int cnt = counts[k];
      int* s = malloc(sizeof(int) * (cnt + 1));
      int* g = malloc(sizeof(int) * ((size_t)cnt * n + 1));
      for (int i = 0; i < cnt; ++i) s[i] = val(r, i);
      for (long i = 0; i < (long)cnt * n; ++i) g[i] = -1;
      CHECK(MPI_Gather(s, cnt, MPI_INT, g, cnt, MPI_INT, root, MPI_COMM_WORLD) == MPI_SUCCESS, "gather");
      if (r == root)
        for (int p = 0; p < n; ++p)
          for (int i = 0; i < cnt; ++i)
            CHECK(g[(long)p * cnt + i] == val(p, i), "root %d cnt %d: block %d [%d] = %d", root, cnt, p, i,
                  g[(long)p * cnt + i]);
      /* Send as bytes, receive as ints: only the signature matters. */
      for (long i = 0; i < (long)cnt * n; ++i) g[i] = -1;
      CHECK(MPI_Gather(s, cnt * (int)sizeof(int), MPI_BYTE, g, cnt, MPI_INT, root, MPI_COMM_WORLD) == MPI_SUCCESS,
            "gather bytes");
      if (r == root)
        for (int p = 0; p < n; ++p)
          for (int i = 0; i < cnt; ++i) CHECK(g[(long)p * cnt + i] == val(p, i), "bytes: block %d [%d]", p, i);
      free(s);
      free(g);
    }
  }
  /* Non-root receive arguments are ignored. */
  int one = r, all[64];
  CHECK(MPI_Gather(&one, 1, MPI_INT, r == 0 ? all : NULL, 1, r == 0 ? MPI_INT : MPI_DATATYPE_NULL, 0,
                   MPI_COMM_WORLD) == MPI_SUCCESS, "gather ignored args");
  if (r == 0)
    for (int p = 0; p < n; ++p) CHECK(all[p] == p, "all[%d] = %d", p, all[p]);

  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int cls, err = MPI_Gather(&one, 1, MPI_INT, all, 1, MPI_INT, n, MPI_COMM_WORLD);
  MPI_Error_class(err, &cls);
  CHECK(cls == MPI_ERR_ROOT, "root n gave %d", err);
  err = MPI_Gather(&one, -1, MPI_INT, all, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Error_class(err, &cls);
  CHECK(cls == MPI_ERR_COUNT, "negative count gave %d", err);
  err = MPI_Gather(&one, 1, MPI_INT, all, 1, MPI_INT, 0, MPI_COMM_NULL);
  MPI_Error_class(err, &cls);
  CHECK(cls == MPI_ERR_COMM, "MPI_COMM_NULL gave %d", err);
  return mt_pass();
}
