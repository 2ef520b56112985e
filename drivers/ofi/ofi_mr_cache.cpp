// The ofi driver's RMA read rendezvous: registration cache, expose and
// unexpose, reads (see ofi_internal.hpp).
#include "drivers/ofi/ofi_internal.hpp"

namespace nmad::ofi_detail {


void ofi_driver::close_regions() {
  _exposures.clear();
  for (region& r : _regions) fi_close(&r.mr->fid);
  _regions.clear();
}

void ofi_driver::apply_released() {
  if (!_any_released.load(std::memory_order_acquire)) return;
  std::vector<std::pair<std::uintptr_t, std::size_t>> done;
  {
    std::lock_guard l(_released_lock);
    done.swap(_released);
    _any_released.store(false, std::memory_order_relaxed);
  }
  for (const auto& k : done) {
    auto it = _exposures.find(k);
    if (it == _exposures.end()) continue;  // not exposed (a caller's mistake): nothing to release
    --it->second->refs;
    _exposures.erase(it);
  }
  trim_cache();
}

// Regions no exposure uses beyond _cache_max go, least recently used first.
void ofi_driver::trim_cache() {
  std::size_t idle = 0;
  for (const region& r : _regions) idle += r.refs == 0;
  for (auto it = _regions.end(); idle > _cache_max && it != _regions.begin();) {
    --it;
    if (it->refs) continue;
    fi_close(&it->mr->fid);
    it = _regions.erase(it);
    --idle;
    ++_mr_stats.evictions;
  }
}

bool ofi_driver::expose(const void* ptr, std::size_t len, std::uint64_t& remote_addr,
                        std::uint32_t& remote_key) try {
  if (!_rma || !_ep || !ptr || len == 0) return false;
  apply_released();
  const auto p = reinterpret_cast<std::uintptr_t>(ptr);
  auto it = std::find_if(_regions.begin(), _regions.end(),
                         [&](const region& r) { return r.base <= p && len <= r.len && p - r.base <= r.len - len; });
  if (it != _regions.end()) {
    ++_mr_stats.hits;
    _regions.splice(_regions.begin(), _regions, it);  // most recently used (it stays valid)
  } else {
    ++_mr_stats.misses;
    std::uint64_t want = 0;
    if (!_prov_key) {
      want = _next_key;
      _next_key = _next_key == 0xffffffffu ? 1 : _next_key + 1;
    }
    fid_mr* mr = nullptr;
    int ret = fi_mr_reg(_domain, ptr, len, FI_REMOTE_READ, 0, want, 0, &mr, nullptr);
    if (ret == 0 && _mr_endpoint) {
      ret = fi_mr_bind(mr, &_ep->fid, 0);
      if (ret == 0) ret = fi_mr_enable(mr);
    }
    const std::uint64_t key = ret == 0 ? fi_mr_key(mr) : 0;
    if (ret != 0 || key > 0xffffffffu || key == FI_KEY_NOTAVAIL) {
      if (mr) fi_close(&mr->fid);
      if (!_expose_error_logged)
        log_write(log_level::warn, "ofi",
                  ret != 0 ? fi_error(_prov, "fi_mr_reg", ret) + ": rendezvous data is pushed instead"
                           : "the provider's registration key does not fit in 32 bits: rendezvous data is pushed");
      _expose_error_logged = true;
      return false;
    }
    _regions.push_front({p, len, mr, key, 0});
    it = _regions.begin();
  }
  ++it->refs;
  _exposures.emplace(std::make_pair(p, len), it);
  remote_addr = _virt_addr ? p : p - it->base;
  remote_key = static_cast<std::uint32_t>(it->key);
  trim_cache();
  return true;
} catch (const std::exception&) {
  return false;  // no memory for the bookkeeping: the rendezvous is pushed
}

void ofi_driver::unexpose(const void* ptr, std::size_t len) {
  std::lock_guard l(_released_lock);
  _released.emplace_back(reinterpret_cast<std::uintptr_t>(ptr), len);
  _any_released.store(true, std::memory_order_release);
}

post_result ofi_driver::read_remote(connection_id id, std::uint64_t remote_addr, std::uint64_t remote_key,
                                    std::span<const iovec> dst, void* token) {
  // Anything but posted makes the engine ask the peer to push the range.
  conn* c = find(id);
  if (!_rma || !c || c->st != state::established || dst.empty() || dst.size() > _iov_limit ||
      c->in_flight >= kMaxSendsInFlight)
    return post_result::failed;
  apply_released();
  op* o = new_op(op_kind::get, id);
  o->token = token;
  o->capacity = total_len(dst);
  const ssize_t r = fi_readv(_ep, dst.data(), nullptr, dst.size(), c->addr, remote_addr, remote_key, &o->ctx);
  if (r == 0) {
    ++c->in_flight;
    c->sends.insert(o);
    ++_mr_stats.reads;
    return post_result::posted;
  }
  release(o);
  if (!transient(r)) fail(*c, fi_error(_prov, "fi_read", static_cast<int>(r)));
  return post_result::failed;
}

}  // namespace nmad::ofi_detail
