/* Byte-displacement constructors: MPI_Type_create_hindexed_block,
 * MPI_Type_create_hindexed and MPI_Type_create_hvector over an array of
 * structs (fields picked by byte offsets). Ring exchange: any count. */
#include <stddef.h>
#include "mpitest.h"

typedef struct {
  int id;
  char tag[3];
  double x, y;
} rec;

#define NR 16

static void fill(rec* r, int rank) {
  for (int i = 0; i < NR; ++i) {
    memset(&r[i], 0x5a, sizeof r[i]);
    r[i].id = rank * 100 + i;
    r[i].tag[0] = (char)('a' + i), r[i].tag[1] = (char)('A' + rank), r[i].tag[2] = 0;
    r[i].x = rank + i * 0.5;
    r[i].y = -rank - i * 0.25;
  }
}

int main(int argc, char** argv) {
  mt_start("type_hindexed_block", &argc, &argv);
  int next = (mt_rank + 1) % mt_size, prev = (mt_rank + mt_size - 1) % mt_size;
  rec mine[NR], got[NR], ref[NR];
  fill(mine, mt_rank);
  fill(ref, prev);
  MPI_Status st;

  /* hindexed_block: the x field of records 3, 0 and 9 (one double each). */
  MPI_Aint xd[3] = {3 * sizeof(rec) + offsetof(rec, x), offsetof(rec, x), 9 * sizeof(rec) + offsetof(rec, x)};
  MPI_Datatype xs;
  MPI_Type_create_hindexed_block(3, 1, xd, MPI_DOUBLE, &xs);
  MPI_Type_commit(&xs);
  double three[3] = {0, 0, 0};
  MPI_Sendrecv(mine, 1, xs, next, 1, three, 3, MPI_DOUBLE, prev, 1, MPI_COMM_WORLD, &st);
  CHECK(three[0] == ref[3].x && three[1] == ref[0].x && three[2] == ref[9].x, "hindexed_block x: %g %g %g", three[0],
        three[1], three[2]);

  /* hindexed: (x, y) of record 2 and (id) of record 5, as bytes. */
  int bl[2] = {2 * (int)sizeof(double), (int)sizeof(int)};
  MPI_Aint hd[2] = {2 * sizeof(rec) + offsetof(rec, x), 5 * sizeof(rec) + offsetof(rec, id)};
  MPI_Datatype hx;
  MPI_Type_create_hindexed(2, bl, hd, MPI_BYTE, &hx);
  MPI_Type_commit(&hx);
  memset(got, 0x11, sizeof got);
  MPI_Sendrecv(mine, 1, hx, next, 2, got, 1, hx, prev, 2, MPI_COMM_WORLD, &st);
  for (int i = 0; i < NR; ++i) {
    const unsigned char* g = (const unsigned char*)&got[i];
    const unsigned char* r = (const unsigned char*)&ref[i];
    for (size_t b = 0; b < sizeof(rec); ++b) {
      int in = (i == 2 && b >= offsetof(rec, x) && b < offsetof(rec, x) + 16) ||
               (i == 5 && b + 1 > offsetof(rec, id) && b < offsetof(rec, id) + sizeof(int));
      CHECK(g[b] == (in ? r[b] : 0x11), "hindexed: record %d byte %zu = %#x", i, b, g[b]);
    }
  }

  /* hvector: the tag (3 chars) of every second record; received into the
   * same positions of a zeroed array. */
  MPI_Datatype tags;
  MPI_Type_create_hvector(NR / 2, 3, 2 * sizeof(rec), MPI_CHAR, &tags);
  MPI_Type_commit(&tags);
  memset(got, 0, sizeof got);
  MPI_Request rq[2];
  MPI_Irecv((char*)got + offsetof(rec, tag), 1, tags, prev, 3, MPI_COMM_WORLD, &rq[0]);
  MPI_Isend((char*)mine + offsetof(rec, tag), 1, tags, next, 3, MPI_COMM_WORLD, &rq[1]);
  MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
  for (int i = 0; i < NR; ++i) {
    if (i % 2 == 0)
      CHECK(memcmp(got[i].tag, ref[i].tag, 3) == 0, "hvector tag of record %d", i);
    else
      CHECK(got[i].tag[0] == 0 && got[i].tag[1] == 0 && got[i].tag[2] == 0, "record %d untouched", i);
    CHECK(got[i].id == 0 && got[i].x == 0, "record %d other fields untouched", i);
  }
  MPI_Aint lb, ext;
  MPI_Type_get_extent(tags, &lb, &ext);
  CHECK(lb == 0 && ext == (MPI_Aint)((NR / 2 - 1) * 2 * sizeof(rec) + 3), "hvector extent %ld", (long)ext);
  MPI_Type_free(&xs);
  MPI_Type_free(&hx);
  MPI_Type_free(&tags);
  return mt_pass();
}
