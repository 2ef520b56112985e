/* The MPI 4.0 large-count ("_c") bindings beyond point-to-point:
 * datatype constructors with displacements and strides above 2^31 (checked
 * through MPI_Type_get_extent_c, MPI_Type_get_envelope_c and
 * MPI_Type_get_contents_c; the int envelope refuses them), Pack_c/Unpack_c,
 * Pack_size_c, Pack_external_c round trips, MPI_Op_create_c used by
 * MPI_Reduce_local_c, MPI_Allreduce and MPI_Iallreduce, MPI-IO _c write
 * and read round trips, and the one-sided _c forms (Win_allocate_c,
 * Win_shared_query_c, Put_c, Accumulate_c, Rget_c, Win_create_c). Any
 * number of ranks. */
#include <stdint.h>

#include "mpitest.h"

#define G ((MPI_Count)1 << 32) /* a displacement no int holds */

static void check_envelope(MPI_Datatype t, int combiner, MPI_Count ni, MPI_Count na, MPI_Count nc, MPI_Count nd,
                           const MPI_Count* want_counts, const char* what) {
  MPI_Count gi = -1, ga = -1, gc = -1, gd = -1;
  int comb = -1;
  CHECK(MPI_Type_get_envelope_c(t, &gi, &ga, &gc, &gd, &comb) == MPI_SUCCESS, "%s: envelope_c", what);
  CHECK(comb == combiner && gi == ni && ga == na && gc == nc && gd == nd,
        "%s: combiner %d, %lld ints, %lld addresses, %lld large counts, %lld types", what, comb, gi, ga, gc, gd);
  int ints[16];
  MPI_Aint addrs[16];
  MPI_Count counts[16];
  MPI_Datatype types[16];
  CHECK(MPI_Type_get_contents_c(t, 16, 16, 16, 16, ints, addrs, counts, types) == MPI_SUCCESS, "%s: contents_c", what);
  for (MPI_Count i = 0; i < nc; ++i)
    CHECK(counts[i] == want_counts[i], "%s: large count %lld = %lld, expected %lld", what, i, counts[i],
          want_counts[i]);
  for (MPI_Count i = 0; i < nd; ++i)
    if (types[i] > MPI_LONG_DOUBLE_INT) MPI_Type_free(&types[i]);
  /* The int forms cannot describe a large-count type. */
  int a, b, c, d;
  char text[MPI_MAX_ERROR_STRING];
  CHECK(mt_error(MPI_Type_get_envelope(t, &a, &b, &c, &d), text) == MPI_ERR_TYPE, "%s: int envelope: %s", what, text);
}

