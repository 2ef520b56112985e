/* Every send mode, blocking and non-blocking, small and large (rendezvous)
 * messages, around a ring. */
#include "mpitest.h"

#define BIG (300 * 1024)

int main(int argc, char** argv) {
  mt_start("send_modes", &argc, &argv);
  int next = (mt_rank + 1) % mt_size, prev = (mt_rank + mt_size - 1) % mt_size;
  static unsigned char out[BIG], in[BIG];
  int bufsize = 2 * (BIG + MPI_BSEND_OVERHEAD);
  void* bbuf = malloc(bufsize);
  MPI_Buffer_attach(bbuf, bufsize);
  const long sizes[] = {0, 1, 1000, BIG};
  for (int mode = 0; mode < 8; ++mode) {
    for (int s = 0; s < 4; ++s) {
      long n = sizes[s];
      int seed = mode * 10 + s + mt_rank;
      mt_fill(out, n, seed);
      memset(in, 0, n);
      MPI_Request rr, sr;
      MPI_Status st;
      /* The receive is posted first (ready mode requires it); a zero-byte
         exchange with the sender then says it is. */
      MPI_Irecv(in, (int)n, MPI_BYTE, prev, mode, MPI_COMM_WORLD, &rr);
      MPI_Sendrecv(NULL, 0, MPI_BYTE, prev, 99, NULL, 0, MPI_BYTE, next, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      switch (mode) {
        case 0: MPI_Send(out, (int)n, MPI_BYTE, next, mode, MPI_COMM_WORLD); break;
        case 1: MPI_Ssend(out, (int)n, MPI_BYTE, next, mode, MPI_COMM_WORLD); break;
        case 2: MPI_Rsend(out, (int)n, MPI_BYTE, next, mode, MPI_COMM_WORLD); break;
        case 3: MPI_Bsend(out, (int)n, MPI_BYTE, next, mode, MPI_COMM_WORLD); break;
        case 4: MPI_Isend(out, (int)n, MPI_BYTE, next, mode, MPI_COMM_WORLD, &sr); MPI_Wait(&sr, MPI_STATUS_IGNORE); break;
        case 5: MPI_Issend(out, (int)n, MPI_BYTE, next, mode, MPI_COMM_WORLD, &sr); MPI_Wait(&sr, MPI_STATUS_IGNORE); break;
        case 6: MPI_Irsend(out, (int)n, MPI_BYTE, next, mode, MPI_COMM_WORLD, &sr); MPI_Wait(&sr, MPI_STATUS_IGNORE); break;
        case 7:
          MPI_Ibsend(out, (int)n, MPI_BYTE, next, mode, MPI_COMM_WORLD, &sr);
          CHECK(sr != MPI_REQUEST_NULL, "Ibsend request");
          MPI_Wait(&sr, MPI_STATUS_IGNORE);
          CHECK(sr == MPI_REQUEST_NULL, "request freed by Wait");
          memset(out, 0xee, n); /* the buffered copy must be what travels */
          break;
      }
      MPI_Wait(&rr, &st);
      int count = -1;
      MPI_Get_count(&st, MPI_BYTE, &count);
      CHECK(count == n, "mode %d size %ld: count %d", mode, n, count);
      CHECK(st.MPI_SOURCE == prev && st.MPI_TAG == mode, "mode %d: source %d tag %d", mode, st.MPI_SOURCE, st.MPI_TAG);
      long bad = mt_check(in, n, mode * 10 + s + prev);
      CHECK(bad < 0, "mode %d size %ld: byte %ld differs", mode, n, bad);
    }
  }
  /* Sends to MPI_PROC_NULL succeed at once in every mode. */
  MPI_Send(out, 10, MPI_BYTE, MPI_PROC_NULL, 0, MPI_COMM_WORLD);
  MPI_Ssend(out, 10, MPI_BYTE, MPI_PROC_NULL, 0, MPI_COMM_WORLD);
  MPI_Bsend(out, 10, MPI_BYTE, MPI_PROC_NULL, 0, MPI_COMM_WORLD);
  void* det = NULL;
  int detsize = 0;
  MPI_Buffer_detach(&det, &detsize);
  CHECK(det == bbuf && detsize == bufsize, "Buffer_detach returned %p/%d", det, detsize);
  free(bbuf);
  return mt_pass();
}
