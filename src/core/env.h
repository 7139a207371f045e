// Typed STRATA_* environment parameters, validated, with their effective values
// remembered so the runtime can log every one of them once at start.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace strata::env {

// The variable as an integer in [minValue, maxValue], or fallback when unset/empty.
// Throws ConfigError naming the variable, its value and the allowed range.
int64_t getInt(const char* name, int64_t fallback, int64_t minValue, int64_t maxValue);
// The variable, which must be one of `allowed` (when non-empty), or fallback.
std::string getString(const char* name, const std::string& fallback,
                      const std::vector<std::string>& allowed = {});
// Every STRATA_* variable set in the environment, as name=value pairs.
std::vector<std::pair<std::string, std::string>> strataVariables();

}  // namespace strata::env
