/* Info objects: set/get/valuelen/nkeys/nthkey/delete/dup/free, truncation
 * by valuelen, error classes, MPI_INFO_ENV, Comm_set_info/get_info. */
#include "mpitest.h"

int main(int argc, char** argv) {
  mt_start("info_basic", &argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Info info;
  MPI_Info_create(&info);
  int n = -1, flag = -1, len = -1;
  MPI_Info_get_nkeys(info, &n);
  CHECK(n == 0, "new info has %d keys", n);
  MPI_Info_set(info, "alpha", "1");
  MPI_Info_set(info, "beta", "two");
  MPI_Info_set(info, "gamma", "three three");
  MPI_Info_get_nkeys(info, &n);
  CHECK(n == 3, "nkeys %d", n);
  char key[MPI_MAX_INFO_KEY + 1], val[MPI_MAX_INFO_VAL + 1];
  const char* order[] = {"alpha", "beta", "gamma"};
  for (int i = 0; i < 3; ++i) {
    MPI_Info_get_nthkey(info, i, key);
    CHECK(strcmp(key, order[i]) == 0, "key %d is '%s'", i, key);
  }
  MPI_Info_get(info, "beta", MPI_MAX_INFO_VAL, val, &flag);
  CHECK(flag && strcmp(val, "two") == 0, "get beta '%s'", val);
  MPI_Info_get_valuelen(info, "gamma", &len, &flag);
  CHECK(flag && len == 11, "valuelen %d", len);
  /* valuelen shorter than the value: truncated, still terminated. */
  memset(val, '#', sizeof val);
  MPI_Info_get(info, "gamma", 5, val, &flag);
  CHECK(flag && strcmp(val, "three") == 0, "truncated get '%s'", val);
  MPI_Info_get(info, "delta", MPI_MAX_INFO_VAL, val, &flag);
  CHECK(flag == 0, "missing key");
  MPI_Info_get_valuelen(info, "delta", &len, &flag);
  CHECK(flag == 0, "missing key valuelen");
  /* Overwrite keeps the key count. */
  MPI_Info_set(info, "alpha", "uno");
  MPI_Info_get_nkeys(info, &n);
  MPI_Info_get(info, "alpha", MPI_MAX_INFO_VAL, val, &flag);
  CHECK(n == 3 && strcmp(val, "uno") == 0, "overwrite: %d '%s'", n, val);
  /* Dup is independent. */
  MPI_Info copy;
  MPI_Info_dup(info, &copy);
  MPI_Info_delete(info, "beta");
  MPI_Info_get_nkeys(info, &n);
  CHECK(n == 2, "after delete %d", n);
  MPI_Info_get_nthkey(info, 1, key);
  CHECK(strcmp(key, "gamma") == 0, "order after delete '%s'", key);
  MPI_Info_get(copy, "beta", MPI_MAX_INFO_VAL, val, &flag);
  CHECK(flag && strcmp(val, "two") == 0, "dup kept beta");
  MPI_Info_get_nkeys(copy, &n);
  CHECK(n == 3, "dup nkeys %d", n);

  /* Errors. */
  CHECK(MPI_Info_delete(info, "beta") == MPI_ERR_INFO_NOKEY, "delete missing key");
  char longkey[MPI_MAX_INFO_KEY + 2];
  memset(longkey, 'k', sizeof longkey - 1);
  longkey[sizeof longkey - 1] = '\0';
  CHECK(MPI_Info_set(info, longkey, "v") == MPI_ERR_INFO_KEY, "key too long");
  CHECK(MPI_Info_set(info, "", "v") == MPI_ERR_INFO_KEY, "empty key");
  static char longval[MPI_MAX_INFO_VAL + 2];
  memset(longval, 'v', sizeof longval - 1);
  CHECK(MPI_Info_set(info, "k", longval) == MPI_ERR_INFO_VALUE, "value too long");
  longval[MPI_MAX_INFO_VAL] = '\0';
  CHECK(MPI_Info_set(info, "k", longval) == MPI_SUCCESS, "value of MPI_MAX_INFO_VAL accepted");
  CHECK(MPI_Info_get_nthkey(info, 3, key) == MPI_ERR_ARG, "nthkey out of range");
  CHECK(MPI_Info_get_nthkey(info, -1, key) == MPI_ERR_ARG, "nthkey negative");
  CHECK(MPI_Info_get_nkeys(MPI_INFO_NULL, &n) == MPI_ERR_INFO, "MPI_INFO_NULL");
  MPI_Info dead = copy;
  MPI_Info_free(&copy);
  CHECK(copy == MPI_INFO_NULL, "free resets");
  CHECK(MPI_Info_get_nkeys(dead, &n) == MPI_ERR_INFO, "freed info");
  CHECK(MPI_Info_set((MPI_Info)4242, "a", "b") == MPI_ERR_INFO, "bogus handle");

  /* MPI_INFO_ENV: read-only, honest entries. */
  MPI_Info_get_nkeys(MPI_INFO_ENV, &n);
  CHECK(n >= 1, "MPI_INFO_ENV has %d keys", n);
  MPI_Info_get(MPI_INFO_ENV, "maxprocs", MPI_MAX_INFO_VAL, val, &flag);
  CHECK(flag && atoi(val) == mt_size, "maxprocs '%s'", val);
  MPI_Info_get(MPI_INFO_ENV, "command", MPI_MAX_INFO_VAL, val, &flag);
  CHECK(flag && strstr(val, "info_basic") != NULL, "command '%s'", val);
  CHECK(MPI_Info_set(MPI_INFO_ENV, "a", "b") == MPI_ERR_INFO, "MPI_INFO_ENV is read-only");

  /* Communicator hints: stored and returned; dup copies them. */
  MPI_Comm d, d2;
  MPI_Comm_dup(MPI_COMM_WORLD, &d);
  MPI_Comm_set_info(d, info);
  MPI_Info used;
  MPI_Comm_get_info(d, &used);
  MPI_Info_get(used, "gamma", MPI_MAX_INFO_VAL, val, &flag);
  CHECK(flag && strcmp(val, "three three") == 0, "comm hint '%s'", val);
  MPI_Info_free(&used);
  MPI_Comm_dup(d, &d2);
  MPI_Comm_get_info(d2, &used);
  MPI_Info_get_nkeys(used, &n);
  CHECK(n == 3, "dup's hints %d", n);
  MPI_Info_free(&used);
  MPI_Comm_free(&d2);

  /* Comm_dup_with_info: the given hints replace the parent's (none for
   * MPI_INFO_NULL); the result is a working duplicate. */
  MPI_Info only;
  MPI_Info_create(&only);
  MPI_Info_set(only, "delta", "4");
  MPI_Comm_dup_with_info(d, only, &d2);
  MPI_Info_free(&only);
  MPI_Comm_get_info(d2, &used);
  MPI_Info_get_nkeys(used, &n);
  MPI_Info_get(used, "delta", MPI_MAX_INFO_VAL, val, &flag);
  CHECK(n == 1 && flag && strcmp(val, "4") == 0, "dup_with_info hints: %d keys, delta '%s'", n, flag ? val : "");
  MPI_Info_free(&used);
  int cmp = -1, sum = 0, one = 1;
  MPI_Comm_compare(d, d2, &cmp);
  MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, d2);
  CHECK(cmp == MPI_CONGRUENT && sum == mt_size, "dup_with_info: compare %d, allreduce %d", cmp, sum);
  MPI_Comm_free(&d2);
  MPI_Comm_dup_with_info(d, MPI_INFO_NULL, &d2);
  MPI_Comm_get_info(d2, &used);
  MPI_Info_get_nkeys(used, &n);
  CHECK(n == 0, "dup_with_info(MPI_INFO_NULL) has %d hints", n);
  MPI_Info_free(&used);
  MPI_Comm_free(&d2);
  MPI_Comm_free(&d);
  MPI_Info_free(&info);
  return mt_pass();
}