static void constructors(void) {
  MPI_Datatype t;
  MPI_Count lb = -1, ext = -1, tlb = -1, text = -1, size = -1;
  char msg[MPI_MAX_ERROR_STRING];

  /* hvector: 3 blocks of 2 doubles, 2^32 bytes apart. */
  CHECK(MPI_Type_create_hvector_c(3, 2, G, MPI_DOUBLE, &t) == MPI_SUCCESS, "hvector_c");
  MPI_Type_get_extent_c(t, &lb, &ext);
  MPI_Type_size_c(t, &size);
  CHECK(lb == 0 && ext == 2 * G + 16 && size == 48, "hvector_c: lb %lld extent %lld size %lld", lb, ext, size);
  {
    const MPI_Count want[] = {3, 2, G};
    check_envelope(t, MPI_COMBINER_HVECTOR, 0, 0, 3, 1, want, "hvector_c");
  }
  MPI_Type_free(&t);

  /* vector: stride in elements, 2^29 doubles = 2^32 bytes. */
  CHECK(MPI_Type_vector_c(2, 1, G / 8, MPI_DOUBLE, &t) == MPI_SUCCESS, "vector_c");
  MPI_Type_get_extent_c(t, &lb, &ext);
  CHECK(ext == G + 8, "vector_c extent %lld", ext);
  {
    const MPI_Count want[] = {2, 1, G / 8};
    check_envelope(t, MPI_COMBINER_VECTOR, 0, 0, 3, 1, want, "vector_c");
  }
  MPI_Type_free(&t);

  /* indexed: displacements in ints, one above 2^31 elements. */
  {
    const MPI_Count bl[] = {1, 3}, di[] = {0, G};
    CHECK(MPI_Type_indexed_c(2, bl, di, MPI_INT, &t) == MPI_SUCCESS, "indexed_c");
    MPI_Type_get_extent_c(t, &lb, &ext);
    MPI_Type_get_true_extent_c(t, &tlb, &text);
    CHECK(ext == 4 * G + 12 && text == ext && tlb == 0, "indexed_c extent %lld true %lld", ext, text);
    const MPI_Count want[] = {2, 1, 3, 0, G};
    check_envelope(t, MPI_COMBINER_INDEXED, 0, 0, 5, 1, want, "indexed_c");
    MPI_Type_free(&t);
  }
  /* hindexed: byte displacements. */
  {
    const MPI_Count bl[] = {2, 1}, di[] = {-8, G};
    CHECK(MPI_Type_create_hindexed_c(2, bl, di, MPI_INT, &t) == MPI_SUCCESS, "hindexed_c");
    MPI_Type_get_extent_c(t, &lb, &ext);
    CHECK(lb == -8 && ext == G + 12, "hindexed_c lb %lld extent %lld", lb, ext);
    const MPI_Count want[] = {2, 2, 1, -8, G};
    check_envelope(t, MPI_COMBINER_HINDEXED, 0, 0, 5, 1, want, "hindexed_c");
    MPI_Type_free(&t);
  }
  /* indexed_block and hindexed_block. */
  {
    const MPI_Count di[] = {G, 0};
    CHECK(MPI_Type_create_indexed_block_c(2, 2, di, MPI_SHORT, &t) == MPI_SUCCESS, "indexed_block_c");
    MPI_Type_get_extent_c(t, &lb, &ext);
    CHECK(lb == 0 && ext == 2 * G + 4, "indexed_block_c extent %lld", ext);
    const MPI_Count want[] = {2, 2, G, 0};
    check_envelope(t, MPI_COMBINER_INDEXED_BLOCK, 0, 0, 4, 1, want, "indexed_block_c");
    MPI_Type_free(&t);
    CHECK(MPI_Type_create_hindexed_block_c(2, 2, di, MPI_SHORT, &t) == MPI_SUCCESS, "hindexed_block_c");
    MPI_Type_get_extent_c(t, &lb, &ext);
    CHECK(lb == 0 && ext == G + 4, "hindexed_block_c extent %lld", ext);
    check_envelope(t, MPI_COMBINER_HINDEXED_BLOCK, 0, 0, 4, 1, want, "hindexed_block_c");
    MPI_Type_free(&t);
  }
  /* struct: an int at 0, 2 doubles at 2^32. */
  {
    const MPI_Count bl[] = {1, 2}, di[] = {0, G};
    const MPI_Datatype ty[] = {MPI_INT, MPI_DOUBLE};
    CHECK(MPI_Type_create_struct_c(2, bl, di, ty, &t) == MPI_SUCCESS, "struct_c");
    MPI_Type_get_extent_c(t, &lb, &ext);
    MPI_Type_size_c(t, &size);
    CHECK(lb == 0 && ext == G + 16 && size == 20, "struct_c extent %lld size %lld", ext, size);
    const MPI_Count want[] = {2, 1, 2, 0, G};
    check_envelope(t, MPI_COMBINER_STRUCT, 0, 0, 5, 2, want, "struct_c");
    MPI_Type_free(&t);
  }
  /* resized: lb and extent above 2^31. */
  CHECK(MPI_Type_create_resized_c(MPI_INT, G, 3 * G, &t) == MPI_SUCCESS, "resized_c");
  MPI_Type_get_extent_c(t, &lb, &ext);
  CHECK(lb == G && ext == 3 * G, "resized_c lb %lld extent %lld", lb, ext);
  {
    const MPI_Count want[] = {G, 3 * G};
    check_envelope(t, MPI_COMBINER_RESIZED, 0, 0, 2, 1, want, "resized_c");
  }
  MPI_Type_free(&t);
  /* subarray: a 2^33-element row of chars, 4 of them from 2^32. */
  {
    const MPI_Count sizes[] = {2, 2 * G}, subs[] = {1, 4}, starts[] = {1, G};
    CHECK(MPI_Type_create_subarray_c(2, sizes, subs, starts, MPI_ORDER_C, MPI_CHAR, &t) == MPI_SUCCESS,
          "subarray_c");
    MPI_Type_get_extent_c(t, &lb, &ext);
    MPI_Type_get_true_extent_c(t, &tlb, &text);
    MPI_Type_size_c(t, &size);
    CHECK(lb == 0 && ext == 4 * G && tlb == 3 * G && text == 4 && size == 4,
          "subarray_c extent %lld true lb %lld true extent %lld", ext, tlb, text);
    const MPI_Count want[] = {2, 2 * G, 1, 4, 1, G};
    check_envelope(t, MPI_COMBINER_SUBARRAY, 2, 0, 6, 1, want, "subarray_c");
    MPI_Type_free(&t);
  }
  /* darray: a 2^32-element block distribution over 2 processes. */
  {
    const MPI_Count gs[] = {G};
    const int dist[] = {MPI_DISTRIBUTE_BLOCK}, darg[] = {MPI_DISTRIBUTE_DFLT_DARG}, ps[] = {2};
    CHECK(MPI_Type_create_darray_c(2, 1, 1, gs, dist, darg, ps, MPI_ORDER_C, MPI_CHAR, &t) == MPI_SUCCESS,
          "darray_c");
    MPI_Type_get_extent_c(t, &lb, &ext);
    MPI_Type_get_true_extent_c(t, &tlb, &text);
    MPI_Type_size_c(t, &size);
    CHECK(ext == G && tlb == G / 2 && size == G / 2, "darray_c extent %lld true lb %lld size %lld", ext, tlb, size);
    int sz = 0;
    MPI_Type_size(t, &sz);
    CHECK(sz == MPI_UNDEFINED, "Type_size above INT_MAX: %d", sz);
    check_envelope(t, MPI_COMBINER_DARRAY, 7, 0, 1, 1, gs, "darray_c");
    MPI_Type_free(&t);
  }
  /* contiguous: the int envelope of an int-built type still works, and
   * its _c envelope reports no large counts. */
  CHECK(MPI_Type_contiguous(5, MPI_INT, &t) == MPI_SUCCESS, "contiguous");
  {
    MPI_Count ni, na, nc, nd;
    int comb;
    MPI_Type_get_envelope_c(t, &ni, &na, &nc, &nd, &comb);
    CHECK(comb == MPI_COMBINER_CONTIGUOUS && ni == 1 && nc == 0 && nd == 1, "int-built envelope_c");
  }
  MPI_Type_free(&t);
  CHECK(MPI_Type_contiguous_c(G, MPI_INT, &t) == MPI_SUCCESS, "contiguous_c");
  {
    const MPI_Count want[] = {G};
    check_envelope(t, MPI_COMBINER_CONTIGUOUS, 0, 0, 1, 1, want, "contiguous_c");
  }
  MPI_Type_free(&t);
  /* Errors. */
  CHECK(mt_error(MPI_Type_contiguous_c(-1, MPI_INT, &t), msg) == MPI_ERR_COUNT, "negative count: %s", msg);
}

