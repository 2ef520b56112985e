#pragma once
// Opening a session with whatever drivers are registered (see the registry
// in core/transfer/driver.hpp). The core has no session::create: the library
// that bundles the core with drivers defines it (libnmad/session_create.cpp)
// as "register the drivers, then session_factory::open". A program linking
// the core without that library calls register_driver() for the drivers it
// wants, then open().
#include <memory>

#include "api/nmad/nmad.hpp"

namespace nmad {

struct session_factory {
  // As session::create, with the drivers registered so far: it needs one
  // loopback driver (its own gate) and at least one network driver that
  // opens (session_impl::open_drivers). Throws std::runtime_error on failure.
  static std::unique_ptr<session> open(const session_options& opts);
};

}  // namespace nmad
