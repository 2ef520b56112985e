// The MPI 4.0 large-count ("_c") datatype bindings: constructors whose
// counts, block lengths, displacements, strides and bounds are MPI_Count,
// the size and extent queries that report an MPI_Count, and the _c forms of
// MPI_Type_get_envelope/contents (MPI 4.0 sec. 5.1.13), which add the array
// of large counts. A type built here records its MPI_Count arguments in
// TypeContents::large_counts (ints and addresses hold only what its
// constructor takes as int or MPI_Aint); the int MPI_Type_get_envelope and
// MPI_Type_get_contents refuse it (MPI_ERR_TYPE: they cannot describe it).
// The engine takes Count arrays directly (datatype.hpp), so nothing is
// narrowed: a displacement above 2^31 is that displacement.

#include <climits>
#include <new>
#include <vector>

#include "mpi_layer/datatype/binding_helpers.hpp"
#include "mpi_layer/mpi_impl.hpp"

using namespace nmad::mpi;
using namespace nmad::mpi::type_bindings;

namespace {

std::span<const Count> counts(const MPI_Count* p, Count n) { return {p, static_cast<std::size_t>(n)}; }
std::vector<Aint> addresses(const MPI_Count* p, Count n) { return {p, p + n}; }

// The type d with contents {combiner, ints, {}, types, large}.
Datatype labelled(Datatype d, std::vector<Count> ints, std::vector<Datatype> types, std::vector<Count> large) {
  TypeContents c{d.combiner(), std::move(ints), {}, std::move(types), std::move(large)};
  d.relabel(std::move(c));
  return d;
}
std::vector<Count> join(std::initializer_list<std::span<const Count>> parts) {
  std::vector<Count> v;
  for (auto p : parts) v.insert(v.end(), p.begin(), p.end());
  return v;
}

template <class Body>
int query(const char* fn, MPI_Datatype t, bool outputs_ok, Body&& body) {
  if (!outputs_ok) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null output argument");
  return guarded(fn, [&] { return body(need_type(t, "datatype")); });
}

}  // namespace

