#include "core/malloc_policy.h"

#include <malloc.h>

#include <limits>
#include <stdexcept>

#include "core/errors.h"

namespace strata {

MallocPolicy parseMallocPolicy(const std::string& value, const std::string& field) {
  if (value == "retain") return MallocPolicy::kRetain;
  if (value == "system") return MallocPolicy::kSystem;
  throw ConfigError(field + ": \"" + value + "\" is not a malloc policy (\"retain\" | \"system\")");
}

const char* mallocPolicyName(MallocPolicy policy) { return policy == MallocPolicy::kRetain ? "retain" : "system"; }

void applyMallocPolicy(MallocPolicy policy) {
  // glibc's defaults (mallopt(3)): 65536 mmapped blocks at most, 128 KiB thresholds. Setting
  // them explicitly also turns off glibc's dynamic threshold, which is what "system" means
  // for the rest of a run that switched policies (tests do).
  constexpr int kDefaultMmapMax = 65536, kDefaultThreshold = 128 * 1024;
  const bool retain = policy == MallocPolicy::kRetain;
  // M_MMAP_MAX 0 sends every block to the heap: glibc's mmap threshold cannot exceed 32 MiB,
  // and gradient temporaries are larger than that.
  const bool ok = mallopt(M_MMAP_MAX, retain ? 0 : kDefaultMmapMax) == 1 &&
                  mallopt(M_TRIM_THRESHOLD, retain ? std::numeric_limits<int>::max() : kDefaultThreshold) == 1 &&
                  (retain || mallopt(M_MMAP_THRESHOLD, kDefaultThreshold) == 1);
  if (!ok) throw std::runtime_error(std::string("mallopt refused the \"") + mallocPolicyName(policy) + "\" malloc policy");
}

}  // namespace strata
