// Pure index math shared by every algorithm: how a buffer is cut into shards (one per
// rank, reduced by that rank) and chunks (the unit that moves through a staging slot),
// and the ring schedule. No I/O; unit-tested on its own (tests/collectives/shard_plan_test).
//
// Vocabulary: a *shard* is one rank's share of a buffer (1/n); a *chunk* is a piece of
// the buffer small enough for one shared-memory staging slot; counts are in elements.
#pragma once

#include <cstddef>
#include <vector>

#include "strata/types.h"

namespace strata::collectives {

// Shards start on cache-line boundaries so two ranks never write the same line.
constexpr size_t kShardAlignBytes = 64;
inline size_t shardAlignElems(size_t elemBytes) {
  return elemBytes >= kShardAlignBytes ? 1 : kShardAlignBytes / elemBytes;
}
inline size_t shardAlignElemsOf(DType dtype) { return shardAlignElems(dtypeBytes(dtype)); }

struct Range {
  size_t offset = 0;  // elements
  size_t count = 0;   // elements
  size_t end() const { return offset + count; }
};

// Shard `index` of `parts` contiguous shards covering [0, count). Boundaries fall on
// multiples of alignElems (except the end); sizes differ by at most one alignment unit;
// trailing shards may be empty when count is small.
Range shardOf(size_t count, int parts, int index, size_t alignElems);
std::vector<Range> planShards(size_t count, int parts, size_t alignElems);
// Group rank `rank`'s shard of `count` elements of `dtype` among `groupSize` ranks: the
// shard shm_direct's rank reduces, which Group::reduceScatterShared writes and
// Group::sharedShard reports (one definition, so the two cannot drift apart).
inline Range sharedShardOf(size_t count, int groupSize, int rank, DType dtype) {
  return shardOf(count, groupSize, rank, shardAlignElemsOf(dtype));
}

// Chunk `index` of ceil(count / chunkElems) chunks of at most chunkElems elements.
size_t numChunks(size_t count, size_t chunkElems);
Range chunkOf(size_t count, size_t chunkElems, size_t index);

// One step of a ring reduce-scatter or all-gather over n ranks: send shard sendShard to
// the right neighbour while receiving shard recvShard from the left neighbour.
struct RingStep {
  int sendShard = 0;
  int recvShard = 0;
};
// Reduce-scatter: after the n-1 steps, `rank` holds the fully reduced shard
// ringOwnedShard(rank, n). All-gather: then circulates the reduced shards.
std::vector<RingStep> planRingReduceScatter(int rank, int worldSize);
std::vector<RingStep> planRingAllGather(int rank, int worldSize);
int ringOwnedShard(int rank, int worldSize);

}  // namespace strata::collectives