static void packing(void) {
  int in[10], out[10];
  for (int i = 0; i < 10; ++i) in[i] = i * 7 + mt_rank;
  MPI_Datatype vec;
  MPI_Type_vector_c(5, 1, 2, MPI_INT, &vec);
  MPI_Type_commit(&vec);
  MPI_Count size = 0, pos = 0;
  CHECK(MPI_Pack_size_c(2, vec, MPI_COMM_WORLD, &size) == MPI_SUCCESS && size == 40, "Pack_size_c %lld", size);
  char packed[64];
  CHECK(MPI_Pack_c(in, 1, vec, packed, sizeof packed, &pos, MPI_COMM_WORLD) == MPI_SUCCESS && pos == 20,
        "Pack_c position %lld", pos);
  CHECK(MPI_Pack_c(&in[1], 1, vec, packed, sizeof packed, &pos, MPI_COMM_WORLD) == MPI_SUCCESS && pos == 40,
        "Pack_c position %lld", pos);
  memset(out, 0, sizeof out);
  pos = 0;
  CHECK(MPI_Unpack_c(packed, 40, &pos, out, 10, MPI_INT, MPI_COMM_WORLD) == MPI_SUCCESS && pos == 40,
        "Unpack_c position %lld", pos);
  for (int i = 0; i < 10; ++i) {
    const int want = i < 5 ? in[2 * i] : in[2 * (i - 5) + 1];
    CHECK(out[i] == want, "unpacked[%d] = %d, expected %d", i, out[i], want);
  }
  char text[MPI_MAX_ERROR_STRING];
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  pos = 0;
  CHECK(mt_error(MPI_Pack_c(in, 2, vec, packed, 10, &pos, MPI_COMM_WORLD), text) == MPI_ERR_NO_SPACE,
        "Pack_c overflow: %s", text);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
  MPI_Type_free(&vec);
  /* external32: big-endian ints. */
  MPI_Count esize = 0;
  CHECK(MPI_Pack_external_size_c("external32", 3, MPI_INT, &esize) == MPI_SUCCESS && esize == 12, "ext size %lld",
        esize);
  unsigned char ext[12];
  pos = 0;
  const int three[] = {1, 0x01020304, -1};
  CHECK(MPI_Pack_external_c("external32", three, 3, MPI_INT, ext, 12, &pos) == MPI_SUCCESS && pos == 12,
        "Pack_external_c");
  CHECK(ext[3] == 1 && ext[4] == 1 && ext[5] == 2 && ext[7] == 4 && ext[8] == 0xff, "external32 bytes");
  int back[3] = {0, 0, 0};
  pos = 0;
  CHECK(MPI_Unpack_external_c("external32", ext, 12, &pos, back, 3, MPI_INT) == MPI_SUCCESS && pos == 12 &&
            back[0] == 1 && back[1] == 0x01020304 && back[2] == -1, "Unpack_external_c");
}

