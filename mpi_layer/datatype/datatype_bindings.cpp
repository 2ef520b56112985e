// Datatypes: the handle table (predefined and derived), MPI_Type_* (every
// constructor, commit, free, size/extent queries, envelope/contents, names),
// and the helpers that let point-to-point communicate derived types (in
// place when contiguous, through a staging buffer otherwise). Packing,
// Get_count/Get_elements and addresses are in pack_bindings.cpp; the
// engine under them is datatype.hpp.
//
// Handles: predefined types are 1..kLastPredefinedType (no table, no lock:
// type_size/basic_of are pure functions of the handle, the p2p hot path).
// Derived types live in their own table from kFirstDerivedType up, guarded
// by its own mutex (not st().mu: type calls never wait on communication);
// freed handles are reused. A Datatype is shared ownership of an immutable
// (once committed) node, so MPI_Type_free only drops the table's reference:
// pending communication, persistent requests and types built from it keep
// theirs.

#include <algorithm>
#include <climits>
#include <cstring>
#include <new>

#include "mpi_layer/datatype/binding_helpers.hpp"
#include "mpi_layer/mpi_impl.hpp"

namespace nmad::mpi {

int g_predefined_type_size[kLastPredefinedType + 1];
int g_plain_type_size[kLastPredefinedType + 1];

namespace {

// Fills g_predefined_type_size when the library is loaded.
struct size_table_filler {
  size_table_filler() {
    g_predefined_type_size[0] = g_plain_type_size[0] = -1;
    for (int h = 1; h <= kLastPredefinedType; ++h) {
      const BasicTypeInfo& b = basic_type_info(static_cast<BasicType>(h - 1));
      g_predefined_type_size[h] = static_cast<int>(b.size);
      g_plain_type_size[h] = b.size == b.extent ? static_cast<int>(b.size) : -1;
    }
  }
} const fill_sizes;

struct type_entry {
  Datatype type;
  std::string name;
  bool live = false;
  bool predefined = false;  // MPI_Type_create_f90_*: never freed
};

struct type_table {
  std::mutex mu;
  std::vector<type_entry> derived;  // index = handle - kFirstDerivedType
  std::vector<int> free_handles;    // reused last-freed first
  std::string predefined_names[kLastPredefinedType + 1];  // MPI_Type_set_name overrides
};
type_table& table() {
  static type_table t;
  return t;
}

}  // namespace


Datatype type_of(MPI_Datatype t) {
  if (auto b = basic_of(t)) return Datatype::basic(*b);
  if (t < kFirstDerivedType) return {};
  type_table& tt = table();
  std::lock_guard g(tt.mu);
  const std::size_t i = static_cast<std::size_t>(t - kFirstDerivedType);
  if (i >= tt.derived.size() || !tt.derived[i].live) return {};
  return tt.derived[i].type;
}

namespace {
MPI_Datatype register_entry(Datatype d, bool predefined) {
  type_table& tt = table();
  std::lock_guard g(tt.mu);
  std::size_t i;
  if (!tt.free_handles.empty()) {
    i = static_cast<std::size_t>(tt.free_handles.back() - kFirstDerivedType);
    tt.free_handles.pop_back();
  } else {
    i = tt.derived.size();
    tt.derived.emplace_back();
  }
  tt.derived[i].type = std::move(d);
  tt.derived[i].name.clear();
  tt.derived[i].live = true;
  tt.derived[i].predefined = predefined;
  return static_cast<MPI_Datatype>(i + kFirstDerivedType);
}
}  // namespace

MPI_Datatype register_type(Datatype d) { return register_entry(std::move(d), false); }
MPI_Datatype register_predefined_type(Datatype d) { return register_entry(std::move(d), true); }

bool is_predefined_type(MPI_Datatype t) {
  if (basic_of(t)) return true;
  if (t < kFirstDerivedType) return false;
  type_table& tt = table();
  std::lock_guard g(tt.mu);
  const std::size_t i = static_cast<std::size_t>(t - kFirstDerivedType);
  return i < tt.derived.size() && tt.derived[i].live && tt.derived[i].predefined;
}

MPI_Datatype predefined_handle_of(const Datatype& d) {
  if (auto b = d.basic_type()) return static_cast<MPI_Datatype>(*b) + 1;
  type_table& tt = table();
  std::lock_guard g(tt.mu);
  for (std::size_t i = 0; i < tt.derived.size(); ++i)
    if (tt.derived[i].live && tt.derived[i].predefined && tt.derived[i].type == d)
      return static_cast<MPI_Datatype>(i + kFirstDerivedType);
  return MPI_DATATYPE_NULL;
}

bool unregister_type(MPI_Datatype t) {
  type_table& tt = table();
  Datatype dropped;  // destroyed outside the lock
  std::lock_guard g(tt.mu);
  if (t < kFirstDerivedType) return false;
  const std::size_t i = static_cast<std::size_t>(t - kFirstDerivedType);
  if (i >= tt.derived.size() || !tt.derived[i].live || tt.derived[i].predefined) return false;
  dropped = std::move(tt.derived[i].type);
  tt.derived[i].type = Datatype{};
  tt.derived[i].name.clear();
  tt.derived[i].live = false;
  tt.free_handles.push_back(t);
  return true;
}

std::string type_handle_text(MPI_Datatype t) {
  if (t == MPI_DATATYPE_NULL) return "MPI_DATATYPE_NULL";
  if (auto b = basic_of(t)) return basic_type_info(*b).name;
  return "datatype " + std::to_string(t);
}

Datatype need_type(MPI_Datatype t, const char* what) {
  Datatype d = type_of(t);
  if (!d)
    throw DatatypeError(DatatypeErrc::invalid_datatype,
                        std::string(what) + ": " + type_handle_text(t) +
                            (t == MPI_DATATYPE_NULL ? " is not a datatype" : " is not a valid datatype (freed or never created)"));
  return d;
}

int datatype_error_class(const DatatypeError& e, bool unpacking) {
  switch (e.code()) {
    case DatatypeErrc::invalid_count: return MPI_ERR_COUNT;
    case DatatypeErrc::negative_blocklength: return MPI_ERR_ARG;
    case DatatypeErrc::invalid_argument: return MPI_ERR_ARG;
    case DatatypeErrc::invalid_datatype: return MPI_ERR_TYPE;
    case DatatypeErrc::uncommitted: return MPI_ERR_TYPE;
    case DatatypeErrc::buffer_too_small: return unpacking ? MPI_ERR_TRUNCATE : MPI_ERR_NO_SPACE;
  }
  return MPI_ERR_INTERN;
}

// ---- communication helpers ----------------------------------------------

int lookup_comm_type(MPI_Datatype t, Datatype& out, std::string& detail) {
  out = type_of(t);
  if (!out) {
    detail = type_handle_text(t) + (t == MPI_DATATYPE_NULL ? " is not a datatype" : " is not a valid datatype (freed or never created)");
    return MPI_ERR_TYPE;
  }
  if (!out.is_committed()) {
    detail = type_handle_text(t) + " is not committed (call MPI_Type_commit before communicating with it)";
    return MPI_ERR_TYPE;
  }
  return MPI_SUCCESS;
}

int check_comm_buffer(MPI_Count count, MPI_Datatype t, const void* buf, std::string& detail) {
  if (count < 0) {
    detail = "count " + std::to_string(count) + " is negative";
    return MPI_ERR_COUNT;
  }
  const int n = type_size(t);
  if (n >= 0) {
    if (!buf && count > 0 && n > 0) {
      detail = "null buffer with count " + std::to_string(count);
      return MPI_ERR_BUFFER;
    }
    return MPI_SUCCESS;
  }
  Datatype d;
  return lookup_comm_type(t, d, detail);
}

namespace {
// Bytes of `count` elements of d, or an error when they do not fit a size_t.
int comm_bytes(MPI_Count count, const Datatype& d, std::size_t& bytes, std::string& detail) {
  const Count size = d.size();
  if (count > 0 && size > LLONG_MAX / count) {
    detail = std::to_string(count) + " elements of " + std::to_string(size) + " bytes overflow";
    return MPI_ERR_COUNT;
  }
  bytes = static_cast<std::size_t>(size * count);
  return MPI_SUCCESS;
}
const void* at_offset(const void* buf, Aint off) {
  return reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(buf) + static_cast<std::uintptr_t>(off));
}
}  // namespace

