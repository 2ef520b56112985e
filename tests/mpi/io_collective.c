/* MPI-IO collective access with two-phase aggregation: a 2-D
 * block-distributed array of doubles written with write_all through a
 * subarray view, under several hint settings (cb_nodes 1, 2 and all ranks;
 * cb_buffer_size small enough for many rounds; romio_cb_write enable /
 * disable / automatic), each time compared byte by byte with the serial
 * reference; read back with read_all through a different decomposition
 * (column blocks); a collective write that leaves holes keeps the file's
 * bytes in them (the aggregators read before they write); ranks with
 * nothing to write take part; the hints are reported by get_info. */
#include <fcntl.h>

#include "mpitest.h"

enum { ROWS = 40, COLS = 36 };

static double ref(int i, int j) { return i * 100.0 + j + 0.25; }

static void check_file(const char* name, const char* what) {
  static double all[ROWS * COLS];
  int fd = open(name, O_RDONLY);
  long n = (long)pread(fd, all, sizeof all, 0);
  close(fd);
  CHECK(n == (long)sizeof all, "%s: file size %ld", what, n);
  for (int i = 0; i < ROWS; ++i)
    for (int j = 0; j < COLS; ++j)
      CHECK(all[i * COLS + j] == ref(i, j), "%s: (%d,%d) = %g", what, i, j, all[i * COLS + j]);
}

static void decompose(int n, int parts, int p, int* start, int* len) {
  int base = n / parts, extra = n % parts;
  *start = p * base + (p < extra ? p : extra);
  *len = base + (p < extra);
}

