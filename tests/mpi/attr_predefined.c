/* The predefined attributes of MPI_COMM_WORLD: values are pointers to
 * ints; they cannot be set, deleted or freed. */
#include "mpitest.h"

static int get(int kv, int* flag) {
  int* p = NULL;
  *flag = -1;
  int e = MPI_Comm_get_attr(MPI_COMM_WORLD, kv, &p, flag);
  CHECK(e == MPI_SUCCESS, "get_attr %d: error %d", kv, e);
  return *flag ? *p : -12345;
}

int main(int argc, char** argv) {
  mt_start("attr_predefined", &argc, &argv);
  int flag;
  int ub = get(MPI_TAG_UB, &flag);
  CHECK(flag && ub >= 32767, "MPI_TAG_UB %d", ub);
  /* The largest tag really works. */
  int x = 5, y = 0;
  MPI_Sendrecv(&x, 1, MPI_INT, mt_rank, ub, &y, 1, MPI_INT, mt_rank, ub, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  CHECK(y == 5, "message with tag MPI_TAG_UB");
  int host = get(MPI_HOST, &flag);
  CHECK(flag && (host == MPI_PROC_NULL || (host >= 0 && host < mt_size)), "MPI_HOST %d", host);
  int io = get(MPI_IO, &flag);
  CHECK(flag && (io == MPI_ANY_SOURCE || io == MPI_PROC_NULL || (io >= 0 && io < mt_size)), "MPI_IO %d", io);
  int wg = get(MPI_WTIME_IS_GLOBAL, &flag);
  CHECK(flag && (wg == 0 || wg == 1), "MPI_WTIME_IS_GLOBAL %d", wg);
  int app = get(MPI_APPNUM, &flag);
  CHECK(!flag || app >= 0, "MPI_APPNUM %d", app);
  int us = get(MPI_UNIVERSE_SIZE, &flag);
  CHECK(!flag || us >= mt_size, "MPI_UNIVERSE_SIZE %d", us);
  int last = get(MPI_LASTUSEDCODE, &flag);
  CHECK(flag && last >= MPI_ERR_LASTCODE, "MPI_LASTUSEDCODE %d", last);
  /* The deprecated name reads the same. */
  int* p = NULL;
  MPI_Attr_get(MPI_COMM_WORLD, MPI_TAG_UB, &p, &flag);
  CHECK(flag && *p == ub, "MPI_Attr_get(MPI_TAG_UB)");
  /* Read-only. */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  static int v = 1;
  CHECK(MPI_Comm_set_attr(MPI_COMM_WORLD, MPI_TAG_UB, &v) == MPI_ERR_KEYVAL, "set MPI_TAG_UB");
  CHECK(MPI_Comm_delete_attr(MPI_COMM_WORLD, MPI_HOST) == MPI_ERR_KEYVAL, "delete MPI_HOST");
  int kv = MPI_IO;
  CHECK(MPI_Comm_free_keyval(&kv) == MPI_ERR_KEYVAL, "free MPI_IO");
  ub = get(MPI_TAG_UB, &flag);
  CHECK(flag && ub >= 32767, "MPI_TAG_UB unchanged %d", ub);
  /* Not cached on other communicators. */
  MPI_Comm d;
  MPI_Comm_dup(MPI_COMM_WORLD, &d);
  p = NULL;
  MPI_Comm_get_attr(d, MPI_TAG_UB, &p, &flag);
  CHECK(flag == 0, "MPI_TAG_UB is on MPI_COMM_WORLD only");
  MPI_Comm_free(&d);
  return mt_pass();
}
