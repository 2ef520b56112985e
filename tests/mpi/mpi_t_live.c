/* MPI_T while the library runs (2 ranks and up; the suite sets
 * NMAD_RDV_THRESHOLD=4K): writable control variables and their effect (a
 * message above the old rendezvous threshold and below the new one goes
 * eager, per the rendezvous counter; the wait policy; a collective
 * threshold written on every rank), events (rendezvous started: peer, tag
 * and size through the callback, event_read and event_copy agreeing,
 * timestamps increasing, the source; a registration keeping 2 events
 * reports the others of a burst to its dropped handler; the free callback; nothing
 * after the free), the unexpected queue's level and high-water mark after
 * messages sent before their receives, the per-rail and aggregation
 * counters, and the handle-local variables (time waiting, waits):
 * start/stop/reset/write/readreset. */
#include <time.h>

#include "mpitest.h"

static int pvar_index(const char* name, int cls) {
  int i = -1;
  CHECK(MPI_T_pvar_get_index(name, cls, &i) == MPI_SUCCESS, "no pvar %s (class %d)", name, cls);
  return i;
}

/* Reads every entry of a pvar through a new handle of session s. */
static int read_pvar(MPI_T_pvar_session s, const char* name, int cls, unsigned long long* out) {
  int count = 0;
  MPI_T_pvar_handle h;
  CHECK(MPI_T_pvar_handle_alloc(s, pvar_index(name, cls), NULL, &h, &count) == MPI_SUCCESS, "alloc %s", name);
  CHECK(count <= 64 && MPI_T_pvar_read(s, h, out) == MPI_SUCCESS, "read %s", name);
  MPI_T_pvar_handle_free(s, &h);
  return count;
}

static unsigned long long rdv_to(MPI_T_pvar_session s, int peer) {
  unsigned long long v[64] = {0};
  read_pvar(s, "nmad_peer_rdv_requests", MPI_T_PVAR_CLASS_COUNTER, v);
  return v[peer];
}

static MPI_T_cvar_handle cvar(const char* name, int* scope) {
  int i = -1, count = 0;
  CHECK(MPI_T_cvar_get_index(name, &i) == MPI_SUCCESS, "no cvar %s", name);
  MPI_T_cvar_get_info(i, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, scope);
  MPI_T_cvar_handle h;
  CHECK(MPI_T_cvar_handle_alloc(i, NULL, &h, &count) == MPI_SUCCESS, "alloc cvar %s", name);
  return h;
}

static char big[3][8192], inbuf[8][8192];

