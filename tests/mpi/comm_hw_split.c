/* Hardware-topology communicators on an emulated cluster: 2 nodes, each
 * the synthetic machine "pack:2 numa:2 core:8 pu:1" (2 packages x 2 NUMA
 * nodes x 8 cores), the world ranks split in halves between the nodes
 * (NMAD_EMULATED_HOSTS=n0*K,n1*K) and bound as nmad-run's placement would
 * bind them (scatter by NUMA: local rank i on NUMA node i mod 4, one core
 * each). Run by mpi_comm_programs_test with that environment, at 8 and 16
 * processes. Checks MPI_COMM_TYPE_HW_UNGUIDED's hierarchy (Machine,
 * Package, NUMANode, Core, then MPI_COMM_NULL), MPI_COMM_TYPE_HW_GUIDED at
 * every level and its MPI_COMM_NULL cases, MPI_COMM_TYPE_SHARED on the
 * emulated hosts, processes passing MPI_UNDEFINED, and the MPIX hsplit
 * calls. */
#include "mpitest.h"

static int K; /* ranks per node */

/* Where world rank r is (the placement above). */
static int node_of(int r) { return r / K; }
static int numa_of(int r) { return node_of(r) * 4 + (r % K) % 4; }
static int package_of(int r) { return numa_of(r) / 2; }

/* The world ranks of comm's members, in comm rank order. */
static void members(MPI_Comm comm, int* out, int* n) {
  int me;
  MPI_Comm_size(comm, n);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Allgather(&me, 1, MPI_INT, out, 1, MPI_INT, comm);
}

/* comm holds exactly the world ranks q with key(q) == key(me), in order. */
static void expect_group(MPI_Comm comm, int (*key)(int), const char* what) {
  int got[64], n, k = 0;
  CHECK(comm != MPI_COMM_NULL, "%s: MPI_COMM_NULL", what);
  members(comm, got, &n);
  for (int q = 0; q < mt_size; ++q)
    if (key(q) == key(mt_rank)) {
      CHECK(k < n && got[k] == q, "%s: member %d should be world rank %d", what, k, q);
      ++k;
    }
  CHECK(k == n, "%s: %d members, expected %d", what, n, k);
}

static void expect_type(MPI_Comm comm, const char* want) {
  MPI_Info info;
  char value[MPI_MAX_INFO_VAL + 1];
  int flag = 0;
  MPI_Comm_get_info(comm, &info);
  MPI_Info_get(info, "mpi_hw_resource_type", MPI_MAX_INFO_VAL, value, &flag);
  CHECK(flag && strcmp(value, want) == 0, "mpi_hw_resource_type '%s', expected '%s'", flag ? value : "(none)", want);
  MPI_Info_free(&info);
}

static void expect_level_info(MPI_Comm comm, const char* type, int count, int index) {
  char name[MPI_MAX_OBJECT_NAME];
  int n = -5, i = -5, flag = 0;
  MPIX_Get_hw_resource_info(comm, name, &n, &i, &flag);
  CHECK(flag == 1 && strcmp(name, type) == 0, "level info '%s' flag %d, expected %s", name, flag, type);
  CHECK(n == count && i == index, "%s: %d siblings, index %d; expected %d, %d", type, n, i, count, index);
}

static MPI_Comm guided(MPI_Comm comm, const char* type) {
  MPI_Info info;
  MPI_Comm out;
  MPI_Info_create(&info);
  MPI_Info_set(info, "mpi_hw_resource_type", type);
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_HW_GUIDED, mt_rank, info, &out);
  MPI_Info_free(&info);
  return out;
}

static int key_node(int r) { return node_of(r); }
static int key_package(int r) { return package_of(r); }
static int key_numa(int r) { return numa_of(r); }
static int key_self(int r) { return r; }
static int key_even_node(int r) { return r % 2 == 0 ? node_of(r) : -1 - r; }

