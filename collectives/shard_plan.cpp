#include "collectives/shard_plan.h"

#include <algorithm>
#include <cstdint>

#include "core/errors.h"

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

namespace {
// `p`'s elements inside [from, to), its data advanced to match.
InputPiece clip(const InputPiece& p, size_t from, size_t to, size_t elemBytes) {
  const size_t begin = std::max(p.offset, from), end = std::min(p.offset + p.count, to);
  if (begin >= end) return InputPiece{begin, 0, nullptr};
  return InputPiece{begin, end - begin, static_cast<const uint8_t*>(p.data) + (begin - p.offset) * elemBytes};
}
}  // namespace

void checkInputPieces(size_t count, std::vector<InputPiece> pieces) {
  for (const InputPiece& p : pieces)
    STRATA_CHECK(p.offset <= count && p.count <= count - p.offset, "input piece [", p.offset, ", +", p.count,
                 ") reaches past the input's ", count, " elements");
  planSourceRuns(Range{0, count}, std::move(pieces), 1);
}

std::vector<SourceRun> planSourceRuns(Range shard, std::vector<InputPiece> pieces, size_t elemBytes) {
  pieces.erase(std::remove_if(pieces.begin(), pieces.end(), [](const InputPiece& p) { return p.count == 0; }),
               pieces.end());
  std::sort(pieces.begin(), pieces.end(), [](const InputPiece& a, const InputPiece& b) { return a.offset < b.offset; });
  std::vector<SourceRun> runs;
  size_t next = shard.offset, previousEnd = 0;
  for (const InputPiece& p : pieces) {
    STRATA_CHECK(p.data != nullptr, "input piece [", p.offset, ", +", p.count, ") has no data");
    STRATA_CHECK(p.offset >= previousEnd, "input piece [", p.offset, ", +", p.count,
                 ") overlaps the piece before it (which ends at ", previousEnd, ")");
    previousEnd = p.offset + p.count;
    const InputPiece inside = clip(p, shard.offset, shard.end(), elemBytes);
    if (inside.count == 0) continue;
    if (inside.offset > next) runs.push_back(SourceRun{Range{next, inside.offset - next}, nullptr});
    runs.push_back(SourceRun{Range{inside.offset, inside.count}, inside.data});
    next = inside.offset + inside.count;
  }
  if (next < shard.end()) runs.push_back(SourceRun{Range{next, shard.end() - next}, nullptr});
  return runs;
}

std::vector<InputPiece> piecesOutside(Range shard, const std::vector<InputPiece>& pieces, size_t elemBytes) {
  std::vector<InputPiece> out;
  for (const InputPiece& p : pieces) {
    for (const InputPiece& part : {clip(p, 0, shard.offset, elemBytes), clip(p, shard.end(), SIZE_MAX, elemBytes)})
      if (part.count > 0) out.push_back(part);
  }
  return out;
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
