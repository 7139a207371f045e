#include "transport/shm/ring_plan.h"

#include <algorithm>

namespace strata::transport::shm {
namespace {

constexpr size_t kRingPageBytes = 4096;

}  // namespace

int64_t p2pYieldUs(int localSize, int cores, int64_t requestedUs) {
  if (requestedUs >= 0) return requestedUs;
  return localSize <= cores ? kP2pYieldUs : 0;
}

size_t p2pRingBytes(int localSize, size_t requested) {
  size_t bytes = requested;
  if (bytes == 0) {
    const size_t peers = static_cast<size_t>(std::max(1, localSize - 1));
    bytes = std::min(kP2pRingMaxBytes, kP2pRingBudgetBytes / peers);
  }
  bytes = std::max(bytes, kP2pRingMinBytes);
  return bytes / kRingPageBytes * kRingPageBytes;
}

size_t p2pChunkBytes(size_t ringBytes) { return std::max<size_t>(ringBytes / 4, 1); }

std::array<RingPiece, 2> ringPieces(uint64_t position, size_t count, size_t ringBytes) {
  const size_t offset = static_cast<size_t>(position % ringBytes);
  const size_t first = std::min(count, ringBytes - offset);
  return {RingPiece{offset, first}, RingPiece{0, count - first}};
}

size_t bytesToProduce(size_t left, uint64_t head, uint64_t tail, size_t ringBytes, size_t chunkBytes) {
  const size_t used = static_cast<size_t>(head - tail);
  const size_t free = used < ringBytes ? ringBytes - used : 0;
  return std::min({left, free, chunkBytes});
}

size_t bytesToConsume(size_t left, uint64_t head, uint64_t tail, size_t chunkBytes) {
  return std::min({left, static_cast<size_t>(head - tail), chunkBytes});
}

std::vector<size_t> chunkPlan(size_t messageBytes, size_t ringBytes) {
  std::vector<size_t> chunks;
  const size_t chunk = p2pChunkBytes(ringBytes);
  for (size_t done = 0; done < messageBytes;) {
    // The consumer has taken everything produced so far (tail == head).
    const size_t n = bytesToProduce(messageBytes - done, done, done, ringBytes, chunk);
    chunks.push_back(n);
    done += n;
  }
  return chunks;
}

}  // namespace strata::transport::shm
