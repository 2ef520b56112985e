/* MPI_Type_get_envelope / MPI_Type_get_contents for every combiner (the
 * arguments come back as given; derived constituents come back as new
 * handles that describe the same type), and type names. Local only. */
#include "mpitest.h"

static void envelope(MPI_Datatype t, int ni, int na, int nd, int comb) {
  int i = -1, a = -1, d = -1, c = -1;
  MPI_Type_get_envelope(t, &i, &a, &d, &c);
  CHECK(i == ni && a == na && d == nd && c == comb, "envelope of %d: %d %d %d comb %d (want %d %d %d %d)", t, i, a, d,
        c, ni, na, nd, comb);
}

int main(int argc, char** argv) {
  mt_start("type_envelope", &argc, &argv);
  int ints[32];
  MPI_Aint addrs[16];
  MPI_Datatype types[8];

  envelope(MPI_INT, 0, 0, 0, MPI_COMBINER_NAMED);
  envelope(MPI_DOUBLE_INT, 0, 0, 0, MPI_COMBINER_NAMED);

  MPI_Datatype contig, vec, hvec, idx, hidx, iblk, hblk, strct, res, sub, dup;
  MPI_Type_contiguous(5, MPI_INT, &contig);
  envelope(contig, 1, 0, 1, MPI_COMBINER_CONTIGUOUS);
  MPI_Type_get_contents(contig, 32, 16, 8, ints, addrs, types);
  CHECK(ints[0] == 5 && types[0] == MPI_INT, "contiguous contents");

  MPI_Type_vector(3, 2, -4, contig, &vec);
  envelope(vec, 3, 0, 1, MPI_COMBINER_VECTOR);
  MPI_Type_get_contents(vec, 32, 16, 8, ints, addrs, types);
  CHECK(ints[0] == 3 && ints[1] == 2 && ints[2] == -4, "vector ints");
  /* The constituent is a derived type: a new handle describing contig. */
  CHECK(types[0] != MPI_INT && types[0] >= 64, "vector: new handle %d", types[0]);
  envelope(types[0], 1, 0, 1, MPI_COMBINER_CONTIGUOUS);
  int inner[2];
  MPI_Datatype innert[1];
  MPI_Type_get_contents(types[0], 2, 0, 1, inner, addrs, innert);
  CHECK(inner[0] == 5 && innert[0] == MPI_INT, "inner contents");
  MPI_Type_free(&types[0]);

  MPI_Type_create_hvector(4, 1, 100, MPI_DOUBLE, &hvec);
  envelope(hvec, 2, 1, 1, MPI_COMBINER_HVECTOR);
  MPI_Type_get_contents(hvec, 32, 16, 8, ints, addrs, types);
  CHECK(ints[0] == 4 && ints[1] == 1 && addrs[0] == 100 && types[0] == MPI_DOUBLE, "hvector contents");

  int bl[3] = {1, 2, 3}, dp[3] = {9, 0, 4};
  MPI_Aint hdp[3] = {72, 0, -16};
  MPI_Type_indexed(3, bl, dp, MPI_SHORT, &idx);
  envelope(idx, 7, 0, 1, MPI_COMBINER_INDEXED);
  MPI_Type_get_contents(idx, 32, 16, 8, ints, addrs, types);
  CHECK(ints[0] == 3 && ints[1] == 1 && ints[3] == 3 && ints[4] == 9 && ints[6] == 4 && types[0] == MPI_SHORT,
        "indexed contents");

  MPI_Type_create_hindexed(3, bl, hdp, MPI_CHAR, &hidx);
  envelope(hidx, 4, 3, 1, MPI_COMBINER_HINDEXED);
  MPI_Type_get_contents(hidx, 32, 16, 8, ints, addrs, types);
  CHECK(ints[0] == 3 && ints[2] == 2 && addrs[0] == 72 && addrs[2] == -16, "hindexed contents");

  MPI_Type_create_indexed_block(3, 2, dp, MPI_FLOAT, &iblk);
  envelope(iblk, 5, 0, 1, MPI_COMBINER_INDEXED_BLOCK);
  MPI_Type_get_contents(iblk, 32, 16, 8, ints, addrs, types);
  CHECK(ints[0] == 3 && ints[1] == 2 && ints[2] == 9 && ints[4] == 4 && types[0] == MPI_FLOAT, "indexed_block");

  MPI_Type_create_hindexed_block(3, 1, hdp, MPI_LONG, &hblk);
  envelope(hblk, 2, 3, 1, MPI_COMBINER_HINDEXED_BLOCK);

  MPI_Datatype sty[3] = {MPI_INT, contig, MPI_DOUBLE};
  MPI_Type_create_struct(3, bl, hdp, sty, &strct);
  envelope(strct, 4, 3, 3, MPI_COMBINER_STRUCT);
  MPI_Type_get_contents(strct, 32, 16, 8, ints, addrs, types);
  CHECK(ints[0] == 3 && addrs[1] == 0 && types[0] == MPI_INT && types[2] == MPI_DOUBLE && types[1] >= 64,
        "struct contents");
  MPI_Type_free(&types[1]);

  MPI_Type_create_resized(MPI_INT, -4, 32, &res);
  envelope(res, 0, 2, 1, MPI_COMBINER_RESIZED);
  MPI_Type_get_contents(res, 32, 16, 8, ints, addrs, types);
  CHECK(addrs[0] == -4 && addrs[1] == 32 && types[0] == MPI_INT, "resized contents");

  int sz[2] = {8, 9}, ss[2] = {2, 3}, st[2] = {1, 4};
  MPI_Type_create_subarray(2, sz, ss, st, MPI_ORDER_FORTRAN, MPI_DOUBLE, &sub);
  envelope(sub, 8, 0, 1, MPI_COMBINER_SUBARRAY);
  MPI_Type_get_contents(sub, 32, 16, 8, ints, addrs, types);
  CHECK(ints[0] == 2 && ints[1] == 8 && ints[2] == 9 && ints[3] == 2 && ints[6] == 4 && ints[7] == MPI_ORDER_FORTRAN,
        "subarray contents (order %d)", ints[7]);

  MPI_Type_dup(MPI_INT, &dup);
  envelope(dup, 0, 0, 1, MPI_COMBINER_DUP);
  MPI_Type_get_contents(dup, 0, 0, 1, ints, addrs, types);
  CHECK(types[0] == MPI_INT, "dup contents");

  /* Rebuild a vector from its contents: same size and extent. */
  MPI_Type_get_contents(vec, 32, 16, 8, ints, addrs, types);
  MPI_Datatype again;
  MPI_Type_vector(ints[0], ints[1], ints[2], types[0], &again);
  MPI_Count s1, s2;
  MPI_Aint l1, e1, l2, e2;
  MPI_Type_size_x(vec, &s1);
  MPI_Type_size_x(again, &s2);
  MPI_Type_get_extent(vec, &l1, &e1);
  MPI_Type_get_extent(again, &l2, &e2);
  CHECK(s1 == s2 && l1 == l2 && e1 == e2, "roundtrip");
  MPI_Type_free(&types[0]);
  MPI_Type_free(&again);

  /* Names. */
  char name[MPI_MAX_OBJECT_NAME];
  int len = -1;
  MPI_Type_get_name(MPI_INT, name, &len);
  CHECK(strcmp(name, "MPI_INT") == 0 && len == 7, "name of MPI_INT: '%s' %d", name, len);
  MPI_Type_get_name(MPI_DOUBLE_INT, name, &len);
  CHECK(strcmp(name, "MPI_DOUBLE_INT") == 0, "name of MPI_DOUBLE_INT: '%s'", name);
  MPI_Type_get_name(vec, name, &len);
  CHECK(len == 0 && name[0] == 0, "unnamed derived type: '%s'", name);
  MPI_Type_set_name(vec, "halo column");
  MPI_Type_get_name(vec, name, &len);
  CHECK(strcmp(name, "halo column") == 0 && len == 11, "set name: '%s'", name);
  char longname[300];
  memset(longname, 'x', sizeof longname);
  longname[299] = 0;
  MPI_Type_set_name(contig, longname);
  MPI_Type_get_name(contig, name, &len);
  CHECK(len == MPI_MAX_OBJECT_NAME - 1 && (int)strlen(name) == len, "long name truncated to %d", len);

  MPI_Datatype all[] = {contig, vec, hvec, idx, hidx, iblk, hblk, strct, res, sub, dup};
  for (unsigned i = 0; i < sizeof all / sizeof all[0]; ++i) MPI_Type_free(&all[i]);
  /* A freed handle is reused by the next type, which has no name. */
  MPI_Datatype fresh;
  MPI_Type_contiguous(2, MPI_INT, &fresh);
  MPI_Type_get_name(fresh, name, &len);
  CHECK(len == 0, "recycled handle %d keeps no name ('%s')", fresh, name);
  MPI_Type_free(&fresh);
  return mt_pass();
}
