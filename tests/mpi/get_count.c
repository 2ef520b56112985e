/* Get_count / Get_elements / Type_size over the basic datatypes; a byte
 * count that is not a whole number of items gives MPI_UNDEFINED. */
#include "mpitest.h"

int main(int argc, char** argv) {
  mt_start("get_count", &argc, &argv);
  const MPI_Datatype types[] = {MPI_CHAR, MPI_SHORT, MPI_INT, MPI_LONG, MPI_LONG_LONG, MPI_FLOAT, MPI_DOUBLE,
                                MPI_UNSIGNED, MPI_INT8_T, MPI_UINT16_T, MPI_INT32_T, MPI_UINT64_T, MPI_C_BOOL};
  const int sizes[] = {sizeof(char), sizeof(short), sizeof(int), sizeof(long), sizeof(long long), sizeof(float),
                       sizeof(double), sizeof(unsigned), 1, 2, 4, 8, sizeof(_Bool)};
  const int nt = sizeof types / sizeof types[0];
  int peer = (mt_rank + 1) % mt_size, from = (mt_rank + mt_size - 1) % mt_size;
  static char out[8 * 100], in[8 * 100];
  for (int t = 0; t < nt; ++t) {
    int sz = -1;
    MPI_Type_size(types[t], &sz);
    CHECK(sz == sizes[t], "Type_size of type %d: %d", t, sz);
    for (int n = 0; n <= 100; n += 33) {
      MPI_Status st;
      MPI_Sendrecv(out, n, types[t], peer, t, in, 100, types[t], from, t, MPI_COMM_WORLD, &st);
      int c = -1, e = -1;
      MPI_Get_count(&st, types[t], &c);
      MPI_Get_elements(&st, types[t], &e);
      CHECK(c == n && e == n, "type %d: sent %d, count %d elements %d", t, n, c, e);
    }
  }
  /* 7 bytes received, read as ints: undefined; as bytes: 7. */
  MPI_Status st;
  MPI_Sendrecv(out, 7, MPI_BYTE, peer, 99, in, 100, MPI_BYTE, from, 99, MPI_COMM_WORLD, &st);
  int c = 0;
  MPI_Get_count(&st, MPI_INT, &c);
  CHECK(c == MPI_UNDEFINED, "7 bytes as ints: %d", c);
  MPI_Get_count(&st, MPI_BYTE, &c);
  CHECK(c == 7, "7 bytes as bytes: %d", c);
  return mt_pass();
}
