// Attribute caching on communicators and datatypes: keyvals with
// copy/delete callbacks, MPI_Comm_set/get/delete_attr, the predefined
// attributes of MPI_COMM_WORLD, the deprecated MPI-1 names
// (MPI_Keyval_create, MPI_Attr_*) and MPI_Type_*_keyval/_attr.
//
// One keyval table serves both kinds of objects; a keyval remembers which
// kind it was created for and is MPI_ERR_KEYVAL on the other. The C
// callback types of both kinds have the same shape (MPI_Comm and
// MPI_Datatype are both int), so one keyval_obj stores either. The core
// (set_attr/get_attr/delete_attr/copy_list/delete_list) works on an
// attribute list plus the object's handle; communicators keep their list in
// comm_obj::attrs, datatypes in a map by handle here (predefined types may
// carry attributes too).
//
// Keyvals index a table of their own (handles 1..7 are the predefined
// attributes, user keyvals start at 16 and are not reused). A freed keyval
// stays in the table: attributes still cached with it keep their callbacks,
// as the standard requires, but it can no longer be set or looked up.
// Attribute values live in comm_obj::attrs, in the order they were first
// set, under attr_mutex(); user callbacks always run without any lock held
// (they may call MPI). Order of callbacks, which the standard leaves open
// except at MPI_Finalize: copies (MPI_Comm_dup/idup) in set order; deletes
// (MPI_Comm_free, MPI_Finalize on MPI_COMM_SELF) last set first.
#include <algorithm>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "mpi_layer/mpi_impl.hpp"
#include "mpi_layer/rma/rma.hpp"

