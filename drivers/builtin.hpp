#pragma once
// The drivers this build bundles with the engine. The core links no driver
// (see the registry in core/transfer/driver.hpp); whatever links the core
// with drivers calls register_builtin_drivers() once before the first
// session opens — libnmad's session::create does, so programs using the
// public API never call it themselves. Tests and tools that open drivers
// without a session (conformance test, nmad-info) call it directly.
//
// Thread-safe and idempotent: a second call registers nothing new.
namespace nmad {
void register_builtin_drivers();
}  // namespace nmad
