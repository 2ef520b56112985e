/* Overlap of point-to-point communication (MPI_Irecv + MPI_Isend) with
 * computation, measured the way IMB-NBC measures collectives:
 *
 *   t_comm: Irecv + Isend + Waitall (exchange between ranks 0 and 1)
 *   t_comp: a computation without MPI calls, bounded by the clock to ~t_comm
 *   t_ovrl: Irecv + Isend, the same computation, Waitall
 *   overlap = max(0, min(1, (t_comm + t_comp - t_ovrl) / min(t_comm, t_comp)))
 *
 * Each time is the median over the iterations (IMB takes the mean; the
 * median keeps one preempted iteration on a shared machine from deciding the
 * result), then the maximum over the ranks. Without asynchronous progress a
 * large (rendezvous) message only moves inside Waitall and the overlap is low.
 *
 *   overlap [--sizes ...] [--iters N]
 *
 * Output per size:
 *   {"bench": "overlap", "size": S, "iters": N, "t_comm_us": .., "t_comp_us": ..,
 *    "t_ovrl_us": .., "overlap_pct": 100 * overlap, "verified": true}
 */
#include "common.h"

static uint64_t seed_of(int from, int s) { return 0x0E1Au + ((uint64_t)from << 24) + (uint64_t)s; }

int main(int argc, char **argv) {
  bench_opts o;
  int rank, nprocs;
  bench_init(&o, &argc, &argv, "overlap", 2, "1K,16K,128K,1M,4M", 200, 1, &rank, &nprocs);
  bench_print_library("overlap");

  const size_t maxsize = bench_max_size(&o, 1);
  char *sbuf = bench_alloc(maxsize);
  char *rbuf = bench_alloc(maxsize);
  const int peer = rank == 0 ? 1 : 0;
  const int active = rank <= 1;
  MPI_Request reqs[2];

  for (int s = 0; s < o.nsizes; s++) {
    const size_t size = o.sizes[s];
    const int count = (int)size;
    const int iters = bench_iters_for(&o, size);
    const int warmup = bench_warmup_for(&o, size);
    if (active) {
      bench_fill(sbuf, size, seed_of(rank, s));
      memset(rbuf, 0, size);
    }
    /* Verification exchange + warm-up. */
    for (int i = 0; i < 1 + warmup && active; i++) {
      MPI_Irecv(rbuf, count, MPI_BYTE, peer, 31, MPI_COMM_WORLD, &reqs[0]);
      MPI_Isend(sbuf, count, MPI_BYTE, peer, 31, MPI_COMM_WORLD, &reqs[1]);
      MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
      if (i == 0) bench_check(rbuf, size, seed_of(peer, s), "overlap (verification)");
    }

    double *tc = bench_times(iters), *tp = bench_times(iters), *to = bench_times(iters);
    double t_comm = 0.0, t_comp = 0.0, t_ovrl = 0.0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < iters && active; i++) {
      double t0 = MPI_Wtime();
      MPI_Irecv(rbuf, count, MPI_BYTE, peer, 31, MPI_COMM_WORLD, &reqs[0]);
      MPI_Isend(sbuf, count, MPI_BYTE, peer, 31, MPI_COMM_WORLD, &reqs[1]);
      MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
      tc[i] = MPI_Wtime() - t0;
    }
    if (active) t_comm = bench_median(tc, iters);
    /* Every rank computes for the slowest rank's t_comm. */
    double t_target = 0.0;
    MPI_Allreduce(&t_comm, &t_target, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    for (int i = 0; i < iters && active; i++) {
      double t0 = MPI_Wtime();
      bench_compute_us(t_target * 1e6);
      tp[i] = MPI_Wtime() - t0;
    }
    if (active) t_comp = bench_median(tp, iters);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < iters && active; i++) {
      double t0 = MPI_Wtime();
      MPI_Irecv(rbuf, count, MPI_BYTE, peer, 31, MPI_COMM_WORLD, &reqs[0]);
      MPI_Isend(sbuf, count, MPI_BYTE, peer, 31, MPI_COMM_WORLD, &reqs[1]);
      bench_compute_us(t_target * 1e6);
      MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
      to[i] = MPI_Wtime() - t0;
    }
    if (active) t_ovrl = bench_median(to, iters);
    free(tc);
    free(tp);
    free(to);
    if (active) bench_check(rbuf, size, seed_of(peer, s), "overlap (after timing)");

    double loc[3] = {t_comm, t_comp, t_ovrl}, mx[3];
    MPI_Reduce(loc, mx, 3, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) bench_print_overlap("overlap", size, iters, mx[0], mx[1], mx[2]);
  }
  free(sbuf);
  free(rbuf);
  bench_print_done("overlap");
  MPI_Finalize();
  return 0;
}
