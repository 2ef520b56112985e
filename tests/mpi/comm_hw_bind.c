/* Hardware-topology communicators and bindings, 4 ranks on one synthetic
 * machine "pack:2 numa:2 core:8 pu:1" with emulated bindings
 * NMAD_HW_BINDING="0;1;none;8,16": ranks 0 and 1 on cores 0 and 1 (NUMA
 * node 0, package 0), rank 2 unbound, rank 3 on a core of each package.
 * MPI-4.0 7.4.2: a process not inside one object of the level gets
 * MPI_COMM_NULL. Also the errors every member raises alike (mismatched
 * split types or resource types, an unknown split type at one rank) and
 * MPIX_Get_hw_topo_common_level's argument errors. */
#include "mpitest.h"

static MPI_Comm split(int type, const char* resource) {
  MPI_Info info = MPI_INFO_NULL;
  MPI_Comm out = MPI_COMM_NULL;
  if (resource) {
    MPI_Info_create(&info);
    MPI_Info_set(info, "mpi_hw_resource_type", resource);
  }
  int err = MPI_Comm_split_type(MPI_COMM_WORLD, type, mt_rank, info, &out);
  CHECK(err == MPI_SUCCESS, "split_type failed");
  if (resource) MPI_Info_free(&info);
  return out;
}

static int size_of(MPI_Comm c) {
  int n = 0;
  if (c != MPI_COMM_NULL) MPI_Comm_size(c, &n);
  return n;
}

static void expect_class(int err, int cls, const char* what) {
  char text[MPI_MAX_ERROR_STRING];
  int got = mt_error(err, text);
  CHECK(got == cls, "%s: error class %d, expected %d (%s)", what, got, cls, text);
}

