/* MPI 4.1's buffers for buffered sends per communicator and per session
 * (3.6): a communicator's buffer is used instead of the process's (and the
 * reverse: a communicator with its own buffer never falls back to the
 * process's), a session's buffer for a communicator made by
 * Comm_create_from_group (and the groups and communicators derived from
 * those), MPI_BUFFER_AUTOMATIC (many large Bsends with no
 * space attached), flush and iflush (after them the buffer is detached at
 * once and may be overwritten; the data is checked at the receiver), detach
 * returning what was attached (also the _c forms), a communicator's buffer
 * going with MPI_Comm_free, and the errors. Messages go round a ring (to
 * self with one rank). */
#include "mpitest.h"

enum { SMALL = 1000, LARGE = 2000, HUGE_N = 200000 };

static int next_rank, prev_rank, ss_rank;
static int out[HUGE_N], in[HUGE_N];

static void fill(int* p, int n, int seed) {
  for (int i = 0; i < n; ++i) p[i] = seed * 1000003 + i;
}
static void expect(const int* p, int n, int seed, const char* what) {
  for (int i = 0; i < n; ++i) CHECK(p[i] == seed * 1000003 + i, "%s: element %d is %d", what, i, p[i]);
}
static int space(int n) { return n * (int)sizeof(int) + MPI_BSEND_OVERHEAD; }

/* A Bsend of n ints on comm (expected result `want`); when it succeeds,
 * the message is received from prev and checked. */
static void bsend_round(MPI_Comm comm, int n, int seed, int want, const char* what) {
  int me;
  MPI_Comm_rank(comm, &me); /* next_rank and prev_rank are ranks in comm */
  fill(out, n, me * 100 + seed);
  MPI_Request r;
  MPI_Irecv(in, n, MPI_INT, prev_rank, seed, comm, &r);
  int err = MPI_Bsend(out, n, MPI_INT, next_rank, seed, comm);
  CHECK(err == want, "%s: Bsend of %d ints gave %d, expected %d", what, n, err, want);
  if (err != MPI_SUCCESS) {
    MPI_Cancel(&r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    MPI_Barrier(comm);
    return;
  }
  memset(out, 0, sizeof(int) * (size_t)n); /* the buffered copy is what goes */
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  expect(in, n, prev_rank * 100 + seed, what);
  MPI_Barrier(comm);
}

/* The communicator's buffer against the process's. */
static void comm_against_process(void) {
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
  char* pbuf = malloc(space(SMALL));
  char* cbuf = malloc(space(LARGE));
  CHECK(MPI_Buffer_attach(pbuf, space(SMALL)) == MPI_SUCCESS, "process attach");
  CHECK(MPI_Comm_attach_buffer(dup, cbuf, space(LARGE)) == MPI_SUCCESS, "comm attach");
  /* Only the communicator's buffer holds LARGE ints. */
  bsend_round(dup, LARGE, 1, MPI_SUCCESS, "comm buffer larger than the process's");
  bsend_round(MPI_COMM_WORLD, LARGE, 2, MPI_ERR_BUFFER, "process buffer too small");
  bsend_round(MPI_COMM_WORLD, SMALL, 3, MPI_SUCCESS, "process buffer");
  void* p = NULL;
  int s = -1;
  CHECK(MPI_Comm_detach_buffer(dup, &p, &s) == MPI_SUCCESS && p == cbuf && s == space(LARGE), "comm detach");
  CHECK(MPI_Buffer_detach(&p, &s) == MPI_SUCCESS && p == pbuf && s == space(SMALL), "process detach");
  /* The reverse: a small communicator buffer does not fall back to the
   * process's larger one. */
  CHECK(MPI_Buffer_attach(cbuf, space(LARGE)) == MPI_SUCCESS, "process attach (large)");
  CHECK(MPI_Comm_attach_buffer(dup, pbuf, space(SMALL)) == MPI_SUCCESS, "comm attach (small)");
  bsend_round(dup, LARGE, 4, MPI_ERR_BUFFER, "comm buffer too small");
  bsend_round(MPI_COMM_WORLD, LARGE, 5, MPI_SUCCESS, "process buffer larger than the comm's");
  bsend_round(dup, SMALL, 6, MPI_SUCCESS, "small comm buffer");
  /* The _c forms. */
  MPI_Count cs = -1;
  CHECK(MPI_Comm_detach_buffer_c(dup, &p, &cs) == MPI_SUCCESS && p == pbuf && cs == space(SMALL), "comm detach_c");
  CHECK(MPI_Comm_attach_buffer_c(dup, pbuf, (MPI_Count)space(SMALL)) == MPI_SUCCESS, "comm attach_c");
  CHECK(MPI_Comm_detach_buffer(dup, &p, &s) == MPI_SUCCESS && p == pbuf && s == space(SMALL), "comm detach again");
  /* Nothing attached: detach gives NULL and 0; a Bsend on dup uses the
   * process buffer again. */
  CHECK(MPI_Comm_detach_buffer(dup, &p, &s) == MPI_SUCCESS && p == NULL && s == 0, "detach with none attached");
  bsend_round(dup, LARGE, 7, MPI_SUCCESS, "process buffer once the comm's is detached");
  CHECK(MPI_Buffer_detach(&p, &s) == MPI_SUCCESS && p == cbuf && s == space(LARGE), "process detach (large)");
  /* A communicator's buffer goes with the communicator (once its messages left). */
  CHECK(MPI_Comm_attach_buffer(dup, cbuf, space(LARGE)) == MPI_SUCCESS, "comm attach before free");
  fill(out, LARGE, mt_rank + 7);
  MPI_Request r;
  MPI_Irecv(in, LARGE, MPI_INT, prev_rank, 8, dup, &r);
  CHECK(MPI_Bsend(out, LARGE, MPI_INT, next_rank, 8, dup) == MPI_SUCCESS, "Bsend before free");
  MPI_Comm dup2;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup2);
  MPI_Comm_free(&dup); /* the Irecv is still pending on it: that is allowed */
  memset(cbuf, 0x5a, (size_t)space(LARGE));
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  expect(in, LARGE, prev_rank + 7, "message sent before MPI_Comm_free");
  MPI_Comm_free(&dup2);
  free(pbuf);
  free(cbuf);
}

