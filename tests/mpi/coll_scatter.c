/* MPI_Scatter: every root, tiny / medium / > 64 KiB blocks (binomial and
 * linear), bytes against ints, zero counts, MPI_ERR_ROOT. */
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"

static int val(int rank, int i) { return rank * 1000003 + i * 5 + 3; }

int main(int argc, char** argv) {
  mt_start("coll_scatter", &argc, &argv);
  int n = mt_size, r = mt_rank;
  const int counts[] = {0, 1, 37, 20000};
  for (int root = 0; root < n; ++root) {
    for (int k = 0; k < 4; ++k) {
      int cnt = counts[k];
      int* s = malloc(sizeof(int) * ((size_t)cnt * n + 1));
      int* d = malloc(sizeof(int) * (cnt + 1));
      for (int p = 0; p < n; ++p)
        for (int i = 0; i < cnt; ++i) s[(long)p * cnt + i] = r == root ? val(p, i) : -5;
      for (int i = 0; i < cnt; ++i) d[i] = -1;
      CHECK(MPI_Scatter(s, cnt, MPI_INT, d, cnt, MPI_INT, root, MPI_COMM_WORLD) == MPI_SUCCESS, "scatter");
      for (int i = 0; i < cnt; ++i) CHECK(d[i] == val(r, i), "root %d cnt %d: [%d] = %d", root, cnt, i, d[i]);
      for (int i = 0; i < cnt; ++i) d[i] = -1;
      CHECK(MPI_Scatter(s, cnt, MPI_INT, d, cnt * (int)sizeof(int), MPI_BYTE, root, MPI_COMM_WORLD) == MPI_SUCCESS,
            "scatter to bytes");
      for (int i = 0; i < cnt; ++i) CHECK(d[i] == val(r, i), "bytes: [%d] = %d", i, d[i]);
      free(s);
      free(d);
    }
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int x[64], y, cls, err = MPI_Scatter(x, 1, MPI_INT, &y, 1, MPI_INT, -3, MPI_COMM_WORLD);
  MPI_Error_class(err, &cls);
  CHECK(cls == MPI_ERR_ROOT, "root -3 gave %d", err);
  err = MPI_Scatter(x, 1, MPI_INT, &y, 1, MPI_DATATYPE_NULL, 0, MPI_COMM_WORLD);
  MPI_Error_class(err, &cls);
  CHECK(cls == MPI_ERR_TYPE, "null type gave %d", err);
  return mt_pass();
}
