// Symmetric shared buffers: one allocation per call of Communicator::allocateShared, in
// which every local rank of the group owns a part of the same size and maps every peer's
// part, so collectives on data inside it can read the peers' copies directly.
//
// Layout of one allocation (its own POSIX shm segment, created by local rank 0, unlinked
// as soon as every local rank has mapped it, so nothing outlives the processes):
//
//   [part of local rank 0][part of local rank 1]...   each partBytes, page aligned
//
// Each owner pre-faults its own part (first touch places the pages near it) and every rank
// populates its page tables for the peers' parts at allocation, so no collective takes a
// page fault. Without local peers (one rank per host, or STRATA_TRANSPORT=tcp) an
// allocation is private anonymous memory with the same interface.
//
// Lifetime: a region lives while someone holds it (the user's handle, or a collective
// running on it); unmapping is local and never blocks. The memory returns to the system
// when every local rank has unmapped it.
//
// Threading: regions are immutable after creation; SharedRegistry is safe to use from any
// thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace strata::collectives {

class ShmDomain;

class SharedRegion {
 public:
  // Private memory (no local peers).
  static std::shared_ptr<SharedRegion> createPrivate(uint64_t id, size_t numBytes);
  // Collective over the domain's local ranks, which must pass the same id and size.
  static std::shared_ptr<SharedRegion> createShared(ShmDomain& domain, uint64_t id, size_t numBytes);
  ~SharedRegion();
  SharedRegion(const SharedRegion&) = delete;
  SharedRegion& operator=(const SharedRegion&) = delete;

  uint64_t id() const { return id_; }
  size_t size() const { return numBytes_; }  // usable bytes of each part
  int localSize() const { return localSize_; }
  int localRank() const { return localRank_; }
  // Whether the peers map this memory (false: a private allocation).
  bool peerMapped() const { return localSize_ > 1; }
  uint8_t* part(int local) const { return base_ + static_cast<size_t>(local) * partBytes_; }
  uint8_t* mine() const { return part(localRank_); }
  // Whether [data, data + numBytes) lies inside this rank's part.
  bool contains(const void* data, size_t numBytes) const;

 private:
  SharedRegion(uint64_t id, size_t numBytes, int localSize, int localRank);
  void map(int fd);

  uint64_t id_;
  size_t numBytes_;
  size_t partBytes_;
  int localSize_;
  int localRank_;
  uint8_t* base_ = nullptr;
  size_t mappedBytes_ = 0;
};

// Where one call's data lies inside a shared region.
struct SharedPlace {
  std::shared_ptr<SharedRegion> region;  // null: ordinary memory
  size_t offset = 0;                     // bytes from the start of this rank's part
};

// The live regions of one communicator, for lookups by address. Holds them weakly: a
// region the user released drops out by itself.
class SharedRegistry {
 public:
  void add(const std::shared_ptr<SharedRegion>& region);
  // The region whose part holds [data, data + numBytes), if any.
  SharedPlace find(const void* data, size_t numBytes);

 private:
  std::mutex mu_;
  std::vector<std::weak_ptr<SharedRegion>> regions_;
};

}  // namespace strata::collectives