int main(int argc, char** argv) {
  mt_start("comm_hw_split", &argc, &argv);
  K = mt_size / 2;
  const char* t = getenv("NMAD_TOPOLOGY");
  CHECK(t && strcmp(t, "pack:2 numa:2 core:8 pu:1") == 0 && mt_size % 2 == 0 && K >= 4 && K <= 32,
        "run with NMAD_TOPOLOGY='pack:2 numa:2 core:8 pu:1', NMAD_EMULATED_HOSTS=n0*K,n1*K (size %d)", mt_size);

  /* ---- unguided: the hierarchy, level by level ---- */
  {
    const char* names[] = {"Machine", "Package", "NUMANode", "Core"};
    int (*keys[])(int) = {key_node, key_package, key_numa, key_self};
    int index[] = {node_of(mt_rank), package_of(mt_rank), numa_of(mt_rank)};
    MPI_Comm comm = MPI_COMM_WORLD;
    int level = 0;
    for (;;) {
      MPI_Comm sub;
      int r;
      MPI_Comm_rank(comm, &r);
      MPI_Comm_split_type(comm, MPI_COMM_TYPE_HW_UNGUIDED, r, MPI_INFO_NULL, &sub);
      if (comm != MPI_COMM_WORLD) MPI_Comm_free(&comm);
      if (sub == MPI_COMM_NULL) break;
      CHECK(level < 4, "unguided: a level beyond Core");
      /* With K == 4 every NUMA node holds one rank: NUMANode is the last level. */
      if (K == 4 && level == 3) CHECK(0, "unguided: a level below NUMANode with one rank per NUMA node");
      expect_type(sub, names[level]);
      expect_group(sub, keys[level], names[level]);
      /* Siblings: the groups that split made of its parent: 2 nodes, the
       * node's 2 packages, the package's 2 NUMA nodes. */
      if (level < 3) expect_level_info(sub, names[level], 2, level == 0 ? index[0] : index[level] % 2);
      comm = sub;
      ++level;
    }
    CHECK(level == (K == 4 ? 3 : 4), "unguided: %d levels", level);
  }

  /* ---- guided, from the whole job ---- */
  {
    MPI_Comm c = guided(MPI_COMM_WORLD, "Machine");
    expect_group(c, key_node, "Machine");
    expect_type(c, "Machine");
    expect_level_info(c, "Machine", 2, node_of(mt_rank));
    MPI_Comm_free(&c);

    c = guided(MPI_COMM_WORLD, "hwloc://Package");
    expect_group(c, key_package, "Package");
    expect_type(c, "Package");
    expect_level_info(c, "Package", 4, package_of(mt_rank));
    MPI_Comm_free(&c);

    c = guided(MPI_COMM_WORLD, "numanode"); /* any case */
    expect_group(c, key_numa, "NUMANode");
    expect_level_info(c, "NUMANode", 8, numa_of(mt_rank));
    MPI_Comm dup;
    MPI_Comm_dup(c, &dup); /* dup keeps the level information */
    expect_level_info(dup, "NUMANode", 8, numa_of(mt_rank));
    MPI_Comm_free(&dup);
    MPI_Comm_free(&c);

    c = guided(MPI_COMM_WORLD, "Core");
    expect_group(c, key_self, "Core");
    expect_level_info(c, "Core", mt_size, mt_rank);
    MPI_Comm_free(&c);
    c = guided(MPI_COMM_WORLD, "PU");
    expect_group(c, key_self, "PU");
    MPI_Comm_free(&c);

    c = guided(MPI_COMM_WORLD, "mpi_shared_memory"); /* = MPI_COMM_TYPE_SHARED */
    expect_group(c, key_node, "mpi_shared_memory");
    expect_type(c, "mpi_shared_memory");
    MPI_Comm_free(&c);

    /* No such level on this machine, an unknown name, no key, no info. */
    c = guided(MPI_COMM_WORLD, "L3Cache");
    CHECK(c == MPI_COMM_NULL, "L3Cache on a machine without caches");
    c = guided(MPI_COMM_WORLD, "Blade");
    CHECK(c == MPI_COMM_NULL, "unknown resource type");
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "other_key", "Package");
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_HW_GUIDED, 0, info, &c);
    CHECK(c == MPI_COMM_NULL, "no mpi_hw_resource_type key");
    MPI_Info_free(&info);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_HW_GUIDED, 0, MPI_INFO_NULL, &c);
    CHECK(c == MPI_COMM_NULL, "MPI_INFO_NULL");

    /* A communicator not made by a hardware split has no level. */
    char name[MPI_MAX_OBJECT_NAME];
    int n, i, flag = 1;
    MPIX_Get_hw_resource_info(MPI_COMM_WORLD, name, &n, &i, &flag);
    CHECK(flag == 0 && name[0] == 0 && n == 0 && i == -1, "MPI_COMM_WORLD has level info");
  }

  /* ---- MPI_COMM_TYPE_SHARED follows the emulated hosts; key orders ---- */
  {
    MPI_Comm c;
    int got[64], n;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, -mt_rank, MPI_INFO_NULL, &c);
    members(c, got, &n);
    CHECK(n == K, "shared: %d members", n);
    for (int j = 0; j < n; ++j)
      CHECK(got[j] == node_of(mt_rank) * K + K - 1 - j, "shared: reversed by key, member %d is %d", j, got[j]);
    MPI_Comm_free(&c);
  }

  /* ---- odd ranks pass MPI_UNDEFINED: the others split alone ---- */
  {
    MPI_Comm c;
    MPI_Comm_split_type(MPI_COMM_WORLD, mt_rank % 2 ? MPI_UNDEFINED : MPI_COMM_TYPE_HW_UNGUIDED, 0, MPI_INFO_NULL,
                        &c);
    if (mt_rank % 2) {
      CHECK(c == MPI_COMM_NULL, "MPI_UNDEFINED gave a communicator");
    } else {
      expect_type(c, "Machine");
      expect_group(c, key_even_node, "unguided, even ranks");
      MPI_Comm_free(&c);
    }
  }

  /* ---- MPIX_Comm_hsplit_with_roots ---- */
  {
    MPI_Comm c, roots;
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "mpi_hw_resource_type", "NUMANode");
    MPIX_Comm_hsplit_with_roots(MPI_COMM_WORLD, MPI_COMM_TYPE_HW_GUIDED, 0, info, &c, &roots);
    MPI_Info_free(&info);
    expect_group(c, key_numa, "hsplit NUMANode");
    /* The first rank of each NUMA node: local ranks 0..3 of each node. */
    const int is_root = mt_rank % K < 4;
    CHECK((roots != MPI_COMM_NULL) == is_root, "rootcomm %s", is_root ? "missing" : "at a non-root");
    if (roots != MPI_COMM_NULL) {
      int got[64], n;
      members(roots, got, &n);
      CHECK(n == 8, "rootcomm of %d", n);
      for (int j = 0; j < n; ++j) CHECK(got[j] == (j / 4) * K + j % 4, "root %d is world rank %d", j, got[j]);
      MPI_Comm_free(&roots);
    }
    MPI_Comm_free(&c);
  }

  /* ---- MPIX_Get_hw_topo_common_level ---- */
  {
    char name[MPI_MAX_OBJECT_NAME];
    int flag;
    const int base = node_of(mt_rank) * K;
    int same_pack[2] = {base, base + 1};  /* NUMA 0 and 1 */
    int same_node[2] = {base, base + 2};  /* packages 0 and 1 */
    int same_numa[2] = {base, base + 4};  /* both on NUMA 0 */
    int two_nodes[2] = {0, K};
    int alone[1] = {mt_rank};
    MPIX_Get_hw_topo_common_level(MPI_COMM_WORLD, 2, same_pack, name, &flag);
    CHECK(flag && strcmp(name, "Package") == 0, "common level of NUMA 0 and 1: %s", name);
    MPIX_Get_hw_topo_common_level(MPI_COMM_WORLD, 2, same_node, name, &flag);
    CHECK(flag && strcmp(name, "Machine") == 0, "common level across packages: %s", name);
    if (K >= 8) {
      MPIX_Get_hw_topo_common_level(MPI_COMM_WORLD, 2, same_numa, name, &flag);
      CHECK(flag && strcmp(name, "NUMANode") == 0, "common level in a NUMA node: %s", name);
    }
    MPIX_Get_hw_topo_common_level(MPI_COMM_WORLD, 2, two_nodes, name, &flag);
    CHECK(!flag && name[0] == 0, "common level across nodes: %s", name);
    MPIX_Get_hw_topo_common_level(MPI_COMM_WORLD, 1, alone, name, &flag);
    CHECK(flag && strcmp(name, "PU") == 0, "common level of one rank: %s", name);
  }
  return mt_pass();
}
