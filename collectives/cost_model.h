// Chooses an AllReduce algorithm from the topology and the message size (pure).
//
// Each algorithm's time is estimated as latency terms plus bytes over bandwidth, with
// the constants in one table (kCosts in cost_model.cpp) whose provenance is the
// measurements of bench/RESULTS.md; bench/allreduce_bench --algo X recalibrates them.
// STRATA_ALLREDUCE_ALGO forces one algorithm (tests, benchmarks), when it is supported.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace strata::collectives {

enum class AllReduceAlgo {
  kShmOneShot,
  kShmChunked,
  kTcpDirect,
  kTcpRing,
  kHierarchical,
  kShmDirect,           // zero-copy two-shot over a shared buffer (shm_direct.h)
  kHierarchicalDirect,  // the same within each host, TCP ring between hosts
};

// Where the data of one AllReduce lives: ordinary memory (staged through the domain's
// slots), or in place inside a shared buffer every local peer has mapped, which the
// zero-copy ("direct") algorithms read straight out of (Communicator::allocateShared).
enum class Placement { kPrivate, kSharedInPlace };

const char* algoName(AllReduceAlgo algo);
// "shm_oneshot", "oneshot", ... -> algo; nullopt for "auto" or an unknown name.
std::optional<AllReduceAlgo> parseAlgo(const std::string& name);
std::vector<std::string> algoNames();

// What the cost model needs to know about a group.
struct TopologySummary {
  int worldSize = 1;
  int numHosts = 1;
  int maxLocalSize = 1;
  bool uniformLocalSize = true;  // every host has the same number of ranks
  bool shmEnabled = true;        // false with STRATA_TRANSPORT=tcp
  bool tcpEnabled = true;        // false when the group has no TCP connections
  size_t shmSlotBytes = 1 << 20;
  size_t chunkBytes = 512 << 10;  // pipelining unit of the chunked shm algorithms
};

// The chunk of the chunked shm algorithms when none is configured: small enough that a
// chunk's reduce-scatter and all-gather stay in the caches shared between cores (512 KiB
// measured 1.4-2.4x faster than 1 MiB at 1-256 MiB, bench/RESULTS.md), smaller still when
// ranks outnumber cores (256 KiB was best with 4 ranks on 2 cores), never above the slot.
size_t defaultChunkBytes(size_t slotBytes, int localSize, int cores);

// The unit shm_direct reduces and pushes at a time when none is configured: small enough
// that its n sources and the result stay in L2 (bench/RESULTS.md, "Zero-copy AllReduce").
size_t defaultDirectBlockBytes();

bool supports(AllReduceAlgo algo, const TopologySummary& topo, size_t numBytes,
              Placement placement = Placement::kPrivate);
double estimateUs(AllReduceAlgo algo, const TopologySummary& topo, size_t numBytes);

struct AlgoChoice {
  AllReduceAlgo algo = AllReduceAlgo::kTcpRing;
  std::string error;  // non-empty when a forced algorithm cannot run on this topology
};
// The cheapest supported algorithm, or `forced` ("auto" = let the model choose). Data in
// place in a shared buffer takes the zero-copy algorithm wherever it can run.
AlgoChoice chooseAllReduce(const TopologySummary& topo, size_t numBytes, const std::string& forced,
                           Placement placement = Placement::kPrivate);

}  // namespace strata::collectives
