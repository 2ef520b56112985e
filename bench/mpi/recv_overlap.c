/* Overlap of one MPI_Irecv with computation on the receiver, the sender
 * only waiting in MPI_Send (the mirror of send_overlap: here nothing moves
 * unless something progresses the receiver while it computes):
 *
 *   t_comm: rank 1 Irecv, "ready" to rank 0, Wait; rank 0 Recv(ready), Send
 *   t_comp: rank 1 computes ~t_comm without MPI calls
 *   t_ovrl: rank 1 Irecv, "ready", computes ~t_comm, Wait
 *   overlap = max(0, min(1, (t_comm + t_comp - t_ovrl) / min(t_comm, t_comp)))
 * (the IMB-NBC formula), on rank 1's medians. The 1-byte "ready" (eager)
 * makes the sender start once the receive is posted, so each iteration
 * times the whole transfer.
 *
 *   recv_overlap [--sizes 64K,...] [--iters N]
 *
 * Output per size:
 *   {"bench": "recv_overlap", "size": S, "iters": N, "t_comm_us": .., "t_comp_us": ..,
 *    "t_ovrl_us": .., "overlap_pct": 100 * overlap, "verified": true}
 */
#include "common.h"

static uint64_t seed_of(int s) { return 0x2EC7u + (uint64_t)s; }

int main(int argc, char **argv) {
  bench_opts o;
  int rank, nprocs;
  bench_init(&o, &argc, &argv, "recv_overlap", 2, "64K,256K,1M,4M,16M", 100, 1, &rank, &nprocs);
  bench_print_library("recv_overlap");

  const size_t maxsize = bench_max_size(&o, 1);
  char *buf = bench_alloc(maxsize);
  char ready = 1;
  MPI_Request req;

  for (int s = 0; s < o.nsizes; s++) {
    const size_t size = o.sizes[s];
    const int count = (int)size;
    const int iters = bench_iters_for(&o, size);
    const int warmup = bench_warmup_for(&o, size);
    if (rank == 0) bench_fill(buf, size, seed_of(s));
    else memset(buf, 0, size);
    for (int i = 0; i < 1 + warmup && rank <= 1; i++) {
      if (rank == 0) {
        MPI_Recv(&ready, 1, MPI_BYTE, 1, 52, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(buf, count, MPI_BYTE, 1, 51, MPI_COMM_WORLD);
      } else {
        MPI_Irecv(buf, count, MPI_BYTE, 0, 51, MPI_COMM_WORLD, &req);
        MPI_Send(&ready, 1, MPI_BYTE, 0, 52, MPI_COMM_WORLD);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        if (i == 0) bench_check(buf, size, seed_of(s), "recv_overlap (verification)");
      }
    }
    double *tc = bench_times(iters), *tp = bench_times(iters), *to = bench_times(iters);
    double t_comm = 0, t_comp = 0, t_ovrl = 0;
    /* phase 0: communication alone; 1: computation alone; 2: both */
    for (int phase = 0; phase < 3; phase++) {
      if (phase > 0) MPI_Bcast(&t_comm, 1, MPI_DOUBLE, 1, MPI_COMM_WORLD);
      const double target = t_comm;
      MPI_Barrier(MPI_COMM_WORLD);
      for (int i = 0; i < iters && rank <= 1; i++) {
        if (rank == 0) {
          if (phase == 1) continue;
          MPI_Recv(&ready, 1, MPI_BYTE, 1, 52, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          MPI_Send(buf, count, MPI_BYTE, 1, 51, MPI_COMM_WORLD);
          continue;
        }
        double t0 = MPI_Wtime();
        if (phase == 1) {
          bench_compute_us(target * 1e6);
          tp[i] = MPI_Wtime() - t0;
          continue;
        }
        MPI_Irecv(buf, count, MPI_BYTE, 0, 51, MPI_COMM_WORLD, &req);
        MPI_Send(&ready, 1, MPI_BYTE, 0, 52, MPI_COMM_WORLD);
        if (phase == 2) bench_compute_us(target * 1e6);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        (phase == 0 ? tc : to)[i] = MPI_Wtime() - t0;
      }
      if (rank == 1) {
        if (phase == 0) t_comm = bench_median(tc, iters);
        else if (phase == 1) t_comp = bench_median(tp, iters);
        else t_ovrl = bench_median(to, iters);
      }
    }
    if (rank == 1) bench_check(buf, size, seed_of(s), "recv_overlap (after timing)");
    free(tc);
    free(tp);
    free(to);
    /* Rank 0 prints (as it prints the end marker): rank 1's medians go to it. */
    double t[3] = {t_comm, t_comp, t_ovrl};
    if (rank == 1) MPI_Send(t, 3, MPI_DOUBLE, 0, 53, MPI_COMM_WORLD);
    if (rank == 0) {
      MPI_Recv(t, 3, MPI_DOUBLE, 1, 53, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      bench_print_overlap("recv_overlap", size, iters, t[0], t[1], t[2]);
    }
  }
  free(buf);
  bench_print_done("recv_overlap");
  MPI_Finalize();
  return 0;
}