int main(int argc, char** argv) {
  mt_start("io_collective", &argc, &argv);
  char name[512];
  mt_tmpname(MPI_COMM_WORLD, "collective", name, sizeof name);
  int dims[2] = {0, 0};
  MPI_Dims_create(mt_size, 2, dims);
  int r0, nr, c0, nc;
  decompose(ROWS, dims[0], mt_rank / dims[1], &r0, &nr);
  decompose(COLS, dims[1], mt_rank % dims[1], &c0, &nc);
  int gs[2] = {ROWS, COLS}, ls[2] = {nr, nc}, st0[2] = {r0, c0};
  MPI_Datatype block;
  MPI_Type_create_subarray(2, gs, ls, st0, MPI_ORDER_C, MPI_DOUBLE, &block);
  MPI_Type_commit(&block);
  double* local = malloc(sizeof(double) * nr * nc);
  for (int i = 0; i < nr; ++i)
    for (int j = 0; j < nc; ++j) local[i * nc + j] = ref(r0 + i, c0 + j);

  const char* settings[][3] = {
      /* cb_nodes, cb_buffer_size, romio_cb_write */
      {NULL, NULL, NULL}, {"1", "4096", "enable"}, {"2", "1024", "automatic"},
      {"4", "65536", "enable"}, {"1", NULL, "disable"},
  };
  for (unsigned s = 0; s < sizeof settings / sizeof settings[0]; ++s) {
    MPI_Info info;
    MPI_Info_create(&info);
    if (settings[s][0]) MPI_Info_set(info, "cb_nodes", settings[s][0]);
    if (settings[s][1]) MPI_Info_set(info, "cb_buffer_size", settings[s][1]);
    if (settings[s][2]) MPI_Info_set(info, "romio_cb_write", settings[s][2]);
    if (settings[s][2]) MPI_Info_set(info, "romio_cb_read", settings[s][2]);
    MPI_File fh;
    CHECK(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_RDWR | MPI_MODE_CREATE, info, &fh) == MPI_SUCCESS, "open");
    MPI_File_set_size(fh, 0);
    CHECK(MPI_File_set_view(fh, 0, MPI_DOUBLE, block, "native", info) == MPI_SUCCESS, "view");
    MPI_Info used;
    MPI_File_get_info(fh, &used);
    char val[MPI_MAX_INFO_VAL + 1];
    int flag;
    MPI_Info_get(used, "cb_nodes", MPI_MAX_INFO_VAL, val, &flag);
    int expect_nodes = settings[s][0] ? atoi(settings[s][0]) : 1;
    if (expect_nodes > mt_size) expect_nodes = mt_size;
    CHECK(flag && atoi(val) == expect_nodes, "setting %u: cb_nodes %s", s, flag ? val : "absent");
    MPI_Info_free(&used);
    MPI_Status st;
    CHECK(MPI_File_write_all(fh, local, nr * nc, MPI_DOUBLE, &st) == MPI_SUCCESS, "write_all");
    int cnt;
    MPI_Get_count(&st, MPI_DOUBLE, &cnt);
    CHECK(cnt == nr * nc, "write_all count %d", cnt);
    MPI_File_sync(fh);
    MPI_Barrier(MPI_COMM_WORLD);
    char what[64];
    snprintf(what, sizeof what, "setting %u", s);
    check_file(name, what);
    /* Read back by column blocks (another decomposition). */
    int cc0, cnc;
    decompose(COLS, mt_size, mt_rank, &cc0, &cnc);
    int cls_[2] = {ROWS, cnc}, cst[2] = {0, cc0};
    MPI_Datatype cols;
    MPI_Type_create_subarray(2, gs, cls_, cst, MPI_ORDER_C, MPI_DOUBLE, &cols);
    MPI_Type_commit(&cols);
    MPI_File_set_view(fh, 0, MPI_DOUBLE, cols, "native", info);
    double* back = calloc((size_t)ROWS * (cnc ? cnc : 1), sizeof(double));
    CHECK(MPI_File_read_all(fh, back, ROWS * cnc, MPI_DOUBLE, &st) == MPI_SUCCESS, "read_all");
    MPI_Get_count(&st, MPI_DOUBLE, &cnt);
    CHECK(cnt == ROWS * cnc, "read_all count %d", cnt);
    for (int i = 0; i < ROWS; ++i)
      for (int j = 0; j < cnc; ++j)
        CHECK(back[i * cnc + j] == ref(i, cc0 + j), "%s read (%d,%d) = %g", what, i, cc0 + j, back[i * cnc + j]);
    free(back);
    MPI_Type_free(&cols);
    MPI_File_close(&fh);
    MPI_Info_free(&info);
    MPI_Barrier(MPI_COMM_WORLD);
  }

  /* Holes keep the file's bytes; rank 0 has nothing to write. */
  {
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "romio_cb_write", "enable");
    MPI_Info_set(info, "cb_buffer_size", "512");
    MPI_File fh;
    MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_RDWR | MPI_MODE_CREATE, info, &fh);
    MPI_File_set_size(fh, 0);
    enum { LEN = 8192 };
    static unsigned char fill[LEN];
    memset(fill, 0xee, LEN);
    if (mt_rank == 0) MPI_File_write_at(fh, 0, fill, LEN, MPI_BYTE, MPI_STATUS_IGNORE);
    MPI_Barrier(MPI_COMM_WORLD);
    /* Rank r writes 3-byte runs every 8*size bytes at offset 8*r + 1. */
    MPI_Datatype runs, ft;
    MPI_Type_vector(1, 3, 1, MPI_BYTE, &runs);
    MPI_Type_create_resized(runs, 0, 8 * mt_size, &ft);
    MPI_Type_commit(&ft);
    MPI_Type_free(&runs);
    MPI_File_set_view(fh, 8 * mt_rank + 1, MPI_BYTE, ft, "native", info);
    int n = mt_rank == 0 ? 0 : 3 * (LEN / (8 * mt_size) - 1);
    unsigned char* data = malloc(n + 1);
    memset(data, 'a' + mt_rank, n + 1);
    CHECK(MPI_File_write_all(fh, data, n, MPI_BYTE, MPI_STATUS_IGNORE) == MPI_SUCCESS, "write_all with holes");
    MPI_Barrier(MPI_COMM_WORLD);
    static unsigned char all[LEN];
    int fd = open(name, O_RDONLY);
    CHECK(pread(fd, all, LEN, 0) == LEN, "read holes file");
    close(fd);
    for (long k = 0; k < LEN; ++k) {
      long tile = k / (8 * mt_size), in = k % (8 * mt_size);
      int r = (int)(in / 8), off = (int)(in % 8);
      int written = r != 0 && off >= 1 && off <= 3 && tile < LEN / (8 * mt_size) - 1;
      CHECK(all[k] == (written ? 'a' + r : 0xee), "byte %ld is %02x", k, all[k]);
    }
    free(data);
    MPI_Type_free(&ft);
    MPI_File_close(&fh);
    MPI_Info_free(&info);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (mt_rank == 0) MPI_File_delete(name, MPI_INFO_NULL);
  MPI_Type_free(&block);
  free(local);
  return mt_pass();
}