/* A user reduction with an MPI_Count length, associative (as MPI requires)
 * but not commutative: in op inout = in (the lower rank's operand wins:
 * the result of a reduction in rank order is rank 0's vector, any other
 * order gives another), and the largest length seen. */
static MPI_Count g_max_len = 0;
static int g_calls = 0;
static void keep_first(void* in, void* inout, MPI_Count* len, MPI_Datatype* type) {
  CHECK(*type == MPI_LONG_LONG, "datatype %d", *type);
  const long long* a = in;
  long long* b = inout;
  for (MPI_Count i = 0; i < *len; ++i) b[i] = a[i];
  if (*len > g_max_len) g_max_len = *len;
  ++g_calls;
}

static void sum_c(void* in, void* inout, MPI_Count* len, MPI_Datatype* type) {
  (void)type;
  const long long* a = in;
  long long* b = inout;
  for (MPI_Count i = 0; i < *len; ++i) b[i] += a[i];
}

static void reductions(void) {
  MPI_Op op;
  CHECK(MPI_Op_create_c(keep_first, 0, &op) == MPI_SUCCESS, "Op_create_c");
  int commute = -1;
  MPI_Op_commutative(op, &commute);
  CHECK(commute == 0, "commutative %d", commute);
  long long a[100], b[100];
  for (int i = 0; i < 100; ++i) a[i] = i, b[i] = 1000 + i;
  CHECK(MPI_Reduce_local_c(a, b, 100, MPI_LONG_LONG, op) == MPI_SUCCESS, "Reduce_local_c");
  for (int i = 0; i < 100; ++i) CHECK(b[i] == i, "Reduce_local_c[%d] = %lld", i, b[i]);
  CHECK(g_max_len == 100, "length %lld", g_max_len);
  /* Allreduce: ranks in order, r0 op r1 op ... = rank 0's vector. */
  long long mine[4], all[4];
  for (int i = 0; i < 4; ++i) mine[i] = (mt_rank + 1) * 10 + i;
  g_calls = 0;
  CHECK(MPI_Allreduce(mine, all, 4, MPI_LONG_LONG, op, MPI_COMM_WORLD) == MPI_SUCCESS, "Allreduce");
  for (int i = 0; i < 4; ++i) CHECK(all[i] == 10 + i, "Allreduce[%d] = %lld, expected %d", i, all[i], 10 + i);
  /* The same through the non-blocking form. */
  long long iall0[4] = {0, 0, 0, 0};
  MPI_Request r0;
  CHECK(MPI_Iallreduce(mine, iall0, 4, MPI_LONG_LONG, op, MPI_COMM_WORLD, &r0) == MPI_SUCCESS, "Iallreduce");
  MPI_Wait(&r0, MPI_STATUS_IGNORE);
  for (int i = 0; i < 4; ++i) CHECK(iall0[i] == 10 + i, "Iallreduce[%d] = %lld, expected %d", i, iall0[i], 10 + i);
  if (mt_size > 1) CHECK(g_calls > 0, "the _c user function was not called");
  MPI_Op_free(&op);
  /* Iallreduce with a commutative _c op (a sum). */
  MPI_Op sum;
  CHECK(MPI_Op_create_c(sum_c, 1, &sum) == MPI_SUCCESS, "Op_create_c sum");
  MPI_Request r;
  long long iall[4];
  CHECK(MPI_Iallreduce(mine, iall, 4, MPI_LONG_LONG, sum, MPI_COMM_WORLD, &r) == MPI_SUCCESS, "Iallreduce");
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  for (int i = 0; i < 4; ++i)
    CHECK(iall[i] == 10LL * mt_size * (mt_size + 1) / 2 + (long long)i * mt_size, "Iallreduce[%d] = %lld", i,
          iall[i]);
  MPI_Op_free(&sum);
}

