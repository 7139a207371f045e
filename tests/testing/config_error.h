// The message of the ConfigError a call throws, "" when it throws none: the tests of a
// validation look for a fragment of it (the field, the value echoed back, the suggestion).
#pragma once

#include <string>

#include "core/errors.h"

namespace strata::testing {

template <typename Fn>
std::string configErrorOf(Fn&& fn) {
  try {
    fn();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace strata::testing