int resolve_send(const void* buf, MPI_Count count, const Datatype& d, const void*& ptr, std::size_t& bytes,
                 std::shared_ptr<send_stage>& stage, std::string& detail) {
  try {
    if (int e = comm_bytes(count, d, bytes, detail)) return e;
    if (d.is_contiguous()) {
      ptr = bytes ? at_offset(buf, d.true_lb()) : buf;
      return MPI_SUCCESS;
    }
    // Staging copy. With a gather (iovec) send in the engine this would go:
    // d.for_each_block(buf, count, ...) lists the memory blocks to send.
    if (!stage) stage = std::make_shared<send_stage>();
    stage->bytes.resize(bytes);
    Count pos = 0;
    d.pack(buf, count, stage->bytes.data(), static_cast<Count>(bytes), pos);
    ptr = stage->bytes.data();
    return MPI_SUCCESS;
  } catch (const DatatypeError& e) {
    detail = e.what();
    return datatype_error_class(e);
  } catch (const std::bad_alloc&) {
    detail = "no memory for a " + std::to_string(bytes) + "-byte send staging buffer";
    return MPI_ERR_NO_MEM;
  }
}

int resolve_recv(void* buf, MPI_Count count, const Datatype& d, void*& ptr, std::size_t& bytes,
                 std::shared_ptr<recv_stage>& stage, std::string& detail) {
  try {
    if (int e = comm_bytes(count, d, bytes, detail)) return e;
    if (d.is_contiguous()) {
      ptr = bytes ? const_cast<void*>(at_offset(buf, d.true_lb())) : buf;
      stage.reset();
      return MPI_SUCCESS;
    }
    // Staging copy, unpacked on completion (a scatter receive in the engine
    // would take d.for_each_block(buf, count, ...) instead).
    if (!stage) stage = std::make_shared<recv_stage>();
    stage->type = d;
    stage->user = buf;
    stage->count = count;
    stage->bytes.resize(bytes);
    ptr = stage->bytes.data();
    return MPI_SUCCESS;
  } catch (const DatatypeError& e) {
    detail = e.what();
    return datatype_error_class(e);
  } catch (const std::bad_alloc&) {
    detail = "no memory for a " + std::to_string(bytes) + "-byte receive staging buffer";
    return MPI_ERR_NO_MEM;
  }
}

