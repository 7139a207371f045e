// The identity of one collective call, compared across ranks so that mismatched calls
// (different op, dtype, count or root) fail with a clear error on every rank instead of
// producing wrong data or a hang.
#pragma once

#include <cstdint>
#include <string>

#include "strata/types.h"

namespace strata::collectives {

// The first five in the order of flight::Op's first values (the communicator's flight
// recording casts those; the later ones map to their own flight::Op, flightOpOf).
// kReduceScatterShared: Group::reduceScatterShared (shm_direct.h), its own kind so that a
// rank calling it while a peer calls an allreduce of the same data is a mismatch.
enum class CollKind : uint8_t {
  kAllReduce,
  kBroadcast,
  kAllGather,
  kReduceScatter,
  kBarrier,
  kAllocateShared,
  kReduceScatterShared,
};
const char* collKindName(CollKind kind);

// Plain data: lives in shared memory and travels in message tags.
struct CollSignature {
  uint64_t seq = 0;     // per-group sequence number, equal on all ranks
  uint64_t count = 0;   // elements (per rank for allgather / reduce-scatter)
  int32_t root = -1;    // broadcast root, -1 otherwise
  CollKind kind = CollKind::kBarrier;
  DType dtype = DType::kUInt8;
  ReduceOp op = ReduceOp::kSum;
  uint8_t pad = 0;
  // An in-place allreduce of data inside a shared buffer (Communicator::allocateShared)
  // names the buffer and the byte offset: the zero-copy algorithms read the peers' copies
  // at that offset, so every rank must pass the same place. 0 = ordinary memory.
  uint64_t sharedBuffer = 0;
  uint64_t sharedOffset = 0;
};
static_assert(sizeof(CollSignature) == 40, "CollSignature is shared between processes");

bool operator==(const CollSignature& a, const CollSignature& b);
inline bool operator!=(const CollSignature& a, const CollSignature& b) { return !(a == b); }

// "allreduce seq=41 float32 sum count=1024" (root only for broadcast; " in shared buffer
// 3 at byte 4096" for data inside a shared buffer).
std::string describe(const CollSignature& sig);

// A 64-bit tag that differs whenever any field differs (FNV-1a over the fields): the
// TCP collectives put it in every message header, so a mismatch is caught on receipt.
uint64_t signatureTag(const CollSignature& sig);

}  // namespace strata::collectives
