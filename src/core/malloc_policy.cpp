#include "core/malloc_policy.h"

#include <malloc.h>

#include <cstring>
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

MallocDecision decideMallocPolicy(MallocPolicy configured, bool userTunedMalloc) {
  if (configured == MallocPolicy::kSystem) return {false, "system: the allocator as the process has it"};
  if (userTunedMalloc)
    return {false, "retain not applied: the environment tunes glibc's malloc (MALLOC_*_ or GLIBC_TUNABLES), which wins"};
  return {true, "retain: freed memory stays in the process (no mmap for large blocks, no heap trimming)"};
}

bool userTunedMalloc(const char* (*getenv)(const char*)) {
  for (const char* name : {"MALLOC_MMAP_MAX_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_"}) {
    const char* value = getenv(name);
    if (value != nullptr && *value != '\0') return true;
  }
  const char* tunables = getenv("GLIBC_TUNABLES");
  return tunables != nullptr && std::strstr(tunables, "glibc.malloc.") != nullptr;
}

void applyMallocPolicy(MallocPolicy policy) {
  if (policy == MallocPolicy::kSystem) return;
  // M_MMAP_MAX 0 sends every block to the heap: glibc's mmap threshold cannot exceed 32 MiB,
  // and gradient temporaries are larger than that.
  if (mallopt(M_MMAP_MAX, 0) != 1 || mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max()) != 1)
    throw std::runtime_error("mallopt refused the \"retain\" malloc policy");
}

}  // namespace strata
