// Language interoperability (MPI-3.1 17.2) without Fortran bindings:
//   * MPI_Status_c2f / MPI_Status_f2c copy a status to and from an array of
//     MPI_F_STATUS_SIZE MPI_Fints (the C layout as is, so MPI_SOURCE,
//     MPI_TAG and MPI_ERROR sit at MPI_F_SOURCE, MPI_F_TAG, MPI_F_ERROR and
//     the private count and cancel flag travel along);
//   * MPI_Type_create_f90_integer/real/complex: the type map of the C type
//     of the smallest kind with at least the requested decimal precision p
//     and decimal exponent range r, as Fortran's SELECTED_INT_KIND and
//     SELECTED_REAL_KIND choose (precision = *_DIG, range =
//     min(*_MAX_10_EXP, -*_MIN_10_EXP)); MPI_UNDEFINED leaves p or r free;
//     no fitting type is MPI_ERR_ARG. The result is a predefined type
//     (MPI-3.1 17.1.9: MPI_Type_free refuses it) made once per (p, r) and
//     returned again for the same parameters; MPI_Type_get_envelope gives
//     MPI_COMBINER_F90_REAL/COMPLEX/INTEGER and MPI_Type_get_contents the
//     parameters as given (p, r; r alone for an integer).
#include <algorithm>
#include <cfloat>
#include <cstring>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <tuple>

#include "mpi_layer/mpi_impl.hpp"

using namespace nmad::mpi;

static_assert(sizeof(MPI_Status) == MPI_F_STATUS_SIZE * sizeof(MPI_Fint),
              "MPI_F_STATUS_SIZE must cover the whole MPI_Status");
static_assert(offsetof(MPI_Status, MPI_SOURCE) == MPI_F_SOURCE * sizeof(MPI_Fint) &&
                  offsetof(MPI_Status, MPI_TAG) == MPI_F_TAG * sizeof(MPI_Fint) &&
                  offsetof(MPI_Status, MPI_ERROR) == MPI_F_ERROR * sizeof(MPI_Fint),
              "MPI_F_SOURCE/TAG/ERROR must index the public fields");

namespace {

struct real_kind {
  MPI_Datatype real, complex;
  int precision, range;
};
constexpr int range_of(int max_10_exp, int min_10_exp) { return std::min(max_10_exp, -min_10_exp); }
// Smallest first.
constexpr real_kind kRealKinds[] = {
    {MPI_FLOAT, MPI_C_FLOAT_COMPLEX, FLT_DIG, range_of(FLT_MAX_10_EXP, FLT_MIN_10_EXP)},
    {MPI_DOUBLE, MPI_C_DOUBLE_COMPLEX, DBL_DIG, range_of(DBL_MAX_10_EXP, DBL_MIN_10_EXP)},
    {MPI_LONG_DOUBLE, MPI_C_LONG_DOUBLE_COMPLEX, LDBL_DIG, range_of(LDBL_MAX_10_EXP, LDBL_MIN_10_EXP)},
};

struct int_kind {
  MPI_Datatype type;
  int range;  // largest r with 10^r - 1 representable: floor(log10(max))
};
constexpr int_kind kIntKinds[] = {{MPI_INT8_T, 2}, {MPI_INT16_T, 4}, {MPI_INT32_T, 9}, {MPI_INT64_T, 18}};

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

// The F90 types made so far: (combiner, p, r) -> handle (never freed).
MPI_Datatype f90_type(Combiner combiner, MPI_Datatype of, int p, int r) {
  static std::mutex mu;
  static std::map<std::tuple<Combiner, int, int>, MPI_Datatype> made;
  std::lock_guard g(mu);
  const auto key = std::make_tuple(combiner, p, r);
  if (auto it = made.find(key); it != made.end()) return it->second;
  const int real_params[] = {p, r};
  const std::span<const int> params =
      combiner == Combiner::F90Integer ? std::span<const int>(&real_params[1], 1) : std::span<const int>(real_params);
  const MPI_Datatype h = register_predefined_type(Datatype::f90(combiner, type_of(of), params));
  made.emplace(key, h);
  return h;
}

std::string pr_text(int p, int r) {
  auto one = [](int v) { return v == MPI_UNDEFINED ? std::string("MPI_UNDEFINED") : std::to_string(v); };
  return "p = " + one(p) + ", r = " + one(r);
}

int create_f90_real(const char* fn, int p, int r, bool complex, MPI_Datatype* newtype) {
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (!newtype) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null newtype");
  if (p == MPI_UNDEFINED && r == MPI_UNDEFINED)
    return mpi_raise(fn, nullptr, MPI_ERR_ARG, "p and r are both MPI_UNDEFINED (one must be given)");
  for (const real_kind& k : kRealKinds) {
    if ((p == MPI_UNDEFINED || p <= k.precision) && (r == MPI_UNDEFINED || r <= k.range)) {
      return guarded(fn, [&] {
        *newtype = complex ? f90_type(Combiner::F90Complex, k.complex, p, r) : f90_type(Combiner::F90Real, k.real, p, r);
        return MPI_SUCCESS;
      });
    }
  }
  *newtype = MPI_DATATYPE_NULL;
  return mpi_raise(fn, nullptr, MPI_ERR_ARG,
                   std::string("no ") + (complex ? "complex" : "real") + " type has " + pr_text(p, r) +
                       " (widest: precision " + std::to_string(kRealKinds[2].precision) + ", range " +
                       std::to_string(kRealKinds[2].range) + ")");
}

}  // namespace

