/* MPI-IO non-blocking and split collective access that progresses while
 * the ranks compute: the two-phase exchange runs from the layer's
 * progress machinery, not at the call.
 *   - iwrite_all / iread_all of interleaved records (a vector filetype, so
 *     aggregation is used) with cb_buffer_size small enough for many
 *     rounds, completed by MPI_Test between slices of computation;
 *   - two non-blocking collectives outstanding on one file, waited for in
 *     reverse order; non-blocking collectives on two files started in a
 *     different order on odd and even ranks (each file's exchange is its
 *     own);
 *   - split collectives with computation between _begin and _end;
 *   - a blocking collective on the file while a non-blocking one is
 *     pending;
 *   - argument errors: a rank whose call fails its checks gets the class
 *     at the call, the others at MPI_Wait (never a hang);
 *   - background progress: with a progress thread (NMAD_PROGRESS=thread
 *     in the environment), first, after an iwrite_at_all the ranks make
 *     no MPI call at all and watch the file with
 *     pread until every record is there; then MPI_Wait. The data reaching
 *     the file is what is checked; the deadline only turns a hang into a
 *     failure.
 * Every check compares file or buffer contents byte by byte. */
#include <fcntl.h>
#include <time.h>

#include "mpitest.h"

enum { REC = 24, NREC = 2000 };

static int cls(int err) {
  char text[MPI_MAX_ERROR_STRING];
  return mt_error(err, text);
}

/* Record k of rank r in the interleaved layout: at (k * size + r) * REC. */
static void fill_records(unsigned char* buf, int rank, int salt) {
  for (int k = 0; k < NREC; ++k) mt_fill(buf + (long)k * REC, REC, rank * 7919 + k * 13 + salt);
}
static long check_records(const unsigned char* buf, int rank, int salt) {
  for (int k = 0; k < NREC; ++k)
    if (mt_check(buf + (long)k * REC, REC, rank * 7919 + k * 13 + salt) >= 0) return k;
  return -1;
}
/* The whole file, as every rank's records interleaved. */
static long check_file_fd(int fd, int size, int salt, unsigned char* scratch) {
  long total = (long)NREC * REC * size;
  long n = (long)pread(fd, scratch, (size_t)total, 0);
  if (n != total) return 0;
  for (int k = 0; k < NREC; ++k)
    for (int r = 0; r < size; ++r)
      if (mt_check(scratch + ((long)k * size + r) * REC, REC, r * 7919 + k * 13 + salt) >= 0) return k * size + r + 1;
  return -1;
}

static void compute(volatile double* acc) {
  for (int k = 0; k < 20000; ++k) *acc += k * 0.5;
}

static void set_interleaved_view(MPI_File fh, MPI_Offset base) {
  MPI_Datatype rec, ft;
  MPI_Type_contiguous(REC, MPI_BYTE, &rec);
  MPI_Type_vector(1, 1, mt_size, rec, &ft);
  MPI_Datatype ftr;
  MPI_Type_create_resized(ft, 0, (MPI_Aint)REC * mt_size, &ftr);
  MPI_Type_commit(&ftr);
  CHECK(MPI_File_set_view(fh, base + (MPI_Offset)mt_rank * REC, MPI_BYTE, ftr, "native", MPI_INFO_NULL) ==
            MPI_SUCCESS, "set_view");
  MPI_Type_free(&ftr);
  MPI_Type_free(&ft);
  MPI_Type_free(&rec);
}

static MPI_File open_file(const char* name) {
  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "cb_buffer_size", "4096"); /* many rounds */
  MPI_Info_set(info, "romio_cb_write", "enable");
  MPI_Info_set(info, "romio_cb_read", "enable");
  MPI_File fh;
  CHECK(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_RDWR | MPI_MODE_CREATE | MPI_MODE_DELETE_ON_CLOSE, info, &fh) ==
            MPI_SUCCESS, "open %s", name);
  MPI_Info_free(&info);
  return fh;
}

