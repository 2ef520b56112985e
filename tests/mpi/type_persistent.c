/* Persistent requests with derived types: Send_init/Recv_init with a
 * non-contiguous vector restarted several times (each start sends the
 * buffer's current contents), Startall, Ssend_init and Bsend_init, and a
 * persistent pair whose types were freed right after init. Ring: any count. */
#include "mpitest.h"

#define R 32
#define C 8

int main(int argc, char** argv) {
  mt_start("type_persistent", &argc, &argv);
  int next = (mt_rank + 1) % mt_size, prev = (mt_rank + mt_size - 1) % mt_size;
  static int a[R][C], b[R][C];
  MPI_Datatype col;
  MPI_Type_vector(R, 1, C, MPI_INT, &col);
  MPI_Type_commit(&col);

  MPI_Request rq[2];
  MPI_Recv_init(&b[0][3], 1, col, prev, 7, MPI_COMM_WORLD, &rq[0]);
  MPI_Send_init(&a[0][1], 1, col, next, 7, MPI_COMM_WORLD, &rq[1]);
  for (int round = 0; round < 5; ++round) {
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < C; ++j) a[i][j] = mt_rank * 10000 + round * 1000 + i * 10 + j, b[i][j] = -1;
    if (round % 2) {
      MPI_Startall(2, rq);
    } else {
      MPI_Start(&rq[0]);
      MPI_Start(&rq[1]);
    }
    MPI_Status st[2];
    MPI_Waitall(2, rq, st);
    int cnt = -1;
    MPI_Get_count(&st[0], col, &cnt);
    CHECK(cnt == 1, "round %d count %d", round, cnt);
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < C; ++j)
        CHECK(b[i][j] == (j == 3 ? prev * 10000 + round * 1000 + i * 10 + 1 : -1), "round %d b[%d][%d] = %d", round,
              i, j, b[i][j]);
  }
  MPI_Request_free(&rq[0]);
  MPI_Request_free(&rq[1]);

  /* Types freed right after init: the requests keep them. */
  MPI_Datatype t1, t2;
  MPI_Type_vector(R / 2, 2, C, MPI_INT, &t1);
  MPI_Type_dup(t1, &t2);
  MPI_Type_commit(&t1);
  MPI_Type_commit(&t2);
  MPI_Recv_init(b, 1, t2, prev, 8, MPI_COMM_WORLD, &rq[0]);
  MPI_Ssend_init(a, 1, t1, next, 8, MPI_COMM_WORLD, &rq[1]);
  MPI_Type_free(&t1);
  MPI_Type_free(&t2);
  MPI_Datatype filler; /* may take a freed handle */
  MPI_Type_contiguous(7, MPI_CHAR, &filler);
  MPI_Type_commit(&filler);
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < C; ++j) a[i][j] = mt_rank * 10000 + round * 1000 + i * 10 + j, b[i][j] = -1;
    MPI_Startall(2, rq);
    MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < C; ++j)
        CHECK(b[i][j] == (i < R / 2 && j < 2 ? prev * 10000 + round * 1000 + i * 10 + j : -1),
              "freed types round %d b[%d][%d] = %d", round, i, j, b[i][j]);
  }
  MPI_Request_free(&rq[0]);
  MPI_Request_free(&rq[1]);

  /* Bsend_init: packed into the attached buffer at each start. */
  static char bbuf[8192];
  MPI_Buffer_attach(bbuf, sizeof bbuf);
  MPI_Send_init(&a[0][0], 1, col, next, 9, MPI_COMM_WORLD, &rq[1]);
  MPI_Request_free(&rq[1]);
  MPI_Bsend_init(&a[0][5], 1, col, next, 9, MPI_COMM_WORLD, &rq[1]);
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < R; ++i) a[i][5] = round * 100 + i;
    int got[R];
    MPI_Irecv(got, R, MPI_INT, prev, 9, MPI_COMM_WORLD, &rq[0]);
    MPI_Start(&rq[1]);
    MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
    for (int i = 0; i < R; ++i) CHECK(got[i] == round * 100 + i, "Bsend_init round %d got[%d] = %d", round, i, got[i]);
  }
  MPI_Request_free(&rq[1]);
  void* p;
  int ps;
  MPI_Buffer_detach(&p, &ps);
  MPI_Type_free(&col);
  MPI_Type_free(&filler);
  return mt_pass();
}
