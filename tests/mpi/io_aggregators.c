/* MPI-IO aggregators chosen from the topology: by default one per NUMA
 * node holding processes on every host, the first process of each; more
 * (cb_nodes) go round robin over a host's NUMA nodes, then over hosts.
 * MPI_File_get_info reports them as "nmad_aggregators". The expected
 * default list comes from the environment (IO_EXPECT_AGGREGATORS, set by
 * the test for the topology and hosts it emulates); the cb_nodes=1 and
 * cb_nodes=size lists must extend it; an interleaved collective write
 * through the default aggregators is checked byte by byte. */
#include <fcntl.h>

#include "mpitest.h"

static long slurp(const char* name, unsigned char* buf, long max) {
  int fd = open(name, O_RDONLY);
  long n = fd >= 0 ? (long)pread(fd, buf, max, 0) : -1;
  if (fd >= 0) close(fd);
  return n;
}

/* Opens name with cb_nodes (0: no hint) and returns the reported lists. */
static MPI_File open_with(const char* name, int cb_nodes, char* aggs, int* nodes) {
  MPI_Info info = MPI_INFO_NULL;
  if (cb_nodes > 0) {
    char v[16];
    snprintf(v, sizeof v, "%d", cb_nodes);
    MPI_Info_create(&info);
    MPI_Info_set(info, "cb_nodes", v);
  }
  MPI_File fh;
  CHECK(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_RDWR | MPI_MODE_CREATE, info, &fh) == MPI_SUCCESS, "open");
  if (info != MPI_INFO_NULL) MPI_Info_free(&info);
  MPI_Info used;
  MPI_File_get_info(fh, &used);
  int flag = 0;
  char v[MPI_MAX_INFO_VAL + 1];
  MPI_Info_get(used, "nmad_aggregators", MPI_MAX_INFO_VAL, aggs, &flag);
  CHECK(flag, "nmad_aggregators reported");
  MPI_Info_get(used, "cb_nodes", MPI_MAX_INFO_VAL, v, &flag);
  CHECK(flag, "cb_nodes reported");
  *nodes = atoi(v);
  MPI_Info_free(&used);
  return fh;
}

int main(int argc, char** argv) {
  mt_start("io_aggregators", &argc, &argv);
  const char* expect = getenv("IO_EXPECT_AGGREGATORS");
  CHECK(expect != NULL, "IO_EXPECT_AGGREGATORS is set by the test");
  char name[512];
  mt_tmpname(MPI_COMM_WORLD, "aggs", name, sizeof name);
  char aggs[MPI_MAX_INFO_VAL + 1];
  int nodes = 0;

  MPI_File fh = open_with(name, 0, aggs, &nodes);
  CHECK(strcmp(aggs, expect) == 0, "default aggregators '%s', expected '%s'", aggs, expect);
  int commas = 0;
  for (const char* p = expect; *p; ++p) commas += *p == ',';
  CHECK(nodes == commas + 1, "default cb_nodes %d for '%s'", nodes, expect);

  /* The default aggregators write an interleaved array collectively. */
  enum { K = 4096 };
  MPI_Datatype one;
  MPI_Type_create_resized(MPI_INT, 0, (MPI_Aint)sizeof(int) * mt_size, &one);
  MPI_Type_commit(&one);
  MPI_File_set_view(fh, (MPI_Offset)sizeof(int) * mt_rank, MPI_INT, one, "native", MPI_INFO_NULL);
  int* data = malloc(sizeof(int) * K);
  for (int k = 0; k < K; ++k) data[k] = k * mt_size + mt_rank;
  MPI_Status st;
  CHECK(MPI_File_write_all(fh, data, K, MPI_INT, &st) == MPI_SUCCESS, "write_all");
  MPI_Barrier(MPI_COMM_WORLD);
  int* all = malloc(sizeof(int) * K * mt_size + 16);
  CHECK(slurp(name, (unsigned char*)all, (long)sizeof(int) * K * mt_size + 16) == (long)sizeof(int) * K * mt_size,
        "file size");
  for (int k = 0; k < K * mt_size; ++k) CHECK(all[k] == k, "int %d is %d", k, all[k]);
  MPI_Type_free(&one);
  CHECK(MPI_File_close(&fh) == MPI_SUCCESS, "close");

  /* cb_nodes=1: the first of the default list. */
  fh = open_with(name, 1, aggs, &nodes);
  const size_t first = strcspn(expect, ",");
  CHECK(nodes == 1 && strlen(aggs) == first && strncmp(aggs, expect, first) == 0, "cb_nodes=1 gives '%s'", aggs);
  MPI_File_close(&fh);
  /* cb_nodes=size: every rank once, the default list first. */
  fh = open_with(name, mt_size, aggs, &nodes);
  CHECK(nodes == mt_size && strncmp(aggs, expect, strlen(expect)) == 0, "cb_nodes=%d gives '%s'", mt_size, aggs);
  int seen[64] = {0}, n = 0;
  for (char* tok = strtok(aggs, ","); tok; tok = strtok(NULL, ",")) {
    const int r = atoi(tok);
    CHECK(r >= 0 && r < mt_size && !seen[r], "rank %d listed once", r);
    seen[r] = 1;
    ++n;
  }
  CHECK(n == mt_size, "%d aggregators for %d processes", n, mt_size);
  MPI_File_close(&fh);
  MPI_Barrier(MPI_COMM_WORLD);
  if (mt_rank == 0) MPI_File_delete(name, MPI_INFO_NULL);
  free(data);
  free(all);
  return mt_pass();
}
