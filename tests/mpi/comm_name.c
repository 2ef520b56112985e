/* Communicator names: the predefined ones, empty for new communicators,
 * set/get, truncation to MPI_MAX_OBJECT_NAME - 1, not copied by dup. */
#include "mpitest.h"

int main(int argc, char** argv) {
  mt_start("comm_name", &argc, &argv);
  char name[MPI_MAX_OBJECT_NAME];
  int len = -1;
  MPI_Comm_get_name(MPI_COMM_WORLD, name, &len);
  CHECK(strcmp(name, "MPI_COMM_WORLD") == 0 && len == 14, "world: '%s' %d", name, len);
  MPI_Comm_get_name(MPI_COMM_SELF, name, &len);
  CHECK(strcmp(name, "MPI_COMM_SELF") == 0 && len == 13, "self: '%s' %d", name, len);
  MPI_Comm d;
  MPI_Comm_dup(MPI_COMM_WORLD, &d);
  MPI_Comm_get_name(d, name, &len);
  CHECK(len == 0 && name[0] == '\0', "new comm: '%s' %d", name, len);
  MPI_Comm_set_name(d, "my duplicate");
  MPI_Comm_get_name(d, name, &len);
  CHECK(strcmp(name, "my duplicate") == 0 && len == 12, "set: '%s' %d", name, len);
  MPI_Comm_set_name(d, "renamed");
  MPI_Comm_get_name(d, name, &len);
  CHECK(strcmp(name, "renamed") == 0 && len == 7, "renamed: '%s' %d", name, len);
  char longname[300];
  memset(longname, 'x', sizeof longname - 1);
  longname[sizeof longname - 1] = '\0';
  MPI_Comm_set_name(d, longname);
  MPI_Comm_get_name(d, name, &len);
  CHECK(len == MPI_MAX_OBJECT_NAME - 1 && (int)strlen(name) == len, "truncated to %d", len);
  MPI_Comm d2;
  MPI_Comm_dup(d, &d2);
  MPI_Comm_get_name(d2, name, &len);
  CHECK(len == 0, "dup does not copy the name: %d", len);
  /* Even MPI_COMM_WORLD can be renamed (names are local). */
  MPI_Comm_set_name(MPI_COMM_WORLD, mt_rank == 0 ? "zero" : "other");
  MPI_Comm_get_name(MPI_COMM_WORLD, name, &len);
  CHECK(strcmp(name, mt_rank == 0 ? "zero" : "other") == 0, "world renamed '%s'", name);
  MPI_Comm_set_name(MPI_COMM_WORLD, "MPI_COMM_WORLD");
  MPI_Comm_free(&d2);
  MPI_Comm_free(&d);
  return mt_pass();
}