static void file_io(void) {
  char name[256];
  mt_tmpname(MPI_COMM_WORLD, "large_count", name, sizeof name);
  MPI_File fh;
  CHECK(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE,
                      MPI_INFO_NULL, &fh) == MPI_SUCCESS, "File_open %s", name);
  enum { M = 64 };
  int w[M], rd[M];
  for (int i = 0; i < M; ++i) w[i] = mt_rank * 1000 + i;
  const MPI_Offset at = (MPI_Offset)mt_rank * M * 4 * 6;
  MPI_Status st;
  MPI_Count c = 0;
  /* write_at_c / read_at_c */
  CHECK(MPI_File_write_at_c(fh, at, w, M, MPI_INT, &st) == MPI_SUCCESS, "write_at_c");
  MPI_Get_count_c(&st, MPI_INT, &c);
  CHECK(c == M, "write_at_c count %lld", c);
  memset(rd, 0, sizeof rd);
  CHECK(MPI_File_read_at_c(fh, at, rd, M, MPI_INT, &st) == MPI_SUCCESS && memcmp(rd, w, sizeof w) == 0, "read_at_c");
  /* collective, non-blocking and split forms at the next slots */
  CHECK(MPI_File_write_at_all_c(fh, at + M * 4, w, M, MPI_INT, &st) == MPI_SUCCESS, "write_at_all_c");
  MPI_Request r;
  CHECK(MPI_File_iwrite_at_c(fh, at + 2 * M * 4, w, M, MPI_INT, &r) == MPI_SUCCESS, "iwrite_at_c");
  MPI_Wait(&r, &st);
  CHECK(MPI_File_iwrite_at_all_c(fh, at + 3 * M * 4, w, M, MPI_INT, &r) == MPI_SUCCESS, "iwrite_at_all_c");
  MPI_Wait(&r, &st);
  CHECK(MPI_File_write_at_all_begin_c(fh, at + 4 * M * 4, w, M, MPI_INT) == MPI_SUCCESS, "write_at_all_begin_c");
  MPI_File_write_at_all_end(fh, w, &st);
  MPI_File_sync(fh);
  MPI_Barrier(MPI_COMM_WORLD);
  for (int k = 1; k <= 4; ++k) {
    memset(rd, 0, sizeof rd);
    switch (k) {
      case 1: CHECK(MPI_File_read_at_all_c(fh, at + k * M * 4, rd, M, MPI_INT, &st) == MPI_SUCCESS, "read_at_all_c"); break;
      case 2:
        CHECK(MPI_File_iread_at_c(fh, at + k * M * 4, rd, M, MPI_INT, &r) == MPI_SUCCESS, "iread_at_c");
        MPI_Wait(&r, &st);
        break;
      case 3:
        CHECK(MPI_File_iread_at_all_c(fh, at + k * M * 4, rd, M, MPI_INT, &r) == MPI_SUCCESS, "iread_at_all_c");
        MPI_Wait(&r, &st);
        break;
      case 4:
        CHECK(MPI_File_read_at_all_begin_c(fh, at + k * M * 4, rd, M, MPI_INT) == MPI_SUCCESS, "read_at_all_begin_c");
        MPI_File_read_at_all_end(fh, rd, &st);
        break;
    }
    CHECK(memcmp(rd, w, sizeof w) == 0, "read back form %d", k);
    MPI_Get_count_c(&st, MPI_INT, &c);
    CHECK(c == M, "form %d count %lld", k, c);
  }
  /* Individual pointer: write_c then seek and read_c. */
  MPI_File_seek(fh, at + 5 * M * 4, MPI_SEEK_SET);
  CHECK(MPI_File_write_c(fh, w, M / 2, MPI_INT, &st) == MPI_SUCCESS, "write_c");
  CHECK(MPI_File_write_all_c(fh, w + M / 2, M / 2, MPI_INT, &st) == MPI_SUCCESS, "write_all_c");
  MPI_File_seek(fh, at + 5 * M * 4, MPI_SEEK_SET);
  memset(rd, 0, sizeof rd);
  CHECK(MPI_File_read_c(fh, rd, M / 2, MPI_INT, &st) == MPI_SUCCESS, "read_c");
  CHECK(MPI_File_read_all_c(fh, rd + M / 2, M / 2, MPI_INT, &st) == MPI_SUCCESS, "read_all_c");
  CHECK(memcmp(rd, w, sizeof w) == 0, "individual pointer round trip");
  /* Shared pointer, ordered: rank order. */
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_File_seek_shared(fh, 0, MPI_SEEK_SET);
  CHECK(MPI_File_write_ordered_c(fh, w, M, MPI_INT, &st) == MPI_SUCCESS, "write_ordered_c");
  MPI_File_seek_shared(fh, 0, MPI_SEEK_SET);
  memset(rd, 0, sizeof rd);
  CHECK(MPI_File_read_ordered_c(fh, rd, M, MPI_INT, &st) == MPI_SUCCESS && memcmp(rd, w, sizeof w) == 0,
        "read_ordered_c");
  MPI_Count ext = 0;
  CHECK(MPI_File_get_type_extent_c(fh, MPI_DOUBLE, &ext) == MPI_SUCCESS && ext == 8, "get_type_extent_c %lld", ext);
  char text[MPI_MAX_ERROR_STRING];
  CHECK(mt_error(MPI_File_read_c(fh, rd, -1, MPI_INT, &st), text) == MPI_ERR_COUNT, "negative count: %s", text);
  CHECK(mt_error(MPI_Register_datarep_c("mine", MPI_CONVERSION_FN_NULL_C, MPI_CONVERSION_FN_NULL_C, NULL, NULL),
                 text) == MPI_ERR_UNSUPPORTED_OPERATION, "Register_datarep_c: %s", text);
  MPI_File_close(&fh);
}