/* A communicator made from a session's group uses the session's buffer
 * unless it has its own. */
static void session_buffer(void) {
  MPI_Session ses;
  CHECK(MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &ses) == MPI_SUCCESS, "Session_init");
  MPI_Group g;
  CHECK(MPI_Group_from_session_pset(ses, "mpi://WORLD", &g) == MPI_SUCCESS, "group");
  MPI_Comm sc;
  CHECK(MPI_Comm_create_from_group(g, "org.nmad.bsend_buffers", MPI_INFO_NULL, MPI_ERRORS_RETURN, &sc) ==
            MPI_SUCCESS, "Comm_create_from_group");
  MPI_Group_free(&g);
  char* sbuf = malloc(space(LARGE));
  char* cbuf = malloc(space(SMALL));
  bsend_round(sc, SMALL, 10, MPI_ERR_BUFFER, "no buffer anywhere");
  CHECK(MPI_Session_attach_buffer(ses, sbuf, space(LARGE)) == MPI_SUCCESS, "session attach");
  int err = MPI_Session_attach_buffer(ses, sbuf, space(LARGE));
  CHECK(err == MPI_ERR_BUFFER, "second session attach: %d", err);
  bsend_round(sc, LARGE, 11, MPI_SUCCESS, "session buffer");
  /* Communicators derived from sc derive from the session too. */
  MPI_Comm sd, ss;
  MPI_Comm_dup(sc, &sd);
  MPI_Comm_split(sc, 0, -mt_rank, &ss);
  MPI_Comm_rank(ss, &ss_rank);
  bsend_round(sd, LARGE, 19, MPI_SUCCESS, "session buffer through Comm_dup");
  MPI_Comm_free(&sd);
  int ss_next = next_rank, ss_prev = prev_rank;
  next_rank = (ss_rank + 1) % mt_size;
  prev_rank = (ss_rank + mt_size - 1) % mt_size;
  bsend_round(ss, LARGE, 20, MPI_SUCCESS, "session buffer through Comm_split");
  next_rank = ss_next;
  prev_rank = ss_prev;
  MPI_Comm_free(&ss);
  /* A group derived from the session's group (here all of it, reversed)
   * derives from the session; so does a communicator made from it. */
  MPI_Group sg, rg;
  MPI_Comm_group(sc, &sg);
  int* order = malloc(sizeof(int) * (size_t)mt_size);
  for (int i = 0; i < mt_size; ++i) order[i] = mt_size - 1 - i;
  MPI_Group_incl(sg, mt_size, order, &rg);
  free(order);
  MPI_Comm rc;
  CHECK(MPI_Comm_create_from_group(rg, "org.nmad.bsend_buffers.incl", MPI_INFO_NULL, MPI_ERRORS_RETURN, &rc) ==
            MPI_SUCCESS, "Comm_create_from_group of a derived group");
  MPI_Group_free(&sg);
  MPI_Group_free(&rg);
  MPI_Comm_rank(rc, &ss_rank);
  next_rank = (ss_rank + 1) % mt_size;
  prev_rank = (ss_rank + mt_size - 1) % mt_size;
  bsend_round(rc, LARGE, 21, MPI_SUCCESS, "session buffer through Group_incl");
  next_rank = ss_next;
  prev_rank = ss_prev;
  MPI_Comm_free(&rc);
  bsend_round(MPI_COMM_WORLD, SMALL, 12, MPI_ERR_BUFFER, "a world comm does not use the session's buffer");
  CHECK(MPI_Comm_attach_buffer(sc, cbuf, space(SMALL)) == MPI_SUCCESS, "comm attach over session");
  bsend_round(sc, LARGE, 13, MPI_ERR_BUFFER, "the comm's buffer first");
  bsend_round(sc, SMALL, 14, MPI_SUCCESS, "the comm's buffer");
  void* p = NULL;
  int s = -1;
  CHECK(MPI_Comm_detach_buffer(sc, &p, &s) == MPI_SUCCESS && p == cbuf && s == space(SMALL), "comm detach");
  bsend_round(sc, LARGE, 15, MPI_SUCCESS, "session buffer again");
  /* Flush, then detach at once and reuse the memory before the receive completes. */
  fill(out, LARGE, mt_rank + 16);
  MPI_Request r, fr;
  MPI_Irecv(in, LARGE, MPI_INT, prev_rank, 16, sc, &r);
  CHECK(MPI_Bsend(out, LARGE, MPI_INT, next_rank, 16, sc) == MPI_SUCCESS, "Bsend before flush");
  CHECK(MPI_Session_flush_buffer(ses) == MPI_SUCCESS, "Session_flush_buffer");
  CHECK(MPI_Session_detach_buffer(ses, &p, &s) == MPI_SUCCESS && p == sbuf && s == space(LARGE), "session detach");
  memset(sbuf, 0x5a, (size_t)space(LARGE));
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  expect(in, LARGE, prev_rank + 16, "session flush");
  MPI_Barrier(sc);
  bsend_round(sc, SMALL, 17, MPI_ERR_BUFFER, "session buffer detached");
  /* iflush, and the _c forms. */
  CHECK(MPI_Session_attach_buffer_c(ses, sbuf, (MPI_Count)space(LARGE)) == MPI_SUCCESS, "session attach_c");
  fill(out, LARGE, mt_rank + 18);
  MPI_Irecv(in, LARGE, MPI_INT, prev_rank, 18, sc, &r);
  CHECK(MPI_Bsend(out, LARGE, MPI_INT, next_rank, 18, sc) == MPI_SUCCESS, "Bsend before iflush");
  CHECK(MPI_Session_iflush_buffer(ses, &fr) == MPI_SUCCESS && fr != MPI_REQUEST_NULL, "Session_iflush_buffer");
  MPI_Wait(&fr, MPI_STATUS_IGNORE);
  CHECK(fr == MPI_REQUEST_NULL, "iflush request freed by Wait");
  MPI_Count cs = -1;
  CHECK(MPI_Session_detach_buffer_c(ses, &p, &cs) == MPI_SUCCESS && p == sbuf && cs == space(LARGE),
        "session detach_c");
  memset(sbuf, 0x5a, (size_t)space(LARGE));
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  expect(in, LARGE, prev_rank + 18, "session iflush");
  /* Errors on the session (its handler returns them). */
  err = MPI_Session_attach_buffer(ses, sbuf, -1);
  CHECK(err == MPI_ERR_ARG, "negative size: %d", err);
  err = MPI_Session_attach_buffer(ses, NULL, 10);
  CHECK(err == MPI_ERR_ARG, "null buffer: %d", err);
  err = MPI_Session_detach_buffer(ses, NULL, &s);
  CHECK(err == MPI_ERR_ARG, "null buffer_addr: %d", err);
  err = MPI_Session_iflush_buffer(ses, NULL);
  CHECK(err == MPI_ERR_ARG, "null request: %d", err);
  /* A buffer still attached at finalize is waited for there. */
  CHECK(MPI_Session_attach_buffer(ses, sbuf, space(LARGE)) == MPI_SUCCESS, "session attach before finalize");
  MPI_Comm_free(&sc);
  CHECK(MPI_Session_finalize(&ses) == MPI_SUCCESS, "Session_finalize");
  free(sbuf);
  free(cbuf);
}

