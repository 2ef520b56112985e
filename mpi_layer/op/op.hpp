// nmad::mpi reduction operations: the predefined MPI ops on the basic types
// the MPI-3.1 standard (5.9.2) allows for them, and user-defined ops.
//
// CONTRACT
// --------
// * Semantics: every op computes inout[k] = in[k] (op) inout[k] for
//   k < count, the argument order of MPI_User_function and MPI_Reduce_local.
// * Allowed combinations (MPI-3.1 5.9.2, C types only):
//     MAX, MIN            : integer, floating point
//     SUM, PROD           : integer, floating point, complex
//     LAND, LOR, LXOR     : integer, logical (MPI_C_BOOL)
//     BAND, BOR, BXOR     : integer, MPI_BYTE
//     MAXLOC, MINLOC      : the pair types (MPI_FLOAT_INT ... MPI_LONG_DOUBLE_INT)
//     REPLACE, NO_OP      : every basic type (MPI_Accumulate family)
//   "integer" = the standard's C integers (MPI_INT, LONG, SHORT,
//   UNSIGNED_SHORT, UNSIGNED, UNSIGNED_LONG, LONG_LONG(_INT),
//   UNSIGNED_LONG_LONG, SIGNED_CHAR, UNSIGNED_CHAR, the (u)intN_t types) and
//   its multi-language MPI_AINT/OFFSET/COUNT, plus MPI_CHAR (reduced as a C
//   char, as MPICH and Open MPI do; the standard leaves it out) and the
//   logical ops on MPI_AINT/OFFSET/COUNT (the standard's table lists them
//   for every other integer op only). MPI_WCHAR and MPI_PACKED only accept
//   REPLACE/NO_OP. Anything else throws OpError{unsupported_type}.
// * Integer SUM/PROD wrap modulo 2^N (no undefined behaviour on overflow).
//   Logical results are 0 or 1 of the operand type. MAXLOC/MINLOC ties keep
//   the smaller index, as the standard requires.
// * MPI_C_BOOL operands are read as bytes (any non-zero byte is true) and
//   written as 0/1, so garbage bytes from the wire are never UB.
// * Commutativity: all predefined ops are commutative except REPLACE
//   (inout = in). User ops carry the flag given at creation (MPI_Op_create).
// * Thread safety: Op is an immutable value; apply() is reentrant.
// * Derived datatypes: the Datatype overloads reduce any committed derived
//   type built from a single basic type (MPI allows predefined ops on those),
//   walking Datatype::element_runs(). User ops get the opaque datatype handle
//   and the element count verbatim.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "mpi_layer/datatype/datatype.hpp"

namespace nmad::mpi {

enum class PredefinedOp : std::uint8_t {
  Max, Min, Sum, Prod, Land, Lor, Lxor, Band, Bor, Bxor, Maxloc, Minloc, Replace, NoOp,
};
inline constexpr int kNumPredefinedOps = static_cast<int>(PredefinedOp::NoOp) + 1;

enum class OpErrc {
  unsupported_type = 1,  // op not defined on that datatype -> MPI_ERR_OP
  invalid_count,         // negative count / > INT_MAX for user ops -> MPI_ERR_COUNT
  invalid_op,            // null user function, unknown op -> MPI_ERR_OP
};

class OpError : public std::runtime_error {
 public:
  OpError(OpErrc code, const std::string& what) : std::runtime_error(what), code_(code) {}
  OpErrc code() const noexcept { return code_; }

