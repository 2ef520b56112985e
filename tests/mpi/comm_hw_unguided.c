/* MPI-4.0 Example 7.4's loop on whatever machine runs it: split with
 * MPI_COMM_TYPE_HW_UNGUIDED until MPI_COMM_NULL. Each level is strictly
 * smaller than its parent, names its resource type in its info (and in
 * MPIX_Get_hw_resource_info, with this communicator among its siblings),
 * and the levels come in a fixed order; a lone process gets MPI_COMM_NULL
 * at once. */
#include "mpitest.h"

static int level_rank(const char* name) {
  const char* order[] = {"Machine", "Package", "NUMANode", "L3Cache", "L2Cache", "L1Cache", "Core", "PU"};
  for (int i = 0; i < 8; ++i)
    if (strcmp(name, order[i]) == 0) return i;
  return -1;
}

int main(int argc, char** argv) {
  mt_start("comm_hw_unguided", &argc, &argv);
  MPI_Comm comm = MPI_COMM_WORLD;
  int levels = 0, size = mt_size;
  while (levels < 9) {
    MPI_Comm sub;
    int r;
    MPI_Comm_rank(comm, &r);
    MPI_Comm_split_type(comm, MPI_COMM_TYPE_HW_UNGUIDED, r, MPI_INFO_NULL, &sub);
    if (comm != MPI_COMM_WORLD) MPI_Comm_free(&comm);
    if (sub == MPI_COMM_NULL) break;
    int n;
    MPI_Comm_size(sub, &n);
    CHECK(n < size, "level %d: size %d not below its parent's %d", levels, n, size);
    MPI_Info info;
    char value[MPI_MAX_INFO_VAL + 1], name[MPI_MAX_OBJECT_NAME];
    int flag = 0, count, index;
    MPI_Comm_get_info(sub, &info);
    MPI_Info_get(info, "mpi_hw_resource_type", MPI_MAX_INFO_VAL, value, &flag);
    MPI_Info_free(&info);
    CHECK(flag && level_rank(value) >= 0, "level %d: resource type '%s'", levels, flag ? value : "");
    MPIX_Get_hw_resource_info(sub, name, &count, &index, &flag);
    CHECK(flag && strcmp(name, value) == 0 && count >= 2 && index >= 0 && index < count,
          "level %d: info %s %d %d", levels, name, count, index);
    size = n;
    comm = sub;
    ++levels;
  }
  CHECK(levels < 9, "no end to the levels");
  if (mt_size == 1) CHECK(levels == 0, "a lone process got a communicator");
  return mt_pass();
}
