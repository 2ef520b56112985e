/* MPI-IO files: open/close/delete, sizes, preallocation, group, access
 * mode, hints, sync, access modes and the error class of each failure,
 * MPI_MODE_DELETE_ON_CLOSE / EXCL / APPEND / UNIQUE_OPEN / SEQUENTIAL,
 * error handlers on files (MPI_FILE_NULL's default, inheritance, user
 * handlers, call_errhandler), c2f/f2c, MPI_Register_datarep refused.
 * Explicit-offset writes from every rank are checked byte by byte with
 * POSIX reads. With "fatal" as argument, a failing MPI_File_open after
 * MPI_File_set_errhandler(MPI_FILE_NULL, MPI_ERRORS_ARE_FATAL) ends the job
 * with the message (checked by the driver test). */
#include <fcntl.h>
#include <sys/stat.h>

#include "mpitest.h"

static int calls = 0, last_code = 0;
static MPI_File last_file = -1;
static void on_file_error(MPI_File* f, int* code, ...) {
  ++calls;
  last_code = *code;
  last_file = *f;
}

static int cls(int err) {
  char text[MPI_MAX_ERROR_STRING];
  return mt_error(err, text);
}

static int exists(const char* path) {
  struct stat sb;
  return stat(path, &sb) == 0;
}

