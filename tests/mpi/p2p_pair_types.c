/* Point-to-point with the padded MINLOC/MAXLOC pair types (MPI_SHORT_INT,
 * MPI_DOUBLE_INT, MPI_LONG_INT, MPI_LONG_DOUBLE_INT: data smaller than the
 * C struct) and the unpadded ones (MPI_FLOAT_INT, MPI_2INT): every element's
 * two members arrive at their struct offsets and the padding of the receive
 * buffer is left as it was, through blocking, non-blocking, persistent,
 * synchronous, buffered, Sendrecv and Sendrecv_replace transfers, counts 1 to
 * 9 and one large (rendezvous) count. Ranks pair up 0-1, 2-3, ...; an odd
 * last rank talks to itself. */
#include <stddef.h>

#include "mpitest.h"

struct si { short v; int i; };
struct di { double v; int i; };
struct li { long v; int i; };
struct ldi { long double v; int i; };
struct fi { float v; int i; };
struct ii { int v; int i; };

typedef struct {
  const char *name;
  MPI_Datatype type;
  size_t extent, voff, vsize, ioff;
  int kind; /* 0 short, 1 double, 2 long, 3 long double, 4 float, 5 int */
} pair_t;

static const pair_t pairs[] = {
    {"MPI_SHORT_INT", MPI_SHORT_INT, sizeof(struct si), offsetof(struct si, v), sizeof(short), offsetof(struct si, i), 0},
    {"MPI_DOUBLE_INT", MPI_DOUBLE_INT, sizeof(struct di), offsetof(struct di, v), sizeof(double), offsetof(struct di, i), 1},
    {"MPI_LONG_INT", MPI_LONG_INT, sizeof(struct li), offsetof(struct li, v), sizeof(long), offsetof(struct li, i), 2},
    {"MPI_LONG_DOUBLE_INT", MPI_LONG_DOUBLE_INT, sizeof(struct ldi), offsetof(struct ldi, v), sizeof(long double), offsetof(struct ldi, i), 3},
    {"MPI_FLOAT_INT", MPI_FLOAT_INT, sizeof(struct fi), offsetof(struct fi, v), sizeof(float), offsetof(struct fi, i), 4},
    {"MPI_2INT", MPI_2INT, sizeof(struct ii), offsetof(struct ii, v), sizeof(int), offsetof(struct ii, i), 5},
};

/* Element k of a message from rank r: value member and int member. */
static long vval(int r, int k) { return 1000L * (r + 1) + k; }
static int ival(int r, int k) { return -(r * 100000 + k + 1); }

static void put(const pair_t *p, unsigned char *buf, int n, int r) {
  for (int k = 0; k < n; k++) {
    unsigned char *e = buf + (size_t)k * p->extent;
    const long v = vval(r, k);
    switch (p->kind) {
      case 0: { short x = (short)v; memcpy(e + p->voff, &x, sizeof x); break; }
      case 1: { double x = (double)v; memcpy(e + p->voff, &x, sizeof x); break; }
      case 2: { long x = v; memcpy(e + p->voff, &x, sizeof x); break; }
      case 3: { long double x; memset(&x, 0, sizeof x); x = (long double)v; memcpy(e + p->voff, &x, sizeof x); break; }
      case 4: { float x = (float)v; memcpy(e + p->voff, &x, sizeof x); break; }
      case 5: { int x = (int)v; memcpy(e + p->voff, &x, sizeof x); break; }
    }
    const int i = ival(r, k);
    memcpy(e + p->ioff, &i, sizeof i);
  }
}

/* Checks n elements from rank r, and that every byte outside the members
 * (padding, and the elements after n) still holds `fill`. */
static void check(const pair_t *p, const unsigned char *buf, int n, int total, int r, unsigned char fill,
                  const char *how) {
  unsigned char *want = malloc((size_t)total * p->extent);
  memset(want, fill, (size_t)total * p->extent);
  put(p, want, n, r);
  for (size_t b = 0; b < (size_t)total * p->extent; b++) {
    /* A long double's bytes after its 10 x87 ones are its own padding:
     * sent as part of the value, their content undefined. */
    const size_t in = b % p->extent;
    if (p->kind == 3 && (size_t)(b / p->extent) < (size_t)n && in >= p->voff + 10 && in < p->voff + p->vsize)
      continue;
    CHECK(buf[b] == want[b], "%s %s count %d: byte %zu of element %zu (offset %zu in it) is 0x%02x, want 0x%02x",
          p->name, how, n, b, b / p->extent, b % p->extent, buf[b], want[b]);
  }
  free(want);
}

