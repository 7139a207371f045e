// The "memory" section (docs/config.md; core/malloc_policy.h says why).
#include "config/sections.h"

namespace strata::config::detail {

MemoryConfig parseMemory(const Validator& v, const Json& section, const std::string& path) {
  MemoryConfig mc;
  const ObjectReader r(v, section, path, {"malloc"});
  r.readEnum("malloc", mc.malloc, {"retain", "system"});
  return mc;
}

}  // namespace strata::config::detail
