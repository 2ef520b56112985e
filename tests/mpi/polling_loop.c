/* The active-message polling pattern of graph codes (Graph500's reference
 * BFS): every rank keeps one persistent receive per peer, restarted after
 * each arrival, polls them with MPI_Testany between bits of local work,
 * sends one message to every other rank per round, and ends each round
 * with an MPI_Ibarrier completed by MPI_Test polling. Checks every payload
 * (sender, round) and that each round's barrier completes only after every
 * rank sent its round's messages.
 *
 *   polling_loop [rounds]   (default 300)
 */
#include "mpitest.h"

int main(int argc, char** argv) {
  mt_start("polling_loop", &argc, &argv);
  const int rounds = argc > 1 ? atoi(argv[1]) : 300;
  CHECK(rounds > 0, "rounds %d", rounds);
  const int n = mt_size;
  long long* in = calloc((size_t)n, sizeof *in);
  long long* out = calloc((size_t)n, sizeof *out);
  MPI_Request* recv = malloc((size_t)n * sizeof *recv);
  MPI_Request* send = malloc((size_t)n * sizeof *send);
  int* seen = calloc((size_t)n, sizeof *seen); /* messages received from each peer */
  for (int p = 0; p < n; ++p) {
    recv[p] = MPI_REQUEST_NULL;
    send[p] = MPI_REQUEST_NULL;
    if (p == mt_rank) continue;
    MPI_Recv_init(&in[p], 1, MPI_LONG_LONG, p, 11, MPI_COMM_WORLD, &recv[p]);
    MPI_Start(&recv[p]);
  }
  volatile double work = 0;
  long long tests = 0;
  for (int r = 0; r < rounds; ++r) {
    for (int p = 0; p < n; ++p) {
      if (p == mt_rank) continue;
      out[p] = (long long)mt_rank << 32 | r;
      MPI_Isend(&out[p], 1, MPI_LONG_LONG, p, 11, MPI_COMM_WORLD, &send[p]);
    }
    /* Poll until this round's message of every peer is in, doing a bit of
     * work between tests. */
    int got = 0;
    while (got < n - 1) {
      int idx = MPI_UNDEFINED, flag = 0;
      MPI_Status st;
      CHECK(MPI_Testany(n, recv, &idx, &flag, &st) == MPI_SUCCESS, "Testany");
      ++tests;
      for (int k = 0; k < 50; ++k) work += k * 0.5;
      if (!flag || idx == MPI_UNDEFINED) continue;
      CHECK(st.MPI_SOURCE == idx && st.MPI_TAG == 11, "status source %d tag %d for index %d", st.MPI_SOURCE,
            st.MPI_TAG, idx);
      const long long expect = (long long)idx << 32 | seen[idx];
      CHECK(in[idx] == expect, "round %d: from %d got %llx expected %llx", r, idx, in[idx], expect);
      ++seen[idx];
      ++got;
      /* At most one message per peer per round: the next one belongs to the
       * next round, after the barrier. Restart the receive now anyway (as
       * graph codes do): the peer's next message may arrive at any time. */
      CHECK(seen[idx] == r + 1, "round %d: %d messages from %d", r, seen[idx], idx);
      MPI_Start(&recv[idx]);
    }
    MPI_Waitall(n, send, MPI_STATUSES_IGNORE);
    MPI_Request bar;
    MPI_Ibarrier(MPI_COMM_WORLD, &bar);
    int done = 0;
    while (!done) {
      CHECK(MPI_Test(&bar, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS, "Test(Ibarrier)");
      ++tests;
      for (int k = 0; k < 50; ++k) work += k * 0.5;
    }
  }
  for (int p = 0; p < n; ++p) {
    if (p == mt_rank) continue;
    CHECK(seen[p] == rounds, "from %d: %d of %d messages", p, seen[p], rounds);
    MPI_Cancel(&recv[p]);
    MPI_Wait(&recv[p], MPI_STATUS_IGNORE);
    MPI_Request_free(&recv[p]);
  }
  if (mt_rank == 0) printf("polling_loop: %d rounds, %lld test calls on rank 0\n", rounds, tests);
  free(in);
  free(out);
  free(recv);
  free(send);
  free(seen);
  return mt_pass();
}