/* MPI_BUFFER_AUTOMATIC: many large messages with no space given. */
static void automatic(void) {
  enum { MSGS = 8, N = HUGE_N / MSGS };
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  CHECK(MPI_Comm_attach_buffer(dup, MPI_BUFFER_AUTOMATIC, 0) == MPI_SUCCESS, "comm attach automatic");
  for (int round = 0; round < 3; ++round) {
    for (int m = 0; m < MSGS; ++m) {
      fill(out, N, mt_rank * 100 + round * 10 + m);
      CHECK(MPI_Bsend(out, N, MPI_INT, next_rank, m, dup) == MPI_SUCCESS, "automatic Bsend %d", m);
    }
    memset(out, 0, sizeof out);
    for (int m = MSGS - 1; m >= 0; --m) {
      MPI_Recv(in + m * N, N, MPI_INT, prev_rank, m, dup, MPI_STATUS_IGNORE);
      expect(in + m * N, N, prev_rank * 100 + round * 10 + m, "automatic");
    }
  }
  void* p = NULL;
  int s = -1;
  CHECK(MPI_Comm_detach_buffer(dup, &p, &s) == MPI_SUCCESS && p == MPI_BUFFER_AUTOMATIC && s == 0,
        "detach automatic: %p %d", p, s);
  /* The process buffer too; its iflush. */
  CHECK(MPI_Buffer_attach(MPI_BUFFER_AUTOMATIC, 0) == MPI_SUCCESS, "process attach automatic");
  fill(out, HUGE_N, mt_rank + 30);
  MPI_Request r, fr;
  MPI_Irecv(in, HUGE_N, MPI_INT, prev_rank, 30, MPI_COMM_WORLD, &r);
  CHECK(MPI_Bsend(out, HUGE_N, MPI_INT, next_rank, 30, MPI_COMM_WORLD) == MPI_SUCCESS, "automatic process Bsend");
  CHECK(MPI_Buffer_iflush(&fr) == MPI_SUCCESS, "Buffer_iflush");
  MPI_Wait(&fr, MPI_STATUS_IGNORE);
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  expect(in, HUGE_N, prev_rank + 30, "automatic process buffer");
  CHECK(MPI_Buffer_flush() == MPI_SUCCESS, "Buffer_flush");
  CHECK(MPI_Buffer_detach(&p, &s) == MPI_SUCCESS && p == MPI_BUFFER_AUTOMATIC && s == 0, "process detach automatic");
  MPI_Comm_free(&dup);
}

