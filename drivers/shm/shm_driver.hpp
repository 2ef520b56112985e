#pragma once
// The `shm` driver: processes on the same machine.
//
// Packets travel through shared-memory rings (one single-producer
// single-consumer ring per direction and connection), and are handed to the
// engine in place. Bulk data is copied once, straight from the sender's
// buffer into the receiver's posted buffer, with process_vm_writev (Linux
// cross-memory attach); where the kernel refuses that (ptrace restrictions)
// the data is streamed through the ring in fragments instead. See
// shm_driver.cpp for the connection set-up and the tunables.
#include <memory>

#include "core/transfer/driver.hpp"

namespace nmad {
std::unique_ptr<driver> make_shm_driver();
}  // namespace nmad
