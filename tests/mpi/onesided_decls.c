/* One-sided communication is declared but not provided: every call raises
 * MPI_ERR_UNSUPPORTED_OPERATION through the error handler (here
 * MPI_ERRORS_RETURN, and a user handler on a communicator) and nulls its
 * output handles; MPI_Win_free of MPI_WIN_NULL or of a handle no window can
 * have is MPI_ERR_WIN; MPI_Win_create_errhandler makes a real handler; the
 * new error classes have names. With "fatal" as argument, MPI_Win_create on
 * MPI_ERRORS_ARE_FATAL ends the job with the message (checked by the
 * driver test). */
#include "mpitest.h"

static int calls = 0, last_code = 0;
static MPI_Comm last_comm = MPI_COMM_NULL;
static void on_error(MPI_Comm* comm, int* code, ...) {
  ++calls;
  last_code = *code;
  last_comm = *comm;
}
static void on_win_error(MPI_Win* win, int* code, ...) {
  (void)win;
  (void)code;
}

static int cls(int err) {
  char text[MPI_MAX_ERROR_STRING];
  return mt_error(err, text);
}

int main(int argc, char** argv) {
  mt_start("onesided_decls", &argc, &argv);
  if (argc > 1 && strcmp(argv[1], "fatal") == 0) {
    MPI_Win w;
    char buf[8];
    MPI_Win_create(buf, sizeof buf, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &w);
    CHECK(0, "MPI_Win_create returned under MPI_ERRORS_ARE_FATAL");
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

  /* Constructors: the error, and MPI_WIN_NULL / NULL base. */
  int buf[4] = {0};
  MPI_Win win = 12345;
  CHECK(cls(MPI_Win_create(buf, sizeof buf, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win)) ==
            MPI_ERR_UNSUPPORTED_OPERATION, "Win_create");
  CHECK(win == MPI_WIN_NULL, "Win_create sets MPI_WIN_NULL (%d)", win);
  void* base = buf;
  win = 7;
  CHECK(cls(MPI_Win_allocate(64, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win)) == MPI_ERR_UNSUPPORTED_OPERATION,
        "Win_allocate");
  CHECK(base == NULL && win == MPI_WIN_NULL, "Win_allocate outputs");
  base = buf;
  win = 7;
  CHECK(cls(MPI_Win_allocate_shared(64, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win)) ==
            MPI_ERR_UNSUPPORTED_OPERATION, "Win_allocate_shared");
  CHECK(base == NULL && win == MPI_WIN_NULL, "Win_allocate_shared outputs");
  win = 7;
  CHECK(cls(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win)) == MPI_ERR_UNSUPPORTED_OPERATION,
        "Win_create_dynamic");
  CHECK(win == MPI_WIN_NULL, "Win_create_dynamic output");
  CHECK(cls(MPI_Win_create(buf, 16, 4, MPI_INFO_NULL, 999, &win)) == MPI_ERR_COMM, "bad communicator first");

  /* Communication and synchronization on the null window. */
  int one = 1, res = 0, cmp = 0;
  CHECK(cls(MPI_Put(&one, 1, MPI_INT, 0, 0, 1, MPI_INT, win)) == MPI_ERR_UNSUPPORTED_OPERATION, "Put");
  CHECK(cls(MPI_Get(&res, 1, MPI_INT, 0, 0, 1, MPI_INT, win)) == MPI_ERR_UNSUPPORTED_OPERATION, "Get");
  CHECK(cls(MPI_Accumulate(&one, 1, MPI_INT, 0, 0, 1, MPI_INT, MPI_SUM, win)) == MPI_ERR_UNSUPPORTED_OPERATION,
        "Accumulate");
  CHECK(cls(MPI_Get_accumulate(&one, 1, MPI_INT, &res, 1, MPI_INT, 0, 0, 1, MPI_INT, MPI_SUM, win)) ==
            MPI_ERR_UNSUPPORTED_OPERATION, "Get_accumulate");
  CHECK(cls(MPI_Fetch_and_op(&one, &res, MPI_INT, 0, 0, MPI_SUM, win)) == MPI_ERR_UNSUPPORTED_OPERATION,
        "Fetch_and_op");
  CHECK(cls(MPI_Compare_and_swap(&one, &cmp, &res, MPI_INT, 0, 0, win)) == MPI_ERR_UNSUPPORTED_OPERATION,
        "Compare_and_swap");
  MPI_Request req = 99;
  CHECK(cls(MPI_Rput(&one, 1, MPI_INT, 0, 0, 1, MPI_INT, win, &req)) == MPI_ERR_UNSUPPORTED_OPERATION, "Rput");
  CHECK(req == MPI_REQUEST_NULL, "Rput nulls the request");
  req = 99;
  CHECK(cls(MPI_Rget_accumulate(&one, 1, MPI_INT, &res, 1, MPI_INT, 0, 0, 1, MPI_INT, MPI_SUM, win, &req)) ==
            MPI_ERR_UNSUPPORTED_OPERATION, "Rget_accumulate");
  CHECK(req == MPI_REQUEST_NULL, "Rget_accumulate nulls the request");
  CHECK(cls(MPI_Win_fence(MPI_MODE_NOPRECEDE, win)) == MPI_ERR_UNSUPPORTED_OPERATION, "Win_fence");
  CHECK(cls(MPI_Win_lock(MPI_LOCK_SHARED, 0, MPI_MODE_NOCHECK, win)) == MPI_ERR_UNSUPPORTED_OPERATION, "Win_lock");
  CHECK(cls(MPI_Win_unlock_all(win)) == MPI_ERR_UNSUPPORTED_OPERATION, "Win_unlock_all");
  CHECK(cls(MPI_Win_flush_local_all(win)) == MPI_ERR_UNSUPPORTED_OPERATION, "Win_flush_local_all");
  MPI_Group g = 5;
  CHECK(cls(MPI_Win_get_group(win, &g)) == MPI_ERR_UNSUPPORTED_OPERATION && g == MPI_GROUP_NULL, "Win_get_group");
  int flag = 1, kv = 3;
  CHECK(cls(MPI_Win_get_attr(win, MPI_WIN_BASE, &base, &flag)) == MPI_ERR_UNSUPPORTED_OPERATION && flag == 0,
        "Win_get_attr");
  CHECK(cls(MPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, MPI_WIN_NULL_DELETE_FN, &kv, NULL)) ==
            MPI_ERR_UNSUPPORTED_OPERATION && kv == MPI_KEYVAL_INVALID, "Win_create_keyval");

  /* Win_free: MPI_ERR_WIN, never "success". */
  win = MPI_WIN_NULL;
  CHECK(cls(MPI_Win_free(&win)) == MPI_ERR_WIN, "Win_free(MPI_WIN_NULL)");
  win = 42;
  CHECK(cls(MPI_Win_free(&win)) == MPI_ERR_WIN, "Win_free(bogus)");
  CHECK(cls(MPI_Win_free(NULL)) == MPI_ERR_ARG, "Win_free(NULL)");

  /* A user handler on a communicator sees the window constructor's error. */
  MPI_Comm dup;
  MPI_Errhandler eh;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  MPI_Comm_create_errhandler(on_error, &eh);
  MPI_Comm_set_errhandler(dup, eh);
  CHECK(MPI_Win_create_dynamic(MPI_INFO_NULL, dup, &win) == MPI_ERR_UNSUPPORTED_OPERATION, "user handler returns");
  CHECK(calls == 1 && last_code == MPI_ERR_UNSUPPORTED_OPERATION && last_comm == dup,
        "handler called once with the code on the communicator (%d, %d)", calls, last_code);
  MPI_Comm_free(&dup);
  MPI_Errhandler_free(&eh);

  /* Window error handlers are real handlers. */
  MPI_Errhandler weh = MPI_ERRHANDLER_NULL;
  CHECK(MPI_Win_create_errhandler(on_win_error, &weh) == MPI_SUCCESS && weh != MPI_ERRHANDLER_NULL,
        "Win_create_errhandler");
  CHECK(MPI_Errhandler_free(&weh) == MPI_SUCCESS && weh == MPI_ERRHANDLER_NULL, "free it");

  /* Predefined callbacks, conversions, constants. */
  void* out = NULL;
  flag = 0;
  CHECK(MPI_WIN_DUP_FN(MPI_WIN_NULL, 0, NULL, buf, &out, &flag) == MPI_SUCCESS && out == buf && flag == 1,
        "MPI_WIN_DUP_FN copies");
  CHECK(MPI_WIN_NULL_COPY_FN(MPI_WIN_NULL, 0, NULL, buf, &out, &flag) == MPI_SUCCESS && flag == 0,
        "MPI_WIN_NULL_COPY_FN does not");
  CHECK(MPI_Win_f2c(MPI_Win_c2f(MPI_WIN_NULL)) == MPI_WIN_NULL, "Win c2f/f2c");
  const int asserts[] = {MPI_MODE_NOCHECK, MPI_MODE_NOSTORE, MPI_MODE_NOPUT, MPI_MODE_NOPRECEDE, MPI_MODE_NOSUCCEED};
  int seen = 0;
  for (int i = 0; i < 5; ++i) {
    CHECK(asserts[i] > 0 && (asserts[i] & (asserts[i] - 1)) == 0 && !(seen & asserts[i]), "assert bit %d", i);
    seen |= asserts[i];
  }
  CHECK(MPI_LOCK_SHARED != MPI_LOCK_EXCLUSIVE, "lock types differ");

  /* The new classes have names, and user classes come after them. */
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(MPI_ERR_WIN, text, &len);
  CHECK(strncmp(text, "MPI_ERR_WIN:", 12) == 0, "MPI_ERR_WIN string: %s", text);
  MPI_Error_string(MPI_ERR_RMA_SYNC, text, &len);
  CHECK(strncmp(text, "MPI_ERR_RMA_SYNC:", 17) == 0, "MPI_ERR_RMA_SYNC string: %s", text);
  CHECK(MPI_ERR_LASTCODE >= MPI_ERR_IO && MPI_ERR_LASTCODE >= MPI_ERR_RMA_FLAVOR, "MPI_ERR_LASTCODE covers them");
  int c = 0;
  MPI_Error_class(MPI_ERR_RMA_FLAVOR, &c);
  CHECK(c == MPI_ERR_RMA_FLAVOR, "class of MPI_ERR_RMA_FLAVOR");
  return mt_pass();
}