int recv_stage::finish(std::size_t received, std::string& detail) {
  const std::size_t n = std::min(received, bytes.size());
  if (n == 0) return MPI_SUCCESS;
  try {
    type.unpack_range(bytes.data(), 0, static_cast<Count>(n), user, count);
    return MPI_SUCCESS;
  } catch (const DatatypeError& e) {
    detail = std::string("unpacking the received data: ") + e.what();
    return datatype_error_class(e, true);
  }
}

int recv_stage::finish(const nmad::request& engine, std::string& detail) {
  const nmad::errc e = engine.error();
  if (e != nmad::errc::ok && e != nmad::errc::truncated) return MPI_SUCCESS;  // nothing (reliable) arrived
  // A truncated message filled the whole staging buffer with its first bytes.
  return finish(e == nmad::errc::truncated ? bytes.size() : engine.status().length, detail);
}

}  // namespace nmad::mpi

using namespace nmad::mpi;
using namespace nmad::mpi::type_bindings;

namespace {

constexpr int kMaxName = MPI_MAX_OBJECT_NAME;

}  // namespace

int nmad::mpi::mpi_combiner_of(Combiner c) {
  switch (c) {
    case Combiner::Named: return MPI_COMBINER_NAMED;
    case Combiner::Dup: return MPI_COMBINER_DUP;
    case Combiner::Contiguous: return MPI_COMBINER_CONTIGUOUS;
    case Combiner::Vector: return MPI_COMBINER_VECTOR;
    case Combiner::Hvector: return MPI_COMBINER_HVECTOR;
    case Combiner::Indexed: return MPI_COMBINER_INDEXED;
    case Combiner::Hindexed: return MPI_COMBINER_HINDEXED;
    case Combiner::IndexedBlock: return MPI_COMBINER_INDEXED_BLOCK;
    case Combiner::HindexedBlock: return MPI_COMBINER_HINDEXED_BLOCK;
    case Combiner::Struct: return MPI_COMBINER_STRUCT;
    case Combiner::Resized: return MPI_COMBINER_RESIZED;
    case Combiner::Subarray: return MPI_COMBINER_SUBARRAY;
    case Combiner::Darray: return MPI_COMBINER_DARRAY;
    case Combiner::F90Real: return MPI_COMBINER_F90_REAL;
    case Combiner::F90Complex: return MPI_COMBINER_F90_COMPLEX;
    case Combiner::F90Integer: return MPI_COMBINER_F90_INTEGER;
  }
  return MPI_COMBINER_NAMED;
}

