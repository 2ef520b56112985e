// Packing (MPI_Pack, MPI_Unpack, MPI_Pack_size), element counts of a
// status (MPI_Get_count, MPI_Get_elements(_x), MPI_Status_set_elements(_x)),
// each with its MPI 4.0 large-count form (_c)
// and addresses (MPI_Get_address, MPI_Aint_add, MPI_Aint_diff), for
// predefined and derived datatypes alike.
//
// Packed format: the engine's (datatype.hpp): the data bytes of the elements
// in type-map order, native representation, no header - so a message sent
// as MPI_PACKED matches a receive of the original datatype and vice versa.

#include <climits>
#include <cstdint>
#include <limits>
#include <new>

#include "mpi_layer/mpi_impl.hpp"

using namespace nmad::mpi;

namespace {

// Runs body (which may throw DatatypeError) and raises what it throws on c.
template <class Body>
int guarded(const char* fn, comm_obj* c, bool unpacking, Body&& body) {
  try {
    return body();
  } catch (const DatatypeError& e) {
    return mpi_raise(fn, c, datatype_error_class(e, unpacking), e.what());
  } catch (const std::bad_alloc&) {
    return mpi_raise(fn, c, MPI_ERR_NO_MEM, "out of memory");
  }
}

// Predefined types whose elements are single basic elements (not the
// MINLOC/MAXLOC pairs, which count two): the lock-free fast path.
bool simple_predefined(MPI_Datatype t) {
  auto b = basic_of(t);
  return b && !is_pair_type(*b);
}

// Elements of datatype in a status (Get_elements_x); nullopt = MPI_UNDEFINED.
int status_elements(const char* fn, const MPI_Status* status, MPI_Datatype datatype, std::optional<Count>& out) {
  if (!status) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null status");
  if (simple_predefined(datatype)) {
    const int n = type_size(datatype);
    if (n == 0) out = 0;
    else if (status->nmad_count % n != 0) out = std::nullopt;
    else out = status->nmad_count / n;
    return MPI_SUCCESS;
  }
  return guarded(fn, nullptr, false, [&] {
    out = need_type(datatype, "datatype").get_elements(status->nmad_count);
    return MPI_SUCCESS;
  });
}

// Bytes whose packed image holds exactly `count` basic elements of d
// (Status_set_elements): whole elements, then the shortest prefix of one
// element holding the rest.
int bytes_for_elements(const char* fn, const Datatype& d, Count count, Count& bytes) {
  if (count < 0) return mpi_raise(fn, nullptr, MPI_ERR_COUNT, "count " + std::to_string(count) + " is negative");
  const Count nel = d.num_basic_elements(), size = d.size();
  if (nel == 0) {
    if (count != 0)
      return mpi_raise(fn, nullptr, MPI_ERR_ARG, "datatype holds no elements, cannot set " + std::to_string(count));
    bytes = 0;
    return MPI_SUCCESS;
  }
  bytes = (count / nel) * size;
  const Count rem = count % nel;
  if (rem == 0) return MPI_SUCCESS;
  for (Count r = 1; r < size; ++r) {
    auto e = d.get_elements(r);
    if (e && *e == rem) {
      bytes += r;
      return MPI_SUCCESS;
    }
  }
  return mpi_raise(fn, nullptr, MPI_ERR_INTERN, "no byte count holds " + std::to_string(rem) + " elements");
}

int set_elements(const char* fn, MPI_Status* status, MPI_Datatype datatype, Count count) {
  if (!status) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null status");
  return guarded(fn, nullptr, false, [&] {
    Count bytes = 0;
    if (int e = bytes_for_elements(fn, need_type(datatype, "datatype"), count, bytes)) return e;
    status->nmad_count = bytes;
    return MPI_SUCCESS;
  });
}

// MPI_Pack(_c) and MPI_Unpack(_c): Pos is int or MPI_Count (position and
// sizes); counts are carried as MPI_Count. An int position that would pass
// INT_MAX is refused before anything is written.
template <class Pos>
int pack(const char* fn, const void* inbuf, MPI_Count incount, MPI_Datatype datatype, void* outbuf, MPI_Count outsize,
         Pos* position, MPI_Comm comm) {
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  comm_obj* c = lookup_comm(comm);
  if (!c) return mpi_raise(fn, nullptr, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm));
  if (!position) return mpi_raise(fn, c, MPI_ERR_ARG, "null position");
  if (incount < 0) return mpi_raise(fn, c, MPI_ERR_COUNT, "incount " + std::to_string(incount) + " is negative");
  if (outsize < 0) return mpi_raise(fn, c, MPI_ERR_ARG, "outsize " + std::to_string(outsize) + " is negative");
  return guarded(fn, c, false, [&] {
    const Datatype d = need_type(datatype, "datatype");
    if (!outbuf && d.size() > 0 && incount > 0) return mpi_raise(fn, c, MPI_ERR_ARG, "null outbuf");
    Count pos = *position;
    d.pack(inbuf, incount, outbuf, outsize, pos);
    *position = static_cast<Pos>(pos);  // pos <= outsize, which a Pos holds
    return MPI_SUCCESS;
  });
}

