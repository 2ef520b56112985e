// The explicit list of drivers this build has, registered in this order
// (the order nmad-info lists them in; sessions order network drivers by
// latency, not by this list). A new driver adds one line here and one
// dependency to //drivers:builtin. ofi is registered on request only: a
// session opens it when NMAD_DRIVER(S) names it.
#include "drivers/builtin.hpp"

#include "core/transfer/driver.hpp"
#include "drivers/ofi/ofi_driver.hpp"
#include "drivers/self/self_driver.hpp"
#include "drivers/shm/shm_driver.hpp"
#include "drivers/tcp/tcp_driver.hpp"

namespace nmad {

void register_builtin_drivers() {
  register_driver({"self", "messages this process sends to itself (in-memory queue)", &make_self_driver,
                   /*loopback=*/true});
  register_driver({"tcp", "TCP sockets (IPv4), one connection per peer", &make_tcp_driver});
  register_driver({"shm", "shared-memory rings + single-copy cross-memory attach (same host)", &make_shm_driver});
  register_driver({"ofi", "libfabric reliable datagrams (NMAD_OFI_PROVIDER: tcp;ofi_rxm, shm, udp;ofi_rxd...)",
                   &make_ofi_driver, /*loopback=*/false, /*on_request=*/true});
}

}  // namespace nmad
