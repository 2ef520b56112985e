/* The MPI 4.0 large-count ("_c") point-to-point bindings: every send mode,
 * blocking and not, persistent, sendrecv (and _replace, and their I forms),
 * matched receives, the attached buffer, Get_count_c/Get_elements_c and
 * Status_set_elements_c; then
 * one real transfer of more than 2^31 MPI_CHARs between two ranks (shared
 * memory: received as ONE element of a derived type of that many bytes)
 * and one through MPI_COMM_SELF, checking MPI_Get_count (MPI_UNDEFINED),
 * MPI_Get_count_c and MPI_Get_elements_c on their statuses. The big
 * transfers are skipped, with the reason printed, when the machine has too
 * little free memory. 1 or 2 ranks (a ring). */
#include <limits.h>
#include <stdint.h>

#include "mpitest.h"

#define N 1000

static void small_ring(void) {
  const int right = (mt_rank + 1) % mt_size, left = (mt_rank + mt_size - 1) % mt_size;
  unsigned char out[N], in[N];
  MPI_Status st;
  MPI_Request r[2];
  mt_fill(out, N, mt_rank);

  /* Each blocking send mode, received by Recv_c / Irecv_c. */
  for (int mode = 0; mode < 4; ++mode) {
    memset(in, 0, N);
    CHECK(MPI_Irecv_c(in, N, MPI_BYTE, left, 20 + mode, MPI_COMM_WORLD, &r[0]) == MPI_SUCCESS, "Irecv_c");
    int e = MPI_SUCCESS;
    static char bsend_space[N + MPI_BSEND_OVERHEAD];
    switch (mode) {
      case 0: e = MPI_Send_c(out, N, MPI_BYTE, right, 20, MPI_COMM_WORLD); break;
      case 1: e = MPI_Ssend_c(out, N, MPI_BYTE, right, 21, MPI_COMM_WORLD); break;
      case 2: e = MPI_Rsend_c(out, N, MPI_BYTE, right, 22, MPI_COMM_WORLD); break;
      case 3: {
        CHECK(MPI_Buffer_attach_c(bsend_space, (MPI_Count)sizeof bsend_space) == MPI_SUCCESS, "Buffer_attach_c");
        e = MPI_Bsend_c(out, N, MPI_BYTE, right, 23, MPI_COMM_WORLD);
        break;
      }
    }
    CHECK(e == MPI_SUCCESS, "send mode %d: %d", mode, e);
    CHECK(MPI_Wait(&r[0], &st) == MPI_SUCCESS, "Wait");
    CHECK(mt_check(in, N, left) < 0, "mode %d: byte %ld", mode, mt_check(in, N, left));
    MPI_Count c = -1;
    CHECK(MPI_Get_count_c(&st, MPI_BYTE, &c) == MPI_SUCCESS && c == N, "Get_count_c %lld", c);
    CHECK(MPI_Get_elements_c(&st, MPI_BYTE, &c) == MPI_SUCCESS && c == N, "Get_elements_c %lld", c);
    if (mode == 3) {
      void* p = NULL;
      MPI_Count size = 0;
      CHECK(MPI_Buffer_detach_c(&p, &size) == MPI_SUCCESS, "Buffer_detach_c");
      CHECK(p == bsend_space && size == (MPI_Count)sizeof bsend_space, "detached %p %lld", p, size);
    }
  }

  /* Non-blocking send modes, with Recv_c. */
  static char ib_space[N + MPI_BSEND_OVERHEAD];
  MPI_Buffer_attach_c(ib_space, (MPI_Count)sizeof ib_space);
  for (int mode = 0; mode < 4; ++mode) {
    memset(in, 0, N);
    CHECK(MPI_Irecv_c(in, N, MPI_BYTE, left, 30 + mode, MPI_COMM_WORLD, &r[0]) == MPI_SUCCESS, "Irecv_c");
    int e = mode == 0   ? MPI_Isend_c(out, N, MPI_BYTE, right, 30, MPI_COMM_WORLD, &r[1])
            : mode == 1 ? MPI_Issend_c(out, N, MPI_BYTE, right, 31, MPI_COMM_WORLD, &r[1])
            : mode == 2 ? MPI_Irsend_c(out, N, MPI_BYTE, right, 32, MPI_COMM_WORLD, &r[1])
                        : MPI_Ibsend_c(out, N, MPI_BYTE, right, 33, MPI_COMM_WORLD, &r[1]);
    CHECK(e == MPI_SUCCESS, "I send mode %d", mode);
    CHECK(MPI_Waitall(2, r, MPI_STATUSES_IGNORE) == MPI_SUCCESS, "Waitall");
    CHECK(mt_check(in, N, left) < 0, "I mode %d: byte %ld", mode, mt_check(in, N, left));
  }
  {
    void* p;
    int size;
    CHECK(MPI_Buffer_detach(&p, &size) == MPI_SUCCESS && size == (int)sizeof ib_space, "detach %d", size);
  }
  memset(in, 0, N);
  CHECK(MPI_Sendrecv_c(out, N, MPI_BYTE, right, 40, in, N, MPI_BYTE, left, 40, MPI_COMM_WORLD, &st) == MPI_SUCCESS,
        "Sendrecv_c");
  CHECK(mt_check(in, N, left) < 0 && st.MPI_SOURCE == left, "Sendrecv_c data");

  /* _replace forms on a strided type (count of ints). */
  int buf[2 * N];
  MPI_Datatype vec;
  CHECK(MPI_Type_vector_c(N, 1, 2, MPI_INT, &vec) == MPI_SUCCESS, "Type_vector_c");
  MPI_Type_commit(&vec);
  for (int pass = 0; pass < 2; ++pass) {
    for (int i = 0; i < 2 * N; ++i) buf[i] = (i % 2) ? -1 : mt_rank * 100000 + i + pass;
    if (pass == 0) {
      CHECK(MPI_Sendrecv_replace_c(buf, 1, vec, right, 41, left, 41, MPI_COMM_WORLD, &st) == MPI_SUCCESS,
            "Sendrecv_replace_c");
    } else {
      CHECK(MPI_Isendrecv_replace_c(buf, 1, vec, right, 42, left, 42, MPI_COMM_WORLD, &r[0]) == MPI_SUCCESS,
            "Isendrecv_replace_c");
      MPI_Wait(&r[0], &st);
    }
    for (int i = 0; i < 2 * N; ++i)
      CHECK(buf[i] == ((i % 2) ? -1 : left * 100000 + i + pass), "replace %d: buf[%d] = %d", pass, i, buf[i]);
    MPI_Count c = -1;
    MPI_Get_count_c(&st, vec, &c);
    CHECK(c == 1, "replace count %lld", c);
    MPI_Get_elements_c(&st, vec, &c);
    CHECK(c == N, "replace elements %lld", c);
  }
  MPI_Type_free(&vec);
  memset(in, 0, N);
  CHECK(MPI_Isendrecv_c(out, N, MPI_BYTE, right, 43, in, N, MPI_BYTE, left, 43, MPI_COMM_WORLD, &r[0]) ==
            MPI_SUCCESS, "Isendrecv_c");
  MPI_Wait(&r[0], &st);
  CHECK(mt_check(in, N, left) < 0, "Isendrecv_c data");

  /* Persistent: every _init_c, started twice. */
  MPI_Request pr[2];
  static char pb_space[N + MPI_BSEND_OVERHEAD];
  MPI_Buffer_attach_c(pb_space, (MPI_Count)sizeof pb_space);
  for (int mode = 0; mode < 4; ++mode) {
    CHECK(MPI_Recv_init_c(in, N, MPI_BYTE, left, 50 + mode, MPI_COMM_WORLD, &pr[0]) == MPI_SUCCESS, "Recv_init_c");
    int e = mode == 0   ? MPI_Send_init_c(out, N, MPI_BYTE, right, 50, MPI_COMM_WORLD, &pr[1])
            : mode == 1 ? MPI_Ssend_init_c(out, N, MPI_BYTE, right, 51, MPI_COMM_WORLD, &pr[1])
            : mode == 2 ? MPI_Rsend_init_c(out, N, MPI_BYTE, right, 52, MPI_COMM_WORLD, &pr[1])
                        : MPI_Bsend_init_c(out, N, MPI_BYTE, right, 53, MPI_COMM_WORLD, &pr[1]);
    CHECK(e == MPI_SUCCESS, "init mode %d", mode);
    for (int k = 0; k < 2; ++k) {
      memset(in, 0, N);
      MPI_Start(&pr[0]);
      MPI_Barrier(MPI_COMM_WORLD); /* the ready send needs the receive posted */
      MPI_Start(&pr[1]);
      CHECK(MPI_Waitall(2, pr, MPI_STATUSES_IGNORE) == MPI_SUCCESS, "persistent Waitall");
      CHECK(mt_check(in, N, left) < 0, "persistent mode %d start %d", mode, k);
    }
    MPI_Request_free(&pr[0]);
    MPI_Request_free(&pr[1]);
  }
  {
    void* p;
    MPI_Count size;
    MPI_Buffer_detach_c(&p, &size);
  }

  /* Matched receives. */
  for (int k = 0; k < 2; ++k) {
    memset(in, 0, N);
    MPI_Isend_c(out, N, MPI_BYTE, right, 60 + k, MPI_COMM_WORLD, &r[1]);
    MPI_Message m;
    CHECK(MPI_Mprobe(left, 60 + k, MPI_COMM_WORLD, &m, &st) == MPI_SUCCESS, "Mprobe");
    if (k == 0) {
      CHECK(MPI_Mrecv_c(in, N, MPI_BYTE, &m, &st) == MPI_SUCCESS, "Mrecv_c");
    } else {
      CHECK(MPI_Imrecv_c(in, N, MPI_BYTE, &m, &r[0]) == MPI_SUCCESS, "Imrecv_c");
      MPI_Wait(&r[0], &st);
    }
    MPI_Wait(&r[1], MPI_STATUS_IGNORE);
    CHECK(m == MPI_MESSAGE_NULL && mt_check(in, N, left) < 0, "matched receive %d", k);
  }

  /* A status set to 3 * 2^31 basic elements (ints) of a 2-int type: the
   * _c forms count them, the int MPI_Get_count says MPI_UNDEFINED. */
  {
    MPI_Datatype two;
    MPI_Type_contiguous_c(2, MPI_INT, &two);
    MPI_Type_commit(&two);
    const MPI_Count many = 3LL << 31;
    MPI_Count c = 0;
    int ic = 0;
    CHECK(MPI_Status_set_elements_c(&st, two, many) == MPI_SUCCESS, "Status_set_elements_c");
    CHECK(MPI_Get_elements_c(&st, two, &c) == MPI_SUCCESS && c == many, "set elements: %lld", c);
    CHECK(MPI_Get_count_c(&st, two, &c) == MPI_SUCCESS && c == many / 2, "set count_c: %lld", c);
    CHECK(MPI_Get_count_c(&st, MPI_INT, &c) == MPI_SUCCESS && c == many, "set count_c(int): %lld", c);
    CHECK(MPI_Get_count(&st, two, &ic) == MPI_SUCCESS && ic == MPI_UNDEFINED, "set count: %d", ic);
    MPI_Type_free(&two);
  }

  /* Errors keep their classes: negative count, bad rank. */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  char text[MPI_MAX_ERROR_STRING];
  CHECK(mt_error(MPI_Send_c(out, -1, MPI_BYTE, right, 1, MPI_COMM_WORLD), text) == MPI_ERR_COUNT, "count: %s", text);
  CHECK(mt_error(MPI_Recv_c(in, N, MPI_BYTE, mt_size, 1, MPI_COMM_WORLD, &st), text) == MPI_ERR_RANK, "rank: %s",
        text);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

/* Sampled pattern of a big buffer: every 4093rd byte and the 64 KiB on each
 * side of 2^31 (the first byte an int count cannot reach). */
static unsigned char big_byte(size_t i) { return (unsigned char)((i * 2654435761u) >> 13); }
static void big_mark(unsigned char* p, size_t n) {
  for (size_t i = 0; i < n; i += 4093) p[i] = big_byte(i);
  for (size_t i = ((size_t)1 << 31) - 65536; i < n && i < ((size_t)1 << 31) + 65536; ++i) p[i] = big_byte(i);
  p[n - 1] = big_byte(n - 1);
}
static long big_check(const unsigned char* p, size_t n) {
  for (size_t i = 0; i < n; i += 4093)
    if (p[i] != big_byte(i)) return (long)i;
  for (size_t i = ((size_t)1 << 31) - 65536; i < n && i < ((size_t)1 << 31) + 65536; ++i)
    if (p[i] != big_byte(i)) return (long)i;
  return p[n - 1] == big_byte(n - 1) ? -1 : (long)(n - 1);
}

/* Checks a status of `n` bytes received. */
static void check_big_status(const MPI_Status* st, MPI_Count n, MPI_Datatype big) {
  int ic = 0;
  MPI_Count c = 0;
  CHECK(MPI_Get_count(st, MPI_CHAR, &ic) == MPI_SUCCESS && ic == MPI_UNDEFINED, "Get_count %d", ic);
  CHECK(MPI_Get_count_c(st, MPI_CHAR, &c) == MPI_SUCCESS && c == n, "Get_count_c %lld", c);
  CHECK(MPI_Get_elements_c(st, MPI_CHAR, &c) == MPI_SUCCESS && c == n, "Get_elements_c %lld", c);
  CHECK(MPI_Get_elements(st, MPI_CHAR, &ic) == MPI_SUCCESS && ic == MPI_UNDEFINED, "Get_elements %d", ic);
  CHECK(MPI_Get_count(st, big, &ic) == MPI_SUCCESS && ic == 1, "Get_count(big) %d", ic);
  CHECK(MPI_Get_elements_c(st, big, &c) == MPI_SUCCESS && c == n, "Get_elements_c(big) %lld", c);
}

static void big_transfers(void) {
  const MPI_Count n = ((MPI_Count)1 << 31) + 4099; /* > INT_MAX elements */
  /* Rank 0 holds two buffers, rank 1 one: ask for 3 of them plus slack. */
  const long pages = sysconf(_SC_AVPHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
  const double avail = (double)pages * (double)psize;
  int skip = avail < 3.5 * (double)n;
  MPI_Allreduce(MPI_IN_PLACE, &skip, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (skip) {
    if (mt_rank == 0)
      printf("large_count_p2p: SKIP the transfers of %lld bytes: %.1f GiB free, %.1f GiB needed\n", n,
             avail / (1 << 30), 3.5 * (double)n / (1 << 30));
    return;
  }
  MPI_Datatype big;
  CHECK(MPI_Type_contiguous_c(n, MPI_CHAR, &big) == MPI_SUCCESS, "Type_contiguous_c");
  MPI_Type_commit(&big);
  int isize = 0;
  MPI_Count csize = 0;
  MPI_Type_size(big, &isize);
  MPI_Type_size_c(big, &csize);
  CHECK(isize == MPI_UNDEFINED && csize == n, "Type_size %d, Type_size_c %lld", isize, csize);
  MPI_Status st;
  unsigned char* a = malloc((size_t)n);
  CHECK(a != NULL, "no memory for %lld bytes", n);
  if (mt_size == 2) {
    /* Shared memory: n MPI_CHARs sent, one element of `big` received. */
    if (mt_rank == 0) {
      memset(a, 0x5a, (size_t)n);
      big_mark(a, (size_t)n);
      CHECK(MPI_Send_c(a, n, MPI_CHAR, 1, 70, MPI_COMM_WORLD) == MPI_SUCCESS, "Send_c of %lld", n);
    } else {
      memset(a, 0, (size_t)n);
      CHECK(MPI_Recv_c(a, 1, big, 0, 70, MPI_COMM_WORLD, &st) == MPI_SUCCESS, "Recv_c of big");
      CHECK(big_check(a, (size_t)n) < 0, "shm: byte %ld", big_check(a, (size_t)n));
      check_big_status(&st, n, big);
    }
  }
  if (mt_rank == 0) {
    /* Self: n MPI_CHARs to this rank through MPI_COMM_SELF. */
    if (mt_size == 1) {
      memset(a, 0x5a, (size_t)n);
      big_mark(a, (size_t)n);
    }
    unsigned char* b = malloc((size_t)n);
    CHECK(b != NULL, "no memory for %lld bytes", n);
    memset(b, 0, (size_t)n);
    MPI_Request r;
    CHECK(MPI_Irecv_c(b, n, MPI_CHAR, 0, 71, MPI_COMM_SELF, &r) == MPI_SUCCESS, "Irecv_c self");
    CHECK(MPI_Send_c(a, n, MPI_CHAR, 0, 71, MPI_COMM_SELF) == MPI_SUCCESS, "Send_c self");
    CHECK(MPI_Wait(&r, &st) == MPI_SUCCESS, "Wait self");
    CHECK(big_check(b, (size_t)n) < 0, "self: byte %ld", big_check(b, (size_t)n));
    check_big_status(&st, n, big);
    free(b);
  }
  free(a);
  MPI_Type_free(&big);
}

int main(int argc, char** argv) {
  mt_start("large_count_p2p", &argc, &argv);
  CHECK(mt_size <= 2, "1 or 2 ranks");
  small_ring();
  MPI_Barrier(MPI_COMM_WORLD);
  big_transfers();
  return mt_pass();
}
