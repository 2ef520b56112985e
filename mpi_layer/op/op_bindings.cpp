// Reduction operations: the MPI_Op handle table, MPI_Op_create/free,
// MPI_Op_commutative, MPI_Reduce_local, and the op/datatype check shared
// with the collectives (coll/collectives.cpp). The engine is op.hpp.
//
// Handles: 1..14 are the predefined ops (handle = PredefinedOp + 1, see
// mpi.h); user ops get handles from kFirstUserOp up, recycled after
// MPI_Op_free. An Op is an immutable value, so a collective copies it when
// it starts: freeing the handle while a non-blocking collective still uses
// the op is safe (MPI-3.1 5.9.5 allows it).
#include <array>
#include <climits>
#include <memory>
#include <mutex>
#include <optional>
#include <type_traits>
#include <vector>

#include "mpi_layer/mpi_impl.hpp"
#include "mpi_layer/op/op.hpp"

namespace nmad::mpi {
namespace {

constexpr int kFirstUserOp = 32;

struct op_table {
  std::mutex mu;
  std::vector<std::optional<Op>> ops;  // index = handle - kFirstUserOp
  std::vector<int> free;               // recycled handles
};

op_table& ops() {
  static op_table* t = new op_table();  // never destroyed (see st())
  return *t;
}

std::string type_name(MPI_Datatype h) {
  if (auto b = basic_of(h)) return basic_type_info(*b).name;
  return "datatype " + std::to_string(h);
}

}  // namespace

bool op_of(MPI_Op h, Op& out) {
  if (h >= 1 && h <= kNumPredefinedOps) {
    out = Op(static_cast<PredefinedOp>(h - 1));
    return true;
  }
  if (h < kFirstUserOp) return false;
  op_table& t = ops();
  std::lock_guard g(t.mu);
  const auto i = static_cast<std::size_t>(h - kFirstUserOp);
  if (i >= t.ops.size() || !t.ops[i]) return false;
  out = *t.ops[i];
  return true;
}

std::string op_display_name(MPI_Op h) {
  if (h >= 1 && h <= kNumPredefinedOps) return op_name(static_cast<PredefinedOp>(h - 1));
  if (h == MPI_OP_NULL) return "MPI_OP_NULL";
  return "user op " + std::to_string(h);
}

int check_op(MPI_Op h, MPI_Datatype th, const Datatype& type, bool collective, Op& out, std::string& detail) {
  if (!op_of(h, out)) {
    detail = "invalid op " + std::to_string(h) + (h == MPI_OP_NULL ? " (MPI_OP_NULL)" : "");
    return MPI_ERR_OP;
  }
  if (!out.is_predefined()) return MPI_SUCCESS;  // user ops take any datatype
  const PredefinedOp p = out.predefined_op();
  if (collective && (p == PredefinedOp::Replace || p == PredefinedOp::NoOp)) {
    detail = std::string(op_name(p)) + " is only allowed in accumulate operations (one-sided), not with " +
             type_name(th);
    return MPI_ERR_OP;
  }
  const std::optional<BasicType> b = type.uniform_basic_type();
  if (!b) {
    if (type.size() == 0) return MPI_SUCCESS;  // nothing to reduce
    detail = std::string(op_name(p)) + " is not defined on " + type_name(th) +
             ": predefined ops need a datatype built from one basic type";
    return MPI_ERR_OP;
  }
  if (!op_allowed(p, *b)) {
    detail = std::string(op_name(p)) + " is not defined on " + type_name(th);
    if (!basic_of(th)) detail += std::string(" (built from ") + basic_type_info(*b).name + ")";
    return MPI_ERR_OP;
  }
  return MPI_SUCCESS;
}

namespace {
// predefined_reduction_ok's answers, for every (op, predefined type)
// handle pair: one load on the zero-byte short paths.
struct reduction_table {
  std::array<std::array<bool, kNumBasicTypes>, kNumPredefinedOps> ok{};
  reduction_table() {
    for (int o = 0; o < kNumPredefinedOps; ++o) {
      const auto p = static_cast<PredefinedOp>(o);
      if (p == PredefinedOp::Replace || p == PredefinedOp::NoOp) continue;
      for (int t = 0; t < kNumBasicTypes; ++t) ok[o][t] = op_allowed(p, static_cast<BasicType>(t));
    }
  }
};
const reduction_table g_reductions;
}  // namespace

bool predefined_reduction_ok(MPI_Op h, MPI_Datatype th) {
  const std::optional<BasicType> b = basic_of(th);
  if (!b || h < 1 || h > kNumPredefinedOps) return false;
  return g_reductions.ok[static_cast<std::size_t>(h - 1)][static_cast<std::size_t>(*b)];
}

int check_datatype(MPI_Datatype h, Datatype& out, std::string& detail) {
  out = type_of(h);
  if (!out) {
    detail = "invalid datatype " + std::to_string(h);
    return MPI_ERR_TYPE;
  }
  if (!out.is_committed()) {
    detail = "datatype " + std::to_string(h) + " is not committed";
    return MPI_ERR_TYPE;
  }
  return MPI_SUCCESS;
}

}  // namespace nmad::mpi

using namespace nmad::mpi;

