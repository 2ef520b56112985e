/* MPI 4.0/4.1 additions outside partitioned communication, sessions and
 * persistent collectives: MPI_Isendrecv(_replace), MPI_Comm_idup_with_info,
 * MPI_Info_get_string, MPI_Request_get_status_any/all/some, the status
 * accessors, MPI_Remove_error_class/code/string, MPI_ERRORS_ABORT and the
 * new error classes. Any number of ranks (a ring). */
#include "mpitest.h"

#define N 1000

static void isendrecv_ring(void) {
  const int right = (mt_rank + 1) % mt_size, left = (mt_rank + mt_size - 1) % mt_size;
  unsigned char out[N], in[N];
  mt_fill(out, N, mt_rank);
  memset(in, 0, N);
  MPI_Request r;
  CHECK(MPI_Isendrecv(out, N, MPI_BYTE, right, 11, in, N, MPI_BYTE, left, 11, MPI_COMM_WORLD, &r) == MPI_SUCCESS,
        "Isendrecv failed");
  MPI_Status st;
  CHECK(MPI_Wait(&r, &st) == MPI_SUCCESS, "Wait failed");
  CHECK(r == MPI_REQUEST_NULL, "request not released");
  CHECK(mt_check(in, N, left) < 0, "wrong byte at %ld", mt_check(in, N, left));
  CHECK(st.MPI_SOURCE == left && st.MPI_TAG == 11, "status source %d tag %d", st.MPI_SOURCE, st.MPI_TAG);
  int count = -1;
  MPI_Get_count(&st, MPI_BYTE, &count);
  CHECK(count == N, "count %d", count);

  /* MPI_ANY_SOURCE / MPI_ANY_TAG, completed by polling MPI_Test. */
  int v = 100 + mt_rank, got = -1, flag = 0;
  CHECK(MPI_Isendrecv(&v, 1, MPI_INT, right, 12 + mt_rank, &got, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG,
                      MPI_COMM_WORLD, &r) == MPI_SUCCESS, "Isendrecv any failed");
  while (!flag) MPI_Test(&r, &flag, &st);
  CHECK(got == 100 + left && st.MPI_SOURCE == left && st.MPI_TAG == 12 + left, "got %d from %d tag %d", got,
        st.MPI_SOURCE, st.MPI_TAG);

  /* MPI_PROC_NULL on both sides: completes at once, empty status. */
  CHECK(MPI_Isendrecv(out, N, MPI_BYTE, MPI_PROC_NULL, 1, in, N, MPI_BYTE, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &r) ==
            MPI_SUCCESS, "Isendrecv PROC_NULL failed");
  MPI_Wait(&r, &st);
  CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG, "PROC_NULL status %d %d", st.MPI_SOURCE,
        st.MPI_TAG);

  /* _replace with a strided type: every other int of 2*N is exchanged. */
  int buf[2 * N];
  for (int i = 0; i < 2 * N; ++i) buf[i] = (i % 2) ? -1 : mt_rank * 100000 + i;
  MPI_Datatype vec;
  MPI_Type_vector(N, 1, 2, MPI_INT, &vec);
  MPI_Type_commit(&vec);
  CHECK(MPI_Isendrecv_replace(buf, 1, vec, right, 13, left, 13, MPI_COMM_WORLD, &r) == MPI_SUCCESS,
        "Isendrecv_replace failed");
  MPI_Wait(&r, &st);
  for (int i = 0; i < 2 * N; ++i) {
    const int want = (i % 2) ? -1 : left * 100000 + i;
    CHECK(buf[i] == want, "replace: buf[%d] = %d, expected %d", i, buf[i], want);
  }
  MPI_Type_free(&vec);

  /* Freed while active: the data still arrives (checked on the peer's
   * side by the blocking receive). */
  int fv = 7000 + mt_rank, fr = -1;
  CHECK(MPI_Isendrecv(&fv, 1, MPI_INT, right, 14, &fr, 1, MPI_INT, left, 14, MPI_COMM_WORLD, &r) == MPI_SUCCESS,
        "Isendrecv (freed) failed");
  MPI_Request_free(&r);
  CHECK(r == MPI_REQUEST_NULL, "free did not null the handle");
  MPI_Barrier(MPI_COMM_WORLD);
  int sync = 0;
  MPI_Sendrecv(&fv, 1, MPI_INT, right, 15, &sync, 1, MPI_INT, left, 15, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  CHECK(sync == 7000 + left, "sync %d", sync);

  /* Bad arguments are reported, nothing started. */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  char text[MPI_MAX_ERROR_STRING];
  int e = MPI_Isendrecv(out, N, MPI_BYTE, mt_size, 1, in, N, MPI_BYTE, left, 1, MPI_COMM_WORLD, &r);
  CHECK(mt_error(e, text) == MPI_ERR_RANK, "bad dest gave %d (%s)", e, text);
  e = MPI_Isendrecv_replace(buf, -1, MPI_INT, right, 1, left, 1, MPI_COMM_WORLD, &r);
  CHECK(mt_error(e, text) == MPI_ERR_COUNT, "negative count gave %d (%s)", e, text);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

static void info_and_idup(void) {
  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "mpi_assert_no_any_tag", "true");
  MPI_Info_set(info, "color", "turquoise");
  int buflen = 0, flag = 0;
  CHECK(MPI_Info_get_string(info, "color", &buflen, NULL, &flag) == MPI_SUCCESS, "get_string query failed");
  CHECK(flag && buflen == 10, "query: flag %d buflen %d", flag, buflen);
  char small[4] = "xyz", full[16];
  buflen = 4;
  MPI_Info_get_string(info, "color", &buflen, small, &flag);
  CHECK(flag && buflen == 10 && strcmp(small, "tur") == 0, "truncated: %d '%s'", buflen, small);
  buflen = sizeof full;
  MPI_Info_get_string(info, "color", &buflen, full, &flag);
  CHECK(flag && buflen == 10 && strcmp(full, "turquoise") == 0, "full: %d '%s'", buflen, full);
  buflen = sizeof full;
  MPI_Info_get_string(info, "shape", &buflen, full, &flag);
  CHECK(!flag && buflen == (int)sizeof full, "absent key: flag %d buflen %d", flag, buflen);

  MPI_Comm dup;
  MPI_Request r;
  CHECK(MPI_Comm_idup_with_info(MPI_COMM_WORLD, info, &dup, &r) == MPI_SUCCESS, "idup_with_info failed");
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  MPI_Info got;
  MPI_Comm_get_info(dup, &got);
  buflen = sizeof full;
  MPI_Info_get_string(got, "color", &buflen, full, &flag);
  CHECK(flag && strcmp(full, "turquoise") == 0, "the new communicator's hints: flag %d '%s'", flag, full);
  int v = mt_rank, sum = -1;
  MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, dup);
  CHECK(sum == mt_size * (mt_size - 1) / 2, "allreduce on the dup: %d", sum);
  MPI_Info_free(&got);
  MPI_Comm_free(&dup);
  /* MPI_INFO_NULL: no hints (not the parent's). */
  MPI_Comm_idup_with_info(MPI_COMM_WORLD, MPI_INFO_NULL, &dup, &r);
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  MPI_Comm_get_info(dup, &got);
  buflen = sizeof full;
  MPI_Info_get_string(got, "color", &buflen, full, &flag);
  CHECK(!flag, "MPI_INFO_NULL kept a hint");
  MPI_Info_free(&got);
  MPI_Comm_free(&dup);
  MPI_Info_free(&info);
}