namespace {

// A type made by a large-count constructor (MPI_Type_*_c): the int
// envelope and contents have no place for its MPI_Count arguments.
int refuse_large(const char* fn, MPI_Datatype t) {
  return mpi_raise(fn, nullptr, MPI_ERR_TYPE,
                   type_handle_text(t) + " was made by a large-count constructor: its arguments are MPI_Counts, "
                                         "which only the _c form (" + fn + "_c) reports");
}

// Query pattern: a live datatype (committed or not) and non-null outputs.
template <class Body>
int query(const char* fn, MPI_Datatype t, bool outputs_ok, Body&& body) {
  if (!outputs_ok) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null output argument");
  return guarded(fn, [&] { return body(need_type(t, "datatype")); });
}

}  // namespace

extern "C" {

// ---- constructors ---------------------------------------------------------

int PMPI_Type_contiguous(int count, MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return construct("MPI_Type_contiguous", newtype, [&] {
    need_count(count, "count");
    return Datatype::contiguous(count, need_type(oldtype, "oldtype"));
  });
}

int PMPI_Type_vector(int count, int blocklength, int stride, MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return construct("MPI_Type_vector", newtype, [&] {
    need_count(count, "count");
    return Datatype::vector(count, blocklength, stride, need_type(oldtype, "oldtype"));
  });
}

int PMPI_Type_create_hvector(int count, int blocklength, MPI_Aint stride, MPI_Datatype oldtype,
                             MPI_Datatype* newtype) {
  return construct("MPI_Type_create_hvector", newtype, [&] {
    need_count(count, "count");
    return Datatype::hvector(count, blocklength, stride, need_type(oldtype, "oldtype"));
  });
}

int PMPI_Type_indexed(int count, const int array_of_blocklengths[], const int array_of_displacements[],
                      MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return construct("MPI_Type_indexed", newtype, [&] {
    need_count(count, "count");
    need_array(array_of_blocklengths, count, "array_of_blocklengths");
    need_array(array_of_displacements, count, "array_of_displacements");
    const std::size_t n = static_cast<std::size_t>(count);
    return Datatype::indexed({array_of_blocklengths, n}, {array_of_displacements, n}, need_type(oldtype, "oldtype"));
  });
}

int PMPI_Type_create_hindexed(int count, const int array_of_blocklengths[], const MPI_Aint array_of_displacements[],
                              MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return construct("MPI_Type_create_hindexed", newtype, [&] {
    need_count(count, "count");
    need_array(array_of_blocklengths, count, "array_of_blocklengths");
    need_array(array_of_displacements, count, "array_of_displacements");
    const std::size_t n = static_cast<std::size_t>(count);
    return Datatype::hindexed({array_of_blocklengths, n}, {array_of_displacements, n}, need_type(oldtype, "oldtype"));
  });
}

int PMPI_Type_create_indexed_block(int count, int blocklength, const int array_of_displacements[],
                                   MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return construct("MPI_Type_create_indexed_block", newtype, [&] {
    need_count(count, "count");
    need_array(array_of_displacements, count, "array_of_displacements");
    return Datatype::indexed_block(blocklength, {array_of_displacements, static_cast<std::size_t>(count)},
                                   need_type(oldtype, "oldtype"));
  });
}

int PMPI_Type_create_hindexed_block(int count, int blocklength, const MPI_Aint array_of_displacements[],
                                    MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return construct("MPI_Type_create_hindexed_block", newtype, [&] {
    need_count(count, "count");
    need_array(array_of_displacements, count, "array_of_displacements");
    return Datatype::hindexed_block(blocklength, {array_of_displacements, static_cast<std::size_t>(count)},
                                    need_type(oldtype, "oldtype"));
  });
}

int PMPI_Type_create_struct(int count, const int array_of_blocklengths[], const MPI_Aint array_of_displacements[],
                            const MPI_Datatype array_of_types[], MPI_Datatype* newtype) {
  return construct("MPI_Type_create_struct", newtype, [&] {
    need_count(count, "count");
    need_array(array_of_blocklengths, count, "array_of_blocklengths");
    need_array(array_of_displacements, count, "array_of_displacements");
    need_array(array_of_types, count, "array_of_types");
    std::vector<Datatype> types(static_cast<std::size_t>(count));
    for (int i = 0; i < count; ++i) {
      const std::string what = "array_of_types[" + std::to_string(i) + "]";
      types[static_cast<std::size_t>(i)] = need_type(array_of_types[i], what.c_str());
    }
    const std::size_t n = static_cast<std::size_t>(count);
    return Datatype::create_struct({array_of_blocklengths, n}, {array_of_displacements, n}, types);
  });
}

int PMPI_Type_create_resized(MPI_Datatype oldtype, MPI_Aint lb, MPI_Aint extent, MPI_Datatype* newtype) {
  return construct("MPI_Type_create_resized", newtype,
                   [&] { return Datatype::create_resized(need_type(oldtype, "oldtype"), lb, extent); });
}

int PMPI_Type_create_subarray(int ndims, const int array_of_sizes[], const int array_of_subsizes[],
                              const int array_of_starts[], int order, MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return construct("MPI_Type_create_subarray", newtype, [&] {
    if (ndims < 1)
      throw DatatypeError(DatatypeErrc::invalid_argument, "ndims " + std::to_string(ndims) + " is not positive");
    need_array(array_of_sizes, ndims, "array_of_sizes");
    need_array(array_of_subsizes, ndims, "array_of_subsizes");
    need_array(array_of_starts, ndims, "array_of_starts");
    if (order != MPI_ORDER_C && order != MPI_ORDER_FORTRAN)
      throw DatatypeError(DatatypeErrc::invalid_argument,
                          "order " + std::to_string(order) + " is neither MPI_ORDER_C nor MPI_ORDER_FORTRAN");
    const std::size_t n = static_cast<std::size_t>(ndims);
    for (std::size_t d = 0; d < n; ++d)
      if (array_of_sizes[d] < 1 || array_of_subsizes[d] < 0 || array_of_starts[d] < 0 ||
          array_of_starts[d] > array_of_sizes[d] - array_of_subsizes[d])
        throw DatatypeError(DatatypeErrc::invalid_argument,
                            "dimension " + std::to_string(d) + ": size " + std::to_string(array_of_sizes[d]) +
                                ", subsize " + std::to_string(array_of_subsizes[d]) + ", start " +
                                std::to_string(array_of_starts[d]) +
                                " (need size >= 1, subsize >= 0, 0 <= start <= size - subsize)");
    return Datatype::create_subarray({array_of_sizes, n}, {array_of_subsizes, n}, {array_of_starts, n},
                                     order == MPI_ORDER_C ? Datatype::Order::C : Datatype::Order::Fortran,
                                     need_type(oldtype, "oldtype"));
  });
}

int PMPI_Type_create_darray(int size, int rank, int ndims, const int array_of_gsizes[],
                            const int array_of_distribs[], const int array_of_dargs[], const int array_of_psizes[],
                            int order, MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return construct("MPI_Type_create_darray", newtype, [&] {
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
    return Datatype::create_darray(size, rank, {array_of_gsizes, n}, distribs, dargs, {array_of_psizes, n},
                                   order == MPI_ORDER_C ? Datatype::Order::C : Datatype::Order::Fortran,
                                   need_type(oldtype, "oldtype"));
  });
}

int PMPI_Type_dup(MPI_Datatype oldtype, MPI_Datatype* newtype) {
  const char* fn = "MPI_Type_dup";
  const int e = construct(fn, newtype, [&] { return need_type(oldtype, "oldtype").dup(); });
  if (e != MPI_SUCCESS) return e;
  // Attributes follow their copy callbacks (MPI-3.1 6.7.4); a failing
  // callback undoes the dup.
  std::string detail;
  if (const int ce = copy_type_attrs(oldtype, *newtype, detail); ce != MPI_SUCCESS) {
    std::string ignored;
    delete_type_attrs(*newtype, ignored);
    unregister_type(*newtype);
    *newtype = MPI_DATATYPE_NULL;
    return mpi_raise(fn, nullptr, ce, detail);
  }
  return MPI_SUCCESS;
}

// ---- commit / free ----------------------------------------------------------

int PMPI_Type_commit(MPI_Datatype* datatype) {
  if (!check_initialized("MPI_Type_commit")) return MPI_ERR_OTHER;
  if (!datatype) return mpi_raise("MPI_Type_commit", nullptr, MPI_ERR_ARG, "null datatype pointer");
  return guarded("MPI_Type_commit", [&] {
    Datatype d = need_type(*datatype, "datatype");
    d.commit();
    return MPI_SUCCESS;
  });
}

int PMPI_Type_free(MPI_Datatype* datatype) {
  if (!check_initialized("MPI_Type_free")) return MPI_ERR_OTHER;
  if (!datatype) return mpi_raise("MPI_Type_free", nullptr, MPI_ERR_ARG, "null datatype pointer");
  if (is_predefined_type(*datatype))
    return mpi_raise("MPI_Type_free", nullptr, MPI_ERR_TYPE,
                     "cannot free the predefined datatype " + type_handle_text(*datatype) +
                         (basic_of(*datatype) ? "" : " (made by MPI_Type_create_f90_*)"));
  if (!type_of(*datatype))
    return mpi_raise("MPI_Type_free", nullptr, MPI_ERR_TYPE,
                     type_handle_text(*datatype) + " is not a valid datatype (freed or never created)");
  // Delete callbacks first (last set first); a failing one stops the free.
  std::string detail;
  if (const int e = delete_type_attrs(*datatype, detail); e != MPI_SUCCESS)
    return mpi_raise("MPI_Type_free", nullptr, e, detail);
  if (!unregister_type(*datatype))
    return mpi_raise("MPI_Type_free", nullptr, MPI_ERR_TYPE,
                     type_handle_text(*datatype) + " is not a valid datatype (freed or never created)");
  *datatype = MPI_DATATYPE_NULL;
  return MPI_SUCCESS;
}

// MPI 4.1 5.9.4: the predefined (value, index) pair type of MINLOC and
// MAXLOC for value_type and index_type, or MPI_DATATYPE_NULL when there is
// none (only MPI_INT indices have C pair types).
int PMPI_Type_get_value_index(MPI_Datatype value_type, MPI_Datatype index_type, MPI_Datatype* pair_type) {
  const char* fn = "MPI_Type_get_value_index";
  if (!pair_type) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null pair_type");
  if (type_size(value_type) < 0 || type_size(index_type) < 0)
    return mpi_raise(fn, nullptr, MPI_ERR_TYPE, "invalid datatype");
  *pair_type = MPI_DATATYPE_NULL;
  if (index_type != MPI_INT) return MPI_SUCCESS;
  if (value_type == MPI_FLOAT) *pair_type = MPI_FLOAT_INT;
  else if (value_type == MPI_DOUBLE) *pair_type = MPI_DOUBLE_INT;
  else if (value_type == MPI_LONG) *pair_type = MPI_LONG_INT;
  else if (value_type == MPI_INT) *pair_type = MPI_2INT;
  else if (value_type == MPI_SHORT) *pair_type = MPI_SHORT_INT;
  else if (value_type == MPI_LONG_DOUBLE) *pair_type = MPI_LONG_DOUBLE_INT;
  return MPI_SUCCESS;
}

// ---- size and bounds ----------------------------------------------------------

int PMPI_Type_size(MPI_Datatype datatype, int* size) {
  const int n = type_size(datatype);
  if (n >= 0) {
    if (!size) return mpi_raise("MPI_Type_size", nullptr, MPI_ERR_ARG, "null size");
    *size = n;
    return MPI_SUCCESS;
  }
  return query("MPI_Type_size", datatype, size != nullptr, [&](const Datatype& d) {
    const Count s = d.size();
    *size = s > INT_MAX ? MPI_UNDEFINED : static_cast<int>(s);
    return MPI_SUCCESS;
  });
}

int PMPI_Type_size_x(MPI_Datatype datatype, MPI_Count* size) {
  return query("MPI_Type_size_x", datatype, size != nullptr, [&](const Datatype& d) {
    *size = d.size();
    return MPI_SUCCESS;
  });
}

int PMPI_Type_get_extent(MPI_Datatype datatype, MPI_Aint* lb, MPI_Aint* extent) {
  return query("MPI_Type_get_extent", datatype, lb && extent, [&](const Datatype& d) {
    *lb = d.lb();
    *extent = d.extent();
    return MPI_SUCCESS;
  });
}

int PMPI_Type_get_extent_x(MPI_Datatype datatype, MPI_Count* lb, MPI_Count* extent) {
  return query("MPI_Type_get_extent_x", datatype, lb && extent, [&](const Datatype& d) {
    *lb = d.lb();
    *extent = d.extent();
    return MPI_SUCCESS;
  });
}

int PMPI_Type_get_true_extent(MPI_Datatype datatype, MPI_Aint* true_lb, MPI_Aint* true_extent) {
  return query("MPI_Type_get_true_extent", datatype, true_lb && true_extent, [&](const Datatype& d) {
    *true_lb = d.true_lb();
    *true_extent = d.true_extent();
    return MPI_SUCCESS;
  });
}

int PMPI_Type_get_true_extent_x(MPI_Datatype datatype, MPI_Count* true_lb, MPI_Count* true_extent) {
  return query("MPI_Type_get_true_extent_x", datatype, true_lb && true_extent, [&](const Datatype& d) {
    *true_lb = d.true_lb();
    *true_extent = d.true_extent();
    return MPI_SUCCESS;
  });
}

// ---- envelope and contents ------------------------------------------------------

int PMPI_Type_get_envelope(MPI_Datatype datatype, int* num_integers, int* num_addresses, int* num_datatypes,
                           int* combiner) {
  return query("MPI_Type_get_envelope", datatype, num_integers && num_addresses && num_datatypes && combiner,
               [&](const Datatype& d) {
                 *combiner = mpi_combiner_of(d.combiner());
                 if (d.combiner() == Combiner::Named) {
                   *num_integers = *num_addresses = *num_datatypes = 0;
                   return MPI_SUCCESS;
                 }
                 const TypeContents c = d.contents();
                 if (!c.large_counts.empty()) return refuse_large("MPI_Type_get_envelope", datatype);
                 *num_integers = static_cast<int>(c.ints.size());
                 *num_addresses = static_cast<int>(c.addresses.size());
                 *num_datatypes = static_cast<int>(c.types.size());
                 return MPI_SUCCESS;
               });
}

// The datatypes returned are predefined handles or NEW handles of the
// constituent derived types (the caller frees them), as MPI specifies.
int PMPI_Type_get_contents(MPI_Datatype datatype, int max_integers, int max_addresses, int max_datatypes,
                           int array_of_integers[], MPI_Aint array_of_addresses[], MPI_Datatype array_of_datatypes[]) {
  const char* fn = "MPI_Type_get_contents";
  return guarded(fn, [&] {
    const Datatype d = need_type(datatype, "datatype");
    if (d.combiner() == Combiner::Named)
      return mpi_raise(fn, nullptr, MPI_ERR_TYPE,
                       type_handle_text(datatype) + " is predefined (MPI_COMBINER_NAMED): it has no contents");
    const TypeContents c = d.contents();
    if (!c.large_counts.empty()) return refuse_large(fn, datatype);
    if (max_integers < static_cast<int>(c.ints.size()) || max_addresses < static_cast<int>(c.addresses.size()) ||
        max_datatypes < static_cast<int>(c.types.size()))
      return mpi_raise(fn, nullptr, MPI_ERR_ARG,
                       "arrays too small: need " + std::to_string(c.ints.size()) + " integers, " +
                           std::to_string(c.addresses.size()) + " addresses, " + std::to_string(c.types.size()) +
                           " datatypes (see MPI_Type_get_envelope)");
    if ((!c.ints.empty() && !array_of_integers) || (!c.addresses.empty() && !array_of_addresses) ||
        (!c.types.empty() && !array_of_datatypes))
      return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null output array");
    for (std::size_t i = 0; i < c.ints.size(); ++i) array_of_integers[i] = static_cast<int>(c.ints[i]);
    if (c.combiner == Combiner::Subarray && !c.ints.empty())  // the engine says 0 = C, 1 = Fortran
      array_of_integers[c.ints.size() - 1] = c.ints.back() == 0 ? MPI_ORDER_C : MPI_ORDER_FORTRAN;
    if (c.combiner == Combiner::Darray) {  // engine codes -> MPI constants
      const std::size_t nd = static_cast<std::size_t>(c.ints[2]);
      for (std::size_t d = 0; d < nd; ++d) {
        int& dist = array_of_integers[3 + nd + d];
        dist = dist == 0 ? MPI_DISTRIBUTE_BLOCK : dist == 1 ? MPI_DISTRIBUTE_CYCLIC : MPI_DISTRIBUTE_NONE;
        int& darg = array_of_integers[3 + 2 * nd + d];
        if (darg == Datatype::kDefaultDarg) darg = MPI_DISTRIBUTE_DFLT_DARG;
      }
      array_of_integers[c.ints.size() - 1] = c.ints.back() == 0 ? MPI_ORDER_C : MPI_ORDER_FORTRAN;
    }
    for (std::size_t i = 0; i < c.addresses.size(); ++i) array_of_addresses[i] = c.addresses[i];
    for (std::size_t i = 0; i < c.types.size(); ++i) {
      // Predefined handles (named and F90 types) as they are; a new handle
      // for a derived constituent.
      const MPI_Datatype h = predefined_handle_of(c.types[i]);
      array_of_datatypes[i] = h != MPI_DATATYPE_NULL ? h : register_type(c.types[i]);
    }
    return MPI_SUCCESS;
  });
}

// ---- names -------------------------------------------------------------------------

int PMPI_Type_set_name(MPI_Datatype datatype, const char* type_name) {
  const char* fn = "MPI_Type_set_name";
  if (!type_name) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null name");
  // Longer names are truncated to MPI_MAX_OBJECT_NAME - 1 characters.
  std::string name(type_name, strnlen(type_name, kMaxName - 1));
  type_table& tt = table();
  if (basic_of(datatype)) {
    std::lock_guard g(tt.mu);
    tt.predefined_names[datatype] = std::move(name);
    return MPI_SUCCESS;
  }
  {
    std::lock_guard g(tt.mu);
    const std::size_t i = static_cast<std::size_t>(datatype - kFirstDerivedType);
    if (datatype >= kFirstDerivedType && i < tt.derived.size() && tt.derived[i].live) {
      tt.derived[i].name = std::move(name);
      return MPI_SUCCESS;
    }
  }
  return mpi_raise(fn, nullptr, MPI_ERR_TYPE, type_handle_text(datatype) + " is not a valid datatype");
}

int PMPI_Type_get_name(MPI_Datatype datatype, char* type_name, int* resultlen) {
  const char* fn = "MPI_Type_get_name";
  if (!type_name || !resultlen) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null name or resultlen");
  std::string name;
  type_table& tt = table();
  if (auto b = basic_of(datatype)) {
    std::lock_guard g(tt.mu);
    name = tt.predefined_names[datatype].empty() ? basic_type_info(*b).name : tt.predefined_names[datatype];
  } else {
    std::lock_guard g(tt.mu);
    const std::size_t i = static_cast<std::size_t>(datatype - kFirstDerivedType);
    if (!(datatype >= kFirstDerivedType && i < tt.derived.size() && tt.derived[i].live))
      return mpi_raise(fn, nullptr, MPI_ERR_TYPE, type_handle_text(datatype) + " is not a valid datatype");
    name = tt.derived[i].name;  // "" unless set
  }
  std::memcpy(type_name, name.c_str(), name.size() + 1);
  *resultlen = static_cast<int>(name.size());
  return MPI_SUCCESS;
}

}  // extern "C"

