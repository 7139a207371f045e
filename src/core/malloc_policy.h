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

// Whether Strata changes the allocator, and why (for the log).
struct MallocDecision {
  bool apply = false;
  std::string reason;
};

// Pure. userTunedMalloc: the environment sets glibc's malloc parameters itself (see
// userTunedMalloc below); the user's own settings then win over the default "retain".
MallocDecision decideMallocPolicy(MallocPolicy configured, bool userTunedMalloc);

// Any of glibc's MALLOC_MMAP_MAX_, MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_,
// MALLOC_TOP_PAD_ or a glibc.malloc.* entry in GLIBC_TUNABLES, from `getenv`.
bool userTunedMalloc(const char* (*getenv)(const char*));

// kRetain: sets glibc's malloc parameters for the rest of the process (later allocations;
// blocks already mapped are untouched); throws std::runtime_error if mallopt refuses one.
// kSystem: changes nothing.
void applyMallocPolicy(MallocPolicy policy);

}  // namespace strata