static void get_status_arrays(void) {
  const int right = (mt_rank + 1) % mt_size, left = (mt_rank + mt_size - 1) % mt_size;
  int in[3] = {-1, -1, -1}, out[3] = {1000 * mt_rank, 1000 * mt_rank + 1, 1000 * mt_rank + 2};
  MPI_Request rq[4];
  for (int i = 0; i < 3; ++i) MPI_Irecv(&in[i], 1, MPI_INT, left, 20 + i, MPI_COMM_WORLD, &rq[i]);
  rq[3] = MPI_REQUEST_NULL;
  int flag = 0, index = -1, outcount = -1, idx[4];
  MPI_Status st, sts[4];
  /* Nothing sent yet on tag 22: not all done. */
  MPI_Request_get_status_all(4, rq, &flag, sts);
  CHECK(!flag, "get_status_all true before any send");
  /* Nobody sends before every rank has checked: in a ring of 3 or more a
   * rank's left neighbour could otherwise send all three tags first. */
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Send(&out[0], 1, MPI_INT, right, 20, MPI_COMM_WORLD);
  while (!flag) MPI_Request_get_status_any(4, rq, &index, &flag, &st);
  CHECK(index == 0 && st.MPI_TAG == 20 && st.MPI_SOURCE == left, "any: index %d tag %d", index, st.MPI_TAG);
  CHECK(rq[0] != MPI_REQUEST_NULL, "get_status_any released the request");
  MPI_Send(&out[1], 1, MPI_INT, right, 21, MPI_COMM_WORLD);
  MPI_Send(&out[2], 1, MPI_INT, right, 22, MPI_COMM_WORLD);
  flag = 0;
  while (!flag) MPI_Request_get_status_all(4, rq, &flag, sts);
  for (int i = 0; i < 3; ++i)
    CHECK(sts[i].MPI_TAG == 20 + i && sts[i].MPI_ERROR == MPI_SUCCESS, "all: status %d tag %d", i, sts[i].MPI_TAG);
  MPI_Request_get_status_some(4, rq, &outcount, idx, sts);
  CHECK(outcount == 3 && idx[0] == 0 && idx[1] == 1 && idx[2] == 2, "some: %d", outcount);
  for (int i = 0; i < 3; ++i) CHECK(rq[i] != MPI_REQUEST_NULL, "request %d released", i);
  MPI_Waitall(4, rq, MPI_STATUSES_IGNORE);
  for (int i = 0; i < 3; ++i) CHECK(in[i] == 1000 * left + i, "in[%d] = %d", i, in[i]);
  /* No active request: any gives MPI_UNDEFINED with flag, some MPI_UNDEFINED. */
  MPI_Request_get_status_any(4, rq, &index, &flag, &st);
  CHECK(flag && index == MPI_UNDEFINED, "any on inactive: flag %d index %d", flag, index);
  MPI_Request_get_status_some(4, rq, &outcount, idx, sts);
  CHECK(outcount == MPI_UNDEFINED, "some on inactive: %d", outcount);

  /* Status accessors. */
  MPI_Status s;
  MPI_Status_set_source(&s, 3);
  MPI_Status_set_tag(&s, 44);
  MPI_Status_set_error(&s, MPI_ERR_TAG);
  int a = 0, b = 0, c = 0;
  MPI_Status_get_source(&s, &a);
  MPI_Status_get_tag(&s, &b);
  MPI_Status_get_error(&s, &c);
  CHECK(a == 3 && b == 44 && c == MPI_ERR_TAG && s.MPI_SOURCE == 3 && s.MPI_TAG == 44, "accessors %d %d %d", a, b, c);
}