/* One 8 KiB message rank 0 -> rank 1 (tag), received there. */
static void send_8k(int tag) {
  if (mt_rank == 0) MPI_Send(big[0], 8192, MPI_CHAR, 1, tag, MPI_COMM_WORLD);
  if (mt_rank == 1) MPI_Recv(inbuf[0], 8192, MPI_CHAR, 0, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

static void writable(MPI_T_pvar_session s) {
  int scope = -1;
  MPI_T_cvar_handle rdv = cvar("NMAD_RDV_THRESHOLD", &scope);
  CHECK(scope == MPI_T_SCOPE_LOCAL, "NMAD_RDV_THRESHOLD scope %d", scope);
  long long v = 0;
  CHECK(MPI_T_cvar_read(rdv, &v) == MPI_SUCCESS && v == 4096, "NMAD_RDV_THRESHOLD reads %lld", v);
  /* 8 KiB at 4 KiB: rendezvous. */
  unsigned long long r0 = rdv_to(s, 1);
  send_8k(10);
  unsigned long long r1 = rdv_to(s, 1);
  if (mt_rank == 0) CHECK(r1 == r0 + 1, "8 KiB at a 4 KiB threshold: rendezvous count %llu -> %llu", r0, r1);
  /* 32 KiB: the same message goes eager. */
  v = 32768;
  CHECK(MPI_T_cvar_write(rdv, &v) == MPI_SUCCESS, "write NMAD_RDV_THRESHOLD");
  v = 0;
  CHECK(MPI_T_cvar_read(rdv, &v) == MPI_SUCCESS && v == 32768, "NMAD_RDV_THRESHOLD reads %lld after the write", v);
  send_8k(11);
  unsigned long long r2 = rdv_to(s, 1);
  if (mt_rank == 0) CHECK(r2 == r1, "8 KiB at a 32 KiB threshold went by rendezvous (%llu -> %llu)", r1, r2);
  /* 1 KiB: 2 KiB goes by rendezvous. */
  v = 1024;
  MPI_T_cvar_write(rdv, &v);
  if (mt_rank == 0) MPI_Send(big[0], 2048, MPI_CHAR, 1, 12, MPI_COMM_WORLD);
  if (mt_rank == 1) MPI_Recv(inbuf[0], 2048, MPI_CHAR, 0, 12, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  unsigned long long r3 = rdv_to(s, 1);
  if (mt_rank == 0) CHECK(r3 == r2 + 1, "2 KiB at a 1 KiB threshold: rendezvous count %llu -> %llu", r2, r3);
  v = 0;
  CHECK(MPI_T_cvar_write(rdv, &v) == MPI_T_ERR_INVALID, "a threshold of 0");
  v = -5;
  CHECK(MPI_T_cvar_write(rdv, &v) == MPI_T_ERR_INVALID, "a negative threshold");
  v = 4096;
  CHECK(MPI_T_cvar_write(rdv, &v) == MPI_SUCCESS, "back to 4 KiB");
  MPI_T_cvar_handle_free(&rdv);

  /* The wait policy, and its spin. */
  MPI_T_cvar_handle wait = cvar("NMAD_WAIT", &scope), spin = cvar("NMAD_WAIT_SPIN_US", &scope);
  char old[MPI_MAX_INFO_VAL], now[MPI_MAX_INFO_VAL];
  CHECK(MPI_T_cvar_read(wait, old) == MPI_SUCCESS, "read NMAD_WAIT");
  CHECK(MPI_T_cvar_write(wait, "block") == MPI_SUCCESS && MPI_T_cvar_read(wait, now) == MPI_SUCCESS &&
            !strcmp(now, "block"), "NMAD_WAIT reads \"%s\" after writing block", now);
  send_8k(13); /* still works */
  CHECK(MPI_T_cvar_write(wait, "sometimes") == MPI_T_ERR_INVALID, "NMAD_WAIT=sometimes");
  CHECK(MPI_T_cvar_write(wait, old) == MPI_SUCCESS, "NMAD_WAIT back to %s", old);
  v = 50;
  CHECK(MPI_T_cvar_write(spin, &v) == MPI_SUCCESS && MPI_T_cvar_read(spin, &v) == MPI_SUCCESS && v == 50,
        "NMAD_WAIT_SPIN_US reads %lld after writing 50", v);
  MPI_T_cvar_handle_free(&wait);
  MPI_T_cvar_handle_free(&spin);

  /* A collective threshold: every rank writes the same value. */
  MPI_T_cvar_handle bs = cvar("NMAD_COLL_BCAST_SMALL", &scope);
  CHECK(scope == MPI_T_SCOPE_ALL_EQ, "NMAD_COLL_BCAST_SMALL scope %d", scope);
  long long keep = 0;
  MPI_T_cvar_read(bs, &keep);
  v = 1;
  CHECK(MPI_T_cvar_write(bs, &v) == MPI_SUCCESS && MPI_T_cvar_read(bs, &v) == MPI_SUCCESS && v == 1,
        "NMAD_COLL_BCAST_SMALL reads %lld after writing 1", v);
  static unsigned char b[20000];
  if (mt_rank == 0) mt_fill(b, sizeof b, 3);
  else memset(b, 0, sizeof b);
  MPI_Bcast(b, sizeof b, MPI_BYTE, 0, MPI_COMM_WORLD);
  CHECK(mt_check(b, sizeof b, 3) < 0, "bcast after the threshold changed");
  MPI_T_cvar_write(bs, &keep);
  MPI_T_cvar_handle_free(&bs);

  /* Read once at start-up: never. */
  MPI_T_cvar_handle st = cvar("NMAD_STRATEGY", &scope);
  CHECK(scope == MPI_T_SCOPE_READONLY && MPI_T_cvar_write(st, "default") == MPI_T_ERR_CVAR_SET_NEVER, "strategy");
  MPI_T_cvar_handle_free(&st);
}

/* ---- events ---- */
struct seen {
  int count, peer[16], tag[16];
  unsigned long long size[16];
  MPI_Count stamp[16];
  int bad;
};
static struct seen all_seen, few_seen;
static long long dropped_total;
static int freed_calls;

static void on_rdv(MPI_T_event_instance ev, MPI_T_event_registration reg, MPI_T_cb_safety safety, void* user) {
  (void)reg;
  struct seen* s = user;
  int peer = -1, tag = -1, src = -1;
  unsigned ctx = 0;
  unsigned long long size = 0;
  struct {
    int peer, tag;
    unsigned ctx, pad;
    unsigned long long size;
  } whole;
  MPI_Count ts = 0;
  if (MPI_T_event_read(ev, 0, &peer) || MPI_T_event_read(ev, 1, &tag) || MPI_T_event_read(ev, 2, &ctx) ||
      MPI_T_event_read(ev, 3, &size) || MPI_T_event_copy(ev, &whole) || MPI_T_event_get_timestamp(ev, &ts) ||
      MPI_T_event_get_source(ev, &src) || MPI_T_event_read(ev, 4, &peer) != MPI_T_ERR_INVALID_INDEX)
    s->bad++;
  if (whole.peer != peer || whole.tag != tag || whole.ctx != ctx || whole.size != size || src != 0 ||
      safety != MPI_T_CB_REQUIRE_NONE)
    s->bad++;
  if (s->count < 16) {
    s->peer[s->count] = peer;
    s->tag[s->count] = tag;
    s->size[s->count] = size;
    s->stamp[s->count] = ts;
  }
  s->count++;
}

static void on_dropped(MPI_Count n, MPI_T_event_registration reg, int source, MPI_T_cb_safety safety, void* user) {
  (void)reg, (void)safety, (void)user;
  if (source == 0) dropped_total += n;
}

static void on_free(MPI_T_event_registration reg, MPI_T_cb_safety safety, void* user) {
  (void)reg, (void)safety;
  if (user == &freed_calls) freed_calls++;
}

static void events(void) {
  int idx = -1;
  CHECK(MPI_T_event_get_index("nmad_rdv_started", &idx) == MPI_SUCCESS, "no nmad_rdv_started");
  MPI_T_event_registration all, few;
  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "org.nmad.test", "yes");
  CHECK(MPI_T_event_handle_alloc(idx, NULL, info, &all) == MPI_SUCCESS, "event_handle_alloc");
  MPI_Info used;
  char val[64];
  int flag = 0;
  CHECK(MPI_T_event_handle_get_info(all, &used) == MPI_SUCCESS, "handle_get_info");
  MPI_Info_get(used, "org.nmad.test", sizeof val - 1, val, &flag);
  CHECK(flag && !strcmp(val, "yes"), "the handle's info kept the hint");
  MPI_Info_free(&used);
  CHECK(MPI_T_event_register_callback(all, MPI_T_CB_REQUIRE_NONE, info, &all_seen, on_rdv) == MPI_SUCCESS,
        "register_callback");
  CHECK(MPI_T_event_callback_get_info(all, MPI_T_CB_REQUIRE_NONE, &used) == MPI_SUCCESS, "callback_get_info");
  MPI_Info_free(&used);
  CHECK(MPI_T_event_callback_get_info(all, MPI_T_CB_REQUIRE_ASYNC_SIGNAL_SAFE, &used) == MPI_T_ERR_INVALID,
        "no callback at that level");
  CHECK(MPI_T_event_callback_set_info(all, MPI_T_CB_REQUIRE_NONE, MPI_INFO_NULL) == MPI_SUCCESS, "callback_set_info");
  MPI_Info_set(info, "nmad_queue_max", "2");
  CHECK(MPI_T_event_handle_alloc(idx, NULL, info, &few) == MPI_SUCCESS, "event_handle_alloc (2 kept)");
  CHECK(MPI_T_event_register_callback(few, MPI_T_CB_REQUIRE_THREAD_SAFE, MPI_INFO_NULL, &few_seen, on_rdv) ==
            MPI_SUCCESS && MPI_T_event_set_dropped_handler(few, on_dropped) == MPI_SUCCESS, "second registration");
  MPI_Info_free(&info);

  /* Three rendezvous sends, one at a time: delivered as each Send returns. */
  for (int k = 0; k < 3; ++k) {
    send_8k(20 + k);
    if (mt_rank == 0) CHECK(all_seen.count == k + 1, "after send %d: %d events", k, all_seen.count);
  }
  if (mt_rank == 0) {
    for (int k = 0; k < 3; ++k) {
      CHECK(all_seen.peer[k] == 1 && all_seen.tag[k] == 20 + k && all_seen.size[k] == 8192,
            "event %d: peer %d tag %d size %llu", k, all_seen.peer[k], all_seen.tag[k], all_seen.size[k]);
      if (k) CHECK(all_seen.stamp[k] > all_seen.stamp[k - 1], "timestamps %lld then %lld", all_seen.stamp[k - 1],
                   all_seen.stamp[k]);
    }
    /* Each delivered before the next: none dropped. */
    CHECK(few_seen.count == 3 && dropped_total == 0, "one at a time: %d seen, %lld dropped", few_seen.count,
          dropped_total);
  } else {
    CHECK(all_seen.count == 0, "rank %d saw %d rendezvous of its own", mt_rank, all_seen.count);
  }
  CHECK(all_seen.bad == 0 && few_seen.bad == 0, "event data disagreed (%d, %d)", all_seen.bad, few_seen.bad);

  /* Six at once (non-blocking: queued until Waitall returns). */
  MPI_Request rq[6];
  few_seen.count = 0;
  dropped_total = 0;
  if (mt_rank == 0) {
    for (int k = 0; k < 6; ++k) MPI_Isend(big[k % 3], 8192, MPI_CHAR, 1, 30 + k, MPI_COMM_WORLD, &rq[k]);
    MPI_Waitall(6, rq, MPI_STATUSES_IGNORE);
    CHECK(all_seen.count == 9, "%d events after 9 rendezvous sends", all_seen.count);
    CHECK(few_seen.count == 2 && dropped_total == 4, "kept 2 of 6: %d seen, %lld dropped", few_seen.count,
          dropped_total);
  } else if (mt_rank == 1) {
    for (int k = 0; k < 6; ++k) MPI_Irecv(inbuf[k], 8192, MPI_CHAR, 0, 30 + k, MPI_COMM_WORLD, &rq[k]);
    MPI_Waitall(6, rq, MPI_STATUSES_IGNORE);
  }
  CHECK(MPI_T_event_handle_free(few, &freed_calls, on_free) == MPI_SUCCESS && freed_calls == 1, "free: %d calls",
        freed_calls);
  CHECK(MPI_T_event_handle_free(few, NULL, NULL) == MPI_T_ERR_INVALID_HANDLE, "freed twice");
  CHECK(MPI_T_event_handle_free(all, NULL, NULL) == MPI_SUCCESS, "free");
  const int before = all_seen.count;
  send_8k(40);
  CHECK(all_seen.count == before, "an event after the free");
  MPI_Barrier(MPI_COMM_WORLD);
}

/* ---- the unexpected queue ---- */
static void unexpected(MPI_T_pvar_session s) {
  enum { N = 20 };
  static char msgs[N][100];
  MPI_Barrier(MPI_COMM_WORLD);
  if (mt_rank == 0)
    for (int k = 0; k < N; ++k) MPI_Send(msgs[k], 100, MPI_CHAR, 1, 50, MPI_COMM_WORLD);
  if (mt_rank == 1) {
    unsigned long long level = 0, hwm = 0;
    const double t0 = MPI_Wtime();
    int flag;
    /* Until all have arrived (progress by Iprobe of a tag never sent). */
    while (read_pvar(s, "nmad_unexpected_queued", MPI_T_PVAR_CLASS_LEVEL, &level) && level < N &&
           MPI_Wtime() - t0 < 20)
      MPI_Iprobe(0, 999, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
    read_pvar(s, "nmad_unexpected_queued_max", MPI_T_PVAR_CLASS_HIGHWATERMARK, &hwm);
    CHECK(level >= N && hwm >= level, "unexpected queue %llu, high-water mark %llu, %d sent", level, hwm, N);
    for (int k = 0; k < N; ++k) MPI_Recv(msgs[k], 100, MPI_CHAR, 0, 50, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    unsigned long long after = 0, hwm2 = 0;
    read_pvar(s, "nmad_unexpected_queued", MPI_T_PVAR_CLASS_LEVEL, &after);
    read_pvar(s, "nmad_unexpected_queued_max", MPI_T_PVAR_CLASS_HIGHWATERMARK, &hwm2);
    CHECK(after + N <= level && hwm2 >= hwm, "after the receives: queue %llu (was %llu), mark %llu", after, level,
          hwm2);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

/* ---- per rail, aggregation, handle-local variables ---- */
static void handle_local(MPI_T_pvar_session s) {
  unsigned long long packets = 0, rails[64] = {0}, pp[64] = {0}, pa[64] = {0};
  read_pvar(s, "nmad_packets_sent", MPI_T_PVAR_CLASS_COUNTER, &packets);
  const int nr = read_pvar(s, "nmad_rail_sends", MPI_T_PVAR_CLASS_COUNTER, rails);
  unsigned long long sum = 0;
  for (int i = 0; i < nr; ++i) sum += rails[i];
  CHECK(nr == 4 && sum >= packets && rails[0] > 0, "rails: %d entries, %llu sends, %llu packets", nr, sum, packets);
  read_pvar(s, "nmad_peer_aggregated_packets", MPI_T_PVAR_CLASS_COUNTER, pa);
  const int np = read_pvar(s, "nmad_peer_packets", MPI_T_PVAR_CLASS_COUNTER, pp);
  for (int i = 0; i < np; ++i) CHECK(pa[i] <= pp[i], "rank %d: %llu aggregated of %llu packets", i, pa[i], pp[i]);

  int count;
  MPI_T_pvar_handle tw, nw, cont;
  CHECK(MPI_T_pvar_handle_alloc(s, pvar_index("nmad_wait_time", MPI_T_PVAR_CLASS_TIMER), NULL, &tw, &count) ==
            MPI_SUCCESS && count == 1, "alloc nmad_wait_time");
  MPI_T_pvar_handle_alloc(s, pvar_index("nmad_waits", MPI_T_PVAR_CLASS_COUNTER), NULL, &nw, &count);
  MPI_T_pvar_handle_alloc(s, pvar_index("nmad_packets_sent", MPI_T_PVAR_CLASS_COUNTER), NULL, &cont, &count);
  unsigned long long t = 1, n = 1, t2, n2;
  CHECK(MPI_T_pvar_read(s, tw, &t) == MPI_SUCCESS && t == 0, "never started: %llu ns", t);
  CHECK(MPI_T_pvar_start(s, MPI_T_PVAR_ALL_HANDLES) == MPI_SUCCESS, "start all");
  /* Rank 1 waits for rank 0's message, sent 20 ms after rank 1 said it
   * was about to wait. */
  if (mt_rank == 0) {
    MPI_Recv(inbuf[0], 1, MPI_CHAR, 1, 59, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    struct timespec d = {0, 20 * 1000 * 1000};
    nanosleep(&d, NULL);
    MPI_Send(big[0], 10, MPI_CHAR, 1, 60, MPI_COMM_WORLD);
  } else if (mt_rank == 1) {
    MPI_Send(big[0], 1, MPI_CHAR, 0, 59, MPI_COMM_WORLD);
    MPI_Recv(inbuf[0], 10, MPI_CHAR, 0, 60, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  CHECK(MPI_T_pvar_stop(s, MPI_T_PVAR_ALL_HANDLES) == MPI_SUCCESS, "stop all");
  MPI_T_pvar_read(s, tw, &t);
  MPI_T_pvar_read(s, nw, &n);
  /* (Most of the 20 ms; a rank descheduled meanwhile waits less.) */
  if (mt_rank == 1) CHECK(n >= 1 && t >= 1000 * 1000ULL, "waited %llu times, %llu ns", n, t);
  /* Stopped: no longer counting. */
  send_8k(61);
  MPI_T_pvar_read(s, tw, &t2);
  MPI_T_pvar_read(s, nw, &n2);
  CHECK(t2 == t && n2 == n, "counted while stopped: %llu -> %llu ns, %llu -> %llu waits", t, t2, n, n2);
  CHECK(MPI_T_pvar_reset(s, tw) == MPI_SUCCESS && MPI_T_pvar_read(s, tw, &t) == MPI_SUCCESS && t == 0,
        "after reset: %llu", t);
  unsigned long long w = 12345;
  CHECK(MPI_T_pvar_write(s, nw, &w) == MPI_SUCCESS && MPI_T_pvar_readreset(s, nw, &n) == MPI_SUCCESS && n == 12345,
        "written 12345, read %llu", n);
  CHECK(MPI_T_pvar_read(s, nw, &n) == MPI_SUCCESS && n == 0, "after readreset: %llu", n);
  CHECK(MPI_T_pvar_start(s, cont) == MPI_T_ERR_PVAR_NO_STARTSTOP && MPI_T_pvar_write(s, cont, &w) ==
            MPI_T_ERR_PVAR_NO_WRITE, "a continuous counter");
  CHECK(MPI_T_pvar_write(s, MPI_T_PVAR_ALL_HANDLES, &w) == MPI_T_ERR_INVALID_HANDLE, "write to all handles");
  MPI_T_pvar_handle_free(s, &tw);
  MPI_T_pvar_handle_free(s, &nw);
  MPI_T_pvar_handle_free(s, &cont);
}

int main(int argc, char** argv) {
  int provided;
  MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
  mt_start("mpi_t_live", &argc, &argv);
  CHECK(mt_size >= 2, "needs 2 ranks, has %d", mt_size);
  memset(big, 7, sizeof big);
  MPI_T_pvar_session s;
  CHECK(MPI_T_pvar_session_create(&s) == MPI_SUCCESS, "session");
  writable(s);
  events();
  unexpected(s);
  handle_local(s);
  MPI_T_pvar_session_free(&s);
  MPI_T_finalize();
  return mt_pass();
}
