/* Waitall, Waitany, Waitsome, Testall, Testany, Testsome, Request_get_status. */
#include "mpitest.h"

#define K 8

int main(int argc, char** argv) {
  mt_start("completion", &argc, &argv);
  int peer = mt_rank ^ 1;
  if (peer >= mt_size) { /* odd one out: nothing to exchange */
    return mt_pass();
  }
  int in[K], out[K];
  MPI_Request r[K], s[K];
  MPI_Status st[K];
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i < K; ++i) {
      out[i] = mt_rank * 1000 + round * 100 + i;
      in[i] = -1;
      MPI_Irecv(&in[i], 1, MPI_INT, peer, i, MPI_COMM_WORLD, &r[i]);
    }
    for (int i = K - 1; i >= 0; --i) MPI_Isend(&out[i], 1, MPI_INT, peer, i, MPI_COMM_WORLD, &s[i]);
    int done = 0, idx, flag, n, indices[K];
    switch (round) {
      case 0:
        MPI_Waitall(K, r, st);
        for (int i = 0; i < K; ++i) CHECK(st[i].MPI_TAG == i && r[i] == MPI_REQUEST_NULL, "Waitall status %d", i);
        break;
      case 1:
        while (done < K) {
          MPI_Waitany(K, r, &idx, &st[0]);
          CHECK(idx >= 0 && idx < K && st[0].MPI_TAG == idx && r[idx] == MPI_REQUEST_NULL, "Waitany idx %d", idx);
          done++;
        }
        MPI_Waitany(K, r, &idx, &st[0]);
        CHECK(idx == MPI_UNDEFINED, "Waitany on null requests: %d", idx);
        break;
      case 2:
        while (done < K) {
          MPI_Waitsome(K, r, &n, indices, st);
          CHECK(n >= 1 && n <= K, "Waitsome outcount %d", n);
          for (int j = 0; j < n; ++j) CHECK(st[j].MPI_TAG == indices[j], "Waitsome status");
          done += n;
        }
        MPI_Waitsome(K, r, &n, indices, st);
        CHECK(n == MPI_UNDEFINED, "Waitsome on null requests: %d", n);
        break;
      case 3:
        flag = 0;
        MPI_Request_get_status(r[0], &flag, &st[0]);
        while (!flag) MPI_Request_get_status(r[0], &flag, &st[0]);
        CHECK(r[0] != MPI_REQUEST_NULL, "Request_get_status must not free");
        flag = 0;
        while (!flag) MPI_Testany(K, r, &idx, &flag, &st[0]);
        CHECK(idx != MPI_UNDEFINED, "Testany");
        done = 1;
        while (done < K) {
          MPI_Testsome(K, r, &n, indices, st);
          done += n;
        }
        flag = 0;
        MPI_Testall(K, r, &flag, MPI_STATUSES_IGNORE);
        CHECK(flag, "Testall on completed requests");
        break;
    }
    for (int i = 0; i < K; ++i) CHECK(in[i] == peer * 1000 + round * 100 + i, "round %d: in[%d] = %d", round, i, in[i]);
    flag = 0;
    while (!flag) MPI_Testall(K, s, &flag, MPI_STATUSES_IGNORE);
    for (int i = 0; i < K; ++i) CHECK(s[i] == MPI_REQUEST_NULL, "Testall freed send %d", i);
  }
  MPI_Request nulls[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  MPI_Waitall(2, nulls, MPI_STATUSES_IGNORE);
  return mt_pass();
}
