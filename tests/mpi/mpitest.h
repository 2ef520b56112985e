/* Helpers for the MPI test programs: each rank checks its results, prints
 * "PASS <name> rank <r>" at the end, or "FAIL <name>: rank <r>: ..." and
 * aborts the job (exit status non-zero). */
#ifndef NMAD_MPITEST_H
#define NMAD_MPITEST_H
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char* mt_name = "?";
static int mt_rank = -1;
static int mt_size = 0;

static inline void mt_start(const char* name, int* argc, char*** argv) {
  mt_name = name;
  MPI_Init(argc, argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &mt_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &mt_size);
}

static inline void mt_fail(int line, const char* cond, const char* fmt, ...) {
  va_list ap;
  printf("FAIL %s: rank %d: line %d: (%s) ", mt_name, mt_rank, line, cond);
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  printf("\n");
  fflush(stdout);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

#define CHECK(cond, ...)                                  \
  do {                                                    \
    if (!(cond)) mt_fail(__LINE__, #cond, __VA_ARGS__);   \
  } while (0)

/* Finalizes, then prints the verdict. */
static inline int mt_pass(void) {
  MPI_Finalize();
  printf("PASS %s rank %d\n", mt_name, mt_rank);
  fflush(stdout);
  return 0;
}

static inline unsigned char mt_byte(int seed, long i) { return (unsigned char)((i * 131 + seed * 7 + (i >> 8)) & 0xff); }
static inline void mt_fill(unsigned char* p, long n, int seed) {
  for (long i = 0; i < n; ++i) p[i] = mt_byte(seed, i);
}
static inline long mt_check(const unsigned char* p, long n, int seed) { /* index of first bad byte, or -1 */
  for (long i = 0; i < n; ++i)
    if (p[i] != mt_byte(seed, i)) return i;
  return -1;
}
/* The class of MPI error code err; its string goes to text. */
static inline int mt_error(int err, char text[MPI_MAX_ERROR_STRING]) {
  int cls = -1, len = 0;
  text[0] = 0;
  MPI_Error_class(err, &cls);
  MPI_Error_string(err, text, &len);
  return cls;
}
/* A file name for MPI-IO tests, the same on every rank of comm: in
 * $TEST_TMPDIR (else /tmp), with rank 0's pid so concurrent runs differ. */
static inline void mt_tmpname(MPI_Comm comm, const char* tag, char* out, size_t n) {
  long pid = (long)getpid();
  MPI_Bcast(&pid, 1, MPI_LONG, 0, comm);
  const char* dir = getenv("TEST_TMPDIR");
  snprintf(out, n, "%s/nmad_%s_%ld", dir && *dir ? dir : "/tmp", tag, pid);
}
#endif
