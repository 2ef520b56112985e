/* MPI-IO non-blocking and split collective access: iwrite_at/iread_at,
 * iwrite/iread (the individual pointer moves at the call), iwrite_shared/
 * iread_shared, iwrite_at_all/iread_at_all, iwrite_all/iread_all, in Wait,
 * Waitall, Test loops and mixed with point-to-point requests; a large
 * iwrite_at that the background I/O thread performs while the rank
 * computes (completion is polled with MPI_Test between slices of work,
 * never timed); split collectives (_begin/_end of every form) and the
 * error for a second _begin. Contents are checked byte by byte. */
#include <fcntl.h>

#include "mpitest.h"

static int cls(int err) {
  char text[MPI_MAX_ERROR_STRING];
  return mt_error(err, text);
}

enum { N = 4096, BIG = 8 << 20 };

int main(int argc, char** argv) {
  mt_start("io_nonblocking", &argc, &argv);
  char name[512];
  mt_tmpname(MPI_COMM_WORLD, "nonblocking", name, sizeof name);
  MPI_File fh;
  MPI_Status st;
  int cnt;
  CHECK(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_RDWR | MPI_MODE_CREATE | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL,
                      &fh) == MPI_SUCCESS, "open");
  static unsigned char out[N], in[N];
  mt_fill(out, N, mt_rank + 1);

  /* ---- explicit offsets ---- */
  MPI_Request rq[4];
  CHECK(MPI_File_iwrite_at(fh, (MPI_Offset)mt_rank * N, out, N / 2, MPI_BYTE, &rq[0]) == MPI_SUCCESS, "iwrite_at");
  CHECK(MPI_File_iwrite_at(fh, (MPI_Offset)mt_rank * N + N / 2, out + N / 2, N / 2, MPI_BYTE, &rq[1]) == MPI_SUCCESS,
        "iwrite_at 2");
  /* Mixed with a point-to-point exchange in one Waitall. */
  int token = mt_rank, got = -1;
  MPI_Isend(&token, 1, MPI_INT, (mt_rank + 1) % mt_size, 5, MPI_COMM_WORLD, &rq[2]);
  MPI_Irecv(&got, 1, MPI_INT, (mt_rank + mt_size - 1) % mt_size, 5, MPI_COMM_WORLD, &rq[3]);
  MPI_Status sts[4];
  CHECK(MPI_Waitall(4, rq, sts) == MPI_SUCCESS, "Waitall file + p2p");
  MPI_Get_count(&sts[0], MPI_BYTE, &cnt);
  CHECK(cnt == N / 2 && rq[0] == MPI_REQUEST_NULL, "iwrite_at count %d", cnt);
  CHECK(got == (mt_rank + mt_size - 1) % mt_size, "p2p in the same Waitall");
  MPI_Barrier(MPI_COMM_WORLD);
  int next = (mt_rank + 1) % mt_size;
  memset(in, 0, N);
  CHECK(MPI_File_iread_at(fh, (MPI_Offset)next * N, in, N, MPI_BYTE, &rq[0]) == MPI_SUCCESS, "iread_at");
  int flag = 0;
  while (!flag) CHECK(MPI_Test(&rq[0], &flag, &st) == MPI_SUCCESS, "Test");
  MPI_Get_count(&st, MPI_BYTE, &cnt);
  CHECK(cnt == N && mt_check(in, N, next + 1) < 0, "iread_at data (count %d)", cnt);

  /* ---- individual pointer: moves at the call ---- */
  MPI_File_set_view(fh, (MPI_Offset)mt_rank * N, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL);
  CHECK(MPI_File_iread(fh, in, 100, MPI_BYTE, &rq[0]) == MPI_SUCCESS, "iread");
  MPI_Offset pos;
  MPI_File_get_position(fh, &pos);
  CHECK(pos == 100, "pointer moved at iread (%lld)", pos);
  CHECK(MPI_File_iread(fh, in + 100, 100, MPI_BYTE, &rq[1]) == MPI_SUCCESS, "iread 2");
  CHECK(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE) == MPI_SUCCESS, "Waitall iread");
  CHECK(mt_check(in, 200, mt_rank + 1) < 0, "iread data in order");
  /* A fresh region of 2N per rank for iwrite + iwrite_all. */
  MPI_File_set_view(fh, (MPI_Offset)(mt_size + 2 * mt_rank) * N, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL);
  unsigned char z[64];
  memset(z, 0xab, sizeof z);
  CHECK(MPI_File_iwrite(fh, z, 64, MPI_BYTE, &rq[0]) == MPI_SUCCESS && MPI_Wait(&rq[0], &st) == MPI_SUCCESS, "iwrite");

  /* ---- collective non-blocking ---- */
  CHECK(MPI_File_iwrite_all(fh, out, N, MPI_BYTE, &rq[0]) == MPI_SUCCESS, "iwrite_all");
  CHECK(MPI_Wait(&rq[0], &st) == MPI_SUCCESS, "wait iwrite_all");
  MPI_Get_count(&st, MPI_BYTE, &cnt);
  CHECK(cnt == N, "iwrite_all count %d", cnt);
  MPI_File_seek(fh, 0, MPI_SEEK_SET);
  memset(in, 0, N);
  CHECK(MPI_File_iread_all(fh, in, N, MPI_BYTE, &rq[0]) == MPI_SUCCESS && MPI_Wait(&rq[0], &st) == MPI_SUCCESS,
        "iread_all");
  /* The first 64 bytes were overwritten by iwrite, then iwrite_all wrote
   * from the pointer at 64: bytes [64, 64+N) of the region are out. */
  for (int k = 0; k < 64; ++k) CHECK(in[k] == 0xab, "iwrite bytes %d", k);
  CHECK(memcmp(in + 64, out, N - 64) == 0, "iwrite_all bytes");
  MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL);
  CHECK(MPI_File_iwrite_at_all(fh, (MPI_Offset)mt_rank * N, out, N, MPI_BYTE, &rq[0]) == MPI_SUCCESS &&
            MPI_Wait(&rq[0], MPI_STATUS_IGNORE) == MPI_SUCCESS, "iwrite_at_all");
  memset(in, 0, N);
  CHECK(MPI_File_iread_at_all(fh, (MPI_Offset)next * N, in, N, MPI_BYTE, &rq[0]) == MPI_SUCCESS &&
            MPI_Wait(&rq[0], MPI_STATUS_IGNORE) == MPI_SUCCESS, "iread_at_all");
  CHECK(mt_check(in, N, next + 1) < 0, "iread_at_all data");

  /* ---- shared pointer, non-blocking ---- */
  MPI_File_set_size(fh, 0);
  MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "native", MPI_INFO_NULL);
  int rec[4] = {mt_rank, mt_rank, mt_rank, mt_rank};
  CHECK(MPI_File_iwrite_shared(fh, rec, 4, MPI_INT, &rq[0]) == MPI_SUCCESS && MPI_Wait(&rq[0], &st) == MPI_SUCCESS,
        "iwrite_shared");
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_File_seek_shared(fh, 0, MPI_SEEK_SET);
  int back[4];
  CHECK(MPI_File_iread_shared(fh, back, 4, MPI_INT, &rq[0]) == MPI_SUCCESS && MPI_Wait(&rq[0], &st) == MPI_SUCCESS,
        "iread_shared");
  CHECK(back[0] == back[1] && back[1] == back[2] && back[2] == back[3] && back[0] >= 0 && back[0] < mt_size,
        "a whole record (%d %d %d %d)", back[0], back[1], back[2], back[3]);
  int sum = 0, mine = back[0];
  MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  CHECK(sum == mt_size * (mt_size - 1) / 2, "every record read once (sum %d)", sum);

  /* ---- overlap: a large write proceeds while the rank computes ---- */
  {
    unsigned char* big = malloc(BIG);
    mt_fill(big, BIG, 9 + mt_rank);
    char bigname[600];
    snprintf(bigname, sizeof bigname, "%s.big%d", name, mt_rank);
    MPI_File bf;
    CHECK(MPI_File_open(MPI_COMM_SELF, bigname, MPI_MODE_RDWR | MPI_MODE_CREATE | MPI_MODE_DELETE_ON_CLOSE,
                        MPI_INFO_NULL, &bf) == MPI_SUCCESS, "open big");
    MPI_Request r;
    CHECK(MPI_File_iwrite_at(bf, 0, big, BIG, MPI_BYTE, &r) == MPI_SUCCESS, "big iwrite_at");
    volatile double acc = 0;
    int done = 0;
    long slices = 0;
    while (!done) {
      for (int k = 0; k < 100000; ++k) acc += k * 0.5;
      ++slices;
      MPI_Test(&r, &done, &st);
    }
    MPI_Get_count(&st, MPI_BYTE, &cnt);
    CHECK(cnt == BIG, "big write count %d", cnt);
    memset(big, 0, BIG);
    CHECK(MPI_File_read_at(bf, 0, big, BIG, MPI_BYTE, &st) == MPI_SUCCESS, "read big");
    CHECK(mt_check(big, BIG, 9 + mt_rank) < 0, "big data");
    MPI_File_close(&bf);
    free(big);
    (void)slices;
  }

  /* ---- split collectives ---- */
  MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL);
  MPI_File_set_size(fh, 0);
  CHECK(MPI_File_write_at_all_begin(fh, (MPI_Offset)mt_rank * N, out, N, MPI_BYTE) == MPI_SUCCESS, "write_at_all_begin");
  CHECK(cls(MPI_File_write_at_all_begin(fh, 0, out, 1, MPI_BYTE)) == MPI_ERR_OTHER, "a second begin is refused");
  CHECK(MPI_File_write_at_all_end(fh, out, &st) == MPI_SUCCESS, "write_at_all_end");
  MPI_Get_count(&st, MPI_BYTE, &cnt);
  CHECK(cnt == N, "split write count %d", cnt);
  CHECK(cls(MPI_File_write_at_all_end(fh, out, &st)) == MPI_ERR_OTHER, "end without begin");
  memset(in, 0, N);
  CHECK(MPI_File_read_at_all_begin(fh, (MPI_Offset)next * N, in, N, MPI_BYTE) == MPI_SUCCESS &&
            MPI_File_read_at_all_end(fh, in, &st) == MPI_SUCCESS, "read_at_all split");
  CHECK(mt_check(in, N, next + 1) < 0, "split read data");
  MPI_File_set_view(fh, (MPI_Offset)mt_rank * N, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL);
  CHECK(MPI_File_write_all_begin(fh, out, 16, MPI_BYTE) == MPI_SUCCESS &&
            MPI_File_write_all_end(fh, out, &st) == MPI_SUCCESS, "write_all split");
  MPI_File_seek(fh, 0, MPI_SEEK_SET);
  CHECK(MPI_File_read_all_begin(fh, in, 16, MPI_BYTE) == MPI_SUCCESS && MPI_File_read_all_end(fh, in, &st) == MPI_SUCCESS,
        "read_all split");
  CHECK(memcmp(in, out, 16) == 0, "read_all split data");
  MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL);
  unsigned char tag = (unsigned char)('a' + mt_rank);
  CHECK(MPI_File_write_ordered_begin(fh, &tag, 1, MPI_BYTE) == MPI_SUCCESS &&
            MPI_File_write_ordered_end(fh, &tag, &st) == MPI_SUCCESS, "write_ordered split");
  MPI_File_seek_shared(fh, 0, MPI_SEEK_SET);
  unsigned char t2 = 0;
  CHECK(MPI_File_read_ordered_begin(fh, &t2, 1, MPI_BYTE) == MPI_SUCCESS &&
            MPI_File_read_ordered_end(fh, &t2, &st) == MPI_SUCCESS, "read_ordered split");
  CHECK(t2 == tag, "ordered split data %c", t2);
  CHECK(MPI_File_close(&fh) == MPI_SUCCESS, "close");
  return mt_pass();
}