namespace nmad::mpi {

namespace {

constexpr int kFirstUserKeyval = 16;

enum class object_kind { comm, datatype, window };
const char* kind_name(object_kind k) {
  return k == object_kind::comm ? "communicator" : k == object_kind::datatype ? "datatype" : "window";
}

struct keyval_obj {
  MPI_Comm_copy_attr_function* copy = nullptr;
  MPI_Comm_delete_attr_function* del = nullptr;
  void* extra = nullptr;
  object_kind kind = object_kind::comm;
  bool freed = false;
};

using attr_list = std::vector<std::pair<int, void*>>;

struct attr_table {
  std::mutex mu;  // guards the keyvals, every comm_obj::attrs and type_attrs
  std::vector<std::unique_ptr<keyval_obj>> keyvals = std::vector<std::unique_ptr<keyval_obj>>(kFirstUserKeyval);
  std::unordered_map<MPI_Datatype, attr_list> type_attrs;  // datatypes with attributes
  std::unordered_map<MPI_Win, attr_list> win_attrs;        // windows with attributes
};

attr_table& table() {
  static attr_table* t = new attr_table();
  return *t;
}

bool predefined(int kv) { return kv >= MPI_TAG_UB && kv <= MPI_LASTUSEDCODE; }

// The keyval's callbacks if kv is a live user keyval of that kind (copied:
// the caller releases the lock before calling them).
std::optional<keyval_obj> user_keyval_locked(attr_table& t, int kv, object_kind kind) {
  if (kv < kFirstUserKeyval || static_cast<std::size_t>(kv) >= t.keyvals.size() || t.keyvals[kv]->freed ||
      t.keyvals[kv]->kind != kind)
    return std::nullopt;
  return *t.keyvals[kv];
}
bool keyval_exists_locked(attr_table& t, int kv, object_kind kind) {
  return kv >= kFirstUserKeyval && static_cast<std::size_t>(kv) < t.keyvals.size() && t.keyvals[kv]->kind == kind;
}

// Callbacks of a keyval even if freed (for attributes still cached).
keyval_obj callbacks_locked(attr_table& t, int kv) { return *t.keyvals[kv]; }

std::string kvname(int kv) {
  return kv == MPI_KEYVAL_INVALID ? std::string("MPI_KEYVAL_INVALID") : "keyval " + std::to_string(kv);
}

int bad_keyval(const char* fn, comm_obj* c, int kv, object_kind kind = object_kind::comm) {
  if (predefined(kv)) {
    if (kind == object_kind::datatype)
      return mpi_raise(fn, c, MPI_ERR_KEYVAL, kvname(kv) + " is a communicator attribute, not a datatype keyval");
    return mpi_raise(fn, c, MPI_ERR_KEYVAL, kvname(kv) + " is a predefined attribute (read-only)");
  }
  attr_table& t = table();
  {
    std::lock_guard g(t.mu);
    for (object_kind other : {object_kind::comm, object_kind::datatype, object_kind::window})
      if (other != kind && keyval_exists_locked(t, kv, other))
        return mpi_raise(fn, c, MPI_ERR_KEYVAL,
                         kvname(kv) + " is a " + kind_name(other) + " keyval, not a " + kind_name(kind) + " keyval");
  }
  return mpi_raise(fn, c, MPI_ERR_KEYVAL, "invalid or freed " + kvname(kv));
}

// Runs kv's delete callback on (object handle, value). Returns its code.
int run_delete(int handle, int kv, void* value, const keyval_obj& k) {
  if (!k.del) return MPI_SUCCESS;
  return k.del(handle, kv, value, k.extra);
}

// ---- the core, on an attribute list (lists are only touched under t.mu;
// `list_of` finds the object's list under the lock, nullptr = no list) ----

int create_keyval(const char* fn, object_kind kind, MPI_Comm_copy_attr_function* copy_fn,
                  MPI_Comm_delete_attr_function* delete_fn, int* keyval, void* extra_state) {
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (!keyval) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null keyval");
  attr_table& t = table();
  std::lock_guard g(t.mu);
  auto k = std::make_unique<keyval_obj>();
  k->copy = copy_fn;
  k->del = delete_fn;
  k->extra = extra_state;
  k->kind = kind;
  t.keyvals.push_back(std::move(k));
  *keyval = static_cast<int>(t.keyvals.size() - 1);
  return MPI_SUCCESS;
}

int free_keyval(const char* fn, object_kind kind, int* keyval) {
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (!keyval) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null keyval");
  attr_table& t = table();
  {
    std::lock_guard g(t.mu);
    if (user_keyval_locked(t, *keyval, kind)) {
      t.keyvals[*keyval]->freed = true;
      *keyval = MPI_KEYVAL_INVALID;
      return MPI_SUCCESS;
    }
  }
  return bad_keyval(fn, nullptr, *keyval, kind);
}

// MPI_*_set_attr: caches value (replacing an old one after its delete
// callback accepted). `err_comm` gets the errors.
template <class ListOf>
int set_attr(const char* fn, object_kind kind, int handle, comm_obj* err_comm, ListOf&& list_of, int keyval,
             void* attribute_val) {
  attr_table& t = table();
  std::optional<keyval_obj> k;
  void* old = nullptr;
  bool had = false;
  {
    std::lock_guard g(t.mu);
    k = user_keyval_locked(t, keyval, kind);
    if (k) {
      attr_list& attrs = *list_of(true);
      auto it = std::find_if(attrs.begin(), attrs.end(), [&](auto& a) { return a.first == keyval; });
      if (it != attrs.end()) {
        had = true;
        old = it->second;
      } else {
        attrs.emplace_back(keyval, attribute_val);
      }
    }
  }
  if (!k) return bad_keyval(fn, err_comm, keyval, kind);
  if (!had) return MPI_SUCCESS;
  // Replacing a value deletes the old one first (its callback may refuse).
  if (const int e = run_delete(handle, keyval, old, *k); e != MPI_SUCCESS)
    return mpi_raise(fn, err_comm, valid_error_code(e) ? e : MPI_ERR_OTHER,
                     "the delete callback of " + kvname(keyval) + " on the old value returned " + std::to_string(e));
  std::lock_guard g(t.mu);
  if (attr_list* attrs = list_of(false))
    for (auto& a : *attrs)
      if (a.first == keyval) a.second = attribute_val;
  return MPI_SUCCESS;
}

template <class ListOf>
int get_attr(const char* fn, object_kind kind, comm_obj* err_comm, ListOf&& list_of, int keyval,
             void* attribute_val, int* flag) {
  attr_table& t = table();
  {
    std::lock_guard g(t.mu);
    if (user_keyval_locked(t, keyval, kind)) {
      *flag = 0;
      if (attr_list* attrs = list_of(false))
        for (auto& a : *attrs)
          if (a.first == keyval) {
            *flag = 1;
            *static_cast<void**>(attribute_val) = a.second;
          }
      return MPI_SUCCESS;
    }
  }
  return bad_keyval(fn, err_comm, keyval, kind);
}

template <class ListOf>
int delete_attr(const char* fn, object_kind kind, int handle, comm_obj* err_comm, ListOf&& list_of, int keyval) {
  attr_table& t = table();
  std::optional<keyval_obj> k;
  void* value = nullptr;
  bool had = false;
  {
    std::lock_guard g(t.mu);
    k = user_keyval_locked(t, keyval, kind);
    if (keyval_exists_locked(t, keyval, kind))
      if (attr_list* attrs = list_of(false))
        for (auto& a : *attrs)
          if (a.first == keyval) {
            had = true;
            value = a.second;
          }
    // MPI-3.1 6.7.2: freeing a keyval in use is not erroneous; its cached
    // attributes stay until they are deleted or their object freed, so
    // deleting one through a freed keyval works (and runs its callback).
    if (!k && had) k = callbacks_locked(t, keyval);
  }
  if (!k) return bad_keyval(fn, err_comm, keyval, kind);
  if (!had) return MPI_SUCCESS;  // nothing cached: nothing to delete
  if (const int e = run_delete(handle, keyval, value, *k); e != MPI_SUCCESS)
    return mpi_raise(fn, err_comm, valid_error_code(e) ? e : MPI_ERR_OTHER,
                     "the delete callback of " + kvname(keyval) + " returned " + std::to_string(e));
  std::lock_guard g(t.mu);
  if (attr_list* attrs = list_of(false)) std::erase_if(*attrs, [&](auto& a) { return a.first == keyval; });
  return MPI_SUCCESS;
}

// Copy callbacks of every attribute of `from` (in set order) into `out`.
int copy_list(int from_handle, const attr_list& src, const std::vector<keyval_obj>& cbs, attr_list& out,
              std::string& detail) {
  for (std::size_t i = 0; i < src.size(); ++i) {
    const auto& k = cbs[i];
    if (!k.copy || k.copy == MPI_COMM_NULL_COPY_FN) continue;
    void* value = nullptr;
    int flag = 0;
    const int e = k.copy(from_handle, src[i].first, k.extra, src[i].second, &value, &flag);
    if (e != MPI_SUCCESS) {
      detail = "the copy callback of keyval " + std::to_string(src[i].first) + " returned " + std::to_string(e);
      return valid_error_code(e) ? e : MPI_ERR_OTHER;
    }
    if (flag) out.emplace_back(src[i].first, value);
  }
  return MPI_SUCCESS;
}

// Delete callbacks of every attribute, last set first, removing each.
template <class ListOf>
int delete_list(int handle, ListOf&& list_of, std::string& detail) {
  attr_table& t = table();
  for (;;) {
    std::pair<int, void*> last;
    keyval_obj k;
    {
      std::lock_guard g(t.mu);
      attr_list* attrs = list_of(false);
      if (!attrs || attrs->empty()) return MPI_SUCCESS;
      last = attrs->back();
      k = callbacks_locked(t, last.first);
    }
    const int e = run_delete(handle, last.first, last.second, k);
    if (e != MPI_SUCCESS) {
      detail = "the delete callback of keyval " + std::to_string(last.first) + " returned " + std::to_string(e);
      return valid_error_code(e) ? e : MPI_ERR_OTHER;
    }
    std::lock_guard g(t.mu);
    if (attr_list* attrs = list_of(false)) {
      auto it = std::find(attrs->begin(), attrs->end(), last);
      if (it != attrs->end()) attrs->erase(it);
    }
  }
}

// The attribute list of a datatype handle (under t.mu).
auto type_list(MPI_Datatype type) {
  return [type](bool create) -> attr_list* {
    attr_table& t = table();
    auto it = t.type_attrs.find(type);
    if (it != t.type_attrs.end()) return &it->second;
    return create ? &t.type_attrs[type] : nullptr;
  };
}
auto win_list(MPI_Win win) {
  return [win](bool create) -> attr_list* {
    attr_table& t = table();
    auto it = t.win_attrs.find(win);
    if (it != t.win_attrs.end()) return &it->second;
    return create ? &t.win_attrs[win] : nullptr;
  };
}
auto comm_list(comm_obj* c) {
  return [c](bool) -> attr_list* { return &c->attrs; };
}

int comm_arg(const char* fn, MPI_Comm comm, comm_obj*& c) {
  c = lookup_comm(comm);
  if (!c) return mpi_raise(fn, nullptr, MPI_ERR_COMM, "invalid communicator " + std::to_string(comm));
  return MPI_SUCCESS;
}

// The predefined attribute values: get_attr hands out pointers to these.
struct predefined_values {
  int tag_ub = MPI_TAG_UB_VALUE;
  int host = MPI_PROC_NULL;
  int io = MPI_ANY_SOURCE;  // every process can do I/O
  int wtime_is_global = 0;  // clocks are per process (MPI_Wtime counts from MPI_Init)
  int appnum = 0;           // one application (no MPI_Comm_spawn_multiple)
  int universe_size = st().world_size;  // no MPI_Comm_spawn: the world is all
};
// Made on first use (after MPI_Init), never written again: threads may
// read the ints through the pointers they got.
predefined_values& values() {
  static predefined_values v;
  return v;
}

}  // namespace

int copy_attrs(comm_obj& from, comm_obj& to, std::string& detail) {
  attr_table& t = table();
  attr_list src, out;
  std::vector<keyval_obj> cbs;
  {
    std::lock_guard g(t.mu);
    src = from.attrs;
    for (auto& [kv, v] : src) cbs.push_back(callbacks_locked(t, kv));
  }
  const int e = copy_list(from.handle, src, cbs, out, detail);
  // On failure the copies made so far are attached, so freeing the new
  // communicator runs their delete callbacks.
  std::lock_guard g(t.mu);
  to.attrs = std::move(out);
  return e;
}

int delete_attrs(comm_obj& c, std::string& detail) { return delete_list(c.handle, comm_list(&c), detail); }

int copy_type_attrs(MPI_Datatype from, MPI_Datatype to, std::string& detail) {
  attr_table& t = table();
  attr_list src, out;
  std::vector<keyval_obj> cbs;
  {
    std::lock_guard g(t.mu);
    auto it = t.type_attrs.find(from);
    if (it == t.type_attrs.end()) return MPI_SUCCESS;
    src = it->second;
    for (auto& [kv, v] : src) cbs.push_back(callbacks_locked(t, kv));
  }
  const int e = copy_list(from, src, cbs, out, detail);
  std::lock_guard g(t.mu);
  if (!out.empty()) t.type_attrs[to] = std::move(out);
  return e;
}

int delete_win_attrs(MPI_Win win, std::string& detail) {
  const int e = delete_list(win, win_list(win), detail);
  if (e == MPI_SUCCESS) {
    attr_table& t = table();
    std::lock_guard g(t.mu);
    t.win_attrs.erase(win);
  }
  return e;
}

int delete_type_attrs(MPI_Datatype type, std::string& detail) {
  const int e = delete_list(type, type_list(type), detail);
  if (e == MPI_SUCCESS) {
    attr_table& t = table();
    std::lock_guard g(t.mu);
    t.type_attrs.erase(type);
  }
  return e;
}

}  // namespace nmad::mpi

