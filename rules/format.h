// Small formatting helpers for finding messages.
#pragma once

#include <c10/util/StringUtil.h>

#include <cstdio>
#include <string>

namespace strata::rules {

// x with `digits` decimals ("54.3").
inline std::string fixed(double x, int digits = 1) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}

// A number the way a person writes it: 50, 0.2, 1e-07 (Python's repr for non-integers).
std::string num(double x);

}  // namespace strata::rules
