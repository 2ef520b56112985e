// Attribute caching on communicators: keyvals with copy/delete callbacks,
// MPI_Comm_set/get/delete_attr, the predefined attributes of MPI_COMM_WORLD
// and the deprecated MPI-1 names (MPI_Keyval_create, MPI_Attr_*).
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

#include "mpi_layer/mpi_impl.hpp"

namespace nmad::mpi {

namespace {

constexpr int kFirstUserKeyval = 16;

struct keyval_obj {
  MPI_Comm_copy_attr_function* copy = nullptr;
  MPI_Comm_delete_attr_function* del = nullptr;
  void* extra = nullptr;
  bool freed = false;
};

struct attr_table {
  std::mutex mu;  // guards the keyvals and every comm_obj::attrs
  std::vector<std::unique_ptr<keyval_obj>> keyvals = std::vector<std::unique_ptr<keyval_obj>>(kFirstUserKeyval);
};

attr_table& table() {
  static attr_table* t = new attr_table();
  return *t;
}

bool predefined(int kv) { return kv >= MPI_TAG_UB && kv <= MPI_LASTUSEDCODE; }

// The keyval's callbacks if kv is a live user keyval (copied: the caller
// releases the lock before calling them).
std::optional<keyval_obj> user_keyval_locked(attr_table& t, int kv) {
  if (kv < kFirstUserKeyval || static_cast<std::size_t>(kv) >= t.keyvals.size() || t.keyvals[kv]->freed)
    return std::nullopt;
  return *t.keyvals[kv];
}

// Callbacks of a keyval even if freed (for attributes still cached).
keyval_obj callbacks_locked(attr_table& t, int kv) { return *t.keyvals[kv]; }

std::string kvname(int kv) {
  return kv == MPI_KEYVAL_INVALID ? std::string("MPI_KEYVAL_INVALID") : "keyval " + std::to_string(kv);
}

int bad_keyval(const char* fn, comm_obj* c, int kv) {
  if (predefined(kv))
    return mpi_raise(fn, c, MPI_ERR_KEYVAL, kvname(kv) + " is a predefined attribute (read-only)");
  return mpi_raise(fn, c, MPI_ERR_KEYVAL, "invalid or freed " + kvname(kv));
}

// Runs kv's delete callback on (c, value). Returns its code.
int run_delete(comm_obj& c, int kv, void* value, const keyval_obj& k) {
  if (!k.del) return MPI_SUCCESS;
  return k.del(c.handle, kv, value, k.extra);
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
  std::vector<std::pair<int, void*>> src;
  std::vector<keyval_obj> cbs;
  {
    std::lock_guard g(t.mu);
    src = from.attrs;
    for (auto& [kv, v] : src) cbs.push_back(callbacks_locked(t, kv));
  }
  std::vector<std::pair<int, void*>> out;
  for (std::size_t i = 0; i < src.size(); ++i) {
    const auto& k = cbs[i];
    if (!k.copy || k.copy == MPI_COMM_NULL_COPY_FN) continue;
    void* value = nullptr;
    int flag = 0;
    const int e = k.copy(from.handle, src[i].first, k.extra, src[i].second, &value, &flag);
    if (e != MPI_SUCCESS) {
      detail = "the copy callback of keyval " + std::to_string(src[i].first) + " returned " + std::to_string(e);
      // The copies made so far are attached, so freeing the new
      // communicator runs their delete callbacks.
      std::lock_guard g(t.mu);
      to.attrs = std::move(out);
      return valid_error_code(e) ? e : MPI_ERR_OTHER;
    }
    if (flag) out.emplace_back(src[i].first, value);
  }
  std::lock_guard g(t.mu);
  to.attrs = std::move(out);
  return MPI_SUCCESS;
}

int delete_attrs(comm_obj& c, std::string& detail) {
  attr_table& t = table();
  for (;;) {
    std::pair<int, void*> last;
    keyval_obj k;
    {
      std::lock_guard g(t.mu);
      if (c.attrs.empty()) return MPI_SUCCESS;
      last = c.attrs.back();
      k = callbacks_locked(t, last.first);
    }
    const int e = run_delete(c, last.first, last.second, k);
    if (e != MPI_SUCCESS) {
      detail = "the delete callback of keyval " + std::to_string(last.first) + " returned " + std::to_string(e);
      return valid_error_code(e) ? e : MPI_ERR_OTHER;
    }
    std::lock_guard g(t.mu);
    auto it = std::find(c.attrs.begin(), c.attrs.end(), last);
    if (it != c.attrs.end()) c.attrs.erase(it);
  }
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
  const char* fn = "MPI_Comm_create_keyval";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (!keyval) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null keyval");
  attr_table& t = table();
  std::lock_guard g(t.mu);
  auto k = std::make_unique<keyval_obj>();
  k->copy = copy_fn;
  k->del = delete_fn;
  k->extra = extra_state;
  t.keyvals.push_back(std::move(k));
  *keyval = static_cast<int>(t.keyvals.size() - 1);
  return MPI_SUCCESS;
}

int PMPI_Comm_free_keyval(int* keyval) {
  const char* fn = "MPI_Comm_free_keyval";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  if (!keyval) return mpi_raise(fn, nullptr, MPI_ERR_ARG, "null keyval");
  attr_table& t = table();
  {
    std::lock_guard g(t.mu);
    if (user_keyval_locked(t, *keyval)) {
      t.keyvals[*keyval]->freed = true;
      *keyval = MPI_KEYVAL_INVALID;
      return MPI_SUCCESS;
    }
  }
  return bad_keyval(fn, nullptr, *keyval);
}

int PMPI_Comm_set_attr(MPI_Comm comm, int keyval, void* attribute_val) {
  const char* fn = "MPI_Comm_set_attr";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  comm_obj* c = nullptr;
  if (int e = comm_arg(fn, comm, c)) return e;
  attr_table& t = table();
  std::optional<keyval_obj> k;
  void* old = nullptr;
  bool had = false;
  {
    std::lock_guard g(t.mu);
    k = user_keyval_locked(t, keyval);
    if (k) {
      auto it = std::find_if(c->attrs.begin(), c->attrs.end(), [&](auto& a) { return a.first == keyval; });
      if (it != c->attrs.end()) {
        had = true;
        old = it->second;
      } else {
        c->attrs.emplace_back(keyval, attribute_val);
      }
    }
  }
  if (!k) return bad_keyval(fn, c, keyval);
  if (!had) return MPI_SUCCESS;
  // Replacing a value deletes the old one first (its callback may refuse).
  if (const int e = run_delete(*c, keyval, old, *k); e != MPI_SUCCESS)
    return mpi_raise(fn, c, valid_error_code(e) ? e : MPI_ERR_OTHER,
                     "the delete callback of " + kvname(keyval) + " on the old value returned " + std::to_string(e));
  std::lock_guard g(t.mu);
  for (auto& a : c->attrs)
    if (a.first == keyval) a.second = attribute_val;
  return MPI_SUCCESS;
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
  attr_table& t = table();
  {
    std::lock_guard g(t.mu);
    if (user_keyval_locked(t, keyval)) {
      *flag = 0;
      for (auto& a : c->attrs)
        if (a.first == keyval) {
          *flag = 1;
          *static_cast<void**>(attribute_val) = a.second;
        }
      return MPI_SUCCESS;
    }
  }
  return bad_keyval(fn, c, keyval);
}

int PMPI_Comm_delete_attr(MPI_Comm comm, int keyval) {
  const char* fn = "MPI_Comm_delete_attr";
  if (!check_initialized(fn)) return MPI_ERR_OTHER;
  comm_obj* c = nullptr;
  if (int e = comm_arg(fn, comm, c)) return e;
  attr_table& t = table();
  std::optional<keyval_obj> k;
  void* value = nullptr;
  bool had = false;
  {
    std::lock_guard g(t.mu);
    k = user_keyval_locked(t, keyval);
    if (keyval >= kFirstUserKeyval && static_cast<std::size_t>(keyval) < t.keyvals.size())
      for (auto& a : c->attrs)
        if (a.first == keyval) {
          had = true;
          value = a.second;
        }
    // MPI-3.1 6.7.2: freeing a keyval in use is not erroneous; its cached
    // attributes stay until MPI_Comm_delete_attr or MPI_Comm_free, so
    // deleting one through a freed keyval works (and runs its callback).
    if (!k && had) k = callbacks_locked(t, keyval);
  }
  if (!k) return bad_keyval(fn, c, keyval);
  if (!had) return MPI_SUCCESS;  // nothing cached: nothing to delete
  if (const int e = run_delete(*c, keyval, value, *k); e != MPI_SUCCESS)
    return mpi_raise(fn, c, valid_error_code(e) ? e : MPI_ERR_OTHER,
                     "the delete callback of " + kvname(keyval) + " returned " + std::to_string(e));
  std::lock_guard g(t.mu);
  std::erase_if(c->attrs, [&](auto& a) { return a.first == keyval; });
  return MPI_SUCCESS;
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
