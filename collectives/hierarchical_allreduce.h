// AllReduce across hosts, each with several ranks (the idea behind SageMaker's balanced
// fusion buffers and Fairring):
//   1. within the host, a chunked shared-memory reduce-scatter: local rank l ends with
//      the host's sum of its shard of every chunk;
//   2. between hosts, local rank l runs a TCP ring AllReduce of its (packed) shards with
//      the ranks of local index l on the other hosts: every host link carries S/L bytes
//      per rank, in parallel over the L local ranks;
//   3. within the host, a shared-memory all-gather of the reduced shards.
// Requires the same number of ranks on every host. Blocking.
#pragma once

#include "collectives/shm_domain.h"
#include "collectives/tcp_algorithms.h"

namespace strata::collectives {

void hierarchicalAllReduce(ShmDomain& local, LinkSet& crossHost, const CollSignature& sig,
                           const void* in, void* out, size_t count, DType dtype, ReduceOp op,
                           int avgDivisor, size_t chunkBytes, Scratch& packed, Scratch& ringScratch);

}  // namespace strata::collectives