extern "C" {

// ---- constructors ---------------------------------------------------------

int PMPI_Type_contiguous_c(MPI_Count count, MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return construct("MPI_Type_contiguous_c", newtype, [&] {
    need_count(count, "count");
    const Datatype old = need_type(oldtype, "oldtype");
    return labelled(Datatype::contiguous(count, old), {}, {old}, {count});
  });
}

int PMPI_Type_vector_c(MPI_Count count, MPI_Count blocklength, MPI_Count stride, MPI_Datatype oldtype,
                       MPI_Datatype* newtype) {
  return construct("MPI_Type_vector_c", newtype, [&] {
    need_count(count, "count");
    const Datatype old = need_type(oldtype, "oldtype");
    return labelled(Datatype::vector(count, blocklength, stride, old), {}, {old}, {count, blocklength, stride});
  });
}

int PMPI_Type_create_hvector_c(MPI_Count count, MPI_Count blocklength, MPI_Count stride, MPI_Datatype oldtype,
                               MPI_Datatype* newtype) {
  return construct("MPI_Type_create_hvector_c", newtype, [&] {
    need_count(count, "count");
    const Datatype old = need_type(oldtype, "oldtype");
    return labelled(Datatype::hvector(count, blocklength, stride, old), {}, {old}, {count, blocklength, stride});
  });
}

int PMPI_Type_indexed_c(MPI_Count count, const MPI_Count array_of_blocklengths[],
                        const MPI_Count array_of_displacements[], MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return construct("MPI_Type_indexed_c", newtype, [&] {
    need_count(count, "count");
    need_array(array_of_blocklengths, count, "array_of_blocklengths");
    need_array(array_of_displacements, count, "array_of_displacements");
    const Datatype old = need_type(oldtype, "oldtype");
    const auto bl = counts(array_of_blocklengths, count), di = counts(array_of_displacements, count);
    const Count n[] = {count};
    return labelled(Datatype::indexed(bl, di, old), {}, {old}, join({n, bl, di}));
  });
}

int PMPI_Type_create_hindexed_c(MPI_Count count, const MPI_Count array_of_blocklengths[],
                                const MPI_Count array_of_displacements[], MPI_Datatype oldtype,
                                MPI_Datatype* newtype) {
  return construct("MPI_Type_create_hindexed_c", newtype, [&] {
    need_count(count, "count");
    need_array(array_of_blocklengths, count, "array_of_blocklengths");
    need_array(array_of_displacements, count, "array_of_displacements");
    const Datatype old = need_type(oldtype, "oldtype");
    const auto bl = counts(array_of_blocklengths, count), di = counts(array_of_displacements, count);
    const Count n[] = {count};
    return labelled(Datatype::hindexed(bl, addresses(array_of_displacements, count), old), {}, {old},
                    join({n, bl, di}));
  });
}

int PMPI_Type_create_indexed_block_c(MPI_Count count, MPI_Count blocklength, const MPI_Count array_of_displacements[],
                                     MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return construct("MPI_Type_create_indexed_block_c", newtype, [&] {
    need_count(count, "count");
    need_array(array_of_displacements, count, "array_of_displacements");
    const Datatype old = need_type(oldtype, "oldtype");
    const auto di = counts(array_of_displacements, count);
    const Count head[] = {count, blocklength};
    return labelled(Datatype::indexed_block(blocklength, di, old), {}, {old}, join({head, di}));
  });
}

int PMPI_Type_create_hindexed_block_c(MPI_Count count, MPI_Count blocklength,
                                      const MPI_Count array_of_displacements[], MPI_Datatype oldtype,
                                      MPI_Datatype* newtype) {
  return construct("MPI_Type_create_hindexed_block_c", newtype, [&] {
    need_count(count, "count");
    need_array(array_of_displacements, count, "array_of_displacements");
    const Datatype old = need_type(oldtype, "oldtype");
    const auto di = counts(array_of_displacements, count);
    const Count head[] = {count, blocklength};
    return labelled(Datatype::hindexed_block(blocklength, addresses(array_of_displacements, count), old), {}, {old},
                    join({head, di}));
  });
}

int PMPI_Type_create_struct_c(MPI_Count count, const MPI_Count array_of_blocklengths[],
                              const MPI_Count array_of_displacements[], const MPI_Datatype array_of_types[],
                              MPI_Datatype* newtype) {
  return construct("MPI_Type_create_struct_c", newtype, [&] {
    need_count(count, "count");
    need_array(array_of_blocklengths, count, "array_of_blocklengths");
    need_array(array_of_displacements, count, "array_of_displacements");
    need_array(array_of_types, count, "array_of_types");
    std::vector<Datatype> types(static_cast<std::size_t>(count));
    for (Count i = 0; i < count; ++i) {
      const std::string what = "array_of_types[" + std::to_string(i) + "]";
      types[static_cast<std::size_t>(i)] = need_type(array_of_types[i], what.c_str());
    }
    const auto bl = counts(array_of_blocklengths, count), di = counts(array_of_displacements, count);
    const Count n[] = {count};
    Datatype d = Datatype::create_struct(bl, addresses(array_of_displacements, count), types);
    return labelled(std::move(d), {}, std::move(types), join({n, bl, di}));
  });
}

int PMPI_Type_create_resized_c(MPI_Datatype oldtype, MPI_Count lb, MPI_Count extent, MPI_Datatype* newtype) {
  return construct("MPI_Type_create_resized_c", newtype, [&] {
    const Datatype old = need_type(oldtype, "oldtype");
    return labelled(Datatype::create_resized(old, lb, extent), {}, {old}, {lb, extent});
  });
}

int PMPI_Type_create_subarray_c(int ndims, const MPI_Count array_of_sizes[], const MPI_Count array_of_subsizes[],
                                const MPI_Count array_of_starts[], int order, MPI_Datatype oldtype,
                                MPI_Datatype* newtype) {
  return construct("MPI_Type_create_subarray_c", newtype, [&] {
    if (ndims < 1)
      throw DatatypeError(DatatypeErrc::invalid_argument, "ndims " + std::to_string(ndims) + " is not positive");
    need_array(array_of_sizes, ndims, "array_of_sizes");
    need_array(array_of_subsizes, ndims, "array_of_subsizes");
    need_array(array_of_starts, ndims, "array_of_starts");
    if (order != MPI_ORDER_C && order != MPI_ORDER_FORTRAN)
      throw DatatypeError(DatatypeErrc::invalid_argument,
                          "order " + std::to_string(order) + " is neither MPI_ORDER_C nor MPI_ORDER_FORTRAN");
    for (int d = 0; d < ndims; ++d)
      if (array_of_sizes[d] < 1 || array_of_subsizes[d] < 0 || array_of_starts[d] < 0 ||
          array_of_starts[d] > array_of_sizes[d] - array_of_subsizes[d])
        throw DatatypeError(DatatypeErrc::invalid_argument,
                            "dimension " + std::to_string(d) + ": size " + std::to_string(array_of_sizes[d]) +
                                ", subsize " + std::to_string(array_of_subsizes[d]) + ", start " +
                                std::to_string(array_of_starts[d]) +
                                " (need size >= 1, subsize >= 0, 0 <= start <= size - subsize)");
    const Datatype old = need_type(oldtype, "oldtype");
    const auto sz = counts(array_of_sizes, ndims), sub = counts(array_of_subsizes, ndims),
               st = counts(array_of_starts, ndims);
    Datatype d = Datatype::create_subarray(sz, sub, st,
                                           order == MPI_ORDER_C ? Datatype::Order::C : Datatype::Order::Fortran, old);
    return labelled(std::move(d), {ndims, order}, {old}, join({sz, sub, st}));
  });
}

int PMPI_Type_create_darray_c(int size, int rank, int ndims, const MPI_Count array_of_gsizes[],
                              const int array_of_distribs[], const int array_of_dargs[], const int array_of_psizes[],
                              int order, MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return construct("MPI_Type_create_darray_c", newtype, [&] {
    if (ndims < 1)
      throw DatatypeError(DatatypeErrc::invalid_argument, "ndims " + std::to_string(ndims) + " is not positive");
    need_array(array_of_gsizes, ndims, "array_of_gsizes");
    need_array(array_of_distribs, ndims, "array_of_distribs");
    need_array(array_of_dargs, ndims, "array_of_dargs");
    need_array(array_of_psizes, ndims, "array_of_psizes");
    if (order != MPI_ORDER_C && order != MPI_ORDER_FORTRAN)
      throw DatatypeError(DatatypeErrc::invalid_argument,
                          "order " + std::to_string(order) + " is neither MPI_ORDER_C nor MPI_ORDER_FORTRAN");
    const std::size_t n = static_cast<std::size_t>(ndims);
    std::vector<Datatype::Distribution> distribs(n);
    std::vector<int> dargs(array_of_dargs, array_of_dargs + n);
    for (std::size_t d = 0; d < n; ++d) {
      switch (array_of_distribs[d]) {
        case MPI_DISTRIBUTE_BLOCK: distribs[d] = Datatype::Distribution::Block; break;
        case MPI_DISTRIBUTE_CYCLIC: distribs[d] = Datatype::Distribution::Cyclic; break;
        case MPI_DISTRIBUTE_NONE: distribs[d] = Datatype::Distribution::None; break;
        default:
          throw DatatypeError(DatatypeErrc::invalid_argument,
                              "array_of_distribs[" + std::to_string(d) + "] = " + std::to_string(array_of_distribs[d]) +
                                  " is not MPI_DISTRIBUTE_BLOCK, _CYCLIC or _NONE");
      }
      if (dargs[d] == MPI_DISTRIBUTE_DFLT_DARG) dargs[d] = Datatype::kDefaultDarg;
      else if (dargs[d] < 1)
        throw DatatypeError(DatatypeErrc::invalid_argument,
                            "array_of_dargs[" + std::to_string(d) + "] = " + std::to_string(array_of_dargs[d]) +
                                " is neither positive nor MPI_DISTRIBUTE_DFLT_DARG");
    }
    const Datatype old = need_type(oldtype, "oldtype");
    const auto gs = counts(array_of_gsizes, ndims);
    Datatype d = Datatype::create_darray(size, rank, gs, distribs, dargs, {array_of_psizes, n},
                                         order == MPI_ORDER_C ? Datatype::Order::C : Datatype::Order::Fortran, old);
    // ints as the caller gave them (MPI constants): size, rank, ndims,
    // distribs, dargs, psizes, order; the gsizes are the large counts.
    std::vector<Count> ints{size, rank, ndims};
    ints.insert(ints.end(), array_of_distribs, array_of_distribs + n);
    ints.insert(ints.end(), array_of_dargs, array_of_dargs + n);
    ints.insert(ints.end(), array_of_psizes, array_of_psizes + n);
    ints.push_back(order);
    return labelled(std::move(d), std::move(ints), {old}, {gs.begin(), gs.end()});
  });
}

// ---- size and bounds ----------------------------------------------------------

int PMPI_Type_size_c(MPI_Datatype datatype, MPI_Count* size) {
  return query("MPI_Type_size_c", datatype, size != nullptr, [&](const Datatype& d) {
    *size = d.size();
    return MPI_SUCCESS;
  });
}

int PMPI_Type_get_extent_c(MPI_Datatype datatype, MPI_Count* lb, MPI_Count* extent) {
  return query("MPI_Type_get_extent_c", datatype, lb && extent, [&](const Datatype& d) {
    *lb = d.lb();
    *extent = d.extent();
    return MPI_SUCCESS;
  });
}

int PMPI_Type_get_true_extent_c(MPI_Datatype datatype, MPI_Count* true_lb, MPI_Count* true_extent) {
  return query("MPI_Type_get_true_extent_c", datatype, true_lb && true_extent, [&](const Datatype& d) {
    *true_lb = d.true_lb();
    *true_extent = d.true_extent();
    return MPI_SUCCESS;
  });
}

// ---- envelope and contents ------------------------------------------------------
// A type from an int constructor: its int envelope and contents, with no
// large counts. A type from a _c one: the arrays recorded above.

int PMPI_Type_get_envelope_c(MPI_Datatype datatype, MPI_Count* num_integers, MPI_Count* num_addresses,
                             MPI_Count* num_large_counts, MPI_Count* num_datatypes, int* combiner) {
  const char* fn = "MPI_Type_get_envelope_c";
  return query(fn, datatype, num_integers && num_addresses && num_large_counts && num_datatypes && combiner,
               [&](const Datatype& d) {
                 const TypeContents c = d.contents();
                 if (c.large_counts.empty()) {
                   int ni = 0, na = 0, nd = 0;
                   if (int e = PMPI_Type_get_envelope(datatype, &ni, &na, &nd, combiner)) return e;
                   *num_integers = ni;
                   *num_addresses = na;
                   *num_datatypes = nd;
                   *num_large_counts = 0;
                   return MPI_SUCCESS;
                 }
                 *combiner = mpi_combiner_of(c.combiner);
                 *num_integers = static_cast<Count>(c.ints.size());
                 *num_addresses = static_cast<Count>(c.addresses.size());
                 *num_large_counts = static_cast<Count>(c.large_counts.size());
                 *num_datatypes = static_cast<Count>(c.types.size());
                 return MPI_SUCCESS;
               });
}

int PMPI_Type_get_contents_c(MPI_Datatype datatype, MPI_Count max_integers, MPI_Count max_addresses,
                             MPI_Count max_large_counts, MPI_Count max_datatypes, int array_of_integers[],
                             MPI_Aint array_of_addresses[], MPI_Count array_of_large_counts[],
                             MPI_Datatype array_of_datatypes[]) {
  const char* fn = "MPI_Type_get_contents_c";
  return guarded(fn, [&] {
    const Datatype d = need_type(datatype, "datatype");
    const TypeContents c = d.contents();
    if (c.large_counts.empty()) {
      auto narrow = [](MPI_Count v) { return static_cast<int>(std::min<MPI_Count>(std::max<MPI_Count>(v, 0), INT_MAX)); };
      return PMPI_Type_get_contents(datatype, narrow(max_integers), narrow(max_addresses), narrow(max_datatypes),
                                    array_of_integers, array_of_addresses, array_of_datatypes);
    }
    if (max_integers < static_cast<Count>(c.ints.size()) || max_addresses < static_cast<Count>(c.addresses.size()) ||
        max_large_counts < static_cast<Count>(c.large_counts.size()) ||
        max_datatypes < static_cast<Count>(c.types.size()))
      return mpi_raise(fn, nullptr, MPI_ERR_ARG,
                       "arrays too small: need " + std::to_string(c.ints.size()) + " integers, " +
                           std::to_string(c.addresses.size()) + " addresses, " +
                           std::to_string(c.large_counts.size()) + " large counts, " +
                           std::to_string(c.types.size()) + " datatypes (see MPI_Type_get_envelope_c)");
    if ((!c.ints.empty() && !array_of_integers) || (!c.addresses.empty() && !array_of_addresses) ||
        !array_of_large_counts || (!c.types.empty() && !array_of_datatypes))
      return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null output array");
    for (std::size_t i = 0; i < c.ints.size(); ++i) array_of_integers[i] = static_cast<int>(c.ints[i]);
    for (std::size_t i = 0; i < c.addresses.size(); ++i) array_of_addresses[i] = c.addresses[i];
    for (std::size_t i = 0; i < c.large_counts.size(); ++i) array_of_large_counts[i] = c.large_counts[i];
    for (std::size_t i = 0; i < c.types.size(); ++i) {
      // Predefined handles as they are, a new handle for a derived one (the
      // caller frees it), as MPI_Type_get_contents does.
      const MPI_Datatype h = predefined_handle_of(c.types[i]);
      array_of_datatypes[i] = h != MPI_DATATYPE_NULL ? h : register_type(c.types[i]);
    }
    return MPI_SUCCESS;
  });
}

}  // extern "C"

