/* MPI_Type_vector: a matrix column sent and received as contiguous data and
 * vice versa, several columns at once through a resized column type, and
 * non-blocking sends/receives with a vector on both sides. Ring exchange, so
 * it runs at any process count (1: a rank talks to itself). */
#include "mpitest.h"

#define ROWS 64
#define COLS 48

static double value(int rank, int i, int j) { return rank * 100000.0 + i * 100.0 + j; }

int main(int argc, char** argv) {
  mt_start("type_vector", &argc, &argv);
  int next = (mt_rank + 1) % mt_size, prev = (mt_rank + mt_size - 1) % mt_size;
  static double a[ROWS][COLS], b[ROWS][COLS], col[ROWS];
  for (int i = 0; i < ROWS; ++i)
    for (int j = 0; j < COLS; ++j) a[i][j] = value(mt_rank, i, j);

  MPI_Datatype column;
  MPI_Type_vector(ROWS, 1, COLS, MPI_DOUBLE, &column);
  MPI_Type_commit(&column);
  int size = 0;
  MPI_Aint lb = -1, extent = 0;
  MPI_Type_size(column, &size);
  MPI_Type_get_extent(column, &lb, &extent);
  CHECK(size == ROWS * (int)sizeof(double), "size %d", size);
  CHECK(lb == 0 && extent == (MPI_Aint)(((ROWS - 1) * COLS + 1) * sizeof(double)), "lb %ld extent %ld", (long)lb,
        (long)extent);

  /* Column 5 out, contiguous in. */
  MPI_Status st;
  for (int i = 0; i < ROWS; ++i) col[i] = -1;
  MPI_Sendrecv(&a[0][5], 1, column, next, 1, col, ROWS, MPI_DOUBLE, prev, 1, MPI_COMM_WORLD, &st);
  int count = -1;
  MPI_Get_count(&st, MPI_DOUBLE, &count);
  CHECK(count == ROWS, "count %d", count);
  MPI_Get_count(&st, column, &count);
  CHECK(count == 1, "count in columns %d", count);
  for (int i = 0; i < ROWS; ++i) CHECK(col[i] == value(prev, i, 5), "column row %d: %g", i, col[i]);

  /* Contiguous out, column 7 in: the other columns stay untouched. */
  for (int i = 0; i < ROWS; ++i)
    for (int j = 0; j < COLS; ++j) b[i][j] = -2;
  for (int i = 0; i < ROWS; ++i) col[i] = value(mt_rank, i, 1000);
  MPI_Sendrecv(col, ROWS, MPI_DOUBLE, next, 2, &b[0][7], 1, column, prev, 2, MPI_COMM_WORLD, &st);
  for (int i = 0; i < ROWS; ++i)
    for (int j = 0; j < COLS; ++j)
      CHECK(b[i][j] == (j == 7 ? value(prev, i, 1000) : -2), "b[%d][%d] = %g", i, j, b[i][j]);

  /* Three adjacent columns as count 3 of a column resized to one double. */
  MPI_Datatype col1;
  MPI_Type_create_resized(column, 0, sizeof(double), &col1);
  MPI_Type_commit(&col1);
  for (int i = 0; i < ROWS; ++i)
    for (int j = 0; j < COLS; ++j) b[i][j] = -3;
  MPI_Request rq[2];
  MPI_Irecv(&b[0][10], 3, col1, prev, 3, MPI_COMM_WORLD, &rq[0]);
  MPI_Isend(&a[0][20], 3, col1, next, 3, MPI_COMM_WORLD, &rq[1]);
  MPI_Status sts[2];
  MPI_Waitall(2, rq, sts);
  MPI_Get_count(&sts[0], col1, &count);
  CHECK(count == 3, "count of resized columns %d", count);
  /* Packing order is element by element: column 20 first, then 21, 22. */
  for (int i = 0; i < ROWS; ++i)
    for (int j = 0; j < COLS; ++j)
      CHECK(b[i][j] == (j >= 10 && j < 13 ? value(prev, i, j + 10) : -3), "3 columns: b[%d][%d] = %g", i, j, b[i][j]);

  /* Blocking Send/Recv of a vector with blocks of 4, through a partner pair. */
  MPI_Datatype blocks;
  MPI_Type_vector(ROWS / 2, 4, 2 * COLS, MPI_DOUBLE, &blocks);
  MPI_Type_commit(&blocks);
  for (int i = 0; i < ROWS; ++i)
    for (int j = 0; j < COLS; ++j) b[i][j] = -4;
  if (mt_size == 1) {
    MPI_Sendrecv(&a[0][2], 1, blocks, 0, 4, &b[0][2], 1, blocks, 0, 4, MPI_COMM_WORLD, &st);
  } else if (mt_rank % 2 == 0 && mt_rank + 1 < mt_size) {
    MPI_Send(&a[0][2], 1, blocks, mt_rank + 1, 4, MPI_COMM_WORLD);
    MPI_Recv(&b[0][2], 1, blocks, mt_rank + 1, 4, MPI_COMM_WORLD, &st);
  } else if (mt_rank % 2 == 1) {
    MPI_Recv(&b[0][2], 1, blocks, mt_rank - 1, 4, MPI_COMM_WORLD, &st);
    MPI_Send(&a[0][2], 1, blocks, mt_rank - 1, 4, MPI_COMM_WORLD);
  }
  if (mt_size == 1 || mt_rank + 1 < mt_size || mt_rank % 2 == 1) {
    int partner = mt_size == 1 ? 0 : (mt_rank ^ 1);
    for (int i = 0; i < ROWS; ++i)
      for (int j = 0; j < COLS; ++j) {
        int in = i % 2 == 0 && j >= 2 && j < 6;
        CHECK(b[i][j] == (in ? value(partner, i, j) : -4), "blocks: b[%d][%d] = %g", i, j, b[i][j]);
      }
  }
  MPI_Type_free(&column);
  MPI_Type_free(&col1);
  MPI_Type_free(&blocks);
  CHECK(column == MPI_DATATYPE_NULL, "Type_free sets MPI_DATATYPE_NULL");
  return mt_pass();
}
