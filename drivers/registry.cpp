// The explicit list of drivers this build has. A new driver adds one line.
#include "core/transfer/driver.hpp"
#include "drivers/shm/shm_driver.hpp"
#include "drivers/tcp/tcp_driver.hpp"

namespace nmad {
namespace {

constexpr driver_descriptor kDrivers[] = {
    {"tcp", "TCP sockets (IPv4), one connection per peer", &make_tcp_driver},
    {"shm", "shared-memory rings + single-copy cross-memory attach (same host)", &make_shm_driver},
};

}  // namespace

std::span<const driver_descriptor> driver_registry() { return kDrivers; }

const driver_descriptor* find_driver(std::string_view name) {
  for (const driver_descriptor& d : kDrivers)
    if (d.name == name) return &d;
  return nullptr;
}

}  // namespace nmad
