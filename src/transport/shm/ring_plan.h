// Pure decisions of the shared-memory links: how big each ring is, how long a wait keeps its
// core, and how a message's bytes are cut into the copies a ring allows (connection.h carries
// them out). Which peers get a shared-memory link at all is the transport registry's choice
// (transport/registry.h).
//
// Vocabulary: a *ring* is a single-producer/single-consumer byte stream of `ringBytes`
// bytes in shared memory; the producer's *head* and the consumer's *tail* count the bytes
// moved since the link was made (they never wrap; positions in the ring are modulo
// ringBytes). A *chunk* is the bytes one copy moves before it is published to the peer.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace strata::transport::shm {

// Bytes of each ring for `localSize` ranks on this host: `requested` when not 0, otherwise
// as big as kP2pRingMaxBytes allows while a rank's rings (one per local peer) stay within
// kP2pRingBudgetBytes; never below kP2pRingMinBytes; always a multiple of the page size.
// 1 MiB: measured faster than 4 MiB for 1-4 MiB messages (p2p_bench: a 4 MiB message in
// 285-520 us against 666-797 us), as the ring and its 256 KiB chunks stay in cache.
constexpr size_t kP2pRingMaxBytes = size_t{1} << 20;
constexpr size_t kP2pRingBudgetBytes = size_t{4} << 20;
constexpr size_t kP2pRingMinBytes = size_t{64} << 10;
size_t p2pRingBytes(int localSize, size_t requested);

// How long a wait on a shared-memory link keeps the core (yielding it to this process's
// other runnable threads) after its short spin, before it sleeps on the doorbell:
// `requestedUs` when >= 0; otherwise kP2pYieldUs when every rank on the host has a core of
// its own (localSize <= cores), and 0 (sleep right after the spin) when ranks share cores,
// where a waiter that keeps its core takes it from a rank with work. Why: waking a
// sleeping waiter cost 130-220 us per message on this VM (p2p_bench --reply-delay-us 200 and
// 2000: one-way 133 and 219 us against 4 us when the receiver spins), paid by every
// pipeline receive that waits for its stage's neighbour, about 2-3 ms of a 170 ms step.
constexpr int64_t kP2pYieldUs = 5000;
int64_t p2pYieldUs(int localSize, int cores, int64_t requestedUs);

// Bytes one copy moves: a quarter of the ring, so the consumer copies one chunk out while
// the producer copies the next in.
size_t p2pChunkBytes(size_t ringBytes);

// A contiguous piece of the ring: [offset, offset + length).
struct RingPiece {
  size_t offset = 0;
  size_t length = 0;
};
// The at most two pieces the stream bytes [position, position + count) occupy in a ring
// of ringBytes (count <= ringBytes): the second is non-empty when they wrap around.
std::array<RingPiece, 2> ringPieces(uint64_t position, size_t count, size_t ringBytes);

// How many bytes the producer may copy now: what is left of the message, bounded by the
// free space (ringBytes - (head - tail)) and the chunk.
size_t bytesToProduce(size_t left, uint64_t head, uint64_t tail, size_t ringBytes, size_t chunkBytes);
// How many bytes the consumer may copy now: what is left, bounded by what has arrived
// (head - tail) and the chunk.
size_t bytesToConsume(size_t left, uint64_t head, uint64_t tail, size_t chunkBytes);

// The copies of a whole message of `messageBytes` (header included) through an empty ring
// whose consumer keeps up: chunk sizes in order (tests and docs; the link decides chunk
// by chunk with bytesToProduce, as the consumer frees space).
std::vector<size_t> chunkPlan(size_t messageBytes, size_t ringBytes);

}  // namespace strata::transport::shm
