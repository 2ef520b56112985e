/* Argument errors of groups, communicator constructors, keyvals and
 * intercommunicators return the right class under MPI_ERRORS_RETURN (and
 * nothing is created). */
#include "mpitest.h"

static int failing_copy(MPI_Comm c, int k, void* extra, void* in, void* out, int* flag) {
  (void)c;
  (void)k;
  (void)extra;
  (void)in;
  (void)out;
  *flag = 0;
  return MPI_ERR_OTHER;
}
static int refuse = 1;
static int failing_delete(MPI_Comm c, int k, void* v, void* extra) {
  (void)c;
  (void)k;
  (void)v;
  (void)extra;
  return refuse ? MPI_ERR_OTHER : MPI_SUCCESS;
}

static int cls(int e) {
  int c = -1;
  MPI_Error_class(e, &c);
  return c;
}

int main(int argc, char** argv) {
  mt_start("comm_errors", &argc, &argv);
  const int n = mt_size;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  /* Errors of the intercommunicator calls below are raised on local_comm
   * (MPI_COMM_SELF), which has its own handler. */
  MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
  MPI_Group world, g = MPI_GROUP_NULL;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  int s;
  /* Groups. */
  CHECK(cls(MPI_Group_size(MPI_GROUP_NULL, &s)) == MPI_ERR_GROUP, "size of MPI_GROUP_NULL");
  CHECK(cls(MPI_Group_size((MPI_Group)9999, &s)) == MPI_ERR_GROUP, "size of a bogus group");
  int bad = n;
  CHECK(cls(MPI_Group_incl(world, 1, &bad, &g)) == MPI_ERR_RANK, "incl rank out of range");
  int twice[2] = {0, 0};
  CHECK(cls(MPI_Group_incl(world, 2, twice, &g)) == MPI_ERR_RANK, "incl a rank twice");
  CHECK(cls(MPI_Group_excl(world, 1, &bad, &g)) == MPI_ERR_RANK, "excl rank out of range");
  int zero_stride[1][3] = {{0, n - 1, 0}};
  CHECK(cls(MPI_Group_range_incl(world, 1, zero_stride, &g)) == MPI_ERR_ARG, "zero stride");
  int past[1][3] = {{0, n, 1}};
  CHECK(cls(MPI_Group_range_excl(world, 1, past, &g)) == MPI_ERR_RANK, "range past the end");
  CHECK(g == MPI_GROUP_NULL, "nothing created");
  int in = n, out;
  CHECK(cls(MPI_Group_translate_ranks(world, 1, &in, world, &out)) == MPI_ERR_RANK, "translate out of range");
  CHECK(cls(MPI_Group_union(world, MPI_GROUP_NULL, &g)) == MPI_ERR_GROUP, "union with MPI_GROUP_NULL");
  MPI_Group dead;
  MPI_Group_incl(world, 1, (int[]){0}, &dead);
  MPI_Group keep = dead;
  MPI_Group_free(&dead);
  CHECK(cls(MPI_Group_free(&keep)) == MPI_ERR_GROUP, "double free");
  CHECK(cls(MPI_Group_compare(keep, world, &s)) == MPI_ERR_GROUP, "freed group");

  /* Communicator constructors. */
  MPI_Comm c = 12345;
  CHECK(cls(MPI_Comm_create(MPI_COMM_WORLD, (MPI_Group)9999, &c)) == MPI_ERR_GROUP, "create with a bogus group");
  CHECK(cls(MPI_Comm_create(MPI_COMM_NULL, world, &c)) == MPI_ERR_COMM, "create on MPI_COMM_NULL");
  CHECK(cls(MPI_Comm_create_group(MPI_COMM_WORLD, world, -1, &c)) == MPI_ERR_TAG, "create_group negative tag");
  CHECK(cls(MPI_Comm_split_type(MPI_COMM_WORLD, 77, 0, MPI_INFO_NULL, &c)) == MPI_ERR_ARG, "bad split_type");
  CHECK(c == 12345, "nothing created");
  if (n >= 2) {
    /* A group with a rank that is not in the (half) communicator. */
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, mt_rank < n / 2, 0, &half);
    CHECK(cls(MPI_Comm_create(half, world, &c)) == MPI_ERR_GROUP, "group not a subset");
    MPI_Comm_free(&half);
  }
  /* Intercommunicator calls on intracommunicators, bad leaders. */
  CHECK(cls(MPI_Comm_remote_size(MPI_COMM_WORLD, &s)) == MPI_ERR_COMM, "remote_size of an intracomm");
  CHECK(cls(MPI_Comm_remote_group(MPI_COMM_WORLD, &g)) == MPI_ERR_COMM, "remote_group of an intracomm");
  CHECK(cls(MPI_Intercomm_merge(MPI_COMM_WORLD, 0, &c)) == MPI_ERR_COMM, "merge an intracomm");
  CHECK(cls(MPI_Intercomm_create(MPI_COMM_SELF, 1, MPI_COMM_WORLD, 0, 0, &c)) == MPI_ERR_RANK, "bad local leader");
  CHECK(cls(MPI_Intercomm_create(MPI_COMM_SELF, 0, MPI_COMM_WORLD, n, 0, &c)) == MPI_ERR_RANK, "bad remote leader");
  CHECK(cls(MPI_Intercomm_create(MPI_COMM_SELF, 0, MPI_COMM_WORLD, mt_rank, 0, &c)) == MPI_ERR_RANK,
        "remote leader in the local group");
  CHECK(cls(MPI_Intercomm_create(MPI_COMM_SELF, 0, MPI_COMM_NULL, 0, 0, &c)) == MPI_ERR_COMM, "bad peer comm");

  if (n >= 2) {
    /* A leader with a bad remote_leader tells its group. */
    int e = MPI_Intercomm_create(MPI_COMM_WORLD, 0, MPI_COMM_WORLD, mt_rank == 0 ? -3 : 0, 0, &c);
    CHECK(cls(e) == (mt_rank == 0 ? MPI_ERR_RANK : MPI_ERR_ARG), "bad remote leader seen by all: %d", e);
  }

  /* Keyvals. */
  int kv = 4242;
  CHECK(cls(MPI_Comm_set_attr(MPI_COMM_WORLD, kv, NULL)) == MPI_ERR_KEYVAL, "set with a bogus keyval");
  CHECK(cls(MPI_Comm_set_attr(MPI_COMM_WORLD, MPI_KEYVAL_INVALID, NULL)) == MPI_ERR_KEYVAL, "MPI_KEYVAL_INVALID");
  int k;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &k, NULL);
  int k_old = k;
  MPI_Comm_free_keyval(&k);
  void* v;
  int flag;
  CHECK(cls(MPI_Comm_get_attr(MPI_COMM_WORLD, k_old, &v, &flag)) == MPI_ERR_KEYVAL, "get with a freed keyval");
  CHECK(cls(MPI_Comm_free_keyval(&k_old)) == MPI_ERR_KEYVAL, "free a keyval twice");
  CHECK(cls(MPI_Comm_delete_attr(MPI_COMM_WORLD, MPI_TAG_UB)) == MPI_ERR_KEYVAL, "delete a predefined attribute");
  CHECK(cls(MPI_Comm_set_attr(MPI_COMM_NULL, MPI_TAG_UB, NULL)) == MPI_ERR_COMM, "set_attr on MPI_COMM_NULL");

  /* A failing copy callback fails the dup (no communicator made); a
   * failing delete callback fails the free (the communicator stays). */
  int kc, kd;
  MPI_Comm_create_keyval(failing_copy, MPI_COMM_NULL_DELETE_FN, &kc, NULL);
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, failing_delete, &kd, NULL);
  MPI_Comm base, cp = 12345;
  MPI_Comm_dup(MPI_COMM_WORLD, &base);
  MPI_Comm_set_attr(base, kc, NULL);
  CHECK(cls(MPI_Comm_dup(base, &cp)) == MPI_ERR_OTHER && cp == MPI_COMM_NULL, "failing copy: %d", cp);
  MPI_Comm_delete_attr(base, kc);
  MPI_Comm_set_attr(base, kd, NULL);
  MPI_Comm keep2 = base;
  CHECK(cls(MPI_Comm_free(&base)) == MPI_ERR_OTHER && base == keep2, "failing delete");
  CHECK(MPI_Comm_size(base, &s) == MPI_SUCCESS, "still usable after a refused free");
  refuse = 0;
  CHECK(MPI_Comm_free(&base) == MPI_SUCCESS && base == MPI_COMM_NULL, "free once the callback agrees");
  MPI_Comm_free_keyval(&kc);
  MPI_Comm_free_keyval(&kd);

  /* Names, info. */
  char name[MPI_MAX_OBJECT_NAME];
  CHECK(cls(MPI_Comm_set_name(MPI_COMM_NULL, "x")) == MPI_ERR_COMM, "set_name on MPI_COMM_NULL");
  CHECK(cls(MPI_Comm_get_name((MPI_Comm)777, name, &s)) == MPI_ERR_COMM, "get_name of a bogus comm");
  CHECK(cls(MPI_Comm_set_info(MPI_COMM_WORLD, (MPI_Info)999)) == MPI_ERR_INFO, "set_info with a bogus info");

  /* A duplicate inherits MPI_ERRORS_RETURN: errors there return too. */
  MPI_Comm d;
  MPI_Comm_dup(MPI_COMM_WORLD, &d);
  CHECK(cls(MPI_Comm_remote_size(d, &s)) == MPI_ERR_COMM, "error on the dup returns");
  MPI_Comm_free(&d);
  CHECK(cls(MPI_Comm_free(&d)) == MPI_ERR_COMM, "free MPI_COMM_NULL");
  /* Error strings name the new classes. */
  char str[MPI_MAX_ERROR_STRING];
  int len;
  MPI_Error_string(MPI_ERR_KEYVAL, str, &len);
  CHECK(len > 0, "MPI_ERR_KEYVAL has a string");
  MPI_Group_free(&world);
  return mt_pass();
}
