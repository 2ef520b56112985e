/* MPI_Type_create_struct over a C struct with padding (displacements from
 * MPI_Get_address/MPI_Aint_diff, extent = sizeof by the alignment rule),
 * arrays of it, and an absolute-address struct sent from and received into
 * MPI_BOTTOM. Ring exchange: any count. */
#include "mpitest.h"

typedef struct {
  char c;
  double d;
  int i[3];
  short s;
} item;

#define NI 5

int main(int argc, char** argv) {
  mt_start("type_struct", &argc, &argv);
  int next = (mt_rank + 1) % mt_size, prev = (mt_rank + mt_size - 1) % mt_size;
  item a[NI], b[NI];
  memset(a, 0, sizeof a);
  for (int k = 0; k < NI; ++k) {
    a[k].c = (char)('a' + mt_rank + k);
    a[k].d = mt_rank * 10.0 + k;
    for (int j = 0; j < 3; ++j) a[k].i[j] = mt_rank * 1000 + k * 10 + j;
    a[k].s = (short)(-mt_rank - k);
  }
  MPI_Aint base, addr[4];
  MPI_Get_address(&a[0], &base);
  MPI_Get_address(&a[0].c, &addr[0]);
  MPI_Get_address(&a[0].d, &addr[1]);
  MPI_Get_address(&a[0].i, &addr[2]);
  MPI_Get_address(&a[0].s, &addr[3]);
  for (int k = 0; k < 4; ++k) addr[k] = MPI_Aint_diff(addr[k], base);
  CHECK(addr[1] == offsetof(item, d) && addr[3] == offsetof(item, s), "Get_address offsets");
  int bl[4] = {1, 1, 3, 1};
  MPI_Datatype ty[4] = {MPI_CHAR, MPI_DOUBLE, MPI_INT, MPI_SHORT};
  MPI_Datatype st_item;
  MPI_Type_create_struct(4, bl, addr, ty, &st_item);
  MPI_Type_commit(&st_item);
  MPI_Aint lb, ext;
  MPI_Type_get_extent(st_item, &lb, &ext);
  int size;
  MPI_Type_size(st_item, &size);
  CHECK(lb == 0 && ext == (MPI_Aint)sizeof(item), "extent %ld, sizeof %zu", (long)ext, sizeof(item));
  CHECK(size == 1 + 8 + 12 + 2, "size %d", size);

  /* Array of structs both ways; padding bytes are not transferred. */
  memset(b, 0x77, sizeof b);
  MPI_Status st;
  MPI_Sendrecv(a, NI, st_item, next, 1, b, NI, st_item, prev, 1, MPI_COMM_WORLD, &st);
  int count = -1;
  MPI_Get_count(&st, st_item, &count);
  CHECK(count == NI, "count %d", count);
  for (int k = 0; k < NI; ++k) {
    CHECK(b[k].c == (char)('a' + prev + k) && b[k].d == prev * 10.0 + k && b[k].s == (short)(-prev - k), "item %d", k);
    for (int j = 0; j < 3; ++j) CHECK(b[k].i[j] == prev * 1000 + k * 10 + j, "item %d i[%d]", k, j);
    const unsigned char* p = (const unsigned char*)&b[k];
    for (size_t x = 1; x < offsetof(item, d); ++x) CHECK(p[x] == 0x77, "padding byte %zu of item %d written", x, k);
  }

  /* Absolute addresses: three unrelated variables described from MPI_BOTTOM. */
  int x = mt_rank + 1;
  double y[2] = {mt_rank * 0.5, -mt_rank * 0.5};
  char name[12];
  snprintf(name, sizeof name, "r%04d", mt_rank % 10000);
  int rx = -1;
  double ry[2] = {0, 0};
  char rname[6] = {0};
  MPI_Aint sa[3], ra[3];
  MPI_Get_address(&x, &sa[0]);
  MPI_Get_address(y, &sa[1]);
  MPI_Get_address(name, &sa[2]);
  MPI_Get_address(&rx, &ra[0]);
  MPI_Get_address(ry, &ra[1]);
  MPI_Get_address(rname, &ra[2]);
  int abl[3] = {1, 2, 6};
  MPI_Datatype aty[3] = {MPI_INT, MPI_DOUBLE, MPI_CHAR};
  MPI_Datatype sabs, rabs;
  MPI_Type_create_struct(3, abl, sa, aty, &sabs);
  MPI_Type_create_struct(3, abl, ra, aty, &rabs);
  MPI_Type_commit(&sabs);
  MPI_Type_commit(&rabs);
  MPI_Request rq;
  MPI_Irecv(MPI_BOTTOM, 1, rabs, prev, 2, MPI_COMM_WORLD, &rq);
  MPI_Send(MPI_BOTTOM, 1, sabs, next, 2, MPI_COMM_WORLD);
  MPI_Wait(&rq, &st);
  char want[12];
  snprintf(want, sizeof want, "r%04d", prev % 10000);
  CHECK(rx == prev + 1 && ry[0] == prev * 0.5 && ry[1] == -prev * 0.5 && strcmp(rname, want) == 0,
        "MPI_BOTTOM: %d %g %g '%s'", rx, ry[0], ry[1], rname);

  /* Struct of a struct type: two items and a trailing int (nested). */
  int tail = mt_rank * 7, rtail = -1;
  item two[2], rtwo[2];
  memcpy(two, a, sizeof two);
  memset(rtwo, 0, sizeof rtwo);
  MPI_Aint na[2], nr[2];
  MPI_Get_address(two, &na[0]);
  MPI_Get_address(&tail, &na[1]);
  MPI_Get_address(rtwo, &nr[0]);
  MPI_Get_address(&rtail, &nr[1]);
  int nbl[2] = {2, 1};
  MPI_Datatype nty[2] = {st_item, MPI_INT};
  MPI_Datatype snest, rnest;
  MPI_Type_create_struct(2, nbl, na, nty, &snest);
  MPI_Type_create_struct(2, nbl, nr, nty, &rnest);
  MPI_Type_commit(&snest);
  MPI_Type_commit(&rnest);
  MPI_Sendrecv(MPI_BOTTOM, 1, snest, next, 3, MPI_BOTTOM, 1, rnest, prev, 3, MPI_COMM_WORLD, &st);
  CHECK(rtail == prev * 7 && rtwo[1].i[2] == prev * 1000 + 12 && rtwo[0].c == (char)('a' + prev), "nested struct");
  MPI_Type_free(&st_item);
  MPI_Type_free(&sabs);
  MPI_Type_free(&rabs);
  MPI_Type_free(&snest);
  MPI_Type_free(&rnest);
  return mt_pass();
}
