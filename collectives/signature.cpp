#include "collectives/signature.h"

#include <c10/util/StringUtil.h>

namespace strata::collectives {

const char* collKindName(CollKind kind) {
  switch (kind) {
    case CollKind::kAllReduce: return "allreduce";
    case CollKind::kBroadcast: return "broadcast";
    case CollKind::kAllGather: return "allgather";
    case CollKind::kReduceScatter: return "reduce_scatter";
    case CollKind::kBarrier: return "barrier";
    case CollKind::kAllocateShared: return "allocate_shared";
    case CollKind::kReduceScatterShared:
      return "reduce_scatter_shared";
  }
  return "?";
}

bool operator==(const CollSignature& a, const CollSignature& b) {
  return a.seq == b.seq && a.count == b.count && a.root == b.root && a.kind == b.kind &&
         a.dtype == b.dtype && a.op == b.op && a.sharedBuffer == b.sharedBuffer &&
         a.sharedOffset == b.sharedOffset;
}

std::string describe(const CollSignature& sig) {
  std::string text = c10::str(collKindName(sig.kind), " seq=", sig.seq);
  if (sig.kind == CollKind::kBarrier || sig.kind == CollKind::kAllocateShared) return text;
  text += c10::str(" ", dtypeName(sig.dtype));
  if (sig.kind == CollKind::kAllReduce || sig.kind == CollKind::kReduceScatter ||
      sig.kind == CollKind::kReduceScatterShared)
    text += c10::str(" ", reduceOpName(sig.op));
  text += c10::str(" count=", sig.count);
  if (sig.kind == CollKind::kBroadcast) text += c10::str(" root=", sig.root);
  if (sig.sharedBuffer != 0) text += c10::str(" in shared buffer ", sig.sharedBuffer, " at byte ", sig.sharedOffset);
  return text;
}

uint64_t signatureTag(const CollSignature& sig) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a offset basis
  auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ull;  // FNV prime
    }
  };
  mix(sig.seq);
  mix(sig.count);
  mix(static_cast<uint64_t>(static_cast<int64_t>(sig.root)));
  mix(static_cast<uint64_t>(sig.kind) | static_cast<uint64_t>(sig.dtype) << 8 |
      static_cast<uint64_t>(sig.op) << 16);
  mix(sig.sharedBuffer);
  mix(sig.sharedOffset);
  return h;
}

}  // namespace strata::collectives