using namespace nmad::mpi;

extern "C" {

int nmad_mpi_comm_null_copy_fn(MPI_Comm, int, void*, void*, void*, int* flag) {
  if (flag) *flag = 0;
  return MPI_SUCCESS;
}

int nmad_mpi_comm_dup_fn(MPI_Comm, int, void*, void* in, void* out, int* flag) {
  *static_cast<void**>(out) = in;
  if (flag) *flag = 1;
  return MPI_SUCCESS;
}

int nmad_mpi_comm_null_delete_fn(MPI_Comm, int, void*, void*) { return MPI_SUCCESS; }

int PMPI_Comm_create_keyval(MPI_Comm_copy_attr_function* copy_fn, MPI_Comm_delete_attr_function* delete_fn,
                            int* keyval, void* extra_state) {
  return create_keyval("MPI_Comm_create_keyval", object_kind::comm, copy_fn, delete_fn, keyval,
                                  extra_state);
}

int PMPI_Comm_free_keyval(int* keyval) { return free_keyval("MPI_Comm_free_keyval", object_kind::comm, keyval); }

int PMPI_Comm_set_attr(MPI_Comm comm, int keyval, void* attribute_val) {
  const char* fn = "MPI_Comm_set_attr";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  comm_obj* c = nullptr;
  if (int e = comm_arg(fn, comm, c)) return e;
  return set_attr(fn, object_kind::comm, c->handle, c, comm_list(c), keyval, attribute_val);
}

int PMPI_Comm_get_attr(MPI_Comm comm, int keyval, void* attribute_val, int* flag) {
  const char* fn = "MPI_Comm_get_attr";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  comm_obj* c = nullptr;
  if (int e = comm_arg(fn, comm, c)) return e;
  if (!attribute_val || !flag) return mpi_raise(fn, c, MPI_ERR_ARG, "null attribute_val or flag");
  if (predefined(keyval)) {
    // Cached on MPI_COMM_WORLD only; the value is a pointer to an int.
    *flag = comm == MPI_COMM_WORLD;
    if (!*flag) return MPI_SUCCESS;
    predefined_values& v = values();
    int* p = keyval == MPI_TAG_UB              ? &v.tag_ub
             : keyval == MPI_HOST              ? &v.host
             : keyval == MPI_IO                ? &v.io
             : keyval == MPI_WTIME_IS_GLOBAL   ? &v.wtime_is_global
             : keyval == MPI_APPNUM            ? &v.appnum
             : keyval == MPI_UNIVERSE_SIZE     ? &v.universe_size
                                               : last_used_error_code();
    *static_cast<void**>(attribute_val) = p;
    return MPI_SUCCESS;
  }
  return get_attr(fn, object_kind::comm, c, comm_list(c), keyval, attribute_val, flag);
}

int PMPI_Comm_delete_attr(MPI_Comm comm, int keyval) {
  const char* fn = "MPI_Comm_delete_attr";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  comm_obj* c = nullptr;
  if (int e = comm_arg(fn, comm, c)) return e;
  return delete_attr(fn, object_kind::comm, c->handle, c, comm_list(c), keyval);
}

// ---- datatypes (MPI-3.1 6.7.4) ----

int nmad_mpi_type_null_copy_fn(MPI_Datatype, int, void*, void*, void*, int* flag) {
  if (flag) *flag = 0;
  return MPI_SUCCESS;
}
int nmad_mpi_type_dup_fn(MPI_Datatype, int, void*, void* in, void* out, int* flag) {
  *static_cast<void**>(out) = in;
  if (flag) *flag = 1;
  return MPI_SUCCESS;
}
int nmad_mpi_type_null_delete_fn(MPI_Datatype, int, void*, void*) { return MPI_SUCCESS; }

int PMPI_Type_create_keyval(MPI_Type_copy_attr_function* copy_fn, MPI_Type_delete_attr_function* delete_fn,
                            int* keyval, void* extra_state) {
  // The null copy function of either kind means "do not copy".
  if (copy_fn == nmad_mpi_type_null_copy_fn) copy_fn = nmad_mpi_comm_null_copy_fn;
  return create_keyval("MPI_Type_create_keyval", object_kind::datatype, copy_fn, delete_fn, keyval,
                                  extra_state);
}

int PMPI_Type_free_keyval(int* keyval) {
  return free_keyval("MPI_Type_free_keyval", object_kind::datatype, keyval);
}

namespace {
int type_arg(const char* fn, MPI_Datatype type) {
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (!type_of(type)) return mpi_raise(fn, nullptr, MPI_ERR_TYPE, type_handle_text(type) + " is not a valid datatype");
  return MPI_SUCCESS;
}
}  // namespace

int PMPI_Type_set_attr(MPI_Datatype type, int keyval, void* attribute_val) {
  const char* fn = "MPI_Type_set_attr";
  if (int e = type_arg(fn, type)) return e;
  return set_attr(fn, object_kind::datatype, type, nullptr, type_list(type), keyval, attribute_val);
}

int PMPI_Type_get_attr(MPI_Datatype type, int keyval, void* attribute_val, int* flag) {
  const char* fn = "MPI_Type_get_attr";
  if (int e = type_arg(fn, type)) return e;
  if (!attribute_val || !flag) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null attribute_val or flag");
  return get_attr(fn, object_kind::datatype, nullptr, type_list(type), keyval, attribute_val, flag);
}

int PMPI_Type_delete_attr(MPI_Datatype type, int keyval) {
  const char* fn = "MPI_Type_delete_attr";
  if (int e = type_arg(fn, type)) return e;
  return delete_attr(fn, object_kind::datatype, type, nullptr, type_list(type), keyval);
}

// ---- windows (MPI 4.1 7.7.3) ----
namespace {
int win_arg(const char* fn, MPI_Win win) {
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (!nmad::mpi::rma::lookup_window(win))
    return mpi_raise(fn, nullptr, MPI_ERR_WIN, win == MPI_WIN_NULL ? std::string("MPI_WIN_NULL") : "invalid window " + std::to_string(win));
  return MPI_SUCCESS;
}
}  // namespace

int PMPI_Win_create_keyval(MPI_Win_copy_attr_function* copy_fn, MPI_Win_delete_attr_function* delete_fn,
                           int* keyval, void* extra_state) {
  return create_keyval("MPI_Win_create_keyval", object_kind::window,
                       reinterpret_cast<MPI_Comm_copy_attr_function*>(copy_fn),
                       reinterpret_cast<MPI_Comm_delete_attr_function*>(delete_fn), keyval, extra_state);
}
int PMPI_Win_free_keyval(int* keyval) { return free_keyval("MPI_Win_free_keyval", object_kind::window, keyval); }
int PMPI_Win_set_attr(MPI_Win win, int keyval, void* attribute_val) {
  const char* fn = "MPI_Win_set_attr";
  if (int e = win_arg(fn, win)) return e;
  if (keyval >= MPI_WIN_BASE && keyval <= MPI_WIN_MODEL)
    return mpi_raise(fn, nullptr, MPI_ERR_KEYVAL, kvname(keyval) + " is a predefined window attribute (read-only)");
  return set_attr(fn, object_kind::window, win, nullptr, win_list(win), keyval, attribute_val);
}
int PMPI_Win_get_attr(MPI_Win win, int keyval, void* attribute_val, int* flag) {
  const char* fn = "MPI_Win_get_attr";
  if (int e = win_arg(fn, win)) return e;
  if (!attribute_val || !flag) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null attribute_val or flag");
  void* v = nullptr;
  if (nmad::mpi::rma::predefined_win_attr(win, keyval, &v)) {
    *static_cast<void**>(attribute_val) = v;
    *flag = 1;
    return MPI_SUCCESS;
  }
  return get_attr(fn, object_kind::window, nullptr, win_list(win), keyval, attribute_val, flag);
}
int PMPI_Win_delete_attr(MPI_Win win, int keyval) {
  const char* fn = "MPI_Win_delete_attr";
  if (int e = win_arg(fn, win)) return e;
  return delete_attr(fn, object_kind::window, win, nullptr, win_list(win), keyval);
}

// Deprecated MPI-1 names: the same calls.
int PMPI_Keyval_create(MPI_Copy_function* copy_fn, MPI_Delete_function* delete_fn, int* keyval, void* extra_state) {
  return PMPI_Comm_create_keyval(copy_fn, delete_fn, keyval, extra_state);
}
int PMPI_Keyval_free(int* keyval) { return PMPI_Comm_free_keyval(keyval); }
int PMPI_Attr_put(MPI_Comm comm, int keyval, void* attribute_val) {
  return PMPI_Comm_set_attr(comm, keyval, attribute_val);
}
int PMPI_Attr_get(MPI_Comm comm, int keyval, void* attribute_val, int* flag) {
  return PMPI_Comm_get_attr(comm, keyval, attribute_val, flag);
}
int PMPI_Attr_delete(MPI_Comm comm, int keyval) { return PMPI_Comm_delete_attr(comm, keyval); }

}  // extern "C"

