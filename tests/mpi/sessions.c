/* Sessions (MPI 4.0 11.3), without MPI_Init: MPI_Session_init with info and
 * an error handler, the process sets mpi://WORLD and mpi://SELF, a
 * communicator made from a process set's group (collectives and a ring on
 * it), two sessions at once, session error handlers, MPI_Initialized and
 * MPI_Finalized untouched; after the last session the library does not
 * start again. With --mixed (or SESSIONS_MIXED set): MPI_Init first, a session opened, MPI_Finalize,
 * the session's communicator still working, then MPI_Session_finalize.
 * Any number of ranks. */
#include "mpitest.h"

static int handler_calls = 0, handler_code = 0;
static void on_error(MPI_Session* s, int* code, ...) {
  (void)s;
  ++handler_calls;
  handler_code = *code;
}

/* Everything a session-made communicator must do. */
static void use_world_pset(MPI_Session s, const char* tag) {
  MPI_Group g;
  CHECK(MPI_Group_from_session_pset(s, "mpi://WORLD", &g) == MPI_SUCCESS, "group from WORLD");
  int gsize = -1, grank = -1;
  MPI_Group_size(g, &gsize);
  MPI_Group_rank(g, &grank);
  MPI_Comm c;
  CHECK(MPI_Comm_create_from_group(g, tag, MPI_INFO_NULL, MPI_ERRORS_RETURN, &c) == MPI_SUCCESS, "create_from_group");
  int size = -1, rank = -1;
  MPI_Comm_size(c, &size);
  MPI_Comm_rank(c, &rank);
  CHECK(size == gsize && rank == grank, "communicator %d/%d, group %d/%d", rank, size, grank, gsize);
  mt_rank = rank;
  mt_size = size;
  MPI_Errhandler eh;
  MPI_Comm_get_errhandler(c, &eh);
  CHECK(eh == MPI_ERRORS_RETURN, "the communicator has the handler given");
  long v = rank + 1, sum = 0;
  CHECK(MPI_Allreduce(&v, &sum, 1, MPI_LONG, MPI_SUM, c) == MPI_SUCCESS, "allreduce");
  CHECK(sum == (long)size * (size + 1) / 2, "allreduce sum %ld", sum);
  int right = (rank + 1) % size, left = (rank + size - 1) % size, got = -1;
  CHECK(MPI_Sendrecv(&rank, 1, MPI_INT, right, 3, &got, 1, MPI_INT, left, 3, c, MPI_STATUS_IGNORE) == MPI_SUCCESS,
        "sendrecv");
  CHECK(got == left, "ring got %d", got);
  MPI_Barrier(c);
  MPI_Comm_free(&c);
  MPI_Group_free(&g);

  /* mpi://SELF: a communicator of one. */
  CHECK(MPI_Group_from_session_pset(s, "mpi://SELF", &g) == MPI_SUCCESS, "group from SELF");
  MPI_Group_size(g, &gsize);
  CHECK(gsize == 1, "SELF has %d members", gsize);
  char selftag[64];
  snprintf(selftag, sizeof selftag, "%s.self", tag);
  CHECK(MPI_Comm_create_from_group(g, selftag, MPI_INFO_NULL, MPI_ERRORS_RETURN, &c) == MPI_SUCCESS, "self comm");
  MPI_Comm_size(c, &size);
  CHECK(size == 1, "self comm size %d", size);
  MPI_Comm_free(&c);
  MPI_Group_free(&g);
}

static void psets(MPI_Session s) {
  int n = -1;
  CHECK(MPI_Session_get_num_psets(s, MPI_INFO_NULL, &n) == MPI_SUCCESS && n >= 2, "num_psets %d", n);
  int seen_world = 0, seen_self = 0;
  for (int i = 0; i < n; ++i) {
    int len = 0;
    CHECK(MPI_Session_get_nth_pset(s, MPI_INFO_NULL, i, &len, NULL) == MPI_SUCCESS && len > 1, "pset %d length %d", i,
          len);
    char name[MPI_MAX_PSET_NAME_LEN];
    CHECK(MPI_Session_get_nth_pset(s, MPI_INFO_NULL, i, &len, name) == MPI_SUCCESS, "pset %d name", i);
    CHECK((int)strlen(name) + 1 == len, "pset %d: length %d for \"%s\"", i, len, name);
    MPI_Info info;
    CHECK(MPI_Session_get_pset_info(s, name, &info) == MPI_SUCCESS, "pset info of %s", name);
    char val[MPI_MAX_INFO_VAL];
    int flag = 0;
    MPI_Info_get(info, "mpi_size", MPI_MAX_INFO_VAL - 1, val, &flag);
    CHECK(flag, "no mpi_size for %s", name);
    MPI_Group g;
    MPI_Group_from_session_pset(s, name, &g);
    int gsize = -1;
    MPI_Group_size(g, &gsize);
    CHECK(atoi(val) == gsize, "%s: mpi_size %s, group of %d", name, val, gsize);
    MPI_Group_free(&g);
    MPI_Info_free(&info);
    if (!strcmp(name, "mpi://WORLD")) seen_world = 1;
    if (!strcmp(name, "mpi://SELF")) {
      seen_self = 1;
      CHECK(gsize == 1, "SELF of %d", gsize);
    }
  }
  CHECK(seen_world && seen_self, "WORLD %d SELF %d", seen_world, seen_self);
  /* A short buffer: truncated, terminated, the full length reported. */
  char shortname[5];
  int len = (int)sizeof shortname;
  MPI_Session_get_nth_pset(s, MPI_INFO_NULL, 0, &len, shortname);
  CHECK(strlen(shortname) == 4 && len == 12, "short buffer: \"%s\" len %d", shortname, len);
}

