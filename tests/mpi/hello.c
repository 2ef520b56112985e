/* Environment: Init, rank/size, Initialized/Finalized, versions, processor name. */
#include "mpitest.h"

int main(int argc, char** argv) {
  int flag = -1;
  MPI_Initialized(&flag);
  if (flag != 0) { printf("FAIL hello: initialized before MPI_Init\n"); return 1; }
  mt_start("hello", &argc, &argv);
  MPI_Initialized(&flag);
  CHECK(flag == 1, "MPI_Initialized after MPI_Init");
  MPI_Finalized(&flag);
  CHECK(flag == 0, "MPI_Finalized before MPI_Finalize");
  int v = 0, sv = 0;
  MPI_Get_version(&v, &sv);
  CHECK(v == MPI_VERSION && sv == MPI_SUBVERSION && MPI_VERSION == 4 && MPI_SUBVERSION == 1, "version %d.%d", v, sv);
  char lib[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(lib, &len);
  CHECK(len > 0 && (int)strlen(lib) == len && strstr(lib, "nmad"), "library version '%s'", lib);
  char host[MPI_MAX_PROCESSOR_NAME];
  MPI_Get_processor_name(host, &len);
  CHECK(len > 0 && (int)strlen(host) == len, "processor name '%s'", host);
  CHECK(mt_rank >= 0 && mt_rank < mt_size, "rank %d of %d", mt_rank, mt_size);
  int srank = -1, ssize = -1;
  MPI_Comm_rank(MPI_COMM_SELF, &srank);
  MPI_Comm_size(MPI_COMM_SELF, &ssize);
  CHECK(srank == 0 && ssize == 1, "MPI_COMM_SELF rank %d size %d", srank, ssize);
  /* Set by the launcher tests (mpiexec -x / inherited environment). */
  const char* env = getenv("MPITEST_ENV");
  CHECK(!env || strcmp(env, "forwarded") == 0, "MPITEST_ENV='%s'", env);
  printf("Hello from rank %d of %d on %s\n", mt_rank, mt_size, host);
  int rank = mt_rank;
  MPI_Finalize();
  MPI_Finalized(&flag);
  if (flag != 1) { printf("FAIL hello: MPI_Finalized after MPI_Finalize\n"); return 1; }
  printf("PASS hello rank %d\n", rank);
  return 0;
}
