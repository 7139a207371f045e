#include "collectives/shm_direct.h"

#include <algorithm>
#include <cstring>

#include "collectives/reduce_kernels.h"
#include "collectives/shard_plan.h"
#include "core/errors.h"

namespace strata::collectives {
namespace {

// Every rank's copy of the data, by local rank (same offset in every part).
struct Parts {
  uint8_t* at[kMaxLocalRanks];
  int n = 0;
  int me = 0;
};

Parts partsOf(const ShmDomain& d, const SharedPlace& place) {
  const SharedRegion& r = *place.region;
  STRATA_CHECK(r.localSize() == d.localSize() && r.localRank() == d.localRank() && r.localSize() <= kMaxLocalRanks,
               "shared buffer ", r.id(), " is mapped by ", r.localSize(), " local ranks (this one ", r.localRank(),
               ") but the domain has ", d.localSize(), " (this one ", d.localRank(), ")");
  Parts parts;
  parts.n = r.localSize();
  parts.me = r.localRank();
  for (int p = 0; p < parts.n; ++p) parts.at[p] = r.part(p) + place.offset;
  return parts;
}

// My shard's sources, after copying the pieces' elements outside it into my part (the
// peers read those after the entry sync).
std::vector<SourceRun> placeOwnPieces(const Parts& parts, Range shard, const std::vector<InputPiece>& pieces,
                                      size_t elem) {
  for (const InputPiece& p : piecesOutside(shard, pieces, elem))
    std::memcpy(parts.at[parts.me] + p.offset * elem, p.data, p.count * elem);
  return planSourceRuns(shard, pieces, elem);
}

// The entry sync: every rank's input is in place, and every rank called the same thing.
void enter(ShmDomain& d, const CollSignature& sig) {
  d.publishSignature(sig);
  d.syncAll(collKindName(sig.kind));
  d.checkSignatures(sig);
}

// My shard of [range): the shard (cache-line aligned) every rank agrees I own.
Range myShard(const Parts& parts, Range range, size_t elem) {
  const Range mine = shardOf(range.count, parts.n, parts.me, shardAlignElems(elem));
  return Range{range.offset + mine.offset, mine.count};
}

// Sums elements [begin, begin + len) of `shard` reading them from every part in ascending
// local-rank order, into my own part. My own operand comes from `runs` (planSourceRuns over
// the shard): a piece of my input outside the buffer, or my part.
void reduceShard(const Parts& parts, Range shard, const std::vector<SourceRun>& runs, size_t begin, size_t len,
                 DType dtype, ReduceOp op, int avgDivisor) {
  const size_t elem = dtypeBytes(dtype);
  const size_t first = shard.offset + begin, last = first + len;
  for (const SourceRun& run : runs) {
    const size_t from = std::max(first, run.range.offset), to = std::min(last, run.range.end());
    if (from >= to) continue;
    const size_t byteOffset = from * elem;
    const void* srcs[kMaxLocalRanks];
    for (int p = 0; p < parts.n; ++p) srcs[p] = parts.at[p] + byteOffset;
    if (run.data) srcs[parts.me] = static_cast<const uint8_t*>(run.data) + (from - run.range.offset) * elem;
    reduceMany(op, dtype, parts.at[parts.me] + byteOffset, srcs, parts.n, to - from, avgDivisor);
  }
}

// Copies elements [begin, begin + len) of my shard from my part into every peer's part.
// Peers read only their own shards after the entry sync, so nobody reads what this writes.
void pushToPeers(const Parts& parts, Range shard, size_t begin, size_t len, size_t elem) {
  const size_t byteOffset = (shard.offset + begin) * elem;
  // Start after myself, so the n ranks do not all write rank 0's part first.
  for (int k = 1; k < parts.n; ++k)
    std::memcpy(parts.at[(parts.me + k) % parts.n] + byteOffset, parts.at[parts.me] + byteOffset, len * elem);
}

}  // namespace

void shmDirectAllReduce(ShmDomain& d, const CollSignature& sig, const SharedPlace& place, size_t count,
                        DType dtype, ReduceOp op, int avgDivisor, size_t blockBytes,
                        const std::vector<InputPiece>& ownPieces) {
  const Parts parts = partsOf(d, place);
  const size_t elem = dtypeBytes(dtype);
  const size_t blockElems = std::max<size_t>(1, blockBytes / elem);
  const Range shard = myShard(parts, Range{0, count}, elem);
  const std::vector<SourceRun> runs = placeOwnPieces(parts, shard, ownPieces, elem);
  enter(d, sig);
  if (count == 0) return;
  // Each block is pushed while it is still in this core's cache.
  for (size_t begin = 0; begin < shard.count; begin += blockElems) {
    const size_t len = std::min(blockElems, shard.count - begin);
    reduceShard(parts, shard, runs, begin, len, dtype, op, avgDivisor);
    pushToPeers(parts, shard, begin, len, elem);
  }
  // Every shard has reached every part; nobody touches my part after this.
  d.syncAll("allreduce (shards pushed)");
}

void shmDirectReduceScatter(ShmDomain& d, const CollSignature& sig, const SharedPlace& place, void* out, Range shard,
                            DType dtype, ReduceOp op, int avgDivisor, const std::vector<InputPiece>& ownPieces) {
  const Parts parts = partsOf(d, place);
  const size_t elem = dtypeBytes(dtype);
  const Range expected = myShard(parts, Range{0, sig.count}, elem);
  STRATA_CHECK(shard.offset == expected.offset && shard.count == expected.count, "reduce_scatter_shared: shard [",
               shard.offset, ", +", shard.count, ") of local rank ", parts.me, " is not the zero-copy shard [",
               expected.offset, ", +", expected.count, ")");
  const std::vector<SourceRun> runs = placeOwnPieces(parts, shard, ownPieces, elem);
  enter(d, sig);
  for (const SourceRun& run : runs) {
    const size_t byteOffset = run.range.offset * elem;
    const void* srcs[kMaxLocalRanks];
    for (int p = 0; p < parts.n; ++p) srcs[p] = parts.at[p] + byteOffset;
    if (run.data) srcs[parts.me] = run.data;
    reduceMany(op, dtype, static_cast<uint8_t*>(out) + byteOffset, srcs, parts.n, run.range.count, avgDivisor);
  }
  // Also with an empty shard (small counts): when any rank returns, every shard is written
  // and nobody reads the parts any more.
  d.syncAll("reduce_scatter_shared (shards written)");
}

void hierarchicalDirectAllReduce(ShmDomain& d, LinkSet& cross, const CollSignature& sig, const SharedPlace& place,
                                 size_t count, DType dtype, ReduceOp op, int avgDivisor, Scratch& ringScratch,
                                 const std::vector<InputPiece>& ownPieces) {
  const Parts parts = partsOf(d, place);
  const size_t elem = dtypeBytes(dtype);
  const Range shard = myShard(parts, Range{0, count}, elem);
  const std::vector<SourceRun> runs = placeOwnPieces(parts, shard, ownPieces, elem);
  enter(d, sig);
  if (count == 0) return;
  // Within the host, avg is a sum: the division by the world size happens once, between hosts.
  reduceShard(parts, shard, runs, 0, shard.count, dtype,
              op == ReduceOp::kAvg ? ReduceOp::kSum : op, 1);
  uint8_t* mine = parts.at[parts.me] + shard.offset * elem;
  if (cross.size() > 1) {
    CollSignature crossSig = sig;
    crossSig.count = shard.count;
    tcpAllReduceRing(cross, crossSig, mine, mine, shard.count, dtype, op, avgDivisor, ringScratch);
  } else if (op == ReduceOp::kAvg) {
    finishAvg(dtype, mine, shard.count, avgDivisor);
  }
  pushToPeers(parts, shard, 0, shard.count, elem);
  d.syncAll("hierarchical allreduce (shards pushed)");
}

}  // namespace strata::collectives