int main(int argc, char **argv) {
  mt_start("p2p_pair_types", &argc, &argv);
  const int peer = (mt_rank % 2 == 0) ? (mt_rank + 1 < mt_size ? mt_rank + 1 : mt_rank) : mt_rank - 1;
  const int big = 40000; /* well past the eager limit */
  int bsize = 0;
  MPI_Pack_size(big, MPI_LONG_DOUBLE_INT, MPI_COMM_WORLD, &bsize);
  bsize += 4 * MPI_BSEND_OVERHEAD;
  void *battach = malloc((size_t)bsize);
  MPI_Buffer_attach(battach, bsize);
  for (size_t t = 0; t < sizeof pairs / sizeof pairs[0]; t++) {
    const pair_t *p = &pairs[t];
    MPI_Aint lb, ext;
    MPI_Type_get_extent(p->type, &lb, &ext);
    CHECK(lb == 0 && (size_t)ext == p->extent, "%s: extent %ld, want %zu", p->name, (long)ext, p->extent);
    const int counts[] = {1, 2, 3, 4, 5, 9, big};
    for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
      const int n = counts[ci], total = n + 2;
      const size_t bytes = (size_t)total * p->extent;
      unsigned char *s = malloc(bytes), *d = malloc(bytes);
      memset(s, 0x5a, bytes);
      put(p, s, n, mt_rank);
      for (int how = 0; how < 8; how++) {
        static const char *names[] = {"Send/Recv", "Isend/Irecv", "Ssend/Recv", "Bsend/Recv", "persistent",
                                      "Sendrecv", "Sendrecv_replace", "Issend/Mrecv"};
        memset(d, 0xa5, bytes);
        MPI_Request rq[2];
        MPI_Status st;
        const int tag = (int)(t * 100 + ci * 10 + how);
        switch (how) {
          case 0: case 2: case 3:
            if (peer == mt_rank) {
              MPI_Sendrecv(s, n, p->type, peer, tag, d, n, p->type, peer, tag, MPI_COMM_WORLD, &st);
            } else if (mt_rank % 2 == 0) {
              if (how == 0) MPI_Send(s, n, p->type, peer, tag, MPI_COMM_WORLD);
              if (how == 2) MPI_Ssend(s, n, p->type, peer, tag, MPI_COMM_WORLD);
              if (how == 3) MPI_Bsend(s, n, p->type, peer, tag, MPI_COMM_WORLD);
              MPI_Recv(d, n, p->type, peer, tag, MPI_COMM_WORLD, &st);
            } else {
              MPI_Recv(d, n, p->type, peer, tag, MPI_COMM_WORLD, &st);
              if (how == 0) MPI_Send(s, n, p->type, peer, tag, MPI_COMM_WORLD);
              if (how == 2) MPI_Ssend(s, n, p->type, peer, tag, MPI_COMM_WORLD);
              if (how == 3) MPI_Bsend(s, n, p->type, peer, tag, MPI_COMM_WORLD);
            }
            break;
          case 1:
            MPI_Irecv(d, n, p->type, peer, tag, MPI_COMM_WORLD, &rq[0]);
            MPI_Isend(s, n, p->type, peer, tag, MPI_COMM_WORLD, &rq[1]);
            MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
            MPI_Irecv(d, n, p->type, peer, tag, MPI_COMM_WORLD, &rq[0]);  /* again, into the same buffer */
            MPI_Isend(s, n, p->type, peer, tag, MPI_COMM_WORLD, &rq[1]);
            MPI_Wait(&rq[0], &st);
            MPI_Wait(&rq[1], MPI_STATUS_IGNORE);
            break;
          case 4:
            MPI_Recv_init(d, n, p->type, peer, tag, MPI_COMM_WORLD, &rq[0]);
            MPI_Send_init(s, n, p->type, peer, tag, MPI_COMM_WORLD, &rq[1]);
            for (int rep = 0; rep < 2; rep++) {
              MPI_Startall(2, rq);
              MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
            }
            MPI_Request_free(&rq[0]);
            MPI_Request_free(&rq[1]);
            break;
          case 5:
            MPI_Sendrecv(s, n, p->type, peer, tag, d, n, p->type, peer, tag, MPI_COMM_WORLD, &st);
            break;
          case 6:
            memcpy(d, s, bytes);
            MPI_Sendrecv_replace(d, n, p->type, peer, tag, peer, tag, MPI_COMM_WORLD, &st);
            break;
          case 7: {
            MPI_Issend(s, n, p->type, peer, tag, MPI_COMM_WORLD, &rq[1]);
            MPI_Message m;
            MPI_Mprobe(peer, tag, MPI_COMM_WORLD, &m, &st);
            int c = -1;
            MPI_Get_count(&st, p->type, &c);
            CHECK(c == n, "%s Mprobe count %d, want %d", p->name, c, n);
            MPI_Mrecv(d, n, p->type, &m, &st);
            MPI_Wait(&rq[1], MPI_STATUS_IGNORE);
            break;
          }
        }
        if (how == 6) {
          /* Replace: the padding keeps the sender-side buffer's bytes. */
          check(p, d, n, total, peer, 0x5a, names[how]);
        } else {
          check(p, d, n, total, peer, 0xa5, names[how]);
        }
        if (how != 4 && how != 1 && how != 6) {
          int c = -1;
          MPI_Get_count(&st, p->type, &c);
          CHECK(c == n, "%s %s: count %d, want %d", p->name, names[how], c, n);
        }
      }
      free(s);
      free(d);
    }
  }
  MPI_Buffer_detach(&battach, &bsize);
  free(battach);
  return mt_pass();
}
