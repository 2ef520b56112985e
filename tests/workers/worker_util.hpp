// What every test worker (a program the suite starts under nmad-run) does
// when a check fails: one line "<program> rank R: FAILED: what" on stderr,
// which the tests look for, then exit status 1 without unwinding (the
// session may be in any state).
#pragma once

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "api/nmad/nmad.hpp"

namespace nmad_test::worker {

// This process's rank once the session is up (-1 before).
inline int g_rank = -1;

[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "%s rank %d: FAILED: %s\n", program_invocation_short_name, g_rank, what.c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

inline void expect(bool cond, const std::string& what) {
  if (!cond) fail(what);
}

// `what` failed with `e`: fails naming the error and the request's message.
inline void expect_ok(nmad::errc e, const nmad::request& r, const std::string& what) {
  if (e != nmad::errc::ok) fail(what + ": " + std::string(nmad::to_string(e)) + " " + r.error_message());
}

}  // namespace nmad_test::worker
