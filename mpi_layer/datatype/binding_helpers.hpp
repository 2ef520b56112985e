#pragma once
// What the datatype bindings (datatype_bindings.cpp and the large-count
// forms in large_count_bindings.cpp) share: the error translation around a
// call into the datatype engine, the argument checks of constructors, and
// the constructor pattern (check, build, register the new handle).
// Private to the bindings (not installed).
#include <new>
#include <string>

#include "mpi_layer/mpi_impl.hpp"

namespace nmad::mpi::type_bindings {

// Runs body (which may throw DatatypeError) and raises what it throws.
template <class Body>
int guarded(const char* fn, Body&& body) {
  try {
    return body();
  } catch (const DatatypeError& e) {
    return mpi_raise(fn, nullptr, datatype_error_class(e), e.what());
  } catch (const std::bad_alloc&) {
    return mpi_raise(fn, nullptr, MPI_ERR_NO_MEM, "out of memory");
  }
}

// A negative count or a null array that should hold count entries:
// DatatypeError naming the argument.
inline void need_count(Count count, const char* what) {
  if (count < 0)
    throw DatatypeError(DatatypeErrc::invalid_count, std::string(what) + " " + std::to_string(count) + " is negative");
}
inline void need_array(const void* p, Count count, const char* what) {
  if (!p && count > 0) throw DatatypeError(DatatypeErrc::invalid_argument, std::string("null ") + what);
}

// The constructor pattern: checks, builds, registers the new handle.
template <class Build>
int construct(const char* fn, MPI_Datatype* newtype, Build&& build) {
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (!newtype) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null newtype");
  return guarded(fn, [&] {
    Datatype d = build();
    *newtype = register_type(std::move(d));
    return MPI_SUCCESS;
  });
}

}  // namespace nmad::mpi::type_bindings