int main(int argc, char** argv) {
  mt_start("comm_hw_bind", &argc, &argv);
  CHECK(mt_size == 4, "run with 4 processes");
  MPI_Comm c;

  /* Guided Package: only ranks 0 and 1 lie in one package. */
  c = split(MPI_COMM_TYPE_HW_GUIDED, "Package");
  CHECK(size_of(c) == (mt_rank < 2 ? 2 : 0), "Package: size %d", size_of(c));
  if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
  /* Machine holds everyone, bound or not. */
  c = split(MPI_COMM_TYPE_HW_GUIDED, "Machine");
  CHECK(size_of(c) == 4, "Machine: size %d", size_of(c));
  MPI_Comm_free(&c);
  /* Core: ranks 0 and 1 alone, 2 and 3 nothing. */
  c = split(MPI_COMM_TYPE_HW_GUIDED, "Core");
  CHECK(size_of(c) == (mt_rank < 2 ? 1 : 0), "Core: size %d", size_of(c));
  if (c != MPI_COMM_NULL) MPI_Comm_free(&c);

  /* Unguided: the machine does not divide the job, the package does (for
   * ranks 0 and 1; the others get MPI_COMM_NULL); inside it the NUMA node
   * does not, the core does. */
  c = split(MPI_COMM_TYPE_HW_UNGUIDED, NULL);
  CHECK(size_of(c) == (mt_rank < 2 ? 2 : 0), "unguided: size %d", size_of(c));
  if (c != MPI_COMM_NULL) {
    char name[MPI_MAX_OBJECT_NAME];
    int n, i, flag;
    MPIX_Get_hw_resource_info(c, name, &n, &i, &flag);
    CHECK(flag && strcmp(name, "Package") == 0 && n == 1 && i == 0, "unguided level %s %d %d", name, n, i);
    MPI_Comm sub;
    MPI_Comm_split_type(c, MPI_COMM_TYPE_HW_UNGUIDED, 0, MPI_INFO_NULL, &sub);
    CHECK(size_of(sub) == 1, "unguided in the package: size %d", size_of(sub));
    MPIX_Get_hw_resource_info(sub, name, &n, &i, &flag);
    CHECK(flag && strcmp(name, "Core") == 0 && n == 2 && i == mt_rank, "second level %s %d %d", name, n, i);
    MPI_Comm_free(&sub);
    MPI_Comm_free(&c);
  }

  /* Common levels: rank 2 (unbound) shares only the machine with 0. */
  {
    char name[MPI_MAX_OBJECT_NAME];
    int flag, a[2] = {0, 1}, b[2] = {0, 2}, d[1] = {3};
    MPIX_Get_hw_topo_common_level(MPI_COMM_WORLD, 2, a, name, &flag);
    CHECK(flag && strcmp(name, "NUMANode") == 0, "0,1: %s", name);
    MPIX_Get_hw_topo_common_level(MPI_COMM_WORLD, 2, b, name, &flag);
    CHECK(flag && strcmp(name, "Machine") == 0, "0,2: %s", name);
    MPIX_Get_hw_topo_common_level(MPI_COMM_WORLD, 1, d, name, &flag);
    CHECK(flag && strcmp(name, "Machine") == 0, "3 alone: %s", name);
  }

  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  /* Errors raised at every member, so none waits for the others. */
  {
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "mpi_hw_resource_type", mt_rank == 3 ? "Core" : "package");
    c = MPI_COMM_NULL;
    int err = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_HW_GUIDED, 0, info, &c);
    expect_class(err, MPI_ERR_INFO_VALUE, "mismatched mpi_hw_resource_type");
    MPI_Info_free(&info);

    err = MPI_Comm_split_type(MPI_COMM_WORLD, mt_rank == 1 ? MPI_COMM_TYPE_SHARED : MPI_COMM_TYPE_HW_UNGUIDED, 0,
                              MPI_INFO_NULL, &c);
    expect_class(err, MPI_ERR_ARG, "mismatched split types");
    err = MPI_Comm_split_type(MPI_COMM_WORLD, mt_rank == 2 ? 77 : MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &c);
    expect_class(err, MPI_ERR_ARG, "unknown split type at rank 2");
    /* Equal meaning, different spelling: not a mismatch. */
    MPI_Info_create(&info);
    MPI_Info_set(info, "mpi_hw_resource_type", mt_rank % 2 ? "NUMANode" : "hwloc://numanode");
    err = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_HW_GUIDED, 0, info, &c);
    CHECK(err == MPI_SUCCESS && size_of(c) == (mt_rank < 2 ? 2 : 0), "NUMANode spelled two ways");
    if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
    MPI_Info_free(&info);
  }
  /* Argument errors of the common level are local (after the gather). */
  {
    char name[MPI_MAX_OBJECT_NAME];
    int flag, bad[2] = {0, mt_rank == 0 ? 4 : 1};
    int err = MPIX_Get_hw_topo_common_level(MPI_COMM_WORLD, 2, bad, name, &flag);
    if (mt_rank == 0) expect_class(err, MPI_ERR_RANK, "rank 4 of 4");
    else CHECK(err == MPI_SUCCESS && flag, "valid ranks failed");
    err = MPIX_Comm_hsplit_with_roots(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &c, NULL);
    expect_class(err, MPI_ERR_ARG, "null rootcomm");
  }
  /* RESOURCE_GUIDED: a level or a process set. */
  {
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "mpi_pset_name", "mpi://WORLD");
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_RESOURCE_GUIDED, 0, info, &c);
    CHECK(size_of(c) == 4, "mpi://WORLD: size %d", size_of(c));
    MPI_Comm_free(&c);
    MPI_Info_set(info, "mpi_pset_name", "mpi://SELF");
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_RESOURCE_GUIDED, 0, info, &c);
    CHECK(size_of(c) == 1, "mpi://SELF: size %d", size_of(c));
    MPI_Comm_free(&c);
    MPI_Info_delete(info, "mpi_pset_name");
    MPI_Info_set(info, "mpi_hw_resource_type", "Package");
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_RESOURCE_GUIDED, 0, info, &c);
    CHECK(size_of(c) == (mt_rank < 2 ? 2 : 0), "resource guided Package: size %d", size_of(c));
    if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
    MPI_Info_free(&info);
  }
  return mt_pass();
}
