/* Attributes and names on datatypes (MPI-3.1 6.7.4, 6.8) and
 * MPI_Type_match_size: copy callbacks on MPI_Type_dup (MPI_TYPE_DUP_FN,
 * MPI_TYPE_NULL_COPY_FN, user ones, a failing one), delete callbacks on
 * MPI_Type_free, MPI_Type_delete_attr and overwrite, keyvals of the wrong
 * kind, attributes on a predefined type, standard names of predefined
 * types and empty names of new ones. Local calls only: any process count. */
#include "mpitest.h"

static int deleted[16];       /* value -> times its delete callback ran */
static int delete_order[16];  /* values in the order they were deleted */
static int ndeleted;
static int copies;

static int record_delete(MPI_Datatype t, int keyval, void* value, void* extra) {
  (void)t;
  (void)keyval;
  CHECK(*(int*)extra == 42, "extra state %d", *(int*)extra);
  const int v = (int)(MPI_Aint)value;
  deleted[v]++;
  delete_order[ndeleted++] = v;
  return MPI_SUCCESS;
}
static int refuse_delete(MPI_Datatype t, int keyval, void* value, void* extra) {
  (void)t, (void)keyval, (void)value, (void)extra;
  return MPI_ERR_OTHER;
}
/* Copies value + 1. */
static int copy_plus_one(MPI_Datatype t, int keyval, void* extra, void* in, void* out, int* flag) {
  (void)t, (void)keyval, (void)extra;
  *(void**)out = (void*)((MPI_Aint)in + 1);
  *flag = 1;
  copies++;
  return MPI_SUCCESS;
}
static int copy_fails(MPI_Datatype t, int keyval, void* extra, void* in, void* out, int* flag) {
  (void)t, (void)keyval, (void)extra, (void)in, (void)out, (void)flag;
  return MPI_ERR_OTHER;
}

static void check_name(MPI_Datatype t, const char* want) {
  char name[MPI_MAX_OBJECT_NAME];
  int len = -1;
  MPI_Type_get_name(t, name, &len);
  CHECK(strcmp(name, want) == 0 && len == (int)strlen(want), "name \"%s\" (%d), want \"%s\"", name, len, want);
}

