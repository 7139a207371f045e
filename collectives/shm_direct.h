// Zero-copy AllReduce: the data lives, in place, in a shared buffer (shared_buffers.h)
// that every local rank maps, so ranks read each other's copies directly instead of
// staging them through the domain's slots.
//
// shm_direct (one host): after an entry sync (every rank's input is in place), each rank
// sums *its shard* (1/n, cache-line aligned) reading it from all n parts in ascending local
// rank order, writes the sum into its own part and pushes it into every peer's part, block
// by block while it is in cache; a final sync tells every rank that all shards have
// arrived and nobody touches its part any more. No rank reads what another writes after
// the entry sync (each reads only its own shard), so two syncs suffice at any size. Per
// rank and byte: read 1, write 1 (memcpy's traffic), against the staged algorithms' extra
// copy-in and the all-gather's extra reads. Every element is reduced once, by its owner, in
// the same operand order, so every rank's result is bitwise identical.
//
// hierarchical_direct (several hosts): the same reduction of my shard within the host, a
// TCP ring between the hosts over it (in place in my part), then the push and the final
// sync.
//
// shm_reduce_scatter (Group::reduceScatterShared, one host): shm_direct without the push.
// After the same entry sync each rank reduces its shard out of the n parts (same operand
// order) straight into the caller's `out`, which may be its own part or memory that all
// local ranks share and fill together (part(0) of another buffer); an exit sync then tells
// every rank that every shard is written and that nobody reads the parts any more. Per
// rank and byte of its shard: read n, write 1 (no copies to the peers).
//
// Own pieces (InputPiece, shard_plan.h): parts of this rank's input inside its own shard
// that live outside the buffer (a gradient not copied into its bucket). Each rank reads only
// its own shard of its own part, so it reads those elements from the pieces instead; the
// result still goes to its part (or `out`). Saves the copy-in: read 1, write 1 per element.
//
// None needs a scratch buffer. Both publish the signature (with the buffer id and
// offset) before the entry sync and check the peers' after it, and throw like the staged
// algorithms on mismatch, timeout, abort or a dead peer.
#pragma once

#include <cstddef>
#include <vector>

#include "collectives/shard_plan.h"
#include "collectives/shared_buffers.h"
#include "collectives/shm_domain.h"
#include "collectives/signature.h"
#include "collectives/tcp_algorithms.h"

namespace strata::collectives {

// `place` is the data's place in a region mapped by every rank of `d` (same offset on all).
// `blockBytes`: the unit reduced and pushed at a time (cache blocking; no sync per block).
void shmDirectAllReduce(ShmDomain& d, const CollSignature& sig, const SharedPlace& place, size_t count,
                        DType dtype, ReduceOp op, int avgDivisor, size_t blockBytes,
                        const std::vector<InputPiece>& ownPieces = {});
// `shard`: this rank's shard (sharedShardOf by group rank), whose part index must equal
// the group rank (true on one host: local ranks are the group ranks in order).
void shmDirectReduceScatter(ShmDomain& d, const CollSignature& sig, const SharedPlace& place, void* out, Range shard,
                            DType dtype, ReduceOp op, int avgDivisor, const std::vector<InputPiece>& ownPieces = {});
void hierarchicalDirectAllReduce(ShmDomain& d, LinkSet& cross, const CollSignature& sig, const SharedPlace& place,
                                 size_t count, DType dtype, ReduceOp op, int avgDivisor, Scratch& ringScratch,
                                 const std::vector<InputPiece>& ownPieces = {});

}  // namespace strata::collectives
