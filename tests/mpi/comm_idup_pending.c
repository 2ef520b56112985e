/* MPI_Comm_idup, then at once (before the request completes) the local
 * calls that Open MPI and MPICH accept on the pending communicator and
 * bindings such as mpi4py make: Comm_set_errhandler / get_errhandler,
 * Comm_set_name / get_name. What was set holds once the idup completes;
 * the parent keeps its own handler. An error on the new communicator then
 * goes to the handler set while it was pending. Also at once after
 * several idups of the same parent, completed in reverse order. */
#include "mpitest.h"

static int calls = 0;
static MPI_Comm seen = MPI_COMM_NULL;
static int seen_code = 0;
static void handler(MPI_Comm* c, int* code, ...) {
  calls++;
  seen = *c;
  seen_code = *code;
}

int main(int argc, char** argv) {
  mt_start("comm_idup_pending", &argc, &argv);
  MPI_Errhandler user, h;
  MPI_Comm_create_errhandler(handler, &user);
  enum { K = 3 };
  MPI_Comm d[K];
  MPI_Request rq[K];
  char name[MPI_MAX_OBJECT_NAME];
  int len = 0;
  for (int i = 0; i < K; ++i) {
    MPI_Comm_idup(MPI_COMM_WORLD, &d[i], &rq[i]);
    CHECK(d[i] != MPI_COMM_NULL, "idup %d returned MPI_COMM_NULL", i);
    int err = MPI_Comm_set_errhandler(d[i], i == 1 ? user : MPI_ERRORS_RETURN);
    CHECK(err == MPI_SUCCESS, "set_errhandler on pending idup %d: %d", i, err);
    h = MPI_ERRHANDLER_NULL;
    err = MPI_Comm_get_errhandler(d[i], &h);
    CHECK(err == MPI_SUCCESS && h == (i == 1 ? user : MPI_ERRORS_RETURN), "get_errhandler on pending idup %d", i);
    snprintf(name, sizeof name, "idup-%d", i);
    err = MPI_Comm_set_name(d[i], name);
    CHECK(err == MPI_SUCCESS, "set_name on pending idup %d: %d", i, err);
    name[0] = 0;
    err = MPI_Comm_get_name(d[i], name, &len);
    CHECK(err == MPI_SUCCESS && len == 6 && name[5] == '0' + i, "get_name on pending idup %d: %s", i, name);
  }
  for (int i = K - 1; i >= 0; --i) MPI_Wait(&rq[i], MPI_STATUS_IGNORE);
  MPI_Comm_get_errhandler(MPI_COMM_WORLD, &h);
  CHECK(h == MPI_ERRORS_ARE_FATAL, "the parent's handler changed");
  for (int i = 0; i < K; ++i) {
    MPI_Comm_get_errhandler(d[i], &h);
    CHECK(h == (i == 1 ? user : MPI_ERRORS_RETURN), "idup %d: handler after completion", i);
    MPI_Comm_get_name(d[i], name, &len);
    CHECK(len == 6 && name[5] == '0' + i, "idup %d: name after completion %s", i, name);
    int res = -1;
    MPI_Comm_compare(d[i], MPI_COMM_WORLD, &res);
    CHECK(res == MPI_CONGRUENT, "idup %d vs world: %d", i, res);
  }
  /* An error on d[0] is returned, on d[1] it calls the user handler. */
  int x = 0;
  int err = MPI_Send(&x, 1, MPI_INT, mt_size, 0, d[0]);
  char text[MPI_MAX_ERROR_STRING];
  CHECK(mt_error(err, text) == MPI_ERR_RANK, "send to rank %d on d[0]: %s", mt_size, text);
  err = MPI_Send(&x, 1, MPI_INT, mt_size, 0, d[1]);
  CHECK(calls == 1 && seen == d[1] && mt_error(seen_code, text) == MPI_ERR_RANK, "user handler: %d calls, %s", calls,
        text);
  /* The new communicators carry traffic. */
  int sum = 0, one = 1;
  MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, d[2]);
  CHECK(sum == mt_size, "allreduce on d[2]: %d", sum);
  for (int i = 0; i < K; ++i) MPI_Comm_free(&d[i]);
  MPI_Errhandler_free(&user);
  return mt_pass();
}
