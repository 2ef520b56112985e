#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
#include <boost/intrusive/list.hpp>
#include <span>
TEST_CASE("smoke") { CHECK(1 + 1 == 2); }