int main(int argc, char** argv) {
  mt_start("type_attr", &argc, &argv);
  char text[MPI_MAX_ERROR_STRING];
  int extra = 42;
  int kv_dup, kv_nocopy, kv_plus, kv_comm;
  MPI_Type_create_keyval(MPI_TYPE_DUP_FN, record_delete, &kv_dup, &extra);
  MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, record_delete, &kv_nocopy, &extra);
  MPI_Type_create_keyval(copy_plus_one, MPI_TYPE_NULL_DELETE_FN, &kv_plus, &extra);
  MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &kv_comm, NULL);

  MPI_Datatype vec, dup, dup2;
  MPI_Type_vector(3, 1, 2, MPI_INT, &vec);
  check_name(vec, "");
  MPI_Type_set_name(vec, "every other int");
  check_name(vec, "every other int");

  /* set / get / overwrite (deletes the old value) */
  void* val = NULL;
  int flag = -1;
  MPI_Type_get_attr(vec, kv_dup, &val, &flag);
  CHECK(flag == 0, "attribute before set");
  MPI_Type_set_attr(vec, kv_dup, (void*)1);
  MPI_Type_set_attr(vec, kv_dup, (void*)2);
  CHECK(deleted[1] == 1 && deleted[2] == 0, "overwrite deleted %d/%d", deleted[1], deleted[2]);
  MPI_Type_get_attr(vec, kv_dup, &val, &flag);
  CHECK(flag == 1 && val == (void*)2, "flag %d value %p", flag, val);
  MPI_Type_set_attr(vec, kv_nocopy, (void*)3);
  MPI_Type_set_attr(vec, kv_plus, (void*)5);

  /* dup: DUP_FN copies, NULL_COPY_FN does not, the user callback adds 1;
   * the name is not copied */
  MPI_Type_dup(vec, &dup);
  check_name(dup, "");
  CHECK(copies == 1, "copy callbacks %d", copies);
  MPI_Type_get_attr(dup, kv_dup, &val, &flag);
  CHECK(flag == 1 && val == (void*)2, "dup: DUP_FN value %p flag %d", val, flag);
  MPI_Type_get_attr(dup, kv_nocopy, &val, &flag);
  CHECK(flag == 0, "dup: NULL_COPY_FN attribute was copied");
  MPI_Type_get_attr(dup, kv_plus, &val, &flag);
  CHECK(flag == 1 && val == (void*)6, "dup: user copy value %p", val);

  /* delete_attr runs the callback; deleting what is not there is fine */
  MPI_Type_delete_attr(vec, kv_nocopy);
  CHECK(deleted[3] == 1, "delete_attr callback %d", deleted[3]);
  MPI_Type_get_attr(vec, kv_nocopy, &val, &flag);
  CHECK(flag == 0, "attribute after delete_attr");
  CHECK(MPI_Type_delete_attr(vec, kv_nocopy) == MPI_SUCCESS, "deleting an absent attribute");

  /* free runs the delete callbacks, last set first; the dup's stay */
  MPI_Type_set_attr(vec, kv_nocopy, (void*)4);
  ndeleted = 0;
  MPI_Type_free(&vec);
  CHECK(vec == MPI_DATATYPE_NULL, "handle after free");
  CHECK(ndeleted == 2 && delete_order[0] == 4 && delete_order[1] == 2, "free deleted %d: %d %d", ndeleted,
        delete_order[0], delete_order[1]);
  MPI_Type_get_attr(dup, kv_dup, &val, &flag);
  CHECK(flag == 1 && val == (void*)2, "dup's attribute after the original's free");

  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  /* a keyval of the wrong kind, an invalid one, a freed type */
  int err = MPI_Type_set_attr(dup, kv_comm, (void*)1);
  CHECK(mt_error(err, text) == MPI_ERR_KEYVAL, "communicator keyval on a type: %s", text);
  err = MPI_Comm_set_attr(MPI_COMM_WORLD, kv_dup, (void*)1);
  CHECK(mt_error(err, text) == MPI_ERR_KEYVAL, "datatype keyval on a communicator: %s", text);
  err = MPI_Type_get_attr(dup, 12345, &val, &flag);
  CHECK(mt_error(err, text) == MPI_ERR_KEYVAL, "invalid keyval: %s", text);
  err = MPI_Type_set_attr(vec, kv_dup, (void*)1);
  CHECK(mt_error(err, text) == MPI_ERR_TYPE, "freed type: %s", text);
  err = MPI_Type_free_keyval(&kv_comm);
  CHECK(mt_error(err, text) == MPI_ERR_KEYVAL, "Type_free_keyval of a communicator keyval: %s", text);

  /* a failing copy callback fails the dup; a refusing delete callback
   * fails the free and leaves the type alive */
  int kv_fail, kv_refuse;
  MPI_Type_create_keyval(copy_fails, MPI_TYPE_NULL_DELETE_FN, &kv_fail, NULL);
  MPI_Type_set_attr(dup, kv_fail, (void*)9);
  err = MPI_Type_dup(dup, &dup2);
  CHECK(err != MPI_SUCCESS && dup2 == MPI_DATATYPE_NULL, "dup with a failing copy callback: %d", err);
  MPI_Type_delete_attr(dup, kv_fail);
  MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, refuse_delete, &kv_refuse, NULL);
  MPI_Type_set_attr(dup, kv_refuse, (void*)10);
  MPI_Datatype keep = dup;
  err = MPI_Type_free(&dup);
  CHECK(err != MPI_SUCCESS && dup == keep, "free with a refusing delete callback: %d", err);
  MPI_Type_get_attr(dup, kv_dup, &val, &flag);
  CHECK(flag == 1, "attributes after a refused free");

  /* a freed keyval's attribute keeps its callbacks until deleted */
  MPI_Type_free_keyval(&kv_dup);
  CHECK(kv_dup == MPI_KEYVAL_INVALID, "keyval after free");
  MPI_Type_delete_attr(dup, kv_refuse);  /* refused: stays */
  MPI_Type_free_keyval(&kv_refuse);

  /* attributes on a predefined type */
  MPI_Type_set_attr(MPI_DOUBLE, kv_plus, (void*)7);
  MPI_Type_get_attr(MPI_DOUBLE, kv_plus, &val, &flag);
  CHECK(flag == 1 && val == (void*)7, "attribute on MPI_DOUBLE");
  MPI_Type_get_attr(MPI_INT, kv_plus, &val, &flag);
  CHECK(flag == 0, "MPI_INT has MPI_DOUBLE's attribute");
  MPI_Type_delete_attr(MPI_DOUBLE, kv_plus);
  MPI_Type_free_keyval(&kv_plus);
  MPI_Type_free_keyval(&kv_nocopy);
  MPI_Type_free_keyval(&kv_fail);
  MPI_Comm_free_keyval(&kv_comm);

  /* standard names */
  check_name(MPI_INT, "MPI_INT");
  check_name(MPI_DOUBLE, "MPI_DOUBLE");
  check_name(MPI_DOUBLE_INT, "MPI_DOUBLE_INT");
  check_name(MPI_UINT64_T, "MPI_UINT64_T");
  check_name(MPI_C_DOUBLE_COMPLEX, "MPI_C_DOUBLE_COMPLEX");

  /* MPI_Type_match_size */
  MPI_Datatype m = MPI_DATATYPE_NULL;
  int sz = 0;
  const int isizes[] = {1, 2, 4, 8};
  for (int i = 0; i < 4; ++i) {
    MPI_Type_match_size(MPI_TYPECLASS_INTEGER, isizes[i], &m);
    MPI_Type_size(m, &sz);
    CHECK(sz == isizes[i], "integer of size %d: got size %d", isizes[i], sz);
  }
  MPI_Type_match_size(MPI_TYPECLASS_INTEGER, 4, &m);
  CHECK(m == MPI_INT, "integer of size 4 is not MPI_INT");
  MPI_Type_match_size(MPI_TYPECLASS_REAL, 4, &m);
  CHECK(m == MPI_FLOAT, "real of size 4 is not MPI_FLOAT");
  MPI_Type_match_size(MPI_TYPECLASS_REAL, 8, &m);
  CHECK(m == MPI_DOUBLE, "real of size 8 is not MPI_DOUBLE");
  MPI_Type_match_size(MPI_TYPECLASS_REAL, (int)sizeof(long double), &m);
  CHECK(m == MPI_LONG_DOUBLE, "real of size %d is not MPI_LONG_DOUBLE", (int)sizeof(long double));
  MPI_Type_match_size(MPI_TYPECLASS_COMPLEX, 8, &m);
  CHECK(m == MPI_C_FLOAT_COMPLEX, "complex of size 8");
  MPI_Type_match_size(MPI_TYPECLASS_COMPLEX, 16, &m);
  CHECK(m == MPI_C_DOUBLE_COMPLEX, "complex of size 16");
  err = MPI_Type_match_size(MPI_TYPECLASS_REAL, 3, &m);
  CHECK(mt_error(err, text) == MPI_ERR_ARG, "real of size 3: %s", text);
  err = MPI_Type_match_size(99, 4, &m);
  CHECK(mt_error(err, text) == MPI_ERR_ARG, "typeclass 99: %s", text);

  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
  return mt_pass();
}
