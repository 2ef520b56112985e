/* MPI-4.0 11.4.1: info objects are made, read and freed before MPI_Init
 * and after MPI_Finalize; MPI_Info_create_env gives MPI_INFO_ENV's keys
 * for the arguments it is passed, before MPI_Init too. */
#include "mpitest.h"

static void check_value(MPI_Info info, const char* key, const char* want) {
  char v[MPI_MAX_INFO_VAL + 1];
  int buflen = sizeof v, flag = 0;
  MPI_Info_get_string(info, key, &buflen, v, &flag);
  CHECK(flag, "key %s missing", key);
  CHECK(strcmp(v, want) == 0, "key %s is '%s', expected '%s'", key, v, want);
}

int main(int argc, char** argv) {
  mt_name = "info_anytime";
  /* Before MPI_Init. */
  MPI_Info before, env;
  CHECK(MPI_Info_create(&before) == MPI_SUCCESS, "Info_create before init");
  MPI_Info_set(before, "made", "before init");
  char* fake[] = {"./solver", "--grid", "64", NULL};
  CHECK(MPI_Info_create_env(3, fake, &env) == MPI_SUCCESS, "Info_create_env before init");
  check_value(env, "command", "./solver");
  check_value(env, "argv", "--grid 64");
  check_value(env, "thread_level", "MPI_THREAD_SINGLE");
  const char* size = getenv("PMI_SIZE");
  if (size) check_value(env, "maxprocs", size);
  int nkeys = 0;
  MPI_Info_get_nkeys(env, &nkeys);
  CHECK(nkeys >= 4, "%d keys", nkeys);

  mt_start("info_anytime", &argc, &argv);
  check_value(before, "made", "before init");
  MPI_Info after_init;
  MPI_Info_create_env(0, NULL, &after_init);
  char n[16];
  snprintf(n, sizeof n, "%d", mt_size);
  check_value(after_init, "maxprocs", n);
  int flag = 1, buflen = 0;
  MPI_Info_get_string(after_init, "command", &buflen, NULL, &flag);
  CHECK(!flag, "command present with argc 0");
  MPI_Info_free(&after_init);
  MPI_Finalize();

  /* After MPI_Finalize. */
  MPI_Info later;
  CHECK(MPI_Info_dup(before, &later) == MPI_SUCCESS, "Info_dup after finalize");
  check_value(later, "made", "before init");
  MPI_Info_free(&later);
  MPI_Info_free(&before);
  MPI_Info_free(&env);
  CHECK(before == MPI_INFO_NULL && env == MPI_INFO_NULL, "free did not null the handles");
  printf("PASS %s rank %d\n", mt_name, mt_rank);
  return 0;
}
