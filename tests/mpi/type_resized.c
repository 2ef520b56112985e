/* MPI_Type_create_resized: a strided pick of every third int through an
 * enlarged extent, one field of an array of structs through a type resized
 * to sizeof(struct), a negative lb, and resizing that changes nothing but
 * the extent. Ring exchange: any count. */
#include <stddef.h>
#include "mpitest.h"

typedef struct {
  double w;
  int key;
  char pad[20];
} particle;

int main(int argc, char** argv) {
  mt_start("type_resized", &argc, &argv);
  int next = (mt_rank + 1) % mt_size, prev = (mt_rank + mt_size - 1) % mt_size;
  MPI_Status st;

  /* Every third int: MPI_INT with extent 3 ints, count 5. */
  MPI_Datatype third;
  MPI_Type_create_resized(MPI_INT, 0, 3 * sizeof(int), &third);
  MPI_Type_commit(&third);
  MPI_Aint lb, ext, tlb, text;
  MPI_Type_get_extent(third, &lb, &ext);
  MPI_Type_get_true_extent(third, &tlb, &text);
  CHECK(lb == 0 && ext == 3 * (MPI_Aint)sizeof(int) && tlb == 0 && text == (MPI_Aint)sizeof(int), "third bounds");
  int src[15], dst[15];
  for (int i = 0; i < 15; ++i) src[i] = mt_rank * 100 + i, dst[i] = -1;
  MPI_Sendrecv(src, 5, third, next, 1, dst, 5, third, prev, 1, MPI_COMM_WORLD, &st);
  for (int i = 0; i < 15; ++i) CHECK(dst[i] == (i % 3 == 0 ? prev * 100 + i : -1), "third: dst[%d] = %d", i, dst[i]);

  /* One field (key) of an array of particles. */
  particle p[10], q[10];
  memset(q, 0, sizeof q);
  for (int i = 0; i < 10; ++i) {
    memset(&p[i], 0, sizeof p[i]);
    p[i].w = i;
    p[i].key = mt_rank * 10 + i;
  }
  MPI_Datatype key1, keys;
  int one = 1;
  MPI_Aint kd = offsetof(particle, key);
  MPI_Datatype ity = MPI_INT;
  MPI_Type_create_struct(1, &one, &kd, &ity, &key1);
  MPI_Type_create_resized(key1, 0, sizeof(particle), &keys);
  MPI_Type_free(&key1); /* keys keeps what it needs */
  MPI_Type_commit(&keys);
  int k[10];
  MPI_Sendrecv(p, 10, keys, next, 2, k, 10, MPI_INT, prev, 2, MPI_COMM_WORLD, &st);
  for (int i = 0; i < 10; ++i) CHECK(k[i] == prev * 10 + i, "keys: k[%d] = %d", i, k[i]);
  MPI_Sendrecv(k, 10, MPI_INT, prev, 3, q, 10, keys, next, 3, MPI_COMM_WORLD, &st);
  for (int i = 0; i < 10; ++i)
    CHECK(q[i].key == mt_rank * 10 + i && q[i].w == 0, "keys back: q[%d].key = %d", i, q[i].key);

  /* Negative lb: elements are laid out from lb; element i lives at
   * buf + i * extent, with its data at offset 0 of that. */
  MPI_Datatype neg;
  MPI_Type_create_resized(MPI_DOUBLE, -8, 24, &neg);
  MPI_Type_commit(&neg);
  MPI_Type_get_extent(neg, &lb, &ext);
  CHECK(lb == -8 && ext == 24, "negative lb: %ld %ld", (long)lb, (long)ext);
  double d[9], e[9];
  for (int i = 0; i < 9; ++i) d[i] = mt_rank + i * 0.125, e[i] = -1;
  /* From d + 1: elements at d[1], d[4], d[7]. */
  MPI_Sendrecv(d + 1, 3, neg, next, 4, e + 1, 3, neg, prev, 4, MPI_COMM_WORLD, &st);
  for (int i = 0; i < 9; ++i)
    CHECK(e[i] == (i % 3 == 1 ? prev + i * 0.125 : -1), "negative lb: e[%d] = %g", i, e[i]);

  /* Resizing a contiguous type to its own extent keeps it contiguous: it
   * goes in place (checked by the result only). */
  MPI_Datatype c4, c4r;
  MPI_Type_contiguous(4, MPI_INT, &c4);
  MPI_Type_create_resized(c4, 0, 4 * sizeof(int), &c4r);
  MPI_Type_commit(&c4r);
  int big[400], rbig[400];
  for (int i = 0; i < 400; ++i) big[i] = mt_rank * 1000 + i, rbig[i] = 0;
  MPI_Sendrecv(big, 100, c4r, next, 5, rbig, 100, c4r, prev, 5, MPI_COMM_WORLD, &st);
  for (int i = 0; i < 400; ++i) CHECK(rbig[i] == prev * 1000 + i, "c4r: %d", i);
  MPI_Type_free(&c4);
  MPI_Type_free(&c4r);
  MPI_Type_free(&third);
  MPI_Type_free(&keys);
  MPI_Type_free(&neg);
  return mt_pass();
}
