#pragma once
// The wait policies of blocking calls (see core/progress/waiter.hpp); part
// of the public API, hence on its own without dependencies.
#include <cstdint>

namespace nmad {

// busy: poll without pause; block: sleep as soon as a round of progress
// found nothing to do; fixed_spin: poll for a while (a few microseconds),
// then sleep.
enum class wait_policy : std::uint8_t { busy, block, fixed_spin };

}  // namespace nmad
