/* MPI_Get_count vs MPI_Get_elements(_x) on partial receives of derived
 * types: whole elements, a partial last element (Get_count MPI_UNDEFINED,
 * Get_elements counts the basic elements that arrived), a message ending
 * inside a basic element (both MPI_UNDEFINED), untouched memory past what
 * arrived, Probe + Get_count, and MPI_Status_set_elements. Needs 2 ranks
 * (others idle). */
#include <stddef.h>
#include "mpitest.h"

typedef struct {
  int i;
  double d;
} id;

int main(int argc, char** argv) {
  mt_start("type_get_elements", &argc, &argv);
  MPI_Datatype tri, sid;
  MPI_Type_contiguous(3, MPI_INT, &tri);
  MPI_Type_commit(&tri);
  int bl[2] = {1, 1};
  MPI_Aint dp[2] = {offsetof(id, i), offsetof(id, d)};
  MPI_Datatype tys[2] = {MPI_INT, MPI_DOUBLE};
  MPI_Type_create_struct(2, bl, dp, tys, &sid);
  MPI_Type_commit(&sid);
  /* Local status arithmetic first (any rank). */
  MPI_Status fake;
  MPI_Status_set_elements(&fake, sid, 5); /* 2 whole items + one int */
  int c = -1, e = -1;
  MPI_Get_count(&fake, sid, &c);
  MPI_Get_elements(&fake, sid, &e);
  CHECK(c == MPI_UNDEFINED && e == 5, "set_elements 5: count %d elements %d", c, e);
  MPI_Status_set_elements_x(&fake, tri, 6);
  MPI_Get_count(&fake, tri, &c);
  CHECK(c == 2, "set_elements_x 6 ints = 2 tri: %d", c);

  if (mt_size >= 2 && mt_rank < 2) {
    if (mt_rank == 0) {
      int v[7] = {1, 2, 3, 4, 5, 6, 7};
      MPI_Send(v, 7, MPI_INT, 1, 1, MPI_COMM_WORLD); /* 2 tri + 1 int */
      MPI_Send(v, 6, MPI_INT, 1, 2, MPI_COMM_WORLD); /* 2 tri */
      char bytes[40];
      memset(bytes, 9, sizeof bytes);
      MPI_Send(bytes, 14, MPI_BYTE, 1, 3, MPI_COMM_WORLD); /* ends inside an int */
      id items[2] = {{10, 1.5}, {20, 2.5}};
      MPI_Send(items, 1, sid, 1, 4, MPI_COMM_WORLD);
      MPI_Send(&items[1].i, 1, MPI_INT, 1, 5, MPI_COMM_WORLD); /* only the int of an item */
      MPI_Send(items, 2, sid, 1, 6, MPI_COMM_WORLD);
    } else {
      MPI_Status st;
      int r[12];
      for (int k = 0; k < 12; ++k) r[k] = -1;
      MPI_Recv(r, 4, tri, 0, 1, MPI_COMM_WORLD, &st);
      MPI_Count ex = -1;
      MPI_Get_count(&st, tri, &c);
      MPI_Get_elements(&st, tri, &e);
      MPI_Get_elements_x(&st, tri, &ex);
      CHECK(c == MPI_UNDEFINED && e == 7 && ex == 7, "7 ints into tri: count %d elements %d", c, e);
      for (int k = 0; k < 12; ++k) CHECK(r[k] == (k < 7 ? k + 1 : -1), "r[%d] = %d", k, r[k]);
      MPI_Recv(r, 4, tri, 0, 2, MPI_COMM_WORLD, &st);
      MPI_Get_count(&st, tri, &c);
      MPI_Get_elements(&st, tri, &e);
      CHECK(c == 2 && e == 6, "6 ints: count %d elements %d", c, e);
      MPI_Recv(r, 4, tri, 0, 3, MPI_COMM_WORLD, &st);
      MPI_Get_count(&st, tri, &c);
      MPI_Get_elements(&st, tri, &e);
      CHECK(c == MPI_UNDEFINED && e == MPI_UNDEFINED, "14 bytes: count %d elements %d", c, e);

      /* Non-contiguous (staged) type: partial data lands in the first
       * elements, the rest stays as it was. */
      id got[3];
      memset(got, 0x33, sizeof got);
      MPI_Probe(0, 4, MPI_COMM_WORLD, &st);
      MPI_Get_count(&st, sid, &c);
      CHECK(c == 1, "Probe + Get_count(struct) %d", c);
      MPI_Recv(got, 3, sid, 0, 4, MPI_COMM_WORLD, &st);
      MPI_Get_count(&st, sid, &c);
      MPI_Get_elements(&st, sid, &e);
      CHECK(c == 1 && e == 2 && got[0].i == 10 && got[0].d == 1.5, "1 item: count %d elements %d", c, e);
      const unsigned char* p = (const unsigned char*)&got[1];
      for (size_t k = 0; k < 2 * sizeof(id); ++k) CHECK(p[k] == 0x33, "past the data: byte %zu", k);
      MPI_Recv(got, 3, sid, 0, 5, MPI_COMM_WORLD, &st);
      MPI_Get_count(&st, sid, &c);
      MPI_Get_elements(&st, sid, &e);
      CHECK(c == MPI_UNDEFINED && e == 1 && got[0].i == 20 && got[0].d == 1.5, "int only: count %d elements %d", c, e);
      MPI_Request rq;
      MPI_Irecv(got, 3, sid, 0, 6, MPI_COMM_WORLD, &rq);
      MPI_Wait(&rq, &st);
      MPI_Get_count(&st, sid, &c);
      MPI_Get_elements(&st, sid, &e);
      CHECK(c == 2 && e == 4 && got[1].i == 20 && got[1].d == 2.5, "2 items: count %d elements %d", c, e);
      const unsigned char* third = (const unsigned char*)&got[2];
      for (size_t k = 0; k < sizeof(id); ++k) CHECK(third[k] == 0x33, "third item untouched: byte %zu", k);
    }
  }
  MPI_Type_free(&tri);
  MPI_Type_free(&sid);
  return mt_pass();
}
