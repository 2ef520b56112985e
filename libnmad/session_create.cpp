// session::create of libnmad: the engine with the drivers this build
// bundles. Registering them here, once, before the first session opens, is
// what lets the core link no driver (see core/session_factory.hpp).
#include <mutex>

#include "api/nmad/nmad.hpp"
#include "core/session_factory.hpp"
#include "drivers/builtin.hpp"

namespace nmad {

std::unique_ptr<session> session::create(const session_options& opts) {
  static std::once_flag registered;
  std::call_once(registered, register_builtin_drivers);
  return session_factory::open(opts);
}

}  // namespace nmad
