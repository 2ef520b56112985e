/* Generalized requests (MPI-3.1 12.2): query_fn / free_fn / cancel_fn with
 * their extra_state, MPI_Grequest_complete from the same thread and from
 * other threads (MPI_THREAD_MULTIPLE), every Wait/Test form on arrays that
 * mix generalized and ordinary requests, Request_get_status (query_fn
 * called, request kept), Cancel (cancel_fn with the complete flag),
 * Request_free before and after completion (free_fn once, no query_fn),
 * and errors from query_fn: its return code, or the MPI_ERROR it sets
 * (MPI_ERR_IN_STATUS from the multiple-completion calls). */
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "mpitest.h"

typedef struct {
  int id;
  int queries, frees, cancels, last_cancel_complete;
  int query_rc;    /* what query_fn returns */
  int status_err;  /* what query_fn puts in MPI_ERROR */
  int cancelled;   /* query_fn reports the request cancelled */
  MPI_Request self;
} gstate;

static int query_fn(void* extra, MPI_Status* s) {
  gstate* g = extra;
  g->queries++;
  CHECK(s != NULL, "query_fn got a null status");
  s->MPI_SOURCE = 1000 + g->id;
  s->MPI_TAG = 2000 + g->id;
  s->MPI_ERROR = g->status_err;
  MPI_Status_set_elements(s, MPI_INT, g->id);
  MPI_Status_set_cancelled(s, g->cancelled);
  return g->query_rc;
}
static int free_fn(void* extra) {
  ((gstate*)extra)->frees++;
  return MPI_SUCCESS;
}
static int cancel_fn(void* extra, int complete) {
  gstate* g = extra;
  g->cancels++;
  g->last_cancel_complete = complete;
  if (!complete) { /* this request can be stopped: it completes as cancelled */
    g->cancelled = 1;
    MPI_Grequest_complete(g->self);
  }
  return MPI_SUCCESS;
}

static void start(gstate* g, int id) {
  memset(g, 0, sizeof *g);
  g->id = id;
  MPI_Grequest_start(query_fn, free_fn, cancel_fn, g, &g->self);
  CHECK(g->self != MPI_REQUEST_NULL, "Grequest_start gave MPI_REQUEST_NULL");
}

static void check_status(const MPI_Status* s, const gstate* g, const char* what) {
  int n = -1;
  MPI_Get_elements(s, MPI_INT, &n);
  CHECK(s->MPI_SOURCE == 1000 + g->id && s->MPI_TAG == 2000 + g->id && n == g->id,
        "%s: status from query_fn: source %d tag %d elements %d (id %d)", what, s->MPI_SOURCE, s->MPI_TAG, n, g->id);
}

static double now(void) { return MPI_Wtime(); }

typedef struct {
  gstate* g;
  int delay_us;
} completer_arg;
static void* completer(void* p) {
  completer_arg* a = p;
  usleep((useconds_t)a->delay_us);
  MPI_Grequest_complete(a->g->self);
  return NULL;
}