static void one_sided(void) {
  /* The _c forms of windows and operations: MPI_Aint displacement units,
   * MPI_Count counts, the request form and the shared query. */
  int* mem = NULL;
  MPI_Win win;
  CHECK(MPI_Win_allocate_c((MPI_Aint)(8 * sizeof(int)), (MPI_Aint)sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem,
                           &win) == MPI_SUCCESS, "Win_allocate_c");
  for (int i = 0; i < 8; ++i) mem[i] = -1;
  MPI_Aint sz = 0, du = 0;
  int* base = NULL;
  CHECK(MPI_Win_shared_query_c(win, mt_rank, &sz, &du, &base) == MPI_SUCCESS && sz == 8 * (MPI_Aint)sizeof(int) &&
            du == (MPI_Aint)sizeof(int),
        "Win_shared_query_c: size %ld unit %ld", (long)sz, (long)du);
  const int next = (mt_rank + 1) % mt_size;
  const int v[4] = {mt_rank, mt_rank + 1, mt_rank + 2, mt_rank + 3};
  int got[4] = {0, 0, 0, 0};
  MPI_Request r = MPI_REQUEST_NULL;
  MPI_Win_fence(0, win);
  CHECK(MPI_Put_c(v, (MPI_Count)4, MPI_INT, next, 2, (MPI_Count)4, MPI_INT, win) == MPI_SUCCESS, "Put_c");
  MPI_Win_fence(0, win);
  CHECK(MPI_Accumulate_c(v, (MPI_Count)4, MPI_INT, next, 2, (MPI_Count)4, MPI_INT, MPI_SUM, win) == MPI_SUCCESS,
        "Accumulate_c");
  MPI_Win_fence(0, win);
  const int prev = (mt_rank + mt_size - 1) % mt_size;
  for (int i = 0; i < 4; ++i) CHECK(mem[2 + i] == 2 * (prev + i), "Put_c + Accumulate_c: [%d] = %d", 2 + i, mem[2 + i]);
  MPI_Win_lock(MPI_LOCK_SHARED, next, 0, win);
  CHECK(MPI_Rget_c(got, (MPI_Count)4, MPI_INT, next, 2, (MPI_Count)4, MPI_INT, win, &r) == MPI_SUCCESS, "Rget_c");
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  MPI_Win_unlock(next, win);
  for (int i = 0; i < 4; ++i) CHECK(got[i] == 2 * (mt_rank + i), "Rget_c: [%d] = %d", i, got[i]);
  MPI_Win_free(&win);
  int x = 0;
  CHECK(MPI_Win_create_c(&x, (MPI_Aint)sizeof x, (MPI_Aint)sizeof x, MPI_INFO_NULL, MPI_COMM_WORLD, &win) ==
            MPI_SUCCESS && win != MPI_WIN_NULL, "Win_create_c");
  MPI_Win_free(&win);
}

int main(int argc, char** argv) {
  mt_start("large_count_types", &argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  constructors();
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
  packing();
  reductions();
  file_io();
  one_sided();
  return mt_pass();
}
