/* Freeing a keyval twice is an error: MPI_Comm_free_keyval and
 * MPI_Keyval_free set the caller's handle to MPI_KEYVAL_INVALID on success
 * and raise MPI_ERR_KEYVAL for a keyval already freed (through a copy of
 * the handle), for MPI_KEYVAL_INVALID and for predefined attributes; a
 * freed keyval's cached attribute keeps its delete callback. */
#include "mpitest.h"

static int deletes = 0;
static int count_delete(MPI_Comm c, int k, void* v, void* x) {
  (void)c, (void)k, (void)v, (void)x;
  ++deletes;
  return MPI_SUCCESS;
}

static int cls(int err) {
  char text[MPI_MAX_ERROR_STRING];
  return mt_error(err, text);
}

int main(int argc, char** argv) {
  mt_start("attr_keyval_free", &argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int k = MPI_KEYVAL_INVALID;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, count_delete, &k, NULL);
  int copy = k;
  CHECK(MPI_Comm_free_keyval(&k) == MPI_SUCCESS && k == MPI_KEYVAL_INVALID, "first free");
  CHECK(cls(MPI_Comm_free_keyval(&copy)) == MPI_ERR_KEYVAL, "second free through a copy");
  CHECK(copy != MPI_KEYVAL_INVALID, "a failed free leaves the handle");
  CHECK(cls(MPI_Comm_free_keyval(&k)) == MPI_ERR_KEYVAL, "free of MPI_KEYVAL_INVALID");
  int tag_ub = MPI_TAG_UB;
  CHECK(cls(MPI_Comm_free_keyval(&tag_ub)) == MPI_ERR_KEYVAL, "free of a predefined attribute");

  /* The MPI-1 names, the same rules. */
  int d = MPI_KEYVAL_INVALID;
  MPI_Keyval_create(MPI_NULL_COPY_FN, MPI_NULL_DELETE_FN, &d, NULL);
  int dcopy = d;
  CHECK(MPI_Keyval_free(&d) == MPI_SUCCESS && d == MPI_KEYVAL_INVALID, "Keyval_free");
  CHECK(cls(MPI_Keyval_free(&dcopy)) == MPI_ERR_KEYVAL, "Keyval_free twice");

  /* Freed while cached: the attribute's delete callback still runs once. */
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, count_delete, &k, NULL);
  copy = k;
  MPI_Comm_set_attr(dup, k, &deletes);
  CHECK(MPI_Comm_free_keyval(&k) == MPI_SUCCESS, "free while cached");
  CHECK(cls(MPI_Comm_free_keyval(&copy)) == MPI_ERR_KEYVAL, "and not twice");
  MPI_Comm_free(&dup);
  CHECK(deletes == 1, "delete callback ran %d times, want 1", deletes);
  return mt_pass();
}