/* Comm flush and iflush; iflush with nothing attached completes at once. */
static void comm_flush(void) {
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  char* cbuf = malloc(space(LARGE));
  void* p = NULL;
  int s = -1;
  MPI_Request r, fr;
  for (int use_iflush = 0; use_iflush < 2; ++use_iflush) {
    CHECK(MPI_Comm_attach_buffer(dup, cbuf, space(LARGE)) == MPI_SUCCESS, "comm attach");
    fill(out, LARGE, mt_rank + 40 + use_iflush);
    MPI_Irecv(in, LARGE, MPI_INT, prev_rank, 40, dup, &r);
    CHECK(MPI_Bsend(out, LARGE, MPI_INT, next_rank, 40, dup) == MPI_SUCCESS, "Bsend before flush");
    if (use_iflush) {
      CHECK(MPI_Comm_iflush_buffer(dup, &fr) == MPI_SUCCESS, "Comm_iflush_buffer");
      MPI_Wait(&fr, MPI_STATUS_IGNORE);
    } else {
      CHECK(MPI_Comm_flush_buffer(dup) == MPI_SUCCESS, "Comm_flush_buffer");
    }
    CHECK(MPI_Comm_detach_buffer(dup, &p, &s) == MPI_SUCCESS && p == cbuf && s == space(LARGE), "detach");
    memset(cbuf, 0x5a, (size_t)space(LARGE));
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    expect(in, LARGE, prev_rank + 40 + use_iflush, use_iflush ? "comm iflush" : "comm flush");
    MPI_Barrier(dup);
  }
  int flag = 0;
  CHECK(MPI_Comm_iflush_buffer(dup, &fr) == MPI_SUCCESS, "iflush with nothing attached");
  MPI_Test(&fr, &flag, MPI_STATUS_IGNORE);
  CHECK(flag, "iflush with nothing attached is done at once");
  CHECK(MPI_Comm_flush_buffer(dup) == MPI_SUCCESS && MPI_Buffer_flush() == MPI_SUCCESS, "flush of nothing");
  MPI_Comm_free(&dup);
  free(cbuf);
}