template <class Pos>
int unpack(const char* fn, const void* inbuf, MPI_Count insize, Pos* position, void* outbuf, MPI_Count outcount,
           MPI_Datatype datatype, MPI_Comm comm) {
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  comm_obj* c = lookup_comm(comm);
  if (!c) return mpi_raise(fn, nullptr, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm));
  if (!position) return mpi_raise(fn, c, MPI_ERR_ARG, "null position");
  if (outcount < 0) return mpi_raise(fn, c, MPI_ERR_COUNT, "outcount " + std::to_string(outcount) + " is negative");
  if (insize < 0) return mpi_raise(fn, c, MPI_ERR_ARG, "insize " + std::to_string(insize) + " is negative");
  return guarded(fn, c, true, [&] {
    const Datatype d = need_type(datatype, "datatype");
    if (!inbuf && d.size() > 0 && outcount > 0) return mpi_raise(fn, c, MPI_ERR_ARG, "null inbuf");
    Count pos = *position;
    d.unpack(inbuf, insize, pos, outbuf, outcount);
    *position = static_cast<Pos>(pos);  // pos <= insize
    return MPI_SUCCESS;
  });
}

// An upper bound (here: exact) of the bytes MPI_Pack writes for incount
// elements. Works on uncommitted types too. The int form refuses a size
// above INT_MAX (MPI_ERR_COUNT), the _c form (Size = MPI_Count) one that
// overflows an MPI_Count.
template <class Size>
int pack_size(const char* fn, MPI_Count incount, MPI_Datatype datatype, MPI_Comm comm, Size* size) {
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  comm_obj* c = lookup_comm(comm);
  if (!c) return mpi_raise(fn, nullptr, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm));
  if (!size) return mpi_raise(fn, c, MPI_ERR_ARG, "null size");
  if (incount < 0) return mpi_raise(fn, c, MPI_ERR_COUNT, "incount " + std::to_string(incount) + " is negative");
  return guarded(fn, c, false, [&] {
    const Count s = need_type(datatype, "datatype").size();
    constexpr Count kMax = std::numeric_limits<Size>::max();
    if (incount > 0 && s > kMax / incount)
      return mpi_raise(fn, c, MPI_ERR_COUNT,
                       std::to_string(incount) + " elements of " + std::to_string(s) + " bytes exceed " +
                           (sizeof(Size) == sizeof(int) ? "INT_MAX (use MPI_Pack_size_c)" : "an MPI_Count"));
    *size = static_cast<Size>(s * incount);
    return MPI_SUCCESS;
  });
}

// MPI_Get_count(_c): elements of datatype in the status; MPI_UNDEFINED when
// the bytes are not whole elements or (int form) the count passes INT_MAX.
template <class Out>
int get_count(const char* fn, const MPI_Status* status, MPI_Datatype datatype, Out* count) {
  if (!status || !count) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null status or count");
  constexpr Count kMax = std::numeric_limits<Out>::max();
  const int n = type_size(datatype);
  if (n > 0) {  // predefined: no lock
    const Count q = status->nmad_count / n;
    *count = status->nmad_count % n != 0 || q > kMax ? MPI_UNDEFINED : static_cast<Out>(q);
    return MPI_SUCCESS;
  }
  return guarded(fn, nullptr, false, [&] {
    const std::optional<Count> c = need_type(datatype, "datatype").get_count(status->nmad_count);
    *count = !c || *c > kMax ? MPI_UNDEFINED : static_cast<Out>(*c);
    return MPI_SUCCESS;
  });
}

}  // namespace

