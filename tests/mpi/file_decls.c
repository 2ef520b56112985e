/* MPI-IO is declared but not provided: calls raise
 * MPI_ERR_UNSUPPORTED_OPERATION on the error handler of MPI_FILE_NULL,
 * which is MPI_ERRORS_RETURN at start (MPI-3.1 13.7) even though
 * MPI_COMM_WORLD keeps MPI_ERRORS_ARE_FATAL, and can be read and changed
 * (a user handler created with MPI_File_create_errhandler is called with
 * MPI_FILE_NULL and the code); output handles are nulled; MPI_File_close
 * of MPI_FILE_NULL is MPI_ERR_FILE. With "fatal" as argument, MPI_File_open
 * after MPI_File_set_errhandler(MPI_FILE_NULL, MPI_ERRORS_ARE_FATAL) ends
 * the job with the message (checked by the driver test). */
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

int main(int argc, char** argv) {
  mt_start("file_decls", &argc, &argv);
  MPI_File fh = 77;
  if (argc > 1 && strcmp(argv[1], "fatal") == 0) {
    MPI_File_set_errhandler(MPI_FILE_NULL, MPI_ERRORS_ARE_FATAL);
    MPI_File_open(MPI_COMM_WORLD, "data.bin", MPI_MODE_RDWR | MPI_MODE_CREATE, MPI_INFO_NULL, &fh);
    CHECK(0, "MPI_File_open returned under MPI_ERRORS_ARE_FATAL");
  }
  /* MPI_COMM_WORLD stays fatal: file errors must not go there. */
  MPI_Errhandler h = MPI_ERRHANDLER_NULL;
  CHECK(MPI_File_get_errhandler(MPI_FILE_NULL, &h) == MPI_SUCCESS && h == MPI_ERRORS_RETURN,
        "MPI_FILE_NULL starts with MPI_ERRORS_RETURN (%d)", h);
  CHECK(cls(MPI_File_open(MPI_COMM_WORLD, "data.bin", MPI_MODE_RDONLY, MPI_INFO_NULL, &fh)) ==
            MPI_ERR_UNSUPPORTED_OPERATION, "File_open");
  CHECK(fh == MPI_FILE_NULL, "File_open leaves MPI_FILE_NULL (%d)", fh);
  CHECK(cls(MPI_File_open(12345, "data.bin", MPI_MODE_RDONLY, MPI_INFO_NULL, &fh)) == MPI_ERR_COMM,
        "File_open with a bad communicator");
  CHECK(cls(MPI_File_delete("data.bin", MPI_INFO_NULL)) == MPI_ERR_UNSUPPORTED_OPERATION, "File_delete");
  char buf[16];
  MPI_Status st;
  CHECK(cls(MPI_File_read_at(fh, 0, buf, 16, MPI_CHAR, &st)) == MPI_ERR_UNSUPPORTED_OPERATION, "File_read_at");
  CHECK(cls(MPI_File_write_all(fh, buf, 16, MPI_CHAR, &st)) == MPI_ERR_UNSUPPORTED_OPERATION, "File_write_all");
  CHECK(cls(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "native", MPI_INFO_NULL)) == MPI_ERR_UNSUPPORTED_OPERATION,
        "File_set_view");
  CHECK(cls(MPI_File_seek(fh, 0, MPI_SEEK_SET)) == MPI_ERR_UNSUPPORTED_OPERATION, "File_seek");
  CHECK(cls(MPI_File_read_at_all_begin(fh, 0, buf, 4, MPI_CHAR)) == MPI_ERR_UNSUPPORTED_OPERATION, "split begin");
  CHECK(cls(MPI_File_read_at_all_end(fh, buf, &st)) == MPI_ERR_UNSUPPORTED_OPERATION, "split end");
  MPI_Request req = 5;
  CHECK(cls(MPI_File_iwrite_at(fh, 0, buf, 4, MPI_CHAR, &req)) == MPI_ERR_UNSUPPORTED_OPERATION &&
            req == MPI_REQUEST_NULL, "File_iwrite_at nulls the request");
  MPI_Datatype et = MPI_INT, ft = MPI_INT;
  MPI_Offset disp = 0;
  char rep[MPI_MAX_DATAREP_STRING];
  CHECK(cls(MPI_File_get_view(fh, &disp, &et, &ft, rep)) == MPI_ERR_UNSUPPORTED_OPERATION &&
            et == MPI_DATATYPE_NULL && ft == MPI_DATATYPE_NULL, "File_get_view nulls the types");
  MPI_Info info = MPI_INFO_ENV;
  CHECK(cls(MPI_File_get_info(fh, &info)) == MPI_ERR_UNSUPPORTED_OPERATION && info == MPI_INFO_NULL, "File_get_info");
  CHECK(cls(MPI_Register_datarep("mine", MPI_CONVERSION_FN_NULL, MPI_CONVERSION_FN_NULL, NULL, NULL)) ==
            MPI_ERR_UNSUPPORTED_OPERATION, "Register_datarep");

  /* Close: MPI_ERR_FILE, never "success". */
  fh = MPI_FILE_NULL;
  CHECK(cls(MPI_File_close(&fh)) == MPI_ERR_FILE, "File_close(MPI_FILE_NULL)");
  fh = 3;
  CHECK(cls(MPI_File_close(&fh)) == MPI_ERR_FILE, "File_close(bogus)");

  /* A user file handler on MPI_FILE_NULL is called with the file and code. */
  MPI_Errhandler feh;
  CHECK(MPI_File_create_errhandler(on_file_error, &feh) == MPI_SUCCESS, "File_create_errhandler");
  CHECK(MPI_File_set_errhandler(MPI_FILE_NULL, feh) == MPI_SUCCESS, "set it on MPI_FILE_NULL");
  CHECK(MPI_File_get_errhandler(MPI_FILE_NULL, &h) == MPI_SUCCESS && h == feh, "read back");
  fh = 9;
  CHECK(MPI_File_open(MPI_COMM_SELF, "x", MPI_MODE_WRONLY | MPI_MODE_CREATE, MPI_INFO_NULL, &fh) ==
            MPI_ERR_UNSUPPORTED_OPERATION, "the handler returns, the code comes back");
  CHECK(calls == 1 && last_code == MPI_ERR_UNSUPPORTED_OPERATION && last_file == MPI_FILE_NULL,
        "handler saw (%d, %d, %d)", calls, last_code, last_file);
  CHECK(MPI_File_call_errhandler(MPI_FILE_NULL, MPI_ERR_IO) == MPI_SUCCESS && calls == 2 && last_code == MPI_ERR_IO,
        "File_call_errhandler");
  CHECK(cls(MPI_File_set_errhandler(MPI_FILE_NULL, 4242)) == MPI_ERR_ARG, "invalid handler refused");
  CHECK(calls == 3 && last_code == MPI_ERR_ARG, "and reported to the current handler");
  MPI_File_set_errhandler(MPI_FILE_NULL, MPI_ERRORS_RETURN);
  CHECK(MPI_Errhandler_free(&feh) == MPI_SUCCESS && feh == MPI_ERRHANDLER_NULL, "free the file handler");

  /* Constants: distinct access-mode bits, conversions. */
  const int modes[] = {MPI_MODE_RDONLY, MPI_MODE_RDWR, MPI_MODE_WRONLY, MPI_MODE_CREATE, MPI_MODE_EXCL,
                       MPI_MODE_DELETE_ON_CLOSE, MPI_MODE_UNIQUE_OPEN, MPI_MODE_SEQUENTIAL, MPI_MODE_APPEND,
                       MPI_MODE_NOCHECK, MPI_MODE_NOSTORE, MPI_MODE_NOPUT, MPI_MODE_NOPRECEDE, MPI_MODE_NOSUCCEED};
  int seen = 0;
  for (int i = 0; i < (int)(sizeof modes / sizeof modes[0]); ++i) {
    CHECK(modes[i] > 0 && (modes[i] & (modes[i] - 1)) == 0 && !(seen & modes[i]), "mode bit %d", i);
    seen |= modes[i];
  }
  CHECK(MPI_SEEK_SET != MPI_SEEK_CUR && MPI_SEEK_CUR != MPI_SEEK_END && MPI_SEEK_SET != MPI_SEEK_END, "whence");
  CHECK(MPI_File_f2c(MPI_File_c2f(MPI_FILE_NULL)) == MPI_FILE_NULL, "File c2f/f2c");
  return mt_pass();
}
