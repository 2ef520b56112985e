// The explicit list of drivers this build has, registered in this order
// (the order nmad-info lists them in; sessions order network drivers by
// latency, not by this list). A new driver adds one line here and one
// dependency to //drivers:builtin; an optional one (libfabric) would sit
// under its build condition.
#include "drivers/builtin.hpp"

#include "core/transfer/driver.hpp"
#include "drivers/self/self_driver.hpp"
#include "drivers/shm/shm_driver.hpp"
#include "drivers/tcp/tcp_driver.hpp"

namespace nmad {

void register_builtin_drivers() {
  register_driver({"self", "messages this process sends to itself (in-memory queue)", &make_self_driver,
                   /*loopback=*/true});
  register_driver({"tcp", "TCP sockets (IPv4), one connection per peer", &make_tcp_driver});
  register_driver({"shm", "shared-memory rings + single-copy cross-memory attach (same host)", &make_shm_driver});
}

}  // namespace nmad
