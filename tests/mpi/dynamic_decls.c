/* Process creation and management: spawning, ports and the name service
 * are declared but not provided (MPI_ERR_UNSUPPORTED_OPERATION through the
 * error handler, output handles set to MPI_COMM_NULL, every spawn error
 * code set); MPI_Comm_disconnect works on intra- and intercommunicators
 * (the handle becomes MPI_COMM_NULL, messages sent before it are received)
 * and refuses the predefined ones; the new classes have names. */
#include "mpitest.h"

static int cls(int err) {
  char text[MPI_MAX_ERROR_STRING];
  return mt_error(err, text);
}

int main(int argc, char** argv) {
  mt_start("dynamic_decls", &argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  MPI_Comm inter = MPI_COMM_WORLD;
  int codes[3] = {0, 0, 0};
  char* args[] = {"x", NULL};
  CHECK(cls(MPI_Comm_spawn("/bin/true", args, 3, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter, codes)) ==
            MPI_ERR_UNSUPPORTED_OPERATION, "Comm_spawn");
  CHECK(inter == MPI_COMM_NULL, "Comm_spawn sets MPI_COMM_NULL");
  for (int i = 0; i < 3; ++i) CHECK(codes[i] == MPI_ERR_UNSUPPORTED_OPERATION, "errcode %d is %d", i, codes[i]);
  inter = MPI_COMM_WORLD;
  CHECK(cls(MPI_Comm_spawn("/bin/true", MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter,
                           MPI_ERRCODES_IGNORE)) == MPI_ERR_UNSUPPORTED_OPERATION, "Comm_spawn, codes ignored");
  char* cmds[] = {"/bin/true", "/bin/false"};
  int maxprocs[] = {1, 2};
  MPI_Info infos[] = {MPI_INFO_NULL, MPI_INFO_NULL};
  inter = MPI_COMM_WORLD;
  codes[2] = 0;
  CHECK(cls(MPI_Comm_spawn_multiple(2, cmds, MPI_ARGVS_NULL, maxprocs, infos, 0, MPI_COMM_WORLD, &inter, codes)) ==
            MPI_ERR_UNSUPPORTED_OPERATION, "Comm_spawn_multiple");
  CHECK(inter == MPI_COMM_NULL && codes[2] == MPI_ERR_UNSUPPORTED_OPERATION, "Comm_spawn_multiple outputs");
  CHECK(cls(MPI_Comm_spawn("/bin/true", MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0, 4242, &inter, MPI_ERRCODES_IGNORE)) ==
            MPI_ERR_COMM, "Comm_spawn on an invalid communicator");

  char port[MPI_MAX_PORT_NAME] = "junk";
  CHECK(cls(MPI_Open_port(MPI_INFO_NULL, port)) == MPI_ERR_UNSUPPORTED_OPERATION && port[0] == '\0', "Open_port");
  CHECK(cls(MPI_Close_port("p")) == MPI_ERR_UNSUPPORTED_OPERATION, "Close_port");
  MPI_Comm nc = MPI_COMM_WORLD;
  CHECK(cls(MPI_Comm_accept("p", MPI_INFO_NULL, 0, MPI_COMM_SELF, &nc)) == MPI_ERR_UNSUPPORTED_OPERATION &&
            nc == MPI_COMM_NULL, "Comm_accept");
  nc = MPI_COMM_WORLD;
  CHECK(cls(MPI_Comm_connect("p", MPI_INFO_NULL, 0, MPI_COMM_SELF, &nc)) == MPI_ERR_UNSUPPORTED_OPERATION &&
            nc == MPI_COMM_NULL, "Comm_connect");
  nc = MPI_COMM_WORLD;
  CHECK(cls(MPI_Comm_join(0, &nc)) == MPI_ERR_UNSUPPORTED_OPERATION && nc == MPI_COMM_NULL, "Comm_join");
  CHECK(cls(MPI_Publish_name("svc", MPI_INFO_NULL, "p")) == MPI_ERR_UNSUPPORTED_OPERATION, "Publish_name");
  CHECK(cls(MPI_Unpublish_name("svc", MPI_INFO_NULL, "p")) == MPI_ERR_UNSUPPORTED_OPERATION, "Unpublish_name");
  strcpy(port, "junk");
  CHECK(cls(MPI_Lookup_name("svc", MPI_INFO_NULL, port)) == MPI_ERR_UNSUPPORTED_OPERATION && port[0] == '\0',
        "Lookup_name");
  MPI_Comm parent = MPI_COMM_WORLD;
  CHECK(MPI_Comm_get_parent(&parent) == MPI_SUCCESS && parent == MPI_COMM_NULL, "no parent");

  /* Disconnect: a duplicate carrying a message sent just before. */
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  int token = -1;
  MPI_Request rq;
  MPI_Irecv(&token, 1, MPI_INT, (rank + size - 1) % size, 5, dup, &rq);
  int mine = 100 + rank;
  MPI_Send(&mine, 1, MPI_INT, (rank + 1) % size, 5, dup);
  MPI_Wait(&rq, MPI_STATUS_IGNORE);
  CHECK(MPI_Comm_disconnect(&dup) == MPI_SUCCESS && dup == MPI_COMM_NULL, "Comm_disconnect of a duplicate");
  CHECK(token == 100 + (rank + size - 1) % size, "token %d", token);
  /* An intercommunicator between the even and the odd ranks. */
  if (size >= 2) {
    MPI_Comm half, ic;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, rank % 2 ? 0 : 1, 9, &ic);
    int rs = 0;
    MPI_Comm_remote_size(ic, &rs);
    CHECK(rs == (rank % 2 ? (size + 1) / 2 : size / 2), "remote size %d", rs);
    CHECK(MPI_Comm_disconnect(&ic) == MPI_SUCCESS && ic == MPI_COMM_NULL, "Comm_disconnect of an intercommunicator");
    MPI_Comm_free(&half);
  }
  MPI_Comm w = MPI_COMM_WORLD;
  CHECK(cls(MPI_Comm_disconnect(&w)) == MPI_ERR_COMM && w == MPI_COMM_WORLD, "Comm_disconnect(MPI_COMM_WORLD)");
  MPI_Comm bad = 4242;
  CHECK(cls(MPI_Comm_disconnect(&bad)) == MPI_ERR_COMM, "Comm_disconnect of an invalid handle");

  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(MPI_ERR_SPAWN, text, &len);
  CHECK(strncmp(text, "MPI_ERR_SPAWN:", 14) == 0, "MPI_ERR_SPAWN string: %s", text);
  MPI_Error_string(MPI_ERR_NAME, text, &len);
  CHECK(strncmp(text, "MPI_ERR_NAME:", 13) == 0, "MPI_ERR_NAME string: %s", text);
  int c = 0;
  MPI_Error_class(MPI_ERR_PORT, &c);
  CHECK(c == MPI_ERR_PORT && MPI_ERR_LASTCODE >= MPI_ERR_NAME, "classes");
  return mt_pass();
}
