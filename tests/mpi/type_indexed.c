/* MPI_Type_indexed and MPI_Type_create_indexed_block: blocks out of order
 * and empty blocks; holes stay untouched. Also the other send modes with a
 * derived type: Ssend, Bsend (packed into the attached buffer), Rsend, and
 * matched probes (Mprobe + Mrecv/Imrecv), Probe + Get_count,
 * Sendrecv_replace. Ring exchange: any process count. */
#include "mpitest.h"

#define N 64

int main(int argc, char** argv) {
  mt_start("type_indexed", &argc, &argv);
  int next = (mt_rank + 1) % mt_size, prev = (mt_rank + mt_size - 1) % mt_size;
  int src[N], dst[N];
  for (int i = 0; i < N; ++i) src[i] = mt_rank * 1000 + i;

  const int bl[] = {3, 1, 4, 0, 2};
  const int disp[] = {10, 0, 30, 5, 20}; /* not sorted: type-map order is array order */
  MPI_Datatype idx;
  MPI_Type_indexed(5, bl, disp, MPI_INT, &idx);
  MPI_Type_commit(&idx);
  int size = 0;
  MPI_Type_size(idx, &size);
  CHECK(size == 10 * (int)sizeof(int), "size %d", size);
  /* Packed order: 10,11,12, 0, 30..33, 20,21. */
  const int order[10] = {10, 11, 12, 0, 30, 31, 32, 33, 20, 21};

  /* indexed out, contiguous in */
  int flat[10];
  MPI_Status st;
  MPI_Sendrecv(src, 1, idx, next, 1, flat, 10, MPI_INT, prev, 1, MPI_COMM_WORLD, &st);
  for (int k = 0; k < 10; ++k) CHECK(flat[k] == prev * 1000 + order[k], "flat[%d] = %d", k, flat[k]);

  /* indexed both ways: holes keep their sentinel */
  for (int i = 0; i < N; ++i) dst[i] = -1;
  MPI_Sendrecv(src, 1, idx, next, 2, dst, 1, idx, prev, 2, MPI_COMM_WORLD, &st);
  for (int i = 0; i < N; ++i) {
    int in = 0;
    for (int k = 0; k < 10; ++k) in |= order[k] == i;
    CHECK(dst[i] == (in ? prev * 1000 + i : -1), "dst[%d] = %d", i, dst[i]);
  }

  /* indexed_block: blocks of 2 at 40, 4, 50 */
  const int bdisp[] = {40, 4, 50};
  MPI_Datatype blk;
  MPI_Type_create_indexed_block(3, 2, bdisp, MPI_INT, &blk);
  MPI_Type_commit(&blk);
  for (int i = 0; i < N; ++i) dst[i] = -1;
  MPI_Sendrecv(src, 1, blk, next, 3, dst, 1, blk, prev, 3, MPI_COMM_WORLD, &st);
  for (int i = 0; i < N; ++i) {
    int in = (i >= 40 && i < 42) || (i >= 4 && i < 6) || (i >= 50 && i < 52);
    CHECK(dst[i] == (in ? prev * 1000 + i : -1), "indexed_block dst[%d] = %d", i, dst[i]);
  }

  /* Sendrecv_replace with the indexed type: only the selected ints change. */
  int rep[N];
  for (int i = 0; i < N; ++i) rep[i] = mt_rank * 1000 + i;
  MPI_Sendrecv_replace(rep, 1, idx, next, 4, prev, 4, MPI_COMM_WORLD, &st);
  for (int i = 0; i < N; ++i) {
    int in = 0;
    for (int k = 0; k < 10; ++k) in |= order[k] == i;
    CHECK(rep[i] == (in ? prev : mt_rank) * 1000 + i, "replace rep[%d] = %d", i, rep[i]);
  }

  /* Send modes, each received with a probe first. */
  static char bsend_buf[4096];
  MPI_Buffer_attach(bsend_buf, sizeof bsend_buf);
  for (int mode = 0; mode < 4; ++mode) {
    MPI_Request rr;
    for (int i = 0; i < N; ++i) dst[i] = -1;
    if (mode == 0) {
      MPI_Irecv(dst, 1, idx, prev, 10 + mode, MPI_COMM_WORLD, &rr);
      MPI_Barrier(MPI_COMM_WORLD); /* ready mode: every receive is posted */
    }
    MPI_Request sr;
    if (mode == 0) MPI_Irsend(src, 1, idx, next, 10, MPI_COMM_WORLD, &sr);
    else if (mode == 1) MPI_Issend(src, 1, idx, next, 11, MPI_COMM_WORLD, &sr);
    else if (mode == 2) MPI_Ibsend(src, 1, idx, next, 12, MPI_COMM_WORLD, &sr);
    else MPI_Isend(src, 1, idx, next, 13, MPI_COMM_WORLD, &sr);
    if (mode == 0) {
      MPI_Wait(&rr, &st);
    } else if (mode == 1) {
      int c = -1;
      MPI_Probe(prev, 11, MPI_COMM_WORLD, &st);
      MPI_Get_count(&st, idx, &c);
      CHECK(c == 1, "Probe + Get_count with the indexed type: %d", c);
      MPI_Recv(dst, 1, idx, prev, 11, MPI_COMM_WORLD, &st);
    } else if (mode == 2) {
      MPI_Message m;
      MPI_Mprobe(prev, 12, MPI_COMM_WORLD, &m, &st);
      MPI_Mrecv(dst, 1, idx, &m, &st);
    } else {
      MPI_Message m;
      MPI_Mprobe(prev, 13, MPI_COMM_WORLD, &m, &st);
      MPI_Imrecv(dst, 1, idx, &m, &rr);
      MPI_Wait(&rr, &st);
    }
    MPI_Wait(&sr, MPI_STATUS_IGNORE);
    int c = -1;
    MPI_Get_count(&st, idx, &c);
    CHECK(c == 1 && st.MPI_SOURCE == prev, "mode %d: count %d source %d", mode, c, st.MPI_SOURCE);
    for (int i = 0; i < N; ++i) {
      int in = 0;
      for (int k = 0; k < 10; ++k) in |= order[k] == i;
      CHECK(dst[i] == (in ? prev * 1000 + i : -1), "mode %d: dst[%d] = %d", mode, i, dst[i]);
    }
  }
  /* Blocking Bsend too. */
  for (int i = 0; i < N; ++i) dst[i] = -1;
  MPI_Request rr;
  MPI_Irecv(dst, 1, blk, prev, 20, MPI_COMM_WORLD, &rr);
  MPI_Bsend(src, 1, blk, next, 20, MPI_COMM_WORLD);
  MPI_Wait(&rr, &st);
  CHECK(dst[40] == prev * 1000 + 40 && dst[51] == prev * 1000 + 51 && dst[42] == -1, "Bsend indexed_block");
  void* b;
  int bs;
  MPI_Buffer_detach(&b, &bs);
  MPI_Type_free(&idx);
  MPI_Type_free(&blk);
  return mt_pass();
}