// The public names: weak aliases, so profiling tools can interpose.
#pragma weak MPI_Type_contiguous = PMPI_Type_contiguous
#pragma weak MPI_Type_vector = PMPI_Type_vector
#pragma weak MPI_Type_create_hvector = PMPI_Type_create_hvector
#pragma weak MPI_Type_indexed = PMPI_Type_indexed
#pragma weak MPI_Type_create_hindexed = PMPI_Type_create_hindexed
#pragma weak MPI_Type_create_indexed_block = PMPI_Type_create_indexed_block
#pragma weak MPI_Type_create_hindexed_block = PMPI_Type_create_hindexed_block
#pragma weak MPI_Type_create_struct = PMPI_Type_create_struct
#pragma weak MPI_Type_create_resized = PMPI_Type_create_resized
#pragma weak MPI_Type_create_subarray = PMPI_Type_create_subarray
#pragma weak MPI_Type_create_darray = PMPI_Type_create_darray
#pragma weak MPI_Type_dup = PMPI_Type_dup
#pragma weak MPI_Type_commit = PMPI_Type_commit
#pragma weak MPI_Type_free = PMPI_Type_free
#pragma weak MPI_Type_size = PMPI_Type_size
#pragma weak MPI_Type_get_value_index = PMPI_Type_get_value_index
#pragma weak MPI_Type_size_x = PMPI_Type_size_x
#pragma weak MPI_Type_get_extent = PMPI_Type_get_extent
#pragma weak MPI_Type_get_extent_x = PMPI_Type_get_extent_x
#pragma weak MPI_Type_get_true_extent = PMPI_Type_get_true_extent
#pragma weak MPI_Type_get_true_extent_x = PMPI_Type_get_true_extent_x
#pragma weak MPI_Type_get_envelope = PMPI_Type_get_envelope
#pragma weak MPI_Type_get_contents = PMPI_Type_get_contents
#pragma weak MPI_Type_set_name = PMPI_Type_set_name
#pragma weak MPI_Type_get_name = PMPI_Type_get_name
