#include "pipeline/heap_policy.h"

#include <cstdlib>
#include <mutex>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "core/env.h"
#include "core/logging.h"

namespace strata::pipeline {
namespace {

// glibc refuses an mmap threshold above HEAP_MAX_SIZE / 2 (32 MiB on 64-bit).
constexpr size_t kMmapThresholdBytes = size_t{32} << 20;
// Freed memory kept at the heap top: several weight-gradient temporaries of large layers.
constexpr size_t kTrimThresholdBytes = size_t{256} << 20;

}  // namespace

HeapPolicy heapPolicyFor(bool keepFreed, bool userTunedMalloc) {
  HeapPolicy policy;
  if (!keepFreed) {
    policy.reason = "STRATA_KEEP_FREED_MEMORY=0";
    return policy;
  }
  if (userTunedMalloc) {
    policy.reason = "the environment sets glibc's MALLOC_*_ tunables";
    return policy;
  }
  policy.apply = true;
  policy.mmapThresholdBytes = kMmapThresholdBytes;
  policy.trimThresholdBytes = kTrimThresholdBytes;
  policy.reason = "default (STRATA_KEEP_FREED_MEMORY=0 turns it off)";
  return policy;
}

const HeapPolicy& applyHeapPolicy() {
  static HeapPolicy policy;
  static std::once_flag once;
  std::call_once(once, [] {
    const bool userTuned = std::getenv("MALLOC_TRIM_THRESHOLD_") != nullptr ||
                           std::getenv("MALLOC_MMAP_THRESHOLD_") != nullptr || std::getenv("MALLOC_TOP_PAD_") != nullptr;
    policy = heapPolicyFor(env::getInt("STRATA_KEEP_FREED_MEMORY", 1, 0, 1) == 1, userTuned);
#if defined(__GLIBC__)
    // The mmap threshold first: setting either turns off glibc's dynamic thresholds.
    if (policy.apply && (mallopt(M_MMAP_THRESHOLD, static_cast<int>(policy.mmapThresholdBytes)) != 1 ||
                         mallopt(M_TRIM_THRESHOLD, static_cast<int>(policy.trimThresholdBytes)) != 1)) {
      policy.apply = false;
      policy.reason = "mallopt refused the thresholds";
    }
#else
    policy.apply = false;
    policy.reason = "not glibc";
#endif
    STRATA_LOG(kInfo, kPipe, "pipeline heap: keep freed memory ", policy.apply ? "on" : "off", " (", policy.reason,
               ")");
  });
  return policy;
}

}  // namespace strata::pipeline
