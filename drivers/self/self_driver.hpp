#pragma once
// The `self` driver: messages a process sends to itself. Packets are copied
// into an in-memory queue and delivered by the next poll(); bulk data is
// copied straight into the buffer posted for its cookie (one copy).
#include <memory>

#include "core/transfer/driver.hpp"

namespace nmad {
std::unique_ptr<driver> make_self_driver();
}  // namespace nmad