int main(int argc, char** argv) {
  mt_start("io_nb_collective", &argc, &argv);
  const char* progress = getenv("NMAD_PROGRESS");
  const int background = progress && strcmp(progress, "thread") == 0;
  char name[512], name2[600];
  mt_tmpname(MPI_COMM_WORLD, "nbcoll", name, sizeof name);
  snprintf(name2, sizeof name2, "%s.second", name);
  const long mine = (long)NREC * REC;
  unsigned char* out = malloc(mine);
  unsigned char* out2 = malloc(mine);
  unsigned char* in = malloc(mine);
  unsigned char* scratch = malloc(mine * mt_size);
  volatile double acc = 0;
  MPI_Status st;
  int cnt, flag;

  MPI_File fh = open_file(name);
  set_interleaved_view(fh, 0);
  fill_records(out, mt_rank, background ? 5 : 1);

  if (background) {
    /* ---- no MPI call between the start and the data being in the file ---- */
    MPI_Request rq;
    CHECK(MPI_File_iwrite_at_all(fh, 0, out, (int)mine, MPI_BYTE, &rq) == MPI_SUCCESS, "iwrite_at_all");
    int fd = open(name, O_RDONLY);
    CHECK(fd >= 0, "open for watching");
    time_t deadline = time(NULL) + 120;
    long bad = 0;
    while ((bad = check_file_fd(fd, mt_size, 5, scratch)) != -1 && time(NULL) < deadline) {
      compute(&acc);
      struct timespec ts = {0, 1000000};
      nanosleep(&ts, NULL);
    }
    close(fd);
    CHECK(bad == -1, "the file was complete before MPI_Wait (%s %ld)", bad == 0 ? "short file, bad record" : "first bad record",
          bad - 1);
    CHECK(MPI_Wait(&rq, &st) == MPI_SUCCESS, "wait");
    MPI_Get_count(&st, MPI_BYTE, &cnt);
    CHECK(cnt == mine, "count %d", cnt);
    MPI_Barrier(MPI_COMM_WORLD);
    fill_records(out, mt_rank, 1);
  }

  /* ---- iwrite_all then iread_all, completed by MPI_Test between slices of work ---- */
  MPI_Request rq[4];
  CHECK(MPI_File_iwrite_all(fh, out, (int)mine, MPI_BYTE, &rq[0]) == MPI_SUCCESS, "iwrite_all");
  flag = 0;
  while (!flag) {
    compute(&acc);
    CHECK(MPI_Test(&rq[0], &flag, &st) == MPI_SUCCESS, "Test iwrite_all");
  }
  MPI_Get_count(&st, MPI_BYTE, &cnt);
  CHECK(cnt == mine, "iwrite_all count %d", cnt);
  MPI_Barrier(MPI_COMM_WORLD);
  {
    int fd = open(name, O_RDONLY);
    long bad = check_file_fd(fd, mt_size, 1, scratch);
    close(fd);
    CHECK(bad == -1, "iwrite_all file contents (first bad record %ld)", bad - 1);
  }
  MPI_File_seek(fh, 0, MPI_SEEK_SET);
  memset(in, 0, mine);
  CHECK(MPI_File_iread_all(fh, in, (int)mine, MPI_BYTE, &rq[0]) == MPI_SUCCESS, "iread_all");
  flag = 0;
  while (!flag) {
    compute(&acc);
    MPI_Test(&rq[0], &flag, &st);
  }
  MPI_Get_count(&st, MPI_BYTE, &cnt);
  CHECK(cnt == mine && check_records(in, mt_rank, 1) < 0, "iread_all contents (count %d, bad record %ld)", cnt,
        check_records(in, mt_rank, 1));

  /* ---- two outstanding on one file, waited for in reverse order ---- */
  fill_records(out2, mt_rank, 2);
  MPI_Offset half = (MPI_Offset)NREC / 2 * REC;
  CHECK(MPI_File_iwrite_at_all(fh, 0, out2, (int)half, MPI_BYTE, &rq[0]) == MPI_SUCCESS, "first of two");
  CHECK(MPI_File_iwrite_at_all(fh, half, out2 + half, (int)(mine - half), MPI_BYTE, &rq[1]) == MPI_SUCCESS,
        "second of two");
  compute(&acc);
  CHECK(MPI_Wait(&rq[1], MPI_STATUS_IGNORE) == MPI_SUCCESS && MPI_Wait(&rq[0], MPI_STATUS_IGNORE) == MPI_SUCCESS,
        "waits in reverse order");
  /* A blocking collective while a non-blocking one is pending. */
  memset(in, 0, mine);
  CHECK(MPI_File_iread_at_all(fh, 0, in, (int)half, MPI_BYTE, &rq[0]) == MPI_SUCCESS, "iread_at_all pending");
  CHECK(MPI_File_read_at_all(fh, half, in + half, (int)(mine - half), MPI_BYTE, &st) == MPI_SUCCESS,
        "blocking read_at_all meanwhile");
  CHECK(MPI_Wait(&rq[0], &st) == MPI_SUCCESS, "wait iread_at_all");
  CHECK(check_records(in, mt_rank, 2) < 0, "two writes, two reads (bad record %ld)", check_records(in, mt_rank, 2));

  /* ---- two files, started in a different order on odd and even ranks ---- */
  MPI_File f2 = open_file(name2);
  set_interleaved_view(f2, 0);
  fill_records(out, mt_rank, 3);
  if (mt_rank % 2 == 0) {
    CHECK(MPI_File_iwrite_at_all(fh, 0, out, (int)mine, MPI_BYTE, &rq[0]) == MPI_SUCCESS, "file 1 first");
    CHECK(MPI_File_iwrite_at_all(f2, 0, out2, (int)mine, MPI_BYTE, &rq[1]) == MPI_SUCCESS, "file 2 second");
  } else {
    CHECK(MPI_File_iwrite_at_all(f2, 0, out2, (int)mine, MPI_BYTE, &rq[1]) == MPI_SUCCESS, "file 2 first");
    CHECK(MPI_File_iwrite_at_all(fh, 0, out, (int)mine, MPI_BYTE, &rq[0]) == MPI_SUCCESS, "file 1 second");
  }
  CHECK(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE) == MPI_SUCCESS, "waitall two files");
  MPI_Barrier(MPI_COMM_WORLD);
  {
    int fd = open(name, O_RDONLY);
    long bad = check_file_fd(fd, mt_size, 3, scratch);
    close(fd);
    CHECK(bad == -1, "file 1 contents (first bad record %ld)", bad - 1);
    fd = open(name2, O_RDONLY);
    bad = check_file_fd(fd, mt_size, 2, scratch);
    close(fd);
    CHECK(bad == -1, "file 2 contents (first bad record %ld)", bad - 1);
  }
  MPI_File_close(&f2);

  /* ---- split collectives with computation in between ---- */
  fill_records(out, mt_rank, 4);
  CHECK(MPI_File_write_at_all_begin(fh, 0, out, (int)mine, MPI_BYTE) == MPI_SUCCESS, "write_at_all_begin");
  for (int k = 0; k < 50; ++k) compute(&acc);
  CHECK(MPI_File_write_at_all_end(fh, out, &st) == MPI_SUCCESS, "write_at_all_end");
  MPI_Get_count(&st, MPI_BYTE, &cnt);
  CHECK(cnt == mine, "split write count %d", cnt);
  memset(in, 0, mine);
  MPI_File_seek(fh, 0, MPI_SEEK_SET);
  CHECK(MPI_File_read_all_begin(fh, in, (int)mine, MPI_BYTE) == MPI_SUCCESS, "read_all_begin");
  for (int k = 0; k < 50; ++k) compute(&acc);
  CHECK(MPI_File_read_all_end(fh, in, &st) == MPI_SUCCESS, "read_all_end");
  CHECK(check_records(in, mt_rank, 4) < 0, "split read contents (bad record %ld)", check_records(in, mt_rank, 4));

  /* ---- an argument error on one rank: its call fails, the others' requests do ---- */
  if (mt_size > 1) {
    MPI_Request r = MPI_REQUEST_NULL;
    int e;
    if (mt_rank == mt_size - 1) {
      e = MPI_File_iwrite_at_all(fh, 0, out, 1, MPI_DATATYPE_NULL, &r);
      CHECK(cls(e) == MPI_ERR_TYPE && r == MPI_REQUEST_NULL, "bad datatype refused at the call (%d)", cls(e));
    } else {
      e = MPI_File_iwrite_at_all(fh, 0, out, 1, MPI_BYTE, &r);
      CHECK(e == MPI_SUCCESS, "good call starts");
      e = MPI_Wait(&r, &st);
      CHECK(cls(e) == MPI_ERR_TYPE, "the others get the class at completion (%d)", cls(e));
    }
    /* The file is still usable afterwards. */
    memset(in, 0, mine);
    CHECK(MPI_File_read_at_all(fh, 0, in, (int)mine, MPI_BYTE, &st) == MPI_SUCCESS, "read after the error");
    CHECK(check_records(in, mt_rank, 4) < 0, "contents untouched by the failed call");
  }
  (void)acc;
  CHECK(MPI_File_close(&fh) == MPI_SUCCESS, "close");
  free(out), free(out2), free(in), free(scratch);
  return mt_pass();
}
