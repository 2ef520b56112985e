/* MPI-IO: write and read of a 2-D block-distributed array of doubles,
 * independent against collective access.
 *
 *   io_block2d [--sizes 64M,256M,1G] [--iters 3] [--dir /tmp] [--modes collective,independent]
 *
 * The global array is N x N doubles (N chosen so that N*N*8 is the size
 * given, rounded down to a multiple of the process grid); the processes
 * form the grid MPI_Dims_create gives and each owns one block. Every
 * process sets a subarray file view on one shared file and then
 *   write: MPI_File_write_all (collective) or MPI_File_write (independent)
 *          of its block, followed by MPI_File_sync (inside the timing: the
 *          data has reached the file system, not only the library);
 *   read:  MPI_File_read_all or MPI_File_read of its block.
 * A timing is the slowest process's time from a barrier to the end of the
 * operation (MPI_Allreduce MAX of the durations). Each size and mode runs
 * --iters times (no warm-up iteration is dropped: the first write of a size
 * extends the file, which belongs to the measurement); the median, minimum
 * and maximum are printed. The page cache cannot be dropped here (no
 * privilege to write /proc/sys/vm/drop_caches), so reads are served from
 * memory once the file was written: they measure the MPI-IO path, not the
 * disk.
 * Every read is checked element by element against the value the writer
 * stored (the element's global index); the file is removed at the end.
 * Output (rank 0):
 *   {"bench": "io_block2d", "library": ..., "nprocs": P}
 *   {"bench": "io_block2d", "size": S, "n": N, "mode": "collective", "op": "write", "iters": k,
 *    "s": median, "s_min": .., "s_max": .., "gbs": S / median / 1e9, "verified": true}
 *   {"bench": "io_block2d", "done": true}
 */
#include <math.h>

#include "common.h"

