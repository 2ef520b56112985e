// Portable representations of datatypes: MPI_Pack_external,
// MPI_Unpack_external, MPI_Pack_external_size (datarep "external32" only,
// MPI-3.1 13.5.2; the conversion is external32.hpp) and
// MPI_Type_match_size (MPI-3.1 17.1.9: a predefined type of a class and
// size). Errors go to MPI_COMM_WORLD's handler (no communicator argument).

#include <cstring>
#include <new>

#include "mpi_layer/datatype/external32.hpp"
#include "mpi_layer/mpi_impl.hpp"

using namespace nmad::mpi;

namespace {

template <class Body>
int guarded(const char* fn, bool unpacking, Body&& body) {
  try {
    return body();
  } catch (const DatatypeError& e) {
    return mpi_raise(fn, nullptr, datatype_error_class(e, unpacking), e.what());
  } catch (const std::bad_alloc&) {
    return mpi_raise(fn, nullptr, MPI_ERR_NO_MEM, "out of memory");
  }
}

// MPI_ERR_ARG unless datarep is "external32" (the only one MPI-3.1 defines
// for these calls besides implementation-specific ones).
int check_datarep(const char* fn, const char* datarep) {
  if (!datarep) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null datarep");
  if (std::strcmp(datarep, "external32") != 0)
    return mpi_raise(fn, nullptr, MPI_ERR_ARG,
                     std::string("datarep \"") + datarep + "\" is not supported (only \"external32\")");
  return MPI_SUCCESS;
}


// The int forms and the _c ones (MPI 4.0) share these: Pos is MPI_Aint or
// MPI_Count (both 64-bit), counts are carried as MPI_Count.
template <class Pos>
int pack_external(const char* fn, const char datarep[], const void* inbuf, MPI_Count incount, MPI_Datatype datatype,
                  void* outbuf, MPI_Count outsize, Pos* position) {
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (int e = check_datarep(fn, datarep)) return e;
  if (!position) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null position");
  if (incount < 0) return mpi_raise(fn, nullptr, MPI_ERR_COUNT, "incount " + std::to_string(incount) + " is negative");
  if (outsize < 0) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "outsize " + std::to_string(outsize) + " is negative");
  return guarded(fn, false, [&] {
    const Datatype d = need_type(datatype, "datatype");
    if (!outbuf && d.size() > 0 && incount > 0) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null outbuf");
    Count pos = *position;
    external32::pack(d, inbuf, incount, outbuf, outsize, pos);
    *position = static_cast<Pos>(pos);
    return MPI_SUCCESS;
  });
}

template <class Pos>
int unpack_external(const char* fn, const char datarep[], const void* inbuf, MPI_Count insize, Pos* position,
                    void* outbuf, MPI_Count outcount, MPI_Datatype datatype) {
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (int e = check_datarep(fn, datarep)) return e;
  if (!position) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null position");
  if (outcount < 0)
    return mpi_raise(fn, nullptr, MPI_ERR_COUNT, "outcount " + std::to_string(outcount) + " is negative");
  if (insize < 0) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "insize " + std::to_string(insize) + " is negative");
  return guarded(fn, true, [&] {
    const Datatype d = need_type(datatype, "datatype");
    if (!inbuf && d.size() > 0 && outcount > 0) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null inbuf");
    Count pos = *position;
    external32::unpack(d, inbuf, insize, pos, outbuf, outcount);
    *position = static_cast<Pos>(pos);
    return MPI_SUCCESS;
  });
}

template <class Size>
int pack_external_size(const char* fn, const char datarep[], MPI_Count incount, MPI_Datatype datatype, Size* size) {
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (int e = check_datarep(fn, datarep)) return e;
  if (!size) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null size");
  if (incount < 0) return mpi_raise(fn, nullptr, MPI_ERR_COUNT, "incount " + std::to_string(incount) + " is negative");
  return guarded(fn, false, [&] {
    *size = static_cast<Size>(external32::size(need_type(datatype, "datatype"), incount));
    return MPI_SUCCESS;
  });
}

}  // namespace