static void errors(MPI_Session s) {
  char text[MPI_MAX_ERROR_STRING];
  MPI_Group g;
  CHECK(mt_error(MPI_Group_from_session_pset(s, "mpi://NOWHERE", &g), text) == MPI_ERR_ARG, "unknown pset: %s", text);
  int len = 0;
  CHECK(mt_error(MPI_Session_get_nth_pset(s, MPI_INFO_NULL, 99, &len, NULL), text) == MPI_ERR_ARG, "pset 99: %s",
        text);
  MPI_Errhandler eh, old;
  CHECK(MPI_Session_create_errhandler(on_error, &eh) == MPI_SUCCESS, "create_errhandler");
  MPI_Session_get_errhandler(s, &old);
  CHECK(old == MPI_ERRORS_RETURN, "the session has the handler given at init");
  CHECK(MPI_Session_set_errhandler(s, eh) == MPI_SUCCESS, "set_errhandler");
  MPI_Session_call_errhandler(s, MPI_ERR_OTHER);
  CHECK(handler_calls == 1 && handler_code == MPI_ERR_OTHER, "handler calls %d code %d", handler_calls, handler_code);
  MPI_Session_get_num_psets(s, MPI_INFO_NULL, NULL);  /* an error: to the user handler */
  CHECK(handler_calls == 2 && handler_code == MPI_ERR_ARG, "handler calls %d code %d", handler_calls, handler_code);
  MPI_Session_set_errhandler(s, MPI_ERRORS_RETURN);
  MPI_Errhandler_free(&eh);
}

static MPI_Session open_session(const char* level) {
  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "thread_level", level);
  MPI_Info_set(info, "org.nmad.test", "kept");
  MPI_Session s = MPI_SESSION_NULL;
  CHECK(MPI_Session_init(info, MPI_ERRORS_RETURN, &s) == MPI_SUCCESS && s != MPI_SESSION_NULL, "Session_init");
  MPI_Info_free(&info);
  MPI_Info used;
  CHECK(MPI_Session_get_info(s, &used) == MPI_SUCCESS, "get_info");
  char val[MPI_MAX_INFO_VAL];
  int flag = 0;
  MPI_Info_get(used, "thread_level", MPI_MAX_INFO_VAL - 1, val, &flag);
  CHECK(flag && !strncmp(val, "MPI_THREAD_", 11), "thread_level %s", flag ? val : "(none)");
  MPI_Info_get(used, "org.nmad.test", MPI_MAX_INFO_VAL - 1, val, &flag);
  CHECK(flag && !strcmp(val, "kept"), "the info given is kept");
  MPI_Info_free(&used);
  return s;
}

int main(int argc, char** argv) {
  mt_name = "sessions";
  const int mixed = (argc > 1 && !strcmp(argv[1], "--mixed")) || getenv("SESSIONS_MIXED") != NULL;
  int flag = -1;
  if (mixed) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &mt_rank);
  }
  MPI_Session a = open_session("MPI_THREAD_MULTIPLE");
  MPI_Initialized(&flag);
  CHECK(flag == mixed, "MPI_Initialized %d with a session open", flag);
  MPI_Session b = open_session("MPI_THREAD_SINGLE");  /* joins at the level the library runs at */
  psets(a);
  use_world_pset(a, "org.nmad.sessions.a");
  errors(b);
  CHECK(MPI_Session_finalize(&b) == MPI_SUCCESS && b == MPI_SESSION_NULL, "finalize b");
  if (mixed) {
    MPI_Finalize();
    MPI_Finalized(&flag);
    CHECK(flag == 1, "MPI_Finalized %d after MPI_Finalize", flag);
  }
  /* The world model ended (or never began): the session still works. */
  use_world_pset(a, "org.nmad.sessions.after");
  CHECK(MPI_Session_finalize(&a) == MPI_SUCCESS, "finalize a");
  MPI_Initialized(&flag);
  CHECK(flag == mixed, "MPI_Initialized %d at the end", flag);
  MPI_Finalized(&flag);
  CHECK(flag == mixed, "MPI_Finalized %d at the end", flag);
  /* The library is down for good in this process. */
  MPI_Session again = MPI_SESSION_NULL;
  const int e = MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &again);
  if (e != MPI_ERR_SESSION) {
    printf("FAIL sessions: rank %d: Session_init after the library stopped gave %d\n", mt_rank, e);
    return 1;
  }
  printf("PASS sessions rank %d\n", mt_rank);
  return 0;
}
