/* Every test call makes progress first, then reports everything that can
 * complete without waiting for another process: ONE call must do.
 *
 * 1. Messages to this process itself, of every protocol (eager, rendezvous,
 *    synchronous): the whole transfer is local, so after Isend + Irecv one
 *    Testall / Testsome / Test / Request_get_status finds both complete,
 *    two Testany calls find one each, and an Imrecv of a message found by
 *    Mprobe or Improbe is complete at its first Test.
 * 2. Eager messages from the other ranks: once rank 0 has received each
 *    sender's later "done" message on the same connection, everything that
 *    sender sent before is at rank 0's engine, and one call of each test
 *    form must find it complete (Mprobe'd ones: the first Test of their
 *    Imrecv).
 * With $MPITEST_SELF_ASYNC set (the harness sets it for the tcp and ofi
 * drivers), part 1 allows up to 2000 calls (yielding between them): a
 * connection to this process itself then crosses the kernel's loopback or
 * a provider's own progress, which may hand the bytes over later (on a
 * loaded machine the kernel defers loopback delivery to a thread of its
 * own); the calls must still find everything, with the right data. */
#include <sched.h>

#include "mpitest.h"

#define K 6
#define MAXN 100000

/* 2: eager on every driver (< 8 KiB). */
static const int eager_sizes[K] = {1, 4, 100, 500, 1000, 1800};
/* 1: eager, over the rendezvous threshold, several packets. */
static const int self_sizes[3] = {3, 20000, MAXN};

static int sbuf[MAXN], rbuf[MAXN];

static void fill(int* p, int n, int seed) {
  for (int i = 0; i < n; ++i) p[i] = seed * 7919 + i;
}
static void check(const int* p, int n, int seed, const char* what) {
  for (int i = 0; i < n; ++i) CHECK(p[i] == seed * 7919 + i, "%s: element %d of %d is %d", what, i, n, p[i]);
}

/* Calls a part-1 check may take: 1, or 2000 with $MPITEST_SELF_ASYNC. */
static int self_calls = 1;
static int again(int call) {
  if (call + 1 >= self_calls) return 0;
  sched_yield();
  return 1;
}

static void self_send(int sync, int n, int tag, MPI_Request* r) {
  if (sync) MPI_Issend(sbuf, n, MPI_INT, mt_rank, tag, MPI_COMM_WORLD, r);
  else MPI_Isend(sbuf, n, MPI_INT, mt_rank, tag, MPI_COMM_WORLD, r);
}

