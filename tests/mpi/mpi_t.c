/* The MPI tool interface: MPI_T before MPI_Init, enumerating every control
 * variable, performance variable, event type, source and category (names,
 * descriptions, types, index lookups both ways, every one in a category),
 * reading control variables set in the environment (the suite sets
 * NMAD_STRATEGY and NMAD_RDV_THRESHOLD=4K), counters that grow with
 * traffic (also per peer), and the errors: calls before MPI_T_init_thread
 * and after the last MPI_T_finalize, bad indices and handles, writes.
 * What changes while running (writable control variables, events, the
 * handle-local variables): mpi_t_live.c. Any number of ranks. */
#include "mpitest.h"

static void enumerate(void) {
  int ncvar = -1, npvar = -1, ncat = -1;
  CHECK(MPI_T_cvar_get_num(&ncvar) == MPI_SUCCESS && ncvar > 50, "%d control variables", ncvar);
  CHECK(MPI_T_pvar_get_num(&npvar) == MPI_SUCCESS && npvar >= 5, "%d performance variables", npvar);
  CHECK(MPI_T_category_get_num(&ncat) == MPI_SUCCESS && ncat >= 2, "%d categories", ncat);
  int nev = -1;
  CHECK(MPI_T_event_get_num(&nev) == MPI_SUCCESS && nev >= 4, "%d event types", nev);
  int* in_cat = calloc((size_t)ncvar, sizeof(int));
  int* pin_cat = calloc((size_t)npvar, sizeof(int));
  int* ein_cat = calloc((size_t)nev, sizeof(int));
  for (int i = 0; i < nev; ++i) {
    char name[256], desc[1024];
    int name_len = sizeof name, desc_len = sizeof desc, verbosity, bind, nel = 0;
    /* num_elements 0: asks for the count only. */
    CHECK(MPI_T_event_get_info(i, name, &name_len, &verbosity, NULL, NULL, &nel, NULL, NULL, desc, &desc_len, &bind) ==
              MPI_SUCCESS && nel >= 0 && bind == MPI_T_BIND_NO_OBJECT, "event_get_info %d", i);
    CHECK(!strncmp(name, "nmad_", 5) && (int)strlen(name) + 1 == name_len && desc_len > 10, "event %d \"%s\"", i,
          name);
    MPI_Datatype* types = malloc(sizeof(MPI_Datatype) * (size_t)(nel + 1));
    MPI_Aint* displs = malloc(sizeof(MPI_Aint) * (size_t)(nel + 1));
    int room = nel;
    MPI_Info info = MPI_INFO_NULL;
    CHECK(MPI_T_event_get_info(i, NULL, NULL, NULL, types, displs, &room, NULL, &info, NULL, NULL, NULL) ==
              MPI_SUCCESS && room == nel, "event %s elements %d/%d", name, room, nel);
    for (int k = 1; k < nel; ++k) CHECK(displs[k] > displs[k - 1], "event %s displacements", name);
    if (info != MPI_INFO_NULL) MPI_Info_free(&info);
    free(types);
    free(displs);
    int back = -1;
    CHECK(MPI_T_event_get_index(name, &back) == MPI_SUCCESS && back == i, "event_get_index(%s) %d", name, back);
  }
  CHECK(MPI_T_event_get_index("nmad_no_such_event", &nev) == MPI_T_ERR_INVALID_NAME && nev >= 4, "unknown event");
  int nsrc = -1;
  CHECK(MPI_T_source_get_num(&nsrc) == MPI_SUCCESS && nsrc == 1, "%d sources", nsrc);
  {
    char name[64];
    int name_len = sizeof name;
    MPI_T_source_order order;
    MPI_Count tps = 0, maxt = 0, t1 = 0, t2 = 0;
    CHECK(MPI_T_source_get_info(0, name, &name_len, NULL, NULL, &order, &tps, &maxt, NULL) == MPI_SUCCESS &&
              tps == 1000000000LL && maxt > 0, "source_get_info: %s %lld ticks/s", name, tps);
    CHECK(MPI_T_source_get_timestamp(0, &t1) == MPI_SUCCESS && MPI_T_source_get_timestamp(0, &t2) == MPI_SUCCESS &&
              t2 >= t1 && t1 > 0, "source timestamps %lld %lld", t1, t2);
    CHECK(MPI_T_source_get_timestamp(1, &t1) == MPI_T_ERR_INVALID_INDEX, "source 1");
  }
  for (int i = 0; i < ncvar; ++i) {
    char name[256], desc[1024];
    int name_len = sizeof name, desc_len = sizeof desc, verbosity, bind, scope;
    MPI_Datatype dt;
    MPI_T_enum et;
    CHECK(MPI_T_cvar_get_info(i, name, &name_len, &verbosity, &dt, &et, desc, &desc_len, &bind, &scope) ==
              MPI_SUCCESS, "cvar_get_info %d", i);
    CHECK(!strncmp(name, "NMAD_", 5) && (int)strlen(name) + 1 == name_len, "cvar %d name \"%s\" len %d", i, name,
          name_len);
    CHECK(desc_len > 10 && (int)strlen(desc) + 1 == desc_len, "cvar %s desc len %d", name, desc_len);
    CHECK(dt == MPI_LONG_LONG || dt == MPI_CHAR, "cvar %s type %d", name, (int)dt);
    CHECK(bind == MPI_T_BIND_NO_OBJECT && (scope == MPI_T_SCOPE_CONSTANT || scope == MPI_T_SCOPE_READONLY ||
                                           scope == MPI_T_SCOPE_LOCAL || scope == MPI_T_SCOPE_ALL_EQ),
          "cvar %s bind %d scope %d", name, bind, scope);
    /* The description says which. */
    CHECK((scope == MPI_T_SCOPE_LOCAL || scope == MPI_T_SCOPE_ALL_EQ) == (strstr(desc, "writable") != NULL),
          "cvar %s scope %d described \"%s\"", name, scope, desc);
    int back = -1;
    CHECK(MPI_T_cvar_get_index(name, &back) == MPI_SUCCESS && back == i, "cvar_get_index(%s) %d", name, back);
    /* Length query: *len 0. */
    int qlen = 0;
    MPI_T_cvar_get_info(i, NULL, &qlen, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
    CHECK(qlen == name_len, "length query %d for %s", qlen, name);
  }
  for (int i = 0; i < npvar; ++i) {
    char name[256];
    int name_len = sizeof name, verbosity, cls, bind, ro, cont, atomic;
    MPI_Datatype dt;
    MPI_T_enum et;
    CHECK(MPI_T_pvar_get_info(i, name, &name_len, &verbosity, &cls, &dt, &et, NULL, NULL, &bind, &ro, &cont,
                              &atomic) == MPI_SUCCESS, "pvar_get_info %d", i);
    CHECK((cls == MPI_T_PVAR_CLASS_COUNTER || cls == MPI_T_PVAR_CLASS_LEVEL || cls == MPI_T_PVAR_CLASS_HIGHWATERMARK ||
           cls == MPI_T_PVAR_CLASS_TIMER) && dt == MPI_UNSIGNED_LONG_LONG && ro == cont,
          "pvar %s class %d readonly %d continuous %d", name, cls, ro, cont);
    int other = -1;
    CHECK(MPI_T_pvar_get_index(name, cls == MPI_T_PVAR_CLASS_GENERIC ? 0 : MPI_T_PVAR_CLASS_GENERIC, &other) ==
              MPI_T_ERR_INVALID_NAME, "pvar %s found under another class", name);
    int back = -1;
    CHECK(MPI_T_pvar_get_index(name, cls, &back) == MPI_SUCCESS && back == i, "pvar_get_index(%s) %d", name, back);
  }
  for (int c = 0; c < ncat; ++c) {
    char name[256];
    int name_len = sizeof name, nc = -1, np = -1, nsub = -1;
    CHECK(MPI_T_category_get_info(c, name, &name_len, NULL, NULL, &nc, &np, &nsub) == MPI_SUCCESS, "category %d", c);
    int back = -1;
    CHECK(MPI_T_category_get_index(name, &back) == MPI_SUCCESS && back == c, "category_get_index(%s)", name);
    int* idx = malloc(sizeof(int) * (size_t)(nc + np + 1));
    MPI_T_category_get_cvars(c, nc, idx);
    for (int k = 0; k < nc; ++k) {
      CHECK(idx[k] >= 0 && idx[k] < ncvar, "category %s cvar %d", name, idx[k]);
      in_cat[idx[k]]++;
    }
    MPI_T_category_get_pvars(c, np, idx);
    for (int k = 0; k < np; ++k) {
      CHECK(idx[k] >= 0 && idx[k] < npvar, "category %s pvar %d", name, idx[k]);
      pin_cat[idx[k]]++;
    }
    free(idx);
    int ne = -1;
    CHECK(MPI_T_category_get_num_events(c, &ne) == MPI_SUCCESS && ne >= 0, "category %s events", name);
    idx = malloc(sizeof(int) * (size_t)(ne + 1));
    MPI_T_category_get_events(c, ne, idx);
    for (int k = 0; k < ne; ++k) {
      CHECK(idx[k] >= 0 && idx[k] < nev, "category %s event %d", name, idx[k]);
      ein_cat[idx[k]]++;
    }
    free(idx);
  }
  for (int i = 0; i < ncvar; ++i) CHECK(in_cat[i] == 1, "cvar %d in %d categories", i, in_cat[i]);
  for (int i = 0; i < npvar; ++i) CHECK(pin_cat[i] == 1, "pvar %d in %d categories", i, pin_cat[i]);
  for (int i = 0; i < nev; ++i) CHECK(ein_cat[i] == 1, "event %d in %d categories", i, ein_cat[i]);
  free(in_cat);
  free(pin_cat);
  free(ein_cat);
}

static void control_values(void) {
  int i;
  MPI_T_cvar_handle h;
  int count = 0;
  CHECK(MPI_T_cvar_get_index("NMAD_STRATEGY", &i) == MPI_SUCCESS, "no NMAD_STRATEGY");
  CHECK(MPI_T_cvar_handle_alloc(i, NULL, &h, &count) == MPI_SUCCESS && count >= 64, "alloc: count %d", count);
  char val[MPI_MAX_INFO_VAL];
  CHECK(MPI_T_cvar_read(h, val) == MPI_SUCCESS, "read NMAD_STRATEGY");
  const char* want = getenv("NMAD_STRATEGY");
  CHECK(want && !strcmp(val, want), "NMAD_STRATEGY reads \"%s\", the environment says \"%s\"", val, want ? want : "");
  CHECK(MPI_T_cvar_write(h, "default") == MPI_T_ERR_CVAR_SET_NEVER, "a knob cannot be written");
  MPI_T_cvar_handle_free(&h);
  CHECK(h == MPI_T_CVAR_HANDLE_NULL, "handle not nulled");
  CHECK(MPI_T_cvar_read(1000, val) == MPI_T_ERR_INVALID_HANDLE, "bad handle");
  /* A size: bytes, from "4K". */
  CHECK(MPI_T_cvar_get_index("NMAD_RDV_THRESHOLD", &i) == MPI_SUCCESS, "no NMAD_RDV_THRESHOLD");
  MPI_T_cvar_handle_alloc(i, NULL, &h, &count);
  long long n = 0;
  CHECK(count == 1 && MPI_T_cvar_read(h, &n) == MPI_SUCCESS, "read NMAD_RDV_THRESHOLD");
  CHECK(n == 4096, "NMAD_RDV_THRESHOLD=4K reads %lld", n);
  MPI_T_cvar_handle_free(&h);
  CHECK(MPI_T_cvar_get_index("NMAD_NO_SUCH_KNOB", &i) == MPI_T_ERR_INVALID_NAME, "unknown name");
  CHECK(MPI_T_cvar_get_info(100000, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL) == MPI_T_ERR_INVALID_INDEX,
        "bad index");
}

static unsigned long long read_counter(MPI_T_pvar_session s, const char* name, unsigned long long* per_peer,
                                       int* count_out) {
  int i, count = 0;
  CHECK(MPI_T_pvar_get_index(name, MPI_T_PVAR_CLASS_COUNTER, &i) == MPI_SUCCESS, "no %s", name);
  int cont = 0;
  MPI_T_pvar_get_info(i, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, &cont, NULL);
  CHECK(cont, "%s is continuous", name);
  MPI_T_pvar_handle h;
  CHECK(MPI_T_pvar_handle_alloc(s, i, NULL, &h, &count) == MPI_SUCCESS && count >= 1, "pvar alloc %s", name);
  unsigned long long* v = calloc((size_t)count, sizeof *v);
  CHECK(MPI_T_pvar_read(s, h, v) == MPI_SUCCESS, "pvar read %s", name);
  CHECK(MPI_T_pvar_start(s, h) == MPI_T_ERR_PVAR_NO_STARTSTOP, "continuous");
  CHECK(MPI_T_pvar_reset(s, h) == MPI_T_ERR_PVAR_NO_WRITE, "read-only");
  unsigned long long total = 0;
  for (int k = 0; k < count; ++k) {
    total += v[k];
    if (per_peer) per_peer[k] = v[k];
  }
  if (count_out) *count_out = count;
  free(v);
  MPI_T_pvar_handle_free(s, &h);
  return total;
}

static void counters(void) {
  MPI_T_pvar_session s;
  CHECK(MPI_T_pvar_session_create(&s) == MPI_SUCCESS, "session_create");
  const unsigned long long before = read_counter(s, "nmad_packets_sent", NULL, NULL);
  unsigned long long peers_before[64] = {0}, peers_after[64] = {0};
  int count = 0;
  read_counter(s, "nmad_peer_bytes", peers_before, &count);
  CHECK(count == mt_size, "per-peer counter of %d entries, %d ranks", count, mt_size);
  /* Traffic: 200 rounds of a ring exchange of 1 KiB (eager: below the
   * 4 KiB rendezvous threshold, so the sender's packets carry it all). */
  const int right = (mt_rank + 1) % mt_size, left = (mt_rank + mt_size - 1) % mt_size;
  static char out[1024], in[1024];
  for (int i = 0; i < 200; ++i)
    MPI_Sendrecv(out, sizeof out, MPI_CHAR, right, 1, in, sizeof in, MPI_CHAR, left, 1, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
  const unsigned long long after = read_counter(s, "nmad_packets_sent", NULL, NULL);
  read_counter(s, "nmad_peer_bytes", peers_after, &count);
  if (mt_size > 1) {
    CHECK(after >= before + 100, "packets sent %llu -> %llu over 200 exchanges", before, after);
    CHECK(peers_after[right] >= peers_before[right] + 200 * 1024ULL, "bytes to rank %d: %llu -> %llu", right,
          peers_before[right], peers_after[right]);
  }
  CHECK(MPI_T_pvar_session_free(&s) == MPI_SUCCESS && s == MPI_T_PVAR_SESSION_NULL, "session_free");
  MPI_T_pvar_handle h;
  CHECK(MPI_T_pvar_handle_alloc(s, 0, NULL, &h, &count) == MPI_T_ERR_INVALID_SESSION, "freed session");
}

int main(int argc, char** argv) {
  mt_name = "mpi_t";
  int n;
  /* Not initialised yet. */
  if (MPI_T_cvar_get_num(&n) != MPI_T_ERR_NOT_INITIALIZED) {
    printf("FAIL mpi_t: MPI_T answered before MPI_T_init_thread\n");
    return 1;
  }
  int provided = -1;
  if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS || provided != MPI_THREAD_SINGLE) {
    printf("FAIL mpi_t: MPI_T_init_thread\n");
    return 1;
  }
  MPI_T_init_thread(MPI_THREAD_SINGLE, &provided); /* nested: two finalizes needed */
  /* Before MPI_Init: enumerate and read controls. */
  int ncvar = 0;
  MPI_T_cvar_get_num(&ncvar);
  if (ncvar < 50) {
    printf("FAIL mpi_t: %d control variables before MPI_Init\n", ncvar);
    return 1;
  }
  /* A writable engine knob before the engine runs: not now. */
  {
    int i, count;
    MPI_T_cvar_handle h;
    long long v = 1000;
    MPI_T_cvar_get_index("NMAD_RDV_THRESHOLD", &i);
    MPI_T_cvar_handle_alloc(i, NULL, &h, &count);
    if (MPI_T_cvar_write(h, &v) != MPI_T_ERR_CVAR_SET_NOT_NOW) {
      printf("FAIL mpi_t: NMAD_RDV_THRESHOLD written before MPI_Init\n");
      return 1;
    }
    MPI_T_cvar_handle_free(&h);
  }
  mt_start("mpi_t", &argc, &argv);
  enumerate();
  control_values();
  counters();
  CHECK(MPI_T_finalize() == MPI_SUCCESS, "finalize 1");
  CHECK(MPI_T_cvar_get_num(&n) == MPI_SUCCESS, "still initialised after the first of two finalizes");
  CHECK(MPI_T_finalize() == MPI_SUCCESS, "finalize 2");
  CHECK(MPI_T_cvar_get_num(&n) == MPI_T_ERR_NOT_INITIALIZED, "after the last finalize");
  char text[MPI_MAX_ERROR_STRING];
  CHECK(mt_error(MPI_T_ERR_INVALID_HANDLE, text) == MPI_T_ERR_INVALID_HANDLE && strstr(text, "handle"),
        "error string: %s", text);
  return mt_pass();
}
