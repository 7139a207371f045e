// How the process heap treats large freed blocks while a pipeline trains (glibc malloc).
//
// Why: a backward allocates each weight gradient as a temporary the size of the weight
// (9.4 MB for Linear(1536, 1536)) before adding it into .grad, once per layer and
// microbatch. glibc serves such blocks from the heap top and gives the top back to the
// kernel once 2 such blocks are free there (its dynamic trim threshold is twice the largest
// freed mmap block), so the next temporary is fresh memory and faults every page in again:
// 2300 page faults per Linear, 45-135 ms of CPU per microbatch on the shared VM, where a
// fault costs ~20 us. The zero_bubble schedule's W pass keeps B's small tensors alive across
// the temporaries and hit it on half of its W's against 1/6 of the full backwards, which
// made its compute twice 1F1B's (bench/RESULTS.md, issue 14). Keeping freed memory in the
// heap (a fixed trim threshold, large blocks from the heap instead of mmap) removes the
// faults for every schedule; the cost is that up to trimThresholdBytes of freed memory stay
// mapped (not the peak: the heap still only grows to what is live at once).
//
// Pure: the decision from the environment; applyHeapPolicy carries it out once per process.
#pragma once

#include <cstddef>
#include <string>

namespace strata::pipeline {

struct HeapPolicy {
  bool apply = false;
  size_t mmapThresholdBytes = 0;  // blocks below this come from the heap (glibc's maximum: 32 MiB)
  size_t trimThresholdBytes = 0;  // free memory at the heap top kept mapped up to this
  std::string reason;             // why (not) applied, for the log
};

// keepFreed: STRATA_KEEP_FREED_MEMORY (1 by default, 0 turns it off); userTunedMalloc: any of
// glibc's MALLOC_TRIM_THRESHOLD_, MALLOC_MMAP_THRESHOLD_, MALLOC_TOP_PAD_ is set (the user's
// choice wins).
HeapPolicy heapPolicyFor(bool keepFreed, bool userTunedMalloc);

// Reads the environment (STRATA_KEEP_FREED_MEMORY other than 0 or 1 throws ConfigError),
// decides, and applies the policy with mallopt the first time it is called in the process;
// later calls return the first decision. No effect without glibc.
const HeapPolicy& applyHeapPolicy();

}  // namespace strata::pipeline
