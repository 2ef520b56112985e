/* A cancelled send has ONE outcome, seen the same way by both sides:
 * either it was withdrawn (Test_cancelled true on the sender, and no
 * receive ever gets it) or it was not (the send completes normally and the
 * matching receive gets the data). No hang either way.
 *
 * 1. To this process itself, everything is local: after Cancel, ONE
 *    Request_get_status already knows the outcome (synchronous and
 *    rendezvous sends: cancelled; eager: delivered), and Wait agrees.
 * 2. Rank 0 to rank 1, many rounds with distinct tags: rank 1 posts its
 *    receive before the send (never cancelled), never (always cancelled), or
 *    at about the same time as rank 0 cancels (either outcome). Rank 0
 *    tells rank 1 the outcome it saw; rank 1 checks it against its receive:
 *    delivered with the right value, or cancellable and absent. */
#include "mpitest.h"

#define BIG 100000
static int big[BIG], got[BIG];

static void self_cancel(void) {
  const int sizes[2] = {1, BIG};
  for (int k = 0; k < 2; ++k)
    for (int sync = 0; sync < 2; ++sync) {
      const int n = sizes[k], tag = 50 + 2 * k + sync;
      const int eager = !sync && k == 0;
      for (int i = 0; i < n; ++i) big[i] = tag * 1000 + i;
      MPI_Request r;
      MPI_Status st;
      int flag = 0, c1 = -1, c2 = -1, present = -1;
      if (sync) MPI_Issend(big, n, MPI_INT, mt_rank, tag, MPI_COMM_WORLD, &r);
      else MPI_Isend(big, n, MPI_INT, mt_rank, tag, MPI_COMM_WORLD, &r);
      MPI_Cancel(&r);
      MPI_Request_get_status(r, &flag, &st);
      CHECK(flag, "self %s of %d ints: one Request_get_status after Cancel does not know the outcome",
            sync ? "Issend" : "Isend", n);
      MPI_Test_cancelled(&st, &c1);
      CHECK(c1 == !eager, "self %s of %d ints: cancelled %d", sync ? "Issend" : "Isend", n, c1);
      MPI_Wait(&r, &st);
      MPI_Test_cancelled(&st, &c2);
      CHECK(c1 == c2, "self %s of %d ints: get_status said cancelled %d, Wait %d", sync ? "Issend" : "Isend", n, c1,
            c2);
      MPI_Iprobe(mt_rank, tag, MPI_COMM_WORLD, &present, MPI_STATUS_IGNORE);
      CHECK(present == !c2, "self %s of %d ints: cancelled %d but the message is %s", sync ? "Issend" : "Isend", n,
            c2, present ? "still there" : "gone");
      if (present) {
        MPI_Recv(got, n, MPI_INT, mt_rank, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (int i = 0; i < n; ++i) CHECK(got[i] == tag * 1000 + i, "self message element %d is %d", i, got[i]);
      }
    }
}

/* when: 0 receive posted before the send, 1 never posted (unless rank 0
 * says it was not cancelled), 2 posted while rank 0 cancels. */
static void remote_cancel(int rounds) {
  int counts[2] = {0, 0};
  for (int it = 0; it < rounds; ++it) {
    const int when = it % 3, tag = 1000 + it, n = (it / 3) % 2 ? BIG : 1;
    int outcome[2] = {-1, -1}; /* cancelled, value check */
    if (mt_rank == 0) {
      for (int i = 0; i < n; ++i) big[i] = it + i;
      MPI_Request r;
      MPI_Status st;
      int c = -1, flag = 0;
      if (when == 0) MPI_Recv(NULL, 0, MPI_INT, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* rank 1 posted */
      MPI_Issend(big, n, MPI_INT, 1, tag, MPI_COMM_WORLD, &r);
      if (when == 2) MPI_Send(NULL, 0, MPI_INT, 1, 2, MPI_COMM_WORLD); /* rank 1: post now */
      MPI_Cancel(&r);
      if (it % 2) {
        while (!flag) MPI_Request_get_status(r, &flag, &st);
        MPI_Test_cancelled(&st, &c);
      }
      int c2 = -1;
      MPI_Wait(&r, &st);
      MPI_Test_cancelled(&st, &c2);
      CHECK(c == -1 || c == c2, "round %d: Request_get_status said cancelled %d, Wait %d", it, c, c2);
      if (when == 0) CHECK(!c2, "round %d: a send whose receive was posted first was cancelled", it);
      if (when == 1) CHECK(c2, "round %d: a synchronous send nobody receives was not cancelled", it);
      counts[c2]++;
      outcome[0] = c2;
      MPI_Send(outcome, 2, MPI_INT, 1, 3, MPI_COMM_WORLD);
    } else if (mt_rank == 1) {
      MPI_Request q = MPI_REQUEST_NULL;
      MPI_Status qs;
      got[0] = -7;
      if (when == 0) {
        MPI_Irecv(got, n, MPI_INT, 0, tag, MPI_COMM_WORLD, &q);
        MPI_Send(NULL, 0, MPI_INT, 0, 1, MPI_COMM_WORLD);
      }
      if (when == 2) {
        MPI_Recv(NULL, 0, MPI_INT, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Irecv(got, n, MPI_INT, 0, tag, MPI_COMM_WORLD, &q);
      }
      MPI_Recv(outcome, 2, MPI_INT, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (!outcome[0]) {
        if (q == MPI_REQUEST_NULL) MPI_Irecv(got, n, MPI_INT, 0, tag, MPI_COMM_WORLD, &q);
        MPI_Wait(&q, &qs); /* must come: the send completed normally */
        int cancelled = -1;
        MPI_Test_cancelled(&qs, &cancelled);
        CHECK(!cancelled, "round %d: receive of a delivered send cancelled", it);
        for (int i = 0; i < n; ++i) CHECK(got[i] == it + i, "round %d: element %d is %d", it, i, got[i]);
      } else {
        int present = -1;
        MPI_Iprobe(0, tag, MPI_COMM_WORLD, &present, MPI_STATUS_IGNORE);
        CHECK(!present, "round %d: the sender saw its send cancelled but the message is here", it);
        if (q != MPI_REQUEST_NULL) {
          int cancelled = -1;
          MPI_Cancel(&q);
          MPI_Wait(&q, &qs);
          MPI_Test_cancelled(&qs, &cancelled);
          CHECK(cancelled && got[0] == -7, "round %d: the sender saw its send cancelled, the receive got it", it);
        }
      }
    }
  }
  if (mt_rank == 0) CHECK(counts[0] > 0 && counts[1] > 0, "outcomes: %d delivered, %d cancelled", counts[0], counts[1]);
}

int main(int argc, char** argv) {
  mt_start("cancel_send", &argc, &argv);
  self_cancel();
  if (mt_size >= 2) remote_cancel(60);
  return mt_pass();
}
