#include "core/env.h"

#include <cstdlib>
#include <cstring>
#include <unistd.h>  // environ (glibc declares it with _GNU_SOURCE, which g++ defines)

#include "core/errors.h"

namespace strata::env {

int64_t getInt(const char* name, int64_t fallback, int64_t minValue, int64_t maxValue) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  errno = 0;
  const long long parsed = std::strtoll(v, &end, 10);
  STRATA_CHECK_WITH(ConfigError, errno == 0 && end && *end == '\0' && parsed >= minValue && parsed <= maxValue,
                    "environment variable ", name, "=\"", v, "\" must be an integer in [", minValue, ", ",
                    maxValue, "]");
  return parsed;
}

std::string getString(const char* name, const std::string& fallback, const std::vector<std::string>& allowed) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  if (allowed.empty()) return v;
  for (const auto& a : allowed)
    if (a == v) return v;
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "\"" : ", \"") + a + "\"";
  STRATA_THROW(ConfigError, "environment variable ", name, "=\"", v, "\" is not one of ", list);
}

std::vector<std::pair<std::string, std::string>> strataVariables() {
  std::vector<std::pair<std::string, std::string>> out;
  for (char** e = environ; e && *e; ++e) {
    if (std::strncmp(*e, "STRATA_", 7) != 0) continue;
    const char* eq = std::strchr(*e, '=');
    if (!eq) continue;
    out.emplace_back(std::string(*e, static_cast<size_t>(eq - *e)), std::string(eq + 1));
  }
  return out;
}

}  // namespace strata::env
