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

// A piece of a rank's own input that lives outside the collective's buffer (a gradient
// autograd produced and nobody copied into its bucket): elements [offset, offset + count)
// of the input are read from `data`. On the zero-copy paths only the rank itself reads its
// shard of its own part, so the piece's elements inside that shard are read where they
// are; the rest is copied into the buffer before the peers may read it.
struct InputPiece {
  size_t offset = 0;  // elements into the collective's buffer
  size_t count = 0;
  const void* data = nullptr;
};
// Where the rank reads each element of its shard: runs in ascending order that tile
// `shard` exactly, each from a piece (`data`, already advanced to the run's start) or from
// its own part of the buffer (null). Pieces are clipped to the shard; empty ones ignored.
struct SourceRun {
  Range range;
  const void* data = nullptr;
};
// Throws strata::Error naming the piece when a piece of a `count`-element input reaches past
// it, overlaps another piece or has no data (Group checks this before anything runs). Pure.
void checkInputPieces(size_t count, std::vector<InputPiece> pieces);
// Throws like checkInputPieces for overlaps and missing data. Pure.
std::vector<SourceRun> planSourceRuns(Range shard, std::vector<InputPiece> pieces, size_t elemBytes);
// The parts of `pieces` outside `shard` (at most two per piece), which the peers may read
// and so must be copied into the buffer. Pure.
std::vector<InputPiece> piecesOutside(Range shard, const std::vector<InputPiece>& pieces, size_t elemBytes);

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
