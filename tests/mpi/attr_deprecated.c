/* The deprecated MPI-1 attribute calls older programs use: Keyval_create
 * (with MPI_NULL_COPY_FN, MPI_DUP_FN, MPI_NULL_DELETE_FN and user
 * callbacks), Attr_put, Attr_get, Attr_delete, Keyval_free. */
#include "mpitest.h"

static int dels = 0;
static int count_delete(MPI_Comm c, int kv, void* val, void* extra) {
  (void)c;
  (void)kv;
  (void)extra;
  if (*(int*)val == 5) dels++;
  return MPI_SUCCESS;
}
static int copy_fn(MPI_Comm c, int kv, void* extra, void* in, void* out, int* flag) {
  (void)c;
  (void)kv;
  (void)extra;
  *(void**)out = in;
  *flag = 1;
  return MPI_SUCCESS;
}

int main(int argc, char** argv) {
  mt_start("attr_deprecated", &argc, &argv);
  int a, b, c;
  MPI_Keyval_create(MPI_NULL_COPY_FN, MPI_NULL_DELETE_FN, &a, NULL);
  MPI_Keyval_create(MPI_DUP_FN, MPI_NULL_DELETE_FN, &b, NULL);
  MPI_Keyval_create(copy_fn, count_delete, &c, NULL);
  static int va = 1, vb = 2, vc = 5;
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Attr_put(comm, a, &va);
  MPI_Attr_put(comm, b, &vb);
  MPI_Attr_put(comm, c, &vc);
  int* p = NULL;
  int flag = 0;
  MPI_Attr_get(comm, a, &p, &flag);
  CHECK(flag && p == &va, "Attr_get a");
  MPI_Comm d;
  MPI_Comm_dup(comm, &d);
  MPI_Attr_get(d, a, &p, &flag);
  CHECK(!flag, "MPI_NULL_COPY_FN: not copied");
  MPI_Attr_get(d, b, &p, &flag);
  CHECK(flag && p == &vb && *p == 2, "MPI_DUP_FN: copied");
  MPI_Attr_get(d, c, &p, &flag);
  CHECK(flag && p == &vc, "user copy function");
  MPI_Attr_delete(d, c);
  CHECK(dels == 1, "Attr_delete ran the delete function: %d", dels);
  MPI_Attr_get(d, c, &p, &flag);
  CHECK(!flag, "deleted");
  MPI_Comm_free(&d);
  CHECK(dels == 1, "c was no longer on d: %d", dels);
  MPI_Comm_free(&comm);
  CHECK(dels == 2, "free ran c's delete function: %d", dels);
  MPI_Keyval_free(&a);
  MPI_Keyval_free(&b);
  MPI_Keyval_free(&c);
  CHECK(a == MPI_KEYVAL_INVALID && c == MPI_KEYVAL_INVALID, "Keyval_free resets");
  /* The new and old calls share one keyval space. */
  int k;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &k, NULL);
  MPI_Attr_put(MPI_COMM_WORLD, k, &va);
  MPI_Comm_get_attr(MPI_COMM_WORLD, k, &p, &flag);
  CHECK(flag && p == &va, "Attr_put then Comm_get_attr");
  MPI_Comm_delete_attr(MPI_COMM_WORLD, k);
  MPI_Keyval_free(&k);
  return mt_pass();
}