namespace {
// MPI_Op_create(_c): the op's handle, recycled ones first.
template <class Fn>
int op_create(const char* fn, Fn* user_fn, int commute, MPI_Op* op) {
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (!user_fn) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null user function");
  if (!op) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null op pointer");
  Op o;
  if constexpr (std::is_same_v<Fn, UserFunctionC>) o = Op::user_c(user_fn, commute != 0);
  else o = Op::user(user_fn, commute != 0);
  op_table& t = ops();
  std::lock_guard g(t.mu);
  if (!t.free.empty()) {
    const int h = t.free.back();
    t.free.pop_back();
    t.ops[static_cast<std::size_t>(h - kFirstUserOp)] = o;
    *op = h;
  } else {
    t.ops.emplace_back(o);
    *op = kFirstUserOp + static_cast<int>(t.ops.size()) - 1;
  }
  return MPI_SUCCESS;
}

// MPI_Reduce_local(_c).
int reduce_local(const char* fn, const void* inbuf, void* inoutbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op) {
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (count < 0) return mpi_raise(fn, nullptr, MPI_ERR_COUNT, "negative count " + std::to_string(count));
  std::string detail;
  Datatype t;
  if (int e = check_datatype(datatype, t, detail)) return mpi_raise(fn, nullptr, e, detail);
  Op o;
  if (int e = check_op(op, datatype, t, false, o, detail)) return mpi_raise(fn, nullptr, e, detail);
  if (count > 0 && t.size() > 0 && (!inbuf || !inoutbuf || inbuf == MPI_IN_PLACE || inoutbuf == MPI_IN_PLACE))
    return mpi_raise(fn, nullptr, MPI_ERR_BUFFER, "null or MPI_IN_PLACE buffer with count " + std::to_string(count));
  try {
    // Both operands in the user's layout: predefined ops walk the type's
    // element runs, user ops get the buffers as they are.
    o.reduce(inbuf, inoutbuf, count, t, datatype);
  } catch (const OpError& e) {
    return mpi_raise(fn, nullptr, e.code() == OpErrc::invalid_count ? MPI_ERR_COUNT : MPI_ERR_OP, e.what());
  } catch (const DatatypeError& e) {
    return mpi_raise(fn, nullptr, MPI_ERR_TYPE, e.what());
  }
  return MPI_SUCCESS;
}

}  // namespace

extern "C" {

int PMPI_Op_create(MPI_User_function* user_fn, int commute, MPI_Op* op) {
  return op_create("MPI_Op_create", reinterpret_cast<UserFunction*>(user_fn), commute, op);
}
// MPI 4.0: the user function takes an MPI_Count length; every reduction
// (Reduce_local(_c), the blocking and non-blocking collectives) calls it
// with the whole count at once.
int PMPI_Op_create_c(MPI_User_function_c* user_fn, int commute, MPI_Op* op) {
  return op_create("MPI_Op_create_c", reinterpret_cast<UserFunctionC*>(user_fn), commute, op);
}

int PMPI_Op_free(MPI_Op* op) {
  if (!check_initialized("MPI_Op_free")) return MPI_ERR_OTHER;
  if (!op) return mpi_raise("MPI_Op_free", nullptr, MPI_ERR_ARG, "null op pointer");
  if (*op >= 1 && *op <= kNumPredefinedOps)
    return mpi_raise("MPI_Op_free", nullptr, MPI_ERR_OP, "cannot free predefined op " + op_display_name(*op));
  op_table& t = ops();
  bool valid = false;
  {
    std::lock_guard g(t.mu);
    const auto i = static_cast<std::size_t>(*op - kFirstUserOp);
    if (*op >= kFirstUserOp && i < t.ops.size() && t.ops[i]) {
      t.ops[i].reset();
      t.free.push_back(*op);
      valid = true;
    }
  }
  // (mpi_raise may call a user handler: never under the table lock.)
  if (!valid) return mpi_raise("MPI_Op_free", nullptr, MPI_ERR_OP, "invalid op " + std::to_string(*op));
  *op = MPI_OP_NULL;
  return MPI_SUCCESS;
}

int PMPI_Op_commutative(MPI_Op op, int* commute) {
  if (!check_initialized("MPI_Op_commutative")) return MPI_ERR_OTHER;
  Op o;
  if (!op_of(op, o)) return mpi_raise("MPI_Op_commutative", nullptr, MPI_ERR_OP, "invalid op " + std::to_string(op));
  if (!commute) return mpi_raise("MPI_Op_commutative", nullptr, MPI_ERR_ARG, "null commute pointer");
  *commute = o.is_commutative() ? 1 : 0;
  return MPI_SUCCESS;
}

int PMPI_Reduce_local(const void* inbuf, void* inoutbuf, int count, MPI_Datatype datatype, MPI_Op op) {
  return reduce_local("MPI_Reduce_local", inbuf, inoutbuf, count, datatype, op);
}
int PMPI_Reduce_local_c(const void* inbuf, void* inoutbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op) {
  return reduce_local("MPI_Reduce_local_c", inbuf, inoutbuf, count, datatype, op);
}

}  // extern "C"

#pragma weak MPI_Op_create = PMPI_Op_create
#pragma weak MPI_Op_free = PMPI_Op_free
#pragma weak MPI_Op_commutative = PMPI_Op_commutative
#pragma weak MPI_Reduce_local = PMPI_Reduce_local
#pragma weak MPI_Op_create_c = PMPI_Op_create_c
#pragma weak MPI_Reduce_local_c = PMPI_Reduce_local_c