static void errors(void) {
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
  char buf[64];
  void* p;
  int s;
  MPI_Request r;
  int err = MPI_Comm_attach_buffer(MPI_COMM_NULL, buf, sizeof buf);
  CHECK(err == MPI_ERR_COMM, "attach on MPI_COMM_NULL: %d", err);
  err = MPI_Comm_detach_buffer(MPI_COMM_NULL, &p, &s);
  CHECK(err == MPI_ERR_COMM, "detach on MPI_COMM_NULL: %d", err);
  err = MPI_Comm_flush_buffer(12345);
  CHECK(err == MPI_ERR_COMM, "flush on an invalid comm: %d", err);
  err = MPI_Comm_iflush_buffer(MPI_COMM_NULL, &r);
  CHECK(err == MPI_ERR_COMM, "iflush on MPI_COMM_NULL: %d", err);
  err = MPI_Comm_attach_buffer(dup, buf, -5);
  CHECK(err == MPI_ERR_ARG, "negative size: %d", err);
  err = MPI_Comm_attach_buffer_c(dup, buf, (MPI_Count)-5);
  CHECK(err == MPI_ERR_ARG, "negative size (_c): %d", err);
  err = MPI_Comm_attach_buffer(dup, NULL, 10);
  CHECK(err == MPI_ERR_ARG, "null buffer: %d", err);
  CHECK(MPI_Comm_attach_buffer(dup, buf, sizeof buf) == MPI_SUCCESS, "attach");
  err = MPI_Comm_attach_buffer(dup, buf, sizeof buf);
  CHECK(err == MPI_ERR_BUFFER, "second attach: %d", err);
  err = MPI_Comm_attach_buffer(dup, MPI_BUFFER_AUTOMATIC, 0);
  CHECK(err == MPI_ERR_BUFFER, "automatic over an attached buffer: %d", err);
  err = MPI_Comm_detach_buffer(dup, NULL, &s);
  CHECK(err == MPI_ERR_ARG, "null buffer_addr: %d", err);
  err = MPI_Comm_detach_buffer(dup, &p, NULL);
  CHECK(err == MPI_ERR_ARG, "null size: %d", err);
  err = MPI_Comm_iflush_buffer(dup, NULL);
  CHECK(err == MPI_ERR_ARG, "null request: %d", err);
  err = MPI_Buffer_iflush(NULL);
  CHECK(err == MPI_ERR_ARG, "Buffer_iflush null request: %d", err);
  CHECK(MPI_Comm_detach_buffer(dup, &p, &s) == MPI_SUCCESS && p == buf && s == (int)sizeof buf, "detach");
  MPI_Comm_free(&dup);
}

int main(int argc, char** argv) {
  mt_start("bsend_buffers", &argc, &argv);
  next_rank = (mt_rank + 1) % mt_size;
  prev_rank = (mt_rank + mt_size - 1) % mt_size;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  comm_against_process();
  session_buffer();
  automatic();
  comm_flush();
  errors();
  return mt_pass();
}
