// Runs a function on worldSize threads, one per rank, each with its own Communicator
// built over an in-memory HashStore and real transports (shared memory and/or loopback
// TCP). Rethrows the first rank failure on the test thread.
#pragma once

#include <functional>
#include <string>

#include "collectives/communicator.h"

namespace strata::testing {

enum class TransportKind { kShm, kTcp, kHierarchical };
const char* transportKindName(TransportKind kind);

struct HarnessOptions {
  TransportKind kind = TransportKind::kShm;
  int numHosts = 1;              // pretend hosts (ranks split in contiguous blocks)
  std::string allreduceAlgo = "auto";
  std::chrono::milliseconds timeout{60000};
  size_t shmSlotBytes = 1 << 20;
  size_t directBlockBytes = 0;   // 0: the communicator's default
  bool connectTcp = true;        // shm tests can skip the TCP mesh
  // Changes one rank's options before its communicator is created (e.g. a flight recorder).
  std::function<void(int rank, collectives::CommOptions&)> adjust;
};

// Each thread's rank tag is set to "[r<rank>/<worldSize>]".
void runRanks(int worldSize, const HarnessOptions& opts,
              const std::function<void(collectives::Communicator&)>& fn);

}  // namespace strata::testing