static void errors_4x(void) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0, cls = -1;
  const int news[] = {MPI_ERR_SESSION, MPI_ERR_PROC_ABORTED, MPI_ERR_VALUE_TOO_LARGE, MPI_ERR_ERRHANDLER};
  for (int i = 0; i < 4; ++i) {
    CHECK(MPI_Error_string(news[i], text, &len) == MPI_SUCCESS && len > 0, "no string for %d", news[i]);
    CHECK(MPI_Error_class(news[i], &cls) == MPI_SUCCESS && cls == news[i], "class of %d: %d", news[i], cls);
    CHECK(news[i] <= MPI_ERR_LASTCODE, "%d above MPI_ERR_LASTCODE", news[i]);
  }
  MPI_Error_string(MPI_ERR_VALUE_TOO_LARGE, text, &len);
  CHECK(strstr(text, "MPI_ERR_VALUE_TOO_LARGE") != NULL, "string '%s'", text);

  /* MPI_ERRORS_ABORT is a handler a communicator can have. */
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  CHECK(MPI_Comm_set_errhandler(dup, MPI_ERRORS_ABORT) == MPI_SUCCESS, "set MPI_ERRORS_ABORT");
  MPI_Errhandler h;
  MPI_Comm_get_errhandler(dup, &h);
  CHECK(h == MPI_ERRORS_ABORT, "got handler %d", (int)h);
  MPI_Comm_free(&dup);

  /* Added classes and codes can be removed (MPI 4.1). */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int klass, code;
  MPI_Add_error_class(&klass);
  MPI_Add_error_code(klass, &code);
  MPI_Add_error_string(code, "a code of ours");
  int e = MPI_Remove_error_class(klass);
  CHECK(e != MPI_SUCCESS, "removed a class that still has a code");
  e = MPI_Remove_error_code(klass);
  CHECK(e != MPI_SUCCESS, "removed a class with MPI_Remove_error_code");
  CHECK(MPI_Remove_error_string(code) == MPI_SUCCESS, "remove string");
  MPI_Error_string(code, text, &len);
  CHECK(len == 0, "string after removal: '%s'", text);
  CHECK(MPI_Remove_error_code(code) == MPI_SUCCESS, "remove code");
  CHECK(MPI_Remove_error_class(klass) == MPI_SUCCESS, "remove class");
  CHECK(MPI_Error_class(code, &cls) != MPI_SUCCESS, "class of a removed code");
  CHECK(MPI_Remove_error_class(MPI_ERR_TAG) != MPI_SUCCESS, "removed a predefined class");
  /* Many add/remove cycles (as libraries loaded and unloaded do): each
   * removal costs the same however many came before, and a class keeps
   * refusing removal while one of its codes is left. */
  for (int k = 0; k < 20000; ++k) {
    int c1, c2, c3;
    MPI_Add_error_class(&c1);
    MPI_Add_error_code(c1, &c2);
    MPI_Add_error_code(c1, &c3);
    CHECK(MPI_Remove_error_code(c2) == MPI_SUCCESS, "cycle %d: remove code", k);
    if (k % 1000 == 0) CHECK(MPI_Remove_error_class(c1) != MPI_SUCCESS, "cycle %d: class removed with a code", k);
    CHECK(MPI_Remove_error_code(c3) == MPI_SUCCESS && MPI_Remove_error_class(c1) == MPI_SUCCESS, "cycle %d", k);
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

static void value_index(void) {
  MPI_Datatype t = MPI_BYTE;
  MPI_Type_get_value_index(MPI_DOUBLE, MPI_INT, &t);
  CHECK(t == MPI_DOUBLE_INT, "double/int gave %d", (int)t);
  MPI_Type_get_value_index(MPI_INT, MPI_INT, &t);
  CHECK(t == MPI_2INT, "int/int gave %d", (int)t);
  MPI_Type_get_value_index(MPI_LONG_DOUBLE, MPI_INT, &t);
  CHECK(t == MPI_LONG_DOUBLE_INT, "long double/int gave %d", (int)t);
  MPI_Type_get_value_index(MPI_DOUBLE, MPI_LONG, &t);
  CHECK(t == MPI_DATATYPE_NULL, "double/long gave %d", (int)t);
  /* The pair type works with MINLOC. */
  struct { double v; int i; } in = {(double)(mt_rank % 2), mt_rank}, out;
  MPI_Type_get_value_index(MPI_DOUBLE, MPI_INT, &t);
  MPI_Allreduce(&in, &out, 1, t, MPI_MAXLOC, MPI_COMM_WORLD);
  CHECK(out.v == (mt_size > 1 ? 1.0 : 0.0) && out.i == (mt_size > 1 ? 1 : 0), "maxloc %g at %d", out.v, out.i);
}

static void hw_info(void) {
  MPI_Info hw;
  CHECK(MPI_Get_hw_resource_info(&hw) == MPI_SUCCESS, "Get_hw_resource_info");
  char v[MPI_MAX_INFO_VAL + 1], key[MPI_MAX_INFO_KEY + 1];
  int buflen = sizeof v, flag = 0, nkeys = 0;
  MPI_Info_get_string(hw, "hwloc://Machine", &buflen, v, &flag);
  CHECK(flag && strcmp(v, "0") == 0, "hwloc://Machine: flag %d '%s'", flag, v);
  MPI_Info_get_nkeys(hw, &nkeys);
  for (int i = 0; i < nkeys; ++i) {
    MPI_Info_get_nthkey(hw, i, key);
    CHECK(strncmp(key, "hwloc://", 8) == 0, "key '%s'", key);
    buflen = sizeof v;
    MPI_Info_get_string(hw, key, &buflen, v, &flag);
    char* end = NULL;
    const long at = strtol(v, &end, 10);
    CHECK(strcmp(v, "spans") == 0 || (*end == 0 && at >= 0), "%s = '%s'", key, v);
  }
  /* Bound to one PU (NMAD_HW_BINDING in the test), every level has an index. */
  const char* b = getenv("MPI4_EXPECT_BOUND");
  if (b && *b == '1') {
    buflen = sizeof v;
    MPI_Info_get_string(hw, "hwloc://PU", &buflen, v, &flag);
    CHECK(flag && strcmp(v, "spans") != 0, "bound process: hwloc://PU '%s'", v);
  }
  MPI_Info_free(&hw);
}

int main(int argc, char** argv) {
  mt_start("mpi4_basics", &argc, &argv);
  isendrecv_ring();
  info_and_idup();
  get_status_arrays();
  errors_4x();
  value_index();
  hw_info();
  return mt_pass();
}
