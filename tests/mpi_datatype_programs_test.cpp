// The MPI layer end to end: derived datatypes, MPI_Pack. Each program of tests/mpi/
// runs under nmad-run at the process counts it supports (see mpi_run.hpp).
// Programs that move data also run on each driver (shm, tcp).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include "tests/mpi_run.hpp"

using namespace nmad_mpi_test;

TEST_CASE("large_count_types: _c constructors with displacements above 2^31 (extent, envelope and contents _c), "
          "Pack/Unpack(_external)_c, Op_create_c in Reduce_local_c/Allreduce/Iallreduce, MPI-IO _c, one-sided _c") {
  expect_pass("large_count_types", {1, 2, 3});
}

TEST_CASE("type_vector: matrix columns, resized columns, blocks") {
  expect_pass("type_vector", {1, 2, 4});
  expect_pass_all_drivers("type_vector", {2});
}
TEST_CASE("type_indexed: out-of-order blocks, every send mode, matched probes") {
  expect_pass("type_indexed", {1, 2, 4});
  expect_pass_all_drivers("type_indexed", {2});
}
TEST_CASE("type_hindexed_block: byte-displacement constructors") {
  expect_pass("type_hindexed_block", {1, 2, 4});
  expect_pass_all_drivers("type_hindexed_block", {2});
}
TEST_CASE("type_struct: padding, Get_address, MPI_BOTTOM") {
  expect_pass("type_struct", {1, 2, 4});
  expect_pass_all_drivers("type_struct", {2});
}
TEST_CASE("type_resized: extents, fields of arrays of structs, negative lb") {
  expect_pass("type_resized", {1, 2, 4});
  expect_pass_all_drivers("type_resized", {2});
}
TEST_CASE("type_subarray: 2D/3D halos, C and Fortran order") {
  expect_pass("type_subarray", {1, 2, 4});
  expect_pass_all_drivers("type_subarray", {2});
}
TEST_CASE("type_envelope: envelope/contents roundtrip, names") { expect_pass("type_envelope", {1, 2}); }
TEST_CASE("type_extent: bounds, negative strides, empty types") {
  expect_pass("type_extent", {1, 2, 4});
  expect_pass_all_drivers("type_extent", {2});
}
TEST_CASE("type_free_inflight: free during pending operations, dup, handle reuse") {
  expect_pass("type_free_inflight", {1, 2, 4});
  expect_pass_all_drivers("type_free_inflight", {2});
}
TEST_CASE("pack_unpack: Pack/Unpack/Pack_size, MPI_PACKED, errors") {
  expect_pass("pack_unpack", {1, 2, 4});
  expect_pass_all_drivers("pack_unpack", {2});
}
TEST_CASE("type_persistent: persistent requests with derived types") {
  expect_pass("type_persistent", {1, 2, 4});
  expect_pass_all_drivers("type_persistent", {2});
}
TEST_CASE("type_rendezvous: 4 MiB non-contiguous and contiguous derived types") {
  expect_pass("type_rendezvous", {1, 2});
  expect_pass_all_drivers("type_rendezvous", {2});
}
TEST_CASE("type_get_elements: partial receives, Get_count vs Get_elements") {
  expect_pass("type_get_elements", {1, 2});
  expect_pass_all_drivers("type_get_elements", {2});
}
TEST_CASE("type_errors: error classes with MPI_ERRORS_RETURN") { expect_pass("type_errors", {1, 2}); }
TEST_CASE("type_threads: concurrent type creation, use and free (MPI_THREAD_MULTIPLE)") {
  expect_pass("type_threads", {1, 2, 4});
  expect_pass_all_drivers("type_threads", {2});
}
TEST_CASE("type_huge_count: INT_MAX/2-block types commit at once, exact MPI_Count sizes") {
  expect_pass("type_huge_count", {1, 2});
  expect_pass_all_drivers("type_huge_count", {2});
}
TEST_CASE("type_attr: datatype keyvals and callbacks, names, Type_match_size") { expect_pass("type_attr", {1, 2}); }
TEST_CASE("pack_external: external32 sizes, big-endian bytes, round trips, errors") {
  expect_pass("pack_external", {1, 2, 4});
  expect_pass_all_drivers("pack_external", {2});
}
TEST_CASE("type_darray: hand-computed HPF layouts, contents, errors, scatter/gather of a global array") {
  expect_pass("type_darray", {1, 2, 3, 4});
  expect_pass_all_drivers("type_darray", {4});
}
