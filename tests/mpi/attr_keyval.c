/* Keyvals and attributes: copy callbacks on Comm_dup/idup (counts, the
 * values they make, MPI_COMM_DUP_FN, MPI_COMM_NULL_COPY_FN), delete
 * callbacks on Comm_free (last set first), on delete_attr and on
 * overwrite; extra_state; a freed keyval's attributes still get deleted;
 * MPI_COMM_SELF's attributes are deleted at MPI_Finalize. */
#include <stdint.h>

#include "mpitest.h"

static int copies = 0, deletes = 0;
static int deleted[16];
static int extra_seen = 0;

static int copy_plus_one(MPI_Comm old, int kv, void* extra, void* in, void* out, int* flag) {
  (void)old;
  (void)kv;
  copies++;
  if (extra == (void*)&extra_seen) extra_seen++;
  *(void**)out = (void*)((intptr_t)in + 1);
  *flag = 1;
  return MPI_SUCCESS;
}
static int record_delete(MPI_Comm c, int kv, void* val, void* extra) {
  (void)c;
  (void)extra;
  (void)val;
  if (deletes < 16) deleted[deletes] = kv;
  deletes++;
  return MPI_SUCCESS;
}
static int self_deletes = 0;
static int self_delete(MPI_Comm c, int kv, void* val, void* extra) {
  (void)kv;
  (void)val;
  (void)extra;
  /* At MPI_Finalize, MPI is still usable. */
  int flag = 0;
  MPI_Finalized(&flag);
  if (c == MPI_COMM_SELF && !flag) self_deletes++;
  return MPI_SUCCESS;
}