extern "C" {

int PMPI_Status_c2f(const MPI_Status* c_status, MPI_Fint* f_status) {
  const char* fn = "MPI_Status_c2f";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (c_status == MPI_STATUS_IGNORE) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "c_status is MPI_STATUS_IGNORE");
  if (f_status == MPI_F_STATUS_IGNORE) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null f_status");
  std::memcpy(f_status, c_status, sizeof(MPI_Status));
  return MPI_SUCCESS;
}

int PMPI_Status_f2c(const MPI_Fint* f_status, MPI_Status* c_status) {
  const char* fn = "MPI_Status_f2c";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (f_status == MPI_F_STATUS_IGNORE) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "f_status is MPI_F_STATUS_IGNORE");
  if (c_status == MPI_STATUS_IGNORE) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "c_status is MPI_STATUS_IGNORE");
  std::memcpy(c_status, f_status, sizeof(MPI_Status));
  return MPI_SUCCESS;
}

int PMPI_Type_create_f90_integer(int r, MPI_Datatype* newtype) {
  const char* fn = "MPI_Type_create_f90_integer";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (!newtype) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null newtype");
  if (r == MPI_UNDEFINED) {
    *newtype = MPI_DATATYPE_NULL;
    return mpi_raise(fn, nullptr, MPI_ERR_ARG, "r is MPI_UNDEFINED");
  }
  for (const int_kind& k : kIntKinds) {
    if (r <= k.range) {
      return guarded(fn, [&] {
        *newtype = f90_type(Combiner::F90Integer, k.type, MPI_UNDEFINED, r);
        return MPI_SUCCESS;
      });
    }
  }
  *newtype = MPI_DATATYPE_NULL;
  return mpi_raise(fn, nullptr, MPI_ERR_ARG,
                   "no integer type has a decimal range of " + std::to_string(r) + " (widest: 18, MPI_INT64_T)");
}

int PMPI_Type_create_f90_real(int p, int r, MPI_Datatype* newtype) {
  return create_f90_real("MPI_Type_create_f90_real", p, r, false, newtype);
}

int PMPI_Type_create_f90_complex(int p, int r, MPI_Datatype* newtype) {
  return create_f90_real("MPI_Type_create_f90_complex", p, r, true, newtype);
}

}  // extern "C"

#pragma weak MPI_Status_c2f = PMPI_Status_c2f
#pragma weak MPI_Status_f2c = PMPI_Status_f2c
#pragma weak MPI_Type_create_f90_integer = PMPI_Type_create_f90_integer
#pragma weak MPI_Type_create_f90_real = PMPI_Type_create_f90_real
#pragma weak MPI_Type_create_f90_complex = PMPI_Type_create_f90_complex
