#pragma once
// The tcp driver: IPv4 stream sockets, one per peer. See tcp_driver.cpp for
// its tunables and drivers/tcp/tcp_wire.hpp for the wire format.
#include <memory>

#include "core/transfer/driver.hpp"

namespace nmad {

std::unique_ptr<driver> make_tcp_driver();

}  // namespace nmad
