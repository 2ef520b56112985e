/* MPI-IO file pointers: individual pointers (read/write/_all, seek with
 * SET/CUR/END, get_position, the pointer after a short read) and shared
 * pointers (write_shared from every rank: each record lands exactly once;
 * write_ordered / read_ordered in rank order; seek_shared,
 * get_position_shared; the shared pointer reset by set_view). File
 * contents are checked byte by byte. */
#include <dirent.h>
#include <fcntl.h>

#include "mpitest.h"

static int cls(int err) {
  char text[MPI_MAX_ERROR_STRING];
  return mt_error(err, text);
}

enum { R = 48, ROUNDS = 5 };

int main(int argc, char** argv) {
  mt_start("io_pointers", &argc, &argv);
  char name[512];
  mt_tmpname(MPI_COMM_WORLD, "pointers", name, sizeof name);
  MPI_File fh;
  MPI_Status st;
  CHECK(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_RDWR | MPI_MODE_CREATE | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL,
                      &fh) == MPI_SUCCESS, "open");

  /* ---- individual pointers: each rank its own region via the view ---- */
  MPI_File_set_view(fh, (MPI_Offset)mt_rank * 1000 * sizeof(int), MPI_INT, MPI_INT, "native", MPI_INFO_NULL);
  int a[100], b[100];
  for (int k = 0; k < 100; ++k) a[k] = mt_rank * 1000 + k;
  CHECK(MPI_File_write(fh, a, 40, MPI_INT, &st) == MPI_SUCCESS, "write 40");
  CHECK(MPI_File_write_all(fh, a + 40, 60, MPI_INT, &st) == MPI_SUCCESS, "write_all 60");
  MPI_Offset pos = -1;
  MPI_File_get_position(fh, &pos);
  CHECK(pos == 100, "position 100 (%lld)", pos);
  CHECK(MPI_File_seek(fh, -50, MPI_SEEK_CUR) == MPI_SUCCESS, "seek CUR");
  MPI_File_get_position(fh, &pos);
  CHECK(pos == 50, "position 50 (%lld)", pos);
  CHECK(MPI_File_read(fh, b, 10, MPI_INT, &st) == MPI_SUCCESS, "read 10");
  for (int k = 0; k < 10; ++k) CHECK(b[k] == a[50 + k], "read value %d", k);
  CHECK(MPI_File_seek(fh, 5, MPI_SEEK_SET) == MPI_SUCCESS, "seek SET");
  CHECK(MPI_File_read_all(fh, b, 5, MPI_INT, &st) == MPI_SUCCESS, "read_all");
  for (int k = 0; k < 5; ++k) CHECK(b[k] == a[5 + k], "read_all value %d", k);
  CHECK(cls(MPI_File_seek(fh, -1, MPI_SEEK_SET)) == MPI_ERR_ARG, "negative position refused");
  CHECK(cls(MPI_File_seek(fh, 0, 12345)) == MPI_ERR_ARG, "bad whence refused");
  MPI_Barrier(MPI_COMM_WORLD);
  /* SEEK_END counts etypes of the view up to the end of the file. */
  CHECK(MPI_File_seek(fh, 0, MPI_SEEK_END) == MPI_SUCCESS, "seek END");
  MPI_File_get_position(fh, &pos);
  CHECK(pos == (MPI_Offset)(mt_size - 1 - mt_rank) * 1000 + 100, "end position %lld", pos);
  /* A read that meets the end of the file moves the pointer by what it read. */
  MPI_File_seek(fh, -3, MPI_SEEK_END);
  CHECK(MPI_File_read(fh, b, 10, MPI_INT, &st) == MPI_SUCCESS, "read at the end");
  int cnt;
  MPI_Get_count(&st, MPI_INT, &cnt);
  MPI_File_get_position(fh, &pos);
  CHECK(cnt == 3 && pos == (MPI_Offset)(mt_size - 1 - mt_rank) * 1000 + 100, "short read: %d, at %lld", cnt, pos);

  /* ---- shared pointer: every rank appends records ---- */
  MPI_File_set_size(fh, 0);
  MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL);
  MPI_File_get_position_shared(fh, &pos);
  CHECK(pos == 0, "shared pointer at 0 after set_view (%lld)", pos);
  MPI_Barrier(MPI_COMM_WORLD); /* everyone has looked before anyone moves it */
  unsigned char rec[R];
  for (int i = 0; i < ROUNDS; ++i) {
    memset(rec, 0, R);
    snprintf((char*)rec, R, "rank %d record %d", mt_rank, i);
    CHECK(MPI_File_write_shared(fh, rec, R, MPI_BYTE, &st) == MPI_SUCCESS, "write_shared");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_File_get_position_shared(fh, &pos);
  CHECK(pos == (MPI_Offset)R * ROUNDS * mt_size, "shared pointer after all records (%lld)", pos);
  {
    static unsigned char all[R * ROUNDS * 8];
    int fd = open(name, O_RDONLY);
    long n = (long)pread(fd, all, sizeof all, 0);
    close(fd);
    CHECK(n == R * ROUNDS * mt_size, "file holds every record (%ld bytes)", n);
    int seen[8][ROUNDS];
    memset(seen, 0, sizeof seen);
    for (int k = 0; k < ROUNDS * mt_size; ++k) {
      int r = -1, i = -1;
      CHECK(sscanf((const char*)all + k * R, "rank %d record %d", &r, &i) == 2 && r >= 0 && r < mt_size && i >= 0 &&
                i < ROUNDS, "record %d readable", k);
      seen[r][i]++;
    }
    for (int r = 0; r < mt_size; ++r)
      for (int i = 0; i < ROUNDS; ++i) CHECK(seen[r][i] == 1, "record (%d,%d) seen %d times", r, i, seen[r][i]);
  }
  /* read_shared from the start: the records are read once each overall. */
  MPI_File_seek_shared(fh, 0, MPI_SEEK_SET);
  MPI_File_get_position_shared(fh, &pos);
  CHECK(pos == 0, "seek_shared SET 0 (%lld)", pos);
  MPI_Barrier(MPI_COMM_WORLD);
  int mine = 0;
  for (int i = 0; i < ROUNDS; ++i) {
    CHECK(MPI_File_read_shared(fh, rec, R, MPI_BYTE, &st) == MPI_SUCCESS, "read_shared");
    MPI_Get_count(&st, MPI_BYTE, &cnt);
    if (cnt == R) ++mine;
  }
  int total = 0;
  MPI_Allreduce(&mine, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  CHECK(total == ROUNDS * mt_size, "read_shared got %d records", total);

  /* ---- ordered: rank order, after the pointer ---- */
  MPI_File_seek_shared(fh, 0, MPI_SEEK_END);
  MPI_Offset end0 = 0;
  MPI_File_get_position_shared(fh, &end0);
  CHECK(end0 == (MPI_Offset)R * ROUNDS * mt_size, "seek_shared END (%lld)", end0);
  MPI_Barrier(MPI_COMM_WORLD);
  int len = 10 + mt_rank * 3; /* different sizes per rank */
  unsigned char ob[40];
  memset(ob, 'A' + mt_rank, sizeof ob);
  CHECK(MPI_File_write_ordered(fh, ob, len, MPI_BYTE, &st) == MPI_SUCCESS, "write_ordered");
  MPI_Offset after;
  MPI_File_get_position_shared(fh, &after);
  int sum = 0;
  for (int r = 0; r < mt_size; ++r) sum += 10 + r * 3;
  CHECK(after == end0 + sum, "shared pointer after write_ordered (%lld)", after);
  MPI_Barrier(MPI_COMM_WORLD);
  {
    unsigned char all[200];
    int fd = open(name, O_RDONLY);
    long n = (long)pread(fd, all, sizeof all, end0);
    close(fd);
    CHECK(n == sum, "ordered bytes %ld", n);
    int k = 0;
    for (int r = 0; r < mt_size; ++r)
      for (int j = 0; j < 10 + r * 3; ++j, ++k) CHECK(all[k] == 'A' + r, "ordered byte %d from rank %d", k, r);
  }
  CHECK(MPI_File_seek_shared(fh, end0, MPI_SEEK_SET) == MPI_SUCCESS, "seek_shared back");
  unsigned char rb[40];
  memset(rb, 0, sizeof rb);
  CHECK(MPI_File_read_ordered(fh, rb, len, MPI_BYTE, &st) == MPI_SUCCESS, "read_ordered");
  for (int j = 0; j < len; ++j) CHECK(rb[j] == 'A' + mt_rank, "read_ordered byte %d", j);
  CHECK(cls(MPI_File_seek_shared(fh, -1, MPI_SEEK_SET)) == MPI_ERR_ARG, "negative shared position refused");
  /* A view in ints: the shared pointer counts etypes. */
  MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "native", MPI_INFO_NULL);
  int v = mt_rank;
  MPI_File_write_ordered(fh, &v, 1, MPI_INT, &st);
  MPI_File_get_position_shared(fh, &pos);
  CHECK(pos == mt_size, "shared pointer in etypes (%lld)", pos);
  CHECK(MPI_File_close(&fh) == MPI_SUCCESS, "close");
  /* The shared pointer's side file is gone with the file. */
  MPI_Barrier(MPI_COMM_WORLD);
  {
    char dir[512], prefix[600];
    strcpy(dir, name);
    char* slash = strrchr(dir, '/');
    *slash = 0;
    snprintf(prefix, sizeof prefix, ".%s.nmad-shfp", slash + 1);
    DIR* d = opendir(dir);
    struct dirent* e;
    int left = 0;
    while (d && (e = readdir(d)))
      if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) ++left;
    if (d) closedir(d);
    CHECK(left == 0, "%d shared pointer files left after close", left);
  }
  return mt_pass();
}
