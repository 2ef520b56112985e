#pragma once
// Copies of a few bytes on the message path (a compact header, an 8-byte
// payload) without a call into the C library: inline loads and stores of
// at most four words; anything over 32 bytes goes to memcpy.
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace nmad {

inline void copy_small(std::byte* dst, const std::byte* src, std::size_t n) {
  if (n > 32) {
    std::memcpy(dst, src, n);
    return;
  }
  if (n >= 16) {
    std::uint64_t a, b, c, d;
    std::memcpy(&a, src, 8);
    std::memcpy(&b, src + 8, 8);
    std::memcpy(&c, src + n - 16, 8);
    std::memcpy(&d, src + n - 8, 8);
    std::memcpy(dst, &a, 8);
    std::memcpy(dst + 8, &b, 8);
    std::memcpy(dst + n - 16, &c, 8);
    std::memcpy(dst + n - 8, &d, 8);
  } else if (n >= 8) {
    std::uint64_t a, b;
    std::memcpy(&a, src, 8);
    std::memcpy(&b, src + n - 8, 8);
    std::memcpy(dst, &a, 8);
    std::memcpy(dst + n - 8, &b, 8);
  } else {
    for (std::size_t i = 0; i < n; ++i) dst[i] = src[i];
  }
}

}  // namespace nmad