#pragma weak MPI_Comm_create_keyval = PMPI_Comm_create_keyval
#pragma weak MPI_Comm_free_keyval = PMPI_Comm_free_keyval
#pragma weak MPI_Comm_set_attr = PMPI_Comm_set_attr
#pragma weak MPI_Comm_get_attr = PMPI_Comm_get_attr
#pragma weak MPI_Comm_delete_attr = PMPI_Comm_delete_attr
#pragma weak MPI_Keyval_create = PMPI_Keyval_create
#pragma weak MPI_Keyval_free = PMPI_Keyval_free
#pragma weak MPI_Attr_put = PMPI_Attr_put
#pragma weak MPI_Attr_get = PMPI_Attr_get
#pragma weak MPI_Attr_delete = PMPI_Attr_delete
#pragma weak MPI_Win_create_keyval = PMPI_Win_create_keyval
#pragma weak MPI_Win_free_keyval = PMPI_Win_free_keyval
#pragma weak MPI_Win_set_attr = PMPI_Win_set_attr
#pragma weak MPI_Win_get_attr = PMPI_Win_get_attr
#pragma weak MPI_Win_delete_attr = PMPI_Win_delete_attr
#pragma weak MPI_Type_create_keyval = PMPI_Type_create_keyval
#pragma weak MPI_Type_free_keyval = PMPI_Type_free_keyval
#pragma weak MPI_Type_set_attr = PMPI_Type_set_attr
#pragma weak MPI_Type_get_attr = PMPI_Type_get_attr
#pragma weak MPI_Type_delete_attr = PMPI_Type_delete_attr
