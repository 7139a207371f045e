// Collectives over a ShmDomain: every rank stages its data in its own slot and reads
// its peers' slots directly (no per-call allocation, no system call on the fast path).
//
// AllReduce, one-shot (small messages; 1 sync): copy the input into my slot, sync, and
// every rank reduces all n slots into its output in rank order (redundant reduction,
// the fewest synchronisations). Bytes read per rank: n*S.
//
// AllReduce, chunked (large messages; 2 syncs per chunk): per chunk, copy into my slot,
// sync, reduce *my shard* (1/n of the chunk) reading all n slots, writing it into my slot
// and my output, sync, copy the other n-1 reduced shards out of the peers' slots: a
// reduce-scatter plus all-gather in which each byte crosses the memory system a minimal
// number of times. Chunks are sized to stay in L2/L3.
//
// Broadcast / AllGather / ReduceScatter: one sync per chunk. Barrier: one sync.
//
// Every function publishes the call's signature before the first sync and checks the
// peers' after it; all are blocking and throw on mismatch, timeout, abort or dead peer.
// The avg divisor is the group size (`avgDivisor`), which differs from the domain's size
// when the domain is one host of a hierarchical group.
#pragma once

#include <cstddef>

#include "collectives/shm_domain.h"
#include "collectives/signature.h"

namespace strata::collectives {

void shmAllReduceOneShot(ShmDomain& d, const CollSignature& sig, const void* in, void* out,
                         size_t count, DType dtype, ReduceOp op, int avgDivisor);
void shmAllReduceChunked(ShmDomain& d, const CollSignature& sig, const void* in, void* out,
                         size_t count, DType dtype, ReduceOp op, int avgDivisor, size_t chunkBytes);
void shmBroadcast(ShmDomain& d, const CollSignature& sig, void* data, size_t count, DType dtype,
                  int rootLocal);
// out holds localSize blocks of countPerRank elements, in local-rank order.
void shmAllGather(ShmDomain& d, const CollSignature& sig, const void* in, void* out,
                  size_t countPerRank, DType dtype);
// in holds localSize blocks of countPerRank elements; out gets this rank's reduced block.
void shmReduceScatter(ShmDomain& d, const CollSignature& sig, const void* in, void* out,
                      size_t countPerRank, DType dtype, ReduceOp op, int avgDivisor);
void shmBarrier(ShmDomain& d, const CollSignature& sig);

}  // namespace strata::collectives
