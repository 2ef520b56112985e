/* Probe, Iprobe, Mprobe/Mrecv, Improbe/Imrecv. */
#include "mpitest.h"

int main(int argc, char** argv) {
  mt_start("probe", &argc, &argv);
  CHECK(mt_size >= 2, "needs 2+ processes");
  int flag = 0;
  MPI_Status st;
  MPI_Iprobe(MPI_ANY_SOURCE, 777, MPI_COMM_WORLD, &flag, &st);
  CHECK(!flag, "Iprobe found a message nobody sent");
  if (mt_rank != 0) {
    static double d[50000];
    for (int i = 0; i < 50000; ++i) d[i] = mt_rank + i * 0.5;
    MPI_Send(d, 10 * mt_rank, MPI_DOUBLE, 0, 1, MPI_COMM_WORLD);     /* Probe */
    MPI_Send(d, 50000, MPI_DOUBLE, 0, 2, MPI_COMM_WORLD);            /* Mprobe (rendezvous) */
    MPI_Send(d, 3, MPI_DOUBLE, 0, 3, MPI_COMM_WORLD);                /* Improbe */
    MPI_Send(d, 7, MPI_DOUBLE, 0, 4, MPI_COMM_WORLD);                /* Iprobe loop */
    MPI_Send(d, 2, MPI_DOUBLE, 0, 5, MPI_COMM_WORLD);                /* MPI_ERROR kept */
    MPI_Send(d, 2, MPI_DOUBLE, 0, 6, MPI_COMM_WORLD);                /* MPI_ERROR kept */
  } else {
    static double d[50000];
    for (int k = 1; k < mt_size; ++k) {
      int count = -1;
      MPI_Probe(MPI_ANY_SOURCE, 1, MPI_COMM_WORLD, &st);
      MPI_Get_count(&st, MPI_DOUBLE, &count);
      CHECK(st.MPI_TAG == 1 && count == 10 * st.MPI_SOURCE, "Probe: tag %d count %d from %d", st.MPI_TAG, count, st.MPI_SOURCE);
      MPI_Recv(d, count, MPI_DOUBLE, st.MPI_SOURCE, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      CHECK(d[count - 1] == st.MPI_SOURCE + (count - 1) * 0.5, "Probe'd message content");
    }
    for (int k = 1; k < mt_size; ++k) {
      MPI_Message msg;
      int count = -1;
      MPI_Mprobe(k, 2, MPI_COMM_WORLD, &msg, &st);
      CHECK(msg != MPI_MESSAGE_NULL, "Mprobe message");
      MPI_Get_count(&st, MPI_DOUBLE, &count);
      CHECK(count == 50000 && st.MPI_SOURCE == k, "Mprobe count %d source %d", count, st.MPI_SOURCE);
      /* The matched message is invisible to other probes now. */
      MPI_Iprobe(k, 2, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
      CHECK(!flag, "a matched message is still visible to Iprobe");
      MPI_Mrecv(d, count, MPI_DOUBLE, &msg, &st);
      CHECK(msg == MPI_MESSAGE_NULL, "Mrecv resets the handle");
      CHECK(d[49999] == k + 49999 * 0.5, "Mrecv content");
    }
    for (int k = 1; k < mt_size; ++k) {
      MPI_Message msg = MPI_MESSAGE_NULL;
      flag = 0;
      while (!flag) MPI_Improbe(MPI_ANY_SOURCE, 3, MPI_COMM_WORLD, &flag, &msg, &st);
      int src = st.MPI_SOURCE;
      MPI_Request r;
      MPI_Imrecv(d, 3, MPI_DOUBLE, &msg, &r);
      MPI_Wait(&r, &st);
      CHECK(st.MPI_SOURCE == src && d[2] == src + 1.0, "Imrecv from %d: %g", src, d[2]);
    }
    for (int k = 1; k < mt_size; ++k) {
      flag = 0;
      while (!flag) MPI_Iprobe(k, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
      int count;
      MPI_Get_count(&st, MPI_DOUBLE, &count);
      CHECK(st.MPI_TAG == 4 && count == 7, "Iprobe any tag: tag %d count %d", st.MPI_TAG, count);
      MPI_Recv(d, 7, MPI_DOUBLE, k, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    /* MPI-3.1 3.2.5: the calls that return a single status (Probe, Iprobe,
     * Mprobe, Mrecv, Recv, Wait, Test) never write its MPI_ERROR field. */
    for (int k = 1; k < mt_size; ++k) {
      const int mark = 4242;
      MPI_Message m5;
      MPI_Request r6;
      st.MPI_ERROR = mark;
      MPI_Probe(k, 5, MPI_COMM_WORLD, &st);
      CHECK(st.MPI_SOURCE == k && st.MPI_ERROR == mark, "Probe: source %d MPI_ERROR %d", st.MPI_SOURCE, st.MPI_ERROR);
      flag = 0;
      MPI_Iprobe(k, 5, MPI_COMM_WORLD, &flag, &st);
      CHECK(flag && st.MPI_ERROR == mark, "Iprobe: flag %d MPI_ERROR %d", flag, st.MPI_ERROR);
      MPI_Mprobe(k, 5, MPI_COMM_WORLD, &m5, &st);
      CHECK(st.MPI_ERROR == mark, "Mprobe: MPI_ERROR %d", st.MPI_ERROR);
      MPI_Mrecv(d, 2, MPI_DOUBLE, &m5, &st);
      CHECK(st.MPI_TAG == 5 && st.MPI_ERROR == mark, "Mrecv: tag %d MPI_ERROR %d", st.MPI_TAG, st.MPI_ERROR);
      MPI_Irecv(d, 2, MPI_DOUBLE, k, 6, MPI_COMM_WORLD, &r6);
      flag = 0;
      while (!flag) MPI_Test(&r6, &flag, &st);
      CHECK(st.MPI_TAG == 6 && st.MPI_ERROR == mark, "Test: tag %d MPI_ERROR %d", st.MPI_TAG, st.MPI_ERROR);
      MPI_Recv(d, 1, MPI_DOUBLE, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st);
      CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_ERROR == mark, "Recv PROC_NULL: MPI_ERROR %d", st.MPI_ERROR);
      MPI_Mprobe(MPI_PROC_NULL, 0, MPI_COMM_WORLD, &m5, &st);
      MPI_Imrecv(d, 1, MPI_DOUBLE, &m5, &r6);
      MPI_Wait(&r6, &st);
      CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_ERROR == mark, "Imrecv NO_PROC: MPI_ERROR %d", st.MPI_ERROR);
    }
    /* MPI_PROC_NULL probes find an empty message at once. */
    MPI_Message msg;
    MPI_Mprobe(MPI_PROC_NULL, 0, MPI_COMM_WORLD, &msg, &st);
    CHECK(msg == MPI_MESSAGE_NO_PROC && st.MPI_SOURCE == MPI_PROC_NULL, "Mprobe PROC_NULL");
    MPI_Mrecv(d, 1, MPI_DOUBLE, &msg, &st);
    CHECK(msg == MPI_MESSAGE_NULL, "Mrecv NO_PROC");
  }
  return mt_pass();
}