int main(int argc, char** argv) {
  mt_start("io_files", &argc, &argv);
  char name[512], other[600];
  mt_tmpname(MPI_COMM_WORLD, "files", name, sizeof name);
  snprintf(other, sizeof other, "%s.missing", name);
  MPI_File fh = 77;
  if (argc > 1 && strcmp(argv[1], "fatal") == 0) {
    MPI_File_set_errhandler(MPI_FILE_NULL, MPI_ERRORS_ARE_FATAL);
    MPI_File_open(MPI_COMM_WORLD, other, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
    CHECK(0, "MPI_File_open returned under MPI_ERRORS_ARE_FATAL");
  }
  MPI_Errhandler h = MPI_ERRHANDLER_NULL;
  CHECK(MPI_File_get_errhandler(MPI_FILE_NULL, &h) == MPI_SUCCESS && h == MPI_ERRORS_RETURN,
        "MPI_FILE_NULL starts with MPI_ERRORS_RETURN (%d)", h);

  /* ---- access-mode errors, on MPI_FILE_NULL's handler (return) ---- */
  CHECK(cls(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_RDONLY | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh)) ==
            MPI_ERR_AMODE && fh == MPI_FILE_NULL, "RDONLY|WRONLY is MPI_ERR_AMODE");
  CHECK(cls(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_CREATE, MPI_INFO_NULL, &fh)) == MPI_ERR_AMODE,
        "no access mode is MPI_ERR_AMODE");
  CHECK(cls(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_RDONLY | MPI_MODE_CREATE, MPI_INFO_NULL, &fh)) ==
            MPI_ERR_AMODE, "RDONLY|CREATE is MPI_ERR_AMODE");
  CHECK(cls(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_RDWR | MPI_MODE_SEQUENTIAL, MPI_INFO_NULL, &fh)) ==
            MPI_ERR_AMODE, "RDWR|SEQUENTIAL is MPI_ERR_AMODE");
  CHECK(cls(MPI_File_open(MPI_COMM_WORLD, other, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh)) == MPI_ERR_NO_SUCH_FILE &&
            fh == MPI_FILE_NULL, "missing file is MPI_ERR_NO_SUCH_FILE");
  CHECK(cls(MPI_File_open(12345, name, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh)) == MPI_ERR_COMM, "bad communicator");
  CHECK(cls(MPI_File_delete(other, MPI_INFO_NULL)) == MPI_ERR_NO_SUCH_FILE, "delete of a missing file");
  {
    char dir[600];
    snprintf(dir, sizeof dir, "%s.dir", name);
    if (mt_rank == 0) mkdir(dir, 0700);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(cls(MPI_File_open(MPI_COMM_WORLD, dir, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh)) == MPI_ERR_BAD_FILE,
          "a directory is MPI_ERR_BAD_FILE");
    MPI_Barrier(MPI_COMM_WORLD);
    if (mt_rank == 0) rmdir(dir);
  }
  if (getuid() != 0) { /* root ignores permissions */
    char ro[600];
    snprintf(ro, sizeof ro, "%s.noperm", name);
    if (mt_rank == 0) close(open(ro, O_CREAT | O_WRONLY, 0));
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(cls(MPI_File_open(MPI_COMM_WORLD, ro, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh)) == MPI_ERR_ACCESS,
          "a file without permission is MPI_ERR_ACCESS");
    MPI_Barrier(MPI_COMM_WORLD);
    if (mt_rank == 0) unlink(ro);
  }

  /* ---- create, EXCL, hints, size, amode, group ---- */
  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "cb_nodes", "1");
  MPI_Info_set(info, "cb_buffer_size", "65536");
  MPI_Info_set(info, "romio_cb_write", "enable");
  MPI_Info_set(info, "striping_unit", "1048576");
  MPI_Info_set(info, "nmad_unknown_hint", "x");
  CHECK(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_RDWR | MPI_MODE_CREATE | MPI_MODE_EXCL | MPI_MODE_UNIQUE_OPEN,
                      info, &fh) == MPI_SUCCESS && fh != MPI_FILE_NULL, "create the file");
  MPI_Info_free(&info);
  {
    MPI_File again = 5;
    CHECK(cls(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_RDWR | MPI_MODE_CREATE | MPI_MODE_EXCL, MPI_INFO_NULL,
                            &again)) == MPI_ERR_FILE_EXISTS && again == MPI_FILE_NULL, "EXCL on an existing file");
  }
  MPI_Info used;
  CHECK(MPI_File_get_info(fh, &used) == MPI_SUCCESS && used != MPI_INFO_NULL, "get_info");
  {
    char val[MPI_MAX_INFO_VAL + 1];
    int flag = 0;
    MPI_Info_get(used, "cb_nodes", MPI_MAX_INFO_VAL, val, &flag);
    CHECK(flag && strcmp(val, "1") == 0, "cb_nodes reported (%s)", flag ? val : "absent");
    MPI_Info_get(used, "cb_buffer_size", MPI_MAX_INFO_VAL, val, &flag);
    CHECK(flag && strcmp(val, "65536") == 0, "cb_buffer_size reported");
    MPI_Info_get(used, "romio_cb_write", MPI_MAX_INFO_VAL, val, &flag);
    CHECK(flag && strcmp(val, "enable") == 0, "romio_cb_write reported");
    MPI_Info_get(used, "romio_cb_read", MPI_MAX_INFO_VAL, val, &flag);
    CHECK(flag && strcmp(val, "automatic") == 0, "romio_cb_read default reported");
    MPI_Info_get(used, "striping_unit", MPI_MAX_INFO_VAL, val, &flag);
    CHECK(flag && strcmp(val, "1048576") == 0, "striping_unit kept");
    MPI_Info_get(used, "nmad_unknown_hint", MPI_MAX_INFO_VAL, val, &flag);
    CHECK(!flag, "an unknown hint is not reported");
    MPI_Info_free(&used);
    MPI_Info set;
    MPI_Info_create(&set);
    MPI_Info_set(set, "cb_buffer_size", "8192");
    CHECK(MPI_File_set_info(fh, set) == MPI_SUCCESS, "set_info");
    MPI_Info_free(&set);
    MPI_File_get_info(fh, &used);
    MPI_Info_get(used, "cb_buffer_size", MPI_MAX_INFO_VAL, val, &flag);
    CHECK(flag && strcmp(val, "8192") == 0, "set_info changed cb_buffer_size");
    MPI_Info_free(&used);
  }
  int amode = 0;
  CHECK(MPI_File_get_amode(fh, &amode) == MPI_SUCCESS &&
            amode == (MPI_MODE_RDWR | MPI_MODE_CREATE | MPI_MODE_EXCL | MPI_MODE_UNIQUE_OPEN), "get_amode");
  MPI_Group g, wg;
  int result;
  CHECK(MPI_File_get_group(fh, &g) == MPI_SUCCESS, "get_group");
  MPI_Comm_group(MPI_COMM_WORLD, &wg);
  MPI_Group_compare(g, wg, &result);
  CHECK(result == MPI_IDENT, "the file's group is the communicator's (%d)", result);
  MPI_Group_free(&g);
  MPI_Group_free(&wg);
  MPI_Offset size = -1;
  CHECK(MPI_File_get_size(fh, &size) == MPI_SUCCESS && size == 0, "new file is empty (%lld)", size);
  CHECK(MPI_File_set_size(fh, 1000) == MPI_SUCCESS, "set_size grow");
  MPI_File_get_size(fh, &size);
  CHECK(size == 1000, "size 1000 (%lld)", size);
  CHECK(MPI_File_preallocate(fh, 500) == MPI_SUCCESS, "preallocate smaller");
  MPI_File_get_size(fh, &size);
  CHECK(size == 1000, "preallocate does not shrink (%lld)", size);
  CHECK(MPI_File_preallocate(fh, 4096) == MPI_SUCCESS, "preallocate larger");
  MPI_File_get_size(fh, &size);
  CHECK(size == 4096, "preallocate grows (%lld)", size);
  CHECK(MPI_File_set_size(fh, 0) == MPI_SUCCESS, "set_size shrink");
  CHECK(cls(MPI_File_set_size(fh, -1)) == MPI_ERR_ARG, "negative size");

  /* ---- explicit offsets from every rank, checked byte by byte ---- */
  enum { N = 1000 };
  unsigned char out[N], in[N];
  mt_fill(out, N, mt_rank);
  MPI_Status st;
  CHECK(MPI_File_write_at(fh, (MPI_Offset)mt_rank * N, out, N, MPI_BYTE, &st) == MPI_SUCCESS, "write_at");
  int cnt = -1;
  MPI_Get_count(&st, MPI_BYTE, &cnt);
  CHECK(cnt == N, "write_at count %d", cnt);
  CHECK(MPI_File_sync(fh) == MPI_SUCCESS, "sync");
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK(MPI_File_sync(fh) == MPI_SUCCESS, "sync again");
  MPI_File_get_size(fh, &size);
  CHECK(size == (MPI_Offset)mt_size * N, "size after writes %lld", size);
  {
    int fd = open(name, O_RDONLY);
    for (int r = 0; r < mt_size; ++r) {
      CHECK(pread(fd, in, N, (off_t)r * N) == N, "pread");
      CHECK(mt_check(in, N, r) < 0, "rank %d's bytes in the file (bad at %ld)", r, mt_check(in, N, r));
    }
    close(fd);
  }
  memset(in, 0, N);
  int next = (mt_rank + 1) % mt_size;
  CHECK(MPI_File_read_at(fh, (MPI_Offset)next * N, in, N, MPI_BYTE, &st) == MPI_SUCCESS, "read_at");
  CHECK(mt_check(in, N, next) < 0, "read_at of the next rank's block");
  /* Reading past the end: a short count, not an error. */
  CHECK(MPI_File_read_at(fh, (MPI_Offset)mt_size * N - 10, in, 100, MPI_BYTE, &st) == MPI_SUCCESS, "read at end");
  MPI_Get_count(&st, MPI_BYTE, &cnt);
  CHECK(cnt == 10, "short read count %d", cnt);
  CHECK(cls(MPI_File_read_at(fh, -1, in, 1, MPI_BYTE, &st)) == MPI_ERR_ARG, "negative offset");
  CHECK(cls(MPI_File_read_at(fh, 0, in, -1, MPI_BYTE, &st)) == MPI_ERR_COUNT, "negative count");
  CHECK(cls(MPI_File_read_at(fh, 0, in, 1, MPI_DATATYPE_NULL, &st)) == MPI_ERR_TYPE, "null datatype");
  {
    MPI_Datatype unc;
    MPI_Type_contiguous(2, MPI_INT, &unc);
    CHECK(cls(MPI_File_write_at(fh, 0, in, 1, unc, &st)) == MPI_ERR_TYPE, "uncommitted datatype");
    MPI_Type_free(&unc);
  }

  /* ---- error handlers on an open file ---- */
  CHECK(MPI_File_get_errhandler(fh, &h) == MPI_SUCCESS && h == MPI_ERRORS_RETURN, "a file inherits ERRORS_RETURN");
  MPI_Errhandler feh;
  CHECK(MPI_File_create_errhandler(on_file_error, &feh) == MPI_SUCCESS, "File_create_errhandler");
  CHECK(MPI_File_set_errhandler(fh, feh) == MPI_SUCCESS, "set it on the file");
  CHECK(MPI_File_get_errhandler(fh, &h) == MPI_SUCCESS && h == feh, "read back");
  CHECK(cls(MPI_File_read_at(fh, -5, in, 1, MPI_BYTE, &st)) == MPI_ERR_ARG, "the handler returns, the code comes back");
  CHECK(calls == 1 && last_code == MPI_ERR_ARG && last_file == fh, "handler saw (%d, %d, %d)", calls, last_code,
        last_file);
  CHECK(MPI_File_call_errhandler(fh, MPI_ERR_IO) == MPI_SUCCESS && calls == 2 && last_code == MPI_ERR_IO,
        "File_call_errhandler");
  CHECK(cls(MPI_File_set_errhandler(fh, 4242)) == MPI_ERR_ARG && calls == 3, "invalid handler refused");
  MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN);
  /* MPI_FILE_NULL's handler applies to files opened afterwards. */
  CHECK(MPI_File_set_errhandler(MPI_FILE_NULL, feh) == MPI_SUCCESS, "set on MPI_FILE_NULL");
  calls = 0;
  {
    MPI_File missing;
    CHECK(cls(MPI_File_open(MPI_COMM_SELF, other, MPI_MODE_RDONLY, MPI_INFO_NULL, &missing)) == MPI_ERR_NO_SUCH_FILE,
          "open of a missing file under a user handler");
  }
  CHECK(calls == 1 && last_code == MPI_ERR_NO_SUCH_FILE && last_file == MPI_FILE_NULL, "MPI_FILE_NULL handler called");
  MPI_File f2;
  CHECK(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_RDONLY, MPI_INFO_NULL, &f2) == MPI_SUCCESS, "second open");
  CHECK(MPI_File_get_errhandler(f2, &h) == MPI_SUCCESS && h == feh, "a new file takes MPI_FILE_NULL's handler");
  MPI_File_set_errhandler(MPI_FILE_NULL, MPI_ERRORS_RETURN);
  MPI_File_set_errhandler(f2, MPI_ERRORS_RETURN);
  CHECK(MPI_Errhandler_free(&feh) == MPI_SUCCESS, "free the file handler");
  /* Access-mode errors on data access. */
  CHECK(cls(MPI_File_write_at(f2, 0, out, 1, MPI_BYTE, &st)) == MPI_ERR_READ_ONLY, "write to RDONLY is READ_ONLY");
  CHECK(cls(MPI_File_set_size(f2, 10)) == MPI_ERR_READ_ONLY, "set_size on RDONLY");
  CHECK(MPI_File_close(&f2) == MPI_SUCCESS && f2 == MPI_FILE_NULL, "close the second");
  CHECK(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_WRONLY, MPI_INFO_NULL, &f2) == MPI_SUCCESS, "open WRONLY");
  CHECK(cls(MPI_File_read_at(f2, 0, in, 1, MPI_BYTE, &st)) == MPI_ERR_ACCESS, "read of WRONLY is ACCESS");
  MPI_File_close(&f2);
  CHECK(MPI_File_c2f(fh) == (MPI_Fint)fh && MPI_File_f2c(MPI_File_c2f(fh)) == fh, "c2f/f2c");
  CHECK(MPI_File_close(&fh) == MPI_SUCCESS && fh == MPI_FILE_NULL, "close");
  CHECK(cls(MPI_File_close(&fh)) == MPI_ERR_FILE, "close of MPI_FILE_NULL");
  fh = 4321;
  CHECK(cls(MPI_File_close(&fh)) == MPI_ERR_FILE, "close of a bogus handle");
  CHECK(cls(MPI_File_read_at(fh, 0, in, 1, MPI_BYTE, &st)) == MPI_ERR_FILE, "access through a bogus handle");

  /* ---- APPEND: both pointers start at the end ---- */
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_WRONLY | MPI_MODE_APPEND, MPI_INFO_NULL, &fh) == MPI_SUCCESS,
        "open APPEND");
  MPI_Offset pos = -1;
  MPI_File_get_position(fh, &pos);
  CHECK(pos == (MPI_Offset)mt_size * N, "APPEND individual pointer at the end (%lld)", pos);
  MPI_File_get_position_shared(fh, &pos);
  CHECK(pos == (MPI_Offset)mt_size * N, "APPEND shared pointer at the end (%lld)", pos);
  MPI_File_close(&fh);

  /* ---- SEQUENTIAL: shared pointer only ---- */
  CHECK(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_WRONLY | MPI_MODE_SEQUENTIAL, MPI_INFO_NULL, &fh) == MPI_SUCCESS,
        "open SEQUENTIAL");
  CHECK(cls(MPI_File_write_at(fh, 0, out, 1, MPI_BYTE, &st)) == MPI_ERR_UNSUPPORTED_OPERATION,
        "explicit offsets refused on a sequential file");
  CHECK(cls(MPI_File_seek(fh, 0, MPI_SEEK_SET)) == MPI_ERR_UNSUPPORTED_OPERATION, "seek refused");
  CHECK(cls(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL)) == MPI_SUCCESS, "set_view");
  CHECK(MPI_File_write_ordered(fh, out, 10, MPI_BYTE, &st) == MPI_SUCCESS, "write_ordered on a sequential file");
  CHECK(MPI_File_set_view(fh, MPI_DISPLACEMENT_CURRENT, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL) == MPI_SUCCESS,
        "MPI_DISPLACEMENT_CURRENT");
  {
    MPI_Offset d;
    MPI_Datatype et, ft;
    char rep[MPI_MAX_DATAREP_STRING];
    MPI_File_get_view(fh, &d, &et, &ft, rep);
    CHECK(d == 10 * mt_size, "the view starts where the shared pointer was (%lld)", d);
  }
  MPI_File_close(&fh);

  /* ---- DELETE_ON_CLOSE ---- */
  CHECK(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, &fh) ==
            MPI_SUCCESS, "open DELETE_ON_CLOSE");
  CHECK(exists(name), "file exists while open");
  MPI_File_close(&fh);
  CHECK(!exists(name), "file deleted at close");

  /* ---- MPI_File_delete, and what no file can do ---- */
  CHECK(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_WRONLY | MPI_MODE_CREATE, MPI_INFO_NULL, &fh) == MPI_SUCCESS,
        "create again");
  MPI_File_close(&fh);
  MPI_Barrier(MPI_COMM_WORLD);
  if (mt_rank == 0) CHECK(MPI_File_delete(name, MPI_INFO_NULL) == MPI_SUCCESS && !exists(name), "delete");
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK(cls(MPI_Register_datarep("mine", MPI_CONVERSION_FN_NULL, MPI_CONVERSION_FN_NULL, NULL, NULL)) ==
            MPI_ERR_UNSUPPORTED_OPERATION, "Register_datarep refused");
  CHECK(cls(MPI_Register_datarep("external32", MPI_CONVERSION_FN_NULL, MPI_CONVERSION_FN_NULL, NULL, NULL)) ==
            MPI_ERR_DUP_DATAREP, "Register_datarep of a predefined name");

  /* ---- device errors: MPI_ERR_NO_SPACE and MPI_ERR_IO ---- */
  if (exists("/dev/full")) {
    CHECK(MPI_File_open(MPI_COMM_SELF, "/dev/full", MPI_MODE_WRONLY, MPI_INFO_NULL, &fh) == MPI_SUCCESS,
          "open /dev/full");
    CHECK(cls(MPI_File_write_at(fh, 0, out, 16, MPI_BYTE, &st)) == MPI_ERR_NO_SPACE, "a full device is NO_SPACE");
    MPI_File_close(&fh);
  }
  if (MPI_File_open(MPI_COMM_SELF, "/proc/self/mem", MPI_MODE_RDONLY, MPI_INFO_NULL, &fh) == MPI_SUCCESS) {
    CHECK(cls(MPI_File_read_at(fh, 0, in, 16, MPI_BYTE, &st)) == MPI_ERR_IO, "reading unmapped memory is MPI_ERR_IO");
    MPI_File_close(&fh);
  }
  return mt_pass();
}