 private:
  OpErrc code_;
};

// MPI_User_function: void (void* invec, void* inoutvec, int* len, MPI_Datatype* datatype),
// with MPI_Datatype an int handle in our mpi.h.
using UserFunction = void(void* in, void* inout, int* len, int* datatype_handle);
// MPI_User_function_c (MPI 4.0, MPI_Op_create_c): the same with an
// MPI_Count length, so a reduction of more than INT_MAX elements reaches it
// in one call.
using UserFunctionC = void(void* in, void* inout, long long* len, int* datatype_handle);

const char* op_name(PredefinedOp op);  // "MPI_MAX", ...
bool op_allowed(PredefinedOp op, BasicType type);
bool op_is_commutative(PredefinedOp op);

// inout[k] = in[k] op inout[k] for k < count. Throws OpError.
void apply(PredefinedOp op, const void* in, void* inout, Count count, BasicType type);

// out[k] = a[k] op b[k] (a in the `in` position, b in the `inout` one)
// without touching a or b: out is b, a, or a buffer overlapping neither.
// Reductions that combine a received operand with data a peer may still be
// reading write a buffer of their own this way instead of copying first.
void apply_into(PredefinedOp op, const void* a, const void* b, void* out, Count count, BasicType type);

// Same on `count` elements of a committed derived datatype whose data
// entries all have one basic type (Datatype::uniform_basic_type()); in and
// inout share the type's layout. Mixed types -> OpError{unsupported_type},
// uncommitted/null types -> DatatypeError.
void apply(PredefinedOp op, const void* in, void* inout, Count count, const Datatype& type);

// The same reductions on PACKED data (Datatype::pack output): basic elements
// are back to back, so pair types take sizeof(v) + sizeof(int) bytes each
// (no padding; e.g. 12 for MPI_DOUBLE_INT instead of its 16-byte extent).
// For every other basic type the packed and the C layouts coincide. This is
// what a collective that packs its operands (nmad::coll) should call:
// `count` elements of `type` = type.packed_size(count) bytes per operand.
void apply_packed(PredefinedOp op, const void* in, void* inout, Count count, BasicType type);
void apply_packed(PredefinedOp op, const void* in, void* inout, Count count, const Datatype& type);
// apply_into on packed operands (pair types: see apply_packed).
void apply_packed_into(PredefinedOp op, const void* a, const void* b, void* out, Count count, BasicType type);

class Op {
 public:
  Op() : Op(PredefinedOp::NoOp) {}
  Op(PredefinedOp op) : predefined_(op), is_predefined_(true) {}  // NOLINT: implicit on purpose
  static Op predefined(PredefinedOp op) { return Op(op); }
  static Op user(UserFunction* fn, bool commute);  // MPI_Op_create
  static Op user_c(UserFunctionC* fn, bool commute);  // MPI_Op_create_c

  bool is_predefined() const noexcept { return is_predefined_; }
  PredefinedOp predefined_op() const noexcept { return predefined_; }  // valid if is_predefined()
  UserFunction* user_function() const noexcept { return fn_; }        // null if predefined or _c
  bool is_commutative() const noexcept;                                // MPI_Op_commutative

  // Predefined: apply(op, in, inout, count, type) (handle ignored).
  // User: fn(in, inout, &len, &datatype_handle) with len = count.
  void reduce(const void* in, void* inout, Count count, BasicType type, int datatype_handle) const;
  // Predefined: apply(op, in, inout, count, type). User: as above.
  void reduce(const void* in, void* inout, Count count, const Datatype& type, int datatype_handle) const;
  // Predefined ops on packed operands (see apply_packed); user ops are
  // rejected (they must see the datatype's memory layout: unpack first).
  void reduce_packed(const void* in, void* inout, Count count, const Datatype& type) const;
  // User ops on any (derived) datatype: only the handle is needed. An int
  // user function takes at most INT_MAX elements per call (more: OpError
  // invalid_count), an MPI_Count one (MPI_Op_create_c) any count.
  void reduce_user(const void* in, void* inout, Count count, int datatype_handle) const;

 private:
  PredefinedOp predefined_ = PredefinedOp::NoOp;
  bool is_predefined_ = true;
  bool commute_ = true;
  UserFunction* fn_ = nullptr;
  UserFunctionC* fn_c_ = nullptr;  // set instead of fn_ by MPI_Op_create_c
};

}  // namespace nmad::mpi
