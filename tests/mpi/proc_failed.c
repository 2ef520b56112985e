/* A rank that dies: with MPI_ERRORS_RETURN the others' receives from it
 * fail with MPI_ERR_PROC_FAILED (the launcher reports the dead rank and the
 * job's exit status is the dead rank's), and the MPI_T event
 * nmad_rail_failed names it. */
#include <unistd.h>

#include "mpitest.h"

static int failed_peer = -1;
static char failed_what[96];
static void on_rail_failed(MPI_T_event_instance ev, MPI_T_event_registration reg, MPI_T_cb_safety safety, void* user) {
  (void)reg, (void)safety, (void)user;
  struct {
    int peer;
    char what[96];
  } d;
  MPI_T_event_copy(ev, &d);
  if (failed_peer < 0 || d.peer == 1) {
    failed_peer = d.peer;
    memcpy(failed_what, d.what, sizeof failed_what);
  }
}

int main(int argc, char** argv) {
  mt_start("proc_failed", &argc, &argv);
  CHECK(mt_size >= 2, "needs 2+ processes");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int provided, ev = -1;
  MPI_T_event_registration reg;
  MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
  CHECK(MPI_T_event_get_index("nmad_rail_failed", &ev) == MPI_SUCCESS &&
            MPI_T_event_handle_alloc(ev, NULL, MPI_INFO_NULL, &reg) == MPI_SUCCESS &&
            MPI_T_event_register_callback(reg, MPI_T_CB_REQUIRE_NONE, MPI_INFO_NULL, NULL, on_rail_failed) ==
                MPI_SUCCESS, "rail_failed registration");
  int v = 0;
  if (mt_rank == 1) {
    /* Hear from everyone (so every rank is past MPI_Init and connected to
     * us), then die without MPI_Finalize. */
    for (int p = 0; p < mt_size; ++p)
      if (p != 1) MPI_Recv(&v, 1, MPI_INT, p, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    fflush(stdout);
    _exit(3);
  }
  MPI_Send(&v, 1, MPI_INT, 1, 0, MPI_COMM_WORLD);
  MPI_Status st;
  int err = MPI_Recv(&v, 1, MPI_INT, 1, 1, MPI_COMM_WORLD, &st);
  int cls = -1;
  MPI_Error_class(err, &cls);
  CHECK(cls == MPI_ERR_PROC_FAILED, "receive from the dead rank: error %d", err);
  char text[MPI_MAX_ERROR_STRING];
  int len;
  MPI_Error_string(err, text, &len);
  printf("rank %d saw: %s\n", mt_rank, text);
  CHECK(strstr(text, "rank 1 ") != NULL, "the error string '%s' does not name rank 1", text);
  /* The connection's own failure may come a moment after another rank's
   * report of it: progress until the event is delivered. */
  const double t0 = MPI_Wtime();
  int flag;
  while (failed_peer != 1 && MPI_Wtime() - t0 < 10) MPI_Iprobe(MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, &flag, &st);
  CHECK(failed_peer == 1 && strchr(failed_what, ':'), "rail_failed event: peer %d, \"%s\"", failed_peer,
        failed_what);
  MPI_T_event_handle_free(reg, NULL, NULL);
  MPI_T_finalize();
  return mt_pass();
}
