// Small formatting helpers for finding messages.
#pragma once

#include <c10/util/StringUtil.h>

#include <cstdio>
#include <string>
#include <vector>

namespace strata::rules {

// x with `digits` decimals ("54.3").
inline std::string fixed(double x, int digits = 1) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}

// A number the way a person writes it: 50, 0.2, 1e-07 (Python's repr for non-integers).
std::string num(double x);

// The first `max` items joined by ", ", then "and N more" ("a, b, c and 2 more"): a finding
// names the offending tensors without growing with the model.
inline std::string listOf(const std::vector<std::string>& v, size_t max = 5) {
  std::string out;
  for (size_t i = 0; i < v.size() && i < max; ++i) out += (i ? ", " : "") + v[i];
  if (v.size() > max) out += c10::str(" and ", v.size() - max, " more");
  return out;
}

}  // namespace strata::rules
