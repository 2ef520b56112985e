/* MPI_Finalize flushes sends the program no longer holds: rank 0 starts
 * sends (eager and rendezvous), frees their requests (MPI_Request_free:
 * the sends still complete) and finalizes at once, while rank 1 posts its
 * receives only later. Every byte must arrive whatever NMAD_FINALIZE_TIMEOUT_MS
 * allows (3000000000 ms once wrapped to a negative int and dropped them). */
#include <unistd.h>

#include "mpitest.h"

enum { kMessages = 4 };
static const long kSizes[kMessages] = {8, 4096, 65536, 1 << 20};

int main(int argc, char** argv) {
  mt_start("finalize_flush", &argc, &argv);
  CHECK(mt_size == 2, "needs 2 ranks, got %d", mt_size);
  unsigned char* buf[kMessages];
  for (int i = 0; i < kMessages; ++i) {
    buf[i] = malloc((size_t)kSizes[i]);
    CHECK(buf[i] != NULL, "malloc");
  }
  if (mt_rank == 0) {
    for (int i = 0; i < kMessages; ++i) {
      mt_fill(buf[i], kSizes[i], i + 1);
      MPI_Request r;
      CHECK(MPI_Isend(buf[i], (int)kSizes[i], MPI_BYTE, 1, i, MPI_COMM_WORLD, &r) == MPI_SUCCESS, "isend %d", i);
      CHECK(MPI_Request_free(&r) == MPI_SUCCESS, "request_free %d", i);
    }
    /* The buffers stay allocated: the sends read them until finalize. */
    MPI_Finalize();
    for (int i = 0; i < kMessages; ++i) free(buf[i]);
    printf("PASS finalize_flush rank 0\n");
    return 0;
  }
  usleep(300 * 1000); /* rank 0 is in MPI_Finalize by now */
  for (int i = 0; i < kMessages; ++i) {
    MPI_Status st;
    CHECK(MPI_Recv(buf[i], (int)kSizes[i], MPI_BYTE, 0, i, MPI_COMM_WORLD, &st) == MPI_SUCCESS, "recv %d", i);
    int n = -1;
    MPI_Get_count(&st, MPI_BYTE, &n);
    CHECK(n == kSizes[i], "message %d: %d bytes", i, n);
    long bad = mt_check(buf[i], kSizes[i], i + 1);
    CHECK(bad < 0, "message %d: byte %ld differs", i, bad);
  }
  for (int i = 0; i < kMessages; ++i) free(buf[i]);
  return mt_pass();
}