// The public names: weak aliases, so profiling tools can interpose.
#pragma weak MPI_Type_contiguous_c = PMPI_Type_contiguous_c
#pragma weak MPI_Type_vector_c = PMPI_Type_vector_c
#pragma weak MPI_Type_create_hvector_c = PMPI_Type_create_hvector_c
#pragma weak MPI_Type_indexed_c = PMPI_Type_indexed_c
#pragma weak MPI_Type_create_hindexed_c = PMPI_Type_create_hindexed_c
#pragma weak MPI_Type_create_indexed_block_c = PMPI_Type_create_indexed_block_c
#pragma weak MPI_Type_create_hindexed_block_c = PMPI_Type_create_hindexed_block_c
#pragma weak MPI_Type_create_struct_c = PMPI_Type_create_struct_c
#pragma weak MPI_Type_create_resized_c = PMPI_Type_create_resized_c
#pragma weak MPI_Type_create_subarray_c = PMPI_Type_create_subarray_c
#pragma weak MPI_Type_create_darray_c = PMPI_Type_create_darray_c
#pragma weak MPI_Type_size_c = PMPI_Type_size_c
#pragma weak MPI_Type_get_extent_c = PMPI_Type_get_extent_c
#pragma weak MPI_Type_get_true_extent_c = PMPI_Type_get_true_extent_c
#pragma weak MPI_Type_get_envelope_c = PMPI_Type_get_envelope_c
#pragma weak MPI_Type_get_contents_c = PMPI_Type_get_contents_c