extern "C" {

int PMPI_Pack(const void* inbuf, int incount, MPI_Datatype datatype, void* outbuf, int outsize, int* position,
              MPI_Comm comm) {
  return pack("MPI_Pack", inbuf, incount, datatype, outbuf, outsize, position, comm);
}
int PMPI_Pack_c(const void* inbuf, MPI_Count incount, MPI_Datatype datatype, void* outbuf, MPI_Count outsize,
                MPI_Count* position, MPI_Comm comm) {
  return pack("MPI_Pack_c", inbuf, incount, datatype, outbuf, outsize, position, comm);
}

int PMPI_Unpack(const void* inbuf, int insize, int* position, void* outbuf, int outcount, MPI_Datatype datatype,
                MPI_Comm comm) {
  return unpack("MPI_Unpack", inbuf, insize, position, outbuf, outcount, datatype, comm);
}
int PMPI_Unpack_c(const void* inbuf, MPI_Count insize, MPI_Count* position, void* outbuf, MPI_Count outcount,
                  MPI_Datatype datatype, MPI_Comm comm) {
  return unpack("MPI_Unpack_c", inbuf, insize, position, outbuf, outcount, datatype, comm);
}

int PMPI_Pack_size(int incount, MPI_Datatype datatype, MPI_Comm comm, int* size) {
  return pack_size("MPI_Pack_size", incount, datatype, comm, size);
}
int PMPI_Pack_size_c(MPI_Count incount, MPI_Datatype datatype, MPI_Comm comm, MPI_Count* size) {
  return pack_size("MPI_Pack_size_c", incount, datatype, comm, size);
}

int PMPI_Get_count(const MPI_Status* status, MPI_Datatype datatype, int* count) {
  return get_count("MPI_Get_count", status, datatype, count);
}
int PMPI_Get_count_c(const MPI_Status* status, MPI_Datatype datatype, MPI_Count* count) {
  return get_count("MPI_Get_count_c", status, datatype, count);
}

int PMPI_Get_elements(const MPI_Status* status, MPI_Datatype datatype, int* count) {
  if (!count) return mpi_raise("MPI_Get_elements", nullptr, MPI_ERR_ARG, "null count");
  std::optional<Count> n;
  if (int e = status_elements("MPI_Get_elements", status, datatype, n)) return e;
  *count = !n || *n > INT_MAX ? MPI_UNDEFINED : static_cast<int>(*n);
  return MPI_SUCCESS;
}

int PMPI_Get_elements_x(const MPI_Status* status, MPI_Datatype datatype, MPI_Count* count) {
  if (!count) return mpi_raise("MPI_Get_elements_x", nullptr, MPI_ERR_ARG, "null count");
  std::optional<Count> n;
  if (int e = status_elements("MPI_Get_elements_x", status, datatype, n)) return e;
  *count = n ? *n : MPI_UNDEFINED;
  return MPI_SUCCESS;
}

// MPI 4.0: the large-count form of MPI_Get_elements (as MPI_Get_elements_x).
int PMPI_Get_elements_c(const MPI_Status* status, MPI_Datatype datatype, MPI_Count* count) {
  if (!count) return mpi_raise("MPI_Get_elements_c", nullptr, MPI_ERR_ARG, "null count");
  std::optional<Count> n;
  if (int e = status_elements("MPI_Get_elements_c", status, datatype, n)) return e;
  *count = n ? *n : MPI_UNDEFINED;
  return MPI_SUCCESS;
}

int PMPI_Status_set_elements(MPI_Status* status, MPI_Datatype datatype, int count) {
  return set_elements("MPI_Status_set_elements", status, datatype, count);
}

int PMPI_Status_set_elements_x(MPI_Status* status, MPI_Datatype datatype, MPI_Count count) {
  return set_elements("MPI_Status_set_elements_x", status, datatype, count);
}

int PMPI_Status_set_elements_c(MPI_Status* status, MPI_Datatype datatype, MPI_Count count) {
  return set_elements("MPI_Status_set_elements_c", status, datatype, count);
}

int PMPI_Get_address(const void* location, MPI_Aint* address) {
  if (!address) return mpi_raise("MPI_Get_address", nullptr, MPI_ERR_ARG, "null address");
  *address = static_cast<MPI_Aint>(reinterpret_cast<std::uintptr_t>(location));
  return MPI_SUCCESS;
}

// Address arithmetic on unsigned integers (no signed overflow).
MPI_Aint PMPI_Aint_add(MPI_Aint base, MPI_Aint disp) {
  return static_cast<MPI_Aint>(static_cast<std::uintptr_t>(base) + static_cast<std::uintptr_t>(disp));
}

MPI_Aint PMPI_Aint_diff(MPI_Aint addr1, MPI_Aint addr2) {
  return static_cast<MPI_Aint>(static_cast<std::uintptr_t>(addr1) - static_cast<std::uintptr_t>(addr2));
}

}  // extern "C"

// The public names: weak aliases, so profiling tools can interpose.
#pragma weak MPI_Pack = PMPI_Pack
#pragma weak MPI_Unpack = PMPI_Unpack
#pragma weak MPI_Pack_size = PMPI_Pack_size
#pragma weak MPI_Get_count = PMPI_Get_count
#pragma weak MPI_Get_elements = PMPI_Get_elements
#pragma weak MPI_Get_elements_x = PMPI_Get_elements_x
#pragma weak MPI_Status_set_elements = PMPI_Status_set_elements
#pragma weak MPI_Status_set_elements_x = PMPI_Status_set_elements_x
#pragma weak MPI_Get_address = PMPI_Get_address
#pragma weak MPI_Aint_add = PMPI_Aint_add
#pragma weak MPI_Aint_diff = PMPI_Aint_diff
#pragma weak MPI_Pack_c = PMPI_Pack_c
#pragma weak MPI_Unpack_c = PMPI_Unpack_c
#pragma weak MPI_Pack_size_c = PMPI_Pack_size_c
#pragma weak MPI_Get_count_c = PMPI_Get_count_c
#pragma weak MPI_Get_elements_c = PMPI_Get_elements_c
#pragma weak MPI_Status_set_elements_c = PMPI_Status_set_elements_c
