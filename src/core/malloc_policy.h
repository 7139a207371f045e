// How freed host memory goes back to the C allocator (config `memory.malloc`, STRATA_MALLOC).
//
// A training step frees and allocates the same large tensors every step (activations,
// weight-gradient temporaries, optimizer scratch). glibc serves blocks of 128 KiB-32 MiB and
// above with a fresh mmap and returns them with munmap, so every step faults every page of
// them in again. On the VMs we measured a first touch costs 15-35 us per 4 KiB page
// (bench/RESULTS.md, "Why Open MPI was slow here"): a 25 M-parameter MLP stepped 4x slower
// from page faults alone. "retain" keeps freed memory in the process (no mmap for large
// blocks, no trimming of the heap), as jemalloc/tcmalloc setups do for PyTorch on CPU; the
// cost is that RSS does not shrink after a peak. "system" leaves glibc's defaults.
#pragma once

#include <string>

namespace strata {

enum class MallocPolicy { kRetain, kSystem };

// "retain" | "system"; throws ConfigError naming `field` and the value otherwise.
MallocPolicy parseMallocPolicy(const std::string& value, const std::string& field);
const char* mallocPolicyName(MallocPolicy policy);

// Sets glibc's malloc parameters for the rest of the process (later allocations; blocks
// already mapped are untouched). kSystem restores glibc's documented defaults. Throws
// std::runtime_error if mallopt refuses a parameter.
void applyMallocPolicy(MallocPolicy policy);

}  // namespace strata
