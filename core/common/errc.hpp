#pragma once
// errc is part of the public API: defined in api/nmad/errc.hpp.
#include "api/nmad/errc.hpp"
