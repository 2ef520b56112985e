/* Error handling with MPI_ERRORS_RETURN: argument errors return the right
 * class; Error_string names every class; a user error handler is called. */
#include "mpitest.h"

static int handler_calls = 0, handler_code = 0;
static void handler(MPI_Comm* comm, int* code, ...) {
  handler_calls++;
  handler_code = *code;
}

int main(int argc, char** argv) {
  mt_start("errors", &argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int v = 0;
  CHECK(MPI_Send(&v, 1, MPI_INT, mt_size, 0, MPI_COMM_WORLD) == MPI_ERR_RANK, "bad rank");
  CHECK(MPI_Send(&v, 1, MPI_INT, 0, -5, MPI_COMM_WORLD) == MPI_ERR_TAG, "bad tag");
  CHECK(MPI_Send(&v, -1, MPI_INT, 0, 0, MPI_COMM_WORLD) == MPI_ERR_COUNT, "bad count");
  CHECK(MPI_Send(&v, 1, (MPI_Datatype)12345, 0, 0, MPI_COMM_WORLD) == MPI_ERR_TYPE, "bad type");
  CHECK(MPI_Send(NULL, 1, MPI_INT, 0, 0, MPI_COMM_WORLD) == MPI_ERR_BUFFER, "null buffer");
  CHECK(MPI_Recv(&v, 1, MPI_INT, -7, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE) == MPI_ERR_RANK, "bad source");
  MPI_Request r = 4242;
  CHECK(MPI_Wait(&r, MPI_STATUS_IGNORE) == MPI_ERR_REQUEST, "bad request");
  /* An invalid communicator reports through MPI_COMM_WORLD's handler. */
  CHECK(MPI_Send(&v, 1, MPI_INT, 0, 0, (MPI_Comm)999) == MPI_ERR_COMM, "bad comm");
  int size = 0;
  CHECK(MPI_Comm_size(MPI_COMM_NULL, &size) == MPI_ERR_COMM, "null comm");
  MPI_Comm w = MPI_COMM_WORLD;
  CHECK(MPI_Comm_free(&w) == MPI_ERR_COMM, "freeing MPI_COMM_WORLD");

  const int classes[] = {MPI_SUCCESS, MPI_ERR_BUFFER, MPI_ERR_COUNT, MPI_ERR_TYPE, MPI_ERR_TAG, MPI_ERR_COMM,
                         MPI_ERR_RANK, MPI_ERR_REQUEST, MPI_ERR_ARG, MPI_ERR_TRUNCATE, MPI_ERR_OTHER,
                         MPI_ERR_INTERN, MPI_ERR_IN_STATUS, MPI_ERR_PROC_FAILED};
  for (unsigned i = 0; i < sizeof classes / sizeof classes[0]; ++i) {
    char s[MPI_MAX_ERROR_STRING];
    int len = 0, cls = -1;
    MPI_Error_string(classes[i], s, &len);
    CHECK(len > 0 && len < MPI_MAX_ERROR_STRING && (int)strlen(s) == len, "Error_string(%d)", classes[i]);
    CHECK(classes[i] == MPI_SUCCESS || strncmp(s, "MPI_ERR_", 8) == 0, "Error_string(%d) = '%s'", classes[i], s);
    MPI_Error_class(classes[i], &cls);
    CHECK(cls == classes[i], "Error_class(%d) = %d", classes[i], cls);
  }
  /* User handler on a duplicate; the duplicate inherits nothing else. */
  MPI_Comm d;
  MPI_Comm_dup(MPI_COMM_WORLD, &d);
  MPI_Errhandler eh;
  MPI_Comm_create_errhandler(handler, &eh);
  MPI_Comm_set_errhandler(d, eh);
  int err = MPI_Send(&v, 1, MPI_INT, 0, -1, d);
  CHECK(err == MPI_ERR_TAG && handler_calls == 1 && handler_code == MPI_ERR_TAG, "user handler: %d calls, code %d",
        handler_calls, handler_code);
  MPI_Comm_call_errhandler(d, MPI_ERR_OTHER);
  CHECK(handler_calls == 2 && handler_code == MPI_ERR_OTHER, "call_errhandler");
  MPI_Errhandler_free(&eh);
  CHECK(eh == MPI_ERRHANDLER_NULL, "Errhandler_free");
  MPI_Comm_free(&d);

  /* Added error classes and codes: each code reports its class, its string
   * is exactly the one set ("" before), MPI_LASTUSEDCODE follows, and a
   * user handler receives the added code. */
  int cls1, cls2, code1, code2, cls = -1, len = -1, *last = NULL, flag = 0;
  char s[MPI_MAX_ERROR_STRING];
  CHECK(MPI_Add_error_class(&cls1) == MPI_SUCCESS && cls1 > MPI_ERR_LASTCODE, "Add_error_class %d", cls1);
  MPI_Add_error_class(&cls2);
  CHECK(MPI_Add_error_code(cls1, &code1) == MPI_SUCCESS && code1 != cls1 && code1 != cls2, "Add_error_code");
  MPI_Add_error_code(MPI_ERR_OTHER, &code2);
  MPI_Error_class(code1, &cls);
  CHECK(cls == cls1, "class of added code %d is %d, expected %d", code1, cls, cls1);
  MPI_Error_class(code2, &cls);
  CHECK(cls == MPI_ERR_OTHER, "class of code added to MPI_ERR_OTHER is %d", cls);
  MPI_Error_class(cls2, &cls);
  CHECK(cls == cls2, "added class %d is its own class (%d)", cls2, cls);
  MPI_Error_string(code1, s, &len);
  CHECK(len == 0 && s[0] == '\0', "string of a code with none set: '%s' (%d)", s, len);
  CHECK(MPI_Add_error_string(code1, "disk on fire") == MPI_SUCCESS, "Add_error_string");
  MPI_Error_string(code1, s, &len);
  CHECK(strcmp(s, "disk on fire") == 0 && len == 12, "added string '%s' (%d)", s, len);
  CHECK(MPI_Add_error_string(MPI_ERR_TAG, "no") == MPI_ERR_ARG, "string on a predefined code");
  CHECK(MPI_Add_error_code(code1, &code2) == MPI_ERR_ARG, "a code is not a class");
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_LASTUSEDCODE, &last, &flag);
  CHECK(flag && last && *last >= code1 && *last >= cls2 && *last >= code2, "MPI_LASTUSEDCODE %d", last ? *last : -1);
  MPI_Comm_dup(MPI_COMM_WORLD, &d);
  MPI_Comm_create_errhandler(handler, &eh);
  MPI_Comm_set_errhandler(d, eh);
  MPI_Comm_call_errhandler(d, code1);
  CHECK(handler_calls == 3 && handler_code == code1, "call_errhandler with an added code: %d", handler_code);
  MPI_Errhandler_free(&eh);
  MPI_Comm_free(&d);
  return mt_pass();
}
