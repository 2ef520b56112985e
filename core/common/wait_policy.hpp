#pragma once
// wait_policy is part of the public API: defined in api/nmad/wait_policy.hpp.
#include "api/nmad/wait_policy.hpp"
