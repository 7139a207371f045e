// The end-to-end programs (tests/torch, tests/pp) collect every failed expectation instead
// of stopping at the first, print one "FAIL: ..." line each, and exit non-zero if any.
#pragma once

#include <cstdio>
#include <string>

namespace strata::testing {

struct Checker {
  int problems = 0;
  void expect(bool ok, const std::string& what) {
    if (ok) return;
    ++problems;
    std::printf("FAIL: %s\n", what.c_str());
  }
};

}  // namespace strata::testing
