#pragma once
// The wait policies of blocking calls (public API; the engine's waiter,
// core/progress/waiter.hpp, implements them). No dependencies.
#include <cstdint>

namespace nmad {

// busy: poll without pause; block: sleep as soon as a round of progress
// found nothing to do; fixed_spin: poll for a while (a few microseconds),
// then sleep.
enum class wait_policy : std::uint8_t { busy, block, fixed_spin };

}  // namespace nmad
