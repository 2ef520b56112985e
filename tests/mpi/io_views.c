/* MPI-IO views: etype/filetype built with vector, indexed, struct,
 * subarray and darray; independent and collective writes through them
 * checked byte by byte against a serial reference computed on every rank;
 * reads back through a different view; get_view (predefined handles come
 * back as is, derived ones as new handles), get_byte_offset,
 * get_type_extent, view errors (uncommitted, negative displacement, bad
 * data representation), and "external32" round trips (big-endian bytes
 * in the file), also through holed filetypes laid out in external32
 * sizes. */
#include <fcntl.h>

#include "mpitest.h"

static int cls(int err) {
  char text[MPI_MAX_ERROR_STRING];
  return mt_error(err, text);
}

/* The whole file, read with POSIX on every rank (after a barrier). */
static long slurp(const char* name, unsigned char* buf, long max) {
  int fd = open(name, O_RDONLY);
  long n = fd >= 0 ? (long)pread(fd, buf, max, 0) : -1;
  if (fd >= 0) close(fd);
  return n;
}

/* Value of element (i, j) of the global array. */
static int val(int i, int j) { return i * 1000 + j + 1; }

int main(int argc, char** argv) {
  mt_start("io_views", &argc, &argv);
  char name[512];
  mt_tmpname(MPI_COMM_WORLD, "views", name, sizeof name);
  MPI_File fh;
  MPI_Status st;
  CHECK(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_RDWR | MPI_MODE_CREATE | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL,
                      &fh) == MPI_SUCCESS, "open");

  /* ---- vector filetype: rank r owns every size-th int, interleaved ---- */
  enum { K = 64 };
  {
    MPI_Datatype one;
    MPI_Type_create_resized(MPI_INT, 0, (MPI_Aint)sizeof(int) * mt_size, &one);
    MPI_Type_commit(&one);
    CHECK(MPI_File_set_view(fh, (MPI_Offset)sizeof(int) * mt_rank, MPI_INT, one, "native", MPI_INFO_NULL) ==
              MPI_SUCCESS, "set_view interleaved");
    int data[K];
    for (int k = 0; k < K; ++k) data[k] = k * mt_size + mt_rank;
    CHECK(MPI_File_write_all(fh, data, K, MPI_INT, &st) == MPI_SUCCESS, "write_all interleaved");
    int cnt;
    MPI_Get_count(&st, MPI_INT, &cnt);
    CHECK(cnt == K, "count %d", cnt);
    MPI_Offset byte;
    MPI_File_get_byte_offset(fh, 3, &byte);
    CHECK(byte == (MPI_Offset)sizeof(int) * (3 * mt_size + mt_rank), "get_byte_offset %lld", byte);
    MPI_Offset pos;
    MPI_File_get_position(fh, &pos);
    CHECK(pos == K, "pointer moved by K etypes (%lld)", pos);
    MPI_Barrier(MPI_COMM_WORLD);
    int all[K * 4];
    CHECK(slurp(name, (unsigned char*)all, sizeof all) == (long)(sizeof(int) * K * mt_size), "file size");
    for (int k = 0; k < K * mt_size; ++k) CHECK(all[k] == k, "interleaved file int %d is %d", k, all[k]);
    /* Read back independently, through the same view. */
    int back[K];
    memset(back, 0, sizeof back);
    CHECK(MPI_File_read_at(fh, 0, back, K, MPI_INT, &st) == MPI_SUCCESS, "read_at through the view");
    for (int k = 0; k < K; ++k) CHECK(back[k] == data[k], "read back %d: %d", k, back[k]);
    /* get_view: the derived filetype comes back as a new handle. */
    MPI_Offset disp;
    MPI_Datatype et, ftype;
    char rep[MPI_MAX_DATAREP_STRING];
    CHECK(MPI_File_get_view(fh, &disp, &et, &ftype, rep) == MPI_SUCCESS, "get_view");
    CHECK(disp == (MPI_Offset)sizeof(int) * mt_rank && et == MPI_INT && strcmp(rep, "native") == 0, "view values");
    MPI_Aint lb, ext;
    MPI_Type_get_extent(ftype, &lb, &ext);
    CHECK(ftype != one && ext == (MPI_Aint)sizeof(int) * mt_size, "filetype copy (extent %ld)", (long)ext);
    MPI_Type_free(&ftype);
    MPI_Aint fext;
    MPI_File_get_type_extent(fh, one, &fext);
    CHECK(fext == ext, "get_type_extent");
    MPI_Type_free(&one);
    /* The view outlives the user's handle. */
    memset(back, 0, sizeof back);
    CHECK(MPI_File_read_at_all(fh, 0, back, K, MPI_INT, &st) == MPI_SUCCESS, "read_at_all after Type_free");
    for (int k = 0; k < K; ++k) CHECK(back[k] == data[k], "collective read back %d: %d", k, back[k]);
  }

  /* ---- subarray: 2-D block distribution, collective write ---- */
  {
    int px = mt_size >= 4 ? 2 : 1, py = mt_size / px;
    int gs[2] = {8 * px, 6 * py}, ls[2] = {8, 6};
    int starts[2] = {(mt_rank / py) * 8, (mt_rank % py) * 6};
    MPI_Datatype sub;
    MPI_Type_create_subarray(2, gs, ls, starts, MPI_ORDER_C, MPI_INT, &sub);
    MPI_Type_commit(&sub);
    MPI_File_set_size(fh, 0);
    CHECK(MPI_File_set_view(fh, 0, MPI_INT, sub, "native", MPI_INFO_NULL) == MPI_SUCCESS, "subarray view");
    /* Local block with a halo of one: the memory type is a subarray too. */
    int mem[10][8];
    for (int i = 0; i < 10; ++i)
      for (int j = 0; j < 8; ++j) mem[i][j] = -1;
    for (int i = 0; i < 8; ++i)
      for (int j = 0; j < 6; ++j) mem[i + 1][j + 1] = val(starts[0] + i, starts[1] + j);
    MPI_Datatype memt;
    int ms[2] = {10, 8}, mss[2] = {8, 6}, mst[2] = {1, 1};
    MPI_Type_create_subarray(2, ms, mss, mst, MPI_ORDER_C, MPI_INT, &memt);
    MPI_Type_commit(&memt);
    CHECK(MPI_File_write_all(fh, mem, 1, memt, &st) == MPI_SUCCESS, "write_all subarray");
    MPI_Barrier(MPI_COMM_WORLD);
    static int all[16 * 12 * 4];
    long n = slurp(name, (unsigned char*)all, sizeof all);
    CHECK(n == (long)sizeof(int) * gs[0] * gs[1], "subarray file size %ld", n);
    for (int i = 0; i < gs[0]; ++i)
      for (int j = 0; j < gs[1]; ++j) CHECK(all[i * gs[1] + j] == val(i, j), "subarray (%d,%d) = %d", i, j, all[i * gs[1] + j]);
    /* Read it back into the halo buffer, independently. */
    for (int i = 0; i < 10; ++i)
      for (int j = 0; j < 8; ++j) mem[i][j] = -1;
    CHECK(MPI_File_read_at(fh, 0, mem, 1, memt, &st) == MPI_SUCCESS, "read subarray");
    for (int i = 0; i < 10; ++i)
      for (int j = 0; j < 8; ++j) {
        int inside = i >= 1 && i <= 8 && j >= 1 && j <= 6;
        CHECK(mem[i][j] == (inside ? val(starts[0] + i - 1, starts[1] + j - 1) : -1), "halo read (%d,%d)", i, j);
      }
    MPI_Type_free(&sub);
    MPI_Type_free(&memt);
  }

  /* ---- indexed filetype: rank r writes blocks of 1, 2, 3 ints ---- */
  {
    int bl[3] = {1, 2, 3}, dp[3] = {0, 2, 5}; /* 6 ints of data in an extent of 8 */
    MPI_Datatype idx, ft;
    MPI_Type_indexed(3, bl, dp, MPI_INT, &idx);
    MPI_Type_create_resized(idx, 0, 8 * sizeof(int), &ft);
    MPI_Type_commit(&ft);
    MPI_Type_free(&idx);
    MPI_File_set_size(fh, 0);
    CHECK(MPI_File_set_view(fh, (MPI_Offset)mt_rank * 16 * sizeof(int), MPI_INT, ft, "native", MPI_INFO_NULL) ==
              MPI_SUCCESS, "indexed view");
    int d[12];
    for (int k = 0; k < 12; ++k) d[k] = mt_rank * 100 + k + 1;
    CHECK(MPI_File_write(fh, d, 12, MPI_INT, &st) == MPI_SUCCESS, "write indexed");
    MPI_Barrier(MPI_COMM_WORLD);
    int all[16 * 4];
    long n = slurp(name, (unsigned char*)all, sizeof all);
    CHECK(n >= (long)sizeof(int) * (16 * (mt_size - 1) + 14), "indexed file size %ld", n);
    static const int where[6] = {0, 2, 3, 5, 6, 7};
    for (int r = 0; r < mt_size; ++r) {
      int k = 0;
      for (int rep = 0; rep < 2; ++rep)
        for (int w = 0; w < 6; ++w, ++k) {
          int at = r * 16 + rep * 8 + where[w];
          CHECK(all[at] == r * 100 + k + 1, "indexed: rank %d item %d at %d is %d", r, k, at, all[at]);
        }
      for (int rep = 0; rep < 2; ++rep) {
        CHECK(all[r * 16 + rep * 8 + 1] == 0 && all[r * 16 + rep * 8 + 4] == 0, "indexed holes stay zero");
      }
    }
    MPI_File_seek(fh, 0, MPI_SEEK_SET);
    int back[12] = {0};
    CHECK(MPI_File_read(fh, back, 12, MPI_INT, &st) == MPI_SUCCESS, "read indexed");
    for (int k = 0; k < 12; ++k) CHECK(back[k] == d[k], "indexed read back %d", k);
    MPI_Type_free(&ft);
  }

  /* ---- struct filetype (char + double, holes), struct etype's size ---- */
  {
    int bl[2] = {1, 1};
    MPI_Aint dp[2] = {0, 8};
    MPI_Datatype ty[2] = {MPI_CHAR, MPI_DOUBLE}, st_t, ft;
    MPI_Type_create_struct(2, bl, dp, ty, &st_t);
    /* Each record has 9 data bytes in 16; ranks' records interleave. */
    MPI_Type_create_resized(st_t, 0, 16 * mt_size, &ft);
    MPI_Type_commit(&ft);
    MPI_Type_commit(&st_t);
    MPI_File_set_size(fh, 0);
    CHECK(MPI_File_set_view(fh, 16 * mt_rank, MPI_BYTE, ft, "native", MPI_INFO_NULL) == MPI_SUCCESS, "struct view");
    struct rec { char c; double d; } recs[5];
    for (int k = 0; k < 5; ++k) {
      recs[k].c = (char)('a' + mt_rank);
      recs[k].d = mt_rank + k * 0.5;
    }
    CHECK(MPI_File_write_at_all(fh, 0, recs, 5, st_t, &st) == MPI_SUCCESS, "write_at_all struct");
    int cnt;
    MPI_Get_count(&st, st_t, &cnt);
    CHECK(cnt == 5, "struct count %d", cnt);
    MPI_Barrier(MPI_COMM_WORLD);
    unsigned char all[16 * 5 * 4];
    slurp(name, all, sizeof all);
    for (int k = 0; k < 5; ++k)
      for (int r = 0; r < mt_size; ++r) {
        const unsigned char* p = all + 16 * (k * mt_size + r);
        double d;
        memcpy(&d, p + 8, 8);
        CHECK(p[0] == 'a' + r && d == r + k * 0.5, "struct record %d of rank %d", k, r);
      }
    struct rec back[5];
    memset(back, 0, sizeof back);
    CHECK(MPI_File_read_at_all(fh, 0, back, 5, st_t, &st) == MPI_SUCCESS, "read_at_all struct");
    for (int k = 0; k < 5; ++k) CHECK(back[k].c == recs[k].c && back[k].d == recs[k].d, "struct read back %d", k);
    MPI_Type_free(&ft);
    MPI_Type_free(&st_t);
  }

  /* ---- darray (block x cyclic) read with read_all ---- */
  {
    int gs[2] = {12, 10}, dist[2] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC},
        dargs[2] = {MPI_DISTRIBUTE_DFLT_DARG, MPI_DISTRIBUTE_DFLT_DARG}, ps[2] = {0, 0};
    MPI_Dims_create(mt_size, 2, ps);
    MPI_Datatype da;
    MPI_Type_create_darray(mt_size, mt_rank, 2, gs, dist, dargs, ps, MPI_ORDER_C, MPI_INT, &da);
    MPI_Type_commit(&da);
    MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "native", MPI_INFO_NULL);
    MPI_File_set_size(fh, 0);
    if (mt_rank == 0) {
      int whole[120];
      for (int i = 0; i < 12; ++i)
        for (int j = 0; j < 10; ++j) whole[i * 10 + j] = val(i, j);
      CHECK(MPI_File_write_at(fh, 0, whole, 120, MPI_INT, &st) == MPI_SUCCESS, "serial write");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(MPI_File_set_view(fh, 0, MPI_INT, da, "native", MPI_INFO_NULL) == MPI_SUCCESS, "darray view");
    int sz;
    MPI_Type_size(da, &sz);
    int n = sz / (int)sizeof(int), got[120];
    CHECK(MPI_File_read_all(fh, got, n, MPI_INT, &st) == MPI_SUCCESS, "read_all darray");
    /* Expected: the darray's own type map applied to the global array. */
    int whole[120], mine[120];
    for (int i = 0; i < 12; ++i)
      for (int j = 0; j < 10; ++j) whole[i * 10 + j] = val(i, j);
    int pos = 0;
    MPI_Pack(whole, 1, da, mine, sizeof mine, &pos, MPI_COMM_SELF);
    for (int k = 0; k < n; ++k) CHECK(got[k] == mine[k], "darray element %d: %d, not %d", k, got[k], mine[k]);
    MPI_Type_free(&da);
  }

  /* ---- view errors ---- */
  {
    MPI_Datatype unc;
    MPI_Type_contiguous(2, MPI_INT, &unc);
    CHECK(cls(MPI_File_set_view(fh, 0, MPI_INT, unc, "native", MPI_INFO_NULL)) == MPI_ERR_TYPE, "uncommitted filetype");
    MPI_Type_free(&unc);
    CHECK(cls(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "nonsense", MPI_INFO_NULL)) == MPI_ERR_UNSUPPORTED_DATAREP,
          "unknown data representation");
    CHECK(cls(MPI_File_set_view(fh, -4, MPI_INT, MPI_INT, "native", MPI_INFO_NULL)) == MPI_ERR_ARG, "negative disp");
    {
      int bl[2] = {1, 1}, dp[2] = {3, 0};
      MPI_Datatype down;
      MPI_Type_indexed(2, bl, dp, MPI_INT, &down);
      MPI_Type_commit(&down);
      CHECK(cls(MPI_File_set_view(fh, 0, MPI_INT, down, "native", MPI_INFO_NULL)) == MPI_ERR_TYPE,
            "decreasing filetype displacements");
      MPI_Type_free(&down);
    }
    CHECK(cls(MPI_File_set_view(fh, 0, MPI_DOUBLE, MPI_INT, "native", MPI_INFO_NULL)) == MPI_ERR_TYPE,
          "filetype not made of etypes");
    CHECK(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "native", MPI_INFO_NULL) == MPI_SUCCESS, "int view");
    short s3[3];
    CHECK(cls(MPI_File_write_at(fh, 0, s3, 3, MPI_SHORT, &st)) == MPI_ERR_ARG, "a half etype");
  }

  /* ---- external32: big-endian in the file, native in memory ---- */
  {
    MPI_File_set_size(fh, 0);
    CHECK(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "external32", MPI_INFO_NULL) == MPI_SUCCESS, "external32 view");
    int v[3] = {0x01020304 + mt_rank, -2, 7};
    CHECK(MPI_File_write_at_all(fh, 3 * mt_rank, v, 3, MPI_INT, &st) == MPI_SUCCESS, "write external32");
    MPI_Barrier(MPI_COMM_WORLD);
    unsigned char all[256];
    slurp(name, all, sizeof all);
    for (int r = 0; r < mt_size; ++r) {
      const unsigned char* p = all + 12 * r;
      CHECK(p[0] == 1 && p[1] == 2 && p[2] == 3 && p[3] == 4 + r, "big-endian int of rank %d", r);
      CHECK(p[4] == 0xff && p[7] == 0xfe, "-2 big-endian");
    }
    int back[3] = {0, 0, 0};
    CHECK(MPI_File_read_at(fh, 3 * mt_rank, back, 3, MPI_INT, &st) == MPI_SUCCESS, "read external32");
    CHECK(back[0] == v[0] && back[1] == -2 && back[2] == 7, "external32 round trip");
    /* Doubles, and a long that external32 stores in 4 bytes. */
    MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "external32", MPI_INFO_NULL);
    double d = 1.5;
    long l = -3;
    MPI_Aint ext;
    MPI_File_get_type_extent(fh, MPI_LONG, &ext);
    CHECK(ext == 4, "external32 extent of MPI_LONG is 4 (%ld)", (long)ext);
    if (mt_rank == 0) {
      MPI_File_write_at(fh, 100, &d, 1, MPI_DOUBLE, &st);
      MPI_File_write_at(fh, 108, &l, 1, MPI_LONG, &st);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double d2 = 0;
    long l2 = 0;
    MPI_File_read_at(fh, 100, &d2, 1, MPI_DOUBLE, &st);
    MPI_File_read_at(fh, 108, &l2, 1, MPI_LONG, &st);
    CHECK(d2 == 1.5 && l2 == -3, "external32 double/long round trip");
    slurp(name, all, 112);
    CHECK(all[100] == 0x3f && all[101] == 0xf8, "1.5 as big-endian IEEE");
  }
  /* ---- external32 with holed filetypes: byte displacements as given,
   * counts scaled by the external32 extents (MPI-3.1 13.5.2) ---- */
  {
    enum { L = 50 };
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_File_set_size(fh, 0);
    /* MPI_LONG is 4 bytes in external32: a long every 4 * size bytes,
     * given in bytes (resized), so ranks interleave 4-byte records. */
    MPI_Datatype every;
    MPI_Type_create_resized(MPI_LONG, 0, (MPI_Aint)4 * mt_size, &every);
    MPI_Type_commit(&every);
    CHECK(MPI_File_set_view(fh, 4 * mt_rank, MPI_LONG, every, "external32", MPI_INFO_NULL) == MPI_SUCCESS,
          "external32 view, holed filetype given in bytes");
    MPI_Aint fext;
    CHECK(MPI_File_get_type_extent(fh, every, &fext) == MPI_SUCCESS && fext == 4 * mt_size,
          "external32 extent of the resized type is as given (%ld)", (long)fext);
    long lv[L], lb2[L];
    for (int k = 0; k < L; ++k) lv[k] = -(long)(k * mt_size + mt_rank) - 1;
    CHECK(MPI_File_write_all(fh, lv, L, MPI_LONG, &st) == MPI_SUCCESS, "write_all through the holed view");
    MPI_Barrier(MPI_COMM_WORLD);
    unsigned char* raw = malloc(4 * L * mt_size + 16);
    CHECK(slurp(name, raw, 4 * L * mt_size + 16) == 4 * L * mt_size, "holed external32 file size");
    for (int i = 0; i < L * mt_size; ++i) {
      const unsigned u = (unsigned)raw[4 * i] << 24 | (unsigned)raw[4 * i + 1] << 16 |
                         (unsigned)raw[4 * i + 2] << 8 | raw[4 * i + 3];
      CHECK((int)u == -i - 1, "holed external32: record %d is %d", i, (int)u);
    }
    memset(lb2, 0, sizeof lb2);
    CHECK(MPI_File_read_at_all(fh, 0, lb2, L, MPI_LONG, &st) == MPI_SUCCESS, "read_at_all through the holed view");
    for (int k = 0; k < L; ++k) CHECK(lb2[k] == lv[k], "holed external32 read back %d: %ld", k, lb2[k]);
    MPI_Type_free(&every);
    /* The same layout from a vector, whose stride counts external32 longs
     * (4 bytes): read back independently. */
    MPI_Datatype vec;
    MPI_Type_vector(L, 1, mt_size, MPI_LONG, &vec);
    MPI_Type_commit(&vec);
    CHECK(MPI_File_get_type_extent(fh, vec, &fext) == MPI_SUCCESS && fext == 4 * ((L - 1) * mt_size + 1),
          "external32 extent of the vector (%ld)", (long)fext);
    CHECK(MPI_File_set_view(fh, 4 * mt_rank, MPI_LONG, vec, "external32", MPI_INFO_NULL) == MPI_SUCCESS,
          "external32 view, vector filetype");
    memset(lb2, 0, sizeof lb2);
    CHECK(MPI_File_read_at(fh, 0, lb2, L, MPI_LONG, &st) == MPI_SUCCESS, "read_at through the vector view");
    for (int k = 0; k < L; ++k) CHECK(lb2[k] == lv[k], "vector external32 read back %d: %ld", k, lb2[k]);
    MPI_Type_free(&vec);
    /* A layout that overlaps in the file: 8-byte doubles 4 bytes apart. */
    MPI_Datatype tight;
    MPI_Type_create_resized(MPI_DOUBLE, 0, 4, &tight);
    MPI_Type_contiguous(2, tight, &vec);
    MPI_Type_commit(&vec);
    CHECK(cls(MPI_File_set_view(fh, 0, MPI_DOUBLE, vec, "external32", MPI_INFO_NULL)) == MPI_ERR_TYPE,
          "overlapping external32 layout refused");
    MPI_Type_free(&vec);
    MPI_Type_free(&tight);
    free(raw);
  }
  CHECK(MPI_File_close(&fh) == MPI_SUCCESS, "close");
  return mt_pass();
}
