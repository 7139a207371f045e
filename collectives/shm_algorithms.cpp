#include "collectives/shm_algorithms.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "collectives/reduce_kernels.h"
#include "collectives/shard_plan.h"
#include "core/errors.h"

namespace strata::collectives {
namespace {



// Runs before the first sync of a call: publish, sync, compare signatures.
void firstSync(ShmDomain& d, const CollSignature& sig) {
  d.syncAll(collKindName(sig.kind));
  d.checkSignatures(sig);
}

}  // namespace

void shmAllReduceOneShot(ShmDomain& d, const CollSignature& sig, const void* in, void* out,
                         size_t count, DType dtype, ReduceOp op, int avgDivisor) {
  const size_t elem = dtypeBytes(dtype);
  STRATA_CHECK(count * elem <= d.slotBytes(), "one-shot allreduce of ", count * elem,
               " bytes exceeds the shm slot of ", d.slotBytes(), " bytes");
  const int n = d.localSize();
  STRATA_CHECK(n <= kMaxLocalRanks, "too many local ranks: ", n);
  const int b = d.nextBuffer();
  std::memcpy(d.slot(d.localRank(), b), in, count * elem);
  d.publishSignature(sig);
  firstSync(d, sig);
  const void* srcs[kMaxLocalRanks];
  for (int p = 0; p < n; ++p) srcs[p] = d.slot(p, b);
  reduceMany(op, dtype, out, srcs, n, count, avgDivisor);
}

void shmAllReduceChunked(ShmDomain& d, const CollSignature& sig, const void* in, void* out,
                         size_t count, DType dtype, ReduceOp op, int avgDivisor,
                         size_t chunkBytes) {
  const size_t elem = dtypeBytes(dtype);
  const int n = d.localSize();
  const int me = d.localRank();
  STRATA_CHECK(n <= kMaxLocalRanks, "too many local ranks: ", n);
  const size_t chunkElems = std::max<size_t>(1, std::min(chunkBytes, d.slotBytes()) / elem);
  const auto* src = static_cast<const uint8_t*>(in);
  auto* dst = static_cast<uint8_t*>(out);
  d.publishSignature(sig);
  const size_t chunks = std::max<size_t>(1, numChunks(count, chunkElems));
  const void* srcs[kMaxLocalRanks];
  for (size_t c = 0; c < chunks; ++c) {
    const Range chunk = chunkOf(count, chunkElems, c);
    const int b = d.nextBuffer();
    std::memcpy(d.slot(me, b), src + chunk.offset * elem, chunk.count * elem);
    if (c == 0) {
      firstSync(d, sig);
    } else {
      d.syncAll("allreduce");
    }
    // Reduce-scatter: my shard of this chunk, from every rank's slot, in rank order.
    const Range mine = shardOf(chunk.count, n, me, shardAlignElemsOf(dtype));
    for (int p = 0; p < n; ++p) srcs[p] = d.slot(p, b) + mine.offset * elem;
    uint8_t* myShard = d.slot(me, b) + mine.offset * elem;
    reduceMany(op, dtype, myShard, srcs, n, mine.count, avgDivisor);
    std::memcpy(dst + (chunk.offset + mine.offset) * elem, myShard, mine.count * elem);
    d.syncAll("allreduce");
    // All-gather: the peers' reduced shards straight out of their slots.
    for (int p = 0; p < n; ++p) {
      if (p == me) continue;
      const Range theirs = shardOf(chunk.count, n, p, shardAlignElemsOf(dtype));
      std::memcpy(dst + (chunk.offset + theirs.offset) * elem, d.slot(p, b) + theirs.offset * elem,
                  theirs.count * elem);
    }
  }
}

void shmBroadcast(ShmDomain& d, const CollSignature& sig, void* data, size_t count, DType dtype,
                  int rootLocal) {
  const size_t elem = dtypeBytes(dtype);
  const size_t chunkElems = std::max<size_t>(1, d.slotBytes() / elem);
  auto* bytes = static_cast<uint8_t*>(data);
  const bool isRoot = d.localRank() == rootLocal;
  d.publishSignature(sig);
  const size_t chunks = std::max<size_t>(1, numChunks(count, chunkElems));
  for (size_t c = 0; c < chunks; ++c) {
    const Range chunk = chunkOf(count, chunkElems, c);
    const int b = d.nextBuffer();
    if (isRoot) std::memcpy(d.slot(rootLocal, b), bytes + chunk.offset * elem, chunk.count * elem);
    if (c == 0) {
      firstSync(d, sig);
    } else {
      d.syncAll("broadcast");
    }
    if (!isRoot) std::memcpy(bytes + chunk.offset * elem, d.slot(rootLocal, b), chunk.count * elem);
  }
}

void shmAllGather(ShmDomain& d, const CollSignature& sig, const void* in, void* out,
                  size_t countPerRank, DType dtype) {
  const size_t elem = dtypeBytes(dtype);
  const int n = d.localSize();
  const size_t chunkElems = std::max<size_t>(1, d.slotBytes() / elem);
  const auto* src = static_cast<const uint8_t*>(in);
  auto* dst = static_cast<uint8_t*>(out);
  d.publishSignature(sig);
  const size_t chunks = std::max<size_t>(1, numChunks(countPerRank, chunkElems));
  for (size_t c = 0; c < chunks; ++c) {
    const Range chunk = chunkOf(countPerRank, chunkElems, c);
    const int b = d.nextBuffer();
    std::memcpy(d.slot(d.localRank(), b), src + chunk.offset * elem, chunk.count * elem);
    if (c == 0) {
      firstSync(d, sig);
    } else {
      d.syncAll("allgather");
    }
    for (int p = 0; p < n; ++p) {
      std::memcpy(dst + (static_cast<size_t>(p) * countPerRank + chunk.offset) * elem,
                  d.slot(p, b), chunk.count * elem);
    }
  }
}

void shmReduceScatter(ShmDomain& d, const CollSignature& sig, const void* in, void* out,
                      size_t countPerRank, DType dtype, ReduceOp op, int avgDivisor) {
  const size_t elem = dtypeBytes(dtype);
  const int n = d.localSize();
  const int me = d.localRank();
  STRATA_CHECK(n <= kMaxLocalRanks, "too many local ranks: ", n);
  // The slot holds one sub-chunk per destination rank.
  const size_t chunkElems = std::max<size_t>(1, d.slotBytes() / (elem * static_cast<size_t>(n)));
  const auto* src = static_cast<const uint8_t*>(in);
  auto* dst = static_cast<uint8_t*>(out);
  d.publishSignature(sig);
  const size_t chunks = std::max<size_t>(1, numChunks(countPerRank, chunkElems));
  const void* srcs[kMaxLocalRanks];
  for (size_t c = 0; c < chunks; ++c) {
    const Range chunk = chunkOf(countPerRank, chunkElems, c);
    const int b = d.nextBuffer();
    for (int dest = 0; dest < n; ++dest) {
      std::memcpy(d.slot(me, b) + static_cast<size_t>(dest) * chunkElems * elem,
                  src + (static_cast<size_t>(dest) * countPerRank + chunk.offset) * elem,
                  chunk.count * elem);
    }
    if (c == 0) {
      firstSync(d, sig);
    } else {
      d.syncAll("reduce_scatter");
    }
    for (int p = 0; p < n; ++p) srcs[p] = d.slot(p, b) + static_cast<size_t>(me) * chunkElems * elem;
    reduceMany(op, dtype, dst + chunk.offset * elem, srcs, n, chunk.count, avgDivisor);
  }
}

void shmBarrier(ShmDomain& d, const CollSignature& sig) {
  d.publishSignature(sig);
  firstSync(d, sig);
}

}  // namespace strata::collectives