static void self_messages(void) {
  char what[128];
  /* The connection to this process is set up by the first message (with
   * NMAD_DRIVER=shm or tcp it is a real connection, not the self driver). */
  MPI_Sendrecv(sbuf, 1, MPI_INT, mt_rank, 99, rbuf, 1, MPI_INT, mt_rank, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  for (int sync = 0; sync < 2; ++sync)
    for (int k = 0; k < 3; ++k)
      for (int form = 0; form < 7; ++form) {
        const int n = self_sizes[k], tag = 100 + form, seed = form + 10 * k + 100 * sync;
        snprintf(what, sizeof what, "self %s of %d ints, form %d", sync ? "Issend" : "Isend", n, form);
        fill(sbuf, n, seed);
        memset(rbuf, 0xff, sizeof(int) * (size_t)n);
        MPI_Request q[2];
        MPI_Status qs[2];
        int flag = 0, count = 0;
        if (form >= 5) { /* matched probe, then Imrecv */
          self_send(sync, n, tag, &q[1]);
          MPI_Message m;
          MPI_Status ps;
          if (form == 5) {
            MPI_Mprobe(mt_rank, tag, MPI_COMM_WORLD, &m, &ps);
          } else {
            do MPI_Improbe(mt_rank, tag, MPI_COMM_WORLD, &flag, &m, &ps);
            while (!flag);
          }
          MPI_Imrecv(rbuf, n, MPI_INT, &m, &q[0]);
          flag = 0;
          for (int c = 0; MPI_Test(&q[0], &flag, &qs[0]), !flag && again(c); ++c) {}
          CHECK(flag, "%s: Imrecv not complete at the first MPI_Test", what);
          CHECK(q[0] == MPI_REQUEST_NULL, "%s: Test left the request", what);
          for (int c = 0; MPI_Test(&q[1], &flag, &qs[1]), !flag && again(c); ++c) {}
          CHECK(flag, "%s: the send is not complete at its first MPI_Test after the receive", what);
        } else {
          MPI_Irecv(rbuf, n, MPI_INT, mt_rank, tag, MPI_COMM_WORLD, &q[0]);
          self_send(sync, n, tag, &q[1]);
          switch (form) {
            case 0:
              for (int c = 0; MPI_Testall(2, q, &flag, qs), !flag && again(c); ++c) {}
              CHECK(flag, "%s: one MPI_Testall did not complete both", what);
              break;
            case 1:
              for (int c = 0;; ++c) {
                int got = 0, at[2];
                MPI_Status ts[2];
                MPI_Testsome(2, q, &got, at, ts);
                for (int i = 0; i < got && got != MPI_UNDEFINED; ++i) {
                  if (at[i] == 0) qs[0] = ts[i]; /* the receive's status */
                  ++count;
                }
                if (count == 2 || !again(c)) break;
              }
              CHECK(count == 2, "%s: one MPI_Testsome completed %d of 2", what, count);
              break;
            case 2:
              for (int i = 0; i < 2; ++i) {
                int which = -1;
                MPI_Status ts;
                for (int c = 0; MPI_Testany(2, q, &which, &flag, &ts), !flag && again(c); ++c) {}
                CHECK(flag && which >= 0, "%s: MPI_Testany call %d found nothing complete", what, i);
                if (which == 0) qs[0] = ts;
              }
              break;
            case 3:
              for (int c = 0; MPI_Test(&q[0], &flag, &qs[0]), !flag && again(c); ++c) {}
              CHECK(flag, "%s: MPI_Test of the receive not complete", what);
              for (int c = 0; MPI_Test(&q[1], &flag, &qs[1]), !flag && again(c); ++c) {}
              CHECK(flag, "%s: MPI_Test of the send not complete", what);
              break;
            case 4:
              for (int c = 0; MPI_Request_get_status(q[0], &flag, &qs[0]), !flag && again(c); ++c) {}
              CHECK(flag, "%s: MPI_Request_get_status of the receive not complete", what);
              for (int c = 0; MPI_Request_get_status(q[1], &flag, MPI_STATUS_IGNORE), !flag && again(c); ++c) {}
              CHECK(flag, "%s: MPI_Request_get_status of the send not complete", what);
              CHECK(q[0] != MPI_REQUEST_NULL && q[1] != MPI_REQUEST_NULL, "%s: get_status freed a request", what);
              MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
              break;
          }
          CHECK(q[0] == MPI_REQUEST_NULL && q[1] == MPI_REQUEST_NULL, "%s: requests left", what);
        }
        int got = -1;
        MPI_Get_count(&qs[0], MPI_INT, &got);
        CHECK(qs[0].MPI_SOURCE == mt_rank && qs[0].MPI_TAG == tag && got == n, "%s: status source %d tag %d count %d",
              what, qs[0].MPI_SOURCE, qs[0].MPI_TAG, got);
        check(rbuf, n, seed, what);
      }
}

/* Every other rank sends K eager messages (tags base..base+K-1) to rank 0,
 * then an empty "done" message (tag base+K); rank 0 receives the done
 * messages (blocking) before it tests. */
static void send_batch(int base) {
  if (mt_rank == 0) {
    for (int s = 1; s < mt_size; ++s)
      MPI_Recv(NULL, 0, MPI_INT, s, base + K, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    return;
  }
  for (int t = 0; t < K; ++t) {
    fill(sbuf, eager_sizes[t], base + mt_rank * 10 + t);
    MPI_Send(sbuf, eager_sizes[t], MPI_INT, 0, base + t, MPI_COMM_WORLD);
  }
  MPI_Send(NULL, 0, MPI_INT, 0, base + K, MPI_COMM_WORLD);
}

static void eager_from_others(void) {
  const int n = (mt_size - 1) * K;
  int(*in)[1800] = malloc(sizeof(int[1800]) * (size_t)n);
  MPI_Request* r = malloc(sizeof(MPI_Request) * (size_t)n);
  MPI_Status* st = malloc(sizeof(MPI_Status) * (size_t)n);
  int* idx = malloc(sizeof(int) * (size_t)n);
  CHECK(in && r && st && idx, "out of memory");
  char what[64];
  for (int form = 0; form < 5; ++form) {
    const int base = 1000 * (form + 1);
    if (mt_rank == 0)
      for (int k = 0; k < n; ++k) MPI_Irecv(in[k], 1800, MPI_INT, k / K + 1, base + k % K, MPI_COMM_WORLD, &r[k]);
    send_batch(base);
    if (mt_rank != 0) continue;
    int flag = 0, count = 0;
    switch (form) {
      case 0:
        MPI_Testall(n, r, &flag, st);
        CHECK(flag, "one MPI_Testall after the done messages: not complete");
        break;
      case 1:
        for (int k = 0; k < n; ++k) {
          int which = -1;
          MPI_Testany(n, r, &which, &flag, MPI_STATUS_IGNORE);
          CHECK(flag && which >= 0 && which < n && r[which] == MPI_REQUEST_NULL, "MPI_Testany call %d: flag %d index %d",
                k, flag, which);
        }
        break;
      case 2:
        MPI_Testsome(n, r, &count, idx, st);
        CHECK(count == n, "one MPI_Testsome after the done messages: %d of %d complete", count, n);
        break;
      case 3:
        for (int k = 0; k < n; ++k) {
          MPI_Test(&r[k], &flag, MPI_STATUS_IGNORE);
          CHECK(flag, "MPI_Test of request %d after the done messages: not complete", k);
        }
        break;
      case 4:
        for (int k = 0; k < n; ++k) {
          MPI_Request_get_status(r[k], &flag, &st[k]);
          CHECK(flag, "MPI_Request_get_status of request %d after the done messages: not complete", k);
          CHECK(st[k].MPI_SOURCE == k / K + 1 && st[k].MPI_TAG == base + k % K, "get_status %d: source %d tag %d", k,
                st[k].MPI_SOURCE, st[k].MPI_TAG);
        }
        MPI_Waitall(n, r, MPI_STATUSES_IGNORE);
        break;
    }
    for (int k = 0; k < n; ++k) {
      CHECK(r[k] == MPI_REQUEST_NULL, "request %d left", k);
      snprintf(what, sizeof what, "message %d from %d", base + k % K, k / K + 1);
      check(in[k], eager_sizes[k % K], base + (k / K + 1) * 10 + k % K, what);
    }
  }
  /* Matched probes of messages that are here: the first Test completes. */
  for (int form = 0; form < 2; ++form) {
    const int base = 10000 + 1000 * form;
    send_batch(base);
    if (mt_rank != 0) continue;
    for (int s = 1; s < mt_size; ++s)
      for (int t = 0; t < K; ++t) {
        MPI_Message m;
        MPI_Status ps, qs;
        int flag = 0, got = -1;
        if (form == 0) {
          MPI_Mprobe(s, base + t, MPI_COMM_WORLD, &m, &ps);
        } else {
          MPI_Improbe(s, base + t, MPI_COMM_WORLD, &flag, &m, &ps);
          CHECK(flag, "Improbe after the done message found nothing (source %d tag %d)", s, base + t);
        }
        MPI_Request q;
        MPI_Imrecv(in[0], 1800, MPI_INT, &m, &q);
        flag = 0;
        MPI_Test(&q, &flag, &qs);
        CHECK(flag, "Imrecv of a probed message (source %d, %d ints): not complete at the first MPI_Test", s,
              eager_sizes[t]);
        MPI_Get_count(&qs, MPI_INT, &got);
        CHECK(q == MPI_REQUEST_NULL && qs.MPI_SOURCE == s && qs.MPI_TAG == base + t && got == eager_sizes[t],
              "Imrecv status: source %d tag %d count %d", qs.MPI_SOURCE, qs.MPI_TAG, got);
        snprintf(what, sizeof what, "probed message %d from %d", base + t, s);
        check(in[0], eager_sizes[t], base + s * 10 + t, what);
      }
  }
  free(in);
  free(r);
  free(st);
  free(idx);
}

int main(int argc, char** argv) {
  mt_start("completion_progress", &argc, &argv);
  if (getenv("MPITEST_SELF_ASYNC")) self_calls = 2000;
  self_messages();
  if (mt_size > 1) eager_from_others();
  return mt_pass();
}
