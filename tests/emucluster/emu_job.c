/* The MPI program tests/emucluster_test runs across emulated hosts.
 *
 *   emu_job hosts PER_HOST BYTES   MPI_COMM_TYPE_SHARED gives PER_HOST ranks,
 *                                  all with one processor name, and ranks of
 *                                  different shared communicators have
 *                                  different names; then every pair of ranks
 *                                  exchanges BYTES both ways (checked).
 *   emu_job transfer BYTES         rank 0 sends BYTES to the lowest rank on
 *                                  another host, which answers with 1 byte;
 *                                  rank 0 prints "transfer BYTES to R seconds S".
 *   emu_job loop SECONDS           every rank exchanges 64 KiB with every
 *                                  other, round after round; prints "looping"
 *                                  after the first round, and fails if it is
 *                                  still running after SECONDS.
 * Each rank prints "PASS emu_job rank R" at the end, or "FAIL ..." and aborts.
 */
#include <stdlib.h>
#include <string.h>

#include "tests/mpi/mpitest.h"

/* Whether rank r of MPI_COMM_WORLD is in the shared communicator of this rank. */
static int same_host(MPI_Comm node, int r) {
  MPI_Group wg, ng;
  MPI_Comm_group(MPI_COMM_WORLD, &wg);
  MPI_Comm_group(node, &ng);
  int out;
  MPI_Group_translate_ranks(wg, 1, &r, ng, &out);
  MPI_Group_free(&wg);
  MPI_Group_free(&ng);
  return out != MPI_UNDEFINED;
}

/* Every pair (a, b) exchanges `bytes` both ways, pair by pair. */
static void exchange_all(long bytes, int seed_base) {
  unsigned char* s = malloc((size_t)bytes + 1);
  unsigned char* r = malloc((size_t)bytes + 1);
  for (int step = 1; step < mt_size; ++step) {
    const int to = (mt_rank + step) % mt_size, from = (mt_rank - step + mt_size) % mt_size;
    mt_fill(s, bytes, seed_base + mt_rank * 1000 + to);
    memset(r, 0, (size_t)bytes);
    MPI_Status st;
    CHECK(MPI_Sendrecv(s, (int)bytes, MPI_BYTE, to, 5, r, (int)bytes, MPI_BYTE, from, 5, MPI_COMM_WORLD, &st) ==
              MPI_SUCCESS,
          "sendrecv with %d/%d", to, from);
    int got;
    MPI_Get_count(&st, MPI_BYTE, &got);
    CHECK(got == bytes, "from %d: %d bytes", from, got);
    const long bad = mt_check(r, bytes, seed_base + from * 1000 + mt_rank);
    CHECK(bad < 0, "from %d: byte %ld differs", from, bad);
  }
  free(s);
  free(r);
}

static void hosts(int per_host, long bytes) {
  MPI_Comm node;
  CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS, "split");
  int nsize, nrank;
  MPI_Comm_size(node, &nsize);
  MPI_Comm_rank(node, &nrank);
  CHECK(nsize == per_host, "shared communicator of %d ranks, expected %d", nsize, per_host);
  char name[MPI_MAX_PROCESSOR_NAME] = {0};
  int len;
  MPI_Get_processor_name(name, &len);
  char* all = calloc((size_t)mt_size, MPI_MAX_PROCESSOR_NAME);
  MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, MPI_COMM_WORLD);
  for (int r = 0; r < mt_size; ++r) {
    const int same_name = strcmp(all + (size_t)r * MPI_MAX_PROCESSOR_NAME, name) == 0;
    CHECK(same_name == same_host(node, r), "rank %d named %s, I am %s, shared with me: %d", r,
          all + (size_t)r * MPI_MAX_PROCESSOR_NAME, name, same_host(node, r));
  }
  free(all);
  printf("rank %d host %s shared %d of %d\n", mt_rank, name, nrank, nsize);
  fflush(stdout);
  MPI_Comm_free(&node);
  exchange_all(bytes, 1);
}

static void transfer(long bytes) {
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int far = -1; /* the lowest rank not on rank 0's host */
  int zero_here = same_host(node, 0);
  int mine = zero_here ? mt_size : mt_rank, lowest;
  MPI_Allreduce(&mine, &lowest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  far = lowest;
  CHECK(far < mt_size, "every rank is on rank 0's host");
  unsigned char* buf = malloc((size_t)bytes + 1);
  unsigned char ack = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  if (mt_rank == 0) {
    mt_fill(buf, bytes, 3);
    const double t0 = MPI_Wtime();
    MPI_Send(buf, (int)bytes, MPI_BYTE, far, 9, MPI_COMM_WORLD);
    MPI_Recv(&ack, 1, MPI_BYTE, far, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    const double t = MPI_Wtime() - t0;
    CHECK(ack == 1, "ack %d", ack);
    printf("transfer %ld to %d seconds %.6f\n", bytes, far, t);
    fflush(stdout);
  } else if (mt_rank == far) {
    MPI_Recv(buf, (int)bytes, MPI_BYTE, 0, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    const long bad = mt_check(buf, bytes, 3);
    CHECK(bad < 0, "byte %ld differs", bad);
    ack = 1;
    MPI_Send(&ack, 1, MPI_BYTE, 0, 10, MPI_COMM_WORLD);
  }
  free(buf);
  MPI_Comm_free(&node);
}

static void loop(double seconds) {
  const double t0 = MPI_Wtime();
  for (int round = 0;; ++round) {
    exchange_all(65536, round & 0xff);
    if (round == 0 && mt_rank == 0) {
      printf("looping\n");
      fflush(stdout);
    }
    CHECK(MPI_Wtime() - t0 < seconds, "still exchanging after %.0f s (round %d)", seconds, round);
  }
}

int main(int argc, char** argv) {
  mt_start("emu_job", &argc, &argv);
  if (argc >= 4 && strcmp(argv[1], "hosts") == 0) hosts(atoi(argv[2]), atol(argv[3]));
  else if (argc >= 3 && strcmp(argv[1], "transfer") == 0) transfer(atol(argv[2]));
  else if (argc >= 3 && strcmp(argv[1], "loop") == 0) loop(atof(argv[2]));
  else CHECK(0, "usage: emu_job hosts PER_HOST BYTES | transfer BYTES | loop SECONDS");
  return mt_pass();
}
