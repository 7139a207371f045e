#include "collectives/hierarchical_allreduce.h"

#include <algorithm>
#include <cstring>

#include "collectives/reduce_kernels.h"
#include "collectives/shard_plan.h"
#include "core/errors.h"

namespace strata::collectives {
namespace {



}  // namespace

void hierarchicalAllReduce(ShmDomain& d, LinkSet& cross, const CollSignature& sig, const void* in,
                           void* out, size_t count, DType dtype, ReduceOp op, int avgDivisor,
                           size_t chunkBytes, Scratch& packed, Scratch& ringScratch) {
  const size_t elem = dtypeBytes(dtype);
  const int n = d.localSize();
  const int me = d.localRank();
  STRATA_CHECK(n <= kMaxLocalRanks, "too many local ranks: ", n);
  const size_t chunkElems = std::max<size_t>(1, std::min(chunkBytes, d.slotBytes()) / elem);
  const size_t chunks = std::max<size_t>(1, numChunks(count, chunkElems));
  const auto* src = static_cast<const uint8_t*>(in);
  auto* dst = static_cast<uint8_t*>(out);
  // Within the host, avg is a sum: the division by the world size happens once, between hosts.
  const ReduceOp localOp = op == ReduceOp::kAvg ? ReduceOp::kSum : op;

  // 1. Local reduce-scatter, packing my shard of every chunk contiguously.
  size_t myTotal = 0;
  for (size_t c = 0; c < chunks; ++c) myTotal += shardOf(chunkOf(count, chunkElems, c).count, n, me, shardAlignElemsOf(dtype)).count;
  if (packed.size() < myTotal * elem) packed.resize(myTotal * elem);
  d.publishSignature(sig);
  const void* srcs[kMaxLocalRanks];
  size_t packedOffset = 0;
  for (size_t c = 0; c < chunks; ++c) {
    const Range chunk = chunkOf(count, chunkElems, c);
    const int b = d.nextBuffer();
    std::memcpy(d.slot(me, b), src + chunk.offset * elem, chunk.count * elem);
    d.syncAll("hierarchical allreduce");
    if (c == 0) d.checkSignatures(sig);
    const Range mine = shardOf(chunk.count, n, me, shardAlignElemsOf(dtype));
    for (int p = 0; p < n; ++p) srcs[p] = d.slot(p, b) + mine.offset * elem;
    reduceMany(localOp, dtype, packed.data() + packedOffset * elem, srcs, n, mine.count, 1);
    packedOffset += mine.count;
  }

  // 2. Between hosts: the same shards of every host, reduced over TCP.
  CollSignature crossSig = sig;
  crossSig.count = myTotal;
  if (cross.size() > 1) {
    tcpAllReduceRing(cross, crossSig, packed.data(), packed.data(), myTotal, dtype, op, avgDivisor,
                     ringScratch);
  } else if (op == ReduceOp::kAvg) {
    finishAvg(dtype, packed.data(), myTotal, avgDivisor);
  }

  // 3. Local all-gather of the reduced shards.
  packedOffset = 0;
  for (size_t c = 0; c < chunks; ++c) {
    const Range chunk = chunkOf(count, chunkElems, c);
    const int b = d.nextBuffer();
    const Range mine = shardOf(chunk.count, n, me, shardAlignElemsOf(dtype));
    std::memcpy(d.slot(me, b) + mine.offset * elem, packed.data() + packedOffset * elem, mine.count * elem);
    packedOffset += mine.count;
    d.syncAll("hierarchical allreduce");
    for (int p = 0; p < n; ++p) {
      const Range theirs = shardOf(chunk.count, n, p, shardAlignElemsOf(dtype));
      std::memcpy(dst + (chunk.offset + theirs.offset) * elem, d.slot(p, b) + theirs.offset * elem,
                  theirs.count * elem);
    }
  }
}

}  // namespace strata::collectives