static double value_at(long i, long j, long n) { return (double)(i * n + j); }

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  /* Options of this benchmark, taken out before the common parser. */
  const char *dir = "/tmp";
  const char *modes = "collective,independent";
  int iters = 3;
  char **rest = malloc(sizeof(char *) * (size_t)(argc + 1));
  int nrest = 0;
  for (int i = 0; i < argc; i++) {
    if (!strcmp(argv[i], "--dir") && i + 1 < argc) dir = argv[++i];
    else if (!strcmp(argv[i], "--modes") && i + 1 < argc) modes = argv[++i];
    else if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
    else rest[nrest++] = argv[i];
  }
  rest[nrest] = NULL;
  bench_opts o;
  int rank, nprocs;
  bench_init(&o, &nrest, &rest, "io_block2d", 1, "64M,256M,1G", 3, 1, &rank, &nprocs);
  if (iters < 1) iters = 1;
  bench_print_library("io_block2d");

  int dims[2] = {0, 0}, periods[2] = {0, 0}, coords[2];
  MPI_Dims_create(nprocs, 2, dims);
  MPI_Comm grid;
  MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &grid);
  MPI_Cart_coords(grid, rank, 2, coords);

  char path[1024];
  snprintf(path, sizeof path, "%s/io_block2d.%ld.dat", dir, (long)time(NULL));
  MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);

  for (int s = 0; s < o.nsizes; s++) {
    const size_t total = o.sizes[s];
    long n = (long)floor(sqrt((double)total / 8.0));
    n -= n % (dims[0] * dims[1]);
    if (n < dims[0] * dims[1]) n = dims[0] * dims[1];
    const long nr = n / dims[0], nc = n / dims[1];
    const long r0 = coords[0] * nr, c0 = coords[1] * nc;
    const size_t local = (size_t)nr * (size_t)nc;
    double *buf = bench_alloc(local * sizeof(double));
    int gsizes[2] = {(int)n, (int)n}, lsizes[2] = {(int)nr, (int)nc}, starts[2] = {(int)r0, (int)c0};
    MPI_Datatype block;
    MPI_Type_create_subarray(2, gsizes, lsizes, starts, MPI_ORDER_C, MPI_DOUBLE, &block);
    MPI_Type_commit(&block);
    const double bytes = (double)n * (double)n * 8.0;

    char mlist[256];
    snprintf(mlist, sizeof mlist, "%s", modes);
    for (char *mode = strtok(mlist, ","); mode; mode = strtok(NULL, ",")) {
      const int coll = !strcmp(mode, "collective");
      if (!coll && strcmp(mode, "independent")) bench_die("--modes: collective and/or independent");
      double *tw = malloc(sizeof(double) * (size_t)iters), *tr = malloc(sizeof(double) * (size_t)iters);
      int verified = 1;
      for (int it = 0; it < iters; it++) {
        MPI_File fh;
        if (MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh) != MPI_SUCCESS)
          bench_die("MPI_File_open failed");
        MPI_File_set_view(fh, 0, MPI_DOUBLE, block, "native", MPI_INFO_NULL);
        for (long i = 0; i < nr; i++)
          for (long j = 0; j < nc; j++) buf[i * nc + j] = value_at(r0 + i, c0 + j, n) + it;
        MPI_Status st;
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        int rc = coll ? MPI_File_write_all(fh, buf, (int)local, MPI_DOUBLE, &st)
                      : MPI_File_write(fh, buf, (int)local, MPI_DOUBLE, &st);
        if (rc != MPI_SUCCESS) bench_die("write failed");
        MPI_File_sync(fh);
        double dt = MPI_Wtime() - t0;
        MPI_Allreduce(&dt, &tw[it], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

        memset(buf, 0, local * sizeof(double));
        MPI_File_seek(fh, 0, MPI_SEEK_SET);
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        rc = coll ? MPI_File_read_all(fh, buf, (int)local, MPI_DOUBLE, &st)
                  : MPI_File_read(fh, buf, (int)local, MPI_DOUBLE, &st);
        if (rc != MPI_SUCCESS) bench_die("read failed");
        dt = MPI_Wtime() - t0;
        MPI_Allreduce(&dt, &tr[it], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        for (long i = 0; i < nr && verified; i++)
          for (long j = 0; j < nc; j++)
            if (buf[i * nc + j] != value_at(r0 + i, c0 + j, n) + it) {
              fprintf(stderr, "io_block2d: rank %d: (%ld,%ld) = %g, expected %g\n", rank, r0 + i, c0 + j,
                      buf[i * nc + j], value_at(r0 + i, c0 + j, n) + it);
              verified = 0;
              break;
            }
        MPI_File_close(&fh);
      }
      int all_ok = 0;
      MPI_Allreduce(&verified, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
      if (!all_ok) bench_die("data verification failed");
      for (int op = 0; op < 2 && rank == 0; op++) {
        double *t = op == 0 ? tw : tr;
        qsort(t, (size_t)iters, sizeof(double), cmp_double);
        const double med = iters % 2 ? t[iters / 2] : 0.5 * (t[iters / 2 - 1] + t[iters / 2]);
        printf("{\"bench\": \"io_block2d\", \"size\": %zu, \"n\": %ld, \"mode\": \"%s\", \"op\": \"%s\", "
               "\"iters\": %d, \"s\": %.6f, \"s_min\": %.6f, \"s_max\": %.6f, \"gbs\": %.4f, \"verified\": true}\n",
               total, n, mode, op == 0 ? "write" : "read", iters, med, t[0], t[iters - 1], bytes / med / 1e9);
        fflush(stdout);
      }
      free(tw);
      free(tr);
    }
    MPI_Type_free(&block);
    free(buf);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    MPI_File_delete(path, MPI_INFO_NULL);
    printf("{\"bench\": \"io_block2d\", \"done\": true}\n");
  }
  MPI_Comm_free(&grid);
  free(rest);
  MPI_Finalize();
  return 0;
}
