// Symmetric shared buffers: one allocation per call of Communicator::allocateShared, in
// which every local rank of the group owns a part of the same size and maps every peer's
// part, so collectives on data inside it can read the peers' copies directly.
//
// An allocation is a shared region (transport/shm/region.h: its own POSIX shm segment, one
// pre-faulted part per local rank), made among the group's ShmDomain; its id is the
// allocation's sequence number. Without local peers (one rank per host, or
// STRATA_TRANSPORT=tcp) an allocation is private anonymous memory with the same interface.
//
// Lifetime: a region lives while someone holds it (the user's handle, or a collective
// running on it).
//
// Threading: regions are immutable after creation; SharedRegistry is safe to use from any
// thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "transport/shm/region.h"

namespace strata::collectives {

class ShmDomain;

// The handle of one allocation (strata::SharedBuffer holds it).
class SharedRegion final : public transport::shm::Region {
 public:
  // Private memory (no local peers).
  static std::shared_ptr<SharedRegion> createPrivate(uint64_t id, size_t numBytes) {
    return make<SharedRegion>(nullptr, id, numBytes);
  }
  // Collective over the domain's local ranks, which must pass the same id and size.
  static std::shared_ptr<SharedRegion> createShared(ShmDomain& domain, uint64_t id, size_t numBytes);

 private:
  friend class transport::shm::Region;  // Region::make constructs it
  using Region::Region;
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