extern "C" {

int PMPI_Pack_external(const char datarep[], const void* inbuf, int incount, MPI_Datatype datatype, void* outbuf,
                       MPI_Aint outsize, MPI_Aint* position) {
  return pack_external("MPI_Pack_external", datarep, inbuf, incount, datatype, outbuf, outsize, position);
}
int PMPI_Pack_external_c(const char datarep[], const void* inbuf, MPI_Count incount, MPI_Datatype datatype,
                         void* outbuf, MPI_Count outsize, MPI_Count* position) {
  return pack_external("MPI_Pack_external_c", datarep, inbuf, incount, datatype, outbuf, outsize, position);
}

int PMPI_Unpack_external(const char datarep[], const void* inbuf, MPI_Aint insize, MPI_Aint* position, void* outbuf,
                         int outcount, MPI_Datatype datatype) {
  return unpack_external("MPI_Unpack_external", datarep, inbuf, insize, position, outbuf, outcount, datatype);
}
int PMPI_Unpack_external_c(const char datarep[], const void* inbuf, MPI_Count insize, MPI_Count* position,
                           void* outbuf, MPI_Count outcount, MPI_Datatype datatype) {
  return unpack_external("MPI_Unpack_external_c", datarep, inbuf, insize, position, outbuf, outcount, datatype);
}

int PMPI_Pack_external_size(const char datarep[], int incount, MPI_Datatype datatype, MPI_Aint* size) {
  return pack_external_size("MPI_Pack_external_size", datarep, incount, datatype, size);
}
int PMPI_Pack_external_size_c(const char datarep[], MPI_Count incount, MPI_Datatype datatype, MPI_Count* size) {
  return pack_external_size("MPI_Pack_external_size_c", datarep, incount, datatype, size);
}


int PMPI_Type_match_size(int typeclass, int size, MPI_Datatype* datatype) {
  const char* fn = "MPI_Type_match_size";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (!datatype) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null datatype");
  // Candidates of each class, first match wins (C types; no Fortran types).
  static const MPI_Datatype integers[] = {MPI_SIGNED_CHAR, MPI_SHORT, MPI_INT, MPI_LONG, MPI_LONG_LONG};
  static const MPI_Datatype reals[] = {MPI_FLOAT, MPI_DOUBLE, MPI_LONG_DOUBLE};
  static const MPI_Datatype complexes[] = {MPI_C_FLOAT_COMPLEX, MPI_C_DOUBLE_COMPLEX, MPI_C_LONG_DOUBLE_COMPLEX};
  std::span<const MPI_Datatype> candidates;
  const char* cls = "";
  switch (typeclass) {
    case MPI_TYPECLASS_INTEGER: candidates = integers, cls = "MPI_TYPECLASS_INTEGER"; break;
    case MPI_TYPECLASS_REAL: candidates = reals, cls = "MPI_TYPECLASS_REAL"; break;
    case MPI_TYPECLASS_COMPLEX: candidates = complexes, cls = "MPI_TYPECLASS_COMPLEX"; break;
    default:
      return mpi_raise(fn, nullptr, MPI_ERR_ARG,
                       "typeclass " + std::to_string(typeclass) +
                           " is not MPI_TYPECLASS_INTEGER, MPI_TYPECLASS_REAL or MPI_TYPECLASS_COMPLEX");
  }
  for (MPI_Datatype t : candidates)
    if (type_size(t) == size) {
      *datatype = t;
      return MPI_SUCCESS;
    }
  return mpi_raise(fn, nullptr, MPI_ERR_ARG,
                   std::string("no predefined type of ") + cls + " has size " + std::to_string(size));
}

}  // extern "C"

#pragma weak MPI_Pack_external = PMPI_Pack_external
#pragma weak MPI_Unpack_external = PMPI_Unpack_external
#pragma weak MPI_Pack_external_size = PMPI_Pack_external_size
#pragma weak MPI_Type_match_size = PMPI_Type_match_size
#pragma weak MPI_Pack_external_c = PMPI_Pack_external_c
#pragma weak MPI_Unpack_external_c = PMPI_Unpack_external_c
#pragma weak MPI_Pack_external_size_c = PMPI_Pack_external_size_c
