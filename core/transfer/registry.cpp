// The core-owned driver table behind register_driver() (see driver.hpp):
// fixed storage filled in order, published with a release store of the
// count, so readers take no lock and what they saw never moves.
#include <array>
#include <atomic>
#include <mutex>
#include <string>

#include "api/nmad/services/log.hpp"
#include "core/transfer/driver.hpp"

namespace nmad {
namespace {

constexpr std::size_t kMaxDrivers = 16;

struct table {
  std::mutex writers;
  std::array<driver_descriptor, kMaxDrivers> entries{};
  std::atomic<std::size_t> count{0};
};

table& the_table() {
  static table t;  // constant-initialised members: usable at any time
  return t;
}

}  // namespace

bool register_driver(const driver_descriptor& d) {
  table& t = the_table();
  std::lock_guard lock(t.writers);
  const std::size_t n = t.count.load(std::memory_order_relaxed);
  for (std::size_t i = 0; i < n; ++i)
    if (t.entries[i].name == d.name) return false;
  if (d.abi_version != kDriverAbiVersion) {
    log_write(log_level::error, "registry",
              "driver '" + std::string(d.name) + "' not registered: built for driver interface version " +
                  std::to_string(d.abi_version) + ", this library has version " + std::to_string(kDriverAbiVersion));
    return false;
  }
  if (n == kMaxDrivers || d.name.empty() || d.create == nullptr) {
    log_write(log_level::error, "registry",
              "driver '" + std::string(d.name) + "' not registered: " +
                  (n == kMaxDrivers ? "registry full" : "no name or no factory"));
    return false;
  }
  t.entries[n] = d;
  t.count.store(n + 1, std::memory_order_release);
  return true;
}

std::span<const driver_descriptor> driver_registry() {
  table& t = the_table();
  return {t.entries.data(), t.count.load(std::memory_order_acquire)};
}

const driver_descriptor* find_driver(std::string_view name) {
  for (const driver_descriptor& d : driver_registry())
    if (d.name == name) return &d;
  return nullptr;
}

}  // namespace nmad
