#pragma once
// Secrets and unique names: random bytes from the kernel.
#include <cstddef>
#include <string>

namespace nmad {

// n random lowercase hex characters from /dev/urandom. Throws
// std::runtime_error naming the failure if the kernel cannot provide them.
std::string random_hex(std::size_t n);

}  // namespace nmad