int main(int argc, char** argv) {
  int provided = 0;
  mt_name = "grequest";
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &mt_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &mt_size);
  gstate g[4];
  MPI_Request r[4];
  MPI_Status s[4];
  int flag = -1, idx = -1, n = -1, indices[4];

  /* 1. Complete, then Wait: query_fn then free_fn, once each. Test before
   * and Request_get_status before completion: not done, no callback. */
  start(&g[0], 3);
  r[0] = g[0].self;
  MPI_Test(&r[0], &flag, &s[0]);
  CHECK(!flag && g[0].queries == 0, "Test of an incomplete grequest: flag %d queries %d", flag, g[0].queries);
  MPI_Request_get_status(r[0], &flag, &s[0]);
  CHECK(!flag && g[0].queries == 0, "get_status of an incomplete grequest: flag %d", flag);
  MPI_Grequest_complete(r[0]);
  MPI_Request_get_status(r[0], &flag, &s[0]);
  CHECK(flag && g[0].queries == 1 && g[0].frees == 0 && r[0] != MPI_REQUEST_NULL,
        "get_status of a completed grequest: flag %d queries %d frees %d", flag, g[0].queries, g[0].frees);
  check_status(&s[0], &g[0], "Request_get_status");
  MPI_Request_get_status(r[0], &flag, MPI_STATUS_IGNORE);
  CHECK(g[0].queries == 2, "get_status with MPI_STATUS_IGNORE calls query_fn too (%d)", g[0].queries);
  MPI_Wait(&r[0], &s[0]);
  CHECK(r[0] == MPI_REQUEST_NULL && g[0].queries == 3 && g[0].frees == 1, "Wait: queries %d frees %d", g[0].queries,
        g[0].frees);
  check_status(&s[0], &g[0], "Wait");
  int c = -1;
  MPI_Test_cancelled(&s[0], &c);
  CHECK(c == 0, "not cancelled");

  /* 2. Mixed arrays with ordinary requests (a message to oneself), every
   * multiple-completion form. */
  for (int form = 0; form < 6; ++form) {
    int in = -1, out = 40 + form;
    start(&g[1], 10 + form);
    start(&g[2], 20 + form);
    MPI_Irecv(&in, 1, MPI_INT, mt_rank, 7, MPI_COMM_WORLD, &r[0]);
    r[1] = g[1].self;
    MPI_Isend(&out, 1, MPI_INT, mt_rank, 7, MPI_COMM_WORLD, &r[2]);
    r[3] = g[2].self;
    MPI_Grequest_complete(g[1].self);
    MPI_Grequest_complete(g[2].self);
    int done = 0;
    switch (form) {
      case 0:
        MPI_Waitall(4, r, s);
        done = 4;
        break;
      case 1:
        while (!flag || done == 0) {
          MPI_Testall(4, r, &flag, s);
          if (flag) done = 4;
        }
        break;
      case 2:
        while (done < 4) {
          MPI_Waitany(4, r, &idx, &s[0]);
          CHECK(idx >= 0 && r[idx] == MPI_REQUEST_NULL, "Waitany index %d", idx);
          if (idx == 1) check_status(&s[0], &g[1], "Waitany");
          if (idx == 3) check_status(&s[0], &g[2], "Waitany");
          done++;
        }
        break;
      case 3:
        while (done < 4) {
          MPI_Testany(4, r, &idx, &flag, &s[0]);
          if (!flag) continue;
          CHECK(idx >= 0 && r[idx] == MPI_REQUEST_NULL, "Testany index %d", idx);
          if (idx == 1) check_status(&s[0], &g[1], "Testany");
          done++;
        }
        break;
      case 4:
      case 5:
        while (done < 4) {
          if (form == 4) MPI_Waitsome(4, r, &n, indices, s);
          else MPI_Testsome(4, r, &n, indices, s);
          for (int k = 0; k < n; ++k) {
            if (indices[k] == 1) check_status(&s[k], &g[1], form == 4 ? "Waitsome" : "Testsome");
            if (indices[k] == 3) check_status(&s[k], &g[2], form == 4 ? "Waitsome" : "Testsome");
          }
          done += n;
        }
        break;
    }
    if (form <= 1) {
      check_status(&s[1], &g[1], "Waitall/Testall");
      check_status(&s[3], &g[2], "Waitall/Testall");
      CHECK(s[0].MPI_TAG == 7 && s[1].MPI_ERROR == MPI_SUCCESS, "ordinary status in a mixed array");
    }
    for (int k = 0; k < 4; ++k) CHECK(r[k] == MPI_REQUEST_NULL, "form %d: request %d left", form, k);
    CHECK(in == out, "form %d: message %d", form, in);
    CHECK(g[1].queries == 1 && g[1].frees == 1 && g[2].queries == 1 && g[2].frees == 1,
          "form %d: callbacks %d/%d %d/%d", form, g[1].queries, g[1].frees, g[2].queries, g[2].frees);
    flag = 0;
  }

  /* 3. Errors (returned, not fatal): query_fn's return code; an error it
   * puts in MPI_ERROR. */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  char text[MPI_MAX_ERROR_STRING];
  start(&g[0], 1);
  g[0].query_rc = MPI_ERR_OTHER;
  MPI_Grequest_complete(g[0].self);
  r[0] = g[0].self;
  int err = MPI_Wait(&r[0], &s[0]);
  CHECK(mt_error(err, text) == MPI_ERR_OTHER && g[0].frees == 1 && r[0] == MPI_REQUEST_NULL,
        "Wait with query_fn failing: %s, frees %d", text, g[0].frees);
  start(&g[0], 2);
  start(&g[1], 3);
  g[1].status_err = MPI_ERR_INTERN;
  int in = -1, out = 5;
  MPI_Irecv(&in, 1, MPI_INT, mt_rank, 8, MPI_COMM_WORLD, &r[0]);
  r[1] = g[0].self;
  r[2] = g[1].self;
  MPI_Send(&out, 1, MPI_INT, mt_rank, 8, MPI_COMM_WORLD);
  MPI_Grequest_complete(g[0].self);
  MPI_Grequest_complete(g[1].self);
  err = MPI_Waitall(3, r, s);
  CHECK(mt_error(err, text) == MPI_ERR_IN_STATUS, "Waitall with a failed grequest: %s", text);
  CHECK(s[0].MPI_ERROR == MPI_SUCCESS && s[1].MPI_ERROR == MPI_SUCCESS && s[2].MPI_ERROR == MPI_ERR_INTERN,
        "Waitall statuses: %d %d %d", s[0].MPI_ERROR, s[1].MPI_ERROR, s[2].MPI_ERROR);
  CHECK(in == 5 && g[1].frees == 1 && r[2] == MPI_REQUEST_NULL, "Waitall with a failed grequest completed all");
  start(&g[0], 4);
  g[0].status_err = MPI_ERR_INTERN;
  MPI_Grequest_complete(g[0].self);
  r[0] = g[0].self;
  err = MPI_Testsome(1, r, &n, indices, s);
  CHECK(mt_error(err, text) == MPI_ERR_IN_STATUS && n == 1 && s[0].MPI_ERROR == MPI_ERR_INTERN,
        "Testsome with a failed grequest: %s, %d", text, n);
  err = MPI_Grequest_complete(g[0].self);
  CHECK(mt_error(err, text) == MPI_ERR_REQUEST, "Grequest_complete of a released request: %s", text);
  err = MPI_Grequest_start(NULL, free_fn, cancel_fn, NULL, &r[0]);
  CHECK(mt_error(err, text) == MPI_ERR_ARG, "null query_fn: %s", text);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);

  /* 4. Cancel before completion (cancel_fn sees complete = 0, completes it
   * as cancelled) and after (complete = 1: not cancelled). */
  start(&g[0], 5);
  r[0] = g[0].self;
  MPI_Cancel(&r[0]);
  CHECK(g[0].cancels == 1 && g[0].last_cancel_complete == 0, "cancel_fn: %d calls, complete %d", g[0].cancels,
        g[0].last_cancel_complete);
  MPI_Wait(&r[0], &s[0]);
  MPI_Test_cancelled(&s[0], &c);
  CHECK(c == 1 && g[0].frees == 1, "cancelled grequest: Test_cancelled %d", c);
  start(&g[0], 6);
  r[0] = g[0].self;
  MPI_Grequest_complete(r[0]);
  MPI_Cancel(&r[0]);
  CHECK(g[0].cancels == 1 && g[0].last_cancel_complete == 1, "cancel_fn after completion: complete %d",
        g[0].last_cancel_complete);
  MPI_Wait(&r[0], &s[0]);
  MPI_Test_cancelled(&s[0], &c);
  CHECK(c == 0, "completed grequest cancelled afterwards: Test_cancelled %d", c);

  /* 5. Request_free: before completion free_fn runs at Grequest_complete,
   * after it at once; query_fn never. */
  start(&g[0], 7);
  r[0] = g[0].self;
  MPI_Request_free(&r[0]);
  CHECK(r[0] == MPI_REQUEST_NULL && g[0].frees == 0, "Request_free of an incomplete grequest: frees %d", g[0].frees);
  MPI_Grequest_complete(g[0].self);
  CHECK(g[0].frees == 1 && g[0].queries == 0, "freed then completed: frees %d queries %d", g[0].frees, g[0].queries);
  start(&g[0], 8);
  r[0] = g[0].self;
  MPI_Grequest_complete(r[0]);
  MPI_Request_free(&r[0]);
  CHECK(g[0].frees == 1 && g[0].queries == 0, "completed then freed: frees %d queries %d", g[0].frees, g[0].queries);

  /* 6. Completed by other threads while this one waits (Wait, Waitall, and
   * Waitany on a mixed array): the waiter must wake up at once, not at the
   * end of a sleep. */
  if (provided == MPI_THREAD_MULTIPLE) {
    pthread_t th[4];
    completer_arg a[4];
    const double t0 = now();
    for (int it = 0; it < 10; ++it) {
      start(&g[0], 9);
      a[0].g = &g[0];
      a[0].delay_us = 2000;
      pthread_create(&th[0], NULL, completer, &a[0]);
      r[0] = g[0].self;
      MPI_Wait(&r[0], &s[0]);
      check_status(&s[0], &g[0], "Wait, completed by another thread");
      pthread_join(th[0], NULL);
      CHECK(g[0].queries == 1 && g[0].frees == 1, "threaded: queries %d frees %d", g[0].queries, g[0].frees);
    }
    const double waited = now() - t0;
    CHECK(waited < 1.5, "10 waits for another thread's 2 ms completion took %.3f s (sleeping past the completion)",
          waited);
    for (int k = 0; k < 4; ++k) {
      start(&g[k], 30 + k);
      a[k].g = &g[k];
      a[k].delay_us = 1000 * (4 - k);
      r[k] = g[k].self;
      pthread_create(&th[k], NULL, completer, &a[k]);
    }
    MPI_Waitall(4, r, s);
    for (int k = 0; k < 4; ++k) {
      pthread_join(th[k], NULL);
      check_status(&s[k], &g[k], "Waitall, completed by other threads");
      CHECK(r[k] == MPI_REQUEST_NULL && g[k].frees == 1, "threaded Waitall %d", k);
    }
    int x = -1, y = 77;
    start(&g[0], 40);
    a[0].g = &g[0];
    a[0].delay_us = 3000;
    MPI_Irecv(&x, 1, MPI_INT, mt_rank, 9, MPI_COMM_WORLD, &r[1]);
    r[0] = g[0].self;
    pthread_create(&th[0], NULL, completer, &a[0]);
    for (int done = 0; done < 2; ++done) {
      MPI_Waitany(2, r, &idx, &s[0]);
      if (idx == 0) {
        check_status(&s[0], &g[0], "Waitany, completed by another thread");
        MPI_Send(&y, 1, MPI_INT, mt_rank, 9, MPI_COMM_WORLD); /* the receive can complete now */
      }
      CHECK(idx == done, "Waitany order: %d at step %d", idx, done);
    }
    pthread_join(th[0], NULL);
    CHECK(x == 77, "message %d", x);
  }
  return mt_pass();
}
