/* Overlap of one MPI_Isend with computation on the sender, the receiver
 * only waiting in MPI_Recv (the case a receiver-pulled rendezvous serves):
 *
 *   t_comm: rank 0 Isend + Wait; rank 1 Recv                (per iteration)
 *   t_comp: rank 0 computes ~t_comm without MPI calls
 *   t_ovrl: rank 0 Isend, computes ~t_comm, Wait; rank 1 Recv
 *   overlap = max(0, min(1, (t_comm + t_comp - t_ovrl) / min(t_comm, t_comp)))
 * (the IMB-NBC formula), on rank 0's medians. Each iteration ends with a
 * 1-byte acknowledgement from rank 1, so an iteration times the whole
 * transfer, not just the local completion of the send.
 *
 *   send_overlap [--sizes 64K,...] [--iters N]
 *
 * Output per size:
 *   {"bench": "send_overlap", "size": S, "iters": N, "t_comm_us": .., "t_comp_us": ..,
 *    "t_ovrl_us": .., "overlap_pct": 100 * overlap, "verified": true}
 */
#include "common.h"

static uint64_t seed_of(int s) { return 0x5E4Du + (uint64_t)s; }

int main(int argc, char **argv) {
  bench_opts o;
  int rank, nprocs;
  bench_init(&o, &argc, &argv, "send_overlap", 2, "64K,256K,1M,4M,16M", 100, 1, &rank, &nprocs);
  bench_print_library("send_overlap");

  const size_t maxsize = bench_max_size(&o, 1);
  char *buf = bench_alloc(maxsize);
  char ack = 0;
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
        MPI_Send(buf, count, MPI_BYTE, 1, 41, MPI_COMM_WORLD);
        MPI_Recv(&ack, 1, MPI_BYTE, 1, 42, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else {
        MPI_Recv(buf, count, MPI_BYTE, 0, 41, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (i == 0) bench_check(buf, size, seed_of(s), "send_overlap (verification)");
        MPI_Send(&ack, 1, MPI_BYTE, 0, 42, MPI_COMM_WORLD);
      }
    }
    double *tc = bench_times(iters), *tp = bench_times(iters), *to = bench_times(iters);
    double t_comm = 0, t_comp = 0, t_ovrl = 0;
    /* phase 0: communication alone; 1: computation alone; 2: both */
    for (int phase = 0; phase < 3; phase++) {
      double target = 0;
      if (phase > 0) MPI_Bcast(&t_comm, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
      target = t_comm;
      MPI_Barrier(MPI_COMM_WORLD);
      for (int i = 0; i < iters && rank <= 1; i++) {
        if (rank == 1) {
          if (phase == 1) continue;
          MPI_Recv(buf, count, MPI_BYTE, 0, 41, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          MPI_Send(&ack, 1, MPI_BYTE, 0, 42, MPI_COMM_WORLD);
          continue;
        }
        double t0 = MPI_Wtime();
        if (phase == 1) {
          bench_compute_us(target * 1e6);
          tp[i] = MPI_Wtime() - t0;
          continue;
        }
        MPI_Isend(buf, count, MPI_BYTE, 1, 41, MPI_COMM_WORLD, &req);
        if (phase == 2) bench_compute_us(target * 1e6);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        MPI_Recv(&ack, 1, MPI_BYTE, 1, 42, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        (phase == 0 ? tc : to)[i] = MPI_Wtime() - t0;
      }
      if (rank == 0) {
        if (phase == 0) t_comm = bench_median(tc, iters);
        else if (phase == 1) t_comp = bench_median(tp, iters);
        else t_ovrl = bench_median(to, iters);
      }
    }
    if (rank == 1) bench_check(buf, size, seed_of(s), "send_overlap (after timing)");
    free(tc);
    free(tp);
    free(to);
    if (rank == 0) bench_print_overlap("send_overlap", size, iters, t_comm, t_comp, t_ovrl);
  }
  free(buf);
  bench_print_done("send_overlap");
  MPI_Finalize();
  return 0;
}
