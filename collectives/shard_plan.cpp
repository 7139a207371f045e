#include "collectives/shard_plan.h"

#include <algorithm>

namespace strata::collectives {

Range shardOf(size_t count, int parts, int index, size_t alignElems) {
  if (alignElems == 0) alignElems = 1;
  const size_t units = (count + alignElems - 1) / alignElems;
  const size_t per = units / static_cast<size_t>(parts);
  const size_t extra = units % static_cast<size_t>(parts);
  const size_t i = static_cast<size_t>(index);
  const size_t firstUnit = i * per + std::min(i, extra);
  const size_t numUnits = per + (i < extra ? 1 : 0);
  const size_t begin = std::min(count, firstUnit * alignElems);
  const size_t end = std::min(count, (firstUnit + numUnits) * alignElems);
  return Range{begin, end - begin};
}

std::vector<Range> planShards(size_t count, int parts, size_t alignElems) {
  std::vector<Range> shards;
  shards.reserve(static_cast<size_t>(parts));
  for (int i = 0; i < parts; ++i) shards.push_back(shardOf(count, parts, i, alignElems));
  return shards;
}

size_t numChunks(size_t count, size_t chunkElems) {
  return chunkElems == 0 ? 0 : (count + chunkElems - 1) / chunkElems;
}

Range chunkOf(size_t count, size_t chunkElems, size_t index) {
  const size_t begin = std::min(count, index * chunkElems);
  const size_t end = std::min(count, begin + chunkElems);
  return Range{begin, end - begin};
}

namespace {
int mod(int a, int n) { return ((a % n) + n) % n; }
}  // namespace

std::vector<RingStep> planRingReduceScatter(int rank, int worldSize) {
  std::vector<RingStep> steps;
  for (int s = 0; s < worldSize - 1; ++s)
    steps.push_back(RingStep{mod(rank - s, worldSize), mod(rank - s - 1, worldSize)});
  return steps;
}

int ringOwnedShard(int rank, int worldSize) { return mod(rank + 1, worldSize); }

std::vector<RingStep> planRingAllGather(int rank, int worldSize) {
  std::vector<RingStep> steps;
  for (int s = 0; s < worldSize - 1; ++s)
    steps.push_back(RingStep{mod(rank + 1 - s, worldSize), mod(rank - s, worldSize)});
  return steps;
}

}  // namespace strata::collectives