int main(int argc, char** argv) {
  mt_start("attr_keyval", &argc, &argv);
  int k1, k2, k3, k4;
  MPI_Comm_create_keyval(copy_plus_one, record_delete, &k1, &extra_seen);
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, record_delete, &k2, NULL);
  MPI_Comm_create_keyval(MPI_COMM_DUP_FN, record_delete, &k3, NULL);
  MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &k4, NULL);
  CHECK(k1 != k2 && k2 != k3 && k1 != MPI_KEYVAL_INVALID, "distinct keyvals");

  MPI_Comm base;
  MPI_Comm_dup(MPI_COMM_WORLD, &base);
  int flag = -1;
  void* v = NULL;
  MPI_Comm_get_attr(base, k1, &v, &flag);
  CHECK(flag == 0, "nothing cached yet");
  MPI_Comm_set_attr(base, k1, (void*)(intptr_t)10);
  MPI_Comm_set_attr(base, k2, (void*)(intptr_t)20);
  MPI_Comm_set_attr(base, k3, (void*)(intptr_t)30);
  MPI_Comm_get_attr(base, k2, &v, &flag);
  CHECK(flag == 1 && (intptr_t)v == 20, "get k2: %d %ld", flag, (long)(intptr_t)v);

  /* Dup: k1 copied (+1), k2 not copied, k3 copied as is. */
  MPI_Comm d;
  MPI_Comm_dup(base, &d);
  CHECK(copies == 1 && extra_seen == 1, "copy callback ran once with extra_state: %d %d", copies, extra_seen);
  MPI_Comm_get_attr(d, k1, &v, &flag);
  CHECK(flag && (intptr_t)v == 11, "k1 on dup: %d %ld", flag, (long)(intptr_t)v);
  MPI_Comm_get_attr(d, k2, &v, &flag);
  CHECK(!flag, "k2 not copied");
  MPI_Comm_get_attr(d, k3, &v, &flag);
  CHECK(flag && (intptr_t)v == 30, "k3 on dup: %ld", (long)(intptr_t)v);
  CHECK(deletes == 0, "no deletes yet: %d", deletes);

  /* A dup of the dup: k1 is 12. */
  MPI_Comm dd;
  MPI_Request rq;
  MPI_Comm_idup(d, &dd, &rq);
  MPI_Wait(&rq, MPI_STATUS_IGNORE);
  CHECK(copies == 2, "idup copies too: %d", copies);
  MPI_Comm_get_attr(dd, k1, &v, &flag);
  CHECK(flag && (intptr_t)v == 12, "k1 on dup of dup: %ld", (long)(intptr_t)v);

  /* Free: delete callbacks for k1 and k3, last set first (k3, k1). */
  MPI_Comm_free(&dd);
  CHECK(deletes == 2 && deleted[0] == k3 && deleted[1] == k1, "free dd: %d deletes (%d, %d)", deletes, deleted[0],
        deleted[1]);
  /* Overwrite calls delete on the old value; delete_attr calls it too. */
  deletes = 0;
  MPI_Comm_set_attr(d, k1, (void*)(intptr_t)99);
  CHECK(deletes == 1 && deleted[0] == k1, "overwrite deletes the old value: %d", deletes);
  MPI_Comm_get_attr(d, k1, &v, &flag);
  CHECK(flag && (intptr_t)v == 99, "overwritten value %ld", (long)(intptr_t)v);
  MPI_Comm_delete_attr(d, k1);
  CHECK(deletes == 2, "delete_attr: %d", deletes);
  MPI_Comm_get_attr(d, k1, &v, &flag);
  CHECK(!flag, "deleted");
  MPI_Comm_free(&d);
  CHECK(deletes == 3 && deleted[2] == k3, "free d deletes k3 only: %d", deletes);

  /* A freed keyval: its attributes keep their callbacks. */
  deletes = 0;
  int k1copy = k1;
  MPI_Comm_free_keyval(&k1);
  CHECK(k1 == MPI_KEYVAL_INVALID, "free_keyval resets the handle");
  MPI_Comm_free(&base); /* k1, k2, k3 cached: 3 deletes, k3 first */
  CHECK(deletes == 3 && deleted[0] == k3 && deleted[1] == k2 && deleted[2] == k1copy, "free base: %d", deletes);

  /* MPI_Comm_delete_attr through a keyval freed while in use (MPI-3.1
   * 6.7.2: such references are freed explicitly by delete_attr or
   * Comm_free): it succeeds and runs the delete callback once; once no
   * attribute is left, the freed keyval is invalid again. */
  int kf, kfcopy;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, record_delete, &kf, NULL);
  kfcopy = kf;
  MPI_Comm_set_attr(MPI_COMM_WORLD, kf, (void*)(intptr_t)5);
  MPI_Comm_free_keyval(&kf);
  deletes = 0;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rc = MPI_Comm_delete_attr(MPI_COMM_WORLD, kfcopy);
  CHECK(rc == MPI_SUCCESS && deletes == 1 && deleted[0] == kfcopy, "delete_attr via freed keyval: rc %d, %d deletes",
        rc, deletes);
  rc = MPI_Comm_delete_attr(MPI_COMM_WORLD, kfcopy);
  CHECK(rc == MPI_ERR_KEYVAL && deletes == 1, "freed keyval with nothing cached: rc %d", rc);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);

  /* MPI_COMM_DUP_FN with MPI_COMM_NULL_DELETE_FN on world. */
  static int payload = 7;
  MPI_Comm_set_attr(MPI_COMM_WORLD, k4, &payload);
  MPI_Comm w2;
  MPI_Comm_dup(MPI_COMM_WORLD, &w2);
  int* p = NULL;
  MPI_Comm_get_attr(w2, k4, &p, &flag);
  CHECK(flag && p == &payload && *p == 7, "DUP_FN copies the pointer");
  MPI_Comm_free(&w2);
  MPI_Comm_delete_attr(MPI_COMM_WORLD, k4);

  /* Attributes on MPI_COMM_SELF are deleted first thing in MPI_Finalize. */
  int ks;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, self_delete, &ks, NULL);
  MPI_Comm_set_attr(MPI_COMM_SELF, ks, NULL);
  MPI_Comm_free_keyval(&ks);
  MPI_Comm_free_keyval(&k2);
  MPI_Comm_free_keyval(&k3);
  MPI_Comm_free_keyval(&k4);
  MPI_Finalize();
  if (self_deletes != 1) {
    printf("FAIL attr_keyval: rank %d: MPI_COMM_SELF delete callback ran %d times\n", mt_rank, self_deletes);
    return 1;
  }
  printf("PASS attr_keyval rank %d\n", mt_rank);
  return 0;
}
