/* The "nmad_priority" info hint of a communicator: accepted values, clear
 * errors for bad ones (the communicator's hints unchanged), inherited by
 * MPI_Comm_dup, replaced by MPI_Comm_dup_with_info; and that it reaches the
 * engine's strategy: with argument "overtake BULK SIZE hint|nohint", rank 0
 * queues BULK eager messages of SIZE bytes on one communicator, then one
 * 8-byte message on another that has nmad_priority=9 ("hint") or none
 * ("nohint"), and completes them with MPI_Testsome while rank 1 sleeps
 * (the queue fills), then receives everything. Eager sends complete as the
 * strategy hands their packets to the driver, so rank 0 prints "urgent
 * sent with P of BULK bulk messages sent" (bulk sends completed no later
 * than the urgent one). Under NMAD_STRATEGY=prio the hinted message
 * overtakes the queued bulk (the caller checks P); every message's
 * contents are checked. */
#include <unistd.h>

#include "mpitest.h"

static int hint_value(MPI_Comm c, char* value) {
  MPI_Info used;
  int flag = 0;
  MPI_Comm_get_info(c, &used);
  MPI_Info_get(used, "nmad_priority", MPI_MAX_INFO_VAL, value, &flag);
  MPI_Info_free(&used);
  return flag;
}

static void hints(void) {
  char value[MPI_MAX_INFO_VAL + 1];
  MPI_Comm d;
  MPI_Comm_dup(MPI_COMM_WORLD, &d);
  MPI_Comm_set_errhandler(d, MPI_ERRORS_RETURN);
  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "nmad_priority", "7");
  CHECK(MPI_Comm_set_info(d, info) == MPI_SUCCESS, "set 7");
  CHECK(hint_value(d, value) && strcmp(value, "7") == 0, "get after set: '%s'", value);
  const char* bad[] = {"256", "-1", "abc", "", "3x", "1e2"};
  for (unsigned i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    MPI_Info_set(info, "nmad_priority", bad[i]);
    MPI_Info_set(info, "other_key", "x");
    const int e = MPI_Comm_set_info(d, info);
    int cls = -1;
    MPI_Error_class(e, &cls);
    CHECK(cls == MPI_ERR_INFO_VALUE, "'%s' gave class %d", bad[i], cls);
    CHECK(hint_value(d, value) && strcmp(value, "7") == 0, "'%s' changed the hint to '%s'", bad[i], value);
    int flag = 0;
    MPI_Info used;
    MPI_Comm_get_info(d, &used);
    MPI_Info_get(used, "other_key", MPI_MAX_INFO_VAL, value, &flag);
    MPI_Info_free(&used);
    CHECK(!flag, "a refused info was partly applied");
    MPI_Info_delete(info, "other_key");
  }
  MPI_Comm d2, d3;
  MPI_Comm_dup(d, &d2);
  CHECK(hint_value(d2, value) && strcmp(value, "7") == 0, "dup inherits: '%s'", value);
  MPI_Info_set(info, "nmad_priority", "0");
  MPI_Comm_dup_with_info(d, info, &d3);
  CHECK(hint_value(d3, value) && strcmp(value, "0") == 0, "dup_with_info: '%s'", value);
  MPI_Info_set(info, "nmad_priority", "300");
  MPI_Comm d4 = MPI_COMM_NULL;
  const int e = MPI_Comm_dup_with_info(d, info, &d4);
  int cls = -1;
  MPI_Error_class(e, &cls);
  CHECK(cls == MPI_ERR_INFO_VALUE && d4 == MPI_COMM_NULL, "dup_with_info 300: class %d", cls);
  /* A hinted communicator still carries messages (both directions). */
  int v = mt_rank, got = -1;
  if (mt_size > 1) {
    const int peer = mt_rank ^ 1;
    if (peer < mt_size) {
      MPI_Sendrecv(&v, 1, MPI_INT, peer, 3, &got, 1, MPI_INT, peer, 3, d2, MPI_STATUS_IGNORE);
      CHECK(got == peer, "sendrecv on a hinted comm: %d", got);
    }
  }
  MPI_Info_free(&info);
  MPI_Comm_free(&d3);
  MPI_Comm_free(&d2);
  MPI_Comm_free(&d);
}

static void overtake(int bulk, int size, int hinted) {
  MPI_Comm bulk_comm, urgent_comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &bulk_comm);
  MPI_Comm_dup(MPI_COMM_WORLD, &urgent_comm);
  if (hinted) {
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "nmad_priority", "9");
    MPI_Comm_set_info(urgent_comm, info);
    MPI_Info_free(&info);
  }
  unsigned char* buf = malloc((size_t)size);
  CHECK(buf != NULL, "out of memory");
  MPI_Barrier(MPI_COMM_WORLD);
  if (mt_rank == 0) {
    MPI_Request* reqs = malloc(sizeof(MPI_Request) * (size_t)(bulk + 1));
    int* done = malloc(sizeof(int) * (size_t)(bulk + 1));
    CHECK(reqs != NULL && done != NULL, "out of memory");
    mt_fill(buf, size, 5);
    for (int i = 0; i < bulk; ++i) MPI_Isend(buf, size, MPI_BYTE, 1, 1, bulk_comm, &reqs[i]);
    long urgent = 0x5eed;
    MPI_Isend(&urgent, 1, MPI_LONG, 1, 2, urgent_comm, &reqs[bulk]);
    /* Eager sends complete as their packets are handed to the driver, in
     * the order the strategy builds them. */
    int left = bulk + 1, bulk_done = 0, position = -1;
    while (left > 0) {
      int n = 0;
      MPI_Testsome(bulk + 1, reqs, &n, done, MPI_STATUSES_IGNORE);
      if (n == MPI_UNDEFINED) break;
      int urgent_now = 0;
      for (int k = 0; k < n; ++k) {
        if (done[k] == bulk) urgent_now = 1;
        else ++bulk_done;
      }
      if (urgent_now) position = bulk_done;
      left -= n;
    }
    CHECK(position >= 0, "the urgent send never completed");
    printf("urgent sent with %d of %d bulk messages sent\n", position, bulk);
    fflush(stdout);
    free(done);
    free(reqs);
  } else if (mt_rank == 1) {
    usleep(300 * 1000); /* the sender's queue fills */
    for (int i = 0; i < bulk; ++i) {
      memset(buf, 0, (size_t)size);
      MPI_Status st;
      MPI_Recv(buf, size, MPI_BYTE, 0, 1, bulk_comm, &st);
      int n = -1;
      MPI_Get_count(&st, MPI_BYTE, &n);
      CHECK(n == size && mt_check(buf, size, 5) < 0, "bulk message %d corrupted", i);
    }
    long urgent = 0;
    MPI_Recv(&urgent, 1, MPI_LONG, 0, 2, urgent_comm, MPI_STATUS_IGNORE);
    CHECK(urgent == 0x5eed, "urgent message corrupted: %lx", urgent);
  }
  free(buf);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Comm_free(&urgent_comm);
  MPI_Comm_free(&bulk_comm);
}

int main(int argc, char** argv) {
  mt_start("comm_priority", &argc, &argv);
  hints();
  if (argc == 5 && strcmp(argv[1], "overtake") == 0) {
    CHECK(mt_size == 2, "overtake needs 2 processes");
    overtake(atoi(argv[2]), atoi(argv[3]), strcmp(argv[4], "hint") == 0);
  }
  return mt_pass();
}
